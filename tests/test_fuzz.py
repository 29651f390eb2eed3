"""Fuzz suite of the public API (issue 17): every call obeys one rule.

**The rule.** A call either raises a ``ValueError``/``TypeError`` whose message names the argument
at fault, or returns finite values, or returns a result whose ``status`` is non-zero. No other
exception type from bad input, no NaN/Inf without a status.

Hypothesis draws, for every public function, one perturbation of a valid call from the issue's
categories — NaN/Inf, extreme magnitudes, degenerate data, shapes, dtypes, groups/costs, labels,
hyper-parameters, misuse — applied to one argument, and checks the rule. Shapes of *valid* inputs
never change (one compile per function), so the suite stays within its time budget.

Deterministic: ``derandomize=True`` and no example database. ``JAXSELECT_FUZZ_EXAMPLES`` sets the
examples per function (default 50); ``JAXSELECT_FUZZ_REPORT=path`` writes the outcome counts
(calls, clear errors, finite results, non-zero statuses, violations) as JSON. Each test checks its
own counts (one call and one outcome per example), so the check holds under pytest-xdist too;
``tests/conftest.py`` adds the recorded counts up for the report.
"""

from __future__ import annotations

import collections
import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxselect as js
from jaxselect.rls.selection import rls_predict

EXAMPLES = int(os.environ.get("JAXSELECT_FUZZ_EXAMPLES", "50"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

# ----------------------------------------------------------------------------------- base data
N, D = 12, 6
_rng = np.random.default_rng(17)
X0 = _rng.normal(size=(N, D))
X0[:, 3] += 0.5 * X0[:, 2]
Y0 = X0[:, 0] - 2.0 * X0[:, 2] + 0.3 * _rng.normal(size=N)
YB = (Y0 > np.median(Y0)).astype(np.int64)  # binary labels, both classes
YC = np.arange(N) % 3  # three classes, all present
IDS = np.array([0, 0, 1, 1, 2, 2])
COSTS = np.array([1.0, 2.0, 0.5])
G0 = js.Groups.from_ids(IDS, COSTS)


@pytest.fixture(scope="module")
def fitted():
    """Valid results for the functions that take one (compiled once per module)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = js.cs_omp(js.prepare(X0, Y0, G0))
        return {
            "path": path,
            "glm_path": js.glm_omp(X0, YB, G0),
            "fsa": js.fsa(X0, Y0, 2, n_iter=20),
            "rls": js.greedy_rls(X0, Y0, 2),
            "policy": js.dwsm_fit(jax.random.key(0), X0, YC, n_iter=1, states_per_example=2),
            "curve": js.objective_curve(path, X0, Y0),
        }


# ----------------------------------------------------------------------------------- perturbations
NONFINITE = [np.nan, np.inf, -np.inf]
EXPONENTS = [-46, -40, -30, -20, -10, 10, 20, 30, 38, 40]


def _matrix_mods(base):
    """Perturbations of a (N, D) float matrix: (label, value)."""

    def nan(v, i, j):
        out = base.copy()
        out[i % N, j % D] = v
        return out

    def scale(k, j=None):
        out = base.copy()
        if j is None:
            return out * 10.0**k
        out[:, j % D] *= 10.0**k
        return out

    def column(kind, j):
        out = base.copy()
        j = j % D
        if kind == "const":
            out[:, j] = 3.0
        elif kind == "zero":
            out[:, j] = 0.0
        elif kind == "dup":
            out[:, j] = out[:, (j + 1) % D]
        elif kind == "offset":
            out[:, j] = out[:, j] + 1e9
        return out

    return st.one_of(
        st.builds(
            lambda v, i, j: ("nan", nan(v, i, j)), st.sampled_from(NONFINITE), st.integers(0, N), st.integers(0, D)
        ),
        st.builds(lambda k: ("scale", scale(k)), st.sampled_from(EXPONENTS)),
        st.builds(lambda k, j: ("scale column", scale(k, j)), st.sampled_from(EXPONENTS), st.integers(0, D)),
        st.builds(
            lambda seed, lo, hi: ("mixed scales", base * 10.0 ** np.random.default_rng(seed).integers(lo, hi + 1, D)),
            st.integers(0, 2**16),
            st.integers(-18, 0),
            st.integers(0, 18),
        ),
        st.builds(
            lambda kind, j: ("degenerate " + kind, column(kind, j)),
            st.sampled_from(["const", "zero", "dup", "offset"]),
            st.integers(0, D),
        ),
        st.sampled_from(
            [
                ("all constant", np.ones_like(base)),
                ("rank one", np.outer(base[:, 0], np.ones(D))),
                ("1-D", base[:, 0]),
                ("3-D", base[:, :, None]),
                ("rows-1", base[:-1]),
                ("no columns", base[:, :0]),
                ("one row", base[:1]),
                ("int dtype", np.round(base * 3).astype(np.int32)),
                ("bool dtype", base > 0),
                ("float16", base.astype(np.float16)),
                ("complex", base.astype(np.complex64)),
                ("object", base.astype(object)),
                ("strings", base.astype(str)),
                ("list", base.tolist()),
                ("None", None),
                ("huge int", np.full((N, D), 10**30, dtype=object)),
            ]
        ),
    )


def _target_mods(base):
    def nan(v, i):
        out = base.astype(np.float64).copy()
        out[i % N] = v
        return out

    return st.one_of(
        st.builds(lambda v, i: ("nan", nan(v, i)), st.sampled_from(NONFINITE), st.integers(0, N)),
        st.builds(lambda k: ("scale", base * 10.0**k), st.sampled_from(EXPONENTS)),
        st.builds(
            lambda seed, k: ("random", np.random.default_rng(seed).standard_t(2, N) * 10.0**k),
            st.integers(0, 2**16),
            st.integers(-15, 15),
        ),
        st.sampled_from(
            [
                ("constant", np.full(N, 2.5)),
                ("exact fit", X0[:, :2] @ np.array([1.0, -1.0])),
                ("offset", base + 1e9),
                ("wrong length", base[:-1]),
                ("3-D", base[:, None, None]),
                ("no columns", np.zeros((N, 0))),
                ("bool", base > 0),
                ("strings", base.astype(str)),
                ("object", base.astype(object)),
                ("None", None),
                ("scalar", 1.0),
            ]
        ),
    )


def _label_mods(base, binary: bool):
    extra = [("three classes", np.arange(N) % 3)] if binary else [("absent class", np.where(YC == 1, 2, YC))]
    return st.sampled_from(
        [
            ("negative", np.where(base == 0, -2, base)),
            ("fractional", base + 0.5),
            ("single class", np.zeros(N, np.int64)),
            ("nan", np.where(np.arange(N) == 0, np.nan, base.astype(np.float64))),
            ("bool", base > 0),
            ("signed", np.where(base > 0, 1, -1)),
            ("float whole", base.astype(np.float64)),
            ("wrong length", base[:-1]),
            ("2-D", np.stack([base, base], axis=1)[:, :, None]),
            ("strings", base.astype(str)),
            ("None", None),
            ("huge", np.where(np.arange(N) == 0, 10**9, base)),
        ]
        + extra
    )


def _groups_mods():
    def costs(c):
        return js.Groups.from_ids(IDS, c)

    return st.sampled_from(
        [
            ("ids gap", [0, 0, 2, 2, 3, 3]),
            ("ids negative", [0, 0, -1, 1, 2, 2]),
            ("ids fractional", [0, 0, 1.5, 1, 2, 2]),
            ("ids huge", [0, 0, 1, 1, 2, 10**12]),
            ("ids wrong length", [0, 0, 1, 1, 2]),
            ("ids strings", ["a", "a", "b", "b", "c", "c"]),
            ("ids 2-D", np.zeros((6, 1), int)),
            ("ids permuted", [2, 2, 1, 1, 0, 0]),
            ("groups string", "abc"),
        ]
    ).map(lambda x: x) | st.sampled_from(
        [
            ("costs zero", (0.0, 1.0, 1.0)),
            ("costs negative", (1.0, -1.0, 1.0)),
            ("costs nan", (1.0, np.nan, 1.0)),
            ("costs inf", (1.0, np.inf, 1.0)),
            ("costs underflow", (1e-46, 1.0, 1.0)),
            ("costs overflow", (1e39, 1.0, 1.0)),
            ("costs total overflow", (1e38, 1e38, 1e38)),
            ("costs tiny", (1e-30, 2e-30, 5e-31)),
            ("costs large", (1e30, 2e30, 5e29)),
            ("costs wrong length", (1.0, 1.0)),
            ("costs strings", ("a", "b", "c")),
        ]
    ).map(lambda lc: (lc[0], ("costs", lc[1])))


def _costs_groups(value):
    """Resolve a ('costs', tuple) perturbation into the Groups construction (which may raise)."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "costs":
        return js.Groups.from_ids(IDS, list(value[1]))
    return value


FLOAT_MODS = st.sampled_from(
    [
        ("negative", -1.0),
        ("zero", 0.0),
        ("nan", np.nan),
        ("inf", np.inf),
        ("overflow", 1e39),
        ("underflow", 1e-46),
        ("large", 1e30),
        ("tiny", 1e-30),
        ("bool", True),
        ("string", "a"),
        ("array", np.array([1.0, 2.0])),
        ("None", None),
        ("huge int", 10**400),
        ("jax scalar", jnp.float32(0.5)),
        ("one", 1.0),
    ]
)
INT_MODS = st.sampled_from(
    [
        ("zero", 0),
        ("negative", -1),
        ("fraction", 1.5),
        ("string", "2"),
        ("bool", True),
        ("None", None),
        ("float whole", 2.0),
        ("huge", 10**12),
        ("numpy int", np.int64(2)),
    ]
)
CHOICE_MODS = st.sampled_from([("unknown", "bad"), ("None", None), ("int", 3), ("upper", "INERT")])
RESULT_MODS = st.sampled_from([("None", None), ("tuple", (1, 2)), ("dict", {"status": 0}), ("array", np.ones(3))])


def _curve_mods():
    C = js.Curve
    return st.sampled_from(
        [
            ("empty", C(np.array([]), np.array([]), np.array([], int))),
            ("single point", C(np.array([0.0]), np.array([0.0]), np.array([], int))),
            ("nan value", C(np.array([0.0, 1.0]), np.array([0.0, np.nan]), np.array([0]))),
            ("inf cost", C(np.array([0.0, np.inf]), np.array([0.0, 1.0]), np.array([0]))),
            ("decreasing cost", C(np.array([0.0, 2.0, 1.0]), np.array([0.0, 0.5, 1.0]), np.array([0, 1]))),
            ("negative cost", C(np.array([-1.0, 1.0]), np.array([0.0, 1.0]), np.array([0]))),
            ("mismatched", C(np.array([0.0, 1.0]), np.array([0.0]), np.array([0]))),
            ("zero values", C(np.array([0.0, 1.0, 2.0]), np.zeros(3), np.array([0, 1]))),
            ("negative final", C(np.array([0.0, 1.0, 2.0]), np.array([0.0, -0.2, -0.1]), np.array([0, 1]))),
            ("zero-cost steps", C(np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.5, 0.7]), np.array([0, 1]))),
            ("2-D", C(np.zeros((2, 2)), np.zeros((2, 2)), np.array([0]))),
            ("strings", C(np.array(["a", "b"]), np.array([0.0, 1.0]), np.array([0]))),
            ("list", [0.0, 1.0]),
            ("None", None),
        ]
    )


BUDGET_MODS = st.sampled_from(
    [
        ("nan", np.nan),
        ("inf", np.inf),
        ("negative", -1.0),
        ("zero", 0.0),
        ("overflow", 1e39),
        ("huge", 1e300),
        ("array", np.array([1.0, 2.0])),
        ("jax array", jnp.array([1.0, 2.0])),
        ("jax scalar", jnp.float32(2.0)),
        ("string", "a"),
        ("bool", True),
        ("huge int", 2**40),
        ("None", None),
    ]
)
KEY_MODS = st.sampled_from(
    [
        ("None", None),
        ("int", 0),
        ("wrong shape", np.zeros(3, np.uint32)),
        ("float", np.zeros(2)),
        ("raw key", jax.random.PRNGKey(1)),
        ("batched key", jax.random.split(jax.random.key(0), 2)),
    ]
)

# ----------------------------------------------------------------------------------- the functions
# name -> (call(args, fitted), default args, {arg: (kind, aliases the error message may name it by)}
#          [, excluded (arg, perturbation) pairs])
# Excluded: valid inputs that would compile another program (a new number of classes or units, a
# budgeted DWSM fit, a legacy key type) — the time budget allows one compile per function.
_PREPARE_KNOWN = set()
_DWSM_RECOMPILES = {
    ("key", "raw key"),
    ("y", "single class"),
    ("y", "bool"),
    ("budget", "zero"),
    ("budget", "jax scalar"),
    ("groups", "costs tiny"),
    ("groups", "costs large"),
    ("groups", "ids permuted"),
}
_X = ("matrix", [r"\bX\b"])
_Y = ("target", [r"\b[yY]\b"])
_G = ("groups", [r"group", r"cost", r"\bids?\b"])


def _hyper(name, kind="float"):
    return (kind, [re.escape(name)])


def _prepare(a):
    return js.prepare(a["X"], a["Y"], _costs_groups(a["groups"]), l2=a["l2"], constant_columns=a["constant_columns"])


SPECS = {
    "Groups.from_ids": (
        lambda a, f: js.Groups.from_ids(a["ids"], a["costs"]),
        {"ids": IDS, "costs": COSTS},
        {"ids": ("ids", [r"\bids?\b", r"group"]), "costs": ("costs", [r"cost"])},
    ),
    "prepare": (
        lambda a, f: _prepare(a),
        {"X": X0, "Y": Y0, "groups": G0, "l2": 1e-5, "constant_columns": "inert"},
        {"X": _X, "Y": _Y, "groups": _G, "l2": _hyper("l2"), "constant_columns": _hyper("constant_columns", "choice")},
        _PREPARE_KNOWN,
    ),
    "cs_omp": (
        lambda a, f: js.cs_omp(_prepare(a), criterion=a["criterion"], k=a["k"]),
        {"X": X0, "Y": Y0, "groups": G0, "l2": 1e-5, "constant_columns": "inert", "criterion": "whiten", "k": None},
        {
            "X": _X,
            "Y": _Y,
            "groups": _G,
            "l2": _hyper("l2"),
            "criterion": _hyper("criterion", "choice"),
            "k": _hyper("k", "int"),
        },
        _PREPARE_KNOWN,
    ),
    "cs_fr": (
        lambda a, f: js.cs_fr(_prepare(a)),
        {"X": X0, "Y": Y0, "groups": G0, "l2": 1e-5, "constant_columns": "inert"},
        {"X": _X, "Y": _Y, "groups": _G, "l2": _hyper("l2")},
        _PREPARE_KNOWN,
    ),
    "doubling": (
        lambda a, f: js.doubling(_prepare(a), c_min=a["c_min"]),
        {"X": X0, "Y": Y0, "groups": G0, "l2": 1e-5, "constant_columns": "inert", "c_min": None},
        {"X": _X, "Y": _Y, "groups": _G, "c_min": _hyper("c_min")},
        _PREPARE_KNOWN,
    ),
    "fixed_order_path": (
        lambda a, f: js.fixed_order_path(_prepare(a), a["order"]),
        {"X": X0, "Y": Y0, "groups": G0, "l2": 1e-5, "constant_columns": "inert", "order": np.array([2, 0, 1])},
        {"X": _X, "Y": _Y, "l2": _hyper("l2"), "order": ("order", [r"order"])},
        _PREPARE_KNOWN,
    ),
    "group_lasso_path": (
        lambda a, f: js.group_lasso_path(_prepare(a), tol=a["tol"], lambda_min_ratio=a["lambda_min_ratio"]),
        {
            "X": X0,
            "Y": Y0,
            "groups": G0,
            "l2": 1e-5,
            "constant_columns": "inert",
            "tol": None,
            "lambda_min_ratio": 1e-3,
        },
        {
            "X": _X,
            "Y": _Y,
            "groups": _G,
            "l2": _hyper("l2"),
            "tol": _hyper("tol"),
            "lambda_min_ratio": _hyper("lambda_min_ratio"),
        },
        _PREPARE_KNOWN,
    ),
    "glm_omp": (
        lambda a, f: js.glm_omp(a["X"], a["Y"], _costs_groups(a["groups"]), l2=a["l2"], loss=a["loss"]),
        {"X": X0, "Y": YB, "groups": G0, "l2": 1e-3, "loss": "logistic"},
        {"X": _X, "Y": ("binary", [r"\b[yY]\b"]), "groups": _G, "l2": _hyper("l2"), "loss": _hyper("loss", "choice")},
    ),
    "greedy_rls": (
        lambda a, f: js.greedy_rls(a["X"], a["Y"], a["k"], l2=a["l2"], bias=a["bias"]),
        {"X": X0, "Y": Y0, "k": 2, "l2": 1e-3, "bias": 0.0},
        {"X": _X, "Y": _Y, "k": _hyper("k", "int"), "l2": _hyper("l2"), "bias": _hyper("bias")},
    ),
    "fsa": (
        lambda a, f: js.fsa(a["X"], a["y"], a["k"], n_iter=20, l2=a["l2"], mu=a["mu"], loss=a["loss"]),
        {"X": X0, "y": Y0, "k": 2, "l2": 0.0, "mu": 300.0, "loss": "squared"},
        {
            "X": _X,
            "y": _Y,
            "k": _hyper("k", "int"),
            "l2": _hyper("l2"),
            "mu": _hyper("mu"),
            "loss": _hyper("loss", "choice"),
        },
    ),
    "dwsm_fit": (
        lambda a, f: js.dwsm_fit(
            a["key"],
            a["X"],
            a["y"],
            lam=a["lam"],
            l2=a["l2"],
            cost_matrix=a["cost_matrix"],
            groups=_costs_groups(a["groups"]),
            budget=a["budget"],
            n_iter=1,
            states_per_example=2,
        ),
        {
            "key": jax.random.key(0),
            "X": X0,
            "y": YC,
            "lam": 0.01,
            "l2": 1e-3,
            "cost_matrix": None,
            "groups": None,
            "budget": None,
        },
        {
            "key": ("key", [r"\bkey\b"]),
            "X": _X,
            "y": ("classes", [r"\by\b"]),
            "lam": _hyper("lam"),
            "l2": _hyper("l2"),
            "cost_matrix": ("cost_matrix", [r"cost_matrix"]),
            "groups": _G,
            "budget": ("budget", [r"budget"]),
        },
        _DWSM_RECOMPILES,
    ),
    "ridge_refit": (
        lambda a, f: js.ridge_refit(a["X"], a["Y"], a["support"], l2=a["l2"]),
        {"X": X0, "Y": Y0, "support": None, "l2": 1e-5},
        {"X": _X, "Y": _Y, "support": ("support", [r"support"]), "l2": _hyper("l2")},
    ),
    "rls_refit": (
        lambda a, f: js.rls_refit(a["X"], a["Y"], a["selected"], l2=a["l2"]),
        {"X": X0, "Y": Y0, "selected": np.array([0, 2]), "l2": 1e-3},
        {"X": _X, "Y": _Y, "selected": ("selected", [r"selected"]), "l2": _hyper("l2")},
    ),
    "glm_refit": (
        lambda a, f: js.glm_refit(a["X"], a["y"], l2=a["l2"]),
        {"X": X0, "y": YB, "l2": 1e-2},
        {"X": _X, "y": ("binary", [r"\by\b"]), "l2": _hyper("l2")},
    ),
    "predict": (
        lambda a, f: js.predict(_pick(a, "path", f, "path"), a["X"], budget=a["budget"]),
        {"path": "fitted", "X": X0, "budget": 2.0},
        {"path": ("result", [r"path", r"SelectionPath", r"result"]), "X": _X, "budget": ("budget", [r"budget"])},
    ),
    "glm_predict": (
        lambda a, f: js.predict(_pick(a, "path", f, "glm_path"), a["X"], budget=a["budget"], link=True),
        {"path": "fitted", "X": X0, "budget": 2.0},
        {"path": ("result", [r"path", r"SelectionPath", r"result"]), "X": _X, "budget": ("budget", [r"budget"])},
    ),
    "objective_curve": (
        lambda a, f: js.objective_curve(_pick(a, "path", f, "path"), a["X"], a["Y"], metric=a["metric"]),
        {"path": "fitted", "X": X0, "Y": Y0, "metric": "explained_variance"},
        {
            "path": ("result", [r"path", r"SelectionPath", r"result"]),
            "X": _X,
            "Y": _Y,
            "metric": _hyper("metric", "metric"),
        },
    ),
    "timeliness": (
        lambda a, f: js.timeliness(_pick(a, "curve", f, "curve"), stop_cost=a["stop_cost"], reference=a["reference"]),
        {"curve": "fitted", "stop_cost": None, "reference": None},
        {
            "curve": ("curve", [r"curve", r"Curve", r"cost"]),
            "stop_cost": _hyper("stop_cost"),
            "reference": _hyper("reference"),
        },
    ),
    "alpha_stopping_cost": (
        lambda a, f: js.alpha_stopping_cost(_pick(a, "curve", f, "curve"), a["alpha"]),
        {"curve": "fitted", "alpha": 0.9},
        {"curve": ("curve", [r"curve", r"Curve", r"cost"]), "alpha": _hyper("alpha")},
    ),
    "oracle_curve": (
        lambda a, f: js.oracle_curve(_pick(a, "curve", f, "curve")),
        {"curve": "fitted"},
        {"curve": ("curve", [r"curve", r"Curve", r"cost"])},
    ),
    "fsa_predict": (
        lambda a, f: js.predict(_pick(a, "result", f, "fsa"), a["X"]),
        {"result": "fitted", "X": X0},
        {"result": ("result", [r"result", r"FSAResult"]), "X": _X},
    ),
    "rls_predict": (
        lambda a, f: rls_predict(_pick(a, "result", f, "rls"), a["X"], step=a["step"]),
        {"result": "fitted", "X": X0, "step": None},
        {"result": ("result", [r"result", r"RLSResult"]), "X": _X, "step": _hyper("step", "int")},
    ),
    "dwsm_predict": (
        lambda a, f: js.predict(_pick(a, "policy", f, "policy"), a["X"]),
        {"policy": "fitted", "X": X0},
        {"policy": ("result", [r"policy", r"DWSMPolicy"]), "X": _X},
    ),
}


def _pick(args, key, fitted, which):
    """The module's fitted result where the case leaves ``key`` at its default."""
    value = args[key]
    return fitted[which] if isinstance(value, str) and value == "fitted" else value


def _mods(kind):
    return {
        "matrix": _matrix_mods(X0),
        "target": _target_mods(Y0),
        "binary": _label_mods(YB, True),
        "classes": _label_mods(YC, False),
        "groups": _groups_mods(),
        "float": FLOAT_MODS,
        "int": INT_MODS,
        "choice": CHOICE_MODS,
        "metric": st.sampled_from(
            [
                ("unknown", "bad"),
                ("r2", "r2"),
                ("accuracy", "accuracy"),
                ("None", None),
                ("nan metric", lambda Y, P: float("nan")),
                ("int", 3),
            ]
        ),
        "result": RESULT_MODS,
        "curve": _curve_mods(),
        "budget": BUDGET_MODS,
        "key": KEY_MODS,
        "ids": st.sampled_from(
            [
                ("gap", [0, 0, 2, 2]),
                ("huge", [0, 10**12]),
                ("negative", [-1, 0]),
                ("fractional", [0, 0.5]),
                ("empty", []),
                ("2-D", [[0, 1]]),
                ("strings", ["a"]),
                ("nan", [0, np.nan]),
                ("bool", [True, False, True, False, True, True]),
            ]
        ),
        "costs": st.sampled_from(
            [
                ("zero", [0.0, 1, 1]),
                ("underflow", [1e-46, 1, 1]),
                ("overflow", [1e39, 1, 1]),
                ("total overflow", [1e38, 1e38, 1e38]),
                ("nan", [np.nan, 1, 1]),
                ("wrong length", [1.0]),
                ("strings", ["a", "b", "c"]),
                ("tiny", [1e-30, 1e-30, 1e-30]),
                ("object", np.array([1, None, 2], dtype=object)),
            ]
        ),
        "order": st.sampled_from(
            [
                ("repeat", [0, 0, 1]),
                ("out of range", [0, 5, 1]),
                ("-1 first", [-1, 0, 1]),
                ("float", [0.0, 1.0, 2.0]),
                ("too long", [0, 1, 2, -1]),
                ("2-D", [[0, 1, 2]]),
                ("partial", [1, -1, -1]),
                ("None", None),
            ]
        ),
        "cost_matrix": st.sampled_from(
            [
                ("overflow", np.array([[0, 1e39, 1], [1, 0, 1], [1, 1, 0]])),
                ("large", np.full((3, 3), 1e30)),
                ("nan", np.full((3, 3), np.nan)),
                ("wrong shape", np.ones((2, 2))),
                ("strings", np.full((3, 3), "a")),
            ]
        ),
        "support": st.sampled_from(
            [
                ("object", np.array([True] * D, dtype=object)),
                ("ints", np.ones(D, int)),
                ("wrong length", np.ones(D - 1, bool)),
                ("empty support", np.zeros(D, bool)),
                ("2-D", np.ones((D, 1), bool)),
                ("strings", np.array(["a"] * D)),
            ]
        ),
        "selected": st.sampled_from(
            [
                ("out of range", np.array([0, 9])),
                ("floats", np.array([0.0, 1.0])),
                ("object", np.array([0, None], dtype=object)),
                ("all -1", np.array([-1, -1])),
                ("2-D", np.array([[0, 1]])),
                ("below -1", np.array([-3])),
            ]
        ),
    }[kind]


# ----------------------------------------------------------------------------------- the rule


def _status_of(result):
    status = getattr(result, "status", None)
    if status is None:
        return 0
    return int(np.bitwise_or.reduce(np.asarray(status, np.int64).reshape(-1)))


def _float_leaves(result):
    """Float leaves of a result, with its documented infinities removed (untaken steps, no budget)."""
    if isinstance(result, js.SelectionPath):
        result = result._replace(cum_cost=jnp.where(result.order >= 0, result.cum_cost, 0.0))
    if isinstance(result, js.DWSMPolicy):
        result = result._replace(spec=result.spec._replace(budget=jnp.zeros(())))
    leaves = []
    for leaf in jax.tree.leaves(result):
        if isinstance(leaf, (float, np.floating)) or (
            hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.inexact)
        ):
            leaves.append(np.asarray(leaf))
    return leaves


def check_rule(name, spec, args, arg, label, fitted, counts):
    """Call the function and assert the rule; count the outcome in ``counts`` (``arg``: the perturbed
    argument names)."""
    call, kinds = spec[0], spec[2]
    counts["calls"] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call(args, fitted)
    except (ValueError, TypeError) as exc:
        if type(exc) not in (ValueError, TypeError):  # e.g. a JAX TypeError subclass from deep inside
            counts["violations"] += 1
            raise AssertionError(f"{name}({label}): {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc
        message = str(exc)
        aliases = [a for one in arg for a in kinds[one][1]]
        if not message or not any(re.search(a, message) for a in aliases):
            counts["violations"] += 1
            raise AssertionError(f"{name}({label}): the error does not name {' or '.join(arg)}: {message}") from exc
        counts["clear errors"] += 1
        return
    except Exception as exc:  # any other exception type breaks the rule
        counts["violations"] += 1
        raise AssertionError(f"{name}({label}) raised {type(exc).__name__}: {exc}") from exc
    finite = all(np.all(np.isfinite(leaf)) for leaf in _float_leaves(result))
    status = _status_of(result)
    if status:
        counts["non-zero status"] += 1
    elif finite:
        counts["finite results"] += 1
    else:
        counts["violations"] += 1
        raise AssertionError(f"{name}({label}) returned non-finite values with status 0")


@st.composite
def _case(draw, name):
    """One perturbed argument, or (one case in three) two at once — e.g. an exact fit with l2 = 0."""
    _, defaults, kinds = SPECS[name][:3]
    exclude = SPECS[name][3] if len(SPECS[name]) > 3 else set()
    n_args = min(len(kinds), draw(st.sampled_from([1, 1, 2])))
    chosen = draw(st.lists(st.sampled_from(sorted(kinds)), min_size=n_args, max_size=n_args, unique=True))
    args = dict(defaults)
    labels = []
    for arg in chosen:
        label, value = draw(_mods(kinds[arg][0]).filter(lambda lv, arg=arg: (arg, lv[0]) not in exclude))
        args[arg] = value
        labels.append(f"{arg}={label}")
    return tuple(chosen), ", ".join(labels), args


def check_counts(name, counts, examples):
    """Every example made exactly one call with exactly one outcome, and no violation."""
    assert examples > 0, f"{name}: hypothesis ran no example"
    assert counts["violations"] == 0, f"{name}: {counts['violations']} calls broke the rule"
    assert counts["calls"] == examples, f"{name}: {counts['calls']} calls for {examples} examples"
    outcomes = counts["clear errors"] + counts["finite results"] + counts["non-zero status"]
    assert outcomes == counts["calls"], f"{name}: {outcomes} outcomes counted for {counts['calls']} calls"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_fuzz_rule(name, fitted, record_property):
    """Every perturbed call: a clear ValueError/TypeError naming the argument, finite values, or a status.

    Each test checks its own counts (so the check holds however pytest-xdist spreads the tests) and
    records them; ``tests/conftest.py`` adds them up for ``JAXSELECT_FUZZ_REPORT``.
    """
    counts = collections.Counter()
    examples = [0]

    @FUZZ
    @given(_case(name))
    def run(case):
        examples[0] += 1
        arg, label, args = case
        check_rule(name, SPECS[name], args, arg, label, fitted, counts)

    run()
    record_property("fuzz_counts", dict(counts))
    check_counts(name, counts, examples[0])
