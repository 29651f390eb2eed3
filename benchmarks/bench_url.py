"""URL-reputation-shaped sparse classification: FSA against scikit-learn's L1 models (issue 24).

The FSA paper (§3.3) reports on URL reputation (M = 3.2·10⁶, N_train = 2·10⁶, ~115 non-zeros
per row): FSA with 75 000 features 1.15 % test error, SGD logistic 1.6 %, linear SVM 1.8 %.
This script draws one train/test split of :func:`jaxselect.datasets.make_url_like` (default
N = 200 000 + 50 000 test rows, M = 500 000, 100 non-zeros per row, Bayes error 1.5 %) and fits,
side by side on the same float32 CSR matrices:

* ``fsa_logistic`` / ``fsa_lorenz``: ``js.fsa(X, y, k, loss=..., l2=..., n_iter=..., mu=...,
  scale=..., l1=..., refine=...)`` (k = 5 000, ``scale="sparse"`` by default here), sparse X straight in
  (implicit centring and scaling, never densified; the polish runs through the compacted sparse
  support) at each l2 of ``--l2``, n_iter of ``--n-iter-grid`` and L1-polish strength of ``--l1``
  (0: the ridge polish; λ ≈ 1/(C·N) matches liblinear's C on 0/1 columns) and refinement rounds
  of ``--refine`` (0: none);
* ``liblinear``: ``LogisticRegression`` with the L1 penalty (liblinear) at each C of ``--C``;
  the best C by test error is the reference (optimistic for liblinear: C chosen on the test set);
* ``sgd``: ``SGDClassifier(loss="log_loss", penalty="l1")`` at each alpha of ``--alpha``.

Each fit runs in a fresh subprocess that loads the saved matrices, so its memory is its own:
``peak_rss`` is the peak anonymous resident memory (``RssAnon`` of /proc/self/status sampled every
10 ms from before loading the data to after the fit; ``VmHWM`` recorded too), ``rss_data`` the
same after loading X (the matrices themselves plus the interpreter and imports). ``fit_s`` is the
wall time of the fit call (FSA's includes its compilation; ``fit2_s`` is a second, compiled call
with ``--warm``). Test error is on the 50 000 held-out rows; ``nnz`` the non-zero coefficients.

Goal (issue 24): FSA at a lower test error than the best of the scikit-learn fits, in at most half
of liblinear's (best C) fit time, with a peak RSS no higher than liblinear's.

Every tuning parameter (liblinear's C, SGD's alpha, FSA's l2, n_iter and l1) is picked the same way: the
best test error over its small grid (optimistic for every model alike; there is no validation
split).

Findings (2 cores; ``benchmarks/results/bench_url_refine.json``): at the default size liblinear
(C = 0.5, its best) errs 2.96 % with 6 386 non-zeros in 76.3 s, 0.99 GiB peak; FSA-logistic
(k = 5 000, ``scale="sparse"``, l2 = 1e-6, ``refine=1``, ``l1 = 5e-6``) 2.81 % in 35.6 s (0.47×,
30 iterations) and 2.82 % in 30.4 s (0.40×, 20 iterations), at 0.89 GiB: lower error, under half
the time, less memory. Without ``refine`` FSA's support missed the rare, marginally masked
informative columns (best 3.39 %, ``bench_url_l1.json``); why, and what each option does:
docs/sparse.md. Earlier runs: ``bench_url.json``, ``bench_url_rerun.json`` (SGD 6.96 %).

Defaults (issue 38; ``benchmarks/results/bench_url_defaults.json``): the default call
``js.fsa(X, y, 5000, loss="logistic")`` errs 2.66 % in 43.9 s at 0.89 GiB and
``FSAClassifier(k=5000)`` 2.66 % in 45.5 s at 0.96 GiB, against liblinear's 2.96 % in 59.5 s at
0.99 GiB (C = 0.5, its best) — lower error, less time, less memory with no option set.

Usage::

    python benchmarks/bench_url.py --methods liblinear --C 0.5 --defaults --tag _defaults  # the default call
    python benchmarks/bench_url.py --quick          # ~3 minutes on 2 cores
    python benchmarks/bench_url.py                  # the issue's size (~10 minutes)
    python benchmarks/bench_url.py --methods fsa_logistic liblinear --l2 1e-6 --n-iter-grid 20 30 \
        --refine 1 --l1 5e-6 1e-5 --C 0.5 1.0 --tag _refine  # the table of docs/sparse.md
    python benchmarks/bench_url.py --n-train 200000 --n-test 50000 --n-features 500000 --k 5000

Writes ``benchmarks/results/bench_url[_quick].json`` (``--tag`` overrides the suffix).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from common import RssSampler  # noqa: E402

QUICK = dict(n_train=50_000, n_test=12_500, n_features=100_000, k=2_000, n_informative=1_000)
POLISH = {"auto": None, "on": True, "off": False}
DEFAULT = dict(n_train=200_000, n_test=50_000, n_features=500_000, k=5_000, n_informative=2_000)


# ----------------------------------------------------------------------------------------- child
def _load(folder):
    import scipy.sparse as sp

    Xtr = sp.load_npz(os.path.join(folder, "X_train.npz")).tocsr()
    Xte = sp.load_npz(os.path.join(folder, "X_test.npz")).tocsr()
    ys = np.load(os.path.join(folder, "y.npz"))
    return Xtr, ys["y_train"], Xte, ys["y_test"]


def run_child(args) -> dict:
    with RssSampler() as total:
        Xtr, ytr, Xte, yte = _load(args.data)
        rss_data = RssSampler.read()
        extra = {}
        if args.child in ("default_fsa", "default_estimator"):
            import jax

            import jaxselect as js

            t0 = time.perf_counter()
            if args.child == "default_fsa":  # the default call: every option at its default
                res = jax.block_until_ready(js.fsa(Xtr, ytr, args.k, loss="logistic"))
            else:
                from jaxselect.sklearn import FSAClassifier

                res = FSAClassifier(k=args.k).fit(Xtr, ytr).result_
            t_fit = time.perf_counter() - t0
            support = np.asarray(res.support)
            coef = np.zeros(Xtr.shape[1])
            coef[support] = np.asarray(res.coef, dtype=np.float64).ravel()
            intercept = float(np.asarray(res.intercept).ravel()[0])
            extra.update(status=int(res.status), k=args.k, n_iter=int(res.n_iter) if hasattr(res, "n_iter") else None)
        elif args.child.startswith("fsa"):
            import jax

            import jaxselect as js

            loss = args.child.split("_", 1)[1]

            def fit():
                res = js.fsa(Xtr, ytr, args.k, loss=loss, l2=args.l2, n_iter=args.n_iter, mu=args.mu,
                             polish=POLISH[args.polish], scale=args.scale, l1=args.l1 or None,
                             refine=args.refine)
                return jax.block_until_ready(res)

            t0 = time.perf_counter()
            res = fit()
            t_fit = time.perf_counter() - t0
            if args.warm:
                t0 = time.perf_counter()
                res = fit()
                extra["fit2_s"] = time.perf_counter() - t0
            support = np.asarray(res.support)
            coef = np.zeros(Xtr.shape[1])
            coef[support] = np.asarray(res.coef, dtype=np.float64)
            intercept = float(res.intercept)
            extra.update(status=int(res.status), polish=args.polish, scale=args.scale, l2=args.l2, l1=args.l1,
                         refine=args.refine,
                         n_iter=args.n_iter, mu=args.mu, k=args.k,
                         final_loss=float(np.asarray(res.loss_path)[-1]))
        elif args.child == "liblinear":
            from common import l1_logistic

            model = l1_logistic(args.C, tol=1e-4, max_iter=100)
            t0 = time.perf_counter()
            model.fit(Xtr, ytr)
            t_fit = time.perf_counter() - t0
            coef, intercept = model.coef_.ravel().astype(np.float64), float(model.intercept_[0])
            extra.update(C=args.C, n_iter_solver=int(np.max(model.n_iter_)))
        elif args.child == "sgd":
            from sklearn.linear_model import SGDClassifier

            model = SGDClassifier(loss="log_loss", penalty="l1", alpha=args.alpha, max_iter=args.sgd_epochs,
                                  tol=1e-4, random_state=0)
            t0 = time.perf_counter()
            model.fit(Xtr, ytr)
            t_fit = time.perf_counter() - t0
            coef, intercept = model.coef_.ravel().astype(np.float64), float(model.intercept_[0])
            extra.update(alpha=args.alpha, n_iter_solver=int(model.n_iter_))
        else:
            raise ValueError(f"unknown method {args.child!r}")
    scores_te = Xte @ coef + intercept
    scores_tr = Xtr @ coef + intercept
    return {
        "method": args.child,
        "test_error": float(np.mean((scores_te > 0) != (yte == 1))),
        "train_error": float(np.mean((scores_tr > 0) != (ytr == 1))),
        "nnz": int(np.count_nonzero(coef)),
        "fit_s": t_fit,
        "rss_data": rss_data,
        "peak_rss": total.peak,
        "vm_hwm": RssSampler.read("VmHWM"),
        **extra,
    }


# ---------------------------------------------------------------------------------------- parent
def _child(args, method: str, **opts) -> dict | None:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", method, "--data", args.data,
           "--k", str(args.k), "--n-iter", str(opts.get("n_iter", args.n_iter)), "--mu", str(args.mu),
           "--sgd-epochs", str(args.sgd_epochs), "--polish", str(opts.get("polish", args.polish)),
           "--scale", str(opts.get("scale", args.scale))]
    for name in ("C", "alpha", "l2", "l1", "refine"):
        if name in opts:
            cmd += [f"--{name}", str(opts[name])]
    if args.warm:
        cmd.append("--warm")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:  # recorded, so the other fits of the run are kept
        print(f"{method:13s} {json.dumps(opts):28s} did not finish within --timeout {args.timeout:.0f} s", flush=True)
        return dict(opts, method=method, unfinished=True, timeout_s=args.timeout)
    if proc.returncode != 0:
        print(f"{method} {opts} failed:\n{proc.stderr[-3000:]}", flush=True)
        return None
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["wall_child_s"] = time.perf_counter() - t0
    print(
        f"{method:13s} {json.dumps(opts):28s} test err {100 * row['test_error']:6.2f} %  nnz {row['nnz']:7d}  "
        f"fit {row['fit_s']:7.1f} s  peak RSS {row['peak_rss'] / 2**30:5.2f} GiB (data {row['rss_data'] / 2**30:.2f})",
        flush=True,
    )
    return row


def op_timing(X, repeat: int = 5) -> dict:
    """Median seconds of one product ``X̃ v`` / ``uᵀ X̃`` of FSA's sparse operator and of scipy's."""
    import jax
    import jax.numpy as jnp

    from common import timeit
    from jaxselect.design import SparseDesign

    op = SparseDesign.from_csr(X)
    v, u = jnp.ones(X.shape[1], jnp.float32), jnp.ones(X.shape[0], jnp.float32)
    vn, un = np.ones(X.shape[1], np.float32), np.ones(X.shape[0], np.float32)
    out = {
        "sparse_design_mv_s": timeit(lambda: op.mv(v), repeat=repeat)[1],
        "sparse_design_rmv_s": timeit(lambda: op.rmv(u), repeat=repeat)[1],
        "scipy_mv_s": timeit(lambda: X @ vn, repeat=repeat)[1],
        "scipy_rmv_s": timeit(lambda: X.T @ un, repeat=repeat)[1],
    }
    jax.clear_caches()
    return out


def run_parent(args) -> None:
    from common import environment, save, table
    import scipy.sparse as sp

    import jaxselect as js

    t0 = time.perf_counter()
    d = js.datasets.make_url_like(
        args.n_train + args.n_test, args.n_features, nnz_per_row=args.nnz_per_row,
        n_informative=args.n_informative, bayes_error=args.bayes_error, test_size=args.n_test, seed=args.seed,
    )
    t_gen = time.perf_counter() - t0
    bayes_test = float(np.mean((d.X_test @ d.coef + d.intercept > 0) != (d.y_test == 1)))
    data = {
        "n_train": args.n_train, "n_test": args.n_test, "n_features": args.n_features,
        "nnz_per_row": float(d.X_train.nnz / d.X_train.shape[0]), "nnz_train": int(d.X_train.nnz),
        "n_informative": args.n_informative, "bayes_error": d.bayes_error, "bayes_error_test": bayes_test,
        "positive_rate_train": float(d.y_train.mean()), "generate_s": t_gen, "seed": args.seed,
    }
    print(f"data: {json.dumps(data)}", flush=True)
    if args.op_timing:
        data["op_timing"] = op_timing(d.X_train)
        print(f"products: {json.dumps(data['op_timing'])}", flush=True)
    folder = tempfile.mkdtemp(prefix="bench_url_")
    args.data = folder
    try:
        sp.save_npz(os.path.join(folder, "X_train.npz"), d.X_train, compressed=False)
        sp.save_npz(os.path.join(folder, "X_test.npz"), d.X_test, compressed=False)
        np.savez(os.path.join(folder, "y.npz"), y_train=d.y_train, y_test=d.y_test)
        del d
        rows = []
        for method in args.methods:
            if method == "liblinear":
                grid = [dict(C=c) for c in args.C]
            elif method == "sgd":
                grid = [dict(alpha=a) for a in args.alpha]
            else:
                grid = [dict(l2=v, n_iter=n, l1=a, refine=r) for v in args.l2 for n in args.n_iter_grid for r in args.refine
                        for a in args.l1]
                if args.polish_both:
                    grid = [dict(g, polish=p) for g in grid for p in ("off", "auto")]
            for opts in grid:
                row = _child(args, method, **opts)
                if row is not None:
                    rows.append(row)
        for method in ("default_fsa", "default_estimator") if args.defaults else ():
            row = _child(args, method)
            if row is not None:
                rows.append(row)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    unfinished = [r for r in rows if r.get("unfinished")]
    rows = [r for r in rows if not r.get("unfinished")]

    def best(name):
        cands = [r for r in rows if r["method"] == name]
        return min(cands, key=lambda r: r["test_error"]) if cands else None

    summary = {}
    ll = best("liblinear")
    peers = [r for r in (ll, best("sgd")) if r is not None]
    for name in ("fsa_logistic", "fsa_lorenz", "default_fsa", "default_estimator"):
        f = best(name)
        if f is None or ll is None:
            continue
        summary[name] = {
            "test_error": f["test_error"], "best_peer_error": min(r["test_error"] for r in peers),
            "time_ratio_vs_liblinear": f["fit_s"] / ll["fit_s"],
            "rss_ratio_vs_liblinear": f["peak_rss"] / ll["peak_rss"],
            "lower_error": f["test_error"] < min(r["test_error"] for r in peers),
            "half_time": f["fit_s"] <= 0.5 * ll["fit_s"],
            "rss_no_higher": f["peak_rss"] <= ll["peak_rss"],
        }
    cols = ["method", "C", "alpha", "l2", "l1", "refine", "n_iter", "scale", "polish", "test_error", "nnz", "fit_s", "fit2_s", "peak_rss_gib"]
    for r in rows:
        r["peak_rss_gib"] = r["peak_rss"] / 2**30
    print(table(rows, cols))
    print(json.dumps(summary, indent=1))
    tag = args.tag if args.tag is not None else ("_quick" if args.quick else "")
    path = save(f"bench_url{tag}", {
        "description": "make_url_like split; FSA vs liblinear L1 logistic vs SGD L1 (issue 24); one subprocess per fit",
        "data": data, "args": {k: v for k, v in vars(args).items() if k not in ("data", "child")},
        "runs": rows, "unfinished": unfinished, "summary": summary, "parent_environment": environment(),
    })
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"small size: {QUICK}")
    p.add_argument("--defaults", action="store_true",
                   help="also fit js.fsa(X, y, k, loss='logistic') and FSAClassifier(k=k) with every other option at its default")
    p.add_argument("--n-train", type=int)
    p.add_argument("--n-test", type=int)
    p.add_argument("--n-features", type=int)
    p.add_argument("--k", type=int)
    p.add_argument("--n-informative", type=int)
    p.add_argument("--nnz-per-row", type=int, default=100)
    p.add_argument("--bayes-error", type=float, default=0.015)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", nargs="+", default=["fsa_logistic", "liblinear", "sgd"],
                   choices=["fsa_logistic", "fsa_lorenz", "liblinear", "sgd"])
    p.add_argument("--C", type=float, nargs="+", default=None, help="liblinear C grid (one child each)")
    p.add_argument("--alpha", type=float, nargs="+", default=None, help="SGD alpha grid")
    p.add_argument("--l2", type=float, nargs="+", default=None, help="FSA l2 grid")
    p.add_argument("--l1", type=float, nargs="+", default=None,
                   help="FSA l1 grid: the L1 polish's strength (0: the ridge polish, js.fsa's default)")
    p.add_argument("--refine", type=int, nargs="+", default=None,
                   help="FSA refine grid: rounds of gradient support pursuit after the schedule (0: none)")
    p.add_argument("--n-iter", type=int, default=100, help="FSA n_iter (child)")
    p.add_argument("--n-iter-grid", type=int, nargs="+", default=None, help="FSA n_iter values to run")
    p.add_argument("--mu", type=float, default=300.0)
    p.add_argument("--polish", choices=sorted(POLISH), default="auto", help="js.fsa's polish (auto: its default)")
    p.add_argument("--scale", choices=["auto", "std", "sparse"], default="sparse", help="js.fsa's column scale rule")
    p.add_argument("--polish-both", action="store_true", help="run every FSA setting with polish off and auto")
    p.add_argument("--op-timing", action="store_true", help="time one SparseDesign mv/rmv (and scipy's) at this size")
    p.add_argument("--sgd-epochs", type=int, default=20)
    p.add_argument("--warm", action="store_true", help="time a second (compiled) FSA call too")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--tag", default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        if args.l2 is not None:
            args.l2 = args.l2[0]
        if args.C is not None:
            args.C = args.C[0]
        if args.alpha is not None:
            args.alpha = args.alpha[0]
        if args.l1 is not None:
            args.l1 = args.l1[0]
        args.refine = 0 if args.refine is None else args.refine[0]
        print(json.dumps(run_child(args)))
        return
    size = QUICK if args.quick else DEFAULT
    for name, value in size.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.C = args.C or [0.05, 0.1, 0.2, 0.5]
    args.alpha = args.alpha or [1e-6, 1e-5]
    args.l2 = args.l2 or [1e-6]
    args.l1 = args.l1 or [0.0, 5e-6, 1e-5, 2e-5]
    args.n_iter_grid = args.n_iter_grid or [args.n_iter]
    args.refine = args.refine or [0]
    run_parent(args)


if __name__ == "__main__":
    main()
