"""Datum-wise sparse classification in a minute (Dulac-Arnold et al. 2012).

Learns, on the bundled breast-cancer (Wisconsin) data, a policy that decides for every datum which
features to look at before classifying it, then the same with a hard budget of 2 features and
with per-feature costs (given once, in a ``Groups``: the rewards and the budget use them). Run:
``python examples/dwsm_quickstart.py`` (about 15 s on 2 CPU cores, compilation included).
"""

import time

import jax
import numpy as np

import jaxselect as js

ds = js.datasets.load_binary_uci("breast_cancer_wisconsin")
X, y = ds.X.astype(np.float32), ds.y
perm = np.random.default_rng(0).permutation(len(y))
tr, te = perm[: len(y) // 2], perm[len(y) // 2 :]

t = time.perf_counter()
policy = js.raise_for_status(js.dwsm_fit(jax.random.key(0), X[tr], y[tr], lam=0.01, n_iter=10))
rep = js.dwsm_evaluate(policy, X[te], y[te])
print(
    f"DWSM λ=0.01 ({time.perf_counter() - t:.1f}s incl. compilation): accuracy {float(rep.accuracy):.3f}, "
    f"mean sparsity {float(rep.sparsity):.2f}, mean features {float(rep.mean_features):.2f} of {X.shape[1]}"
)
print(
    f"  returned RCPI iterate {int(policy.best)}: training datum-wise loss {float(policy.train_loss[policy.best]):.3f} "
    f"(classify at once: {float(policy.train_loss[0]):.3f}; per iterate: {np.round(np.asarray(policy.train_loss), 3)})"
)
print("  fraction of test data using each feature:", np.round(np.asarray(rep.feature_usage), 2))
print("  features per datum (histogram):", np.bincount(np.asarray(rep.acquired).sum(1), minlength=X.shape[1] + 1))

labels, acquired = js.predict(policy, X[te][:3])
print("  first three test data:", [(int(l), np.flatnonzero(a).tolist()) for l, a in zip(labels, np.asarray(acquired))])

hb = js.dwsm_fit(jax.random.key(0), X[tr], y[tr], lam=0.0, budget=2)  # unit costs: at most 2 features
rep = js.dwsm_evaluate(hb, X[te], y[te])
print(
    f"hard budget M=2, λ=0: accuracy {float(rep.accuracy):.3f}, max features used "
    f"{int(np.asarray(rep.acquired).sum(1).max())}"
)

costs = np.arange(1.0, X.shape[1] + 1)  # feature j costs j+1
units = js.Groups.singletons(X.shape[1], costs=costs)
cs = js.dwsm_fit(jax.random.key(0), X[tr], y[tr], lam=0.01, groups=units)  # acquiring j rewards −λ·c_j
rep = js.dwsm_evaluate(cs, X[te], y[te])
print(
    f"cost-sensitive (c_j = j+1): accuracy {float(rep.accuracy):.3f}, average cost "
    f"{float(rep.average_cost):.2f} (acquisition c·z + 0/1 error), usage {np.round(np.asarray(rep.feature_usage), 2)}"
)
cb = js.dwsm_fit(jax.random.key(0), X[tr], y[tr], lam=0.0, groups=units, budget=10.0)  # Σ c_j z_j <= 10
acq_cost = np.asarray(js.predict(cb, X[te])[1]) @ costs
print(f"cost budget 10: largest acquisition cost of a test datum {acq_cost.max():.0f}")
