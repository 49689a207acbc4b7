"""A whole PyG model's weights as the variables of a linen model built with this package's layers:
:func:`load_pyg_model`."""

from __future__ import annotations

import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from .. import _pyg_model as pm
from . import attention, conv, readout, relational

# this package's linen layers -> their PyG loaders (the options the weights do not store come from the layer)
LOADERS = {
    conv.GCNConv: conv.from_pyg_gcn, conv.GraphConv: conv.from_pyg_gcn, conv.SAGEConv: conv.from_pyg_sage,
    conv.GINConv: conv.from_pyg_gin, conv.GINEConv: conv.from_pyg_gine, conv.EdgeConv: conv.from_pyg_edgeconv,
    attention.GATConv: attention.from_pyg_gat, attention.GATv2Conv: attention.from_pyg_gatv2,
    attention.TransformerConv: attention.from_pyg_transformer,
    readout.AttentionalAggregation: readout.from_pyg_attentional_aggregation,
    readout.GraphNorm: readout.from_pyg_graphnorm, relational.RGCNConv: relational.from_pyg_rgcn,
}
# torch module -> (the linen module, {(collection, our variable): (PyG key, transposed)})
NATIVE = {
    nn.Dense: {("params", "kernel"): ("weight", True), ("params", "bias"): ("bias", False)},
    nn.LayerNorm: {("params", "scale"): ("weight", False), ("params", "bias"): ("bias", False)},
    nn.BatchNorm: {("params", "scale"): ("weight", False), ("params", "bias"): ("bias", False),
                   ("batch_stats", "mean"): ("running_mean", False), ("batch_stats", "var"): ("running_var", False)},
    nn.Embed: {("params", "embedding"): ("weight", False)},
}


def _modules(model: nn.Module, args, kwargs) -> tuple[dict[tuple, nn.Module], dict]:
    """Every submodule ``model.init`` calls, by path, and the shapes of the variables it creates."""
    seen: dict[tuple, nn.Module] = {}

    def record(next_fun, a, k, context):
        seen.setdefault(tuple(context.module.path), context.module)
        return next_fun(*a, **k)

    with nn.intercept_methods(record):
        shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), *args, **kwargs))
    return seen, shapes


def _prefix(path: tuple, state_dict, rename) -> str:
    """The PyG prefix of a linen path: as it is, or with linen's list names (``convs_0``) as PyG's (``convs.0``)
    when only that form has keys."""
    exact = pm.pyg_prefix(path, rename)
    listed = pm.pyg_prefix(tuple(re.sub(r"_(\d+)$", r".\1", p) for p in path), rename)
    return exact if listed == exact or any(k.startswith(exact + ".") for k in state_dict) else listed


def load_pyg_model(model: nn.Module, state_dict, *args, rename: dict[str, str] | None = None, **kwargs) -> dict:
    """The variables (``{"params": ...}``, with ``"batch_stats"`` for ``nn.BatchNorm``) of ``model`` from a whole PyG
    model's ``state_dict()``; ``args`` and ``kwargs`` are example inputs of ``model.init`` (only their shapes are
    used: nothing is computed).

    ``model`` mirrors the PyG model: its submodules have the PyG module's names, so the layer ``convs_0`` (a list
    ``convs`` assigned in ``setup``) or ``convs.0`` reads the keys ``convs.0.*`` (``rename={"ours": "theirs"}``
    maps prefixes where the names differ). This package's layers read their keys with their ``from_pyg_*``
    loaders (with the options of the model's layer, such as ``heads`` or ``train_eps``, that the weights do not
    store); ``nn.Dense``, ``nn.LayerNorm``, ``nn.BatchNorm`` (running statistics included) and ``nn.Embed`` read
    torch's ``Linear``, ``LayerNorm``, ``BatchNorm1d`` and ``Embedding``. Every key must belong to a layer and
    every variable of the model must be read, or a ``ValueError`` lists what did not match.

    >>> import flax.linen as nn, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> from jaxgraphops.nn.flax import GCNConv
    >>> class Net(nn.Module):
    ...     def setup(self):
    ...         self.convs = [GCNConv(8), GCNConv(8)]
    ...         self.lin = nn.Dense(2)
    ...     def __call__(self, g, x):
    ...         return self.lin(self.convs[1](g, self.convs[0](g, x)))
    >>> sd = {"convs.0.lin.weight": np.ones((8, 4)), "convs.0.bias": np.zeros(8), "convs.1.lin.weight": np.ones((8, 8)),
    ...       "convs.1.bias": np.zeros(8), "lin.weight": np.ones((2, 8)), "lin.bias": np.zeros(2)}
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 0]))
    >>> variables = load_pyg_model(Net(), sd, g, jnp.ones((3, 4)))
    >>> variables["params"]["lin"]["kernel"].shape, float(variables["params"]["convs_0"]["kernel"].sum())
    ((8, 2), 32.0)
    """
    fn = "jaxgraphops.nn.flax.load_pyg_model"
    if not isinstance(model, nn.Module):
        raise TypeError(f"{fn}: model must be a flax.linen Module; got {type(model).__name__}")
    pm.check_mapping(fn, state_dict)
    seen, shapes = _modules(model, args, kwargs)
    units = pm.outermost(seen, lambda m: type(m) in LOADERS or type(m) in NATIVE)
    names = {p: "/".join(p) or type(model).__name__ for p in units}
    flat = {(c, *k): v for c, tree in shapes.items() for k, v in pm.flatten(tree).items()}
    outside = ["/".join(k) for k in flat if not any(k[1:1 + len(p)] == p for p in units)]
    if outside:
        raise ValueError(f"{fn}: variables outside any layer the loader reads (this package's layers with PyG "
                         f"loaders, {sorted(t.__name__ for t in NATIVE)}): {outside}")
    parts = pm.split_state_dict(fn, state_dict, {names[p]: _prefix(p, state_dict, rename) for p in units})
    values = {}
    for path, layer in units.items():
        where, sub = f"{names[path]} ({type(layer).__name__})", parts[names[path]]
        ours = {k: v.shape for k, v in flat.items() if k[1:1 + len(path)] == path}
        if type(layer) in NATIVE:
            keys = {(c, v): spec for (c, v), spec in NATIVE[type(layer)].items() if (c, *path, v) in ours}
            pm.check_keys(fn, where, sub, {theirs for theirs, _ in keys.values()})
            got = {(c, *path, v): pm.array(fn, where, sub, theirs, ours[(c, *path, v)], transpose)
                   for (c, v), (theirs, transpose) in keys.items()}
        else:
            loaded = LOADERS[type(layer)](sub, **pm.loader_options(LOADERS[type(layer)], layer))
            got = {(c, *path, *k): np.asarray(a) for c, tree in loaded.items()
                   for k, a in pm.flatten(tree).items()}
        pm.check_same_arrays(fn, where, {"/".join(k): tuple(s) for k, s in ours.items()},
                             {"/".join(k): tuple(a.shape) for k, a in got.items()})
        values.update(got)
    out = {}
    for (c, *k), a in values.items():
        out.setdefault(c, {})[tuple(k)] = jnp.asarray(a, flat[(c, *k)].dtype)
    return {c: pm.unflatten(tree) for c, tree in out.items()}
