"""Streamed FSA on the counter-based eq. (18) source: fused ``gradient_block`` against the two products.

The streamed phase of ``js.fsa(src, None, k, loss="lorenz", max_memory=...)`` (docs/fsa.md, "Data
bigger than memory") makes one pass per iteration over the working columns. With the source's
fused ``gradient_block`` each entry is generated once per pass (scores, per-row weights and the
gradient ``u X_b`` in one kernel); without it (a wrapper hiding ``gradient_block``: the code path
before) each pass calls ``matvec_block`` then ``rmatvec_block``, generating every entry twice.

Both variants run in one process, interleaved (unfused, fused, unfused, fused, …), so they see the
same machine state. Reported per run: total ``js.fsa`` time, the streamed passes' time (iterations
and power iterations, each pass synchronised), the summary pass, the streamed fraction of the
total; the first run of each variant includes its compilations. The results must agree (same
support, coefficients to float32 rounding).

Usage::

    python benchmarks/bench_stream_gradient.py                      # N = 10⁴, M = 2·10⁴, k = 100
    python benchmarks/bench_stream_gradient.py --rounds 1 --max-memory-mb 40

Writes ``benchmarks/results/stream_gradient.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import jax  # noqa: E402

import jaxselect as js  # noqa: E402
from common import save  # noqa: E402
from jaxselect.anneal import schedule as _schedule  # noqa: E402
from jaxselect.anneal import stream as _stream  # noqa: E402


class Unfused:
    """The source without ``gradient_block``: the streamed phase falls back to matvec + rmatvec."""

    def __init__(self, src):
        self._src = src

    def __getattr__(self, name):
        if name == "gradient_block":
            raise AttributeError(name)
        return getattr(self._src, name)


class Timer:
    """Seconds spent in the streamed passes (``StreamedDesign.loss_pass``, synchronised) and the summary pass."""

    def __init__(self):
        self.passes = self.summary = 0.0
        self.n_passes = 0
        fsa_module = sys.modules["jaxselect.anneal.fsa"]
        self._call, self._summary = _stream.StreamedDesign.loss_pass, fsa_module.stream_summary
        timer = self

        def call(oracle, *args, **kw):
            t0 = time.perf_counter()
            out = jax.block_until_ready(timer._call(oracle, *args, **kw))
            timer.passes += time.perf_counter() - t0
            timer.n_passes += 1
            return out

        def summary(*args, **kw):
            t0 = time.perf_counter()
            out = timer._summary(*args, **kw)
            timer.summary += time.perf_counter() - t0
            return out

        _stream.StreamedDesign.loss_pass = call
        fsa_module.stream_summary = summary

    def reset(self):
        self.passes = self.summary = 0.0
        self.n_passes = 0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--m", type=int, default=20_000)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--n-iter", type=int, default=500)
    p.add_argument("--max-memory-mb", type=float, default=40.0)
    p.add_argument("--rounds", type=int, default=2, help="interleaved (unfused, fused) pairs; the first compiles")
    args = p.parse_args(argv)

    src = js.datasets.equicorrelated(args.n, args.m, n_informative=args.k, seed=0)
    budget = int(args.max_memory_mb * 2**20)
    widths = _schedule.stage_widths(args.m, args.k, 32)
    hand_over = _stream.memory_stage(widths, args.n, 4, budget)
    print(f"N={args.n} M={args.m} k={args.k} max_memory={args.max_memory_mb} MiB: widths {widths}, "
          f"stages 0..{hand_over - 1} streamed", flush=True)
    timer = Timer()
    runs, results = [], {}
    for r in range(args.rounds):
        for variant in ("unfused", "fused"):
            timer.reset()
            x = Unfused(src) if variant == "unfused" else src
            t0 = time.perf_counter()
            res = js.fsa(x, None, args.k, loss="lorenz", n_iter=args.n_iter, max_memory=budget)
            jax.block_until_ready(res.coef)
            total = time.perf_counter() - t0
            row = {"variant": variant, "round": r, "total_s": total, "passes_s": timer.passes,
                   "n_passes": timer.n_passes, "summary_s": timer.summary, "streamed_fraction": timer.passes / total}
            runs.append(row)
            results[variant] = res
            print(f"{variant:8s} round {r}: total {total:6.1f} s, streamed passes {timer.passes:6.1f} s "
                  f"({timer.n_passes} passes, {100 * timer.passes / total:4.1f} %), summary {timer.summary:5.1f} s",
                  flush=True)
    a, b = results["unfused"], results["fused"]
    same_support = a.support.tolist() == b.support.tolist()
    coef_diff = float(np.max(np.abs(np.asarray(a.coef) - np.asarray(b.coef))))
    warm = [x for x in runs if x["round"] == args.rounds - 1]
    by = {x["variant"]: x for x in warm}
    ratio_total = by["fused"]["total_s"] / by["unfused"]["total_s"]
    ratio_passes = by["fused"]["passes_s"] / by["unfused"]["passes_s"]
    print(f"last round: fused/unfused total {ratio_total:.3f}, streamed passes {ratio_passes:.3f}; "
          f"same support {same_support}, max |Δcoef| {coef_diff:.2e}")
    path = save("stream_gradient", {
        "args": vars(args), "widths": list(map(int, widths)), "hand_over": int(hand_over), "runs": runs,
        "ratio_total": ratio_total, "ratio_passes": ratio_passes, "same_support": same_support,
        "max_coef_diff": coef_diff,
    })
    print("wrote", path)


if __name__ == "__main__":
    main()
