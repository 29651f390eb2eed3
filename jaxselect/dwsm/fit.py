"""dwsm_fit: the user's door to the datum-wise sparse model (validation, then one compiled RCPI run).

Every check of the user's input runs here, on the host, before the compiled program: labels and
classes, X (NaN/Inf and scale, :func:`~jaxselect.as_data`; a numpy X is summarised on the host),
the MDP (:func:`~.mdp.make_spec`, numpy leaves), the RCPI options (:class:`~.problem.RCPIOptions`)
and the reward magnitudes (:mod:`~.problem`) — in numpy, so that no small device program is
compiled between the boundary and the solve. Inside a user's ``jit`` only shapes can be checked;
what goes wrong in values shows in the policy's ``status``. Then :func:`_fit` compiles
:func:`~.problem.rcpi_problem` and the RCPI solver (:func:`~.rcpi.rcpi_solver`) on the library's
driver (:func:`jaxselect.solver.run`) into one program; ``progress=True`` runs the driver's chunks
with a bar instead.
"""

from __future__ import annotations

import inspect
import warnings
from functools import partial
from typing import Callable

import jax
import numpy as np

from jaxselect.sharding import any_mesh
from jaxselect.solver import run

from .._progress import check_progress
from .._validation import check_int, host_array, is_traced
from ..design import as_data
from ..programs import jit
from . import progress as _progress
from .mdp import make_spec
from .policy import QUICK_BYTES, DWSMPolicy
from .policy import predict_policy as _predict
from .problem import (
    MDPOptions,
    RCPIOptions,
    check_dense,
    check_hypers,
    check_key,
    check_options,
    check_reward_magnitudes,
    legacy_options,
    rcpi_problem,
)
from .rcpi import driver_key, rcpi_solver

__all__ = ["dwsm_fit", "fit_with_acquired"]


def _problem(X, y, w, summary, spec, alpha, l2, explore, options, scale):
    options = options.replace(alpha=alpha, l2=l2, explore=explore)
    return rcpi_problem(spec, X, y, options=options, scale=scale, sample_weight=w, summary=summary)


_problem_program = jit(_problem, static_argnames=("options", "scale"))


@partial(jit, quick_max_bytes=QUICK_BYTES, static_argnames=("options", "scale", "n_iter", "report", "with_acquired"))
def _fit(X, y, w, summary, spec, alpha, l2, explore, key, patience, use_best, call_id, *, options, scale, n_iter,
         report, with_acquired):
    problem = _problem(X, y, w, summary, spec, alpha, l2, explore, options, scale)
    policy = run(rcpi_solver(n_iter, report=report), problem, key, patience, use_best, call_id, n_steps=n_iter)
    if not with_acquired:
        return policy
    return policy, _predict(policy, X)[1]


@partial(jit, quick_max_bytes=QUICK_BYTES)
def _acquired(policy, X):
    return _predict(policy, X)[1]


#: dwsm_fit's keywords of 0.3 that moved into mdp=MDPOptions(...)
_LEGACY_MDP = ("cost_matrix", "related", "gamma", "constant_columns")


def _fold_legacy(mdp, rcpi, scale, legacy: dict, stacklevel: int = 4):
    legacy = dict(legacy)
    if "standardize" in legacy:
        warnings.warn(
            "dwsm_fit(standardize=...) is deprecated: use scale='std' (standardize=True) or scale=None "
            "(standardize=False); the keyword goes in the next release",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        scale = "std" if legacy.pop("standardize") else None
    moved = {name: legacy.pop(name) for name in _LEGACY_MDP if name in legacy}
    for name in moved:
        warnings.warn(
            f"dwsm_fit({name}=...) is deprecated: pass mdp=MDPOptions({name}=...) (jaxselect.dwsm.MDPOptions); "
            "the keyword goes in the next release",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
    if moved:
        mdp = MDPOptions(**{**_mdp_fields(mdp), **moved})
    rcpi = legacy_options(rcpi, legacy, "dwsm_fit", stacklevel=stacklevel + 1)
    if legacy:
        raise TypeError(f"dwsm_fit() got unexpected keyword argument(s) {sorted(legacy)}")
    return mdp, rcpi, scale


def _mdp_fields(mdp):
    if mdp is None:
        return {}
    return {f: getattr(mdp, f) for f in ("cost_matrix", "related", "gamma", "constant_columns")}


def _check_mdp(mdp) -> MDPOptions:
    if mdp is None:
        return MDPOptions()
    if not isinstance(mdp, MDPOptions):
        raise TypeError(f"mdp must be a jaxselect.dwsm.MDPOptions (or None); got {type(mdp).__name__}")
    return mdp


def fit_with_acquired(
    key, X, y, *, lam=0.01, budget=None, groups=None, n_iter=10, scale="std", mdp=None, rcpi=None,
    n_classes=None, sample_weight=None, progress=False, verbose=False, callback=None, with_acquired=True,
    _legacy=None,
):
    """:func:`dwsm_fit`, and with ``with_acquired`` also the (n, d) bool mask of the features the
    returned policy acquires on the training rows (computed in the same compiled program: what
    :class:`~jaxselect.sklearn.DWSMClassifier` needs)."""
    check_dense(X, "dwsm_fit")
    key = check_key(key)
    mdp, rcpi, scale = _fold_legacy(mdp, rcpi, scale, _legacy or {}, stacklevel=6)
    mdp = _check_mdp(mdp)
    rcpi = check_options(rcpi)
    n_iter = check_int(n_iter, "n_iter", low=1)
    if scale not in ("std", None):
        raise ValueError(f"scale must be 'std' (standardise the columns on the training rows, the paper's) or None; got {scale!r}")
    show_bar = check_progress(progress)
    if n_classes is not None:
        n_classes = check_int(n_classes, "n_classes", low=1)
    # the front door: X (NaN/Inf, magnitudes), labels, weights, the constant-column mode, and the
    # column summary that standardises the MDP's features (one pass; on the host for a host X, so
    # that no device program runs before the solve)
    host = not isinstance(X, jax.Array) and not is_traced(X)
    data = as_data(
        X, y, sample_weight=sample_weight, targets="labels", n_classes=n_classes,
        constant_columns=mdp.constant_columns, scale="values", storage="host" if host else "device",
    )
    X, labels, C, w, summary = data.X, data.Y, data.n_classes, data.weights, data.summary
    dtype = np.dtype(summary.mean.dtype)
    if host:
        X = np.asarray(X, dtype=dtype)
    n, d = X.shape
    if n_classes is None:
        present = np.unique(host_array(labels))
        if present.size != C:
            seen = set(present.tolist())  # the first missing classes, without an arange of a huge label
            missing = np.asarray([c for c in range(min(C, present.size + 10)) if c not in seen][:10])
            raise ValueError(
                f"y must use the labels 0..C-1 with every class present; classes {missing.tolist()[:10]} "
                f"have no example (relabel y to 0..{present.size - 1}, or pass n_classes)"
            )
    alpha, l2, explore = check_hypers(rcpi, dtype)
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable(iteration, mean_return, accuracy) or None")
    if verbose and callback is None:
        callback = _progress.print_progress
    spec = make_spec(
        d, C, dtype=dtype, lam=lam, gamma=mdp.gamma, budget=budget, cost_matrix=mdp.cost_matrix, groups=groups,
        related=mdp.related,
    )
    check_reward_magnitudes(spec, dtype)
    patience = n_iter if rcpi.patience is None else rcpi.patience
    # the static part of the options (the traced hyper-parameters go in as arrays)
    static = rcpi.replace(alpha=None, l2=None, explore=None, patience=None, select="best")
    # not a check: inside a user's jit the compiled function reports whenever it runs, so its
    # callback stays registered and its exceptions reach JAX's runtime
    eager = not is_traced((key, X, labels, spec, alpha, l2, explore))
    call_id = _progress.register(callback, guard=eager)
    err = None
    try:
        hypers = (alpha, l2, explore)
        flags = (key, np.int32(patience), np.bool_(rcpi.select == "best"), np.int32(call_id))
        if show_bar and eager:
            problem = _problem_program(X, labels, w, summary, spec, *hypers, options=static, scale=scale)
            solver = rcpi_solver(n_iter, report=callback is not None)
            flags = (driver_key(key),) + flags[1:]
            out = run(solver, problem, *flags, n_steps=n_iter, progress=True)
            if with_acquired:
                out = (out, _acquired(out, X))
        else:
            out = _fit(
                X, labels, w, summary, spec, *hypers, *flags, options=static, scale=scale, n_iter=n_iter,
                report=callback is not None, with_acquired=with_acquired,
            )
        if callback is not None and eager:
            jax.effects_barrier()  # the fit has run: wait for its callbacks
    finally:
        if callback is not None and eager:
            err = _progress.unregister(call_id)  # forget the callback, collect what it raised
    if err is not None:
        raise err
    return out


@any_mesh
def dwsm_fit(
    key,
    X,
    y,
    *,
    lam=0.01,
    budget=None,
    groups=None,
    n_iter: int = 10,
    scale: str | None = "std",
    mdp: MDPOptions | None = None,
    rcpi: RCPIOptions | None = None,
    n_classes: int | None = None,
    sample_weight=None,
    progress: bool = False,
    verbose: bool = False,
    callback: Callable | None = None,
    **legacy,
) -> DWSMPolicy:
    """Learn a datum-wise sparse classifier by RCPI (Dulac-Arnold et al. 2012, §3–4).

    The policy maximises the MDP return, i.e. minimises the datum-wise loss (paper eq. 2 and
    Table 1): ``(1/N) Σ_i [ C[ŷ_i, y_i] + Σ_t c_{j_t} ρ_t ]`` where c_j is the cost of unit j
    (``Groups.costs``; 1 by default) and ρ_t = λ (or γ for an acquisition unrelated to an acquired
    unit). Base model: ``Δ(ŷ, y) + λ ‖z‖₀``.

    Every iterate's greedy policy is evaluated on the training rows (each episode from z = 0) and the
    one with the lowest datum-wise loss is returned (θ_0, "classify at once as the cheapest class",
    included): the returned policy is never worse on the training data than classifying at once or
    than any iterate seen during training. ``policy.train_loss`` holds every iterate's loss,
    ``policy.best`` the one returned.

    Runs inside a user's ``jax.jit`` with traced X and y when ``n_classes`` is given (the number of
    classes cannot be read from traced labels; value checks are skipped under trace). ``lam``,
    ``gamma``, ``alpha``, ``l2``, ``explore`` and ``budget`` may be traced.

    Args:
      key: PRNG key (the fit is deterministic given it).
      X: (n, d) raw features, n >= 2 (standardised on these rows inside; a row-sharded jax.Array
        is fine). Constant columns (max == min) are inert: never used, weight 0.
      y: (n,) or (n, 1) integer labels 0..C-1 (bool: 0/1); every class present unless
        ``n_classes`` is given.
      lam: λ >= 0; acquiring unit j rewards −λ·c_j (the paper's cost-sensitive reward −ξ_j is
        ``lam=1`` with ``c = ξ``).
      budget: None, or a hard budget B >= 0 on the *summed cost* of the units a datum acquires:
        unit j is acquirable while ``cost so far + c_j <= B`` (relative tolerance 32·eps against
        float rounding). With unit costs and no groups this is the paper's ``‖z‖₀ <= M`` (Table 2);
        with groups and unit costs it counts groups — to count the features of groups, give each
        group the cost of its size (``Groups.from_ids(ids, costs=sizes)``; the rewards then charge
        λ per feature too). A budget beyond the float range means no budget.
      groups: None (every feature its own unit, cost 1), (d,) group ids (cost 1 per group), a
        :class:`~jaxselect.Groups` (costs from ``Groups.costs``), or a list of index lists (cost 1
        per group); an action acquires a whole group (§4.2.4).
      n_iter: RCPI iterations (paper: 10; at most, see ``RCPIOptions.patience``): the driver's steps.
      scale: ``"std"`` (default): standardise the features on the training rows (the paper's);
        None: use X as it is (constant columns stay inert). (``standardize=True/False`` before 0.4.)
      mdp: the :class:`~jaxselect.dwsm.MDPOptions` of the variant beyond ``lam``/``budget``/
        ``groups``: ``cost_matrix`` ((C, C) ``C[predicted, true]``, default ``1 − I``),
        ``related`` ((J, J) bool, ``related[j, k]``: unit j is related to unit k, §4.2.5),
        ``gamma`` (γ >= 0 for unrelated acquisitions, default 2λ) and ``constant_columns``
        (``"inert"``, default, or ``"raise"``: ValueError naming the constant columns).
      rcpi: the :class:`~jaxselect.dwsm.RCPIOptions` of the solver: the state budget
        ``n_states`` (N_s), ``states_per_example``, the action sample ``acquisitions``, ``alpha``
        (α-mixture weight in [0, 1), paper 0.7), ``l2`` (ridge weight > 0 of the per-action
        regression, default 0.01, with the library's convention: θ_a minimises
        ``(1/m_a) Σ_s ½ (Q(s, a) − θ_a·φ_s)² + (l2/2) ‖θ_a‖²`` over the m_a sampled states where a
        is allowed, bias not penalised), ``mixture`` (``"stochastic"``, the paper's footnote 11,
        or ``"average"``), ``states`` (``"policy"``: states visited by the rollout policy, with a
        one-step deviation of probability ``explore``; ``"uniform"``: the paper's uniform binomial
        states), ``select`` (``"best"``: the iterate of lowest training datum-wise loss;
        ``"last"``: θ_T), ``patience`` (None, or stop once that many iterations in a row did not
        lower the best; skipped entries are NaN, ``policy.iterations`` says how many ran; traced:
        no recompilation) and ``rollout_batch`` (rollouts side by side in one ``while_loop``).
      n_classes: C; required when y is traced, else when some classes are absent from y.
      progress: a tqdm bar over the iterations (the library's driver runs the iterations in
        compiled chunks and updates the bar between them; the result is the same).
      callback: ``callback(iteration, mean_return, accuracy)`` called on the host after each
        iteration with the *new iterate's* greedy policy on the training rows (mean return = minus
        its datum-wise loss, every episode from z = 0; before 0.3 these were the rollouts' figures
        from the sampled states); iterations skipped after an early stop are not reported
        (``jax.debug.callback``); off by default, no host round-trips without it. It is
        not a static argument: every fit with a callback shares one compiled program, so a fresh
        lambda per call does not recompile. An exception it raises is re-raised by ``dwsm_fit``
        after the fit (the remaining iterations run without the callback); inside a user's ``jit``
        it surfaces as JAX's runtime error instead, and the callback stays registered for as long
        as the process runs (the compiled function may run again).
      verbose: print a progress line per iteration: the iterate's training datum-wise loss,
        accuracy and features per datum, and the best iterate so far (the one returned);
        iterations are numbered as the iterates (``iteration t/n_iter`` makes θ_t; a first line
        ``iteration 0/n_iter`` is θ_0, classify at once, which "best so far" may also name).
      sample_weight: None or (n,) row weights ``w ≥ 0`` (at least 2 positive): the datum-wise
        loss becomes ``Σ_i w_i ℓ_i / Σ_i w_i`` — weighted standardisation, θ_0, ridge statistics
        (every sampled state of row i counts w_i) and iterate selection. Rows of weight 0 change
        nothing: with JAX's default ``jax_threefry_partitionable`` random draws, rows appended
        with weight 0 (the padding of :func:`~jaxselect.shard_rows`) leave the fit of the other
        rows as it is, to rounding.

    Returns:
      A :class:`~jaxselect.dwsm.DWSMPolicy`: ``theta = thetas[best]``; ``status`` 0, or
      ``NONFINITE`` when θ or the rollouts' returns are not finite
      (:func:`jaxselect.raise_for_status` raises on it).

    Cost per iteration, independent of n once ``S·n`` exceeds ``RCPIOptions.n_states`` (N_s): N =
    min(S·n, N_s) policy episodes, ``J·ceil(N·acquisitions/J)`` rollouts (about N·min(J,
    acquisitions)) of at most J+1 steps, each step O(A + A·|g|) (incremental scores), J+1 Gram
    matrices of size (2d+1)², plus n episodes to evaluate the new iterate.

    Raises:
      ValueError: labels that are not integers 0..C−1 (or a single class), NaN/Inf in X, negative
        ``lam``/``gamma``/``budget``/``l2``, a ``cost_matrix`` of the wrong shape, groups or
        ``related`` that do not match X, constant columns with ``constant_columns="raise"``.
      TypeError: ``key`` is not a JAX PRNG key.

    >>> import jax, numpy as np
    >>> from jaxselect.dwsm import dwsm_fit, dwsm_predict
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> pol = dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3)
    >>> labels, acquired = dwsm_predict(pol, X)
    >>> bool((np.asarray(labels) == y).mean() > 0.9), bool(acquired.sum(1).max() <= 3)
    (True, True)
    """
    return fit_with_acquired(
        key, X, y, lam=lam, budget=budget, groups=groups, n_iter=n_iter, scale=scale, mdp=mdp, rcpi=rcpi,
        n_classes=n_classes, sample_weight=sample_weight, progress=progress, verbose=verbose, callback=callback,
        with_acquired=False, _legacy=legacy,
    )


# the public signature lists the 15 parameters; the 0.3 keywords (``standardize``, ``cost_matrix``,
# ``related``, ``gamma``, ``constant_columns``, ``states_per_example``, ``alpha``, ``l2``, ``mixture``,
# ``states``, ``explore``, ``select``, ``patience``, ``rollout_batch``) still work for one release,
# with a DeprecationWarning naming the new spelling
dwsm_fit.__signature__ = inspect.signature(dwsm_fit).replace(
    parameters=[p for p in inspect.signature(dwsm_fit).parameters.values() if p.kind is not p.VAR_KEYWORD]
)
