"""The package's layering, checked on its source (docs/architecture.md describes the layers).

Every module of ``jaxselect`` belongs to one layer; a module may import only modules of its own
layer or below — lazily inside a function too — and a solver family imports no other solver family.
No module imports another module's private (``_``-prefixed) names.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jaxselect"

#: layer number of each module (dotted, without the ``jaxselect.`` prefix), or of a package (all
#: its modules), listed bottom-up. Keep in sync with docs/architecture.md.
LAYERS = {
    # 0 — core: no data, no solver; helpers every layer may use
    "_repr": 0, "_static": 0, "_budget": 0, "_compat": 0, "_progress": 0, "_memory": 0, "_exported": 0, "programs": 0, "solver": 0, "status": 0, "_validation": 0, "linalg": 0,
    "losses": 0, "groups": 0, "newton": 0, "sharding": 0, "datasets": 0, "sources": 0,
    # 1 — data layer: the front door, the design operators, the moments engine
    "design": 1,
    # 2 — the results several families share (the anytime predictor SelectionPath, RLSResult) and
    # js.predict, the single-dispatch function each family registers its result type with
    "path": 2, "_predict": 2,
    # 3 — one package per method (each imports no other family)
    "sequencing": 3, "anneal": 3, "dwsm": 3, "rls": 3, "refit": 3,
    # 4 — evaluation across families
    "prediction": 4, "model_selection": 4,
    # 5 — front ends
    "sklearn": 5, "": 5,
}
SOLVER_FAMILIES = ("sequencing", "anneal", "dwsm", "rls", "refit")
#: private modules whose names are the package's internal API (their own ``_`` marks the module)
INTERNAL_MODULES = ("_repr", "_static", "_budget", "_compat", "_validation", "_base", "_exported")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _unit(module: str) -> str:
    """The key of LAYERS that owns ``module`` (a module, or the package it is in)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in LAYERS:
            return key
    return ""


def _imports(source: str, module: str, is_package: bool):
    """(target module, imported names, line) for every import of jaxselect in ``source``, resolved."""
    tree = ast.parse(source)
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "jaxselect" or alias.name.startswith("jaxselect."):
                    yield alias.name[len("jaxselect.") :] if "." in alias.name else "", [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(anchor + ([node.module] if node.module else []))
            elif node.module and (node.module == "jaxselect" or node.module.startswith("jaxselect.")):
                target = node.module[len("jaxselect.") :] if "." in node.module else ""
            else:
                continue
            names = [a.name for a in node.names]
            if not node.module or node.module == "jaxselect":  # `from .. import losses`: names are modules
                for name in names:
                    yield (f"{target}.{name}" if target else name), [], node.lineno
            else:
                yield target, names, node.lineno


def _package_files():
    """(module, is_package, shown path, source) of every module of the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        yield _module_name(path), path.name == "__init__.py", f"jaxselect/{path.relative_to(PACKAGE)}", path.read_text()


def test_every_module_has_a_layer():
    missing = [m for m, *_ in _package_files() if m and m.split(".")[0] not in LAYERS]
    assert missing == [], f"modules without a layer in LAYERS (and docs/architecture.md): {missing}"


def _violations(files):
    found = []
    for module, is_package, shown, source in files:
        if module == "":
            continue  # jaxselect/__init__.py re-exports every layer
        unit = _unit(module)
        layer, top = LAYERS[unit], unit.split(".")[0]
        for target, names, line in _imports(source, module, is_package):
            where = f"{shown}:{line}"
            if target == "" or target.split(".")[0] not in LAYERS:
                found.append(f"{where}: imports {('jaxselect.' + target).rstrip('.')} (import the module itself)")
                continue
            t_unit = _unit(target)
            if LAYERS[t_unit] > layer:
                found.append(f"{where}: {module} (layer {layer}) imports {target} (layer {LAYERS[t_unit]})")
            t_top = t_unit.split(".")[0]
            if top in SOLVER_FAMILIES and t_top in SOLVER_FAMILIES and top != t_top:
                found.append(f"{where}: solver family {top} imports solver family {t_top}")
            private = [n for n in names if n.startswith("_")]
            if private and target.split(".")[-1] not in INTERNAL_MODULES:
                found.append(f"{where}: imports private name(s) {private} from {target}")
    return found


def test_no_module_imports_a_layer_above_its_own():
    assert _violations(_package_files()) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from jaxselect.prediction import predict", "(layer 4)"),
        ("from jaxselect import prediction", "(layer 4)"),
        ("def f():\n    from jaxselect.model_selection import cross_validate_path", "(layer 4)"),
        ("from jaxselect.anneal import fsa", "solver family rls imports solver family anneal"),
        ("from ..refit import ridge_refit", "solver family rls imports solver family refit"),
        ("from jaxselect.design.moments import _chunk", "private"),
        ("import jaxselect", "import the module itself"),
    ],
)
def test_the_checker_catches_each_kind_of_violation(source, expected):
    """The rules fire: a fake module of the rls family with one bad import."""
    found = _violations([("rls.probe", False, "jaxselect/rls/probe.py", source)])
    assert any(expected in v for v in found), found
    assert _violations([("rls.probe", False, "jaxselect/rls/probe.py", "from jaxselect.path import x")]) == []
