"""The README's Python examples and the docstrings' >>> examples run as written."""

import doctest
import importlib
import os
import pkgutil
import re

import pytest

import jaxselect

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_python_blocks_run():
    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks, "README has no python examples"
    namespace = {}
    ran = 0
    for block in blocks:
        if block.startswith("# slow example"):
            continue  # shown in the README; the same calls run in examples/ and the solver tests
        exec(compile(block, "README.md", "exec"), namespace)
        ran += 1
    assert ran >= 4


MODULES = sorted(
    m.name for m in pkgutil.walk_packages(jaxselect.__path__, "jaxselect.") if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
