"""The RCPI problem: the training data prepared once, its hyper-parameters and its static configuration.

:func:`rcpi_problem` standardises the training rows once (the library's rule), marks the units that
can be acquired and fixes every option of RCPI: traced hyper-parameters (``alpha``, ``l2``,
``explore``, ``terminal_weight``) as arrays of the :class:`RCPIProblem`, and Python configuration
(states per example, mixture rule, lanes, batches, mesh) as its static :class:`RCPIConfig`. The
solver protocol then never re-passes an option: ``rcpi_init(problem, key, n_iter)``,
``rcpi_step(problem, state)``, ``rcpi_run(problem, state)``.

The checks of :func:`~jaxselect.dwsm.dwsm_fit`'s arguments that are not shapes (key type,
option names, value ranges, reward magnitudes) live here too, and run on the host before any
``jit`` (:func:`check_hypers`, :func:`check_reward_magnitudes`, :func:`check_key`).
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxselect._repr import short_repr

from .._validation import as_hyper, check_int, is_traced
from ..design import column_summary, is_sparse
from .mdp import REWARD_SCALE_FIX, DWSMSpec, host_hyper, unit_live
from .policy_fit import MIXTURES, MixtureRule, as_mixture

__all__ = [
    "RCPIOptions",
    "MDPOptions",
    "rcpi_config",
    "RCPIConfig",
    "RCPIProblem",
    "rcpi_problem",
    "check_key",
    "check_hypers",
    "host_hyper",
    "check_reward_magnitudes",
]


@dataclasses.dataclass(frozen=True)
class RCPIOptions:
    """The options of RCPI (the solver), one record built once at the boundary.

    ``alpha``, ``l2`` and ``explore`` may be traced (inside a user's ``jit``); the other fields are
    Python configuration (part of the compiled program). Built by :func:`~jaxselect.dwsm.dwsm_fit`
    from ``rcpi=`` (default ``RCPIOptions()``) and turned into the static :class:`RCPIConfig` of
    the problem by :func:`rcpi_config`.

    Attributes:
      n_states: N_s, the total number of sampled states per iteration (the paper's N_s, §5.1),
        independent of the number of rows: when ``states_per_example · n`` exceeds it, the states
        are drawn from rows sampled at random (probability ∝ row weight) each iteration; else every
        row gets ``states_per_example`` states (the paper's protocol, §6.1). None: always the
        latter (the cost then grows with n). Default 2048 (4096 before issue 36's second part).
      states_per_example: S, sampled states per training row when every row is used (paper: 10).
      acquisitions: about how many acquisition actions are rolled out per sampled state (every
        classification action is always evaluated: its Q is exact, no rollout): each acquisition
        unit is rolled out from ``ceil(N · acquisitions / J)`` of the N sampled states where it is
        allowed, drawn at random with one draw per state shared by every unit (the units' regressions
        see almost the same states: their errors are correlated and the differences the greedy
        policy compares stay accurate), and the acquisitions' ridge weight is ``l2·(N/M)²`` (more
        shrinkage for a fit on fewer states: an argmax over J noisy fits otherwise picks the most
        optimistic one). None, or a value ≥ J: every allowed action of every state (the paper's
        RCPI; the default 64 keeps every table of the paper, J ≤ 60, there).
      alpha: α-mixture weight in [0, 1) (paper: 0.7).
      l2: ridge weight > 0 of the per-action regressions (see :func:`~jaxselect.dwsm.dwsm_fit`).
      mixture: ``"stochastic"`` (paper footnote 11), ``"average"``, or a
        :class:`~jaxselect.dwsm.MixtureRule`.
      states: ``"policy"`` (states visited by the rollout policy, default) or ``"uniform"`` (the
        paper's uniform binomial states).
      explore: with ``states="policy"``, the probability that a sampled state gets one more
        uniformly drawn allowed unit (default 0.1).
      select: ``"best"`` (the iterate of lowest training datum-wise loss) or ``"last"``.
      patience: None, or stop once this many iterations in a row did not improve the best.
      rollout_batch: rollouts run side by side in one ``while_loop``.
      policy_states: how many of a row's S states are policy states (None: what ``states`` says).
      terminal_weight: weight of the rollouts' terminal states in the classification regressions
        (None: 1 with ``states="policy"``, 0 with ``"uniform"``).
    """

    n_states: int | None = 2048
    states_per_example: int = 10
    acquisitions: int | None = 64
    alpha: float = 0.7
    l2: float = 0.01
    mixture: str = "stochastic"
    states: str = "policy"
    explore: float = 0.1
    select: str = "best"
    patience: int | None = None
    rollout_batch: int = 1024
    policy_states: int | None = None
    terminal_weight: float | None = None

    def replace(self, **changes) -> "RCPIOptions":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class MDPOptions:
    """The variant options of the datum-wise MDP beyond ``lam``, ``budget`` and ``groups`` (§4, Table 2).

    Attributes:
      cost_matrix: None (``1 − I``) or (C, C) ``C[predicted, true]`` (cost-sensitive, §4.2.3).
      related: None or (J, J) bool relation between units (relational, §4.2.5).
      gamma: γ ≥ 0, the reward multiplier of an acquisition unrelated to an acquired unit
        (default 2λ; only matters with ``related``).
      constant_columns: ``"inert"`` (default: constant columns are never acquirable) or
        ``"raise"`` (ValueError naming them).
    """

    cost_matrix: object = None
    related: object = None
    gamma: object = None
    constant_columns: str = "inert"


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class RCPIConfig:
    """Static configuration of RCPI (Python values; part of the compiled program, not traced).

    A pytree node without leaves (``jax.tree_util.register_static``): carried inside an
    :class:`RCPIProblem` through ``jit``, equal configurations share one compiled program.
    Built by :func:`rcpi_config` from :class:`RCPIOptions` and the problem's shape.

    Attributes:
      states_per_example: S, sampled states per training row.
      policy_states: how many of the S states are visited by the rollout policy (the rest are the
        paper's uniform states).
      mixture: the :class:`~.policy_fit.MixtureRule`.
      rollout_batch: about how many rollouts run side by side in one ``while_loop``.
      cap: rollout lanes per row (an upper bound on a row's allowed acquisitions).
      gram_batch: Gram matrices built at a time.
      terminal: fit the classification actions on the rollouts' terminal states too.
      n_states: N, sampled states per iteration (``S · n`` when every row is used).
      action_states: M, the sampled states each acquisition unit is rolled out from (N: all).
      acquisition_l2_scale: the acquisitions' ridge weight is ``l2`` times this, ``N / M`` (1 when
        every action is evaluated): a unit fitted on M of the N states gets the shrinkage that keeps
        its estimate's variance near that of the full evaluation.
      mesh, row_axes: unused (a row-sharded X is partitioned by XLA); kept for compatibility.
    """

    states_per_example: int = 10
    policy_states: int = 10
    mixture: MixtureRule = MIXTURES["stochastic"]
    rollout_batch: int = 16
    cap: int = 0
    gram_batch: int = 8
    terminal: bool = True
    n_states: int = 0
    action_states: int = 0
    acquisition_l2_scale: float = 1.0
    mesh: Mesh | None = None
    row_axes: tuple | None = None

    @property
    def n_parts(self) -> int:
        """Number of row blocks (devices along ``row_axes``; 1 without a mesh)."""
        if self.row_axes is None:
            return 1
        return int(np.prod([self.mesh.shape[a] for a in self.row_axes]))

    @property
    def all_rows(self) -> bool:
        """Every row gets ``states_per_example`` states (no row sampling)."""
        return self.n_states == 0


def check_options(options: RCPIOptions | None) -> RCPIOptions:
    """Validate an :class:`RCPIOptions` on the host (Python fields; traced hyper-parameters: shapes only)."""
    if options is None:
        return RCPIOptions()
    if not isinstance(options, RCPIOptions):
        raise TypeError(f"rcpi must be a jaxselect.dwsm.RCPIOptions (or None); got {type(options).__name__}")
    if not isinstance(options.states, str) or options.states not in ("policy", "uniform"):
        raise ValueError(
            "states must be 'policy' (states visited by the rollout policy) or 'uniform' (the paper's); "
            f"got {options.states!r}"
        )
    if not isinstance(options.select, str) or options.select not in ("best", "last"):
        raise ValueError(
            f"select must be 'best' (lowest training datum-wise loss) or 'last' (θ_T); got {options.select!r}"
        )
    as_mixture(options.mixture)
    check_int(options.states_per_example, "states_per_example", low=1)
    check_int(options.rollout_batch, "rollout_batch", low=1)
    if options.n_states is not None:
        check_int(options.n_states, "n_states", low=1)
    if options.acquisitions is not None:
        check_int(options.acquisitions, "acquisitions", low=1)
    if options.patience is not None:
        check_int(options.patience, "patience", low=1)
    if options.policy_states is not None:
        k = check_int(options.policy_states, "policy_states", low=0)
        if k > options.states_per_example:
            raise ValueError(
                f"policy_states must be in 0..states_per_example={options.states_per_example}; got {k}"
            )
    return options


def rcpi_config(options: RCPIOptions, n: int, J: int) -> RCPIConfig:
    """The static :class:`RCPIConfig` of ``options`` for n training rows and J units."""
    options = check_options(options)
    k = options.states_per_example
    if options.policy_states is not None:
        n_pol = options.policy_states
    else:
        n_pol = k if options.states == "policy" else 0
    tw = options.terminal_weight
    if tw is None:
        tw = 1.0 if options.states == "policy" else 0.0
    N = n * k
    sampled = options.n_states is not None and N > options.n_states
    if sampled:
        N = options.n_states
    acq = options.acquisitions
    M = N if acq is None or acq >= J else min(N, -(-N * acq // J))
    return RCPIConfig(
        states_per_example=k,
        policy_states=n_pol,
        mixture=as_mixture(options.mixture),
        rollout_batch=options.rollout_batch,
        cap=k * J,
        gram_batch=8,
        # a Python 0 is known not to count: the terminal statistics are then not even computed
        terminal=not (isinstance(tw, numbers.Real) and float(tw) == 0.0),
        n_states=N if sampled else 0,
        action_states=M,
        acquisition_l2_scale=(float(N) / float(M)) ** 2,
    )


def padding_keeps_draws(options, n: int, n_padded: int, n_units: int) -> bool:
    """Whether RCPI on n rows padded to ``n_padded`` (the padding of weight 0) draws the same random
    states for the real rows — then the fit is the unpadded one. Both sample ``n_states`` rows by
    weight (the padding is never drawn), or both use every row with every state rolled out for
    every unit (the draws are per state index). Otherwise (the number of states, or of rolled-out
    states per unit, would follow the padded row count) the rows are not padded."""
    if n_padded == n:
        return True
    a, b = rcpi_config(options, n, n_units), rcpi_config(options, n_padded, n_units)
    if not a.all_rows and not b.all_rows:
        return True
    S = options.states_per_example
    return a.all_rows and b.all_rows and a.action_states == n * S and b.action_states == n_padded * S


#: The keywords of rcpi_problem / dwsm_fit before the option records: name -> RCPIOptions field.
LEGACY_RCPI = {
    "states_per_example": "states_per_example",
    "policy_states": "policy_states",
    "alpha": "alpha",
    "l2": "l2",
    "explore": "explore",
    "terminal_weight": "terminal_weight",
    "mixture": "mixture",
    "states": "states",
    "select": "select",
    "patience": "patience",
    "rollout_batch": "rollout_batch",
}
#: keywords that no longer mean anything (the layout of the rollouts is the solver's)
LEGACY_IGNORED = ("cap", "gram_batch", "mesh", "row_axes")


def legacy_options(options: RCPIOptions | None, legacy: dict, who: str, stacklevel: int = 3) -> RCPIOptions:
    """Fold the 0.3 keywords in ``legacy`` (popped) into ``options``, with a DeprecationWarning each."""
    changes = {}
    for name in list(legacy):
        if name in LEGACY_RCPI:
            field = LEGACY_RCPI[name]
            warnings.warn(
                f"{who}({name}=...) is deprecated: pass rcpi=RCPIOptions({field}=...) "
                "(jaxselect.dwsm.RCPIOptions); the keyword goes in the next release",
                DeprecationWarning,
                stacklevel=stacklevel,
            )
            changes[field] = legacy.pop(name)
        elif name in LEGACY_IGNORED:
            warnings.warn(
                f"{who}({name}=...) is deprecated and ignored: RCPI lays out its rollouts itself "
                "(rcpi=RCPIOptions(rollout_batch=...) sets the batch)",
                DeprecationWarning,
                stacklevel=stacklevel,
            )
            legacy.pop(name)
    if changes:
        options = (options or RCPIOptions()).replace(**changes)
    return options


def _legacy_problem_options(options, scale, legacy):
    legacy = dict(legacy)
    if "standardize" in legacy:
        warnings.warn(
            "rcpi_problem(standardize=...) is deprecated: use scale='std' (standardize=True) or scale=None "
            "(standardize=False)",
            DeprecationWarning,
            stacklevel=3,
        )
        scale = "std" if legacy.pop("standardize") else None
    options = legacy_options(options, legacy, "rcpi_problem", stacklevel=4)
    if legacy:
        raise TypeError(f"rcpi_problem() got unexpected keyword argument(s) {sorted(legacy)}")
    return check_options(options), scale


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
    options: RCPIOptions | None = None,
    scale: str | None = "std",
    sample_weight=None,
    summary=None,
    **legacy,
) -> RCPIProblem:
    """Standardise the training data, mark the units that can be acquired and fix RCPI's options.

    Pure and jit-able: the Python configuration of ``options`` (an :class:`RCPIOptions`) becomes the
    static :class:`RCPIConfig` (:func:`rcpi_config`); ``options.alpha``, ``options.l2``,
    ``options.explore`` may be traced (concrete values are range-checked here). Columns are
    standardised with the library's rule (:func:`jaxselect.design.column_summary`): constant
    columns (max == min) are inert — their standardised values are 0, and a unit whose features
    are all constant is never acquirable.

    Args:
      spec: the MDP from :func:`~jaxselect.dwsm.make_spec`.
      X: (n, d) float raw features; y: (n,) int labels 0..C-1.
      options: the :class:`RCPIOptions` (default ``RCPIOptions()``, :func:`~jaxselect.dwsm.dwsm_fit`'s).
      scale: ``"std"`` centre and scale the columns (the paper's choice); None keeps X as it is
        (constant columns are still inert).
      sample_weight: None or (n,) row weights ``w ≥ 0``: weighted means and standard deviations,
        constant columns judged on the rows with ``w > 0`` (the data layer's one rule).
      summary: the :class:`~jaxselect.ColumnSummary` of X under ``sample_weight`` when the caller
        has it (:func:`~jaxselect.as_data` computed it at the boundary); default: computed here.
      legacy: the keywords of 0.3 (``standardize``, ``states_per_example``, ``policy_states``,
        ``alpha``, ``l2``, ``explore``, ``terminal_weight``, ``mixture``, ``rollout_batch``, ...):
        accepted with a ``DeprecationWarning`` naming the :class:`RCPIOptions` field.

    Returns:
      An :class:`RCPIProblem`.

    Raises:
      ValueError: a configuration out of range (``policy_states`` above ``states_per_example``,
        an unknown mixture), or concrete ``alpha``, ``l2``, ``explore``, ``terminal_weight`` out of
        range.
    """
    check_dense(X, "rcpi_problem")
    options, scale = _legacy_problem_options(options, scale, legacy)
    if scale not in ("std", None):
        raise ValueError(f"scale must be 'std' (standardise the columns, the paper's) or None; got {scale!r}")
    n = X.shape[0]
    J = spec.groups.costs.shape[0]
    config = rcpi_config(options, n, J)
    dt = X.dtype
    alpha = as_hyper(options.alpha, "alpha", dt, low=0.0)
    l2 = as_hyper(options.l2, "l2", dt, low=0.0, strict_low=True)
    explore = as_hyper(options.explore, "explore", dt, low=0.0, high=1.0)
    tw = options.terminal_weight
    if tw is None:
        tw = 1.0 if options.states == "policy" else 0.0
    terminal_weight = as_hyper(tw, "terminal_weight", dt, low=0.0)
    if summary is None:
        summary = column_summary(X, None if sample_weight is None else jnp.asarray(sample_weight).astype(X.dtype))
    mean, sd, live = (jnp.asarray(v) for v in (summary.mean, summary.scale, summary.live))
    mean, sd = mean.astype(dt), sd.astype(dt)
    if sample_weight is None:
        weights = jnp.ones((X.shape[0],), X.dtype)
    else:
        weights = jnp.asarray(sample_weight).astype(X.dtype)
    if scale is None:
        mean, sd = jnp.zeros_like(mean), jnp.ones_like(sd)
    Xs = jnp.where(live[None, :], (X - mean[None, :]) / sd[None, :], jnp.zeros_like(X))
    spec = spec._replace(live=jnp.asarray(spec.live) & unit_live(spec.groups, live))
    return RCPIProblem(
        Xs,
        jnp.asarray(y).astype(jnp.int32),
        spec,
        mean,
        sd,
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


def check_hypers(options: RCPIOptions, dtype):
    """``(alpha, l2, explore)`` of ``options`` checked on the host (0-d numpy arrays of ``dtype``,
    traced values passed through), with the messages of :func:`~jaxselect.dwsm.dwsm_fit`."""
    try:  # alpha < 1: the largest float below 1 is the inclusive bound
        alpha = host_hyper(options.alpha, "alpha", dtype, low=0.0, high=float(np.nextafter(1.0, 0.0)))
    except ValueError as err:
        raise ValueError(f"alpha must be in [0, 1) ({err})") from None
    try:
        explore = host_hyper(options.explore, "explore", dtype, low=0.0, high=1.0)
    except ValueError as err:
        raise ValueError(f"explore must be a probability in [0, 1] ({err})") from None
    l2 = host_hyper(options.l2, "l2", dtype, low=0.0, strict_low=True)
    return alpha, l2, explore


def check_reward_magnitudes(spec: DWSMSpec, dtype) -> None:
    """ValueError when ``λ × total unit cost`` or ``γ × total unit cost`` does not exist in ``dtype``.

    Checked by :func:`~jaxselect._validation.as_hyper` where concrete (finite and below the dtype's
    range); traced inside a user's ``jit``, not checked: an overflow shows as ``NONFINITE`` in the
    fit's ``status``. (The cost matrix, a host array, is checked by :func:`~.mdp.make_spec`.)
    """
    costs = spec.groups.costs
    if is_traced((costs, spec.lam, spec.gamma)):
        return
    total = np.sum(np.asarray(costs), dtype=np.asarray(costs).dtype)  # in the compute dtype (make_spec's)
    for name, rho in (("lam", spec.lam), ("gamma", spec.gamma)):
        try:
            host_hyper(np.asarray(rho) * total, f"{name} × total unit cost", dtype, low=0.0)
        except ValueError as err:
            raise ValueError(f"{err}; {REWARD_SCALE_FIX}") from None
