"""dwsm_fit: the user's door to the datum-wise sparse model (validation, then one compiled RCPI run).

Every check of the user's input runs here, on the host, before the compiled program: labels and
classes, X (NaN/Inf and scale), the MDP (:func:`~.mdp.make_spec`), the RCPI options and the reward
magnitudes (:mod:`~.problem`). Inside a user's ``jit`` only shapes can be checked; what goes wrong
in values shows in the policy's ``status``. Then :func:`_fit` compiles :func:`~.problem.rcpi_problem`
and the RCPI loop (:func:`~.rcpi.rcpi_loop`) into one program.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.sharding import any_mesh

from . import progress
from .._validation import (
    as_hyper,
    check_int,
    host_array,
    is_traced,
)
from ..design import as_data
from .mdp import check_budget, make_spec
from .policy import DWSMPolicy
from .problem import check_dense, check_fit_options, check_key, check_reward_magnitudes, rcpi_problem, row_axes_of
from .rcpi import rcpi_init, rcpi_loop
from .rollouts import rollout_capacity

__all__ = ["dwsm_fit"]

# the row sharding of X, looked up here (tests replace it to run the sharded code on one device)
_row_axes = row_axes_of


@partial(
    jax.jit,
    static_argnames=(
        "n_iter",
        "states_per_example",
        "mixture",
        "rollout_batch",
        "gram_batch",
        "progress_on",
        "standardize",
        "cap",
        "policy_states",
        "terminal_weight",
        "mesh",
        "row_axes",
    ),
)
def _fit(
    key,
    X,
    y,
    sample_weight,
    summary,
    spec,
    alpha,
    l2,
    explore,
    call_id,
    patience,
    use_best,
    *,
    n_iter,
    states_per_example,
    mixture,
    rollout_batch,
    gram_batch,
    progress_on,
    standardize,
    cap,
    policy_states,
    terminal_weight,
    mesh=None,
    row_axes=None,
):
    problem = rcpi_problem(
        spec,
        X,
        y,
        standardize=standardize,
        sample_weight=sample_weight,
        alpha=alpha,
        l2=l2,
        explore=explore,
        terminal_weight=terminal_weight,
        states_per_example=states_per_example,
        policy_states=policy_states,
        mixture=mixture,
        rollout_batch=rollout_batch,
        cap=cap,
        gram_batch=gram_batch,
        mesh=mesh,
        row_axes=row_axes,
        summary=summary,
    )
    report = None
    if progress_on:

        def report(*args):
            jax.debug.callback(progress.report, call_id, *args, ordered=True)

    return rcpi_loop(problem, rcpi_init(problem, key, n_iter), patience, use_best, report)


@any_mesh
@any_mesh
def dwsm_fit(
    key,
    X,
    y,
    *,
    lam=0.01,
    budget=None,
    cost_matrix=None,
    groups=None,
    related=None,
    n_iter: int = 10,
    states_per_example: int = 10,
    alpha=0.7,
    l2=0.01,
    gamma=None,
    n_classes: int | None = None,
    mixture: str = "stochastic",
    states: str = "policy",
    explore=0.1,
    select: str = "best",
    patience: int | None = None,
    standardize: bool = True,
    constant_columns: str = "inert",
    rollout_batch: int = 16,
    callback: Callable | None = None,
    verbose: bool = False,
    sample_weight=None,
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
      cost_matrix: (C, C) ``C[predicted, true]``; default ``1 − I``.
      groups: None (every feature its own unit, cost 1), (d,) group ids (cost 1 per group), a
        :class:`~jaxselect.Groups` (costs from ``Groups.costs``), or a list of index lists (cost 1
        per group); an action acquires a whole group (§4.2.4).
      related: (J, J) bool, ``related[j, k]``: unit j is related to unit k (§4.2.5).
      n_iter: RCPI iterations (paper: 10; at most, see ``patience``). states_per_example: sampled
        states per row (paper: 10).
      alpha: α-mixture weight in [0, 1) (paper: 0.7).
      l2: ridge weight > 0 of the per-action regression (default 0.01; 1e-3 before 0.3), with the
        library's convention: θ_a minimises ``(1/m_a) Σ_s ½ (Q(s, a) − θ_a·φ_s)² + (l2/2) ‖θ_a‖²``
        over the m_a sampled states where a is allowed (bias not penalised), i.e.
        ``(Φ_aᵀΦ_a/m_a + l2·D) θ_a = Φ_aᵀQ_a/m_a`` (scikit-learn ``Ridge(alpha)`` on those states:
        ``l2 = alpha / m_a``).
      gamma: γ >= 0 for unrelated acquisitions (default 2λ).
      n_classes: C; required when y is traced, else when some classes are absent from y.
      mixture: ``"stochastic"`` (paper footnote 11) or ``"average"`` (parameter averaging).
      states: which states RCPI samples. ``"policy"`` (default): states visited by the rollout
        policy (prefixes of its episode from z = 0, see ``explore``), and the classification actions
        are also fitted at the states where the rollouts classified. ``"uniform"``: the paper's
        "uniform binomial" z (‖z‖ ~ U{0..J}, then a uniform subset), classification fitted at the
        sampled states only (the paper's RCPI; it collapses on correlated features, issue 14).
      explore: with ``states="policy"``, the probability in [0, 1] that a sampled state gets one
        more, uniformly drawn, allowed unit (a one-step deviation from the policy; default 0.1).
        These states teach the acquisitions only.
      select: ``"best"`` (default): return the iterate with the lowest training datum-wise loss;
        ``"last"``: θ_T (before 0.3; it can be much worse than the training run).
      patience: None (run ``n_iter`` iterations) or p >= 1: stop once p iterations in a row did not
        lower the best training datum-wise loss (the remaining iterations are skipped, their
        entries NaN; ``policy.iterations`` says how many ran). Traced: no recompilation.
      standardize: standardise features on the training set (paper).
      constant_columns: ``"inert"`` (default) or ``"raise"`` (ValueError naming the constant columns).
      rollout_batch: about how many rollouts run side by side in one ``while_loop`` (default 16:
        rows are processed ``max(1, rollout_batch // lanes_per_row)`` at a time, and a row with
        more lanes runs them in groups of at most ``rollout_batch``; small groups stop as soon as
        their own rollouts end, which is what makes training fast on CPU; an accelerator may prefer
        a larger value).
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
        accuracy and features per datum, and the best iterate so far (the one returned).
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

    Cost per iteration: ``n·states_per_example·J`` rollouts of at most J+1 steps, each step
    O(A + A·|g|) (incremental scores), plus J+1 Gram matrices of size (2d+1)², plus n episodes to
    evaluate the new iterate.

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
    check_dense(X, "dwsm_fit")
    key = check_key(key)
    if n_classes is not None:
        n_classes = check_int(n_classes, "n_classes", low=1)
    # the front door: X (NaN/Inf, magnitudes), labels, weights, the constant-column mode, and the
    # column summary that standardises the MDP's features (one pass)
    data = as_data(
        X, y, sample_weight=sample_weight, targets="labels", n_classes=n_classes,
        constant_columns=constant_columns, scale="values",
    )
    X, labels, C, w = data.X, data.Y, data.n_classes, data.weights
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
    n_iter = check_int(n_iter, "n_iter", low=1)
    states_per_example = check_int(states_per_example, "states_per_example", low=1)
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0, strict_low=True)
    rollout_batch = check_int(rollout_batch, "rollout_batch", low=1)
    policy_states, terminal_weight, patience, alpha, explore = check_fit_options(
        states, select, patience, states_per_example, mixture, alpha, explore, X.dtype
    )
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable(iteration, mean_return, accuracy) or None")
    if verbose and callback is None:
        callback = progress.print_progress
    spec = make_spec(
        d,
        C,
        dtype=X.dtype,
        lam=lam,
        gamma=gamma,
        budget=budget,
        cost_matrix=cost_matrix,
        groups=groups,
        related=related,
    )
    check_reward_magnitudes(spec, X.dtype)
    J = spec.n_units
    # lane packing of the uniform states only without a budget (then every state has exactly k
    # units): budgets stay traced and share one compiled fit; budgeted rollouts are short anyway.
    # A state visited by the policy may have any number of units: J lanes each. A budget given as
    # a jax.Array counts as a budget (it may be traced).
    no_budget = budget is None or (not isinstance(budget, jax.Array) and check_budget(budget, X.dtype) is None)
    n_unif = states_per_example - policy_states
    cap = (rollout_capacity(J, n_unif, J, exact_sizes=no_budget) if n_unif else 0) + policy_states * J
    # a row-sharded X runs each device's rollouts on its own rows (chunks of its local block)
    sharded = _row_axes(X, n)
    mesh, row_axes = sharded if sharded is not None else (None, None)
    # not a check: inside a user's jit the compiled function reports whenever it runs, so its
    # callback stays registered and its exceptions reach JAX's runtime
    eager = not is_traced((key, X, labels, spec, alpha, l2, explore))
    call_id = progress.register(callback, guard=eager)
    err = None
    try:
        policy = _fit(
            key,
            X,
            jnp.asarray(labels),
            w,
            data.summary,
            spec,
            alpha,
            l2,
            explore,
            jnp.asarray(call_id, jnp.int32),
            jnp.asarray(n_iter if patience is None else patience, jnp.int32),
            jnp.asarray(select == "best"),
            n_iter=n_iter,
            states_per_example=states_per_example,
            mixture=mixture,
            rollout_batch=rollout_batch,
            gram_batch=8,
            progress_on=callback is not None,
            standardize=bool(standardize),
            cap=cap,
            policy_states=policy_states,
            terminal_weight=terminal_weight,
            mesh=mesh,
            row_axes=row_axes,
        )
        if callback is not None and eager:
            jax.effects_barrier()  # the fit has run: wait for its callbacks
    finally:
        if callback is not None and eager:
            err = progress.unregister(call_id)  # forget the callback, collect what it raised
    if err is not None:
        raise err
    return policy
