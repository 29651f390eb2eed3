"""Multi-target greedy regularised least-squares (greedy RLS) feature selection.

Forward selection of features shared by all ``T`` targets: starting from the empty set, each step
adds the feature whose addition gives the lowest leave-one-out (LOO) squared error summed over the
``n`` samples and ``T`` targets of a ridge model, until ``k`` features are chosen (Airola, Pahikkala
et al., "Large scale greedy feature selection for multi-target learning", ECML 2015 BigTargets
workshop slides, Algorithm 1; the linear-time version is their Algorithm 2, after Pahikkala, Airola
and Salakoski, ICMLA 2010, and Naula et al., Pattern Recognition Letters 40, 2014).

Maths (Algorithm 2). With ``S`` the selected set, ``X_S`` its columns and ``λ = l2``, the dual
quantities of ridge regression on ``X_S`` are

    G = (X_S X_Sᵀ + λ I)⁻¹   (n, n),   A = G Y   (n, T),   g = diag(G)   (n,),   C = G X   (n, d),

and the LOO residuals of the model on ``S`` are ``A ⊘ g`` (row-wise division). Starting from
``A = λ⁻¹Y``, ``g = λ⁻¹1``, ``C = λ⁻¹X`` (``S = ∅``), adding a column ``x_i`` is a rank-one
(Sherman–Morrison) update; for every candidate ``i`` at once

    u_i = C_i / (1 + x_iᵀ C_i),   Ã = A − u_i (x_iᵀ A),   g̃ = g − u_i ⊙ C_i,
    e_i = Σ_h Σ_j (Ã_jh / g̃_j)²,

so one step costs ``O(n·d·T)`` instead of a ridge refit per candidate. The winner ``b`` is applied
to the state (``A``, ``g`` and ``C ← C − u_b (x_bᵀ C)``). The model after any step is
``W = X_Sᵀ A`` (primal weights of the selected features).

``bias > 0`` follows RLScore's ``GreedyRLS``: a constant feature of value ``√bias`` is part of the
model from the start (regularised like every other feature, never counted in ``k``); its
contribution to predictions is the intercept ``b = bias · 1ᵀA``.

Implementation (performance design):

* ``C`` is stored transposed, ``(G X)ᵀ`` (d, n), so per-candidate sums over samples run along
  contiguous memory; ``x_iᵀC_i`` and ``x_iᵀA`` are carried as (d,) and (d, T) arrays and updated
  by the same rank-one formulas (``v = Cᵀx_b = XᵀG x_b`` since G is symmetric), so ``X`` is only
  read for the winner's column after the start.
* The ``C`` update of step t is deferred into step t+1 and fused with the scoring: each block of
  candidates (all of them unless ``C`` exceeds 1 GiB, or ``chunk_size`` at a time) is read,
  updated with its ``v`` slice, scored and written back in one fused pass — one pass over ``C``
  per step, which is the memory-traffic floor of the algorithm.
* ``T == 1``: scores are evaluated term by term. ``T > 1``: candidates are screened with the
  expansion ``Σ_h Ã_jh² = ‖A_j‖² − 2 C_ji z_i·A_j + C_ji² ‖z_i‖²`` (one small matrix product per
  block, no (n, d, T) temporaries), then the ``n_recheck`` best are re-scored term by term, so
  float32 cancellation in the expansion cannot decide the pick or the reported LOO error.
* A fixed-length ``lax.scan`` runs the ``k`` steps inside one ``jit``; the per-step outputs give
  the model after every prefix (anytime use) without re-running. Reductions over samples are sums
  and matrix-vector products, so a row-sharded ``X`` works unchanged.
* Numerical safety: ``g̃ > 0`` in exact arithmetic; a candidate with ``g̃ ≤ 0`` or a non-finite
  score is never picked, and a breakdown of the state sets ``status = 1`` (see
  ``RLS_STATUS_MESSAGES``). In float32 keep ``l2`` away from 0 relative to ``‖x_i‖²``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._validation import as_float_matrix, as_targets, check_float, check_int

__all__ = [
    "RLSResult",
    "greedy_rls",
    "rls_predict",
    "rls_predict_path",
    "rls_raise_for_status",
    "RLS_STATUS_MESSAGES",
]

#: Meaning of ``RLSResult.status``.
RLS_STATUS_MESSAGES = {
    0: "ok",
    1: (
        "numerical breakdown of the rank-one updates (a leave-one-out error or diag(G) became "
        "non-finite or diag(G) <= 0); increase l2, rescale X, or run in float64 "
        "(jax_enable_x64 with float64 input)"
    ),
}

# Default size of one (chunk, n) block of C. XLA fuses the pending update and the scoring of a
# block into one multi-threaded pass, so the whole of C at once is fastest: on the 2-core CPU
# (jax 0.10) whole-C steps were 1.5-1.6x faster than cache-sized (128 KiB) or 50 MB blocks at
# n·d = 2000·5000 and 4000·20000, at the same peak memory. Blocks only bound the temporaries of
# very large problems (C beyond 1 GiB).
_BLOCK_BYTES = 1 << 30
_MIN_CHUNK = 4


class RLSResult(NamedTuple):
    """Result of :func:`greedy_rls` (the model after every prefix, for anytime use).

    Shapes use ``k`` selected features, ``d`` features and ``T`` targets; for a 1-D ``y`` the
    trailing ``T`` axis is dropped.

    Attributes:
      selected: (k,) int32 feature indices in the order they were added.
      loo_error: (k,) leave-one-out mean squared error ``Σ_jh (Ã_jh/g̃_j)² / (n·T)`` of the model
        after each addition (RLScore's ``performances``).
      coef: (d, T) final weights in feature space (zero for features not selected).
      intercept: (T,) final intercept ``bias · 1ᵀA`` (zero when ``bias == 0``).
      coef_path: (k, k, T) ``coef_path[t, j]`` is the weight of feature ``selected[j]`` in the model
        with the first ``t + 1`` features (zero for ``j > t``).
      intercept_path: (k, T) intercept of the model after each addition.
      status: () int32, 0 if fine, else a key of ``RLS_STATUS_MESSAGES``.
    """

    selected: jax.Array
    loo_error: jax.Array
    coef: jax.Array
    intercept: jax.Array
    coef_path: jax.Array
    intercept_path: jax.Array
    status: jax.Array


class _RLSState(NamedTuple):
    """Scan carry: the dual quantities of the ridge model on the selected set.

    ``C`` is stored transposed, ``CT = (G X)ᵀ`` (d_pad, n), so that every per-candidate reduction
    over samples runs along the contiguous axis (≈30× faster on CPU than reducing down columns);
    rows ``d..d_pad`` are zero padding up to a multiple of the chunk size. ``xc`` and ``xa`` are
    kept up to date by the same rank-one updates, so ``X`` itself is only read for the winner's
    column. ``A`` and ``g`` include the last added column; ``CT``, ``xc`` and ``xa`` lag by it
    (the ``pend_*`` fields), and the next step applies it while it scores, chunk by chunk, so that
    each step streams ``CT`` through memory once.
    """

    A: jax.Array  # (n, T) dual coefficients G Y
    g: jax.Array  # (n,) diag(G)
    CT: jax.Array  # (d_pad, n) (G X)ᵀ before the pending update
    xc: jax.Array  # (d_pad,) diag(Xᵀ G X) before the pending update
    xa: jax.Array  # (d_pad, T) Xᵀ A before the pending update
    pend_x: jax.Array  # (n,) the column added last (x_b, or √bias·1 at the start)
    pend_u: jax.Array  # (n,) its u = G x_b / (1 + x_bᵀ G x_b)
    pend_w: jax.Array  # (T,) x_bᵀ A before the update
    pend_den: jax.Array  # () 1 + x_bᵀ G x_b
    taken: jax.Array  # (d_pad,) bool, already selected (padding rows count as taken)
    Xs: jax.Array  # (n, k) selected columns in order, zero-padded
    step: jax.Array  # () int32
    status: jax.Array  # () int32


def _pend_column(state: _RLSState, x, c) -> _RLSState:
    """Add the column ``x`` (n,) with ``c = G x``: update ``A`` and ``g``, defer ``C``.

    Sherman–Morrison: ``u = c / (1 + xᵀc)``, ``A ← A − u (xᵀA)``, ``g ← g − u ⊙ c``; the update
    ``C ← C − u (xᵀC)`` is left to :func:`_apply_pending` (see there).
    """
    den = 1 + x @ c
    u = c / den
    w = x @ state.A  # (T,)
    return state._replace(
        A=state.A - u[:, None] * w[None, :],
        g=state.g - u * c,
        pend_x=x,
        pend_u=u,
        pend_w=w,
        pend_den=den,
    )


def _apply_pending(state: _RLSState, CT, xc, xa):
    """The deferred update of rows ``CT`` (c, n), ``xc`` (c,), ``xa`` (c, T).

    With ``v = C_rowsᵀ x = X_iᵀ G x`` (G is symmetric): ``C ← C − u vᵀ`` (as rows:
    ``CT ← CT − v uᵀ``), ``xc ← xc − v²/den`` and ``xa ← xa − (v/den) wᵀ``.
    """
    v = CT @ state.pend_x  # (c,)
    vd = v / state.pend_den
    CT = CT - v[:, None] * state.pend_u[None, :]
    xc = xc - vd * v
    xa = xa - vd[:, None] * state.pend_w[None, :]
    return CT, xc, xa


def _init(X, Y, l2, bias, k, d_pad) -> _RLSState:
    n, d = X.shape
    dt = X.dtype
    inv = 1 / l2
    A = Y * inv
    pad = ((0, d_pad - d), (0, 0))
    state = _RLSState(
        A=A,
        g=jnp.full((n,), inv, dtype=dt),
        CT=jnp.pad(X.T * inv, pad),
        xc=jnp.pad(jnp.sum(X * X, axis=0) * inv, (0, d_pad - d)),
        xa=jnp.pad((A.T @ X).T, pad),
        pend_x=jnp.zeros((n,), dtype=dt),
        pend_u=jnp.zeros((n,), dtype=dt),
        pend_w=jnp.zeros((Y.shape[1],), dtype=dt),
        pend_den=jnp.ones((), dtype=dt),
        taken=jnp.arange(d_pad) >= d,
        Xs=jnp.zeros((n, k), dtype=dt),
        step=jnp.zeros((), dtype=jnp.int32),
        status=jnp.zeros((), dtype=jnp.int32),
    )
    # RLScore's bias: a constant regularised feature √bias·1 always in the model (no-op if bias=0).
    v = jnp.full((n,), jnp.sqrt(bias), dtype=dt)
    return _pend_column(state, v, v * inv)


def _exact_scores(CT, xc, xa, A, g):
    """Summed squared LOO residuals ``e_i`` for adding each candidate, evaluated term by term.

    Args: CT (c, n) rows of ``(G X)ᵀ``; xc (c,); xa (c, T); A (n, T); g (n,). Returns (c,).
    Builds the (c, T, n) residuals ``(A_jh − C_ji s_i (x_iᵀA)_h) / (g_j − s_i C_ji²)`` with
    ``s_i = 1 / (1 + x_iᵀC_i)`` — no cancellation beyond the algorithm's own ``g − u ⊙ C``.
    """
    s = 1 / (1 + xc)  # (c,)
    # g̃ = g − u_i ⊙ C_i (c, n); it is > 0 in exact arithmetic, so a breakdown scores inf/NaN.
    gt = jnp.maximum(g[None, :] - (CT * CT) * s[:, None], 0)
    z = xa * s[:, None]  # (c, T)  (x_iᵀA) / (1 + x_iᵀC_i)
    if A.shape[1] == 1:  # the common single-target case without a size-1 axis
        r = (A[:, 0][None, :] - z[:, 0][:, None] * CT) / gt
        return jnp.sum(r * r, axis=1)
    at = A.T[None, :, :] - z[:, :, None] * CT[:, None, :]  # (c, T, n)  Ã = A − u_i (x_iᵀA)
    r = at / gt[:, None, :]
    return jnp.sum(r * r, axis=(1, 2))


def _gemm_scores(CT, xc, xa, A, g):
    """The same ``e_i`` for T > 1 without (c, T, n) temporaries (screening scores).

    ``Σ_h Ã_jh² = ‖A_j‖² − 2 C_ji (z_i · A_j) + C_ji² ‖z_i‖²`` with ``z_i = s_i Aᵀx_i``: one
    (c, T)×(T, n) matrix product plus (c, n) elementwise work. The expansion can lose float32
    digits when a candidate explains almost all of ``A_j``, so :func:`_rls_step` re-scores the
    best few candidates with :func:`_exact_scores` before choosing.
    """
    s = 1 / (1 + xc)
    gt = jnp.maximum(g[None, :] - (CT * CT) * s[:, None], 0)
    z = xa * s[:, None]  # (c, T)
    P = z @ A.T  # (c, n)
    a = jnp.sum(A * A, axis=1)  # (n,)
    q = jnp.sum(z * z, axis=1)  # (c,)
    num = a[None, :] + CT * (CT * q[:, None] - 2 * P)
    return jnp.sum(jnp.maximum(num, 0) / (gt * gt), axis=1)


def _update_and_score(state: _RLSState, chunk: int, score_fn):
    """Apply the pending column to (CT, xc, xa) and score every candidate, ``chunk`` rows at a time.

    Each block of rows is updated and scored while it is in cache. Returns (CT, xc, xa, scores).
    """
    d_pad = state.CT.shape[0]

    def block(CT, xc, xa):
        CT, xc, xa = _apply_pending(state, CT, xc, xa)
        return CT, xc, xa, score_fn(CT, xc, xa, state.A, state.g)

    if chunk >= d_pad:
        return block(state.CT, state.xc, state.xa)
    n_chunks = d_pad // chunk
    T = state.xa.shape[1]

    # CT is carried and updated in place block by block; the (d_pad,) and (d_pad, T) side arrays
    # go through the scan as xs -> ys, which avoids aliasing copies of them in every iteration.
    def body(CT, xs):
        c, xc, xa = xs
        start = c * chunk
        CTc = jax.lax.dynamic_slice_in_dim(CT, start, chunk, axis=0)
        CTc, xc, xa, e = block(CTc, xc, xa)
        return jax.lax.dynamic_update_slice_in_dim(CT, CTc, start, axis=0), (xc, xa, e)

    xs = (
        jnp.arange(n_chunks, dtype=jnp.int32),
        state.xc.reshape(n_chunks, chunk),
        state.xa.reshape(n_chunks, chunk, T),
    )
    CT, (xc, xa, scores) = jax.lax.scan(body, state.CT, xs)
    return CT, xc.reshape(d_pad), xa.reshape(d_pad, T), scores.reshape(d_pad)


def _argmin_lowest(values, index):
    """Position of the smallest value, ties broken by the smallest ``index``."""
    best = jnp.min(values)
    big = jnp.iinfo(jnp.int32).max
    return jnp.argmin(jnp.where(values == best, index, big))


def _rls_step(X, bias, state: _RLSState, *, chunk, n_recheck):
    """One greedy addition: score all candidates, add the best, return (state, per-step info).

    With ``T == 1`` every candidate is scored by :func:`_exact_scores`. With ``T > 1`` all are
    screened by :func:`_gemm_scores` and the ``n_recheck`` best are re-scored exactly; the pick is
    the exact minimum among them (ties to the lowest feature index).
    """
    n = X.shape[0]
    d_pad = state.CT.shape[0]
    T = state.A.shape[1]
    score_fn = _exact_scores if T == 1 else _gemm_scores
    CT, xc, xa, scores = _update_and_score(state, chunk, score_fn)
    state = state._replace(CT=CT, xc=xc, xa=xa)
    scores = jnp.where(state.taken | ~jnp.isfinite(scores), jnp.inf, scores)
    if T == 1 or n_recheck == 0:
        idx = jnp.arange(d_pad, dtype=jnp.int32)
        cand = scores
    else:
        _, idx = jax.lax.top_k(-scores, n_recheck)
        idx = idx.astype(jnp.int32)
        rows = partial(jnp.take, indices=idx, axis=0)
        cand = _exact_scores(rows(CT), rows(xc), rows(xa), state.A, state.g)
        cand = jnp.where(rows(state.taken) | ~jnp.isfinite(cand), jnp.inf, cand)
    pos = _argmin_lowest(cand, idx)
    best = idx[pos]
    # If every untaken candidate is non-finite, fall back to the first untaken one and flag it.
    breakdown = ~jnp.isfinite(cand[pos])
    best = jnp.where(breakdown, jnp.argmin(state.taken).astype(jnp.int32), best)
    err = jnp.where(breakdown, jnp.nan, cand[pos]) / (n * T)

    xb = jax.lax.dynamic_index_in_dim(X, best, axis=1, keepdims=False)
    cb = jax.lax.dynamic_index_in_dim(CT, best, axis=0, keepdims=False)
    new = _pend_column(state, xb, cb)
    # diag(G) must stay positive and the duals finite; otherwise precision is exhausted.
    ok = jnp.all(new.g > 0) & jnp.all(jnp.isfinite(new.g)) & jnp.all(jnp.isfinite(new.A))
    new = new._replace(
        taken=state.taken.at[best].set(True),
        Xs=jax.lax.dynamic_update_index_in_dim(state.Xs, xb, state.step, axis=1),
        step=state.step + 1,
        status=jnp.where(breakdown | ~ok, jnp.int32(1), state.status),
    )
    coef = (new.A.T @ new.Xs).T  # (k, T) W = X_Sᵀ A, zero beyond the current step
    intercept = bias * jnp.sum(new.A, axis=0)  # (T,)
    return new, (best, err, coef, intercept)


@partial(jax.jit, static_argnames=("k", "chunk", "n_recheck"))
def _greedy_rls_run(X, Y, l2, bias, *, k, chunk, n_recheck):
    d = X.shape[1]
    d_pad = -(-d // chunk) * chunk
    state = _init(X, Y, l2, bias, k, d_pad)

    def body(state, _):
        return _rls_step(X, bias, state, chunk=chunk, n_recheck=n_recheck)

    state, (selected, loo, coef_path, intercept_path) = jax.lax.scan(body, state, length=k)
    coef = jnp.zeros((d, Y.shape[1]), dtype=X.dtype).at[selected].set(coef_path[-1])
    return RLSResult(
        selected=selected,
        loo_error=loo,
        coef=coef,
        intercept=intercept_path[-1],
        coef_path=coef_path,
        intercept_path=intercept_path,
        status=state.status,
    )


def _auto_chunk(n: int, d: int, itemsize: int) -> int:
    return int(min(d, max(_MIN_CHUNK, _BLOCK_BYTES // (n * itemsize))))


def greedy_rls(X, Y, k, *, l2=1.0, bias=0.0, chunk_size=None, n_recheck=8) -> RLSResult:
    """Multi-target greedy RLS: add ``k`` shared features one at a time by lowest LOO error.

    At each step every unselected feature ``i`` is scored by the leave-one-out squared error of the
    ridge model (penalty ``l2``) on the selected features plus ``i``, summed over samples and
    targets, ``e_i = Σ_h Σ_j (Ã_jh / g̃_j)²`` (Algorithm 2 of Airola, Pahikkala et al.; see the
    module docstring), computed for all candidates with rank-one dual updates in ``O(n·d·T)`` per
    step. Ties go to the lowest feature index. Picks equal those of a naive wrapper that refits
    ridge for every candidate and takes LOO residuals ``(y − Hy)/(1 − diag H)`` from the hat matrix.

    Args:
      X: (n, d) features (numpy or jax.Array; a row-sharded jax.Array keeps its sharding). The
        solver computes in X's floating dtype (float32 by default, float64 under x64 for float64
        input); ``Y`` is cast to it. Features are used as given (no centring or scaling).
      Y: (n,) or (n, T) real targets.
      k: number of features to select, ``1 <= k <= d``.
      l2: ridge penalty ``λ > 0`` (RLScore's ``regparam``).
      bias: ``>= 0``; if positive, a constant feature of value ``√bias`` is always in the model and
        regularised like the others (RLScore's ``bias``), giving the intercept ``bias · 1ᵀA``.
        ``0`` (default) is the slides' formulation without intercept.
      chunk_size: update and score candidates in blocks of this many features (static); each
        block of ``C`` is read, updated and scored in one fused pass, so a step streams ``C``
        through memory once and temporaries are ``(chunk, n)``. ``None``: all candidates at once
        while ``C`` (d·n entries) fits in 1 GiB, else blocks of about 1 GiB. The result does
        not depend on it beyond rounding.
      n_recheck: for ``T > 1``, candidates are screened with an expanded (matrix-product) form of
        ``e_i`` and the ``n_recheck`` best are re-scored term by term before choosing, so the pick
        and ``loo_error`` do not suffer from float32 cancellation in the expansion. ``0`` skips
        the re-check. Ignored for ``T == 1`` (always scored term by term).

    Returns:
      An :class:`RLSResult` (``selected``, ``loo_error``, ``coef``, ``intercept``, ``coef_path``,
      ``intercept_path``, ``status``); the trailing target axis is dropped for 1-D ``Y``.

    Raises:
      ValueError: non-finite or wrongly shaped input, mismatched rows, ``k`` outside ``[1, d]``,
        ``l2 <= 0`` or ``bias < 0``.
      TypeError: non-numeric input or non-integer ``k``/``chunk_size``.

    Example:
      >>> import numpy as np
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(100, 20)).astype(np.float32)
      >>> Y = X[:, [3, 7]] @ np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)
      >>> res = greedy_rls(X, Y, 2, l2=1.0)
      >>> sorted(res.selected.tolist())
      [3, 7]
      >>> res.coef.shape, res.coef_path.shape
      ((20, 2), (2, 2, 2))
    """
    X = as_float_matrix(X, "X")
    n, d = X.shape
    Y2, was_1d = as_targets(Y, n, "Y", dtype=X.dtype)
    k = check_int(k, "k", low=1)
    if k > d:
        raise ValueError(f"k={k} exceeds the number of features d={d}; choose k <= {d}")
    l2 = check_float(l2, "l2", low=0.0, strict_low=True)
    bias = check_float(bias, "bias", low=0.0)
    if chunk_size is None:
        chunk = _auto_chunk(n, d, np.dtype(X.dtype).itemsize)
    else:
        chunk = min(check_int(chunk_size, "chunk_size", low=1), d)
    n_recheck = min(check_int(n_recheck, "n_recheck", low=0), d)
    dt = X.dtype
    res = _greedy_rls_run(
        X,
        Y2,
        jnp.asarray(l2, dtype=dt),
        jnp.asarray(bias, dtype=dt),
        k=k,
        chunk=chunk,
        n_recheck=n_recheck,
    )
    if was_1d:
        res = res._replace(
            coef=res.coef[:, 0],
            intercept=res.intercept[0],
            coef_path=res.coef_path[..., 0],
            intercept_path=res.intercept_path[:, 0],
        )
    return res


def _check_result(result) -> None:
    if not isinstance(result, RLSResult):
        raise TypeError(f"result must be an RLSResult from greedy_rls; got {type(result).__name__}")


def rls_predict(result: RLSResult, X, *, step=None):
    """Predict with the greedy RLS model after ``step`` additions (default: all ``k``).

    ``f(x) = Σ_{j < step} x_{selected[j]} · coef_path[step-1, j] + intercept_path[step-1]``.

    Args:
      result: an :class:`RLSResult`.
      X: (m, d) features, same columns as in training.
      step: number of selected features to use, ``1 <= step <= k``; ``None`` means ``k``.

    Returns:
      (m, T) predictions, or (m,) if the model was fit on a 1-D ``y``.

    Example:
      >>> import numpy as np
      >>> X = np.random.default_rng(1).normal(size=(50, 6))
      >>> res = greedy_rls(X, X[:, 2] - X[:, 4], 2, l2=0.1)
      >>> rls_predict(res, X[:3], step=1).shape
      (3,)
    """
    _check_result(result)
    k = result.selected.shape[0]
    d = result.coef.shape[0]
    X = as_float_matrix(X, "X", dtype=result.coef.dtype)
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but the model was fit on {d} features")
    step = k if step is None else check_int(step, "step", low=1, high=k)
    Z = jnp.take(X, result.selected[:step], axis=1)
    b = result.intercept_path[step - 1]
    return Z @ result.coef_path[step - 1, :step] + (b if b.ndim == 0 else b[None, :])


def rls_predict_path(result: RLSResult, X):
    """Predictions of every prefix model at once (evaluate test error after each addition).

    ``P[t] = X[:, selected] @ coef_path[t] + intercept_path[t]`` for ``t = 0..k-1`` (the model
    with ``t + 1`` features) — RLScore's ``callbackfun`` use case without re-running.

    Args:
      result: an :class:`RLSResult`.
      X: (m, d) features.

    Returns:
      (k, m, T) predictions, or (k, m) for a model fit on a 1-D ``y``.

    Example:
      >>> import numpy as np
      >>> X = np.random.default_rng(2).normal(size=(40, 5))
      >>> Y = np.stack([X[:, 0], X[:, 1] + X[:, 3]], axis=1)
      >>> rls_predict_path(greedy_rls(X, Y, 3), X).shape
      (3, 40, 2)
    """
    _check_result(result)
    d = result.coef.shape[0]
    X = as_float_matrix(X, "X", dtype=result.coef.dtype)
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but the model was fit on {d} features")
    Z = jnp.take(X, result.selected, axis=1)  # (m, k)
    if result.coef_path.ndim == 2:
        return jnp.einsum("mj,tj->tm", Z, result.coef_path) + result.intercept_path[:, None]
    return jnp.einsum("mj,tjh->tmh", Z, result.coef_path) + result.intercept_path[:, None, :]


def rls_raise_for_status(result: RLSResult) -> RLSResult:
    """Raise ``FloatingPointError`` if ``result.status`` is not 0 (for eager callers).

    Returns ``result`` unchanged when the status is 0.
    """
    _check_result(result)
    code = int(np.asarray(result.status))
    if code != 0:
        raise FloatingPointError(RLS_STATUS_MESSAGES.get(code, f"unknown status {code}"))
    return result
