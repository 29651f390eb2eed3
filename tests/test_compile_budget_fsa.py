"""Compile budget of FSA's public calls: a first in-memory call compiles at most two XLA programs
(the front door's summary and the one solve: schedule, polish and survivors), and a second
identical call compiles none (issue 34, "one program per call").

Counted from ``jax.clear_caches()`` (and the library's program cache cleared) with
tests/compile_count.py, on numpy float32 X of 2 000 x 200, as the issue measures.
"""

import numpy as np
import jax
import pytest

import jaxselect as js
from jaxselect.programs import clear_compiled
from jaxselect.sklearn import FSAClassifier
from compile_count import count_compiles

#: programs a first in-memory call may compile: the front door's summary + the solve
BUDGET = 2


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 200)).astype(np.float32)
    y = (X[:, 3] - 2 * X[:, 7] + 0.1 * rng.standard_normal(2000)).astype(np.float32)
    return X, y, (y > 0).astype(np.int32)


def _classes(y):
    """Three classes of the regression target (the multinomial loss, issue 37)."""
    return np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.int32)


def _calls():
    X, y, labels = _data()
    return {
        "fsa": lambda: js.fsa(X, y, 20),
        "fsa_logistic": lambda: js.fsa(X, labels, 20, loss="logistic"),
        "FSAClassifier.fit": lambda: FSAClassifier().fit(X, labels).coef_,
        "fsa_softmax": lambda: js.fsa(X, _classes(y), 20, loss="softmax"),
        "FSAClassifier.fit_multiclass": lambda: FSAClassifier().fit(X, _classes(y)).coef_,
    }


@pytest.mark.parametrize("name", ["fsa", "fsa_logistic", "FSAClassifier.fit", "fsa_softmax", "FSAClassifier.fit_multiclass"])
def test_first_call_compiles_at_most_two_programs_and_a_second_none(name):
    call = _calls()[name]
    jax.clear_caches()
    clear_compiled()
    with count_compiles() as first:
        jax.block_until_ready(call())
    assert first[0] <= BUDGET, f"{name}: a first call compiled {first[0]} programs (budget {BUDGET})"
    with count_compiles() as second:
        jax.block_until_ready(call())
    assert second[0] == 0, f"{name}: a second identical call compiled {second[0]} programs"


def test_a_new_k_in_its_bucket_and_new_hyperparameters_compile_nothing():
    X, y, _ = _data()
    js.fsa(X, y, 20)
    assert js.anneal.k_bucket(19, 200) == js.anneal.k_bucket(20, 200)
    with count_compiles() as again:
        js.fsa(X, y, 19, mu=100.0, l2=0.1, n_iter=400)
    assert again[0] == 0


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_every_k_of_a_small_x_shares_one_program_and_the_per_bucket_answer(monkeypatch, sparse):
    """On a small X the last stage is at least min(SHARED_WIDTH, M/4) wide: k = 5 .. 90 (four
    k-buckets) compile once — with the sparse defaults, the L1 polish and a refinement round too. With a fixed
    step the iterates do not depend on the stages: the schedule's answer is that of the per-k-bucket
    stages (the layout of large inputs). The default step is 1/L of each stage's columns, so with it
    the layouts may differ in the run's last columns; both keep the informative ones."""
    import sys

    import scipy.sparse as sps

    fsa_module = sys.modules["jaxselect.anneal.fsa"]
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 400)).astype(np.float32)
    if sparse:
        X = sps.csr_matrix(np.where(rng.uniform(size=X.shape) < 0.1, np.abs(X), 0).astype(np.float32))
    dense = X.toarray() if sparse else X
    informative = [3, 7, 300]
    score = (dense[:, informative] / dense[:, informative].std(0)) @ np.array([2.0, -2.0, 2.0])
    labels = (score + rng.logistic(size=300) > 0).astype(np.int32)
    ks = (5, 17, 40, 90)
    assert len({js.anneal.k_bucket(k, 400) for k in ks}) == 4 and max(ks) <= 400 // 4
    js.fsa(X, labels, ks[0], loss="logistic")
    shared, fixed = {}, {}
    with count_compiles() as again:
        for k in ks:
            shared[k] = js.fsa(X, labels, k, loss="logistic")
            fixed[k] = js.fsa(X, labels, k, loss="logistic", lr=0.5, polish=False)
    assert again[0] <= 1, f"{again[0]} programs compiled for new k's of a shared width (one: the fixed step's)"
    monkeypatch.setattr(fsa_module, "SHARED_WIDTH_BYTES", 0)  # the stages of a large X: one per k-bucket
    for k in ks:
        assert set(informative) <= set(shared[k].support.tolist()), k
        own = js.fsa(X, labels, k, loss="logistic", lr=0.5, polish=False)
        assert own.support.tolist() == fixed[k].support.tolist()
        np.testing.assert_allclose(np.asarray(fixed[k].coef), np.asarray(own.coef), rtol=1e-4, atol=1e-5)


def test_a_small_x_at_most_16_times_its_last_width_runs_two_stages_with_the_same_iterates(monkeypatch):
    """M = 1 500, last width 256: two stages (M, 256) instead of the halvings between them; with a
    fixed step the iterates are those of the per-k-bucket layout of a large X."""
    import sys

    fsa_module = sys.modules["jaxselect.anneal.fsa"]
    assert fsa_module.fsa_stage_widths(1500, 8, shared=True) == (1500, 256)
    assert len(fsa_module.fsa_stage_widths(1500, 8)) > 2
    assert len(fsa_module.fsa_stage_widths(8000, 8, shared=True)) > 2  # wider than 16 x 256: halvings
    rng = np.random.default_rng(11)
    X = rng.standard_normal((120, 1500)).astype(np.float32)
    labels = (X[:, 4] - X[:, 900] + 0.5 * rng.logistic(size=120) > 0).astype(np.int32)
    options = {"loss": "logistic", "lr": 0.5, "n_iter": 120, "polish": False}
    two = js.fsa(X, labels, 8, **options)
    assert np.asarray(two.step_size).shape == (2,)
    monkeypatch.setattr(fsa_module, "SHARED_WIDTH_BYTES", 0)  # a large X's layout: one stage per halving
    staged = js.fsa(X, labels, 8, **options)
    assert np.asarray(staged.step_size).shape[0] > 2
    assert two.support.tolist() == staged.support.tolist() and {4, 900} <= set(two.support.tolist())
    np.testing.assert_allclose(np.asarray(two.coef), np.asarray(staged.coef), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(two.loss_path), np.asarray(staged.loss_path), rtol=1e-5)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_narrow_stages_of_a_small_sparse_x_run_dense_with_the_sparse_answer(monkeypatch, loss):
    """A small sparse X's narrow stages run on a dense copy of their columns (the products of a
    compacted sparse stage still read every stored entry): the same iterates as the all-sparse run."""
    import sys

    import scipy.sparse as sps

    fsa_module = sys.modules["jaxselect.anneal.fsa"]
    rng = np.random.default_rng(5)
    X = sps.random(400, 1200, density=0.02, format="csr", random_state=5, dtype=np.float32)
    signal = np.asarray(X[:, [2, 50, 700]].sum(axis=1)).ravel() + 0.05 * rng.standard_normal(400)
    y = (signal > np.median(signal)).astype(np.int32) if loss == "logistic" else signal.astype(np.float32)
    options = {"loss": loss, "n_iter": 200, "polish": False}
    problem = js.anneal.fsa_prepare(X, y, loss=loss)
    widths = fsa_module.fsa_stage_widths(1200, 10, shared=True)
    assert fsa_module.dense_stage(problem.design, widths, False) == 1  # every stage after the first
    dense = js.fsa(X, y, 10, **options)
    monkeypatch.setattr(fsa_module, "DENSE_STAGE_BYTES", 0)
    sparse = js.fsa(X, y, 10, **options)
    assert dense.support.tolist() == sparse.support.tolist()
    np.testing.assert_allclose(np.asarray(dense.coef), np.asarray(sparse.coef), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(dense.loss_path), np.asarray(sparse.loss_path), rtol=1e-5)


@pytest.mark.parametrize("learner", [None, js.anneal.PiecewiseLinear(8)], ids=["linear", "piecewise"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_first_predict_compiles_at_most_one_program(learner, sparse):
    """js.predict(FSAResult, X): X validated once by js.predict, then ONE jitted core (the support
    columns and the scores); linear learners on sparse X run on the host (no program)."""
    import scipy.sparse as sps

    X, y, _ = _data()
    jax.clear_caches()
    clear_compiled()
    res = js.fsa(X, y, 20, learner=learner)
    Xp = sps.csr_matrix(X) if sparse else X
    with count_compiles() as first:
        pred = jax.block_until_ready(js.predict(res, Xp))
    assert first[0] <= 1, f"a first js.predict compiled {first[0]} programs"
    with count_compiles() as second:
        again = jax.block_until_ready(js.predict(res, Xp))
    assert second[0] == 0
    np.testing.assert_array_equal(np.asarray(pred), np.asarray(again))
    np.testing.assert_allclose(np.asarray(pred), np.asarray(js.fsa_predict(res, X)), rtol=1e-5, atol=1e-5)


def test_first_classifier_predict_compiles_at_most_one_program():
    X, _, labels = _data()
    for bins in (None, 8):
        clf = FSAClassifier(k=20, bins=bins).fit(X, labels)
        jax.clear_caches()
        clear_compiled()
        with count_compiles() as first:
            clf.predict(X)
            clf.decision_function(X)
            clf.predict_proba(X)
        assert first[0] <= 1, f"bins={bins}: FSAClassifier.predict compiled {first[0]} programs"
