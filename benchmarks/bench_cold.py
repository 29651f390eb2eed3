"""What a first call costs: every family's first and second call in fresh processes, beside scikit-learn.

For each public call (numpy float32 X of 2 000 x 200 by default, XLA's default flags) a fresh Python
process imports jaxselect, then times the first call (tracing, compiling, running), counts the XLA
programs it compiled and the seconds spent compiling them (``jax.monitoring``'s backend-compile
events), and times a second identical call. The same is done again with JAX's persistent
compilation cache turned on (``js.enable_persistent_cache``): one process fills a fresh cache
directory, a second, new process is measured. scikit-learn's nearest peer is timed on the same
data in the same process (first fit).

Then the cold ``GridSearchCV`` of issue 35: a TF-IDF -> ``FSAClassifier(k)`` -> ``LogisticRegression``
pipeline over 4 values of k x 5 folds on 1 200 generated short documents, in a fresh process,
beside the same pipeline with ``SelectKBest(chi2, k)``.

``--grid-warm`` also times the pipeline in a new process whose persistent cache
(``js.enable_persistent_cache``) another process filled.

Run: ``python benchmarks/bench_cold.py [--n 2000 --d 200] [--only fsa cs_omp ...] [--grid-warm]``
(about two minutes on 2 CPU cores). Prints a table; saves ``results/bench_cold.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# Each case: (setup code defining the call `f()` and the peer `peer()`, from X, y, labels, js).
CASES = {
    "prepare+cs_omp": (
        "f = lambda: js.cs_omp(js.prepare(X, y), k=20)",
        "from sklearn.linear_model import OrthogonalMatchingPursuit as P; peer = lambda: P(n_nonzero_coefs=20).fit(X, y)",
    ),
    "prepare+cs_fr": (
        "f = lambda: js.cs_fr(js.prepare(X, y), k=20)",
        "from sklearn.linear_model import OrthogonalMatchingPursuit as P; peer = lambda: P(n_nonzero_coefs=20).fit(X, y)",
    ),
    "fsa": (
        "f = lambda: js.fsa(X, y, 20)",
        "from sklearn.linear_model import Lasso; peer = lambda: Lasso(alpha=0.05).fit(X, y)",
    ),
    "fsa(logistic)": (
        "f = lambda: js.fsa(X, labels, 20, loss='logistic')",
        "from common import l1_logistic; peer = lambda: l1_logistic(0.05).fit(X, labels)",
    ),
    "greedy_rls": (
        "f = lambda: js.greedy_rls(X, y, 20)",
        "from sklearn.linear_model import OrthogonalMatchingPursuit as P; peer = lambda: P(n_nonzero_coefs=20).fit(X, y)",
    ),
    "glm_omp": (
        "f = lambda: js.glm_omp(X, labels, k=20)",
        "from common import l1_logistic; peer = lambda: l1_logistic(0.05).fit(X, labels)",
    ),
    "prepare+group_lasso_path": (
        "f = lambda: js.group_lasso_path(js.prepare(X, y))",
        "from sklearn.linear_model import lasso_path; peer = lambda: lasso_path(X, y, n_alphas=50)",
    ),
    "FSAClassifier().fit": (
        "from jaxselect.sklearn import FSAClassifier; f = lambda: FSAClassifier().fit(X, labels)",
        "from common import l1_logistic; peer = lambda: l1_logistic(0.05).fit(X, labels)",
    ),
}

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {here!r})
t_import = time.perf_counter()
import numpy as np
import jax
import jaxselect as js
t_import = time.perf_counter() - t_import
if {cache!r}:
    js.enable_persistent_cache({cache!r})
compiles = [0, 0.0]
def _listen(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        compiles[0] += 1
        compiles[1] += duration
jax.monitoring.register_event_duration_secs_listener(_listen)
rng = np.random.default_rng(0)
n, d = {n}, {d}
X = rng.normal(size=(n, d)).astype(np.float32)
beta = np.zeros(d, np.float32); beta[:10] = rng.normal(size=10)
y = (X @ beta + 0.5 * rng.normal(size=n)).astype(np.float32)
labels = (X @ beta + 0.5 * rng.normal(size=n) > 0).astype(np.int32)
{setup}
{peer}
def timed(g):
    t = time.perf_counter(); jax.block_until_ready(jax.tree.leaves(g())); return time.perf_counter() - t
first = timed(f)
programs, compile_s = compiles[0], compiles[1]
second = timed(f)
t = time.perf_counter(); peer(); peer_s = time.perf_counter() - t
print("RESULT" + json.dumps(dict(import_s=t_import, first=first, second=second, programs=programs,
                                 compile_s=compile_s, peer=peer_s)))
"""

GRID = r"""
import json, sys, time, warnings
sys.path.insert(0, {here!r})
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.feature_selection import SelectKBest, chi2
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
rng = np.random.default_rng(0)
vocab = np.array(["w%d" % i for i in range(3000)])
topic = rng.dirichlet(np.full(3000, 0.05), size=2)
docs, labels = [], []
for i in range(1200):
    c = i % 2
    p = 0.8 * np.full(3000, 1 / 3000) + 0.2 * topic[c]
    docs.append(" ".join(rng.choice(vocab, size=rng.integers(20, 60), p=p / p.sum())))
    labels.append(c)
labels = np.array(labels)
ks = [25, 50, 100, 200]
def grid(selector):
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("select", selector), ("clf", LogisticRegression(max_iter=1000))])
    search = GridSearchCV(pipe, {{"select__k": ks}}, cv=5)
    t = time.perf_counter(); search.fit(docs, labels); return time.perf_counter() - t, search.best_score_
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t_kbest, s_kbest = grid(SelectKBest(chi2))
    t0 = time.perf_counter()
    from jaxselect.sklearn import FSAClassifier
    t_import = time.perf_counter() - t0
    if {cache!r}:
        import jaxselect
        jaxselect.enable_persistent_cache({cache!r})
    t_fsa, s_fsa = grid(FSAClassifier())
print("RESULT" + json.dumps(dict(fsa_s=t_fsa, fsa_score=s_fsa, kbest_s=t_kbest, kbest_score=s_kbest,
                                 import_s=t_import)))
"""


def _child(code: str, timeout: int = 600) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("XLA_FLAGS", None)  # XLA's default flags, as users have them
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT") :])
    raise RuntimeError(f"child failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")


def measure(name: str, n: int, d: int) -> dict:
    setup, peer = CASES[name]
    cold = _child(CHILD.format(here=HERE, cache="", n=n, d=d, setup=setup, peer=peer))
    with tempfile.TemporaryDirectory() as cache:
        _child(CHILD.format(here=HERE, cache=cache, n=n, d=d, setup=setup, peer=peer))  # fills the cache
        warm = _child(CHILD.format(here=HERE, cache=cache, n=n, d=d, setup=setup, peer=peer))
    return {"cold": cold, "warm_cache": warm}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--d", type=int, default=200)
    parser.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    parser.add_argument("--no-grid", action="store_true", help="skip the GridSearchCV pipeline")
    parser.add_argument("--grid-only", action="store_true", help="only the GridSearchCV pipeline")
    parser.add_argument("--grid-warm", action="store_true",
                        help="also the GridSearchCV pipeline in a new process with a warm persistent cache")
    parser.add_argument("--out", default=None,
                        help="JSON file (default results/bench_cold.json; with --grid-only results/bench_cold_grid.json)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = os.path.join(HERE, "results", "bench_cold_grid.json" if args.grid_only else "bench_cold.json")
    names = [] if args.grid_only else (args.only or list(CASES))
    rows = {}
    header = (f"{'call':26s} {'programs':>8s} {'compile s':>9s} {'first s':>8s} {'second s':>9s} "
              f"{'warm-cache first s':>18s} {'sklearn peer s':>14s}")
    print(f"first calls at {args.n} x {args.d}, numpy float32, fresh processes, XLA's default flags")
    print(header)
    for name in names:
        r = rows[name] = measure(name, args.n, args.d)
        c, w = r["cold"], r["warm_cache"]
        print(f"{name:26s} {c['programs']:8d} {c['compile_s']:9.2f} {c['first']:8.2f} {c['second']:9.3f} "
              f"{w['first']:18.2f} {c['peer']:14.3f}", flush=True)
    result = {"n": args.n, "d": args.d, "calls": rows, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    if not args.no_grid:
        g = _child(GRID.format(here=HERE, cache=""), timeout=1800)
        result["gridsearch"] = g
        print(f"\nGridSearchCV, TF-IDF -> selector(k) -> LogisticRegression, 4 k x 5 folds, 1 200 documents, cold:")
        print(f"  FSAClassifier: {g['fsa_s']:.1f} s (score {g['fsa_score']:.3f});  SelectKBest(chi2): "
              f"{g['kbest_s']:.1f} s (score {g['kbest_score']:.3f});  ratio {g['fsa_s'] / g['kbest_s']:.1f}x")
        if args.grid_warm:  # a new process with the persistent cache another process filled
            with tempfile.TemporaryDirectory() as cache:
                _child(GRID.format(here=HERE, cache=cache), timeout=1800)
                w = _child(GRID.format(here=HERE, cache=cache), timeout=1800)
            result["gridsearch_warm_cache"] = w
            print(f"  with a warm persistent cache (a new process): FSAClassifier {w['fsa_s']:.1f} s, "
                  f"SelectKBest(chi2) {w['kbest_s']:.1f} s, ratio {w['fsa_s'] / w['kbest_s']:.1f}x")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
