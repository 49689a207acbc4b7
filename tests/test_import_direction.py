"""Imports point down: no import circle; leaf modules import nothing of the package; the primitives build on
primitives, not on the public ops; the layers on the public ops, each framework folder on its own framework;
the pure-JAX references never import what they check (the kernels' modules).

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


def _package_modules() -> list[str]:
    """Every module of the package, by name."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_circle():
    """No module of the package reaches itself through imports (function-level imports included: they close a
    circle as well when they run). The package ``__init__`` is left out: it is what users import."""
    graph = {m: {i for i in _imports(m) if i != "jaxgraphops"} for m in _package_modules() if m != "jaxgraphops"}
    assert not _cycles(graph), f"import circles: {_cycles(graph)}"


def test_the_cycle_check_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_leaf_modules_import_nothing_of_the_package():
    for leaf in ("jaxgraphops._checks", "jaxgraphops._graph_check", "jaxgraphops._philox", "jaxgraphops._layout"):
        assert not _imports(leaf) - {"jaxgraphops"}, (leaf, _imports(leaf))


def test_primitives_import_no_public_op():
    """``ops/_*`` (primitives, the kit, the families' math) build on primitives, never on the public ops (which
    check arguments and dispatch ``impl``) nor on the oracle."""
    import jaxgraphops as jgo

    modules = {getattr(getattr(jgo, n), "__module__", "") for n in jgo.__all__}
    public = {m for m in modules if m.startswith("jaxgraphops.ops.") and not m.rpartition(".")[2].startswith("_")}
    assert "jaxgraphops.ops.message_passing" in public and "jaxgraphops.ops.aggregation" in public
    for path in sorted((PACKAGE / "ops").glob("_*.py")):
        name = f"jaxgraphops.ops.{path.stem}"
        bad = _imports(name) & (public | {"jaxgraphops.reference"})
        assert not bad, f"{name} imports {sorted(bad)}"


def test_layers_use_public_ops_and_their_own_framework():
    """``nn/`` reaches the ops through their public modules and names only; the families' math imports no
    framework; each framework folder imports its own framework and no other."""
    frameworks = {"flax": ("flax.linen",), "nnx": ("flax.nnx", "flax.traverse_util"), "equinox": ("equinox",)}
    for path in sorted((PACKAGE / "nn").rglob("*.py")):
        rel = path.relative_to(PACKAGE / "nn")
        folder = rel.parts[0] if len(rel.parts) > 1 else None
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and "ops" in (node.module or "").split("."):
                private = [p for p in node.module.split(".") if p.startswith("_")]
                names = [a.name for a in node.names if a.name.startswith("_")]
                assert not private and not names, f"nn/{rel} imports private ops names: {node.module} {names}"
            external = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                        [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom)
                        and not node.level else [])
            for name in external:
                used = [f for f, prefixes in frameworks.items()
                        if name.split(".")[0] in ("flax", "equinox") and name.startswith(prefixes)]
                if name.split(".")[0] not in ("flax", "equinox"):
                    continue
                assert folder in frameworks, f"nn/{rel}: the families' math imports {name}"
                assert used == [folder], f"nn/{rel} ({folder}) imports {name}"
