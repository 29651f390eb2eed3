"""The RCPI problem: the training data prepared once, its hyper-parameters and its static configuration.

:func:`rcpi_problem` standardises the training rows once (the library's rule), marks the units that
can be acquired and fixes every option of RCPI: traced hyper-parameters (``alpha``, ``l2``,
``explore``, ``terminal_weight``) as arrays of the :class:`RCPIProblem`, and Python configuration
(states per example, mixture rule, lanes, batches, mesh) as its static :class:`RCPIConfig`. The
solver protocol then never re-passes an option: ``rcpi_init(problem, key, n_iter)``,
``rcpi_step(problem, state)``, ``rcpi_run(problem, state)``.

The checks of :func:`~jaxselect.dwsm.dwsm_fit`'s arguments that are not shapes (key type,
option names, value ranges, reward magnitudes) live here too, and run on the host before any
``jit`` (:func:`check_fit_options`, :func:`check_reward_magnitudes`, :func:`check_key`).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxselect._repr import short_repr

from .._validation import as_hyper, check_int
from ..design import column_summary, is_sparse
from .mdp import REWARD_SCALE_FIX, DWSMSpec, unit_live
from .policy_fit import MIXTURES, MixtureRule, as_mixture

__all__ = [
    "RCPIConfig",
    "RCPIProblem",
    "rcpi_problem",
    "check_key",
    "check_fit_options",
    "check_reward_magnitudes",
]


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class RCPIConfig:
    """Static configuration of RCPI (Python values; part of the compiled program, not traced).

    A pytree node without leaves (``jax.tree_util.register_static``): carried inside an
    :class:`RCPIProblem` through ``jit``, equal configurations share one compiled program.

    Attributes:
      states_per_example: S, sampled states per training row.
      policy_states: how many of the S states are visited by the rollout policy (the rest are the
        paper's uniform states).
      mixture: the :class:`~.policy_fit.MixtureRule`.
      rollout_batch: about how many rollouts run side by side in one ``while_loop``.
      cap: rollout lanes per row (an upper bound on a row's allowed acquisitions).
      gram_batch: Gram matrices built at a time.
      terminal: fit the classification actions on the rollouts' terminal states too.
      mesh, row_axes: run each device's rollouts and episodes on its rows of a row-sharded X
        (both None otherwise).
    """

    states_per_example: int = 10
    policy_states: int = 10
    mixture: MixtureRule = MIXTURES["stochastic"]
    rollout_batch: int = 16
    cap: int = 0
    gram_batch: int = 8
    terminal: bool = True
    mesh: Mesh | None = None
    row_axes: tuple | None = None

    @property
    def n_parts(self) -> int:
        """Number of row blocks (devices along ``row_axes``; 1 without a mesh)."""
        if self.row_axes is None:
            return 1
        return int(np.prod([self.mesh.shape[a] for a in self.row_axes]))


class RCPIProblem(NamedTuple):
    """The training data of RCPI and every option of the solve, prepared once by :func:`rcpi_problem`.

    Attributes:
      X: (n, d) standardised features (constant columns are 0).
      y: (n,) int32 labels 0..C-1.
      spec: the MDP, with ``spec.live`` False for units whose features are all constant.
      mean, scale: (d,) the standardisation (``X = (X_raw − mean) / scale``; scale 1 on constant
        columns).
      live: (d,) bool, non-constant columns.
      weights: (n,) row weights in X's dtype (1 without ``sample_weight``): every sum over rows —
        the standardisation, θ_0, the ridge statistics, the evaluation — is weighted by them.
      alpha: () α-mixture weight in [0, 1).
      l2: () ridge weight > 0 of the per-action regressions.
      explore: () probability that a policy state gets one more random allowed unit.
      terminal_weight: () total weight of the rollouts' terminal states in the classification
        actions' regressions, relative to the sampled states (used when ``config.terminal``).
      config: the static :class:`RCPIConfig`.
    """

    X: jax.Array
    y: jax.Array
    spec: DWSMSpec
    mean: jax.Array
    scale: jax.Array
    live: jax.Array
    weights: jax.Array
    alpha: jax.Array
    l2: jax.Array
    explore: jax.Array
    terminal_weight: jax.Array
    config: RCPIConfig

    __repr__ = short_repr


def check_dense(X, who: str) -> None:
    """TypeError for a sparse X: DWSM reads single entries of each datum and keeps X̃ dense."""
    if is_sparse(X):
        raise TypeError(
            f"{who} does not run on sparse X: a DWSM policy acquires single entries of each datum and RCPI keeps "
            "the standardised X dense; pass X.toarray() if it fits in memory, or select features from sparse X "
            "with jaxselect.fsa or prepare + cs_omp"
        )


def rcpi_problem(
    spec: DWSMSpec,
    X,
    y,
    *,
    standardize: bool = True,
    sample_weight=None,
    alpha=0.7,
    l2=0.01,
    explore=0.1,
    terminal_weight=1.0,
    states_per_example: int = 10,
    policy_states: int | None = None,
    mixture="stochastic",
    rollout_batch: int = 16,
    cap: int | None = None,
    gram_batch: int = 8,
    mesh=None,
    row_axes=None,
    summary=None,
) -> RCPIProblem:
    """Standardise the training data, mark the units that can be acquired and fix RCPI's options.

    Pure and jit-able: the keyword options that are Python configuration (``standardize``,
    ``states_per_example``, ``policy_states``, ``mixture``, ``rollout_batch``, ``cap``,
    ``gram_batch``, ``mesh``, ``row_axes``) go to the static :class:`RCPIConfig`; ``alpha``,
    ``l2``, ``explore`` and ``terminal_weight`` may be traced (concrete values are range-checked
    here). Its defaults are :func:`~jaxselect.dwsm.dwsm_fit`'s. Columns are standardised
    with the library's rule (:func:`jaxselect.design.column_summary`): constant
    columns (max == min) are inert — their standardised values are 0, and a unit whose features
    are all constant is never acquirable.

    Args:
      spec: the MDP from :func:`~jaxselect.dwsm.make_spec`.
      X: (n, d) float raw features; y: (n,) int labels 0..C-1.
      standardize: centre and scale the columns (the paper's choice); False keeps X as it is
        (constant columns are still inert).
      sample_weight: None or (n,) row weights ``w ≥ 0``: weighted means and standard deviations,
        constant columns judged on the rows with ``w > 0`` (the data layer's one rule).
      alpha: α-mixture weight in [0, 1) (paper: 0.7).
      l2: ridge weight > 0: θ_a minimises ``(1/m_a) Σ ½ residual² + (l2/2)‖θ_a‖²`` over the m_a
        states where a is allowed (bias not penalised).
      explore: probability in [0, 1] that a policy state gets one more random allowed unit
        (:func:`~.states.trajectory_states`); such deviated states enter the acquisitions'
        regressions only.
      terminal_weight: w >= 0; the classification actions are also fitted on the states where the
        rollouts classified (their targets −C[c, y] are exact there), with a total weight w times
        that of the sampled states. A Python 0 skips them (the paper's regression; no terminal
        statistics are computed).
      states_per_example: S, sampled states per row.
      policy_states: how many of the S states of a row are visited by the rollout policy
        (:func:`~.states.trajectory_states`); the others are the paper's uniform states
        (:func:`~.states.sample_states`). None (default): all S; 0: the paper's sampling.
      mixture: ``"stochastic"`` (the paper's), ``"average"``, or a :class:`~.policy_fit.MixtureRule`.
      rollout_batch: about how many rollouts run side by side in one ``while_loop`` (a row with
        more lanes runs them in groups).
      cap: rollout lanes per row; default ``S·J`` (always enough). Without a budget
        ``rollout_capacity(J, S − P, J, exact_sizes=True) + P·J`` (what
        :func:`~jaxselect.dwsm.dwsm_fit` uses, P the policy states) is enough too.
      gram_batch: Gram matrices built at a time.
      mesh, row_axes: run each device's rollouts on its rows of a row-sharded X (set by
        :func:`~jaxselect.dwsm.dwsm_fit`; both None otherwise).
      summary: the :class:`~jaxselect.ColumnSummary` of X under ``sample_weight`` when the caller
        has it (:func:`~jaxselect.as_data` computed it at the boundary); default: computed here.

    Returns:
      An :class:`RCPIProblem`.

    Raises:
      ValueError: a configuration out of range (``policy_states`` above ``states_per_example``,
        an unknown mixture, only one of ``mesh``/``row_axes``), or concrete ``alpha``, ``l2``,
        ``explore``, ``terminal_weight`` out of range.
    """
    check_dense(X, "rcpi_problem")
    k = check_int(states_per_example, "states_per_example", low=1)
    n_pol = k if policy_states is None else check_int(policy_states, "policy_states", low=0)
    if n_pol > k:
        raise ValueError(f"policy_states must be in 0..states_per_example={k}; got {policy_states}")
    if (mesh is None) != (row_axes is None):
        raise ValueError("mesh and row_axes go together: give both (a row-sharded X) or neither")
    J = spec.groups.costs.shape[0]
    config = RCPIConfig(
        states_per_example=k,
        policy_states=n_pol,
        mixture=as_mixture(mixture),
        rollout_batch=check_int(rollout_batch, "rollout_batch", low=1),
        cap=k * J if cap is None else check_int(cap, "cap", low=1),
        gram_batch=check_int(gram_batch, "gram_batch", low=1),
        # a Python 0 is known not to count: the terminal statistics are then not even computed
        terminal=not (isinstance(terminal_weight, numbers.Real) and float(terminal_weight) == 0.0),
        mesh=mesh,
        row_axes=None if row_axes is None else tuple(row_axes),
    )
    dt = X.dtype
    alpha = as_hyper(alpha, "alpha", dt, low=0.0)
    l2 = as_hyper(l2, "l2", dt, low=0.0, strict_low=True)
    explore = as_hyper(explore, "explore", dt, low=0.0, high=1.0)
    terminal_weight = as_hyper(terminal_weight, "terminal_weight", dt, low=0.0)
    if summary is None:
        summary = column_summary(X, None if sample_weight is None else jnp.asarray(sample_weight).astype(X.dtype))
    mean, scale, live = summary.mean, summary.scale, summary.live
    if sample_weight is None:
        weights = jnp.ones((X.shape[0],), X.dtype)
    else:
        weights = jnp.asarray(sample_weight).astype(X.dtype)
    if not standardize:
        mean, scale = jnp.zeros_like(mean), jnp.ones_like(scale)
    Xs = jnp.where(live[None, :], (X - mean[None, :]) / scale[None, :], jnp.zeros_like(X))
    spec = spec._replace(live=spec.live & unit_live(spec.groups, live))
    return RCPIProblem(
        Xs,
        jnp.asarray(y).astype(jnp.int32),
        spec,
        mean,
        scale,
        live,
        weights,
        alpha,
        l2,
        explore,
        terminal_weight,
        config,
    )


# ----------------------------------------------------------------------------- boundary checks


def row_axes_of(X, n: int):
    """Mesh axes that split the rows of X, or None (unsharded, traced, or not evenly split by rows).

    Returns ``(mesh, axes)`` with ``axes`` a tuple of mesh axis names when X is a jax.Array with a
    ``NamedSharding`` whose first dimension is split over more than one device and n is a multiple
    of that device count; the fit then runs the rollouts of each device's rows on that device. A
    traced X has no ``sharding`` attribute (JAX raises ``AttributeError``): None.
    """
    sh = getattr(X, "sharding", None) if isinstance(X, jax.Array) else None
    if not isinstance(sh, NamedSharding) or not isinstance(sh.mesh, Mesh) or len(sh.spec) == 0:
        return None
    first = sh.spec[0]
    if first is None or first is PartitionSpec.UNCONSTRAINED:
        return None
    axes = tuple(first) if isinstance(first, (tuple, list)) else (first,)
    if not all(isinstance(a, str) and a in sh.mesh.shape for a in axes):
        return None
    parts = int(np.prod([sh.mesh.shape[a] for a in axes]))
    if parts <= 1 or n % parts:
        return None
    return sh.mesh, axes


def check_key(key):
    """A single JAX PRNG key (new-style ``jax.random.key`` or raw ``PRNGKey`` uint32 (2,)); checks dtype and shape."""
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"key must be a single PRNG key; got shape {key.shape}")
        return key
    dtype, shape = (key.dtype, key.shape) if isinstance(key, jax.Array) else (np.asarray(key).dtype, np.shape(key))
    if dtype != np.uint32 or shape != (2,):
        raise TypeError("key must be a jax.random.key(...) or jax.random.PRNGKey(...) key, e.g. jax.random.key(0)")
    return key


def check_fit_options(states, select, patience, states_per_example, mixture, alpha, explore, dtype):
    """Validate dwsm_fit's RCPI options on the host (concrete values; traced ones: shapes only).

    Returns:
      ``(policy_states, terminal_weight, patience, alpha, explore)``: the policy states per row and
      the terminal weight that ``states`` means, ``patience`` as an int (or None), and ``alpha``,
      ``explore`` as 0-d arrays of ``dtype``.
    """
    if not isinstance(states, str) or states not in ("policy", "uniform"):
        raise ValueError(
            f"states must be 'policy' (states visited by the rollout policy) or 'uniform' (the paper's); got {states!r}"
        )
    if not isinstance(select, str) or select not in ("best", "last"):
        raise ValueError(f"select must be 'best' (lowest training datum-wise loss) or 'last' (θ_T); got {select!r}")
    if not isinstance(mixture, str) or mixture not in MIXTURES:
        raise ValueError(f"mixture must be 'stochastic' or 'average'; got {mixture!r}")
    if patience is not None:
        patience = check_int(patience, "patience", low=1)
    try:  # alpha < 1: the largest float below 1 is the inclusive bound
        alpha = as_hyper(alpha, "alpha", dtype, low=0.0, high=float(np.nextafter(1.0, 0.0)))
    except ValueError as err:
        raise ValueError(f"alpha must be in [0, 1) ({err})") from None
    try:
        explore = as_hyper(explore, "explore", dtype, low=0.0, high=1.0)
    except ValueError as err:
        raise ValueError(f"explore must be a probability in [0, 1] ({err})") from None
    if states == "policy":
        return states_per_example, 1.0, patience, alpha, explore
    return 0, 0.0, patience, alpha, explore


def check_reward_magnitudes(spec: DWSMSpec, dtype) -> None:
    """ValueError when ``λ × total unit cost`` or ``γ × total unit cost`` does not exist in ``dtype``.

    Checked by :func:`~jaxselect._validation.as_hyper` where concrete (finite and below the dtype's
    range); traced inside a user's ``jit``, not checked: an overflow shows as ``NONFINITE`` in the
    fit's ``status``. (The cost matrix, a host array, is checked by :func:`~.mdp.make_spec`.)
    """
    total = jnp.sum(spec.groups.costs)  # in the compute dtype (make_spec's)
    for name, rho in (("lam", spec.lam), ("gamma", spec.gamma)):
        try:
            as_hyper(rho * total, f"{name} × total unit cost", dtype, low=0.0)
        except ValueError as err:
            raise ValueError(f"{err}; {REWARD_SCALE_FIX}") from None
