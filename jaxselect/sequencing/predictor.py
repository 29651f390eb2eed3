"""The group lasso's predictor for :func:`jaxselect.predict` (registered when
:mod:`jaxselect.sequencing` is imported): the model at each λ, on dense X (one compiled product) or
sparse X (scipy's product on the host). Paths (:class:`~jaxselect.SelectionPath`) are predicted by
the shared anytime predictor, :func:`jaxselect._predict.predict_path`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxselect._predict import check_predictions, check_width, host_predictions, no_budget, predict, rows_on_axis
from jaxselect._validation import host_array
from jaxselect.design import is_sparse
from jaxselect.programs import jit
from jaxselect.sequencing.group_lasso import GroupLassoFit
from jaxselect.sharding import any_mesh

__all__: list[str] = []


rows_on_axis(GroupLassoFit, lambda budget: 1)  # (L, m[, T]): the model at each λ


@predict.register(GroupLassoFit)
def _predict_group_lasso(fit: GroupLassoFit, X, budget, link):
    no_budget(fit, budget, "a group-lasso fit has one model per λ; group_lasso_path gives a budgeted path")
    if fit.raw_coef.ndim != 3:
        raise ValueError(f"predict needs an unbatched GroupLassoFit (raw_coef (L, D, T)); got {fit.raw_coef.shape}")
    if is_sparse(X):
        coef = host_array(fit.raw_coef)
        L, d, T = coef.shape
        csr = X.astype(coef.dtype, copy=False)
        check_width(csr, d, "the fit was trained on")
        pred = (csr @ coef.transpose(1, 0, 2).reshape(d, L * T)).reshape(-1, L, T).transpose(1, 0, 2)
        pred = pred + host_array(fit.raw_intercept)[:, None, :]
        return host_predictions(pred[..., 0] if T == 1 else pred, csr)
    return _dense(fit, X)


@any_mesh
def _dense(fit: GroupLassoFit, X) -> jax.Array:
    X = X.astype(fit.raw_coef.dtype) if X.dtype != fit.raw_coef.dtype else X
    check_width(X, fit.raw_coef.shape[1], "the fit was trained on")
    return check_predictions(_scores(fit.raw_coef, fit.raw_intercept, X), X, (fit.raw_coef, fit.raw_intercept, fit.status))


@jit
def _scores(coef, intercept, X):
    """The model at each λ, (L, m[, T]) (T = 1 dropped), in one program."""
    pred = jnp.einsum("md,ldt->lmt", X, coef) + intercept[:, None, :]
    return pred[..., 0] if pred.shape[-1] == 1 else pred
