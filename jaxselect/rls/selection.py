"""Multi-target greedy regularised least-squares (greedy RLS) feature selection.

Forward selection of features shared by all ``T`` targets: starting from the empty set, each step
adds the feature whose addition gives the lowest leave-one-out (LOO) squared error summed over the
``n`` samples and ``T`` targets of a ridge model, until ``k`` features are chosen (Airola, Pahikkala
et al., "Large scale greedy feature selection for multi-target learning", ECML 2015 BigTargets
workshop slides, Algorithm 1; the linear-time version is their Algorithm 2, after Pahikkala, Airola
and Salakoski, ICMLA 2010, and Naula et al., Pattern Recognition Letters 40, 2014).

Penalty scale. The library's ``l2`` is the penalty on the *mean* loss,
``(1/2n)‖Y − X_S W‖²_F + (l2/2)‖W‖²_F``; multiplied by ``2n`` this is the slides' (and RLScore's)
``‖Y − X_S W‖²_F + λ‖W‖²_F`` with ``λ = n · l2`` (RLScore's ``regparam``). Greedy RLS works on the
features *as given* (no centring or scaling: standardise X yourself if its columns have different
units), so ``l2`` is relative to the mean square of the columns.

Maths (Algorithm 2). With ``S`` the selected set and ``X_S`` its columns, the dual quantities of
ridge regression on ``X_S`` are

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

Constant columns (``max == min``, the library's one rule) are inert: they start as "taken", so they
are never selected. With concrete data, ``k`` above the number of non-constant columns is clipped to
it with a ``UserWarning`` (the library's one rule, :func:`~jaxselect._validation.clip_k`); with
traced data (inside a user's ``jit``) the steps past the last selectable column select nothing
(``selected = −1``, the model is unchanged).

Advanced API (the library's solver protocol): :func:`rls_problem` gives the :class:`RLSProblem`
(the design, targets, penalties and the static :class:`RLSConfig` — chunk size, re-check count);
``state = rls_init(problem, k)`` the :class:`RLSState` at S = ∅; ``state = rls_step(problem,
state)`` makes one greedy addition (``state.info``: its :class:`RLSInfo`). :func:`rls_solver` is the
same method as a :class:`~jaxselect.solver.Solver` (init, step, finish closing over ``k``, the chunk
and the re-check count), run by the library's one driver (:func:`jaxselect.solver.run`: a
fixed-length ``lax.scan`` of the step inside one ``jit``, stacking ``state.info`` per step; with
``progress=True`` a few compiled chunks); :func:`greedy_rls` validates the data and runs it.

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
* The driver's fixed-length ``lax.scan`` runs the ``k`` steps inside one ``jit`` (the problem's
  weighting, the steps and the finish are one compiled program); the per-step outputs give
  the model after every prefix (anytime use) without re-running. Reductions over samples are sums
  and matrix-vector products, so a row-sharded ``X`` works unchanged.
* Numerical safety: ``g̃ > 0`` in exact arithmetic; a candidate with ``g̃ ≤ 0`` or a non-finite
  score is never picked. ``status`` (flags of :data:`jaxselect.STATUS_MESSAGES`) gets
  ``ILL_CONDITIONED`` (2) when diag(G) stops being positive or no candidate has a usable score,
  and ``NONFINITE`` (1) when the state holds NaN/Inf. In float32 keep ``l2`` away from 0 relative
  to the mean square of the columns (the start loses about ``log10(mean(x²)/l2)`` digits).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._progress import check_progress
from jaxselect._repr import short_repr
from jaxselect._validation import (
    as_float_matrix,
    as_hyper,
    check_finite_output,
    clip_k,
    check_int,
    host_array,
    host_value,
    is_traced,
    scale_error,
)
from jaxselect.path import RLSResult, check_rls_result, safe_index, rls_to_path
from jaxselect.design import as_data, as_sample_weight, column_summary, densify_sparse
from jaxselect.programs import jit
from jaxselect.sharding import any_mesh
from jaxselect.solver import Solver, SolverTraits, run
from jaxselect.status import ILL_CONDITIONED, NONFINITE

__all__ = [
    "RLSResult",
    "RLSState",
    "RLSInfo",
    "RLSProblem",
    "RLSConfig",
    "greedy_rls",
    "rls_solver",
    "rls_problem",
    "rls_init",
    "rls_step",
    "rls_predict",
    "rls_predict_path",
    "rls_to_path",
]

# Default size of one (chunk, n) block of C. XLA fuses the pending update and the scoring of a
# block into one multi-threaded pass, so the whole of C at once is fastest: on the 2-core CPU
# (jax 0.10) whole-C steps were 1.5-1.6x faster than cache-sized (128 KiB) or 50 MB blocks at
# n·d = 2000·5000 and 4000·20000, at the same peak memory. Blocks only bound the temporaries of
# very large problems (C beyond 1 GiB).
_BLOCK_BYTES = 1 << 30
_MIN_CHUNK = 4


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class RLSConfig:
    """Static options of greedy RLS (a pytree without leaves), fixed by :func:`rls_problem`.

    Attributes:
      chunk: candidates per block of ``C`` (the state's width is padded to a multiple of it).
      n_recheck: for T > 1, how many screened candidates are re-scored term by term.
    """

    chunk: int
    n_recheck: int = 8


class RLSProblem(NamedTuple):
    """The data of a greedy RLS run (build it with :func:`rls_problem`).

    Attributes:
      X: (n, d) features as used (rows scaled by √w with sample weights); Y: (n, T) targets (scaled alike).
      live: (d,) bool, the selectable columns.
      l2: () the penalty on the mean loss; bias: () RLScore's bias (0: no intercept column).
      root_w: (n,) √sample_weight (ones without weights); n_eff: () Σ sample_weight (n without).
      config: the static :class:`RLSConfig`.
    """

    X: jax.Array
    Y: jax.Array
    live: jax.Array
    l2: jax.Array
    bias: jax.Array
    root_w: jax.Array
    n_eff: jax.Array
    config: RLSConfig

    __repr__ = short_repr


class RLSState(NamedTuple):
    """The scan carry of greedy RLS: the dual quantities of the ridge model on the selected set.

    Built by :func:`rls_init`, advanced by :func:`rls_step` (advanced API; :func:`greedy_rls`
    drives both). ``C`` is stored transposed, ``CT = (G X)ᵀ`` (d_pad, n), so every per-candidate
    reduction over samples runs along the contiguous axis (≈30× faster on CPU than reducing down
    columns); rows ``d..d_pad`` are zero padding up to a multiple of the chunk size. ``xc`` and
    ``xa`` are kept up to date by the same rank-one updates, so ``X`` itself is only read for the
    winner's column. ``A`` and ``g`` include the last added column; ``CT``, ``xc`` and ``xa`` lag by
    it (the ``pend_*`` fields), and the next step applies it while it scores, chunk by chunk, so
    that each step streams ``CT`` through memory once.
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
    taken: jax.Array  # (d_pad,) bool: selected, constant, or padding — never a candidate
    Xs: jax.Array  # (n, k) selected columns in order, zero-padded
    bias: jax.Array  # () the bias (constant column √bias), for the intercept bias·1ᵀA
    step: jax.Array  # () int32
    status: jax.Array  # () int32 status flags
    root_w: jax.Array  # (n,) √sample_weight (ones without weights): rows of the design are scaled by it
    n_eff: jax.Array  # () Σ sample_weight (n without weights): λ = n_eff·l2, the LOO mean's denominator
    info: RLSInfo  # the latest step's report; rls_init: the model with no feature (selected −1)


class RLSInfo(NamedTuple):
    """What :func:`rls_step` reports about one addition, kept as ``RLSState.info`` (stacked over
    steps by the driver). Before any step (:func:`rls_init`) it describes the model with no selected
    feature: ``selected = −1``, its LOO error, zero ``coef`` and its intercept.

    Attributes:
      selected: () int32 feature added (−1 if no selectable feature was left).
      loo_error: () LOO mean squared error of the model after the step.
      coef: (k, T) weights of the selected slots after the step (zero beyond the current step).
      intercept: (T,) intercept ``bias · 1ᵀA`` after the step.
    """

    selected: jax.Array
    loo_error: jax.Array
    coef: jax.Array
    intercept: jax.Array

    __repr__ = short_repr


def _pend_column(state: RLSState, x, c) -> RLSState:
    """Add the column ``x`` (n,) with ``c = G x``: update ``A`` and ``g``, defer ``C``.

    Sherman–Morrison: ``u = c / (1 + xᵀc)``, ``A ← A − u (xᵀA)``, ``g ← g − u ⊙ c``; the update
    ``C ← C − u (xᵀC)`` is left to :func:`_apply_pending` (see there). A zero column is a no-op.
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


def _apply_pending(state: RLSState, CT, xc, xa):
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


def _make_problem(X, Y, live, l2, bias, w, chunk: int, n_recheck: int) -> RLSProblem:
    """The :class:`RLSProblem` of validated arrays (traceable); ``w`` None or (n,) weights."""
    n = X.shape[0]
    dt = X.dtype
    if w is None:
        root_w, n_eff = jnp.ones((n,), dt), jnp.asarray(n, dt)
    else:  # ridge on the rows scaled by √w: the weighted mean loss, LOO residuals of the scaled design
        root_w, n_eff = jnp.sqrt(w), jnp.sum(w)
        X, Y = X * root_w[:, None], Y * root_w[:, None]
    return RLSProblem(X, Y, live, l2, bias, root_w, n_eff, RLSConfig(int(chunk), int(n_recheck)))


def _init(problem: RLSProblem, k: int, chunk: int) -> RLSState:
    """The state at S = ∅ (``problem.X`` and ``Y`` already scaled by √w), its width padded to a
    multiple of ``chunk``."""
    X, Y, live, l2, bias = problem.X, problem.Y, problem.live, problem.l2, problem.bias
    root_w, n_eff = problem.root_w, problem.n_eff
    n, d = X.shape
    d_pad = -(-d // chunk) * chunk
    dt = X.dtype
    inv = 1 / (n_eff * l2)  # 1/λ with RLScore's λ = n·l2
    A = Y * inv
    pad = ((0, d_pad - d), (0, 0))
    state = RLSState(
        A=A,
        g=jnp.full((n,), inv, dtype=dt),
        CT=jnp.pad(X.T * inv, pad),
        xc=jnp.pad(jnp.sum(X * X, axis=0) * inv, (0, d_pad - d)),
        xa=jnp.pad((A.T @ X).T, pad),
        pend_x=jnp.zeros((n,), dtype=dt),
        pend_u=jnp.zeros((n,), dtype=dt),
        pend_w=jnp.zeros((Y.shape[1],), dtype=dt),
        pend_den=jnp.ones((), dtype=dt),
        taken=jnp.pad(~live, (0, d_pad - d), constant_values=True),
        Xs=jnp.zeros((n, k), dtype=dt),
        bias=bias,
        step=jnp.zeros((), dtype=jnp.int32),
        status=jnp.zeros((), dtype=jnp.int32),
        root_w=root_w,
        n_eff=n_eff,
        info=RLSInfo(  # no step yet; the null model's LOO error and intercept are filled in below
            selected=jnp.full((), -1, jnp.int32),
            loo_error=jnp.zeros((), dtype=dt),
            coef=jnp.zeros((k, Y.shape[1]), dtype=dt),
            intercept=jnp.zeros((Y.shape[1],), dtype=dt),
        ),
    )
    # RLScore's bias: a constant regularised feature √bias·1 always in the model (no-op if bias=0);
    # on the weighted design its rows are scaled like the others, √bias·√w.
    v = jnp.sqrt(bias) * root_w
    state = _pend_column(state, v, v * inv)
    intercept, loo = _null_model(state)
    return state._replace(info=state.info._replace(loo_error=loo.astype(dt), intercept=intercept.astype(dt)))


def _current_loo(state: RLSState):
    """LOO mean squared error of the model in ``state`` (residuals ``A ⊘ g``)."""
    r = state.A / state.g[:, None]
    return jnp.sum(r * r) / (state.n_eff * r.shape[1])


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


def _update_and_score(state: RLSState, chunk: int, score_fn):
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


def _rls_step(problem: RLSProblem, state: RLSState, config: RLSConfig) -> RLSState:
    """One greedy addition: score all candidates, add the best; the new state's ``info`` is its
    :class:`RLSInfo`.

    With ``T == 1`` every candidate is scored by :func:`_exact_scores`. With ``T > 1`` all are
    screened by :func:`_gemm_scores` and the ``n_recheck`` best are re-scored exactly; the pick is
    the exact minimum among them (ties to the lowest feature index). When every feature is taken
    (selected or constant) the step adds nothing: ``selected = −1`` and the model is unchanged.
    """
    X = problem.X
    chunk, n_recheck = config.chunk, config.n_recheck
    n = state.n_eff
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
        _, idx = jax.lax.top_k(-scores, min(n_recheck, d_pad))
        idx = idx.astype(jnp.int32)
        rows = partial(jnp.take, indices=idx, axis=0)
        cand = _exact_scores(rows(CT), rows(xc), rows(xa), state.A, state.g)
        cand = jnp.where(rows(state.taken) | ~jnp.isfinite(cand), jnp.inf, cand)
    pos = _argmin_lowest(cand, idx)
    best = idx[pos]
    exhausted = jnp.all(state.taken)  # nothing selectable is left: add nothing
    # If every untaken candidate is non-finite, fall back to the first untaken one and flag it.
    breakdown = ~exhausted & ~jnp.isfinite(cand[pos])
    best = jnp.where(breakdown, jnp.argmin(state.taken).astype(jnp.int32), best)
    total = jnp.where(exhausted, _current_loo(state) * (n * T), jnp.where(breakdown, jnp.nan, cand[pos]))
    err = total / (n * T)

    xb = jax.lax.dynamic_index_in_dim(X, best, axis=1, keepdims=False)
    cb = jax.lax.dynamic_index_in_dim(CT, best, axis=0, keepdims=False)
    zero = jnp.zeros_like(xb)
    new = _pend_column(state, jnp.where(exhausted, zero, xb), jnp.where(exhausted, zero, cb))
    # diag(G) must stay positive and the duals finite; otherwise precision is exhausted.
    finite = jnp.all(jnp.isfinite(new.g)) & jnp.all(jnp.isfinite(new.A))
    positive = jnp.all((new.g > 0) | ~jnp.isfinite(new.g))
    flags = jnp.where(breakdown | ~positive, jnp.int32(ILL_CONDITIONED), jnp.int32(0)) | jnp.where(
        finite, jnp.int32(0), jnp.int32(NONFINITE)
    )
    xs = jnp.where(exhausted, zero, xb)
    new = new._replace(
        taken=state.taken.at[best].set(True),
        Xs=jax.lax.dynamic_update_index_in_dim(state.Xs, xs, state.step, axis=1),
        step=state.step + 1,
        status=state.status | flags,
    )
    coef = (new.A.T @ new.Xs).T  # (k, T) W = X_Sᵀ A, zero beyond the current step
    intercept = new.bias * jnp.sum(new.root_w[:, None] * new.A, axis=0)  # (T,) bias·(√w)ᵀA
    selected = jnp.where(exhausted, jnp.int32(-1), best).astype(jnp.int32)
    return new._replace(info=RLSInfo(selected, err, coef, intercept))


def _null_model(state: RLSState):
    """(intercept (T,), LOO mean squared error ()) of the model with no selected feature."""
    return state.bias * jnp.sum(state.root_w[:, None] * state.A, axis=0), _current_loo(state)


def rls_solver(k: int, *, chunk_size: int, n_recheck: int = 8) -> Solver:
    """Greedy RLS as a :class:`~jaxselect.solver.Solver` of ``k`` additions (advanced API).

    A factory closing over the static options: ``k`` (the room of the state: the model's slots),
    ``chunk_size`` (candidates per block of ``C``, an int — :func:`greedy_rls` resolves its
    ``None``; the state's width is padded to a multiple of it) and
    ``n_recheck`` (T > 1: screened candidates re-scored term by term). ``init(problem)`` is the state
    at S = ∅ (:func:`rls_init`), ``step`` one greedy addition (:func:`rls_step`, its
    :class:`RLSInfo` in ``state.info``, stacked by the driver), ``finish`` the :class:`RLSResult`
    with a 2-D target axis. Run it with :func:`jaxselect.solver.run` on an :class:`RLSProblem` for
    ``n_steps=k`` steps (:func:`greedy_rls` does, after validating the data)::

        problem = rls_problem(X, Y, l2=0.01)
        res = run(rls_solver(k, chunk_size=problem.config.chunk), problem, n_steps=k)
    """
    # plain ints in the closures: a factory called twice with equal options gives equal solvers
    # (jaxselect._static.canonical compares closures by value), so the driver compiles once
    k = check_int(k, "k", low=1)
    chunk = check_int(chunk_size, "chunk_size", low=1)
    n_recheck = check_int(n_recheck, "n_recheck", low=0)

    def init(problem: RLSProblem) -> RLSState:
        return _init(problem, k, chunk)

    def step(problem: RLSProblem, state: RLSState) -> RLSState:
        return _rls_step(problem, state, RLSConfig(chunk, n_recheck))

    def finish(problem: RLSProblem, state: RLSState, info: RLSInfo) -> RLSResult:
        null = _init(problem, k, chunk).info  # the feature-less model (only A and g are kept)
        X, Y = problem.X, problem.Y
        d = X.shape[1]
        coef = jnp.zeros((d, Y.shape[1]), dtype=X.dtype)
        coef = coef.at[safe_index(info.selected, d)].set(info.coef[-1], mode="drop")
        return RLSResult(
            selected=info.selected,
            loo_error=info.loo_error,
            coef=coef,
            intercept=info.intercept[-1],
            coef_path=info.coef,
            intercept_path=info.intercept,
            null_intercept=null.intercept,
            null_loo_error=null.loo_error,
            status=state.status,
        )

    return Solver(init, step, finish, SolverTraits("greedy_rls", stacks_info=True))


def _drop_target_axis(res: RLSResult) -> RLSResult:
    """The result of a 1-D ``y``: the trailing target axis (T = 1) dropped."""
    return res._replace(
        coef=res.coef[:, 0],
        intercept=res.intercept[0],
        coef_path=res.coef_path[..., 0],
        intercept_path=res.intercept_path[:, 0],
        null_intercept=res.null_intercept[0],
    )


@partial(jit, static_argnames=("k", "chunk", "n_recheck", "y_1d"))
def _solve(X, Y, live, l2, bias, w=None, *, k, chunk, n_recheck, y_1d=False):
    """The one program of :func:`greedy_rls`: the problem (rows scaled by √w), the driver's ``k``
    steps of :func:`rls_solver` and the finish."""
    problem = _make_problem(X, Y, live, l2, bias, w, chunk, n_recheck)
    res = run(rls_solver(k, chunk_size=chunk, n_recheck=n_recheck), problem, n_steps=k)
    return _drop_target_axis(res) if y_1d else res


_make_problem_jit = jit(_make_problem, static_argnames=("chunk", "n_recheck"))
_drop_target_axis_jit = jit(_drop_target_axis)


def _solve_with_progress(X, Y, live, l2, bias, w, *, k, chunk, n_recheck, y_1d):
    """:func:`_solve` with a progress bar: the driver runs the steps in a few compiled chunks."""
    problem = _make_problem_jit(X, Y, live, l2, bias, w, chunk=chunk, n_recheck=n_recheck)
    res = run(rls_solver(k, chunk_size=chunk, n_recheck=n_recheck), problem, n_steps=k, progress=True)
    return _drop_target_axis_jit(res) if y_1d else res


def _auto_chunk(n: int, d: int, itemsize: int) -> int:
    return int(min(d, max(_MIN_CHUNK, _BLOCK_BYTES // (n * itemsize))))


def _resolve_chunk(chunk_size, n: int, d: int, dtype) -> int:
    if chunk_size is None:
        return _auto_chunk(n, d, np.dtype(dtype).itemsize)
    return min(check_int(chunk_size, "chunk_size", low=1), d)


@any_mesh
def greedy_rls(
    X,
    Y,
    k,
    *,
    l2=1e-3,
    bias=0.0,
    chunk_size=None,
    n_recheck=8,
    constant_columns="inert",
    sample_weight=None,
    progress: bool = False,
) -> RLSResult:
    """Multi-target greedy RLS: add ``k`` shared features one at a time by lowest LOO error.

    At each step every selectable feature ``i`` is scored by the leave-one-out squared error of
    the ridge model on the selected features plus ``i``, summed over samples and targets,
    ``e_i = Σ_h Σ_j (Ã_jh / g̃_j)²`` (Algorithm 2 of Airola, Pahikkala et al.; see the module
    docstring), computed for all candidates with rank-one dual updates in ``O(n·d·T)`` per step.
    Ties go to the lowest feature index. Picks equal those of a naive wrapper that refits ridge for
    every candidate and takes LOO residuals ``(y − Hy)/(1 − diag H)`` from the hat matrix.

    The ridge model minimises ``(1/2n)‖Y − X_S W‖² + (l2/2)‖W‖²`` (the library's ``l2``), i.e.
    RLScore's ``regparam = n · l2``; to reproduce a run with RLScore's ``regparam=r`` pass
    ``l2=r/n``. Features are used as given (no centring or scaling).

    Runs inside a user's ``jax.jit``/``jax.vmap`` with traced ``X``, ``Y``, ``l2`` and ``bias``
    (``k``, ``chunk_size``, ``n_recheck`` and ``constant_columns`` must be Python values). Under a
    trace the value checks (NaN/Inf, ``k`` against the number of non-constant columns,
    ``constant_columns="raise"``) cannot run; steps past the last selectable column then give
    ``selected = −1`` and leave the model unchanged.

    Args:
      X: (n, d) features, ``n >= 2`` (numpy or jax.Array; a row-sharded jax.Array keeps its
        sharding). A sparse X (``scipy.sparse``, BCOO/BCSR) is densified when ``n·d`` is at most
        :data:`~jaxselect.design.sparse.SPARSE_DENSIFY_LIMIT` (the dual state ``C = G X`` is (n, d) dense anyway), and refused
        above, with :func:`~jaxselect.fsa` and :func:`~jaxselect.cs_omp` named as the sparse
        alternatives. The solver computes in X's floating dtype (float32 by default, float64 under
        x64 for float64 input); ``Y`` is cast to it.
      Y: (n,) or (n, T) real targets.
      k: number of features to select, ``k >= 1``; above the number of non-constant columns, a
        ``UserWarning`` and all of them are selected (k clipped to that count).
      l2: ridge penalty ``> 0`` on the mean loss (RLScore's ``regparam / n``). The default 1e-3
        is light shrinkage for columns of unit mean square (RLScore's ``regparam = n/1000``; the
        old default ``regparam = 1`` is ``l2 = 1/n``) and keeps the float32 rank-one updates about
        three digits away from breakdown; it must be > 0 because the algorithm starts from
        ``G = I/(n·l2)``.
      bias: ``>= 0``; if positive, a constant feature of value ``√bias`` is always in the model and
        regularised like the others (RLScore's ``bias``; unlike the library's other intercepts it
        is penalised, by ``(l2/2)·b²/bias`` for intercept ``b``, so a large ``bias`` approaches an
        unpenalised intercept), giving the intercept ``bias · 1ᵀA``. ``0`` (default) is the slides'
        formulation without intercept.
      chunk_size: update and score candidates in blocks of this many features (static); each
        block of ``C`` is read, updated and scored in one fused pass, so a step streams ``C``
        through memory once and temporaries are ``(chunk, n)``. ``None``: all candidates at once
        while ``C`` (d·n entries) fits in 1 GiB, else blocks of about 1 GiB. The result does
        not depend on it beyond rounding.
      n_recheck: for ``T > 1``, candidates are screened with an expanded (matrix-product) form of
        ``e_i`` and the ``n_recheck`` best are re-scored term by term before choosing, so the pick
        and ``loo_error`` do not suffer from float32 cancellation in the expansion. ``0`` skips
        the re-check. Ignored for ``T == 1`` (always scored term by term).
      constant_columns: ``"inert"`` (default): constant columns (max == min) are never selected;
        ``"raise"``: a ValueError names them.
      sample_weight: None or (n,) row weights ``w ≥ 0``: the ridge model minimises
        ``(1/2Σw) Σ_i w_i ‖y_i − x_iW‖² + (l2/2)‖W‖²`` (ridge on the rows scaled by ``√w_i``, so
        integer weights equal repeated rows for the model) and the LOO error is
        ``Σ_i w_i r_(−i)² / (Σw·T)`` with ``r_(−i)`` the residual of row i left out (the hat-matrix
        residuals ``e_i/(1 − h_ii)`` of the scaled design; rows with ``w_i = 0`` contribute nothing
        and never influence the model). Columns constant on the rows with ``w > 0`` are inert.
        The weights of :func:`jaxselect.shard_rows` (0 on padding rows) give the unpadded result.
      progress: show a ``tqdm`` progress bar over the ``k`` steps (needs the optional ``tqdm``, the
        ``[progress]`` extra); the steps then run in a few compiled chunks. Default False: one
        compiled program.

    Returns:
      An :class:`RLSResult`; the trailing target axis is dropped for 1-D ``Y``. ``status`` is 0
      when fine (check with :func:`jaxselect.raise_for_status`).

    Raises:
      ValueError: non-finite or wrongly shaped input, fewer than 2 rows, mismatched rows, ``k < 1``,
        every column constant, ``l2 <= 0``, ``bias < 0``, or constant
        columns with ``constant_columns="raise"``.
      TypeError: non-numeric input or non-integer ``k``/``chunk_size``.

    Example:
      >>> import numpy as np, jaxselect as js
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(100, 20)).astype(np.float32)
      >>> Y = X[:, [3, 7]] @ np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)
      >>> res = js.greedy_rls(X, Y, 2, l2=0.01)
      >>> sorted(res.selected.tolist())
      [3, 7]
      >>> res.coef.shape, res.coef_path.shape
      ((20, 2), (2, 2, 2))
    """
    # the front door: X used as given, so its squares must stay finite (scale="squares"); targets,
    # weights, the constant-column mode and the summary (its live mask: the selectable columns)
    X = densify_sparse(
        X,
        "greedy_rls",
        "the dual state C = G X",
        "jaxselect.fsa (FSARegressor) or prepare + cs_omp (GroupSequencingRegressor)",
    )
    data = as_data(
        X, Y, sample_weight=sample_weight, constant_columns=constant_columns, scale="squares"
    )
    X, Y2, was_1d, w, live = data.X, data.Y, data.y_1d, data.weights, data.summary.live
    n, d = X.shape
    k = check_int(k, "k", low=1)
    dt = X.dtype
    l2 = as_hyper(l2, "l2", dt, low=0.0, strict_low=True)
    bias = as_hyper(bias, "bias", dt, low=0.0)
    chunk = _resolve_chunk(chunk_size, n, d, dt)
    n_recheck = min(check_int(n_recheck, "n_recheck", low=0), d)
    _check_target_scale(Y2)  # LOO errors are squares of Y's scale
    n_live = host_value(lambda: live)  # None with traced X: only the width bounds k then
    n_usable = d if n_live is None else int(n_live.sum())
    if n_usable < 1:
        raise ValueError(f"every column of X is constant ({d} columns; constant columns are never selected)")
    k = clip_k(k, n_usable, "greedy_rls")  # above the usable columns: a UserWarning, all of them kept
    solve = _solve_with_progress if check_progress(progress) else _solve
    return solve(X, Y2, live, l2, bias, w, k=k, chunk=chunk, n_recheck=n_recheck, y_1d=was_1d)


def _check_target_scale(Y) -> None:
    """:func:`~jaxselect._validation.check_scale` of the (n, T) targets (squares), on the host: no
    compiled program between the front door and the solve (a no-op on traced Y)."""
    if is_traced(Y):
        return
    values = host_array(Y)  # a global Y over several processes is gathered first
    message = scale_error(values.min(axis=0), values.max(axis=0), values.shape[0], "Y", Y.dtype, squares=True)
    if message is not None:
        raise ValueError(message)


def rls_problem(
    X, Y, *, l2=1e-3, bias=0.0, live=None, chunk_size=None, n_recheck=8, sample_weight=None
) -> RLSProblem:
    """Advanced API: the :class:`RLSProblem` of greedy RLS (data, penalties, static config).

    Pure and traceable in ``X``, ``Y``, ``l2``, ``bias``; checks shapes and options only (use
    :func:`greedy_rls` for validated input: NaN/Inf, scales, ``k`` against the live columns).

    Args:
      X: (n, d) float features; Y: (n,) or (n, T) targets (cast to X's dtype).
      l2, bias, sample_weight: as in :func:`greedy_rls`.
      live: (d,) bool, the selectable columns (default: the non-constant ones).
      chunk_size, n_recheck: as in :func:`greedy_rls` (static; stored in ``problem.config``).

    Returns:
      An :class:`RLSProblem`; start with :func:`rls_init`, advance with :func:`rls_step`.
    """
    X = jnp.asarray(X)
    if X.ndim != 2 or not jnp.issubdtype(X.dtype, jnp.floating):
        raise ValueError(f"X must be a 2-D float array; got shape {X.shape} and dtype {X.dtype}")
    n, d = X.shape
    Y = jnp.asarray(Y, X.dtype)
    Y = Y[:, None] if Y.ndim == 1 else Y
    if Y.ndim != 2 or Y.shape[0] != n:
        raise ValueError(f"Y must have shape ({n},) or ({n}, T); got {Y.shape}")
    chunk = _resolve_chunk(chunk_size, n, d, X.dtype)
    n_recheck = min(check_int(n_recheck, "n_recheck", low=0), d)
    w = as_sample_weight(sample_weight, n)
    w = None if w is None else jnp.asarray(w).astype(X.dtype)
    if live is None:
        live = column_summary(X, w).live
    live = jnp.asarray(live)
    if live.shape != (d,) or live.dtype != bool:
        raise ValueError(f"live must be a ({d},) bool mask; got shape {live.shape} and dtype {live.dtype}")
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0, strict_low=True)
    bias = as_hyper(bias, "bias", X.dtype, low=0.0)
    return _make_problem(X, Y, live, l2, bias, w, chunk, n_recheck)


def rls_init(problem: RLSProblem, k) -> RLSState:
    """Advanced API: the :class:`RLSState` of greedy RLS before any feature is selected.

    ``A = G Y``, ``g = diag G`` and ``C = G X`` for ``G = (λI + bias·11ᵀ)⁻¹``, ``λ = n·l2``. Pure
    and traceable.

    Args:
      problem: from :func:`rls_problem`.
      k: how many :func:`rls_step` calls the state has room for (static).

    Returns:
      An :class:`RLSState` (its ``info``: the model with no selected feature, ``selected = −1``).
    """
    if not isinstance(problem, RLSProblem):
        raise TypeError(f"expected an RLSProblem from rls_problem(X, Y, ...); got {type(problem).__name__}")
    return _init(problem, check_int(k, "k", low=1), problem.config.chunk)


def rls_step(problem: RLSProblem, state: RLSState) -> RLSState:
    """Advanced API: one greedy addition, ``(problem, state)`` → ``state``.

    Pure and traceable (``jax.lax.scan`` it ``k`` times, as :func:`greedy_rls` does; at most the
    ``k`` given to :func:`rls_init`). The chunk size and the re-check count are the problem's
    static config.

    Returns:
      The new :class:`RLSState`; ``state.info`` is this step's :class:`RLSInfo`.
    """
    d_pad = state.CT.shape[0]
    if d_pad % problem.config.chunk:
        raise ValueError(
            f"the state's padded width {d_pad} is not a multiple of the problem's chunk {problem.config.chunk}: "
            "build the state with rls_init(problem, k) from the same problem"
        )
    return _rls_step(problem, state, problem.config)


def _check_predict_X(result: RLSResult, X):
    d = result.coef.shape[0]
    X = as_float_matrix(X, "X", dtype=result.coef.dtype)
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but the model was fit on {d} features")
    return X


@any_mesh
def rls_predict(result: RLSResult, X, *, step=None):
    """Predict with the greedy RLS model after ``step`` additions (default: all ``k``).

    ``f(x) = Σ_{j < step} x_{selected[j]} · coef_path[step-1, j] + intercept_path[step-1]``.

    Args:
      result: an :class:`RLSResult`.
      X: (m, d) features, same columns as in training (one row is fine).
      step: number of selected features to use, ``1 <= step <= k``; ``None`` means ``k``.

    Returns:
      (m, T) predictions, or (m,) if the model was fit on a 1-D ``y``.

    Raises:
      ValueError: ``step`` outside [1, k], X with the wrong number of columns or NaN/Inf.

    Example:
      >>> import numpy as np, jaxselect as js
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(100, 20)).astype(np.float32)
      >>> Y = X[:, [3, 7]] @ np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)
      >>> res = js.greedy_rls(X, Y, 2, l2=0.01)
      >>> rls_predict(res, X[:3], step=1).shape      # (m, T); (m,) for a 1-D y
      (3, 2)
    """
    check_rls_result(result)
    k = result.selected.shape[0]
    X = _check_predict_X(result, X)
    step = k if step is None else check_int(step, "step", low=1, high=k)
    step = jax.device_put(np.int32(step))  # data: one program for every step
    values = _prefix_predictions(result.selected, result.coef_path, result.intercept_path, X, step)
    return check_finite_output(values, X, "rls_predict")


@jit
def _prefix_predictions(selected, coef_path, intercept_path, X, step):
    """(m,) or (m, T) predictions of the model with ``step`` features."""
    k = selected.shape[0]
    Z = jnp.take(X, jnp.maximum(selected, 0), axis=1)  # (m, k); −1 slots have weight 0
    c = jnp.take(coef_path, step - 1, axis=0)  # (k,) or (k, T)
    keep = (jnp.arange(k, dtype=jnp.int32) < step.astype(jnp.int32)).reshape((k,) + (1,) * (c.ndim - 1))
    b = jnp.take(intercept_path, step - 1, axis=0)
    return Z @ jnp.where(keep, c, jnp.zeros_like(c)) + (b if b.ndim == 0 else b[None, :])


@jit
def _path_predictions(selected, coef_path, intercept_path, X):
    """(k, m) or (k, m, T) predictions of every prefix model."""
    Z = jnp.take(X, jnp.maximum(selected, 0), axis=1)  # (m, k); −1 slots have weight 0
    if coef_path.ndim == 2:
        return jnp.einsum("mj,tj->tm", Z, coef_path) + intercept_path[:, None]
    return jnp.einsum("mj,tjh->tmh", Z, coef_path) + intercept_path[:, None, :]


@any_mesh
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
      >>> import numpy as np, jaxselect as js
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(100, 20)).astype(np.float32)
      >>> Y = X[:, [3, 7]] @ np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)
      >>> res = js.greedy_rls(X, Y, 2, l2=0.01)
      >>> rls_predict_path(res, X[:3]).shape         # (k, m, T)
      (2, 3, 2)
    """
    check_rls_result(result)
    X = _check_predict_X(result, X)
    values = _path_predictions(result.selected, result.coef_path, result.intercept_path, X)
    return check_finite_output(values, X, "rls_predict_path")
