"""Multi-target greedy RLS on the bundled Mulan "emotions" set (music, 72 features, 6 labels).

Selects features shared by all six labels one at a time (lowest leave-one-out error), then uses the
per-step models to show the test micro-averaged AUC after every addition — no re-running.

Run:  python examples/greedy_rls_multilabel.py      (a few seconds)
"""

import numpy as np

import jaxselect as js
from jaxselect.datasets import load_mulan


def micro_auc(labels, scores):
    """Pooled ROC AUC over all (sample, label) pairs, by the rank-sum formula (ties averaged)."""
    y = labels.ravel().astype(bool)
    s = scores.ravel()
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(s.size)
    ranks[order] = np.arange(1, s.size + 1)
    for v in np.unique(s[np.diff(np.sort(s), prepend=np.nan) == 0]):  # average tied ranks
        ranks[s == v] = ranks[s == v].mean()
    n_pos, n_neg = y.sum(), (~y).sum()
    return (ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


train, test = load_mulan("emotions", "train"), load_mulan("emotions", "test")
mu, sd = train.X.mean(0), train.X.std(0)
Xtr = ((train.X - mu) / sd).astype(np.float32)
Xte = ((test.X - mu) / sd).astype(np.float32)
Ytr = (2.0 * train.y - 1.0).astype(np.float32)  # labels {0, 1} -> targets {-1, +1}

# l2 is the penalty on the mean loss: RLScore's regparam 10 on n training rows is l2 = 10 / n.
# bias=1: a regularised intercept (RLScore's).
res = js.raise_for_status(js.greedy_rls(Xtr, Ytr, 20, l2=10.0 / len(Xtr), bias=1.0))
print("selected features (in order):", np.asarray(res.selected).tolist())

P = np.asarray(js.predict(res, Xte))  # (20, n_test, 6): the model after each addition
print(f"{'features':>8} {'LOO MSE (train)':>16} {'test micro-AUC':>15}")
for t in (0, 1, 2, 4, 9, 19):
    print(f"{t + 1:>8} {float(res.loo_error[t]):>16.4f} {micro_auc(test.y, P[t]):>15.4f}")

# Any prefix as an ordinary linear predictor: features have unit cost, so budget 5 is the model with
# the first 5 features (row 4 of the prefix predictions above).
five = np.asarray(js.predict(res, Xte, budget=5))
assert np.allclose(P[4], five, atol=1e-5)
print("5-feature model, first test sample, label scores:", np.round(five[0], 3))
