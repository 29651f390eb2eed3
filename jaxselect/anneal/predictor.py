"""FSA's predictor for :func:`jaxselect.predict` (registered when :mod:`jaxselect.anneal` is imported).

Dense X: :func:`~jaxselect.anneal.fsa.fsa_predict`. Sparse X (already the canonical scipy CSR of
:func:`jaxselect.predict`): only the k support columns are read — one sparse product on the host
for linear learners, the (m, k) support columns densified for piecewise-linear ones.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxselect._predict import check_width, host_predictions, no_budget, no_link, predict
from jaxselect._validation import host_array
from jaxselect.anneal.fsa import FSAResult, fsa_predict
from jaxselect.design import is_sparse

__all__: list[str] = []


@predict.register(FSAResult)
def _predict_fsa(result: FSAResult, X, budget, link):
    no_budget(result, budget, "an FSA result is one model of k features")
    no_link(result, link, "FSA scores: apply jax.nn.sigmoid yourself for loss='logistic'")
    if not is_sparse(X):
        return fsa_predict(result, X)
    support = host_array(result.support)
    coef = host_array(result.coef)
    width = result.n_features
    if width is None or np.ndim(width):
        raise ValueError("predict on sparse X needs an FSA result with n_features (from jaxselect.fsa)")
    csr = X.astype(coef.dtype, copy=False)
    check_width(csr, int(width))
    cols = csr[:, support]
    if result.x_min is None:
        pred = np.asarray(cols @ coef) + host_array(result.intercept)
        return host_predictions(pred.astype(coef.dtype, copy=False), csr)
    # piecewise-linear learners: the (m, k) support columns, dense, through the same encoding
    k = int(support.shape[0])
    local = result._replace(support=jnp.arange(k, dtype=jnp.int32), n_features=k)
    return fsa_predict(local, cols.toarray())
