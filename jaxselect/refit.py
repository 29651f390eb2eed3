"""Differentiable refits at a fixed support (ridge, greedy-RLS, GLM), with implicit differentiation.

Selection is piecewise constant in the data (an argmax), so what a researcher differentiates is the
*fit at a fixed support*: given a support mask S,

    w(X, Y, λ) = argmin_w (1/2n)‖Ys − Xs_S w‖² + (λ/2)‖w‖²,   i.e.  (Xs_Sᵀ Xs_S/n + λI) w = Xs_Sᵀ Ys/n,

on standardised columns (Xs) and centred targets, mapped back to raw coefficients and an
intercept. The linear system is solved by Cholesky inside ``jax.lax.custom_linear_solve``, so
reverse-mode gradients with respect to X, Y and λ come from one more solve with the same matrix
(the implicit function theorem) instead of differentiating through the factorisation.

Sparse X (``scipy.sparse`` any format, or BCOO/BCSR): a refit needs only the columns of its
support, so the s selected columns are densified, (n, s), and nothing else: the column summary
(means, scales, the constant-column rule) comes from the sparse entries of the whole X
(:func:`~jaxselect.design.as_data`), the fit is the dense one on those s columns, and the
coefficients are scattered back to (D,). The support (or ``selected``) must then be concrete, and
the fit is differentiable in Y and the hyper-parameters, not in the sparse X.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._validation import (
    as_hyper,
    as_labels,
    check_choice,
    check_float,
    check_int,
    host_array,
    host_value,
    is_traced,
    scale_error,
)
from jaxselect._repr import short_repr
from jaxselect._static import canonical
from jaxselect.losses import GLMLoss, glm_loss
from jaxselect.newton import NewtonInfo, default_tol, glm_newton, glm_risk, gradient_scale
from jaxselect.design import as_data, is_sparse
from jaxselect.programs import jit
from jaxselect.sharding import any_mesh
from jaxselect.status import NONFINITE, NOT_CONVERGED

__all__ = ["ridge_refit", "rls_refit", "glm_refit", "GLMRefitResult"]


class GLMRefitResult(NamedTuple):
    """Result of :func:`glm_refit`: the raw-space model and the diagnostics of its solve.

    Attributes:
      coef: (D,) for logistic, (D, C) for softmax — raw-space coefficients (0 off the support).
      intercept: () for logistic, (C,) for softmax.
      status: () int32, 0 when the solve met its tolerance, else flags of
        :data:`jaxselect.STATUS_MESSAGES` (NOT_CONVERGED, NONFINITE); :func:`jaxselect.raise_for_status`.
      info: the solve's :class:`jaxselect.newton.NewtonInfo` (iterations, final gradient norm, risk, status).

    ``fit.coef`` / ``fit.intercept`` (or ``fit[0]`` / ``fit[1]``) are what ``glm_refit`` returned as
    a pair before 0.4.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X[:, 0] > 0
    >>> fit = js.glm_refit(X, y, l2=1e-2)          # a GLMRefitResult
    >>> fit.coef.shape, int(fit.status), int(fit.info.n_iter) > 0
    ((3,), 0, True)
    """

    coef: jax.Array
    intercept: jax.Array
    status: jax.Array
    info: NewtonInfo

    __repr__ = short_repr


@any_mesh
def ridge_refit(X, Y, support=None, *, l2=1e-5, sample_weight=None):
    """Ridge fit with intercept on the columns in ``support``; differentiable in X, Y and l2.

    Args:
      X: (n, D) raw features; or sparse (see the module docstring: only the support's columns are
        densified).
      Y: (n,) or (n, T) targets.
      support: (D,) bool mask of the columns to use (default all). May be a traced array (e.g.
        ``jnp.any(path.step_coef(k) != 0, axis=-1)``, which also works for the slot paths of
        ``gram=False``), so one compiled function serves every support.
      l2: ridge constant λ > 0 on standardised coefficients — the library's one ``l2``: the mean
        squared loss ``(1/2n)‖Y − Xs w‖² + (λ/2)‖w‖²`` (sklearn ``Ridge(alpha)`` on standardised
        columns is λ = alpha/n). A Python float or a traced scalar — differentiate with respect to
        it to tune it.
      sample_weight: None or (n,) row weights ``w ≥ 0``: the weighted mean loss
        ``(1/2Σw) Σ_i w_i ‖y_i − xs_i w − b‖² + (λ/2)‖w‖²`` with columns standardised by weighted
        means and standard deviations (integer weights = repeated rows; weight-0 rows are absent,
        e.g. the padding of :func:`jaxselect.shard_rows`). sklearn
        ``Ridge(alpha).fit(Xs, Y, sample_weight=w)`` on those columns is ``λ = alpha/Σw``.

    Constant columns (max == min on the rows with positive weight) are inert: coefficient 0 even
    inside the support.

    Returns:
      ``(coef, intercept)``: (D,) and () for 1-D Y, or (D, T) and (T,); zero outside the support.

    Raises:
      ValueError: a support that is not a (D,) boolean mask, ``l2`` ≤ 0, NaN/Inf or mismatched
        rows in X and Y.

    >>> import numpy as np, jax, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(50, 3)); y = X[:, 0] + 2.0
    >>> coef, b = js.ridge_refit(X, y, np.array([True, False, False]), l2=1e-8)
    >>> np.round(np.asarray(coef), 4).tolist(), round(float(b), 4)
    ([1.0, 0.0, 0.0], 2.0)
    """
    sparse = is_sparse(X)
    # the front door: one pass over X (sparse X: its entries, on the host)
    data = as_data(X, Y, sample_weight=sample_weight, scale="values", storage="host" if sparse else "device")
    Y, was_1d, w = data.Y, data.y_1d, data.weights
    support = _check_support(support, data.n_features)
    if sparse:
        X, summary, idx, support = _support_columns(data, support, "ridge_refit")
    else:
        X, summary, idx = data.X, data.summary, None
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0, strict_low=True)
    _check_target_scale(Y)
    coef, intercept = _ridge_program(X, Y, support, l2, w, summary, idx, d=data.n_features, y_1d=was_1d)
    _check_finite_fit(coef, intercept, "ridge_refit")
    return coef, intercept


@partial(jit, static_argnames=("d", "y_1d"))
def _ridge_program(X, Y, support, l2, w, summary, idx, *, d: int, y_1d: bool):
    """The one program of :func:`ridge_refit`: the fit, scattered back to (D,) (sparse X) and
    without the target axis for a 1-D Y."""
    coef, intercept = _ridge_refit(X, Y, support, l2, w, summary)
    return _output(_scatter_columns(coef, idx, d), intercept, y_1d)


def _output(coef, intercept, y_1d: bool):
    """``(coef, intercept)``, the target axis dropped for a 1-D Y (inside the program)."""
    return (coef[:, 0], intercept[0]) if y_1d else (coef, intercept)


def _check_target_scale(Y) -> None:
    """:func:`~jaxselect._validation.check_scale` of the (n, T) targets, on the host (no compiled
    program between the front door and the fit; a no-op on traced Y)."""
    values = host_value(lambda: Y)
    if values is None:
        return
    message = scale_error(values.min(axis=0), values.max(axis=0), values.shape[0], "Y", Y.dtype)
    if message is not None:
        raise ValueError(message)


def _support_columns(data, support, who: str):
    """Sparse X (``data`` from ``as_data(..., storage="host")``): ``(Xs, summary, idx, mask)`` — the
    dense (n, s) raw columns ``idx`` of a concrete ``support``, their column summary and an all-True
    (s,) mask (an empty support: column 0 with a False mask, so that shapes stay non-empty)."""
    values = host_value(lambda: support)
    if values is None:
        raise ValueError(
            f"{who}: with sparse X the support must be concrete (the selected columns are gathered on the host); "
            "pass a numpy mask, or X.toarray() to refit inside jax.jit"
        )
    idx = np.flatnonzero(np.asarray(values, bool))
    mask = np.ones(idx.shape, bool)
    if idx.size == 0:
        idx, mask = np.zeros(1, np.int64), np.zeros(1, bool)
    summary = data.summary
    summary = summary._replace(mean=summary.mean[idx], scale=summary.scale[idx], live=summary.live[idx])
    return data.design.X[:, idx].toarray(), summary, idx, mask


def _scatter_columns(coef, idx, d: int):
    """(D, T) coefficients from those of the columns ``idx`` (s, T) (``idx`` None: as they are);
    traced (inside the refit's program)."""
    if idx is None:
        return coef
    return jnp.zeros((d,) + coef.shape[1:], coef.dtype).at[idx].add(coef)


def _check_finite_fit(coef, intercept, what: str) -> None:
    """ValueError when a concrete fit overflowed (scales of X and Y too far apart for the dtype)."""
    ok = host_value(lambda: np.isfinite(np.asarray(coef)).all() & np.isfinite(np.asarray(intercept)).all())  # on the host
    if ok is not None and not bool(ok):
        raise ValueError(
            f"{what}: the fitted coefficients overflow {coef.dtype} (the scales of X's columns and of Y are "
            "too far apart for it); rescale X or Y by a constant, or use float64"
        )


def _check_support(support, d: int):
    """A (D,) bool support mask (default all columns): a numpy array, or the ``jax.Array`` given
    (may be traced)."""
    if support is None:
        return np.ones((d,), bool)
    if not isinstance(support, jax.Array):
        support = np.asarray(support)
        if support.dtype != bool:
            raise TypeError(f"support must be a boolean mask of shape ({d},); got dtype {support.dtype}")
    if support.shape != (d,):
        raise ValueError(f"support must be a (D,) = ({d},) boolean mask; got shape {support.shape}")
    if support.dtype != bool:
        raise TypeError(f"support must be boolean; got dtype {support.dtype}")
    return support


def _standardize_support(X, support, summary):
    """Column means, the standardised design restricted to ``support`` (zero columns elsewhere),
    the per-column factors 1/sd (0 off the support or for constant columns) and the used mask.

    The library's one standardisation rule (:func:`jaxselect.design.column_summary`): a column is
    constant (inert) iff its maximum equals its minimum (weighted: over the rows with positive
    weight)."""
    x_mean, x_scale, live, _ = summary
    use = support & live
    w_col = jnp.where(use, 1.0 / x_scale, jnp.zeros_like(x_scale))
    return x_mean, (X - x_mean[None, :]) * w_col[None, :], w_col, use


def _ridge_refit(X, Y, support, l2, w, summary):
    n = X.shape[0]
    nf = jnp.asarray(n, X.dtype) if w is None else jnp.sum(w)
    x_mean, Xs, w_col, use = _standardize_support(X, support, summary)
    y_mean = jnp.mean(Y, axis=0) if w is None else (w @ Y) / nf
    Yc = Y - y_mean[None, :]
    if w is not None:  # weighted moments: Σ w_i xs_i xs_iᵀ and Σ w_i xs_i y_iᵀ
        Yc = Yc * w[:, None]
    G = jax.lax.dot_general(Xs if w is None else Xs * w[:, None], Xs, (((0,), (0,)), ((), ()))) / nf
    A = G + jnp.diag(jnp.where(use, l2, jnp.ones_like(x_mean)))  # identity on unused columns
    rhs = (Yc.T @ Xs).T / nf  # (D, T), zero on unused columns

    w_std = _spd_solve(A, rhs)
    coef = w_std * w_col[:, None]
    intercept = y_mean - x_mean @ coef
    return coef, intercept


def _spd_solve(A, rhs):
    """A⁻¹ rhs by Cholesky, differentiated implicitly (one more solve) via custom_linear_solve."""

    def matvec(v):
        return A @ v

    def solve(_, b):
        L = jnp.linalg.cholesky(A)
        return jax.scipy.linalg.cho_solve((L, True), b)

    return jax.lax.custom_linear_solve(matvec, rhs, solve, symmetric=True)


@any_mesh
def rls_refit(X, Y, selected, *, l2=1e-3, bias=0.0, sample_weight=None):
    """The greedy-RLS model on fixed features, differentiable in X, Y, l2 and bias.

    Regularised least squares exactly as :func:`jaxselect.greedy_rls` fits it, on the features as
    given (no centring or scaling): with ``X_S`` the selected columns plus, when ``bias > 0``, a
    constant column √bias, ``w = (X_SᵀX_S + n·l2·I)⁻¹ X_SᵀY`` — the minimiser of
    ``(1/2n)‖Y − X_S w‖² + (l2/2)‖w‖²`` (RLScore's ``regparam = n·l2``) — and intercept
    ``√bias · w_bias``.

    Args:
      X: (n, d) features, ``n >= 2`` (or sparse: only the selected columns are densified); Y: (n,)
        or (n, T) targets.
      selected: (k,) integer feature indices (e.g. ``greedy_rls(...).selected``); ``-1`` entries
        (a greedy step that selected nothing) are ignored. May be traced (dense X only).
      l2: > 0, the penalty on the mean loss (Python float or traced scalar; default 1e-3 as in
        :func:`jaxselect.greedy_rls`); bias: ≥ 0 (may be traced).
      sample_weight: None or (n,) row weights ``w ≥ 0``:
        ``w = (X_Sᵀ diag(w) X_S + Σw·l2·I)⁻¹ X_Sᵀ diag(w) Y``, the model of
        ``greedy_rls(..., sample_weight=w)`` (integer weights = repeated rows).

    Returns:
      ``(coef (d,) or (d, T), intercept () or (T,))``; zero coefficients off ``selected``.

    Raises:
      ValueError: ``selected`` entries outside [0, D) (other than −1), ``l2`` ≤ 0, ``bias`` < 0,
        NaN/Inf or mismatched rows in X and Y.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(30, 4)); y = X[:, 2]
    >>> coef, b = js.rls_refit(X, y, np.array([2]), l2=1e-6)
    >>> np.round(np.asarray(coef), 3).tolist(), float(b)
    ([0.0, 0.0, 1.0, 0.0], 0.0)
    """
    # the front door; the features are used as given: XᵀX is formed unscaled (scale="squares")
    sparse = is_sparse(X)
    data = as_data(X, Y, sample_weight=sample_weight, scale="squares", storage="host" if sparse else "device")
    Y, was_1d, w = data.Y, data.y_1d, data.weights
    d = data.n_features
    if not isinstance(selected, jax.Array):
        selected = np.asarray(selected)
        if selected.dtype.kind not in "iu":
            raise TypeError(f"selected must be a 1-D integer array of feature indices; got dtype {selected.dtype}")
    if selected.ndim != 1 or not jnp.issubdtype(selected.dtype, jnp.integer):
        raise ValueError("selected must be a 1-D integer array of feature indices")
    values = host_value(lambda: selected)
    if values is not None and values.size and (values.min() < -1 or values.max() >= d):
        raise ValueError(f"selected must hold feature indices in [0, {d}) (or -1 for none); got {values.tolist()}")
    if sparse:
        if values is None:
            raise ValueError(
                "rls_refit: with sparse X, selected must be concrete (the selected columns are gathered on the "
                "host); pass a numpy array, or X.toarray() to refit inside jax.jit"
            )
        # the k selected columns, dense; each −1 entry stays −1 (a zero column)
        X = data.design.X[:, np.maximum(values, 0)].toarray()
        local = np.where(values >= 0, np.arange(values.size), -1).astype(np.int32)
        index = np.where(values >= 0, values, d).astype(np.int32)
    else:
        X, local, index = data.X, selected, None
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0, strict_low=True)
    bias = as_hyper(bias, "bias", X.dtype, low=0.0)
    _check_target_scale(Y)
    coef, intercept = _rls_program(X, Y, local, l2, bias, w, index, d=d, y_1d=was_1d)
    _check_finite_fit(coef, intercept, "rls_refit")
    return coef, intercept


@partial(jit, static_argnames=("d", "y_1d"))
def _rls_program(X, Y, selected, l2, bias, w, index, *, d: int, y_1d: bool):
    """The one program of :func:`rls_refit`; sparse X: ``X`` holds the selected columns only and
    ``index`` (k,) their raw features (``d`` where none), scattered back to (D,)."""
    coef, intercept = _rls_refit(X, Y, selected.astype(jnp.int32), l2, bias, w)
    if index is not None:
        coef = jnp.zeros((d, coef.shape[1]), coef.dtype).at[index].set(coef[: index.shape[0]], mode="drop")
    return _output(coef, intercept, y_1d)


def _rls_refit(X, Y, selected, l2, bias, w=None):
    n, d = X.shape
    if w is not None:  # ridge on the rows scaled by √w, λ = Σw·l2
        root_w = jnp.sqrt(w)
        X, Y, n = X * root_w[:, None], Y * root_w[:, None], jnp.sum(w)
    root = jnp.sqrt(bias)
    used = (selected >= 0).astype(X.dtype)
    cols = jnp.take(X, jnp.maximum(selected, 0), axis=1) * used[None, :]  # −1: a zero column, w = 0
    ones = jnp.ones((X.shape[0], 1), X.dtype) if w is None else root_w[:, None]
    XS = jnp.concatenate([cols, ones * root], axis=1)
    k1 = XS.shape[1]
    # An unused column (bias = 0, or index −1) is all zeros; n·l2 keeps the system definite.
    A = jax.lax.dot_general(XS, XS, (((0,), (0,)), ((), ()))) + (n * l2) * jnp.eye(k1, dtype=X.dtype)
    w = _spd_solve(A, (Y.T @ XS).T)
    index = jnp.where(selected >= 0, selected, d)
    coef = jnp.zeros((d, Y.shape[1]), X.dtype).at[index].set(w[:-1], mode="drop")
    return coef, root * w[-1]


@any_mesh
def glm_refit(
    X,
    y,
    support=None,
    *,
    loss: str = "logistic",
    l2=1e-3,
    n_classes=None,
    max_iter: int = 50,
    tol=None,
    return_info=None,
    sample_weight=None,
    optimizer="newton",
    solver=None,
) -> GLMRefitResult:
    """Logistic / softmax fit with intercept at a fixed support; differentiable in X, y and l2.

    Minimises ``r(W, b) = (1/n) Σ_i ℓ(Xs_i W + b, y_i) + (λ/2)‖W‖²`` over the standardised columns in
    ``support`` (W = 0 elsewhere and on constant columns; intercept unpenalised) — the library's one
    ``l2`` (sklearn ``LogisticRegression(C)`` on the standardised columns is λ = 1/(C·n)). The
    forward solve is the library's damped Newton solver (:func:`jaxselect.newton.glm_newton`, the
    one ``glm_omp`` uses) inside ``jax.lax.custom_root``: gradients come from the implicit function
    theorem at the optimum (``∂W* = −H⁻¹ ∂∇r``, one linear solve with the Hessian), not by
    unrolling the iterations. For softmax the intercepts are centred (Σ_c b_c = 0), which fixes the
    one flat direction.

    Args:
      X: (n, D) raw features, n ≥ 2; or sparse (see the module docstring: only the support's
        columns are densified; the support must then be concrete).
      y: ``loss="logistic"``: (n,) or (n, 1) labels in {0, 1}, {−1, +1} or bool, or probabilities
        in [0, 1] (soft labels; differentiable); traced labels are used as ``max(y, 0)``.
        ``loss="softmax"``: classes 0..C−1 (bool = 0/1; traced labels need ``n_classes``).
      support: (D,) bool mask (default all columns); may be traced.
      loss: "logistic" or "softmax".
      l2: λ > 0 (Python float or traced scalar).
      n_classes: C for softmax (default max(y) + 1).
      max_iter: solver iterations; stopping there before ``tol`` sets NOT_CONVERGED in ``status``.
      tol: tolerance ``max|∇r| ≤ tol`` (labels give σ = 1, see :mod:`jaxselect.newton`);
        default 1e-7 in float64, 1e-4 in float32.
      return_info: deprecated (the result always carries ``status`` and ``info``); ``True`` still
        returns ``(coef, intercept, info)`` and ``False`` ``(coef, intercept)``, with a
        DeprecationWarning.
      sample_weight: None or (n,) row weights ``w ≥ 0``: the mean loss becomes
        ``Σ_i w_i ℓ_i / Σw`` and the columns are standardised with weighted moments (integer
        weights = repeated rows; weight-0 rows are absent). sklearn
        ``LogisticRegression(C).fit(Xs, y, sample_weight=w)`` is ``λ = 1/(C·Σw)``.
      optimizer: ``"newton"`` (default: the library's damped Newton solver, exact Cholesky steps)
        or an ``optax.GradientTransformation`` (e.g. ``optax.lbfgs()``) run for at most ``max_iter``
        updates from zero until ``max|∇r| ≤ tol·σ``. Static: an equal transformation built afresh
        (e.g. ``optax.lbfgs()`` on every call) reuses the compiled program. Gradients through the fit use the implicit function theorem either way.
      solver: deprecated spelling of ``optimizer`` (a DeprecationWarning; the name ``solver`` is the
        library's :class:`~jaxselect.Solver` and, in :class:`~jaxselect.NewtonOptions`, the linear
        solve of a Newton step).

    Returns:
      A :class:`GLMRefitResult` ``(coef, intercept, status, info)``: coef (D,), intercept () for
      logistic; (D, C), (C,) for softmax — raw-space scores. The dense Newton system has (D + 1)·T
      unknowns, so this is meant for the small supports a selection produces.

    Raises:
      ValueError: an unknown loss, labels that do not fit it, a support that is not a (D,) boolean
        mask, ``l2`` ≤ 0, NaN/Inf in X.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(200, 3)); y = X[:, 0] + X[:, 1] > 0
    >>> fit = js.glm_refit(X, y, np.array([True, True, False]), l2=1e-2)
    >>> bool(fit.coef[0] > 1 and fit.coef[2] == 0), int(fit.status), fit.info.n_iter.dtype.name
    (True, 0, 'int32')
    """
    check_choice(loss, "loss", ("logistic", "softmax"))
    sparse = is_sparse(X)
    data = as_data(  # one pass over X (sparse X: its entries, on the host)
        X, None, sample_weight=sample_weight, targets=None, scale="values", storage="host" if sparse else "device"
    )
    w = data.weights
    n, d = data.n_samples, data.n_features
    support = _check_support(support, d)
    if sparse:
        X, summary, idx, support = _support_columns(data, support, "glm_refit")
    else:
        X, summary, idx = data.X, data.summary, None
    if loss == "logistic":
        Yt = _refit_binary_labels(y, n, X.dtype)[:, None]
    else:
        if n_classes is not None:
            n_classes = check_int(n_classes, "n_classes", low=2)
        labels, C = as_labels(y, n, "y", n_classes=n_classes)
        if C < 2:
            raise ValueError("softmax needs at least 2 classes; y has only class 0")
        Yt = (
            jax.nn.one_hot(labels, C, dtype=X.dtype)
            if is_traced(labels)
            else np.eye(C, dtype=X.dtype)[host_array(labels)]  # on the host: nothing compiled
        )
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0, strict_low=True)
    max_iter = check_int(max_iter, "max_iter", low=1)
    tol = check_float(default_tol(X.dtype) if tol is None else tol, "tol", low=0.0, strict_low=True)
    if solver is not None:
        warnings.warn(
            "glm_refit(solver=...) is deprecated: pass optimizer=... (the same values: 'newton' or an "
            "optax.GradientTransformation); the keyword goes in the next release",
            DeprecationWarning,
            stacklevel=4,  # glm_refit, any_mesh's call and wrapper, then the caller's line
        )
        optimizer = solver
    solver = _check_solver(optimizer)
    coef, intercept, info = _glm_program(
        X, Yt, support, l2, np.asarray(tol, X.dtype), np.asarray(max_iter, np.int32), w, summary, idx,
        loss=loss, solver=solver, d=d,
    )
    if return_info is not None:
        warnings.warn(
            "glm_refit(return_info=...) is deprecated: glm_refit returns a GLMRefitResult with coef, intercept, "
            "status and info (use fit = glm_refit(...); fit.coef, fit.intercept, fit.info)",
            DeprecationWarning,
            stacklevel=4,  # glm_refit, any_mesh's call and wrapper, then the caller's line
        )
        return (coef, intercept, info) if return_info else (coef, intercept)
    return GLMRefitResult(coef, intercept, info.status, info)


def _check_solver(solver):
    """"newton" or an optax GradientTransformation (anything with ``init`` and ``update``)."""
    if isinstance(solver, str):
        if solver != "newton":
            raise ValueError(f"optimizer must be 'newton' or an optax.GradientTransformation; got {solver!r}")
        return solver
    if not (callable(getattr(solver, "init", None)) and callable(getattr(solver, "update", None))):
        raise TypeError(f"optimizer must be 'newton' or an optax.GradientTransformation; got {solver!r}")
    return canonical(solver)  # an equal transformation built afresh reuses the compiled program


def _refit_binary_labels(y, n: int, dtype):
    """Logistic labels of glm_refit: {0, 1}, {−1, +1}, bool or probabilities in [0, 1] → (n,) in [0, 1]."""
    if not isinstance(y, jax.Array):
        y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) or ({n}, 1) (one label per row of X); got {tuple(y.shape)}")
    if y.dtype == object or np.dtype(y.dtype).kind not in "biuf":
        raise TypeError(f"y must hold binary labels or probabilities; got dtype {y.dtype}")
    values = host_value(lambda: y)
    if values is not None:
        v = np.unique(values.astype(np.float64))
        if not np.all(np.isfinite(v)):
            raise ValueError("y contains NaN or Inf")
        signed = set(v.tolist()) <= {-1.0, 1.0}
        if not (signed or (v.min() >= 0 and v.max() <= 1)):
            raise ValueError(
                "y must hold logistic labels {0, 1}, {-1, +1}, bool, or probabilities in [0, 1]; "
                f"got values {v[:6].tolist()}"
            )
        if v.size < 2:
            raise ValueError(f"y has a single value {v.tolist()}: the intercept would diverge")
    if values is not None:  # on the host: nothing compiled
        return np.maximum(values.astype(dtype), np.zeros((), dtype))  # −1 → 0
    return jnp.maximum(jnp.asarray(y).astype(dtype), jnp.zeros((), dtype))


@partial(jit, static_argnames=("loss", "solver", "d"))
def _glm_program(X, Yt, support, l2, tol, max_iter, w, summary, idx, *, loss: str, solver, d: int):
    """The one program of :func:`glm_refit`: the fit, scattered back to (D,) (sparse X), logistic
    outputs without the class axis."""
    coef, intercept, info = _glm_refit(X, Yt, support, l2, tol, max_iter, w, summary, loss=loss, solver=solver)
    return _output(_scatter_columns(coef, idx, d), intercept, loss == "logistic") + (info,)


def _glm_refit(X, Yt, support, l2, tol, max_iter, w, summary, *, loss: str, solver="newton"):
    d = X.shape[1]
    T = Yt.shape[1]
    dt = X.dtype
    softmax = loss == "softmax"
    parts = glm_loss(loss)
    if w is not None:  # per-example terms times n·w/Σw: the mean loss becomes the weighted mean
        rel = w * (jnp.asarray(X.shape[0], dt) / jnp.sum(w))
        parts = GLMLoss(
            lambda S, Y, f=parts.value: rel * f(S, Y),
            lambda S, Y, f=parts.grad: rel[:, None] * f(S, Y),
            lambda S, Y, f=parts.hess: rel[:, None, None] * f(S, Y),
        )
    x_mean, Xs, w_col, use = _standardize_support(X, support, summary)
    free = jnp.concatenate([jnp.repeat(use, T), jnp.ones((T,), bool)])

    def unpack(theta):
        return theta[: d * T].reshape(d, T), theta[d * T :]

    def risk(theta):
        W, b = unpack(theta)
        r = glm_risk(Xs, Yt, W, b, use, l2, parts)
        return r + 0.5 * jnp.sum(b) ** 2 if softmax else r  # softmax: pins the flat direction b → b + t·1

    def residual(theta):  # ∇r on the free coordinates, θ itself (→ 0) elsewhere
        return jnp.where(free, jax.grad(risk)(theta), theta)

    def solve(_, theta0):
        if solver == "newton":
            W0, b0 = unpack(theta0)
            res = glm_newton(
                Xs, Yt, W0, b0, use, l2, parts, tol=tol, max_iter=max_iter, solver="cholesky", softmax=softmax
            )
            theta, info = jnp.concatenate([res.V.reshape(-1), res.b]), res.info
        else:
            theta, info = _optax_solve(risk, free, theta0, solver, tol * gradient_scale(Yt, parts), max_iter)
        # custom_root's forward-mode rule gives integer aux outputs integer tangents, which JAX
        # rejects: carry the counters as floats (exact for these small integers) and cast back.
        return theta, info._replace(n_iter=info.n_iter.astype(dt), status=info.status.astype(dt))

    def tangent_solve(g, v):
        return jnp.linalg.solve(jax.jacfwd(g)(v), v)

    theta, info = jax.lax.custom_root(residual, jnp.zeros(((d + 1) * T,), dt), solve, tangent_solve, has_aux=True)
    info = jax.tree.map(jax.lax.stop_gradient, info)
    info = info._replace(n_iter=info.n_iter.astype(jnp.int32), status=info.status.astype(jnp.int32))
    W, b = unpack(theta)
    coef = W * w_col[:, None]
    return coef, b - x_mean @ coef, info


def _optax_solve(risk, free, theta0, solver, gtol, max_iter):
    """Minimise ``risk`` over the ``free`` coordinates with an optax transformation from ``theta0``.

    Runs ``update`` until ``max|∇r| ≤ gtol`` or ``max_iter`` updates (a ``lax.while_loop``); the
    coordinates that may not move keep their zero gradient. Transformations that take extra
    arguments (``optax.lbfgs``'s line search) get ``value``, ``grad`` and ``value_fn``.
    Returns ``(theta, NewtonInfo)``.
    """
    value_and_grad = jax.value_and_grad(risk)

    def masked(theta):
        f, g = value_and_grad(theta)
        return f, jnp.where(free, g, jnp.zeros_like(g))

    extra = hasattr(solver, "update") and "value_fn" in _update_parameters(solver)

    def cond(c):
        _, _, _, gmax, it, _ = c
        return (it < max_iter) & (gmax > gtol) & jnp.isfinite(gmax)

    def body(c):
        theta, opt_state, g, _, it, f = c
        # third-party code: traced under standard promotion (optax mixes int32/int64 counters in x64)
        with jax.numpy_dtype_promotion("standard"):
            if extra:
                updates, opt_state = solver.update(g, opt_state, theta, value=f, grad=g, value_fn=risk)
            else:
                updates, opt_state = solver.update(g, opt_state, theta)
        theta = theta + jnp.where(free, updates, jnp.zeros_like(updates))
        f, g = masked(theta)
        return theta, opt_state, g, jnp.max(jnp.abs(g)), it + 1, f

    f0, g0 = masked(theta0)
    with jax.numpy_dtype_promotion("standard"):
        opt_state0 = solver.init(theta0)
    init = (theta0, opt_state0, g0, jnp.max(jnp.abs(g0)), jnp.zeros((), jnp.int32), f0)
    theta, _, _, gmax, it, f = jax.lax.while_loop(cond, body, init)
    finite = jnp.isfinite(f) & jnp.isfinite(gmax)
    status = jnp.where(finite, jnp.where(gmax <= gtol, 0, NOT_CONVERGED), NONFINITE).astype(jnp.int32)
    return theta, NewtonInfo(it, gmax, f, status)


def _update_parameters(solver):
    import inspect  # noqa: PLC0415 - only for optax transformations

    try:
        params = inspect.signature(solver.update).parameters
    except (TypeError, ValueError):
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return ("value_fn",)
    return tuple(params)
