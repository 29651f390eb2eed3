"""Speed of the datum-wise sparse model (DWSM / RCPI) next to scikit-learn's L1 logistic regression
and CART (the paper's baselines, §6.1), in one run.

* training time for ``n_iter`` RCPI iterations (paper: 10 iterations, 10 states per example) on
  sonar (208 x 60) and splice (1000 x 60) — goal (issue 36): splice ≤ 6 s for a default fit in a fresh
  process (first call, compilation included) on a 2-core CPU, synthetic 2000 x 200 ≤ 60 s
  (issue 14; the earlier goal was < 60 s); the first call includes XLA compilation, the second (new
  key) is the steady-state time; ``--uniform`` also times the paper's uniform state sampling
  (``states="uniform"``, one while loop per row as before 0.3: ``rollout_batch=256``);
* inference throughput (data per second) of ``dwsm_predict`` (one jitted vmapped loop with
  incremental scores) on the data tiled to ``--n-infer`` rows, next to the baselines' ``predict``.

Writes ``benchmarks/results/bench_dwsm.json`` and prints a table with ratios.

``--synthetic`` adds the issue-36 size: a synthetic 2000 x 200 float32 problem (10 informative
features) at the defaults, with held-out accuracy beside scikit-learn's L1 logistic regression at
equal mean features per datum. ``--paper-rollouts`` times the protocol before 0.4 (S states per
row, every allowed action: ``RCPIOptions(n_states=None, acquisitions=None)``) beside the defaults.

``--large`` adds 10 000 x 1 000 in 100 groups of 10 with a hard budget of 3 groups (the paper's §5
ways to large inputs), ``--large-iter`` iterations, first call only. ``--only-new`` skips sonar and
splice (their figures stay in ``bench_dwsm.json``; the new sizes go to ``bench_dwsm_new_sizes.json``).

Usage: ``python benchmarks/bench_dwsm.py [--quick] [--synthetic] [--large] [--only-new] [--paper-rollouts]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import platform
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import l1_logistic  # noqa: E402
from jaxselect.datasets import load_binary_uci  # noqa: E402
from jaxselect.dwsm import RCPIOptions, dwsm_evaluate, dwsm_fit, dwsm_predict  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results")
#: issue 36's goals: fresh process, first call (compilation included), seconds
GOALS = {"splice_train": 6.0, "synthetic": 60.0}


def timed(fn, *args, **kw):
    t = time.perf_counter()
    out = fn(*args, **kw)
    jax.block_until_ready(out)
    return out, time.perf_counter() - t


def timed_cpu(fn, *args, **kw):
    """(out, wall seconds, process CPU seconds) — CPU time is less sensitive to a shared machine."""
    c = time.process_time()
    out, wall = timed(fn, *args, **kw)
    return out, wall, time.process_time() - c


def synthetic(n, d, informative=10, seed=0):
    """(train, held-out) halves of a synthetic float32 problem: 2n rows, ``informative`` features."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2 * n, d)).astype(np.float32)
    w = np.zeros(d)
    w[:informative] = rng.normal(size=informative)
    y = ((X @ w + 0.3 * rng.normal(size=2 * n)) > 0).astype(int)
    return X[:n], y[:n], X[n:], y[n:]


def l1_at_equal_features(Xtr, ytr, Xte, yte, features, n_c=30):
    """Held-out accuracy of the best L1 logistic regression (C path) with at most ``features`` features."""
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(Xtr)
    A, B = sc.transform(Xtr), sc.transform(Xte)
    best = float("nan")
    for C in np.logspace(-3, 1, n_c):
        m = l1_logistic(C).fit(A, ytr)
        if int((m.coef_ != 0).sum()) <= features + 1e-9:
            acc = m.score(B, yte)
            best = acc if not best >= acc else best
    return best


#: the sizes of issue 36 beside the paper's sets: name -> (n, d, fit keywords)
LARGE = {
    "synthetic": (2000, 200, {}),
    # the paper's §5 ways to large inputs: feature groups (here 100 groups of 10) and a hard budget
    "synthetic_grouped": (10_000, 1000, {"groups": np.repeat(np.arange(100), 10), "budget": 3}),
}


def bench_set(name, *, n_iter, states, lam, n_infer, repeats, extra=None):
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    Xte = yte = None
    fit_extra = {}
    if name in LARGE:
        n, d, fit_extra = LARGE[name]
        X, y, Xte, yte = synthetic(n, d)
        ds = type("DS", (), dict(X=X, y=y))
    else:
        ds = load_binary_uci(name)
    X, y = ds.X.astype(np.float32), ds.y
    kw = dict(lam=lam, n_iter=n_iter, rcpi=RCPIOptions(states_per_example=states, **(extra or {})), **fit_extra)
    pol, t_first, c_first = timed_cpu(dwsm_fit, jax.random.key(0), X, y, **kw)
    steady, steady_cpu = [], []
    for r in range(repeats):
        pol, t, c = timed_cpu(dwsm_fit, jax.random.key(r + 1), X, y, **kw)
        steady.append(t)
        steady_cpu.append(c)
    t_fit = min(steady) if steady else float("nan")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    held = {}
    if Xte is not None:
        rep_te = dwsm_evaluate(pol, Xte, yte)
        feats = float(rep_te.mean_features)
        held = dict(
            heldout_accuracy=float(rep_te.accuracy),
            heldout_features=feats,
            l1_heldout_accuracy_at_equal_features=l1_at_equal_features(X, y, Xte, yte, feats),
        )
    rep = dwsm_evaluate(pol, X, y)

    Xs = StandardScaler().fit_transform(ds.X)
    l1 = l1_logistic(0.1)
    _, t_l1 = timed(lambda: l1.fit(Xs, y))
    cart = DecisionTreeClassifier(max_depth=5, random_state=0)
    _, t_cart = timed(lambda: cart.fit(Xs, y))

    reps = int(np.ceil(n_infer / X.shape[0]))
    Xi = np.tile(X, (reps, 1))[:n_infer]
    Xis = np.tile(Xs, (reps, 1))[:n_infer]
    dwsm_predict(pol, Xi[:8])
    (_, _), _ = timed(dwsm_predict, pol, Xi)  # compile for this shape
    (_, _), t_inf = timed(dwsm_predict, pol, Xi)
    _, t_inf_l1 = timed(lambda: l1.predict(Xis))
    _, t_inf_cart = timed(lambda: cart.predict(Xis))
    return dict(
        dataset=name,
        config=str(extra or "default"),
        shape=list(X.shape),
        lam=lam,
        n_iter=n_iter,
        states_per_example=states,
        fit_first_s=t_first,
        fit_first_cpu_s=c_first,
        fit_steady_s=t_fit,
        fit_steady_cpu_s=min(steady_cpu) if steady_cpu else float("nan"),
        load_average_1min=load,
        fit_goal_met=bool(t_first <= GOALS[name]) if name in GOALS else None,
        train_loss=float(rep.mean_loss),
        train_accuracy=float(rep.accuracy),
        train_sparsity=float(rep.sparsity),
        l1_fit_s=t_l1,
        cart_fit_s=t_cart,
        n_infer=n_infer,
        dwsm_infer_per_s=n_infer / t_inf,
        l1_infer_per_s=n_infer / t_inf_l1,
        cart_infer_per_s=n_infer / t_inf_cart,
        **held,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="sonar only, 3 iterations (well under a minute)")
    ap.add_argument("--lam", type=float, default=0.01)
    ap.add_argument("--n-infer", type=int, default=100_000)
    ap.add_argument("--uniform", action="store_true", help="also time states='uniform' (the paper's sampling)")
    ap.add_argument("--synthetic", action="store_true", help="also the synthetic 2000 x 200 problem (issue 36)")
    ap.add_argument(
        "--large",
        action="store_true",
        help="also 10 000 x 1 000 in 100 groups of 10 with a hard budget of 3 groups (issue 36; first call only)",
    )
    ap.add_argument("--large-iter", type=int, default=3, help="RCPI iterations of the --large fit")
    ap.add_argument("--only-new", action="store_true", help="skip sonar and splice (with --synthetic/--large)")
    ap.add_argument("--paper-rollouts", action="store_true", help="also the protocol before 0.4 (every action)")
    args = ap.parse_args()
    if args.quick:
        sets, n_iter, states, repeats, n_infer = ["sonar"], 3, 10, 1, 20_000
    else:
        sets, n_iter, states, repeats, n_infer = ["sonar", "splice_train"], 10, 10, 1, args.n_infer
    if args.only_new:
        sets = []
    configs = [None] + ([dict(states="uniform")] if args.uniform else [])
    configs += [dict(n_states=None, acquisitions=None)] if args.paper_rollouts else []
    rows = [
        bench_set(s, n_iter=n_iter, states=states, lam=args.lam, n_infer=n_infer, repeats=repeats, extra=c)
        for s in sets
        for c in configs
    ]
    # the new sizes: one first call each (a fresh program; the steady-state call would double the time)
    if args.synthetic:
        rows.append(bench_set("synthetic", n_iter=10, states=states, lam=args.lam, n_infer=n_infer, repeats=0))
    if args.large:
        rows.append(
            bench_set("synthetic_grouped", n_iter=args.large_iter, states=states, lam=args.lam, n_infer=n_infer, repeats=0)
        )

    hdr = f"{'set':<13}{'n x d':>10}{'fit 1st s':>10}{'fit s':>8}{'cpu s':>7}{'goal':>6}{'L1 fit s':>9}{'fit/L1':>9}{'acc':>7}{'spars':>7}{'DWSM inf/s':>12}{'L1 inf/s':>11}{'CART inf/s':>11}{'DWSM/L1':>9}"
    print(hdr)
    # fit 1st includes XLA compilation; 'fit s' is a second call (new key); cpu s is process CPU time
    for r in rows:
        print(
            f"{r['dataset']:<13}{r['shape'][0]:>5}x{r['shape'][1]:<4}{r['fit_first_s']:>10.1f}{r['fit_steady_s']:>8.1f}{r['fit_steady_cpu_s']:>7.1f}"
            f"{'-' if r['fit_goal_met'] is None else 'yes' if r['fit_goal_met'] else 'NO':>6}{r['l1_fit_s']:>9.3f}{r['fit_steady_s'] / r['l1_fit_s']:>9.0f}"
            f"{r['train_accuracy']:>7.3f}{r['train_sparsity']:>7.3f}{r['dwsm_infer_per_s']:>12.0f}"
            f"{r['l1_infer_per_s']:>11.0f}{r['cart_infer_per_s']:>11.0f}{r['dwsm_infer_per_s'] / r['l1_infer_per_s']:>9.2f}"
            f"  train loss {r['train_loss']:.3f}  {r['config']}"
        )
        if "heldout_accuracy" in r:
            print(
                f"{'':<13}held-out accuracy {r['heldout_accuracy']:.3f} at {r['heldout_features']:.2f} features per "
                f"datum; L1 at equal features {r['l1_heldout_accuracy_at_equal_features']:.3f}; "
                f"{r['n_iter']} iterations; load {r['load_average_1min']:.1f}"
            )
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(
        RESULTS, "bench_dwsm" + ("_quick" if args.quick else "") + ("_new_sizes" if args.only_new else "") + ".json"
    )
    meta = dict(jax=jax.__version__, platform=platform.platform(), cpu_count=os.cpu_count(), quick=args.quick)
    with open(out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=2)
    print("wrote", out)


if __name__ == "__main__":
    main()
