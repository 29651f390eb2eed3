"""Cost-sensitive group OMP for generalised linear models (Hu et al., Appendix B, Algorithm 3).

Hu, Grubb, Bagnell & Hebert, "Efficient Feature Group Sequencing for Anytime Linear Prediction".
With Z the standardised, group-whitened design (n, D), coefficients W (D, T), an unpenalised
intercept b (T,) and a smooth per-example loss ℓ, the regularised GLM risk is (eq. 21)

    r(W, b) = (1/n) Σ_i ℓ(Wᵀz_i + b, y_i) + (λ/2) ‖W‖_F²,

and its gradient w.r.t. W (eq. 22, with ``G_i = ∂ℓ/∂s`` at the scores s_i = Wᵀz_i + b)

    ∇_W r = (1/n) Σ_i z_i G_iᵀ + λ W = Zᵀ G / n + λ W.

Algorithm 3: starting from the intercept-only model, step j computes ∇_W r at the current model
(unselected groups have W_g = 0), picks ``argmax_g ‖(∇_W r)_g‖_F² / c(g)`` among the remaining
groups — on whitened groups this is the whitened gradient norm of Algorithm 1 — and refits the GLM
on the features of the selected groups (warm-started damped Newton, see below). Losses
(``ℓ(s, y)`` for one example, s and y in R^T):

* ``"logistic"``: ``Σ_k softplus(s_k) − y_k s_k`` with labels y ∈ {0, 1}^T (T = 1 for a vector y;
  several columns are independent binary problems sharing the selected groups);
* ``"softmax"``: ``logsumexp(s) − s_y`` with integer class labels 0..T−1 (multinomial);
* ``"squared"``: ``½ ‖s − y‖²`` (then Algorithm 3 is Algorithm 1 up to scaling of Y);
* a callable ``loss(scores, Y)`` of (n, T) scores and (n, T) targets returning the (n,) per-example
  losses (or their scalar mean); it must be smooth, convex and separable over examples. Its
  gradient and per-example Hessian come from ``jax.grad`` / ``jax.jvp``.

Refit (inside the jitted ``lax.scan``): the selected features occupy a fixed number P of "slots"
(the features of the ``max_steps`` largest groups); empty slots are zero columns with an identity
Hessian so shapes stay static. Each refit is Newton's method on (W_S, b) with an Armijo
backtracking line search, warm-started from the previous step's model, run in a ``lax.while_loop``
until ``max |∇r| ≤ tol`` (default 1e-7 in float64, 1e-4 in float32) or ``max_iter`` iterations.
Forming the Hessian ``[Z_S, 1]ᵀ diag(∂²ℓ) [Z_S, 1] / n + λ`` costs O(n·P²·T²) per iteration, so
wide problems ((P+1)·T > 256 unknowns) solve each Newton step by Jacobi-preconditioned
conjugate gradients on Hessian-vector products instead, O(n·P·T) each (``newton_solver``).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect import anytime
from jaxselect._validation import as_labels, as_targets, check_choice, check_float, check_int
from jaxselect.groups import Groups
from jaxselect.linalg import gather_groups
from jaxselect.path import SelectionPath
from jaxselect.prepare import Transform, to_raw_coef, whiten_design

__all__ = ["glm_omp", "glm_predict", "glm_accuracy", "GLMInfo", "GLM_LOSSES"]

GLM_LOSSES = ("logistic", "softmax", "squared")
CRITERIA = ("whiten", "no_whiten", "single")
NEWTON_SOLVERS = ("auto", "cholesky", "cg")
# Above this many unknowns (P+1)·T, "auto" solves Newton steps by CG instead of forming the Hessian.
CG_MIN_UNKNOWNS = 256


class GLMInfo(NamedTuple):
    """Solver diagnostics of :func:`glm_omp` (``return_info=True``), one entry per step.

    Attributes:
      n_iter: (m,) int32 Newton iterations of the refit after step j.
      grad_norm: (m,) max |∇r| over the active coefficients and the intercept after the refit.
      converged: (m,) bool, ``grad_norm ≤ tol``.
      loss: (m,) regularised risk r(W_j, b_j) (eq. 21) after the refit.
      null_loss: () risk of the intercept-only model.
    """

    n_iter: jax.Array
    grad_norm: jax.Array
    converged: jax.Array
    loss: jax.Array
    null_loss: jax.Array


# ---------------------------------------------------------------------------------------------
# Losses: each returns per-example losses (n,), their score gradient G (n, T) and Hessian (n, T, T).


def _builtin_parts(name: str):
    if name == "squared":
        def value(S, Y):
            return 0.5 * jnp.sum((S - Y) ** 2, axis=1)

        def grad(S, Y):
            return S - Y

        def hess(S, Y):
            n, t = S.shape
            return jnp.broadcast_to(jnp.eye(t, dtype=S.dtype)[None, :, :], (n, t, t))
    elif name == "logistic":
        def value(S, Y):
            return jnp.sum(jax.nn.softplus(S) - Y * S, axis=1)

        def grad(S, Y):
            return jax.nn.sigmoid(S) - Y

        def hess(S, Y):
            p = jax.nn.sigmoid(S)
            t = S.shape[1]
            return (p * (1 - p))[:, :, None] * jnp.eye(t, dtype=S.dtype)[None, :, :]
    else:  # softmax
        def value(S, Y):
            return jax.nn.logsumexp(S, axis=1) - jnp.sum(Y * S, axis=1)

        def grad(S, Y):
            return jax.nn.softmax(S, axis=1) - Y

        def hess(S, Y):
            p = jax.nn.softmax(S, axis=1)
            t = S.shape[1]
            return p[:, :, None] * jnp.eye(t, dtype=S.dtype)[None, :, :] - p[:, :, None] * p[:, None, :]
    return value, grad, hess


def _callable_parts(fn: Callable):
    def value(S, Y):
        out = jnp.asarray(fn(S, Y))
        # A scalar mean m is spread as m on every example (same sum n·m, same derivatives).
        return out if out.ndim == 1 else out * jnp.ones((S.shape[0],), S.dtype)

    def total(S, Y):
        return jnp.sum(value(S, Y))

    def grad(S, Y):
        return jax.grad(total)(S, Y)

    def hess(S, Y):
        # Column k of every per-example Hessian: a forward-over-reverse product with e_k.
        t = S.shape[1]
        cols = [jax.jvp(lambda s: grad(s, Y), (S,), (jnp.zeros_like(S).at[:, k].set(1),))[1] for k in range(t)]
        return jnp.stack(cols, axis=2)

    return value, grad, hess


def _loss_parts(loss):
    return _callable_parts(loss) if callable(loss) else _builtin_parts(loss)


def _risk(Zs, Y, V, b, active, l2, value):
    """Regularised risk r (eq. 21) on the slot design Zs (n, P) with slot coefficients V (P, T)."""
    S = Zs @ V + b[None, :]
    pen = jnp.sum(jnp.where(active[:, None], V * V, jnp.zeros_like(V)))
    return jnp.mean(value(S, Y)) + 0.5 * l2 * pen


def _risk_grad(Zs, Y, V, b, active, l2, grad):
    """(∇_V r (P, T), ∇_b r (T,)) at (V, b); zero on inactive slots."""
    n = Zs.shape[0]
    S = Zs @ V + b[None, :]
    G = grad(S, Y)
    gV = (G.T @ Zs).T / jnp.asarray(n, Zs.dtype) + l2 * V
    gV = jnp.where(active[:, None], gV, jnp.zeros_like(gV))
    return gV, jnp.mean(G, axis=0)


# ---------------------------------------------------------------------------------------------
# Newton refit on the active slots.


class _Newton(NamedTuple):
    V: jax.Array
    b: jax.Array
    f: jax.Array
    gmax: jax.Array
    it: jax.Array


def _newton(Zs, Y, V, b, active, l2, parts, *, softmax, tol, max_iter, solver="cholesky"):
    """Damped Newton for r restricted to the active slots, warm-started at (V, b).

    ``solver`` (static): "cholesky" forms the (m, m) Hessian, m = (P+1)·T, in O(n·m²) and solves
    exactly; "cg" never forms it — a Jacobi-preconditioned conjugate-gradient solve with
    Hessian-vector products ``Aᵀ (h ⊙ (A v)) / n`` in O(n·m) each, stopped at the inexact-Newton
    forcing tolerance ``‖H s + g‖ ≤ min(0.1, √‖g‖)·‖g‖`` (superlinear convergence; PCG from 0 on
    an SPD H always gives a descent direction, so the line search below is unchanged).
    """
    value, grad, hess = parts
    n, P = Zs.shape
    T = Y.shape[1]
    dtype = Zs.dtype
    nf = jnp.asarray(n, dtype)
    m = (P + 1) * T
    pen_mask = jnp.concatenate([jnp.repeat(active, T), jnp.zeros((T,), bool)])  # penalised entries
    free = jnp.concatenate([jnp.repeat(active, T), jnp.ones((T,), bool)])  # entries that may move
    A = jnp.concatenate([Zs, jnp.ones((n, 1), dtype)], axis=1)  # (n, P+1)
    # softmax: shifting every intercept by the same constant leaves the risk unchanged; that one
    # null direction u of the Hessian gets curvature 1 (the gradient is orthogonal to u, so the
    # Newton step is the pseudo-inverse step). ``softmax`` is a traced bool.
    u = jnp.concatenate([jnp.zeros((P * T,), dtype), jnp.ones((T,), dtype) / jnp.sqrt(jnp.asarray(T, dtype))])

    def f_of(V, b):
        return _risk(Zs, Y, V, b, active, l2, value)

    def g_of(V, b):
        gV, gb = _risk_grad(Zs, Y, V, b, active, l2, grad)
        return jnp.concatenate([gV.reshape(-1), gb])

    def cond(st: _Newton):
        return (st.it < max_iter) & (st.gmax > tol)

    # Diagonal added to the data Hessian: λ on penalised entries, 1 on entries that may not move.
    extra_diag = jnp.where(pen_mask, l2, jnp.zeros((), dtype)) + jnp.where(free, 0, 1).astype(dtype)
    zero_m = jnp.zeros((m,), dtype)

    def cholesky_step(g, h):
        null_fix = jnp.where(softmax, u[:, None] * u[None, :], jnp.zeros((m, m), dtype))
        Ah = jnp.einsum("ia,ikl->iakl", A, h)
        H = jnp.einsum("iakl,ic->akcl", Ah, A).reshape(m, m) / nf
        H = jnp.where(free[:, None] & free[None, :], H, jnp.zeros_like(H))
        H = H + jnp.diag(extra_diag)
        H = 0.5 * (H + H.T) + null_fix
        jitter = 10 * jnp.finfo(dtype).eps * jnp.maximum(1.0, jnp.max(jnp.diagonal(H)))
        L = jnp.linalg.cholesky(H + jitter * jnp.eye(m, dtype=dtype))
        return -jax.scipy.linalg.cho_solve((L, True), g)

    def cg_step(g, h):
        def hvp(v):
            vf = jnp.where(free, v, zero_m)
            Sv = Zs @ vf[: P * T].reshape(P, T) + vf[P * T :][None, :]  # (n, T) = A v
            Q = jnp.einsum("ikl,il->ik", h, Sv)  # per-example Hessian times scores
            hv = jnp.concatenate([((Q.T @ Zs).T / nf).reshape(-1), jnp.sum(Q, axis=0) / nf])
            out = jnp.where(free, hv, zero_m) + extra_diag * v
            return jnp.where(softmax, out + u * jnp.dot(u, v), out)

        hdiag = jnp.diagonal(h, axis1=1, axis2=2)  # (n, T)
        dg = jnp.concatenate([((hdiag.T @ (Zs * Zs)).T / nf).reshape(-1), jnp.sum(hdiag, axis=0) / nf])
        dg = jnp.where(free, dg, zero_m) + extra_diag + jnp.where(softmax, u * u, zero_m)
        inv_dg = 1.0 / jnp.maximum(dg, jnp.finfo(dtype).tiny)
        gnorm = jnp.linalg.norm(g)
        forcing = jnp.minimum(0.1, jnp.sqrt(gnorm))
        step, _ = jax.scipy.sparse.linalg.cg(
            hvp, -g, M=lambda r: inv_dg * r, tol=forcing, atol=0.1 * tol, maxiter=max(m, 20)
        )
        # softmax: drop the component along the null direction u (preconditioned CG need not keep
        # the iterate orthogonal to it), so the intercepts stay centred as with the exact solve.
        return jnp.where(softmax, step - u * jnp.dot(u, step), step)

    def body(st: _Newton):
        g = g_of(st.V, st.b)
        S = Zs @ st.V + st.b[None, :]
        h = hess(S, Y)  # (n, T, T)
        step = cholesky_step(g, h) if solver == "cholesky" else cg_step(g, h)
        step = jnp.where(free, step, jnp.zeros_like(step))
        slope = jnp.dot(g, step)
        dV, db = step[: P * T].reshape(P, T), step[P * T :]

        def ls_cond(c):
            t, f_new = c
            return (f_new > st.f + 1e-4 * t * slope) & (t > 1e-10)

        def ls_body(c):
            t, _ = c
            t = 0.5 * t
            return t, f_of(st.V + t * dV, st.b + t * db)

        t0 = jnp.ones((), dtype)
        t, f_new = jax.lax.while_loop(ls_cond, ls_body, (t0, f_of(st.V + dV, st.b + db)))
        ok = jnp.isfinite(f_new) & (f_new <= st.f)
        V = jnp.where(ok, st.V + t * dV, st.V)
        b = jnp.where(ok, st.b + t * db, st.b)
        f = jnp.where(ok, f_new, st.f)
        gmax = jnp.max(jnp.abs(g_of(V, b)))
        # A failed line search (no decrease at the round-off level) ends the solve.
        it = jnp.where(ok, st.it + 1, max_iter)
        return _Newton(V, b, f, gmax, it)

    f0 = f_of(V, b)
    g0 = jnp.max(jnp.abs(g_of(V, b)))
    return jax.lax.while_loop(cond, body, _Newton(V, b, f0, g0, jnp.zeros((), jnp.int32)))


# ---------------------------------------------------------------------------------------------
# The sequencing scan.


class _State(NamedTuple):
    V: jax.Array  # (P, T) coefficients of the slots
    b: jax.Array  # (T,) intercept
    slot_feature: jax.Array  # (P,) int32 feature of each slot, D when empty
    selected: jax.Array  # (J,) bool
    count: jax.Array  # () int32 filled slots
    cum_cost: jax.Array  # ()


class _StepOut(NamedTuple):
    group: jax.Array
    cum_cost: jax.Array
    W: jax.Array  # (D, T)
    b: jax.Array  # (T,)
    f: jax.Array
    gmax: jax.Array
    it: jax.Array


def _select_scores(grad_full, index, mask, metric_white, metric_std, criterion):
    """(J,) criterion values; ``criterion`` is a traced int: 0 whiten, 1 no_whiten, 2 single."""
    g = gather_groups(grad_full, index, mask, axis=0)  # (J, s, T)
    vw = jnp.einsum("jab,jbt->jat", metric_white, g)
    vs = jnp.einsum("jab,jbt->jat", metric_std, g)
    whiten = jnp.sum(vw * vw, axis=(1, 2))
    no_whiten = jnp.sum(vs * vs, axis=(1, 2))
    single = jnp.max(jnp.sum(vs * vs, axis=2), axis=1)
    return jnp.where(criterion == 0, whiten, jnp.where(criterion == 1, no_whiten, single))


@partial(jax.jit, static_argnames=("loss", "max_steps", "capacity", "solver"))
def _glm_run(Z, Y, live, metric_white, metric_std, groups: Groups, l2, tol, criterion, cost_sensitive,
             max_iter, softmax, *, loss, max_steps, capacity, solver="cholesky"):
    """Scan of max_steps + 1 iterations: iteration 0 fits the intercept-only model, iteration j ≥ 1
    selects and adds group g_j and refits (one traced Newton solver serves both)."""
    parts = _loss_parts(loss)
    n, D = Z.shape
    T = Y.shape[1]
    dtype = Z.dtype
    index, mask, costs = groups.index, groups.mask, groups.costs
    J = index.shape[0]
    P = capacity
    denom = jnp.where(cost_sensitive, costs, jnp.ones_like(costs))
    newton = partial(_newton, l2=l2, parts=parts, softmax=softmax, tol=tol, max_iter=max_iter, solver=solver)

    def slots_design(slot_feature):
        Zs = jnp.take(Z, slot_feature, axis=1, mode="fill", fill_value=0)
        active = jnp.take(live, slot_feature, mode="fill", fill_value=False)
        return Zs, active

    state0 = _State(
        jnp.zeros((P, T), dtype), jnp.zeros((T,), dtype), jnp.full((P,), D, jnp.int32),
        jnp.zeros((J,), bool), jnp.zeros((), jnp.int32), jnp.zeros((), dtype),
    )

    def step(state: _State, j):
        take = j > 0
        Zs = jnp.take(Z, state.slot_feature, axis=1, mode="fill", fill_value=0)
        S = Zs @ state.V + state.b[None, :]
        G = parts[1](S, Y)
        W_full = jnp.zeros((D, T), dtype).at[state.slot_feature].set(state.V, mode="drop")
        grad_full = (G.T @ Z).T / jnp.asarray(n, dtype) + l2 * W_full  # eq. 22
        scores = _select_scores(grad_full, index, mask, metric_white, metric_std, criterion) / denom
        h = jnp.argmax(jnp.where(state.selected, -jnp.inf, scores)).astype(jnp.int32)
        add = mask[h] & take
        new_slots = jnp.where(add, index[h], D).astype(jnp.int32)
        slot_feature = jax.lax.dynamic_update_slice(state.slot_feature, new_slots, (state.count,))
        Zs, active = slots_design(slot_feature)
        res = newton(Zs, Y, state.V, state.b, active)
        new = _State(
            res.V, res.b, slot_feature, state.selected.at[h].set(state.selected[h] | take),
            state.count + add.sum(dtype=jnp.int32), state.cum_cost + jnp.where(take, costs[h], 0),
        )
        W = jnp.zeros((D, T), dtype).at[slot_feature].set(res.V, mode="drop")
        return new, _StepOut(jnp.where(take, h, -1), new.cum_cost, W, res.b, res.f, res.gmax, res.it)

    _, out = jax.lax.scan(step, state0, jnp.arange(max_steps + 1, dtype=jnp.int32))
    null_f, null_b = out.f[0], out.b[0]
    out = jax.tree.map(lambda a: a[1:], out)
    return out, null_f, null_b


def _capacity(mask: np.ndarray, max_steps: int) -> int:
    sizes = np.sort(mask.sum(axis=1))[::-1]
    return int(sizes[:max_steps].sum()) + mask.shape[1]


def _check_targets(loss, Y, n: int, dtype, n_classes):
    """Validate Y for the loss; returns (Y (n, T) float, T)."""
    if loss == "softmax":
        if not isinstance(Y, (np.ndarray, jax.Array)):
            Y = np.asarray(Y)
        if np.asarray(Y).ndim != 1:
            raise ValueError(
                f"softmax needs a 1-D vector of integer class labels 0..C-1; got shape {np.asarray(Y).shape}"
            )
        labels, C = as_labels(np.asarray(Y), n, "Y", n_classes=n_classes)
        if C < 2:
            raise ValueError("softmax needs at least 2 classes; Y has only class 0")
        missing = np.setdiff1d(np.arange(C), labels)
        if missing.size:
            raise ValueError(
                f"class(es) {missing[:10].tolist()} never occur in Y: their unpenalised intercepts would "
                "diverge; relabel the classes 0..C-1 consecutively"
            )
        return jax.nn.one_hot(jnp.asarray(labels), C, dtype=dtype), C
    Yt, _ = as_targets(Y, n, "Y", dtype=dtype)
    if loss == "logistic":
        vals = np.unique(np.asarray(Yt))
        if not np.all(np.isin(vals, [0.0, 1.0])):
            hint = " (for labels in {-1, +1} pass (y + 1) / 2)" if np.all(np.isin(vals, [-1.0, 1.0])) else ""
            extra = " — for more than two classes use loss='softmax'" if vals.size > 2 and np.all(vals == np.round(vals)) else ""
            raise ValueError(
                f"logistic loss needs labels in {{0, 1}}; got values {vals[:6].tolist()}{hint}{extra}"
            )
        Ynp = np.asarray(Yt)
        constant = np.flatnonzero(Ynp.min(axis=0) == Ynp.max(axis=0))
        if constant.size:
            raise ValueError(
                f"label column(s) {constant.tolist()} of Y contain a single class: the intercept would diverge"
            )
    return Yt, Yt.shape[1]


def _check_callable(loss, n: int, T: int, dtype) -> None:
    S = jax.ShapeDtypeStruct((n, T), dtype)
    try:
        out = jax.eval_shape(loss, S, S)
    except Exception as exc:  # noqa: BLE001 - re-raised with context
        raise ValueError(
            f"the loss callable failed on (n, T) = ({n}, {T}) scores and targets: {exc}"
        ) from exc
    if not hasattr(out, "shape") or out.shape not in ((n,), ()):
        raise ValueError(
            f"the loss callable must return per-example losses of shape ({n},) or a scalar mean; "
            f"got {getattr(out, 'shape', type(out).__name__)}"
        )


def glm_omp(
    X,
    Y,
    groups=None,
    *,
    loss="logistic",
    l2: float = 1e-3,
    max_steps=None,
    criterion: str = "whiten",
    cost_sensitive: bool = True,
    whiten: bool = True,
    tol=None,
    max_iter: int = 50,
    n_classes=None,
    drop_constant: bool = False,
    rank_tol=None,
    return_info: bool = False,
    newton_solver: str = "auto",
):
    """Cost-sensitive group OMP for GLMs (Hu et al., Algorithm 3): an anytime classifier.

    At step j the gradient ``∇_W r = Zᵀ G / n + λ W`` (eq. 22) of the regularised risk (eq. 21) is
    taken at the current model, the remaining group maximising ``‖(∇_W r)_g‖_F² / c(g)`` is added,
    and the GLM is refitted on the selected features (warm-started damped Newton to ``tol``).

    Args:
      X: (n, D) raw features (a row-sharded jax.Array stays sharded).
      Y: ``"logistic"``: (n,) or (n, T) labels in {0, 1}; ``"softmax"``: (n,) integer classes
        0..C−1 (every class must occur); ``"squared"`` / callable: (n,) or (n, T) real targets.
      groups: None (singletons, unit costs), (D,) group ids, or a :class:`Groups` with costs.
      loss: "logistic", "softmax", "squared" or a callable ``loss(scores (n, T), Y (n, T))``
        returning (n,) per-example losses (or their mean); smooth, convex, separable.
      l2: ridge λ ≥ 0 on W in whitened coordinates (the intercept is not penalised). sklearn's
        ``LogisticRegression(C=…)`` on the same columns corresponds to ``λ = 1/(C·n)``.
      max_steps: number of groups to sequence (default all J; clipped to J).
      criterion: "whiten" (Alg. 3 on whitened groups), "no_whiten" (gradient w.r.t. the merely
        standardised features) or "single" (its best single feature), as in :func:`cs_omp`.
      cost_sensitive: divide the criterion by c(g) (False: cost-blind G-OMP).
      whiten: group-whiten the design (the penalty then acts on whitened coefficients).
      tol: stop each refit when ``max |∇r| ≤ tol`` (default 1e-7 for float64, 1e-4 for float32).
      max_iter: Newton iterations per refit.
      n_classes: softmax only: number of classes C (default max label + 1).
      drop_constant, rank_tol: as in :func:`jaxselect.prepare`.
      return_info: also return a :class:`GLMInfo`.
      newton_solver: how each Newton step is solved. "cholesky" forms the ((P+1)·T)² Hessian
        (O(n·P²·T²) per iteration, exact); "cg" uses preconditioned conjugate gradients on
        Hessian-vector products (O(n·P·T) each, inexact-Newton tolerance); "auto" picks "cg"
        when (P+1)·T > 256 (wide problems), else "cholesky". P is the number of
        feature slots (the features of the ``max_steps`` largest groups).

    Returns:
      A :class:`SelectionPath` of m = min(max_steps, J) prefixes: raw-space ``coef`` (m, D, T) and
      ``intercept`` (m, T) of the linear scores (T = C classes for softmax), ``objective`` = the
      fraction ``1 − r(W_j)/r(W_0)`` of the intercept-only model's regularised risk removed, and
      ``null_intercept`` the intercept-only scores. With ``return_info``: ``(path, info)``.
      Use :func:`glm_predict` for probabilities at a budget (``jaxselect.predict`` gives scores).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 4))
    >>> y = (X[:, 2] - X[:, 0] + 0.1 * rng.normal(size=200) > 0).astype(int)
    >>> path = glm_omp(X, y, Groups.from_ids([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0]))
    >>> sorted(path.order.tolist()[:2])
    [0, 2]
    """
    if isinstance(loss, str):
        check_choice(loss, "loss", GLM_LOSSES)
    elif not callable(loss):
        raise TypeError(f"loss must be one of {GLM_LOSSES} or a callable(scores, Y); got {loss!r}")
    check_choice(criterion, "criterion", CRITERIA)
    l2 = check_float(l2, "l2", low=0.0)
    max_iter = check_int(max_iter, "max_iter", low=1)
    if n_classes is not None:
        n_classes = check_int(n_classes, "n_classes", low=2)
    design, groups = whiten_design(X, groups, whiten=whiten, drop_constant=drop_constant, rank_tol=rank_tol)
    Z = design.Z
    n, D = Z.shape
    dtype = Z.dtype
    Yt, T = _check_targets(loss, Y, n, dtype, n_classes)
    if callable(loss):
        _check_callable(loss, n, T, dtype)
    if tol is None:
        tol = 1e-7 if dtype == np.float64 else 1e-4
    tol = check_float(tol, "tol", low=0.0, strict_low=True)
    J = groups.n_groups
    steps = J if max_steps is None else min(check_int(max_steps, "max_steps", low=1), J)
    capacity = _capacity(np.asarray(groups.mask), steps)
    check_choice(newton_solver, "newton_solver", NEWTON_SOLVERS)
    solver = newton_solver
    if solver == "auto":
        solver = "cg" if (capacity + 1) * T > CG_MIN_UNKNOWNS else "cholesky"
    out, null_f, null_b = _glm_run(
        Z, Yt, design.live, design.metric_white, design.metric_std, groups,
        jnp.asarray(l2, dtype), jnp.asarray(tol, dtype), jnp.asarray(CRITERIA.index(criterion), jnp.int32),
        jnp.asarray(bool(cost_sensitive)), jnp.asarray(max_iter, jnp.int32), jnp.asarray(loss == "softmax"),
        loss=loss, max_steps=steps, capacity=capacity, solver=solver,
    )
    path, info = _to_path(design, groups, out, null_f, null_b, tol)
    return (path, info) if return_info else path


@jax.jit
def _to_path(design, groups: Groups, out: _StepOut, null_f, null_b, tol):
    T = out.b.shape[1]
    dtype = out.W.dtype
    transform = Transform(
        design.x_mean, design.x_scale, jnp.zeros((T,), dtype), jnp.ones((T,), dtype),
        design.basis, groups.index, groups.mask,
    )
    coef, offset = to_raw_coef(transform, out.W)
    safe = jnp.where(null_f > 0, null_f, jnp.ones_like(null_f))
    objective = jnp.where(null_f > 0, 1.0 - out.f / safe, -out.f)
    path = SelectionPath(
        order=out.group, cum_cost=out.cum_cost, objective=objective, coef=coef,
        intercept=offset + out.b, null_intercept=null_b,
    )
    info = GLMInfo(out.it, out.gmax, out.gmax <= tol, out.f, null_f)
    return path, info



def _check_loss_name(loss):
    if isinstance(loss, str):
        check_choice(loss, "loss", GLM_LOSSES)
    elif not callable(loss):
        raise TypeError(f"loss must be one of {GLM_LOSSES} or a callable; got {loss!r}")


def glm_predict(path: SelectionPath, X, budget=None, *, loss="logistic") -> jax.Array:
    """Anytime GLM predictions: probabilities (logistic, softmax) or scores (squared, callable).

    At budget B the model of the longest prefix with ``cum_cost ≤ B`` is used (the intercept-only
    model below the cheapest group), exactly as :func:`jaxselect.predict`, whose linear scores are
    passed through the inverse link: ``σ(s)`` for "logistic", ``softmax(s)`` over the classes for
    "softmax", the scores themselves otherwise.

    Args:
      path: from :func:`glm_omp`.
      X: (m, D) raw features.
      budget: feature budget B, or None for every prefix.
      loss: the loss the path was trained with.

    Returns:
      With a budget: (m,) for one logistic column, else (m, T) (T classes for softmax).
      Without: a leading (n_steps,) axis.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)); y = (X[:, 1] > 0).astype(int)
    >>> p = glm_predict(glm_omp(X, y), X, budget=1.0)
    >>> bool(np.mean((np.asarray(p) > 0.5) == y) > 0.9)
    True
    """
    _check_loss_name(loss)
    scores = anytime.predict(path, X, budget)
    if loss == "logistic":
        return jax.nn.sigmoid(scores)
    if loss == "softmax":
        return jax.nn.softmax(scores, axis=-1)
    return scores


def glm_accuracy(path: SelectionPath, X, y, *, loss="logistic") -> anytime.Curve:
    """Held-out classification accuracy of every prefix against its cumulative cost.

    Logistic paths predict class 1 where the score is > 0 (probability > ½), averaged over the label
    columns; softmax paths predict the arg-max class. The first point is the intercept-only model.

    Args:
      path: from :func:`glm_omp` with ``loss="logistic"`` or ``"softmax"``.
      X: (m, D) raw features.
      y: (m,) or (m, T) labels in {0, 1} (logistic) or (m,) classes (softmax).

    Returns:
      A :class:`jaxselect.Curve`.
    """
    _check_loss_name(loss)
    if loss not in ("logistic", "softmax"):
        raise ValueError(f"accuracy needs loss='logistic' or 'softmax'; got {loss!r}")

    if loss == "softmax":
        labels, _ = as_labels(np.asarray(y), np.asarray(y).shape[0], "y", n_classes=path.coef.shape[-1])
        y = np.eye(path.coef.shape[-1])[labels]  # one-hot, to line up with the (m, C) scores

    def metric(Yt, S):
        if loss == "logistic":
            return float(np.mean((S > 0) == (Yt > 0.5)))
        return float(np.mean(np.argmax(S, axis=1) == np.argmax(Yt, axis=1)))

    return anytime.objective_curve(path, X, y, metric=metric)
