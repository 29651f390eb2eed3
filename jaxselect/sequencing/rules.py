"""Cost-sensitive feature-group sequencing: CS-G-OMP, CS-G-FR and the Doubling algorithm.

Hu, Grubb, Bagnell & Hebert, "Efficient Feature Group Sequencing for Anytime Linear Prediction"
(Algorithm 1, its FR variant, Algorithm 2; Theorems 3.2 and 4.3). With S the selected features,
``w(S) = C_S⁻¹ b0_S``, ``F(S) = ½ b0_Sᵀ C_S⁻¹ b0_S`` and the gradient ``b_g = b0_g − C_gS w(S)``:

* CS-G-OMP picks ``argmax_g b_gᵀ (X_gᵀX_g/n)⁻¹ b_g / c(g)`` (= ‖b_g‖²/c(g) on whitened groups);
  variants ``no_whiten`` (‖b_g‖²/c(g) on standardised features), ``single`` (‖b_g‖∞²/c(g)) and
  cost-blind G-OMP (``cost_sensitive=False``: every c(g) = 1 in the criterion).
* CS-G-FR picks ``argmax_g ½ tr(b_gᵀ M_g⁻¹ b_g) / c(g)`` with the Schur complement
  ``M_g = C_gg − C_gS C_S⁻¹ C_Sg``; this is exactly the gain ``F(S ∪ g) − F(S)``.
* Doubling is FR restricted to groups with ``c(g) ≤ c(G_{j−1})`` (first pick ``c(g) ≤ c_min``).

Implementation (moment space, no refactorisation): the solver keeps a partial block Cholesky
factor of C in selection order, ``K = L⁻¹ C_{S,:}`` (P × D, rows = selected slots), and
``β = L⁻¹ b0_S``. Then ``b = b0 − Kᵀβ``, ``F(S) = ½‖β‖²`` and ``M_g = C_gg − K_gᵀK_g``. Adding
group h appends ``Q = L_h⁻¹ (C_{h,:} − K_hᵀK)`` (L_h the Cholesky factor of M_h) and
``β_h = L_h⁻¹ b_h``: O(P·D·s) per step, independent of n once C is formed. In ``gram=False`` mode
the row block ``C_{h,:}`` is computed from the design, O(n·D·s) per step. A fixed-length
``lax.scan`` runs the steps; candidates are scored for all groups at once over the padded table.

Memory: P (the slot capacity) follows the number of steps and the live coordinates of the groups
that can be reached (:func:`~jaxselect.sequencing.criteria.slot_capacity`), so the state is O(P·D + P²)
besides the problem. On a ``gram=False`` problem (very large D) the default number of steps is
:func:`~jaxselect.sequencing.criteria.lean_steps` (the most steps whose slots fit in min(n, D)) and the
path is stored in slot space (``SelectionPath.features``; ``path.dense()`` gives the (m, D, T)
form), so nothing D×D or m×D×T is ever formed.

Advanced API (the engine lives in :mod:`jaxselect.sequencing.engine`): a selection rule is a
static :class:`Rule` record — :data:`omp_rule`, :data:`fr_rule`, :data:`doubling_rule`,
:data:`fixed_order_rule`, or ``Rule(select, name, needs_schur)`` of your own with
``select(problem, state, params) -> (group, take)``; :func:`sequencing_solver` makes it a
:class:`~jaxselect.Solver` run by the library's driver (:func:`jaxselect.solver.run`), and
``state = sequencing_init(problem, rule, params)`` / ``state = sequencing_step(problem, state)``
(``state.info``: its :class:`StepInfo`) drive it by hand; :func:`sequencing_run` is the one call.
Groups made only of inert coordinates (constant columns, dropped whitening directions) are never
selected; once no selectable group is left the remaining steps are empty (order −1).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from jaxselect._validation import check_choice, host_hyper
from jaxselect.sequencing.engine import (
    Rule,
    RuleParams,
    SequencingConfig,
    SequencingState,
    StepInfo,
    safe_cholesky,
    default_params,
    degenerate,
    fixed_order_path,
    fixed_order_rule,
    selectable_groups,
    sequencing_init,
    sequencing_run,
    sequencing_solver,
    sequencing_step,
)
from jaxselect.sequencing.criteria import OMP_CRITERIA, omp_scores
from jaxselect.linalg import gather_groups
from jaxselect.path import SelectionPath
from jaxselect.sequencing.prepare import Problem, check_problem
from jaxselect.sharding import any_mesh

__all__ = [
    "cs_omp",
    "cs_fr",
    "doubling",
    "fixed_order_path",
    "SequencingState",
    "SequencingConfig",
    "StepInfo",
    "Rule",
    "RuleParams",
    "rule_params",
    "sequencing_solver",
    "sequencing_init",
    "sequencing_step",
    "sequencing_run",
    "omp_rule",
    "fr_rule",
    "doubling_rule",
    "fixed_order_rule",
]


def rule_params(
    problem: Problem, *, criterion: str = "whiten", cost_sensitive: bool = True, c_min=None, order=None
) -> RuleParams:
    """Build :class:`RuleParams` (defaults: whitened criterion, cost-sensitive, c_min = cheapest cost)."""
    check_choice(criterion, "criterion", OMP_CRITERIA)
    return default_params(
        problem, criterion=OMP_CRITERIA.index(criterion), cost_sensitive=cost_sensitive, c_min=c_min, order=order
    )



def _remaining(problem: Problem, state: SequencingState) -> jax.Array:
    """(J,) bool: unselected groups that are not inert; none when b0 = 0 (a constant target: there is
    nothing to explain, so the path stays the intercept-only model, :func:`~jaxselect.sequencing.engine.degenerate`)."""
    groups = problem.groups
    return ~state.selected & selectable_groups(groups.index, groups.mask, problem.live) & ~degenerate(problem)


def _pick(scores: jax.Array, allowed: jax.Array):
    h = jnp.argmax(jnp.where(allowed, scores, -jnp.inf)).astype(jnp.int32)
    return h, jnp.any(allowed)


def _denominator(problem: Problem, params: RuleParams) -> jax.Array:
    costs = problem.groups.costs
    return jnp.where(params.cost_sensitive, costs, jnp.ones_like(costs))


def _fr_gains(problem: Problem, state: SequencingState) -> jax.Array:
    """Exact gains F(S ∪ g) − F(S) = ½ tr(b_gᵀ M_g⁻¹ b_g) for every group (J,)."""
    index, mask = problem.groups.index, problem.groups.mask
    bg = gather_groups(state.b, index, mask, axis=0)  # (J, s, T)
    eye = jnp.eye(index.shape[1], dtype=bg.dtype)
    schur = jnp.where(state.selected[:, None, None], eye, state.schur)
    scale = jnp.where(mask, jnp.diagonal(problem.diag_blocks, axis1=1, axis2=2), jnp.ones(mask.shape, bg.dtype))
    Lg, keep = jax.vmap(safe_cholesky)(schur, mask, scale)
    # dependent coordinates (dropped pivots) add nothing, as in sequencing_add
    y = jax.vmap(partial(solve_triangular, lower=True))(Lg, bg * keep[:, :, None].astype(bg.dtype))
    gains = 0.5 * jnp.sum(y * y, axis=(1, 2))
    return jnp.where(jnp.isfinite(gains), gains, jnp.zeros_like(gains))


def _omp_select(problem: Problem, state: SequencingState, params: RuleParams):
    groups = problem.groups
    scores = omp_scores(state.b, problem.metric_white, problem.metric_std, groups.index, groups.mask, params.criterion)
    return _pick(scores / _denominator(problem, params), _remaining(problem, state))


def _fr_select(problem: Problem, state: SequencingState, params: RuleParams):
    gains = _fr_gains(problem, state)
    return _pick(gains / _denominator(problem, params), _remaining(problem, state))


def _doubling_select(problem: Problem, state: SequencingState, params: RuleParams):
    costs = problem.groups.costs
    remaining = _remaining(problem, state)
    cap = jnp.where(state.step == 0, params.c_min, state.cum_cost)
    # No remaining group under the cap: relax the cap to the cheapest remaining group.
    cheapest = jnp.min(jnp.where(remaining, costs, jnp.inf))
    cap = jnp.maximum(cap, cheapest) * (1 + 8 * jnp.finfo(costs.dtype).eps)
    return _pick(_fr_gains(problem, state) / _denominator(problem, params), remaining & (costs <= cap))


#: CS-G-OMP: ``argmax_g score_g(b) / c(g)`` (criterion ``params.criterion``, Alg. 1).
omp_rule = Rule(_omp_select, "cs_omp")
#: CS-G-FR: ``argmax_g [F(S ∪ g) − F(S)] / c(g)`` (reads the Schur complements).
fr_rule = Rule(_fr_select, "cs_fr", needs_schur=True)
#: Doubling (Alg. 2): FR among groups with ``c(g) ≤ c(G_{j−1})`` (first pick ``c(g) ≤ c_min``).
doubling_rule = Rule(_doubling_select, "doubling", needs_schur=True)


@any_mesh
def cs_omp(
    problem: Problem, k=None, *, criterion: str = "whiten", cost_sensitive: bool = True, progress: bool = False
) -> SelectionPath:
    """Cost-sensitive group orthogonal matching pursuit (Hu et al., Algorithm 1).

    At step j, with the ridge model w(G_{j−1}) refitted on the selected groups, every remaining
    group g is scored by its gradient ``b_g = b0_g − C_{g,S} w`` per unit cost:

    * ``"whiten"``: ``b_gᵀ (X_gᵀX_g/n)⁻¹ b_g / c(g)`` (= ‖b_g‖²/c(g) on whitened groups);
    * ``"no_whiten"``: ``‖b_g‖² / c(g)`` with b_g w.r.t. the standardised (not whitened) features;
    * ``"single"``: ``‖b_g‖∞² / c(g)``, the best single feature of the group.

    For T > 1 targets the squared norms are Frobenius norms. ``cost_sensitive=False`` gives the
    cost-blind G-OMP of the paper's comparisons (costs still accumulate in ``cum_cost``).

    Args:
      problem: from :func:`jaxselect.prepare`.
      k: number of groups to sequence (default all J). Above the number of usable groups (with a
        non-constant column): a ``UserWarning`` and every usable group kept. On a
        ``gram=False`` problem the default is the most steps whose slots fit in min(n, D), and the
        path is in slot space (:class:`~jaxselect.SelectionPath`, ``path.dense()``).
      criterion: one of "whiten", "no_whiten", "single".
      cost_sensitive: divide the criterion by c(g).
      progress: show a ``tqdm`` progress bar (needs the optional ``tqdm``, the ``[progress]``
        extra); the steps then run in a few compiled chunks. Default False: one compiled program.

    Returns:
      A :class:`SelectionPath` of ``k`` prefixes (``status`` flags a floored pivot or NaN).

    Raises:
      ValueError: an unknown ``criterion``, ``k`` < 1.
      TypeError: ``problem`` is not a :class:`Problem`.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> path = js.cs_omp(js.prepare(X, y, js.Groups.from_ids([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0])))
    >>> path.order.tolist()[:2]
    [2, 0]
    """
    check_problem(problem)
    params = rule_params(problem, criterion=criterion, cost_sensitive=cost_sensitive)
    return sequencing_run(problem, omp_rule, params, k=k, progress=progress)


@any_mesh
def cs_fr(problem: Problem, k=None, *, cost_sensitive: bool = True, progress: bool = False) -> SelectionPath:
    """Cost-sensitive group forward regression (CS-G-FR, Hu et al. §2).

    Picks ``argmax_g [F(G_{j−1} ⊕ g) − F(G_{j−1})] / c(g)``, evaluated exactly and without refits as
    ``½ tr(b_gᵀ M_g⁻¹ b_g) / c(g)`` with the Schur complement ``M_g = C_gg − C_gS C_S⁻¹ C_Sg``,
    kept up to date by rank-s downdates. Costs about as much per step as :func:`cs_omp`.

    Args:
      problem: from :func:`jaxselect.prepare`.
      k: number of groups to sequence (default all J; on a ``gram=False`` problem see :func:`cs_omp`).
      cost_sensitive: divide the gain by c(g) (False: plain group forward regression).
      progress: a progress bar, as in :func:`cs_omp`.

    Raises:
      ValueError: ``k`` < 1.
      TypeError: ``problem`` is not a :class:`Problem`.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> js.cs_fr(js.prepare(X, y)).order.tolist()[:2]
    [2, 0]
    """
    check_problem(problem)
    params = rule_params(problem, cost_sensitive=cost_sensitive)
    return sequencing_run(problem, fr_rule, params, k=k, progress=progress)


@any_mesh
def doubling(problem: Problem, k=None, *, c_min=None, progress: bool = False) -> SelectionPath:
    """The Doubling algorithm (Hu et al., Algorithm 2): FR whose total cost at most doubles per step.

    Step 1 picks the best gain per cost among groups with ``c(g) ≤ c_min``; step j among the
    remaining groups with ``c(g) ≤ c(G_{j−1})``. Under the paper's "doubling capable" assumption
    this gives ``F(G_⌊B⌋) > (1 − e^{−γ²/(1+γ)}) F(S_⌊B/4⌋)`` for every budget B > c_min
    (Theorem 4.3).

    When no remaining group fits under the cap (the data are not doubling capable — the paper
    assumes this never happens) the cap is relaxed to the cost of the cheapest remaining group, i.e.
    the step chooses among the cheapest remaining groups. This is the smallest violation of the cap
    that lets the sequence continue; the bound holds at every budget reached before it happens.

    Args:
      problem: from :func:`jaxselect.prepare`.
      k: number of groups to sequence (default all J; on a ``gram=False`` problem see :func:`cs_omp`).
      c_min: cap of the first pick (default: the cheapest group's cost); may be traced.
      progress: a progress bar, as in :func:`cs_omp`.

    Returns:
      A :class:`SelectionPath` of ``k`` prefixes.

    Raises:
      ValueError: ``c_min`` ≤ 0 or not finite, ``k`` < 1, or a malformed ``problem``.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> groups = js.Groups.from_ids([0, 1, 2, 3], [1.0, 2.0, 4.0, 1.0])
    >>> path = js.doubling(js.prepare(X, y, groups))   # each pick costs at most the total so far
    >>> path.order.tolist(), path.cum_cost.tolist()
    ([0, 3, 1, 2], [1.0, 2.0, 4.0, 8.0])
    """
    check_problem(problem)
    if c_min is not None:
        c_min = host_hyper(c_min, "c_min", problem.b0.dtype, low=0.0, strict_low=True)
    return sequencing_run(problem, doubling_rule, rule_params(problem, c_min=c_min), k=k, progress=progress)
