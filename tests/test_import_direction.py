"""Imports point down: the pure-JAX references never import what they check (the kernels' modules).

Oracle: the import statements of the package's source files, followed within the package."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "jaxgraphops"
CHECKED = ("jaxgraphops.ops", "jaxgraphops.dimenet._primitives", "jaxgraphops.dimenet.ops", "jaxgraphops.nn")


def _module_file(name: str) -> pathlib.Path | None:
    parts = name.split(".")[1:]
    base = PACKAGE.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(name: str) -> set[str]:
    """The package modules that module ``name`` imports (a ``from . import x`` counts as ``pkg.x``)."""
    path = _module_file(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if _module_file(sub) else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "jaxgraphops" or m.startswith("jaxgraphops.")}


def _closure(name: str) -> dict[str, str]:
    """Every package module reachable from ``name`` by imports, with the module that imports it."""
    seen, todo = {name: ""}, [name]
    while todo:
        current = todo.pop()
        for m in _imports(current):
            if m not in seen and m != "jaxgraphops":  # the package __init__ is what users import, not an edge
                seen[m] = current
                todo.append(m)
    return seen


@pytest.mark.parametrize("reference", ["jaxgraphops.reference", "jaxgraphops.dimenet.reference"])
def test_references_import_nothing_they_check(reference):
    reached = _closure(reference)
    bad = {m: by for m, by in reached.items() if m.startswith(CHECKED)}
    assert not bad, f"{reference} reaches the modules it checks: " + ", ".join(f"{m} (from {b})" for m, b in bad.items())


def test_the_check_sees_imports():
    """The walk itself: ops/attention.py reaches the primitive kit, and a reference reaches its helpers."""
    assert "jaxgraphops.ops._primitive_kit" in _closure("jaxgraphops.ops.attention")
    assert "jaxgraphops._layout" in _closure("jaxgraphops.reference")
