"""A whole PyG model's weights into an Equinox model built with this package's layers: :func:`load_pyg_model`."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _pyg_model as pm

# torch module -> {our field: PyG key}; torch's [out, in] layout is Equinox's
NATIVE = {
    eqx.nn.Linear: {"weight": "weight", "bias": "bias"},
    eqx.nn.LayerNorm: {"weight": "weight", "bias": "bias"},
    eqx.nn.Embedding: {"weight": "weight"},
}


def _is_layer(x) -> bool:
    return callable(getattr(type(x), "from_pyg", None)) and type(x).__module__.startswith(__package__)


def _is_unit(x) -> bool:
    return _is_layer(x) or type(x) in NATIVE or isinstance(x, eqx.nn.BatchNorm)


def _name(key) -> str:
    return str(getattr(key, "name", getattr(key, "idx", getattr(key, "key", key))))


def _arrays(module) -> dict[str, tuple]:
    leaves = jax.tree_util.tree_flatten_with_path(eqx.filter(module, eqx.is_array))[0]
    return {jax.tree_util.keystr(p): tuple(a.shape) for p, a in leaves}


def load_pyg_model(model, state_dict, *, rename: dict[str, str] | None = None):
    """``model`` with every array set from a whole PyG model's ``state_dict()`` (a new module: Equinox modules are
    immutable).

    ``model`` mirrors the PyG model: its fields have the PyG module's names (a list for a ``ModuleList``), so the
    layer at ``model.convs[0]`` reads the keys ``convs.0.*`` (``rename={"ours": "theirs"}`` maps prefixes where the
    names differ). This package's layers read their keys with their own ``from_pyg`` (with the options of the
    model's layer, such as ``heads`` or ``train_eps``, that the weights do not store); ``eqx.nn.Linear``,
    ``eqx.nn.LayerNorm`` and ``eqx.nn.Embedding`` read torch's ``Linear``, ``LayerNorm`` and ``Embedding``
    (``eqx.nn.BatchNorm`` keeps its statistics in an ``eqx.nn.State`` outside the model: not read, an error).
    Every key must belong to a layer and every array of the model must be read, or a ``ValueError`` lists what
    did not match.

    >>> import jax, numpy as np
    >>> import equinox as eqx
    >>> from jaxgraphops.nn.equinox import GCNConv
    >>> class Net(eqx.Module):
    ...     convs: list
    ...     lin: eqx.nn.Linear
    >>> k = jax.random.key(0)
    >>> net = Net([GCNConv(4, 8, key=k), GCNConv(8, 8, key=k)], eqx.nn.Linear(8, 2, key=k))
    >>> sd = {"convs.0.lin.weight": np.ones((8, 4)), "convs.0.bias": np.zeros(8), "convs.1.lin.weight": np.ones((8, 8)),
    ...       "convs.1.bias": np.zeros(8), "lin.weight": np.ones((2, 8)), "lin.bias": np.zeros(2)}
    >>> net = load_pyg_model(net, sd)
    >>> float(net.lin.weight.sum()), net.convs[0].lin.weight.shape
    (16.0, (8, 4))
    """
    fn = "jaxgraphops.nn.equinox.load_pyg_model"
    pm.check_mapping(fn, state_dict)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_unit)
    units = {tuple(_name(k) for k in path): leaf for path, leaf in leaves if _is_unit(leaf)}
    names = {path: ".".join(path) or type(model).__name__ for path in units}
    outside = [jax.tree_util.keystr(p) for p, leaf in leaves if not _is_unit(leaf) and eqx.is_array(leaf)]
    norms = [names[p] for p, u in units.items() if isinstance(u, eqx.nn.BatchNorm)]
    if outside or norms:
        raise ValueError(f"{fn}: " + "; ".join(filter(None, [
            outside and f"arrays outside any layer the loader reads (this package's layers with from_pyg, "
                        f"{sorted(t.__name__ for t in NATIVE)}): {outside}",
            norms and f"eqx.nn.BatchNorm keeps its running statistics in an eqx.nn.State, which the loader does "
                      f"not build: {norms}"])))
    parts = pm.split_state_dict(fn, state_dict, {names[p]: pm.pyg_prefix(p, rename) for p in units})
    loaded = {}
    for path, layer in units.items():
        where, sub = f"{names[path]} ({type(layer).__name__})", parts[names[path]]
        if type(layer) in NATIVE:
            fields = {ours: theirs for ours, theirs in NATIVE[type(layer)].items() if getattr(layer, ours) is not None}
            pm.check_keys(fn, where, sub, set(fields.values()))
            for ours, theirs in fields.items():
                a = pm.array(fn, where, sub, theirs, getattr(layer, ours).shape)
                layer = eqx.tree_at(lambda m, f=ours: getattr(m, f), layer, jnp.asarray(a, getattr(layer, ours).dtype))
        else:
            built = type(layer).from_pyg(sub, **pm.loader_options(type(layer).from_pyg, layer))
            pm.check_same_arrays(fn, where, _arrays(layer), _arrays(built))
            arrays = iter(jax.tree_util.tree_leaves(eqx.filter(built, eqx.is_array)))
            flat, layer_def = jax.tree_util.tree_flatten(layer)
            layer = layer_def.unflatten([next(arrays) if eqx.is_array(x) else x for x in flat])
        loaded[path] = layer
    return jax.tree_util.tree_unflatten(
        treedef, [loaded.get(tuple(_name(k) for k in p), leaf) for p, leaf in leaves])
