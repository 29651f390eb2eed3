"""A long-lived process fitting many shapes stays bounded (issue 35): the library's compiled programs
live in the bounded cache of jaxselect.programs, so memory mappings stop growing once it is full.
A smaller version of benchmarks/bench_long_lived.py (300 pairs there)."""

import gc
import warnings

import numpy as np
import pytest

import jaxselect as js
from jaxselect import programs


def _maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/maps"), reason="needs /proc (Linux)")
def test_fits_on_many_shapes_keep_mappings_bounded():
    from jaxselect.sklearn import FSAClassifier, GroupSequencingRegressor

    js.clear_compiled()
    previous = js.set_max_programs(4)
    try:
        rng = np.random.default_rng(0)
        counts = []
        for i in range(10):
            n, d = int(rng.integers(40, 200)), int(rng.integers(5, 30))
            X = rng.normal(size=(n, d)).astype(np.float32)
            y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=n)).astype(np.float32)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                FSAClassifier(k=3).fit(X, y > 0)
                GroupSequencingRegressor(k=3).fit(X, y)
            assert len(programs._CACHE) <= 4
            if i in (3, 9):
                gc.collect()
                counts.append(_maps())
        # six more pairs of new shapes after the cache filled: the mappings do not keep growing
        # (one mid-size XLA:CPU program keeps hundreds of them)
        assert counts[1] - counts[0] < 1000, counts
    finally:
        js.set_max_programs(previous)
        js.clear_compiled()
