"""Multiclass FSA: the multinomial (softmax) loss with one support shared by every class.

The FSA paper's loss family (Barbu et al., §2) extends to C classes with the multinomial
log-likelihood: the model keeps a coefficient *vector* per feature, ``β_j ∈ R^C`` (a row of the
(M, C) coefficient matrix), and the selection criterion of a multi-parameter feature is the norm
of its coefficient vector (as for the piecewise-linear learners) — annealing keeps the M_e rows
with the largest ``‖β_j,:‖₂``, so the k survivors are one support for all classes (not k per
class, as one-vs-rest would give). The objective, mean-normalised with the library's ``l2``
convention, is

    F(B, b) = mean_i w̃_i [logsumexp(s_i) − s_i,y_i] + (l2/2) ‖B‖²_F,   s_i = Bᵀ a_i + b,

with ``a_i`` the standardised row (the linear design of :func:`~jaxselect.fsa`), ``w̃`` the
relative sample weights (mean 1) and b the C unpenalised intercepts.

The softmax is invariant to adding one constant to a row of B (or to b): the gradient of F lies in
the sum-zero subspace of every row, so the iterates from B = 0 stay there (``Σ_c β_jc = 0``,
``Σ_c b_c = 0``), the minimum-norm representative — the one scikit-learn's penalised multinomial
``LogisticRegression`` returns. The polish works in that subspace (an orthonormal basis Q of the
sum-zero vectors, (C, C−1)): a Levenberg–Marquardt-damped Newton method, so a singular Hessian
(``l2 = 0`` on separable classes) never gives an unbounded step, and F never rises.

``refine=R`` (:func:`softmax_refine`) runs the rounds of gradient support pursuit of
:mod:`.refine` after the polish, with the multiclass rule for every ranking: the columns outside
the support S enter the union by the L2 norm over the classes of their gradient row ``‖∂F/∂β_j,:‖₂``,
and the union's k largest coefficient rows ``‖β_j,:‖₂`` form S′, which replaces S when its polished
F is lower (F never rises; a round without gain stops the rounds).

One compiled program per shape (N, M, C, k, n_iter) and static options (lr given or not, polish,
refine or not): the schedule at full width (a ``lax.fori_loop``: the support is kept as a mask),
then the polish on the (N, k) support columns and the refinement rounds (a ``lax.while_loop``).
The program's data: the schedule, ``lr``, ``l2``, the polish's tolerance and cap, the number of
rounds.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import is_traced
from ..programs import jit
from ..status import NONFINITE, NOT_CONVERGED, OK
from .refine import UNION_MAX_ITER
from .solver import tick
from .step import keep_largest

__all__ = ["SOFTMAX_LOSSES", "SoftmaxOutput", "class_labels", "check_softmax_options", "softmax_refine", "softmax_run"]

#: the names of the multinomial loss in :func:`~jaxselect.fsa` (``"multinomial"`` an alias)
SOFTMAX_LOSSES = ("softmax", "multinomial")
#: curvature bound of the softmax loss per unit score: the eigenvalues of diag(p) − ppᵀ are ≤ 1/2
SOFTMAX_CURVATURE = 0.5
_POWER_ITERS = 30


class SoftmaxOutput(NamedTuple):
    """What :func:`softmax_run` returns (device arrays; raw-space coefficients)."""

    support: jax.Array  # (k,) int32, ascending
    coef: jax.Array  # (k, C)
    intercept: jax.Array  # (C,)
    objective: jax.Array  # (n_iter,)
    step: jax.Array  # (1,)
    status: jax.Array  # () int32


def class_labels(y, n: int, w=None) -> tuple[np.ndarray, int]:
    """``(labels, C)``: integer class labels 0..C−1 (n,) as int32 and the number of classes C ≥ 2
    (every class present among the rows of positive weight), or a ValueError/TypeError saying what
    to fix. Host values only."""
    if y is None:
        raise ValueError("loss='softmax' needs class labels y: integers 0..C-1, one per row of X")
    if is_traced(y):
        raise TypeError(
            "loss='softmax' reads the number of classes from concrete labels; call fsa outside jax.jit "
            "(or with concrete y)"
        )
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) (class labels 0..C-1, one per row of X); got {tuple(y.shape)}")
    if y.dtype == bool:
        y = y.astype(np.int32)
    if y.dtype == object or y.dtype.kind not in "iuf":
        raise TypeError(
            f"loss='softmax' needs integer class labels 0..C-1; got dtype {y.dtype} (encode other labels with "
            "sklearn.preprocessing.LabelEncoder, or use jaxselect.sklearn.FSAClassifier, which takes any labels)"
        )
    values = y.astype(np.float64)
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < 0)
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise ValueError(f"loss='softmax' needs integer class labels 0..C-1; y has other values at row(s) {rows}")
    labels = values.astype(np.int32)
    n_classes = int(labels.max()) + 1
    present = np.unique(labels if w is None else labels[np.asarray(w) > 0])
    if n_classes < 2:
        raise ValueError("loss='softmax' needs at least 2 classes; y has only class 0")
    if present.size != n_classes:
        missing = sorted(set(range(n_classes)) - set(present.tolist()))[:5]
        where = "y" if w is None else "the rows of positive sample_weight"
        raise ValueError(
            f"loss='softmax': classes must be 0..C-1 with every class present; {where} lack class(es) {missing} "
            f"(C = max(y) + 1 = {n_classes}); relabel the classes to 0..C-1"
        )
    return labels, n_classes


def check_softmax_options(options, X) -> None:
    """ValueError for the options the multinomial loss does not take (FSA's :class:`FSAOptions`)."""
    from ..design.stream import stream_kind

    if options.bins is not None:
        raise ValueError("loss='softmax' runs linear learners; piecewise-linear learners (learner=...) are binary/regression only")
    if options.optimizer is not None:
        raise ValueError("loss='softmax' runs its built-in gradient step; pass optimizer=None (lr= sets the step)")
    if options.polish.l1 is not None and not (np.ndim(options.polish.l1) == 0 and options.polish.l1 == 0):
        raise ValueError("loss='softmax' has no L1 polish yet; pass l1=None (l2= is its ridge)")
    if options.devices is not None:
        raise ValueError("loss='softmax' runs in memory; mesh= (streamed row blocks) does not apply")
    kind = stream_kind(X)
    if kind == "source" or callable(X):
        raise ValueError(
            "loss='softmax' needs X in memory (a numpy array, a jax.Array or a scipy.sparse matrix); "
            f"a streamed X of type {type(X).__name__} is not supported with it"
        )


def sum_zero_basis(n_classes: int, dtype) -> np.ndarray:
    """(C, C−1) orthonormal basis of the vectors of R^C whose entries sum to 0 (host constant)."""
    c = n_classes
    centred = np.eye(c) - 1.0 / c
    u, _, _ = np.linalg.svd(centred)
    return u[:, : c - 1].astype(dtype)


def _objective(S, Y, rel):
    """Weighted mean softmax loss of scores S (n, C) and one-hot Y."""
    logp = jax.nn.log_softmax(S, axis=1)
    return -jnp.mean(rel * jnp.sum(Y * logp, axis=1)), logp


def _power_lambda(design, rel, live, dtype):
    """λ_max of ``Aᵀ diag(rel) A / N`` on the live columns (power iteration from a seeded start)."""
    n = design.shape[0]
    v0 = (1.0 + jax.random.normal(jax.random.PRNGKey(0), (design.shape[1],), dtype)) * live

    def body(_, carry):
        v, _lam = carry
        u = design.rmv(rel * design.mv(v)) / jnp.asarray(n, dtype) * live
        lam = jnp.linalg.norm(u) / jnp.maximum(jnp.linalg.norm(v), jnp.finfo(dtype).tiny)
        return u / jnp.maximum(jnp.linalg.norm(u), jnp.finfo(dtype).tiny), lam

    _, lam = jax.lax.fori_loop(0, _POWER_ITERS, body, (v0, jnp.zeros((), dtype)))
    return lam * jnp.asarray(1.02, dtype)  # a margin for the power iteration's underestimate


def lm_newton(Z, Y, rel, V0, b0, l2, Q, tol, max_iter):
    """Levenberg–Marquardt-damped Newton on ``F(V, b)`` restricted to the support columns Z (n, k),
    in the sum-zero coordinates ``V = U Qᵀ``, ``b = c Qᵀ``: each step solves ``(H + μI) δ = −g``,
    is accepted when F decreases — or rises by at most its rounding ``16·eps·|F|`` while ``max|g|``
    decreases — (μ ← μ/10, down to 10⁻⁹) and refused otherwise (μ ← 10μ; a refusal at μ = 10⁶
    stops); the loop ends at ``max|g| ≤ tol`` (labels: σ = 1) or after ``max_iter`` tries. Returns ``(V, b, converged,
    finite, f)``."""
    n, k = Z.shape
    dtype = Z.dtype
    nf = jnp.asarray(n, dtype)
    A = jnp.concatenate([Z, jnp.ones((n, 1), dtype)], axis=1)  # (n, k+1)
    cm = Q.shape[1]
    m = (k + 1) * cm
    pen = jnp.concatenate([jnp.ones((k, 1), dtype), jnp.zeros((1, 1), dtype)], axis=0)  # rows penalised
    W0 = jnp.concatenate([V0, b0[None, :]], axis=0) @ Q  # (k+1, C-1)

    def f_g(W):
        S = A @ (W @ Q.T)
        f, logp = _objective(S, Y, rel)
        f = f + 0.5 * l2 * jnp.sum(pen * W * W)
        G = (jnp.exp(logp) - Y) * (rel / nf)[:, None]  # (n, C)
        g = (A.T @ G) @ Q + l2 * pen * W
        return f, g, logp

    def hessian(logp):
        p = jnp.exp(logp)
        pq = p @ Q  # (n, C-1)
        hq = jnp.einsum("ic,cd,ce->ide", p, Q, Q) - pq[:, :, None] * pq[:, None, :]  # Qᵀ(diag p − ppᵀ)Q
        Ar = A * (rel / nf)[:, None]
        H = jnp.einsum("ia,ide,ib->adbe", Ar, hq, A).reshape(m, m)
        H = 0.5 * (H + H.T)
        return H + jnp.diag(jnp.repeat(l2 * pen[:, 0], cm))

    f0, g0, logp0 = f_g(W0)
    mu0 = jnp.asarray(1e-6, dtype)
    eps = jnp.finfo(dtype).eps

    class Carry(NamedTuple):
        W: jax.Array
        f: jax.Array
        g: jax.Array
        logp: jax.Array
        mu: jax.Array
        it: jax.Array
        stalled: jax.Array

    def cond(c):
        return (c.it < max_iter) & (jnp.max(jnp.abs(c.g)) > tol) & jnp.isfinite(c.f) & ~c.stalled

    # the steps stay in the row space of the weighted support design: on an underdetermined support
    # (fewer distinct rows of positive weight than k + 1) the directions outside it leave F unchanged,
    # and a step along them would be rounding noise divided by the damping
    # (the eigenvectors of the (k+1)² weighted Gram matrix: an SVD of the tall columns may take N²
    # memory; eigenvalues below its rounding, 100·(k+1)·eps of the largest, count as 0)
    lam, vecs = jnp.linalg.eigh((A * rel[:, None]).T @ A)
    in_range = lam > lam[-1] * 100.0 * (k + 1) * jnp.finfo(dtype).eps
    B = vecs * in_range[None, :].astype(dtype)  # (k+1, r) orthonormal columns, 0 outside the range
    r = B.shape[1]
    mr = r * cm
    outside = jnp.diag(jnp.repeat(jnp.where(in_range, 0.0, 1.0).astype(dtype), cm))

    def body(c):
        H = hessian(c.logp).reshape(k + 1, cm, k + 1, cm)
        Hr = jnp.einsum("ar,adbe,bs->rdse", B, H, B).reshape(mr, mr)
        scale = jnp.maximum(jnp.max(jnp.diagonal(Hr)), jnp.finfo(dtype).tiny)
        damped = Hr + (c.mu * scale) * jnp.eye(mr, dtype=dtype) + outside
        L = jnp.linalg.cholesky(damped)
        step_r = -jax.scipy.linalg.cho_solve((L, True), (B.T @ c.g).reshape(-1)).reshape(r, cm)
        step = B @ step_r
        W1 = c.W + step
        f1, g1, logp1 = f_g(W1)
        decrease = f1 < c.f
        rounding = (f1 <= c.f + 16 * eps * jnp.abs(c.f)) & (jnp.max(jnp.abs(g1)) < jnp.max(jnp.abs(c.g)))
        ok = jnp.isfinite(f1) & jnp.all(jnp.isfinite(step)) & (decrease | rounding)
        pick = lambda a, b: jnp.where(ok, a, b)
        mu = jnp.where(ok, jnp.maximum(c.mu / 10.0, 1e-9), jnp.minimum(c.mu * 10.0, 1e6)).astype(dtype)
        stalled = ~ok & (c.mu >= 1e6)
        return Carry(pick(W1, c.W), pick(f1, c.f), pick(g1, c.g), pick(logp1, c.logp), mu, c.it + 1, stalled)

    out = jax.lax.while_loop(cond, body, Carry(W0, f0, g0, logp0, mu0, jnp.zeros((), jnp.int32), jnp.zeros((), bool)))
    VB = out.W @ Q.T
    converged = jnp.max(jnp.abs(out.g)) <= tol
    finite = jnp.isfinite(out.f) & jnp.all(jnp.isfinite(VB))
    return VB[:k], VB[k], converged, finite, out.f


class _Round(NamedTuple):
    """The carry of :func:`softmax_refine`: the accepted support and its polished fit."""

    support: jax.Array  # (k,) int32, ascending
    V: jax.Array  # (k, C) standardised coefficients
    b: jax.Array  # (C,)
    f: jax.Array  # () F at (V, b)
    converged: jax.Array  # () bool: the accepted polish reached its tolerance
    finite: jax.Array  # () bool
    rounds: jax.Array  # () int32: rounds run
    going: jax.Array  # () bool: the last round found a better support


def softmax_refine(design, Y, rel, live, start: _Round, l2, Q, tol, max_iter, rounds) -> _Round:
    """Rounds of gradient support pursuit (GraSP, as :mod:`.refine` for the pointwise losses) on the
    multinomial objective, from the polished fit ``start`` on the support S (traceable; shapes fixed):

    1. ``G = Ãᵀ ∂ℓ/∂S`` (M, C), the gradient of F over all columns at S's fit (one product with X),
       and each column's score ``‖G_j,:‖₂`` — the library's multiclass rule (a row norm);
    2. the union U = S ∪ the ``min(2k, M − k)`` live columns outside S with the largest score;
    3. at most :data:`~jaxselect.anneal.refine.UNION_MAX_ITER` damped Newton steps of F on U from
       S's fit (0 on the new columns): they only rank U's coefficient rows;
    4. S′ = the k rows of U with the largest ``‖β_j,:‖₂``, polished (:func:`lm_newton`) from there.

    S′ replaces S when it is another set of columns and its polished F is lower (F never rises);
    the rounds stop after ``rounds`` or at the first round without gain (a ``lax.while_loop``)."""
    n, m = design.shape
    k = start.support.shape[0]
    n_add = min(2 * k, m - k)  # static
    if n_add <= 0:  # k = M: no column outside S
        return start
    dtype = design.dtype
    nf = jnp.asarray(n, dtype)
    union_iter = jnp.minimum(max_iter, UNION_MAX_ITER)

    def body(c: _Round) -> _Round:
        B = jnp.zeros((m, Y.shape[1]), dtype).at[c.support].set(c.V)
        _, logp = _objective(design.mv(B) + c.b[None, :], Y, rel)
        G = design.rmv(((jnp.exp(logp) - Y) * (rel / nf)[:, None]).T).T  # (M, C); l2·B is 0 off S
        taken = jnp.zeros((m,), bool).at[c.support].set(True)
        score = jnp.where(live & ~taken, jnp.sum(G * G, axis=1), -jnp.inf)
        best, new = jax.lax.top_k(score, n_add)
        union = jnp.concatenate([c.support, new.astype(jnp.int32)])
        usable = jnp.concatenate([jnp.ones((k,), bool), jnp.isfinite(best)])  # fewer live columns: padding
        start_V = jnp.concatenate([c.V, jnp.zeros((n_add, c.V.shape[1]), dtype)])
        order = jnp.argsort(union)
        union, usable, start_V = union[order], usable[order], start_V[order]
        Z = design.take(union).materialize() * usable[None, :].astype(dtype)  # padding: a 0 column, held at 0
        VU, bU, _, _, _ = lm_newton(Z, Y, rel, start_V, c.b, l2, Q, tol, union_iter)
        size = jnp.where(usable, jnp.sum(VU * VU, axis=1), -jnp.inf)
        keep = jnp.sort(jax.lax.top_k(size, k)[1])  # positions in U, increasing: S′ ascending
        support = jnp.take(union, keep)
        V1, b1, converged, finite, f1 = lm_newton(jnp.take(Z, keep, axis=1), Y, rel, jnp.take(VU, keep, axis=0), bU,
                                                  l2, Q, tol, max_iter)
        better = finite & (f1 < c.f) & ~jnp.all(support == c.support)
        new_round = _Round(support, V1, b1, f1, converged, finite, c.rounds, better)
        kept = c._replace(going=better)
        return jax.tree.map(lambda a, b: jnp.where(better, a, b), new_round, kept)._replace(rounds=c.rounds + 1)

    def cond(c: _Round):
        return (c.rounds < rounds) & c.going

    return jax.lax.while_loop(cond, body, start._replace(rounds=jnp.zeros((), jnp.int32), going=jnp.ones((), bool)))


@functools.partial(jit, static_argnames=("k", "polish", "fixed_lr", "refine", "progress"))
def softmax_run(design, Y, rel, live, schedule, lr, l2, tol, max_iter, Q, rounds=0, *, k: int, polish: bool,
                fixed_lr: bool, refine: bool = False, progress: bool = False):
    """The multinomial FSA program: the schedule at full width, the polish on the support, the
    raw-space coefficients (see the module docstring). ``Y`` (n, C) one-hot, ``rel`` (n,) relative
    weights of mean 1, ``live`` (M,) bool, ``schedule`` (n_iter,) int32 M_e, ``Q`` the sum-zero
    basis; ``rounds``: the refinement rounds of :func:`softmax_refine` (run when ``refine``, which
    needs ``polish``); ``progress``: every iteration ticks the bar of
    :func:`~jaxselect.anneal.solver.ticking`. Returns a :class:`SoftmaxOutput`."""
    n, m = design.shape
    C = Y.shape[1]
    dtype = design.dtype
    nf = jnp.asarray(n, dtype)
    livef = live.astype(dtype)
    if fixed_lr:
        eta = lr.astype(dtype)
    else:
        lam = jnp.maximum(_power_lambda(design, rel, livef, dtype), jnp.ones((), dtype))  # 1: the intercepts
        eta = 1.0 / (SOFTMAX_CURVATURE * lam + l2)

    def body(e, carry):
        V, b, active, path = carry
        S = design.mv(V) + b[None, :]
        val, logp = _objective(S, Y, rel)
        path = path.at[e].set(val + 0.5 * l2 * jnp.sum(V * V))
        G = (jnp.exp(logp) - Y) * (rel / nf)[:, None]
        gV = design.rmv(G.T).T + l2 * V
        mask = active[:, None].astype(dtype)
        V = (V - eta * gV) * mask
        b = b - eta * jnp.sum(G, axis=0)
        active = keep_largest(V, active, schedule[e])
        if progress:  # the bar of solver.ticking: one iteration over the M columns
            jax.debug.callback(functools.partial(tick, m), e)
        return V * active[:, None].astype(dtype), b, active, path

    n_iter = schedule.shape[0]
    init = (jnp.zeros((m, C), dtype), jnp.zeros((C,), dtype), live.astype(bool), jnp.zeros((n_iter,), dtype))
    V, b, active, path = jax.lax.fori_loop(0, n_iter, body, init)
    support = jnp.nonzero(active, size=k, fill_value=0)[0].astype(jnp.int32)
    Vs = jnp.take(V, support, axis=0)
    status = jnp.asarray(OK, jnp.int32)
    finite = jnp.all(jnp.isfinite(Vs)) & jnp.all(jnp.isfinite(b)) & jnp.all(jnp.isfinite(path))
    if polish:
        Z = design.take(support).materialize()
        V1, b1, converged, fin, f1 = lm_newton(Z, Y, rel, Vs, b, l2, Q, tol, max_iter)
        if refine:
            fit = _Round(support, V1, b1, f1, converged, fin, jnp.zeros((), jnp.int32), jnp.ones((), bool))
            fit = softmax_refine(design, Y, rel, live.astype(bool), fit, l2, Q, tol, max_iter, rounds)
            support, V1, b1, converged, fin = fit.support, fit.V, fit.b, fit.converged, fit.finite
        status = jnp.where(converged, status, jnp.asarray(NOT_CONVERGED, jnp.int32))
        Vs, b = V1, b1
        finite = finite & fin
    status = jnp.where(finite, status, status | jnp.asarray(NONFINITE, jnp.int32))
    factor = jnp.take(design.factor, support)
    mean = jnp.take(design.mean, support)
    coef = Vs * factor[:, None]
    intercept = b - mean @ coef
    return SoftmaxOutput(support, coef, intercept, path, jnp.reshape(eta, (1,)), status)
