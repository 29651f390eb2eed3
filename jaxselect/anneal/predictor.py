"""FSA's predictor for :func:`jaxselect.predict` (registered when :mod:`jaxselect.anneal` is imported).

X arrives validated by :func:`jaxselect.predict` (a float ``jax.Array`` in the model's dtype, or
the canonical scipy CSR) and goes straight to :func:`~jaxselect.anneal.fsa.fsa_scores`: no second
validation, ONE compiled program for dense X (the support columns and the scores), the finiteness
of the predictions read on the host. Sparse X: only the k support columns are read — one sparse
product on the host for linear learners (no program), the (m, k) support columns densified for
piecewise-linear ones.
"""

from __future__ import annotations

import numpy as np

from jaxselect._predict import no_budget, no_link, predict, rows_on_axis
from jaxselect.anneal.fsa import FSAResult, fsa_scores
from jaxselect.design import is_sparse

__all__: list[str] = []


rows_on_axis(FSAResult, lambda budget: 0)  # (m,) or (m, C) scores


@predict.register(FSAResult)
def _predict_fsa(result: FSAResult, X, budget, link):
    no_budget(result, budget, "an FSA result is one model of k features")
    no_link(result, link, "FSA scores: apply jax.nn.sigmoid yourself for loss='logistic'")
    if is_sparse(X) and (result.n_features is None or np.ndim(result.n_features)):
        raise ValueError("predict on sparse X needs an FSA result with n_features (from jaxselect.fsa)")
    return fsa_scores(result, X)
