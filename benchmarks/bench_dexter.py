"""DEXTER: FSA against L1-penalised logistic regression at the same number of features (issue 24).

The FSA paper's Table V reports FSA on DEXTER (bag of words, M = 20 000, 300 training rows) at
8.67 % validation error with 93 features. The bundled data are the 300 training rows, so this
script compares on the same folds of a repeated stratified 5-fold cross-validation (2 repeats):

* ``FSA``: ``js.fsa(X, y, k, loss="logistic", l2=l2)`` on the text-preprocessed rows (below),
  ``l2`` chosen per outer fold from :data:`L2_GRID` by a 5-fold CV on that fold's training rows (ties: the largest),
* ``L1``: scikit-learn's ``LogisticRegression`` with the L1 penalty (liblinear) on the same rows,
  its ``C`` found per fold by bisection on ``log C`` so that it keeps k features (the paper's
  procedure for its L1 baseline; the nearest count it reaches is reported),
* ``FSA (paper)``: the paper's settings on the raw counts (Lorenz loss, μ = 300, no ridge), for
  reference;
* ``FSA (defaults, raw)``: the default call ``js.fsa(X, y, k, loss="logistic")`` on the bundled
  raw counts, and ``L1 (raw)``: the L1 baseline above on the same raw rows (issue 38).

Preprocessing (what ``TfidfVectorizer(sublinear_tf=True, use_idf=False)`` gives text): counts
``x → log(1 + x)``, then each row scaled to unit L2 norm. Both models see the same sparse CSR
matrix. Why these choices (measured with this script's folds): on raw counts FSA's
standardisation lifts words that occur in two or three documents to unit variance and the
unregularised fit on 240 rows overfits them (FSA errs 13–14 % at 93 features); the log and row
normalisation bring FSA to ~9 %, and a ridge ``l2`` of 1–10 (on standardised coefficients,
with the mean loss; the inner CV mostly picks 3) to 6.5 %, below L1 at the same size.

Usage: ``python benchmarks/bench_dexter.py [--repeats 2] [--sizes 93 300]`` — prints a table and
writes ``benchmarks/results/bench_dexter.json``. Times are per fit, medians over the folds
(the inner CV compiles FSA once per training-set shape; "FSA (paper)"'s first fit of each k
includes compilation and is reported apart).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxselect as js  # noqa: E402
from common import environment, l1_logistic, save  # noqa: E402
from jaxselect.datasets import load_dexter  # noqa: E402


def text_rows(X) -> sp.csr_matrix:
    """log(1 + counts), rows scaled to unit L2 norm, as float32 CSR."""
    X = sp.csr_matrix(X, dtype=np.float32)
    X.data = np.log1p(X.data)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1))).ravel()
    return sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X, dtype=np.float32)


def l1_at_k(X, y, k: int, *, lo: float = -2.0, hi: float = 6.0, steps: int = 18):
    """L1 logistic (liblinear) whose C (bisection on log10 C) keeps the count nearest k."""
    best = None
    n_fits = 0
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = l1_logistic(10.0**mid, max_iter=1000).fit(X, y)
        n_fits += 1
        nnz = int(np.sum(model.coef_ != 0))
        if best is None or abs(nnz - k) < abs(best[1] - k):
            best = (model, nnz, 10.0**mid)
        if nnz == k:
            break
        lo, hi = (mid, hi) if nnz < k else (lo, mid)
    return best + (n_fits,)


#: The text recipe's FSA options besides its ridge (standardised columns, no L1 polish or refinement:
#: the settings it was documented with, before the data-dependent defaults).
RECIPE = dict(loss="logistic", scale="std", n_iter=500, polish=js.anneal.Polish(l1=None, refine=0))

#: The ridge grid FSA's inner cross-validation chooses from (per outer fold, on its training rows).
L2_GRID = (0.3, 1.0, 3.0, 10.0)


def fsa_inner_l2(X, y, k: int, grid=L2_GRID, folds: int = 5) -> float:
    """The ridge ``l2`` of the grid with the lowest inner-CV error on the training rows only (ties:
    the largest, the most regularised model)."""
    from sklearn.model_selection import StratifiedKFold

    inner = list(StratifiedKFold(folds, shuffle=True, random_state=1).split(np.zeros(len(y)), y))
    errors = []
    for l2 in grid:
        wrong = 0
        for tr, te in inner:
            res = js.fsa(X[tr], y[tr], k, **RECIPE, l2=l2)
            wrong += int(np.sum((np.asarray(js.predict(res, X[te])) > 0) != (y[te] > 0)))
        errors.append(wrong)
    errors = np.asarray(errors)
    return float(np.asarray(grid)[errors == errors.min()].max())


def run(sizes, repeats: int) -> dict:
    from sklearn.model_selection import RepeatedStratifiedKFold

    data = load_dexter()
    raw = sp.csr_matrix(data.X, dtype=np.float32)
    X = text_rows(raw)
    y = (data.y > 0).astype(np.float32)
    folds = list(RepeatedStratifiedKFold(n_splits=5, n_repeats=repeats, random_state=0).split(raw, y))
    print(f"DEXTER {raw.shape[0]} x {raw.shape[1]} ({raw.nnz} non-zeros), {len(folds)} folds")
    rows = []
    for k in sizes:
        for name in ("FSA", "FSA (paper)", "L1", "FSA (defaults, raw)", "L1 (raw)"):
            errs, secs, counts, search, chosen = [], [], [], [], []
            for tr, te in folds:
                if name == "FSA (defaults, raw)":  # the default call on the bundled counts
                    t = time.perf_counter()
                    res = js.fsa(raw[tr], y[tr], k, loss="logistic")
                    res.coef.block_until_ready()
                    secs.append(time.perf_counter() - t)
                    pred = np.asarray(js.predict(res, raw[te])) > 0
                    counts.append(k)
                elif name.startswith("L1"):
                    Xl = raw if name == "L1 (raw)" else X
                    t = time.perf_counter()
                    model, nnz, C, n_fits = l1_at_k(Xl[tr], y[tr], k)
                    search.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = l1_logistic(C, max_iter=1000).fit(Xl[tr], y[tr])
                    secs.append(time.perf_counter() - t)
                    pred = model.predict(Xl[te])
                    counts.append(nnz)
                else:
                    Xf = X if name == "FSA" else raw
                    t = time.perf_counter()
                    if name == "FSA":
                        l2 = fsa_inner_l2(Xf[tr], y[tr], k)
                        search.append(time.perf_counter() - t)
                        chosen.append(l2)
                        t = time.perf_counter()
                    opts = dict(RECIPE, l2=l2) if name == "FSA" else dict(js.FSA_PAPER, loss="lorenz")
                    res = js.fsa(Xf[tr], y[tr], k, **opts)
                    res.coef.block_until_ready()
                    secs.append(time.perf_counter() - t)
                    pred = np.asarray(js.predict(res, Xf[te])) > 0
                    counts.append(k)
                errs.append(float(np.mean(pred != (y[te] > 0))))
            row = {
                "model": name,
                "k": k,
                "features": float(np.mean(counts)),
                "error_pct": 100 * float(np.mean(errs)),
                "error_se_pct": 100 * float(np.std(errs) / np.sqrt(len(errs))),
                "fit_s": statistics.median(secs[1:] if name == "FSA (paper)" else secs),
                "first_fit_s": secs[0],
                "search_s": statistics.median(search) if search else None,
                "l2_chosen": chosen or None,
            }
            rows.append(row)
            what = "C search" if name.startswith("L1") else "l2 inner CV"
            extra = f"  ({what} {row['search_s']:.2f} s)" if search else f"  (first {secs[0]:.2f} s)"
            print(
                f"{name:<12} k={k:<4} features={row['features']:7.1f}  error={row['error_pct']:5.2f} %"
                f" ± {row['error_se_pct']:.2f}  fit={row['fit_s']:.3f} s{extra}",
                flush=True,
            )
    return {"environment": environment(), "folds": len(folds), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[93, 300])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    payload = run(args.sizes, args.repeats)
    print("saved", save("bench_dexter", payload))


if __name__ == "__main__":
    main()
