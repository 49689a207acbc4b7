"""A whole PyG model's ``state_dict`` split over the layers of a model built with this package (the frameworks'
``load_pyg_model``): which keys belong to which layer, the options a layer's loader needs, and the errors that
list what did not match.

A layer of the model at attribute path ``convs[0]`` (NNX, Equinox) or ``convs_0`` (linen) reads the keys under the
PyG prefix ``convs.0.``; ``rename`` maps the model's prefixes to PyG's where the names differ.
"""

from __future__ import annotations

import inspect

import numpy as np

# torch.nn.BatchNorm*'s counter of training batches: no parameter of ours corresponds to it
IGNORED_LEAVES = ("num_batches_tracked",)


def pyg_prefix(path: tuple, rename: dict[str, str] | None) -> str:
    """The dotted PyG prefix of a module path (``("convs", 0)`` -> ``"convs.0"``), after ``rename`` (the longest
    of its keys that is a whole-component prefix of it)."""
    dotted = ".".join(str(p) for p in path)
    for ours in sorted(rename or {}, key=len, reverse=True):
        if dotted == ours or dotted.startswith(ours + "."):
            return rename[ours] + dotted[len(ours):]
    return dotted


def outermost(modules: dict[tuple, object], is_unit) -> dict[tuple, object]:
    """The modules (by path) that ``is_unit`` accepts and that lie inside no other accepted one, outermost first:
    the layers a loader reads whole."""
    units: dict[tuple, object] = {}
    for path in sorted(modules, key=len):
        if is_unit(modules[path]) and not any(path[:len(u)] == u for u in units):
            units[path] = modules[path]
    return units


def check_mapping(fn: str, state_dict):
    if not hasattr(state_dict, "keys"):
        raise TypeError(f"{fn}: state_dict must be a mapping (a torch module's state_dict()); got "
                        f"{type(state_dict).__name__}")


def split_state_dict(fn: str, state_dict, prefixes: dict[str, str]) -> dict[str, dict]:
    """``{unit: its keys with the prefix removed}`` for ``prefixes`` (``{unit: PyG prefix}``, ``""`` for the whole
    dict); a key under no prefix, or a unit without keys, is a ``ValueError`` listing every one of them."""
    keys = [k for k in state_dict if k.rpartition(".")[2] not in IGNORED_LEAVES]
    parts: dict[str, dict] = {unit: {} for unit in prefixes}
    unmatched = []
    for key in keys:
        owners = [u for u, p in prefixes.items() if p == "" or key.startswith(p + ".")]
        if not owners:
            unmatched.append(key)
            continue
        unit = max(owners, key=lambda u: len(prefixes[u]))
        parts[unit][key[len(prefixes[unit]) + 1:] if prefixes[unit] else key] = state_dict[key]
    empty = ", ".join(f"{u} (PyG prefix {prefixes[u] or '(none)'})" for u, part in parts.items() if not part)
    if unmatched or empty:
        raise ValueError(f"{fn}: the state_dict and the model do not match: "
                         + "; ".join(filter(None, [
                             unmatched and f"keys under no layer of the model: {sorted(unmatched)}",
                             empty and f"layers of the model without keys in the state_dict: {empty}"]))
                         + f". The model's layers and their PyG prefixes: {sorted(prefixes.values())}; pass "
                         f"rename={{model prefix: PyG prefix}} where the names differ")
    return parts


def loader_options(loader, layer) -> dict:
    """The keyword-only options of a layer's PyG loader (``from_pyg``: ``heads``, ``concat``, ``train_eps``, ...)
    that the built ``layer`` holds as attributes of the same names: the weights are read as the layer was built."""
    names = [p.name for p in inspect.signature(loader).parameters.values() if p.kind is p.KEYWORD_ONLY]
    return {n: getattr(layer, n) for n in names
            if n not in ("dtype", "param_dtype") and hasattr(layer, n) and not callable(getattr(layer, n))}


def array(fn: str, where: str, sub: dict, key: str, shape: tuple | None = None, transpose: bool = False):
    """``sub[key]`` as a NumPy array (transposed), checked against ``shape`` (the model's) if given."""
    if key not in sub:
        raise ValueError(f"{fn}: {where} needs the key {key!r}; the state_dict has {sorted(sub)} there")
    a = np.asarray(sub[key])  # a state_dict()'s CPU tensors convert as they are
    a = a.T if transpose else a
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ValueError(f"{fn}: {where}: {key} has shape {tuple(a.shape)}{' transposed' if transpose else ''}, the "
                         f"model's {tuple(shape)}")
    return a


def check_keys(fn: str, where: str, sub: dict, allowed: set[str]):
    extra = sorted(set(sub) - allowed)
    if extra:
        raise ValueError(f"{fn}: {where} reads {sorted(allowed)}; the state_dict also has {extra} there")


def check_same_arrays(fn: str, where: str, ours: dict, theirs: dict):
    """The flat ``{name: shape}`` of the model's layer and of the layer built from the state_dict agree."""
    if ours != theirs:
        raise ValueError(f"{fn}: {where}: the model's layer holds {ours}, the PyG weights give {theirs} (build the "
                         f"layer with the PyG layer's sizes and options)")


def flatten(tree, prefix: tuple = ()) -> dict[tuple, object]:
    """Nested dicts as ``{path: leaf}``."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    return {k: v for name, sub in tree.items() for k, v in flatten(sub, (*prefix, name)).items()}


def unflatten(flat: dict[tuple, object]) -> dict:
    """``{path: leaf}`` as nested dicts."""
    out: dict = {}
    for path, leaf in flat.items():
        node = out
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = leaf
    return out
