"""FSA's option records and its Solver (issue 34): the short signature, the records, the old
keywords (one release, a DeprecationWarning, the identical result), the one list of loss names,
and ``fsa_solver`` driven by the library's driver giving ``fsa_step``'s iterates."""

import inspect
import warnings

import jax
import numpy as np
import pytest

import jaxselect as js
from jaxselect import losses
from jaxselect.anneal import Execution, FSACarry, FSAStage, PiecewiseLinear, Polish, fsa_solver
from jaxselect.solver import Solver, iterate


N, M, K, NITER = 300, 30, 3, 60


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M)).astype(np.float32)
    y = (X[:, 2] - 2 * X[:, 5] + 0.5 * X[:, 11] + 0.3 * rng.standard_normal(N)).astype(np.float32)
    return X, y, (y > 0).astype(np.int32)


def _same(a, b):
    for field in a._fields:
        x, z = getattr(a, field), getattr(b, field)
        if x is None or isinstance(x, int):
            assert x == z, field
        else:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(z), err_msg=field)


def test_signature_has_at_most_fifteen_parameters():
    named = [p for p in inspect.signature(js.fsa).parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert len(named) <= 15
    assert [p.name for p in named[:3]] == ["X", "y", "k"]


@pytest.mark.parametrize(
    "old, new",
    [
        (dict(tol=1e-6, max_iter=7), dict(polish=Polish(tol=1e-6, max_iter=7))),
        (dict(l1=1e-3), dict(polish=Polish(l1=1e-3))),
        (dict(max_memory=None), dict(execution=Execution(max_memory=None))),
        (dict(huber_h=0.3, loss="huber_hinge"), dict(loss=losses.HuberHinge(0.3))),
    ],
)
def test_old_keywords_warn_and_give_the_identical_result(old, new):
    X, y, labels = _problem(1)
    target = labels if "loss" in old else y
    with pytest.warns(DeprecationWarning, match="deprecated"):
        a = js.fsa(X, target, K, n_iter=NITER, **old)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        b = js.fsa(X, target, K, n_iter=NITER, **new)
    _same(a, b)


def test_bins_and_smoothness_move_to_the_learner_record():
    X, y, _ = _problem(2)
    with pytest.warns(DeprecationWarning, match="PiecewiseLinear"):
        a = js.fsa(X, y, K, n_iter=NITER, bins=4, smoothness=0.01)
    b = js.fsa(X, y, K, n_iter=NITER, learner=PiecewiseLinear(4, smoothness=0.01))
    _same(a, b)


def test_ranking_pairs_are_the_target():
    X, y, _ = _problem(3)
    rng = np.random.default_rng(0)
    ij = rng.integers(0, N, size=(400, 2))
    r = (y[ij[:, 0]] > y[ij[:, 1]]).astype(np.float32)
    pairs = np.column_stack([ij, r])
    with pytest.warns(DeprecationWarning, match="pairs"):
        a = js.fsa(X, None, K, loss="ranking", n_iter=NITER, pairs=pairs)
    b = js.fsa(X, pairs, K, loss="ranking", n_iter=NITER)
    _same(a, b)


def test_refine_keyword_and_record_agree():
    X, _, labels = _problem(4)
    with pytest.warns(DeprecationWarning, match="refine"):
        a = js.fsa(X, labels, K, loss="logistic", n_iter=NITER, refine=1)
    b = js.fsa(X, labels, K, loss="logistic", n_iter=NITER, polish=Polish(refine=1))
    _same(a, b)


def test_option_errors():
    X, y, _ = _problem(5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        js.fsa(X, y, K, n_iterations=3)
    with pytest.raises(TypeError, match="not both"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        js.fsa(X, y, K, polish=Polish(tol=1e-6), max_iter=3)
    with pytest.raises(TypeError, match="execution"):
        js.fsa(X, y, K, execution={"max_memory": None})
    with pytest.raises(TypeError, match="learner"):
        js.fsa(X, y, K, learner=4)


def test_loss_names_are_listed_once():
    from jaxselect.anneal import polish, step, stream

    assert step.LOSSES == losses.loss_names(fsa=True) == ("squared", "logistic", "huber_hinge", "lorenz", "ranking")
    assert step.CLASSIFICATION_LOSSES == losses.loss_names(fsa=True, classification=True)
    assert stream.STREAM_LOSSES == polish.NEWTON_LOSSES == losses.loss_names(fsa=True, pointwise=True)
    assert losses.GLM_LOSSES == ("logistic", "softmax", "squared")


def test_fsa_solver_driven_by_iterate_gives_fsa_step_iterates():
    """FSA's Solver on the full width, run by the library's driver (one stage, ``iterate``), gives
    the iterates of the public ``fsa_init``/``fsa_step`` loop."""
    X, y, _ = _problem(6)
    problem = js.anneal.fsa_prepare(X, y)
    state0 = js.anneal.fsa_init(problem, K, n_iter=NITER, mu=10.0, lr=0.3)
    solver = fsa_solver("fixed")
    assert isinstance(solver, Solver) and solver.traits.until_done

    @jax.jit
    def driven(problem, schedule):
        carry = solver.init(problem, schedule, np.float32(0.3))
        carry, _ = iterate(solver, FSAStage(problem, NITER), carry, NITER)
        return carry

    carry = driven(problem, state0.schedule)
    assert isinstance(carry, FSACarry)
    loop = jax.jit(lambda p, s: jax.lax.fori_loop(0, NITER, lambda i, s: js.anneal.fsa_step(p, s), s))
    state = loop(problem, state0)
    np.testing.assert_array_equal(np.asarray(carry.state.active), np.asarray(state.active))
    np.testing.assert_allclose(np.asarray(carry.state.coef), np.asarray(state.coef), rtol=1e-6, atol=1e-7)
    assert np.isfinite(np.asarray(carry.objective)).all()
