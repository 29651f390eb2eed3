"""Greedy RLS's predictor for :func:`jaxselect.predict` (registered when :mod:`jaxselect.rls` is
imported): the anytime predictor of the result's prefixes (:func:`~jaxselect.rls_to_path`: each
feature a unit-cost group, so a budget B is the model with ⌊B⌋ features), dense or sparse X. On
dense X the conversion and the predictions are one compiled program."""

from __future__ import annotations

from jaxselect._predict import (
    anytime_rows,
    check_budget,
    check_predictions,
    path_scores,
    predict,
    predict_path,
    rows_on_axis,
)
from jaxselect.design import is_sparse
from jaxselect.path import RLSResult, check_rls_result, rls_to_path
from jaxselect.programs import jit
from jaxselect.sharding import any_mesh

__all__: list[str] = []


rows_on_axis(RLSResult, anytime_rows)


@predict.register(RLSResult)
def _predict_rls(result: RLSResult, X, budget, link):
    # identity link: link=True changes nothing
    if is_sparse(X):
        return predict_path(rls_to_path(result), X, budget, link)
    return _dense(result, X, budget)


@any_mesh
def _dense(result: RLSResult, X, budget):
    check_rls_result(result)
    dtype = result.coef_path.dtype
    X = X.astype(dtype) if X.dtype != dtype else X
    d = result.coef.shape[0]
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but the path was trained on {d}")
    budget = None if budget is None else check_budget(budget, dtype)
    return check_predictions(_scores(result, X, budget), X, (result.coef, result.intercept, result.status))


@jit
def _scores(result: RLSResult, X, budget):
    return path_scores(rls_to_path(result), X, budget)
