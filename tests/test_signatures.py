"""Every public signature is the one docs/conventions.md lists (names, order, keyword-only options
and defaults), so the conventions page cannot drift from the code.

To refresh the page after an intended change: ``python tests/test_signatures.py`` prints the block
that goes between the ``<!-- signatures -->`` markers of docs/conventions.md.
"""

import inspect
import os
import re

import jaxselect as js

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "conventions.md")
MARK = re.compile(r"<!-- signatures -->\n```text\n(.*?)```\n<!-- /signatures -->", re.DOTALL)


def _default(value) -> str:
    text = repr(value)
    return text if len(text) <= 24 else "…"


def render(name: str, fn) -> str:
    """``name(a, b=None, *, c=1)``: parameter names, order, kinds and (short) defaults."""
    parts, star = [], False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind is p.VAR_POSITIONAL:
            parts.append("*" + p.name)
            star = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append("**" + p.name)
            continue
        parts.append(p.name if p.default is p.empty else f"{p.name}={_default(p.default)}")
    return f"{name}({', '.join(parts)})"


def public_functions():
    """The public callables of ``import jaxselect as js`` that are functions (classes are types)."""
    out = {}
    for name in sorted(js.__all__):
        obj = getattr(js, name)
        if inspect.isfunction(obj) or (callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj)):
            out[name] = obj
    return out


def rendered_block() -> str:
    return "".join(render(name, fn) + "\n" for name, fn in public_functions().items())


def documented_block() -> str:
    with open(PAGE) as f:
        match = MARK.search(f.read())
    assert match, "docs/conventions.md has no <!-- signatures --> block"
    return match.group(1)


def test_conventions_page_lists_every_public_signature():
    documented = documented_block().splitlines()
    actual = rendered_block().splitlines()
    missing = sorted(set(actual) - set(documented))
    stale = sorted(set(documented) - set(actual))
    assert not missing and not stale, (
        "docs/conventions.md's signature block differs from the code (run python tests/test_signatures.py):\n"
        + "\n".join(["code only: " + s for s in missing] + ["page only: " + s for s in stale])
    )


#: (function, argument) pairs exempt from the keyword-only rule, with the reason
POSITIONAL_OPTIONS = {
    ("row_batches", "sample_weight"): "a row array cut into batches together with X and Y",
}


def test_conventions_on_argument_names():
    """The naming rules of the conventions page, checked on every public signature: the PRNG key
    first; the library-wide options keyword-only wherever they are optional."""
    for name, fn in public_functions().items():
        params = inspect.signature(fn).parameters
        names = list(params)
        if "key" in names:
            assert names[0] == "key", f"{name}: key must be the first argument"
        for option in ("sample_weight", "l2", "constant_columns", "max_iter", "tol", "progress", "n_iter"):
            p = params.get(option)
            if p is None or p.default is p.empty or (name, option) in POSITIONAL_OPTIONS:
                continue
            assert p.kind is inspect.Parameter.KEYWORD_ONLY, f"{name}: {option} must be keyword-only"


#: the most parameters a public function takes (issue 34: related options are grouped in records)
MAX_PARAMETERS = 15


def test_no_public_function_takes_more_than_15_parameters():
    """Related options travel as one record (``js.Polish``, ``js.Execution``, ``js.NewtonOptions``,
    DWSM's ``MDPOptions``/``RCPIOptions``, ...); ``**deprecated`` (old keywords for one release) and
    ``*arrays`` do not count."""
    too_many = {}
    for name, fn in public_functions().items():
        named = [
            p for p in inspect.signature(fn).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        if len(named) > MAX_PARAMETERS:
            too_many[name] = len(named)
    assert too_many == {}, too_many


def test_k_directly_follows_the_data():
    """One position for ``k`` (the number of features, groups or steps): right after the data
    arguments, positional-or-keyword, wherever a function takes it."""
    data = {"X", "Y", "y", "groups", "problem", "key"}
    for name, fn in public_functions().items():
        params = list(inspect.signature(fn).parameters.values())
        names = [p.name for p in params]
        if "k" not in names or name in ("annealing_schedule",):
            continue
        i = names.index("k")
        assert params[i].kind is params[i].POSITIONAL_OR_KEYWORD, f"{name}: k must be positional-or-keyword"
        assert all(n in data for n in names[:i]), f"{name}: k must directly follow the data ({names[:i]})"


if __name__ == "__main__":
    print(rendered_block(), end="")
