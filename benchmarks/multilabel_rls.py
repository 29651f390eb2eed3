"""The multi-label experiment of the greedy RLS slides: test AUC vs number of selected features.

Airola, Pahikkala et al. (ECML 2015 BigTargets slides 13-16) compare multi-target greedy RLS
("ML-gRLS") with the multi-task lasso ("MT-Lasso") on Mulan data: micro-averaged AUC on the test
split as a function of the number of features the model uses; greedy RLS wins at small budgets.
Here, on the bundled Mulan emotions, yeast and scene sets (``jaxselect.datasets.load_mulan``):

* features standardised with the training mean/std, labels mapped to ±1 targets;
* greedy RLS (``jaxselect.greedy_rls``, ``bias=1``) selects features up to all d; its penalty is
  chosen from RLScore regparams {0.1, 1, 10, 100} (``l2 = regparam / n_train``, the library's
  mean-loss scale) by the smallest leave-one-out error along the path — a by-product of
  the algorithm, so no test data are used; every prefix is scored with ``rls_predict_path``;
* the multi-task lasso path (scikit-learn ``MultiTaskLasso``, warm-started over 80 log-spaced
  alphas from alpha_max down to alpha_max/1000, 40 of them in the first decade): at budget m we take the least-regularised path
  point with at most m non-zero feature rows (the lasso analogue of a greedy prefix).

micro-AUC = ``roc_auc_score(Y_test.ravel(), scores.ravel())`` (all label/sample pairs pooled).

Run:  python benchmarks/multilabel_rls.py [--quick]
Writes benchmarks/results/multilabel_rls{_quick}.json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

from jaxselect.datasets import load_mulan
from jaxselect.rls.selection import greedy_rls, rls_predict_path

BUDGETS = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200)
REGPARAM_GRID = (0.1, 1.0, 10.0, 100.0)  # RLScore's scale; greedy_rls gets l2 = regparam / n_train


def _standardise(Xtr, Xte):
    mu = Xtr.mean(axis=0)
    sd = Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, (Xte - mu) / sd


def _micro_auc(Y, S):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(Y.ravel(), S.ravel()))


def run_greedy(Xtr, Ytr, Xte, Yte, k):
    """Greedy RLS path; the penalty picked by the path's own LOO error. Returns (curve[m-1], info)."""
    t0 = time.perf_counter()
    best = None
    for regparam in REGPARAM_GRID:
        l2 = regparam / Xtr.shape[0]
        res = greedy_rls(Xtr.astype(np.float32), Ytr.astype(np.float32), k, l2=l2, bias=1.0)
        loo = float(np.min(np.asarray(res.loo_error)))
        if best is None or loo < best[0]:
            best = (loo, regparam, res)
    regparam, res = best[1], best[2]
    P = np.asarray(rls_predict_path(res, Xte.astype(np.float32)))  # (k, m, T)
    elapsed = time.perf_counter() - t0
    curve = np.array([_micro_auc(Yte, P[t]) for t in range(k)])
    info = dict(regparam=regparam, l2=regparam / Xtr.shape[0], seconds_incl_l2_grid=elapsed)
    return curve, dict(info, selected=np.asarray(res.selected).tolist())


def run_lasso(Xtr, Ytr, Xte, Yte, n_alphas):
    """MultiTaskLasso path. Returns (nnz per alpha, AUC per alpha, alphas, seconds)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import MultiTaskLasso

    Yc = Ytr - Ytr.mean(axis=0)
    alpha_max = np.max(np.linalg.norm(Xtr.T @ Yc, axis=1)) / Xtr.shape[0]
    # Dense near alpha_max (where the first few features enter), then down to alpha_max/1000.
    top = n_alphas // 2
    alphas = alpha_max * np.concatenate([np.logspace(0, -1, top, endpoint=False), np.logspace(-1, -3, n_alphas - top)])
    model = MultiTaskLasso(alpha=alphas[0], warm_start=True, max_iter=2000, tol=1e-4)
    nnz, auc = [], []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for a in alphas:
            model.set_params(alpha=a)
            model.fit(Xtr, Ytr)
            rows = np.linalg.norm(model.coef_, axis=0) > 0  # coef_ is (T, d)
            nnz.append(int(rows.sum()))
            auc.append(_micro_auc(Yte, model.predict(Xte)) if rows.any() else 0.5)
    return np.array(nnz), np.array(auc), alphas, time.perf_counter() - t0


def lasso_at_budget(nnz, auc, m):
    """AUC of the least-regularised path point with at most m features (nan if none has >= 1)."""
    ok = np.where((nnz <= m) & (nnz >= 1))[0]
    return float(auc[ok[-1]]) if ok.size else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="emotions only, short paths (seconds)")
    args = ap.parse_args()
    names = ("emotions",) if args.quick else ("emotions", "yeast", "scene")
    n_alphas = 16 if args.quick else 80
    results = {}
    for name in names:
        tr, te = load_mulan(name, "train"), load_mulan(name, "test")
        Xtr, Xte = _standardise(tr.X, te.X)
        Ytr, Yte = 2.0 * tr.y - 1.0, te.y.astype(int)
        d = Xtr.shape[1]
        k = min(d, 30) if args.quick else d
        g_curve, g_info = run_greedy(Xtr, Ytr, Xte, Yte, k)
        nnz, l_auc, alphas, l_sec = run_lasso(Xtr, Ytr, Xte, Yte, n_alphas)
        budgets = [m for m in BUDGETS if m <= k]
        table = [
            dict(budget=m, greedy_rls=float(g_curve[m - 1]), mt_lasso=lasso_at_budget(nnz, l_auc, m)) for m in budgets
        ]
        results[name] = dict(
            n_train=int(Xtr.shape[0]),
            n_test=int(Xte.shape[0]),
            d=int(d),
            labels=int(Ytr.shape[1]),
            greedy=dict(auc=g_curve.tolist(), **g_info),
            lasso=dict(nnz=nnz.tolist(), auc=l_auc.tolist(), alphas=alphas.tolist(), seconds=l_sec),
            table=table,
        )
        print(
            f"\n{name}: n_train={Xtr.shape[0]} n_test={Xte.shape[0]} d={d} labels={Ytr.shape[1]} "
            f"(greedy regparam={g_info['regparam']} i.e. l2={g_info['l2']:.3g}, "
            f"{g_info['seconds_incl_l2_grid']:.2f} s for 4 l2 values incl. compile; "
            f"lasso path {l_sec:.2f} s for {n_alphas} alphas)"
        )
        print(f"{'features':>8} {'ML-gRLS AUC':>12} {'MT-Lasso AUC':>13} {'winner':>8}")
        for r in table:
            lw = r["mt_lasso"]
            if np.isnan(lw):
                win, lw_s = "n/a", "—"  # no lasso path point with 1..m features
            else:
                win, lw_s = ("gRLS" if r["greedy_rls"] > lw else "lasso"), f"{lw:.4f}"
            print(f"{r['budget']:>8} {r['greedy_rls']:>12.4f} {lw_s:>13} {win:>8}")
            r["winner"] = win

    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(os.path.join(here, "results"), exist_ok=True)
    stem = os.path.join(here, "results", "multilabel_rls_quick" if args.quick else "multilabel_rls")
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=2)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plotting is optional
        print(f"saved {stem}.json (matplotlib missing: no plot)")
        return
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        r = results[name]
        g = np.asarray(r["greedy"]["auc"])
        ax.plot(np.arange(1, g.size + 1), g, label="ML-gRLS (greedy_rls)", color="C0")
        nnz = np.asarray(r["lasso"]["nnz"])
        la = np.asarray(r["lasso"]["auc"])
        keep = nnz >= 1
        ax.plot(nnz[keep], la[keep], "o-", ms=3, label="MT-Lasso (sklearn)", color="C3")
        ax.set_title(f"{name} (test)")
        ax.set_xlabel("number of features")
        ax.set_ylabel("micro-averaged AUC")
        ax.set_xlim(0, g.size)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=110)
    print(f"saved {stem}.json and {stem}.png")


if __name__ == "__main__":
    main()
