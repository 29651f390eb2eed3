"""FSA with the Lorenz loss on DEXTER (FSA paper §3.2: Lorenz loss, μ = 300, N_iter = 500).

DEXTER (UCI / NIPS 2003 feature selection challenge): text classification, 20 000 sparse count
features of which many are probes. The bundled data is the 300-example training part
(``jaxselect.datasets.load_dexter``), so we report 5-fold cross-validated test error for a few
budgets k, next to an L2-penalised logistic regression on all 20 000 features (scikit-learn).
Constant (all-zero) columns are handled by the solver (``constant_columns="inert"``, the default:
they are never selected). The paper reports a test error of 8.55 % for its best k when training on
train + validation (600 examples) and testing on the 2000 test examples, which are not bundled.

Run: ``python examples/fsa_dexter.py`` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jaxselect.anneal import fsa, fsa_predict  # noqa: E402
from jaxselect.datasets import load_dexter  # noqa: E402


def main(ks=(30, 100, 300, 1000), folds=5):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    data = load_dexter()
    X, y = data.X.astype(np.float32), data.y
    print(f"DEXTER: {X.shape[0]} x {X.shape[1]}, {int((X.std(0) == 0).sum())} constant columns, labels {np.unique(y)}")
    cv = list(StratifiedKFold(folds, shuffle=True, random_state=0).split(X, y))
    print(f"{'model':<34}{'CV error %':>12}{'fit time (s)':>14}")
    for k in ks:
        errs, secs = [], []
        for tr, te in cv:
            t = time.perf_counter()
            res = fsa(X[tr], y[tr], k, loss="lorenz")
            res.coef.block_until_ready()
            secs.append(time.perf_counter() - t)
            pred = np.asarray(fsa_predict(res, X[te])) > 0
            errs.append(np.mean(pred != (y[te] > 0)))
        print(f"{f'FSA Lorenz, k={k}':<34}{100 * np.mean(errs):>12.2f}{np.median(secs):>14.3f}")
    errs = []
    t = time.perf_counter()
    for tr, te in cv:
        clf = LogisticRegression(C=1.0, max_iter=2000).fit(X[tr], y[tr])
        errs.append(np.mean(clf.predict(X[te]) != y[te]))
    print(
        f"{'L2 logistic, all 20000 features':<34}{100 * np.mean(errs):>12.2f}{(time.perf_counter() - t) / folds:>14.3f}"
    )
    print("(FSA fit times of the first fold include compilation for each k)")


if __name__ == "__main__":
    main()
