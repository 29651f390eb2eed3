"""The quick examples run as a user runs them: a fresh process, JAX's default config (float32, no
strict promotion), the bundled data. The longer ones (fsa_dexter, fsa_ranking) are covered by the
FSA tests and their own scripts."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# example -> a line its output must contain
EXAMPLES = {
    "anytime_quickstart.py": "CS-G-OMP at budget",
    "cv_vmap.py": "held-out explained variance per prefix",
    "tune_l2.py": "final l2 =",
    "greedy_rls_multilabel.py": "label scores",
    "dwsm_quickstart.py": "cost-sensitive",
    "sklearn_pipeline_pima.py": "selected columns",
    "sklearn_fsa_gridsearch.py": "at equal k",
    "multiclass_text.py": "topic words",
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs(name):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", name)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert EXAMPLES[name] in proc.stdout
    assert not re.search(r"\bnan\b", proc.stdout, re.IGNORECASE), "an example printed NaN"
