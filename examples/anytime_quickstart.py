"""Anytime diabetes screening on Pima with Turney's real test costs (Hu et al., anytime sequencing).

Learns three orders of the medical tests on a training split — CS-G-OMP, CS-G-FR and the
cost-blind G-OMP — prints each order with its costs and the held-out explained variance and
accuracy at every budget, and saves a PNG of held-out explained variance vs cost.

Glucose and insulin come from one blood draw: they form one group whose cost is the pair's
(17.61 + 20.68 = 38.29 CAD, the second test discounted by the shared $2.10 draw); every other test
is its own group. Run: python examples/anytime_quickstart.py (about 10 s on 2 CPU cores, compilation
included).
"""

from __future__ import annotations

import os
import time

import numpy as np

import jaxselect as js

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output")


def main(seed: int = 0) -> dict:
    data = js.datasets.load_pima(group_blood_test=True)
    names = data.feature_names
    group_names = []
    for g in range(int(data.groups.max()) + 1):
        group_names.append("+".join(names[f] for f in np.flatnonzero(data.groups == g)))

    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(data.y))
    train, test = perm[:538], perm[538:]
    X, y = data.X.astype(np.float32), data.y.astype(np.float32)
    groups = js.Groups.from_ids(data.groups, data.costs)

    t0 = time.perf_counter()
    problem = js.prepare(X[train], y[train], groups, l2=1e-3)
    paths = {
        "CS-G-OMP": js.cs_omp(problem),
        "CS-G-FR": js.cs_fr(problem),
        "G-OMP (cost-blind)": js.cs_omp(problem, cost_sensitive=False),
    }
    fit_time = time.perf_counter() - t0

    results = {}
    for name, path in paths.items():
        ev = js.objective_curve(path, X[test], y[test])
        acc = js.objective_curve(path, X[test], y[test], metric="accuracy")
        results[name] = (ev, acc)
        print(f"\n{name}  (held-out; test-time timeliness {js.timeliness(ev, stop_cost=ev.cost[-1]):.3f})")
        print(f"  {'step':>4}  {'group':<34} {'cost':>7} {'total':>7} {'expl.var':>9} {'accuracy':>9}")
        print(f"  {0:>4}  {'(intercept only)':<34} {0:>7.2f} {0:>7.2f} {ev.value[0]:>9.3f} {acc.value[0]:>9.3f}")
        for j, g in enumerate(ev.order.tolist()):
            print(
                f"  {j + 1:>4}  {group_names[g]:<34} {float(data.costs[g]):>7.2f} {ev.cost[j + 1]:>7.2f}"
                f" {ev.value[j + 1]:>9.3f} {acc.value[j + 1]:>9.3f}"
            )
    print(f"\nthree orders learned in {fit_time:.2f} s (including compilation)")
    for budget in (3.0, 5.0, 40.0):
        pred = js.predict(paths["CS-G-OMP"], X[test], budget=budget)
        print(
            f"CS-G-OMP at budget {budget:>5.1f} CAD: held-out accuracy {np.mean((np.asarray(pred) > 0.5) == y[test]):.3f}"
        )

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install 'jaxselect[plot]'): skipping the plot")
        return results
    os.makedirs(OUT, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    styles = {"CS-G-OMP": "-", "CS-G-FR": "--", "G-OMP (cost-blind)": ":"}  # OMP and FR coincide on Pima
    for name, (ev, _) in results.items():
        ax.step(ev.cost, ev.value, where="post", label=name, marker="o", ms=3, linestyle=styles[name], lw=2)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("feature cost (CAD, Turney 1995)")
    ax.set_ylabel("held-out explained variance")
    ax.set_title("Pima diabetes: anytime linear prediction")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(OUT, "pima_anytime.png")
    fig.savefig(path, dpi=120)
    print(f"saved {path}")
    return results


if __name__ == "__main__":
    main()
