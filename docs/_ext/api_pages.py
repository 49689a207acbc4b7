"""The API reference pages, generated from the public modules' ``__all__`` at every build.

:func:`render_pages` imports each module of :data:`PAGES` and writes one reST page per module: an
autosummary table per section and an autodoc entry (``autofunction``, ``autoclass``, ...) per public
name, so a name added to a module's ``__all__`` appears in the reference without editing the docs.
A module without ``__all__`` exports the public names it defines. A name re-exported from a module
that has a page of its own (``jaxgraphops.partition_graph`` from ``jaxgraphops.distributed``) is
documented on that page and linked from the others.

It needs no Sphinx: ``tests/test_docs_api.py`` parses its output. :func:`setup` is the Sphinx
extension (``conf.py`` loads it), which writes the pages into ``docs/api/`` when the build starts.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from pathlib import Path

# (module, one line on what it holds); the order of the API index
PAGES = (
    ("jaxgraphops", "the operators, graphs, sampling and platform queries (``import jaxgraphops as jgo``)"),
    ("jaxgraphops.dimenet", "DimeNet++: radial basis, triplets, the fused triplet aggregation, periodic radius graphs"),
    ("jaxgraphops.distributed", "one graph over several devices: partitioning and the halo exchange"),
    ("jaxgraphops.nn", "helpers shared by the layers"),
    ("jaxgraphops.nn.flax", "Flax (linen) layers and the DimeNet++ model, with PyG weight loaders"),
    ("jaxgraphops.nn.equinox", "Equinox layers and the DimeNet++ model"),
    ("jaxgraphops.nn.nnx", "Flax NNX layers and the DimeNet++ model, with PyG weight loaders"),
)

# Sections of a page, by the module that defines an object (the first matching prefix wins); the
# objects of other modules go under LAYERS, LOADERS, CLASSES or FUNCTIONS (_section).
SECTIONS = (
    ("jaxgraphops.graph", "Graphs, batching and padding"),
    ("jaxgraphops.batching", "Graphs, batching and padding"),
    ("jaxgraphops.reorder", "Graphs, batching and padding"),
    ("jaxgraphops.buckets", "Graphs, batching and padding"),
    ("jaxgraphops.neighbors", "Neighbour graphs"),
    ("jaxgraphops.ops.message_passing", "Generic message passing"),
    ("jaxgraphops.ops.aggregation", "Aggregation"),
    ("jaxgraphops.ops.attention", "Attention"),
    ("jaxgraphops.ops.gno", "Graph neural operators"),
    ("jaxgraphops.ops.hg_basis", "Relational aggregation and edge updates"),
    ("jaxgraphops.ops.update_efeat", "Relational aggregation and edge updates"),
    ("jaxgraphops.ops.dmpnn", "Relational aggregation and edge updates"),
    ("jaxgraphops.sampling", "Neighbour sampling"),
    ("jaxgraphops.loader", "Loaders"),
    ("jaxgraphops.distributed", "Several devices"),
    ("jaxgraphops._backend", "Kernel platforms"),
    ("jaxgraphops.dimenet.basis", "Basis"),
    ("jaxgraphops.dimenet.triplets", "Triplets"),
    ("jaxgraphops.dimenet.ops", "Triplet aggregation"),
    ("jaxgraphops.dimenet.radius", "Neighbour lists (periodic)"),
)
LAYERS, LOADERS, WARNINGS, MODULES, DATA = "Layers", "Loading PyG weights", "Warnings", "Submodules", "Version"
CLASSES, FUNCTIONS = "Classes", "Functions"  # of modules SECTIONS does not name
ORDER = [title for _, title in SECTIONS] + [LAYERS, LOADERS, CLASSES, FUNCTIONS, WARNINGS, MODULES, DATA]
PYTREE_PROTOCOL = ("tree_flatten", "tree_unflatten")  # JAX's, not the user's


def public_names(module: types.ModuleType) -> list[str]:
    """``module.__all__``, or the public names the module defines itself when it has none."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return sorted(name for name, obj in vars(module).items()
                  if not name.startswith("_") and getattr(obj, "__module__", None) == module.__name__)


def page_file(module_name: str) -> str:
    return f"{module_name}.rst"


def home_page(obj, name: str, pages: dict[str, list[str]]) -> str | None:
    """The page that documents ``obj``: that of the most specific page module that defines it and
    exports it under ``name``, so that references relative to the defining module (its docstrings,
    type annotations) resolve; None when no page module defines it."""
    defined_in = getattr(obj, "__module__", None) or ""
    homes = [m for m in pages if (defined_in == m or defined_in.startswith(m + ".")) and name in pages[m]]
    return max(homes, key=len) if homes else None


def _section(obj, name: str) -> str:
    if isinstance(obj, types.ModuleType):
        return MODULES
    if isinstance(obj, type) and issubclass(obj, Warning):
        return WARNINGS
    if name == "__version__":
        return DATA
    defined_in = getattr(obj, "__module__", None) or ""
    for prefix, title in SECTIONS:
        if defined_in == prefix or defined_in.startswith(prefix + "."):
            return title
    if name.startswith("from_pyg"):
        return LOADERS
    if isinstance(obj, type):
        return LAYERS if defined_in.startswith("jaxgraphops.nn.") else CLASSES
    return FUNCTIONS


def _directive(obj, full_name: str) -> list[str]:
    """The autodoc directive documenting ``obj`` as ``full_name``."""
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return [f".. autoexception:: {full_name}"]
    if isinstance(obj, type):
        members = class_members(obj)
        return [f".. autoclass:: {full_name}"] + ([f"   :members: {', '.join(members)}"] if members else [])
    if callable(obj):
        return [f".. autofunction:: {full_name}"]
    return [f".. autodata:: {full_name}", "   :no-value:" if not isinstance(obj, str) else "   :annotation:"]


def class_members(cls: type) -> list[str]:
    """The public methods and properties ``cls`` defines itself (not its fields' values, such as a
    layer's default activation function, nor a NamedTuple's field accessors, nor inherited ones)."""
    members = []
    for name, value in vars(cls).items():
        if name.startswith("_") or name in PYTREE_PROTOCOL:
            continue
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        if isinstance(value, property) or (inspect.isfunction(value)
                                           and value.__qualname__.startswith(cls.__qualname__ + ".")):
            members.append(name)
    return members


def _heading(text: str, char: str) -> list[str]:
    return [text, char * len(text), ""]


def render_page(module_name: str, pages: dict[str, list[str]]) -> str:
    """The reST page of one module (``pages``: page module -> its public names)."""
    module = importlib.import_module(module_name)
    lines = _heading(module_name, "=") + [f".. automodule:: {module_name}", "", f".. currentmodule:: {module_name}", ""]
    grouped: dict[str, list[tuple[str, object]]] = {}
    for name in pages[module_name]:
        obj = getattr(module, name)
        grouped.setdefault(_section(obj, name), []).append((name, obj))
    for title in sorted(grouped, key=ORDER.index):
        entries = sorted(grouped[title], key=lambda item: (not isinstance(item[1], type), item[0].lower()))
        lines += _heading(title, "-")
        body, summary = [], []
        for name, obj in entries:
            if isinstance(obj, types.ModuleType):
                summary.append(f"- :mod:`{obj.__name__}`" + (": " + _summary(obj) if _summary(obj) else ""))
                if obj.__name__ not in pages:  # a public submodule without a page of its own: its members here
                    body += _submodule(obj)
                continue
            home = home_page(obj, name, pages)
            if home is not None and home != module_name:
                summary.append(f"- :py:obj:`{name} <{home}.{name}>`: documented in :mod:`{home}`")
                continue
            body += _directive(obj, f"{module_name}.{name}") + [""]
        documented = [name for name, obj in entries if not isinstance(obj, types.ModuleType)
                      and home_page(obj, name, pages) in (None, module_name)]
        if documented and title != DATA:
            lines += [".. autosummary::", ""] + [f"   {name}" for name in documented] + [""]
        if summary:
            lines += summary + [""]
        lines += body
    return "\n".join(lines).rstrip() + "\n"


def _summary(obj) -> str:
    """The first paragraph of ``obj``'s docstring, on one line."""
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def _submodule(module: types.ModuleType) -> list[str]:
    lines = _heading(module.__name__, "~") + [f".. automodule:: {module.__name__}", ""]
    for name in public_names(module):
        lines += _directive(getattr(module, name), f"{module.__name__}.{name}") + [""]
    return lines


def render_pages() -> dict[str, str]:
    """File name (relative to ``docs/api/``) -> reST text, for every page and the index."""
    pages = {name: public_names(importlib.import_module(name)) for name, _ in PAGES}
    out = {page_file(name): render_page(name, pages) for name, _ in PAGES}
    index = _heading("API reference", "=") + [
        "Generated from the docstrings; one page per public module, every name of its ``__all__``.",
        "The examples in the docstrings run as doctests (``tests/test_docstrings.py``).", "",
        ".. toctree::", "   :hidden:", ""] + [f"   {page_file(name)[:-4]}" for name, _ in PAGES] + [""]
    index += [f"- :mod:`{name}`: {what}" for name, what in PAGES]
    out["index.rst"] = "\n".join(index) + "\n"
    return out


def write_pages(folder: Path) -> None:
    """Writes the pages into ``folder``, rewriting only those that changed (so Sphinx's incremental
    builds stay incremental) and removing stale ones."""
    folder.mkdir(parents=True, exist_ok=True)
    pages = render_pages()
    for stale in {p.name for p in folder.glob("*.rst")} - set(pages):
        (folder / stale).unlink()
    for name, text in pages.items():
        path = folder / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def drop_framework_fields(app, what, name, obj, options, signature, return_annotation):
    """Flax modules' signatures end with ``parent`` and ``name``, fields every linen module has: drop them."""
    if what == "class" and signature and hasattr(obj, "__dataclass_fields__") and "parent" in obj.__dataclass_fields__:
        signature = re.sub(r", parent=[^,]*(?=, name=)", "", signature)
        signature = re.sub(r", name=None\)$", ")", signature)
    return signature, return_annotation


def setup(app):
    app.connect("builder-inited", lambda app: write_pages(Path(app.srcdir) / "api"))
    app.connect("autodoc-process-signature", drop_framework_fields)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
