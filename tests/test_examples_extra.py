"""Every example runs from the ``examples`` extra: each module an example imports, directly or through the
jaxgraphops modules it imports, comes from a distribution that ``pip install ".[examples]"`` installs
(the extra, the core dependencies and what they require). Read from the sources (no example runs)."""

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import jaxgraphops

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(jaxgraphops.__file__).resolve().parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _installed_closure(names) -> set[str]:
    """``names`` and every distribution they require, transitively (the installed ones' metadata)."""
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def _imports(path: Path) -> set[str]:
    """Absolute module names imported by ``path`` (relative imports resolved inside jaxgraphops)."""
    tree, found = ast.parse(path.read_text()), set()
    here = ("jaxgraphops",) + path.relative_to(PACKAGE).parent.parts if PACKAGE in path.parents else ()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1] + ((base,) if base else ()))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def _third_party_modules(example: Path) -> set[str]:
    """Top-level non-stdlib modules needed by ``example`` and the jaxgraphops modules it reaches."""
    todo, seen, needed = [example], set(), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in _imports(path):
            top = module.split(".")[0]
            if top == "jaxgraphops":
                parts = module.split(".")[1:]
                for k in range(len(parts) + 1):  # the package __init__s on the way and the module itself
                    base = PACKAGE.joinpath(*parts[:k])
                    todo += [p for p in (base / "__init__.py", base.with_suffix(".py")) if p.is_file()]
            elif top and top not in sys.stdlib_module_names:
                needed.add(top)
    return needed


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_extra_provides_every_import(example):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    provided = _installed_closure([_name(r) for r in project["optional-dependencies"]["examples"]]
                                  + [_name(r) for r in project["dependencies"]] + ["jaxgraphops"])
    distributions = metadata.packages_distributions()
    missing = {}
    for module in _third_party_modules(example):
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not names & provided:
            missing[module] = sorted(names)
    assert not missing, f"{example.name} imports modules that the examples extra does not install: {missing}"
