"""Reproduce the experiments of Hu et al. (§5, Tables 1–2, Figs. 2–5) on public data with real costs.

Hu, Grubb, Bagnell & Hebert, "Efficient Feature Group Sequencing for Anytime Linear Prediction".
The paper's data (Yahoo! LTR, a proprietary agriculture set) are not available; we use

* ``pima``   — Pima Indians diabetes with Turney's (1995) test costs; glucose + insulin (one blood
  draw) form one group, every other test its own group (``jaxselect.datasets.load_pima``);
* ``adult``  — Adult census income, one group per original attribute (one-hot categoricals), unit
  costs (``load_adult``);
* ``digits`` — scikit-learn's 8×8 digits, 2×2 pixel blocks as the 16 groups, unit cost per block,
  the 10 one-hot class indicators as a multi-output target (explained variance summed over outputs);
* ``yahoo_like`` — a synthetic stand-in for Yahoo! LTR: 501 correlated features with costs in
  {1, 5, 20, 50, 100, 150, 200} (total ≈ 16K; dearer features more informative on average),
  relevance labels 0..4, features of equal cost grouped at random into groups of size 5–20.

For each set and each of 5 random 70/30 train/test splits every method sequences the groups on the
training part and is scored on the test part (explained variance vs cost, ``objective_curve``):
CS-G-OMP and its Single / No-Whiten / cost-blind (G-OMP) variants, CS-G-FR, Doubling, the FR and
OMP oracles (``oracle_curve`` of the CS-G-FR / CS-G-OMP test curves) and Sparse (cost-weighted group
lasso path, ``group_lasso_path``). The α of the α-stopping cost comes from the paper's plateau rule
(``plateau_alpha``) on the CS-G-OMP training curve of the first split; the stopping cost of each
split is that split's CS-G-OMP training α-stopping cost. Timeliness = area under the test curve
up to the stopping cost (linear interpolation, as in the paper), normalised by the stopping cost
times the test explained variance of the full model (CS-G-OMP's last point).

Also: accuracy vs cost of GLM group OMP (``glm_omp``: logistic for pima/adult, softmax for digits)
against the regression sequencing, and the training time vs number of selected groups of CS-G-OMP
and CS-G-FR (the paper's Fig. 2). Outputs: ``benchmarks/results/anytime_experiments[_quick].json``
and PNGs ``anytime_<set>.png``, ``anytime_accuracy_<set>.png``, ``anytime_train_time.png``.

Run: ``python benchmarks/anytime_experiments.py [--quick] [--sets pima,adult,...]`` (``--quick``:
pima only, 2 splits — a CI-sized smoke run; ``--quick --sets pima,yahoo_like`` adds a 3 000-row
yahoo_like and the training-time figure; the tables in ``docs/reproductions.md`` come from the full run).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxselect as js  # noqa: E402
from jaxselect.sequencing.anytime import train_curve  # noqa: E402
from jaxselect.sequencing.group_lasso import group_lasso_path  # noqa: E402
from jaxselect.sequencing.glm_eval import glm_accuracy  # noqa: E402
from jaxselect.sequencing.glm import glm_omp  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results")
METHODS = ("CS-G-OMP", "Single", "No-Whiten", "G-OMP", "CS-G-FR", "Doubling", "FR Oracle", "OMP Oracle", "Sparse")
L2 = 1e-5  # the paper's λ for Yahoo! LTR


# ---------------------------------------------------------------------------------------------
# Data sets: (X, Y regression target, class labels or None, group ids, group costs, GLM loss)


def pima(quick):
    d = js.datasets.load_pima()
    return d.X, d.y.astype(float), d.y, d.groups, d.costs, "logistic"


def adult(quick):
    d = js.datasets.load_adult("train")
    rows = np.random.default_rng(0).permutation(len(d.y))[: 6000 if quick else 12_000]
    return d.X[rows], d.y[rows].astype(float), d.y[rows], d.groups, d.costs, "logistic"


def digits(quick):
    from sklearn.datasets import load_digits

    d = load_digits()
    r, c = np.divmod(np.arange(64), 8)
    ids = (r // 2) * 4 + (c // 2)
    Y = np.eye(10)[d.target]
    return d.data, Y, d.target, ids, np.ones(16), "softmax"


def yahoo_like(quick, group_size=(5, 20), seed=0):
    """Synthetic Yahoo! LTR stand-in: 15 latent factors, relevance 0..4 from a noisy linear score.

    Feature f of cost level ℓ (0..6 for costs 1..200) views 2 + ℓ//3 of the factors that are
    visible from level ℓ on (each factor becomes visible at a random level 0..3), with a
    signal-to-noise ratio growing with ℓ: cheap features are weak, dear ones strong but partly
    redundant — which gives the plateau the paper describes (α ≈ 0.98 by its rule).
    """
    rng = np.random.default_rng(seed)
    levels = np.array([1, 5, 20, 50, 100, 150, 200])
    counts = np.array([170, 110, 85, 55, 40, 25, 16])  # 501 features, total cost 16 120
    cost, lvl = np.repeat(levels, counts), np.repeat(np.arange(7), counts)
    D, K = cost.size, 15
    n = 3000 if quick else 20_000
    latent = rng.normal(size=(n, K))
    relevance = rng.normal(size=K)
    visible_from = rng.integers(0, 4, K)
    loads = np.zeros((D, K))
    for f in range(D):
        ok = np.flatnonzero(visible_from <= lvl[f])
        pick = rng.choice(ok, size=min(ok.size, 2 + lvl[f] // 3), replace=False)
        loads[f, pick] = rng.normal(size=pick.size)
    snr = 0.5 + lvl / 6.0
    X = (latent @ loads.T) * snr[None, :] + rng.normal(size=(n, D))
    score = latent @ relevance
    score = (score - score.mean()) / score.std() + 0.8 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, [0.45, 0.75, 0.9, 0.97]))  # relevance 0..4
    ids = np.empty(D, int)
    g = 0
    for level in levels:
        members = rng.permutation(np.flatnonzero(cost == level))
        start = 0
        while start < members.size:
            size = int(rng.integers(group_size[0], group_size[1] + 1))
            if members.size - start < group_size[0] + size:  # no undersized tail group
                size = members.size - start
            ids[members[start : start + size]] = g
            g += 1
            start += size
    costs = np.array([cost[ids == j].sum() for j in range(g)], float)
    return X, y.astype(float), None, ids, costs, None


DATASETS = {"pima": pima, "adult": adult, "digits": digits, "yahoo_like": yahoo_like}


# ---------------------------------------------------------------------------------------------


def sequence_all(problem):
    paths = {
        "CS-G-OMP": js.cs_omp(problem),
        "Single": js.cs_omp(problem, criterion="single"),
        "No-Whiten": js.cs_omp(problem, criterion="no_whiten"),
        "G-OMP": js.cs_omp(problem, cost_sensitive=False),
        "CS-G-FR": js.cs_fr(problem),
        "Doubling": js.doubling(problem),
        # only the order of entry matters here: a 40-point path to 1e-3·λ_max, KKT ≤ 1e-4·λ_max
        "Sparse": group_lasso_path(problem, n_lambdas=40, lambda_min_ratio=1e-3, tol=1e-4, max_iter=400),
    }
    return paths


def run_split(X, Y, ids, costs, train, test):
    groups = js.Groups.from_ids(ids, costs)
    problem = js.prepare(X[train], Y[train], groups, l2=L2)
    paths = sequence_all(problem)
    curves = {name: js.objective_curve(p, X[test], Y[test]) for name, p in paths.items()}
    curves["FR Oracle"] = js.oracle_curve(curves["CS-G-FR"])
    curves["OMP Oracle"] = js.oracle_curve(curves["CS-G-OMP"])
    return paths, curves


def timeliness_row(curves, stop, reference):
    return {m: js.timeliness(curves[m], stop_cost=stop, reference=reference) for m in METHODS}


def plot_curves(name, curves, stop, alpha, path_png):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    styles = {
        "CS-G-OMP": ("C0", "-"),
        "Single": ("C1", "--"),
        "No-Whiten": ("C2", "--"),
        "G-OMP": ("C3", ":"),
        "CS-G-FR": ("C4", "-"),
        "Doubling": ("C5", "-."),
        "FR Oracle": ("k", ":"),
        "OMP Oracle": ("0.5", ":"),
        "Sparse": ("C6", "-"),
    }
    for m in METHODS:
        c = curves[m]
        color, ls = styles[m]
        ax.step(c.cost, c.value, where="post", color=color, linestyle=ls, label=m, lw=1.4)
    ax.axvline(stop, color="0.3", lw=0.8)
    ax.text(stop, 0.02, f" α={alpha:.2f} stop", fontsize=8, color="0.3")
    ax.set_xlim(0, min(1.6 * stop, max(curves["CS-G-OMP"].cost)))
    ax.set_xlabel("feature cost")
    ax.set_ylabel("test explained variance")
    ax.set_title(f"{name}: explained variance vs cost (split 0)")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    fig.savefig(path_png, dpi=110)
    plt.close(fig)


def accuracy_experiment(name, X, Y, y, ids, costs, loss, train, test, png):
    """glm_omp (cost-sensitive and cost-blind) vs thresholded regression CS-G-OMP, test accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = js.Groups.from_ids(ids, costs)
    t0 = time.perf_counter()
    glm = glm_omp(X[train], y[train], groups, loss=loss, l2=1e-3)
    jax.block_until_ready(glm.coef)
    t_glm = time.perf_counter() - t0
    glm_blind = glm_omp(X[train], y[train], groups, loss=loss, l2=1e-3, cost_sensitive=False)
    reg = js.cs_omp(js.prepare(X[train], Y[train], groups, l2=L2))
    curves = {
        "GLM CS-G-OMP": glm_accuracy(glm, X[test], y[test]),
        "GLM G-OMP (cost-blind)": glm_accuracy(glm_blind, X[test], y[test]),
        "CS-G-OMP (regression)": js.objective_curve(reg, X[test], Y[test], metric="accuracy"),
    }
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, c in curves.items():
        ax.step(c.cost, c.value, where="post", label=label)
    ax.set_xlabel("feature cost")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{name}: accuracy vs cost (split 0)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    areas = {label: js.timeliness(c) for label, c in curves.items()}
    return {
        "glm_time_s_with_compile": t_glm,
        "final_accuracy": {label: float(c.value[-1]) for label, c in curves.items()},
        "area_under_accuracy_vs_cost": areas,
        "curves": {label: {"cost": c.cost.tolist(), "accuracy": c.value.tolist()} for label, c in curves.items()},
    }


def train_time_experiment(X, Y, ids, costs, png, steps_grid):
    """Paper Fig. 2: training time vs number of selected groups, CS-G-OMP vs CS-G-FR (compile excluded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = js.Groups.from_ids(ids, costs)
    problem = js.prepare(X, Y, groups, l2=L2)
    jax.block_until_ready(problem.C)
    t0 = time.perf_counter()
    problem = js.prepare(X, Y, groups, l2=L2)
    jax.block_until_ready(problem.C)
    t_prepare = time.perf_counter() - t0
    out = {"prepare_s": t_prepare, "steps": list(steps_grid), "CS-G-OMP": [], "CS-G-FR": []}
    for k in steps_grid:
        for name, fn in (("CS-G-OMP", js.cs_omp), ("CS-G-FR", js.cs_fr)):
            jax.block_until_ready(fn(problem, k=k).coef)  # compile
            best = np.inf
            for _ in range(3):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(problem, k=k).coef)
                best = min(best, time.perf_counter() - t0)
            out[name].append(best)
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    for name in ("CS-G-OMP", "CS-G-FR"):
        ax.plot(steps_grid, out[name], marker="o", label=name)
    ax.set_xlabel("number of selected groups")
    ax.set_ylabel("training time [s] (after prepare)")
    ax.set_title(f"training time vs steps (prepare: {t_prepare:.3f} s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    out["fr_over_omp_at_all_steps"] = out["CS-G-FR"][-1] / out["CS-G-OMP"][-1]
    return out


def claims(mean):
    omp = mean["CS-G-OMP"]
    return {
        "FR >= OMP": mean["CS-G-FR"] >= omp,
        "OMP > Single": omp > mean["Single"],
        "OMP > No-Whiten": omp > mean["No-Whiten"],
        "OMP > G-OMP (cost-blind)": omp > mean["G-OMP"],
        "OMP > Sparse": omp > mean["Sparse"],
        "FR Oracle >= FR": mean["FR Oracle"] >= mean["CS-G-FR"] - 1e-12,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 splits, sub-sampled data (CI-sized)")
    ap.add_argument(
        "--sets",
        default=None,
        help="comma-separated subset of " + ",".join(DATASETS) + " (default: all; --quick: pima)",
    )
    args = ap.parse_args()
    if args.sets is None:
        args.sets = "pima" if args.quick else ",".join(DATASETS)
    n_splits = 2 if args.quick else 5
    os.makedirs(RESULTS, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    report = {"n_splits": n_splits, "l2": L2, "sets": {}}
    t_start = time.perf_counter()
    for name in args.sets.split(","):
        t_set = time.perf_counter()
        X, Y, y, ids, costs, loss = DATASETS[name](args.quick)
        n = X.shape[0]
        rows = {m: [] for m in METHODS}
        alpha, stops = None, []
        for split in range(n_splits):
            perm = np.random.default_rng(100 + split).permutation(n)
            train, test = np.sort(perm[: int(0.7 * n)]), np.sort(perm[int(0.7 * n) :])
            paths, curves = run_split(X, Y, ids, costs, train, test)
            omp_train = train_curve(paths["CS-G-OMP"])
            if alpha is None:
                alpha = js.plateau_alpha(omp_train)
            stop = js.alpha_stopping_cost(omp_train, alpha)
            stops.append(stop)
            ref = float(curves["CS-G-OMP"].value[-1])
            for m, v in timeliness_row(curves, stop, ref).items():
                rows[m].append(v)
            if split == 0:
                plot_curves(name, curves, stop, alpha, os.path.join(RESULTS, f"anytime_{name}{suffix}.png"))
                first = {"train": train, "test": test}
        mean = {m: float(np.mean(v)) for m, v in rows.items()}
        entry = {
            "n": int(n),
            "D": int(X.shape[1]),
            "J": int(ids.max() + 1),
            "total_cost": float(np.sum(costs)),
            "alpha": alpha,
            "stop_costs": stops,
            "timeliness_mean": mean,
            "timeliness_std": {m: float(np.std(v)) for m, v in rows.items()},
            "timeliness_splits": rows,
            "claims": claims(mean),
        }
        if loss is not None:
            entry["accuracy"] = accuracy_experiment(
                name,
                X,
                Y,
                y,
                ids,
                costs,
                loss,
                first["train"],
                first["test"],
                os.path.join(RESULTS, f"anytime_accuracy_{name}{suffix}.png"),
            )
        if name == "yahoo_like":
            J = int(ids.max() + 1)
            grid = [J // 4, J // 2, J] if not args.quick else [J // 4, J]
            train = first["train"]  # same shapes as the splits: the compiled solvers are reused
            entry["train_time"] = train_time_experiment(
                X[train], Y[train], ids, costs, os.path.join(RESULTS, f"anytime_train_time{suffix}.png"), grid
            )
        entry["seconds"] = time.perf_counter() - t_set
        report["sets"][name] = entry
        print_table(name, entry)
    report["total_seconds"] = time.perf_counter() - t_start
    out = os.path.join(RESULTS, f"anytime_experiments{suffix}.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=2, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    print(f"total {report['total_seconds']:.1f} s; saved {out}")


def print_table(name, entry):
    mean, std = entry["timeliness_mean"], entry["timeliness_std"]
    print(
        f"\n{name}: n={entry['n']} D={entry['D']} J={entry['J']}  α={entry['alpha']:.2f}  "
        f"test {entry['alpha']:.2f}-timeliness over {len(entry['stop_costs'])} splits ({entry['seconds']:.1f} s)"
    )
    print("  " + "".join(f"{m:>13}" for m in METHODS))
    print("  " + "".join(f"{mean[m]:>8.4f}±{std[m]:.3f}"[-13:].rjust(13) for m in METHODS))
    print("  claims:", ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in entry["claims"].items()))
    if "accuracy" in entry:
        acc = entry["accuracy"]
        print(
            "  accuracy area (1-timeliness):",
            {k: round(v, 4) for k, v in acc["area_under_accuracy_vs_cost"].items()},
            f"glm_omp {acc['glm_time_s_with_compile']:.1f} s",
        )
    if "train_time" in entry:
        tt = entry["train_time"]
        print(
            f"  train time at all steps: OMP {tt['CS-G-OMP'][-1]:.4f} s, FR {tt['CS-G-FR'][-1]:.4f} s "
            f"(FR/OMP = {tt['fr_over_omp_at_all_steps']:.2f}); prepare {tt['prepare_s']:.3f} s"
        )


if __name__ == "__main__":
    main()
