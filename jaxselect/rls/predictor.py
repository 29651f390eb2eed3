"""Greedy RLS's predictor for :func:`jaxselect.predict` (registered when :mod:`jaxselect.rls` is
imported): the anytime predictor of the result's prefixes (:func:`~jaxselect.rls_to_path`: each
feature a unit-cost group, so a budget B is the model with ⌊B⌋ features), dense or sparse X."""

from __future__ import annotations

from jaxselect._predict import predict, predict_path
from jaxselect.path import RLSResult, rls_to_path

__all__: list[str] = []


@predict.register(RLSResult)
def _predict_rls(result: RLSResult, X, budget, link):
    return predict_path(rls_to_path(result), X, budget, link)  # identity link: link=True changes nothing
