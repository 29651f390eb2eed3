"""The result every feature-group sequencing method returns: an anytime linear predictor.

A :class:`SelectionPath` is the sequence of selected groups ``G = g_1, g_2, …`` with, for each
prefix ``G_j``, its cumulative cost ``c(G_j)``, its training objective and the model ``w(G_j)``
fitted on the prefix's features, in raw feature space (Hu et al. §1: at budget B use the longest
prefix with ``c(G_j) ≤ B``). GLM paths also carry their inverse link, so predictions need no loss.

Two storage forms of the coefficients, one type:

* **dense** (``features is None``): ``coef`` is (m, D, T) — what every Gram-mode solver returns;
* **slot** (``features`` is a (P,) array): ``coef`` is (m, P, T) over the P feature slots a path of
  m steps can fill, ``features[p]`` the raw feature of slot p (D on empty slots; the last slot is
  always empty). Sequencing on ``gram=False`` problems (very large D) returns this form, so the
  path costs O(m·P·T) instead of O(m·D·T). :meth:`SelectionPath.dense` gives the dense form on
  demand, :meth:`SelectionPath.columns` the columns of X a slot path uses, and every consumer
  (:func:`jaxselect.predict`, :func:`jaxselect.objective_curve`, the estimators) takes both forms.

Greedy RLS returns its own :class:`RLSResult` (prefix models over the selected features); it lives
here with its conversion :func:`rls_to_path`, so the evaluation layer reads both anytime results
without importing a solver.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._repr import short_repr
from jaxselect.programs import jit

__all__ = ["SelectionPath", "RLSResult", "LINKS", "link_code", "rls_to_path"]

#: Inverse links a path can carry (``SelectionPath.link`` is the index into this tuple).
LINKS = ("identity", "logistic", "softmax")


def link_code(name: str) -> jax.Array:
    """The int32 code of an inverse link name ("identity", "logistic" or "softmax")."""
    return jnp.asarray(LINKS.index(name), jnp.int32)


class SelectionPath(NamedTuple):
    """An anytime predictor: a group order with the model after every prefix.

    Attributes:
      order: (m,) int32 group chosen at each step; −1 where no group was taken (the path ran out
        of groups that can still change the model — e.g. only constant columns were left).
      cum_cost: (m,) cumulative cost c(G_j) after step j (+inf where no group was taken),
        accumulated with compensated summation so it is exact to the dtype's rounding.
      objective: (m,) the fraction of the feature-less model's loss removed by the prefix G_j,
        ``1 − L(G_j)/L(∅)`` (0 when ``L(∅) = 0``: nothing to explain), on the training data, with
        L the loss the solver selects by — one definition for every solver:

        * the sequencing solvers (:func:`~jaxselect.cs_omp`, :func:`~jaxselect.cs_fr`,
          :func:`~jaxselect.doubling`, :func:`~jaxselect.fixed_order_path` and the refits of
          :func:`~jaxselect.group_lasso_path`): the ridge-regularised mean squared loss on
          standardised targets summed over the T targets, ``L(∅) = T/2``, so the value is
          ``2·F(G_j)/T`` with ``F(S) = ½ tr(b0_Sᵀ C_S⁻¹ b0_S)`` — the regularised training R²
          averaged over the targets;
        * :func:`~jaxselect.glm_omp`: the regularised GLM risk r (Hu et al. eq. 21), L(∅) the
          intercept-only model's (``info.null_loss``);
        * greedy RLS (:func:`jaxselect.rls_to_path`): the leave-one-out mean squared error, L(∅)
          the feature-less model's (``null_loo_error``).

        Larger is better, at most 1; it is what each greedy step increases the most (per cost).
      coef: (m, D, T) raw-space coefficients of the model after each prefix.
      intercept: (m, T) raw-space intercept after each prefix.
      null_intercept: (T,) the intercept-only model used below the cheapest prefix.
      status: () int32, 0 when fine, else flags of :data:`jaxselect.STATUS_MESSAGES`.
      link: () int32 index into :data:`LINKS`: how :func:`jaxselect.glm_predict` turns the linear
        scores into predictions (identity for regression paths).
      features: None for a dense path (``coef`` (m, D, T)); for a slot path (``coef`` (m, P, T)) the
        (P,) int32 raw feature of each coefficient slot, D on empty slots (the last slot is always
        empty, so a concrete slot path knows D).
      info: the diagnostics of the solve behind the path, or None: a
        :class:`~jaxselect.GLMInfo` (per-step Newton diagnostics) for :func:`~jaxselect.glm_omp`, the
        :class:`~jaxselect.GroupLassoFit` (the per-λ solutions) for
        :func:`~jaxselect.group_lasso_path`; None for the other solvers.

    Returned by :func:`~jaxselect.cs_omp`, :func:`~jaxselect.cs_fr`, :func:`~jaxselect.doubling`,
    :func:`~jaxselect.fixed_order_path`, :func:`~jaxselect.glm_omp`,
    :func:`~jaxselect.group_lasso_path` and :func:`~jaxselect.rls_to_path`; read by
    :func:`~jaxselect.predict` (the longest prefix with ``cum_cost ≤ budget``) and the curves.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = js.cs_omp(js.prepare(X, y))
    >>> path.order.tolist()[0], path.cum_cost.tolist(), path.coef.shape   # (m, D, T)
    (1, [1.0, 2.0, 3.0], (3, 3, 1))
    >>> path
    SelectionPath(order=int32[3], cum_cost=float32[3], ...)
    """

    order: jax.Array
    cum_cost: jax.Array
    objective: jax.Array
    coef: jax.Array
    intercept: jax.Array
    null_intercept: jax.Array
    status: jax.Array
    link: jax.Array
    features: jax.Array | None = None
    info: object | None = None

    __repr__ = short_repr

    @property
    def n_steps(self) -> int:
        return self.order.shape[-1]

    @property
    def is_dense(self) -> bool:
        """True when ``coef`` is (m, D, T) (``features`` is None)."""
        return self.features is None

    @property
    def n_features(self) -> int:
        """D, the number of raw features the path was trained on (concrete slot paths read it from the
        always-empty last slot; inside ``jit`` pass ``n_features`` to :meth:`dense` instead)."""
        if self.features is None:
            return self.coef.shape[-2]
        try:
            return int(np.asarray(self.features)[..., -1].max())
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError) as err:
            raise ValueError(
                "the number of features of a traced slot path is not known; pass n_features= explicitly"
            ) from err

    def dense(self, n_features: int | None = None) -> SelectionPath:
        """This path with dense (m, D, T) coefficients (itself when already dense).

        ``n_features`` (D) is needed only inside ``jax.jit`` (a traced slot path); memory O(m·D·T).
        """
        if self.features is None:
            return self
        d = self.n_features if n_features is None else int(n_features)
        return self._replace(coef=_scatter_slots(self.coef, self.features, d), features=None)

    def step_coef(self, j, n_features: int | None = None) -> jax.Array:
        """Dense (D, T) raw coefficients of the model after step ``j`` (0-based) in either form."""
        if self.features is None:
            return self.coef[j]
        d = self.n_features if n_features is None else int(n_features)
        return _scatter_slots(self.coef[j], self.features, d)

    def columns(self, X: jax.Array) -> jax.Array:
        """The columns of X (n, D) that ``coef`` multiplies: X itself for a dense path, the (n, P)
        slot columns ``X[:, features]`` (zeros on empty slots) for a slot path, so that
        ``path.columns(X) @ path.coef[j] + path.intercept[j]`` predicts with prefix j in both forms."""
        if self.features is None:
            return X
        return jnp.take(X, self.features, axis=-1, mode="fill", fill_value=0)


def _scatter_slots(coef: jax.Array, features: jax.Array, d: int) -> jax.Array:
    """Dense (..., D, T) coefficients from slot coefficients (..., P, T) and their features (P,)."""
    lead = coef.shape[:-2]
    out = jnp.zeros(lead + (d, coef.shape[-1]), coef.dtype)
    return out.at[..., features, :].set(coef, mode="drop")


class RLSResult(NamedTuple):
    """Result of :func:`greedy_rls` (the model after every prefix, for anytime use).

    Shapes use ``k`` selected features, ``d`` features and ``T`` targets; for a 1-D ``y`` the
    trailing ``T`` axis is dropped. :func:`rls_to_path` turns it into a
    :class:`~jaxselect.SelectionPath` for :func:`jaxselect.predict` and the anytime curves.

    Attributes:
      selected: (k,) int32 feature indices in the order they were added; −1 for a step that found
        no selectable feature (only possible inside a user's ``jit``, where ``k`` larger than the
        number of non-constant columns cannot be rejected up front).
      loo_error: (k,) leave-one-out mean squared error ``Σ_jh (Ã_jh/g̃_j)² / (n·T)`` of the model
        after each addition (RLScore's ``performances``).
      coef: (d, T) final weights in feature space (zero for features not selected).
      intercept: (T,) final intercept ``bias · 1ᵀA`` (zero when ``bias == 0``).
      coef_path: (k, k, T) ``coef_path[t, j]`` is the weight of feature ``selected[j]`` in the model
        with the first ``t + 1`` features (zero for ``j > t``).
      intercept_path: (k, T) intercept of the model after each addition.
      null_intercept: (T,) prediction of the model with no selected feature: 0 without bias, else
        the intercept of the ridge model on the bias column alone, ``bias·mean(Y)/(bias + l2)``.
      null_loo_error: () LOO mean squared error of that feature-less model (``mean(Y²)`` without
        bias).
      status: () int32, 0 when fine, else flags of :data:`jaxselect.STATUS_MESSAGES`
        (``ILL_CONDITIONED`` = 2: diag(G) lost positivity or no candidate had a usable score;
        ``NONFINITE`` = 1: NaN/Inf in the state). Raise with :func:`jaxselect.raise_for_status`.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 20)).astype(np.float32)
    >>> Y = X[:, [3, 7]] @ np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)
    >>> res = js.greedy_rls(X, Y, 2, l2=0.01)          # an RLSResult
    >>> res.loo_error.shape, res.coef.shape, res.coef_path.shape, int(res.status)
    ((2,), (20, 2), (2, 2, 2), 0)
    """

    selected: jax.Array
    loo_error: jax.Array
    coef: jax.Array
    intercept: jax.Array
    coef_path: jax.Array
    intercept_path: jax.Array
    null_intercept: jax.Array
    null_loo_error: jax.Array
    status: jax.Array

    __repr__ = short_repr


def check_rls_result(result) -> None:
    if not isinstance(result, RLSResult):
        raise TypeError(f"result must be an RLSResult from greedy_rls; got {type(result).__name__}")


def safe_index(selected, d: int):
    """Selected indices with −1 (no feature) mapped out of range, for ``.at[...].set(mode="drop")``."""
    return jnp.where(selected >= 0, selected, d)


def rls_to_path(result: RLSResult) -> SelectionPath:
    """The greedy RLS result as a :class:`~jaxselect.SelectionPath` (anytime composition).

    Features are unit-cost singleton groups, so with it :func:`jaxselect.predict` at
    ``budget=b`` gives ``rls_predict(result, X, step=b)`` and the anytime curves
    (:func:`jaxselect.objective_curve`, :func:`jaxselect.timeliness`, ...) apply.

    Fields: ``order = selected``; ``cum_cost = 1, 2, …, k`` in the result's dtype (+inf for a
    step that selected nothing); ``objective[t] = 1 − loo_error[t] / null_loo_error``, the
    fraction of the feature-less model's LOO error removed by the first ``t + 1`` features (the
    quantity each greedy step maximises; 0 for an all-zero ``Y``; not necessarily monotone);
    ``coef`` (k, d, T) dense from ``coef_path``; ``intercept`` (k, T); ``null_intercept`` (T,)
    the feature-less model (0 without bias); ``status``; ``link = "identity"``. A 1-D ``y`` gets
    ``T = 1``. Traceable (no host reads).

    Example:
      >>> import numpy as np, jaxselect as js
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(100, 20)).astype(np.float32)
      >>> Y = X[:, [3, 7]] @ np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)
      >>> res = js.greedy_rls(X, Y, 2, l2=0.01)
      >>> path = js.rls_to_path(res)
      >>> path.order.tolist(), path.cum_cost.tolist()
      ([3, 7], [1.0, 2.0])
    """
    check_rls_result(result)
    coef_path, intercept_path, null = result.coef_path, result.intercept_path, result.null_intercept
    if coef_path.ndim == 2:  # fit on a 1-D y: give the path its T = 1 axis
        coef_path, intercept_path, null = coef_path[..., None], intercept_path[:, None], null[None]
    return _to_path(
        result.selected,
        result.loo_error,
        result.null_loo_error,
        coef_path,
        intercept_path,
        null,
        result.status,
        d=result.coef.shape[0],
    )


@partial(jit, static_argnames=("d",))
def _to_path(selected, loo, null_loo, coef_path, intercept_path, null_intercept, status, *, d):
    k, _, T = coef_path.shape
    dt = coef_path.dtype
    taken = selected >= 0
    cum_cost = jnp.where(taken, jnp.arange(1, k + 1, dtype=dt), jnp.asarray(jnp.inf, dt))
    safe_null = jnp.where(null_loo > 0, null_loo, jnp.ones_like(null_loo))
    objective = jnp.where(null_loo > 0, 1 - loo / safe_null, jnp.zeros_like(loo))
    coef = jnp.zeros((k, d, T), dt).at[:, safe_index(selected, d), :].set(coef_path, mode="drop")
    return SelectionPath(
        order=selected,
        cum_cost=cum_cost,
        objective=objective,
        coef=coef,
        intercept=intercept_path,
        null_intercept=null_intercept,
        status=status,
        link=link_code("identity"),
    )
