"""The documentation runs as written: the README's and every docs page's Python blocks, the docstrings'
>>> examples, and an API reference that lists every public name.

Blocks whose first line is ``# slow example`` are shown but not run here; the same calls run in
``examples/`` (``tests/test_examples.py``) or in the solver tests, as the comment says.
"""

import doctest
import glob
import importlib
import inspect
import os
import pkgutil
import re

import jaxselect

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))
SLOW = "# slow example"


def _python_blocks(path):
    with open(os.path.join(ROOT, path)) as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.DOTALL | re.MULTILINE)


def _run_blocks(path):
    """Run a page's blocks, each alone in a fresh namespace: a reader may copy any one block."""
    ran = 0
    for i, block in enumerate(_python_blocks(path)):
        if block.startswith(SLOW):
            assert re.match(r"# slow example.*(examples/|tests/)", block), (
                f"{path}: a slow block must say where the same calls run (examples/ or tests/)"
            )
            continue
        namespace = {"__name__": "__docs__"}
        exec(compile(block, f"{path}[block {i}]", "exec"), namespace)  # noqa: S102 - running the docs is the test
        ran += 1
    return ran


def test_python_blocks_run():
    """README first, then every docs page, in one process (pages share compiled programs); every
    block runs alone, in a namespace of its own."""
    failures = []
    ran = {}
    for path in ["README.md"] + PAGES:
        try:
            ran[path] = _run_blocks(path)
        except Exception as e:  # noqa: BLE001 - report every failing page at once
            failures.append(f"{path}: {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)
    assert ran["README.md"] >= 3
    assert sum(ran.values()) >= 10


def test_readme_is_short_and_its_links_resolve():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert len(text.splitlines()) <= 250
    assert "python -m pytest -q -n 2 tests" in text
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        assert "python -m pytest -q -n 2 tests" in f.read(), "the README's test command is what CI runs"
    links = re.findall(r"\]\(((?:docs/|CHANGELOG|jaxselect/)[^)#]*)", text)
    assert links
    missing = [link for link in links if not os.path.exists(os.path.join(ROOT, link))]
    assert not missing, f"README links to missing files: {missing}"


def _public_names():
    import jaxselect.sklearn as sk

    names = [f"jaxselect.{n}" for n in jaxselect.__all__]
    names += [f"jaxselect.sklearn.{n}" for n in sk.__all__]
    return names


def test_api_reference_lists_every_public_name():
    text = ""
    for path in glob.glob(os.path.join(DOCS, "api", "*.md")):
        with open(path) as f:
            text += f.read()
    listed = set(re.findall(r"^::: ([\w.]+)", text, re.MULTILINE))
    missing = [n for n in _public_names() if n not in listed]
    assert not missing, f"not in docs/api/*.md: {missing}"


def test_every_public_callable_has_a_docstring_with_an_example():
    import jaxselect.sklearn as sk

    objects = [(n, getattr(jaxselect, n)) for n in jaxselect.__all__]
    objects += [(n, getattr(sk, n)) for n in sk.__all__]
    lacking = []
    for name, obj in objects:
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue  # constants, modules: documented in their module / the API pages
        doc = inspect.getdoc(obj) or ""
        if len(doc.splitlines()) < 3 or ">>>" not in doc:
            lacking.append(name)
    assert not lacking, f"public names without a docstring example: {lacking}"


MODULES = sorted(
    m.name for m in pkgutil.walk_packages(jaxselect.__path__, "jaxselect.") if not m.name.endswith("__main__")
)


def test_docstring_examples():
    """Every module's >>> examples, in one process: examples with equal shapes share compiled programs."""
    failed = {}
    for name in MODULES:
        module = importlib.import_module(name)
        flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
        result = doctest.testmod(module, optionflags=flags, verbose=False, report=False)
        if result.failed:
            failed[name] = result.failed
    assert not failed, f"docstring examples failed (module: count; run python -m doctest on them): {failed}"
