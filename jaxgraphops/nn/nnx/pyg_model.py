"""A whole PyG model's weights into an NNX model built with this package's layers: :func:`load_pyg_model`."""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from .. import _pyg_model as pm
from ._common import load_variables

# torch module -> (the NNX module, {our variable: (PyG key, transposed)})
NATIVE = {
    nnx.Linear: {"kernel": ("weight", True), "bias": ("bias", False)},
    nnx.LayerNorm: {"scale": ("weight", False), "bias": ("bias", False)},
    nnx.BatchNorm: {"scale": ("weight", False), "bias": ("bias", False), "mean": ("running_mean", False),
                    "var": ("running_var", False)},
    nnx.Embed: {"embedding": ("weight", False)},
}


def _is_layer(module) -> bool:
    return callable(getattr(type(module), "from_pyg", None)) and type(module).__module__.startswith(__package__)


def _units(model) -> dict[tuple, nnx.Module]:
    """The model's layers the loader reads (this package's and ``NATIVE``'s), outermost first, by path."""
    modules = {tuple(p): m for p, m in nnx.iter_graph(model) if isinstance(m, nnx.Module)}
    return pm.outermost(modules, lambda m: _is_layer(m) or type(m) in NATIVE)


def _flat_shapes(module) -> dict[str, tuple]:
    return {"/".join(str(k) for k in p): tuple(v.shape) for p, v in nnx.to_flat_state(nnx.state(module, nnx.Param))}


def load_pyg_model(model: nnx.Module, state_dict, *, rename: dict[str, str] | None = None) -> nnx.Module:
    """Sets every parameter of ``model`` from a whole PyG model's ``state_dict()`` and returns ``model``.

    ``model`` mirrors the PyG model: its attributes have the PyG module's names (an ``nnx.List`` for a
    ``ModuleList``), so the layer at ``model.convs[0]`` reads the keys ``convs.0.*`` (``rename={"ours":
    "theirs"}`` maps prefixes where the names differ). This package's layers read their keys with their own
    ``from_pyg`` (built with the same options as the PyG layer: those not stored in the weights, such as
    ``heads`` or ``concat``, come from the model's layer); ``nnx.Linear``, ``nnx.LayerNorm``, ``nnx.BatchNorm``
    (running statistics included) and ``nnx.Embed`` read torch's ``Linear``, ``LayerNorm``, ``BatchNorm1d`` and
    ``Embedding``. Every key must belong to a layer and every parameter must be read, or a ``ValueError`` lists
    what did not match; nothing is changed then.

    >>> import jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> from flax import nnx
    >>> from jaxgraphops.nn.nnx import GCNConv
    >>> class Net(nnx.Module):
    ...     def __init__(self, rngs):
    ...         self.convs = nnx.List([GCNConv(4, 8, rngs=rngs), GCNConv(8, 8, rngs=rngs)])
    ...         self.lin = nnx.Linear(8, 2, rngs=rngs)
    >>> sd = {"convs.0.lin.weight": np.ones((8, 4)), "convs.0.bias": np.zeros(8), "convs.1.lin.weight": np.ones((8, 8)),
    ...       "convs.1.bias": np.zeros(8), "lin.weight": np.ones((2, 8)), "lin.bias": np.zeros(2)}
    >>> net = load_pyg_model(Net(nnx.Rngs(0)), sd)
    >>> float(net.lin.kernel[...].sum()), net.convs[0].kernel.shape
    (16.0, (4, 8))
    """
    fn = "jaxgraphops.nn.nnx.load_pyg_model"
    if not isinstance(model, nnx.Module):
        raise TypeError(f"{fn}: model must be an nnx.Module; got {type(model).__name__}")
    pm.check_mapping(fn, state_dict)
    units = _units(model)
    names = {path: "/".join(str(p) for p in path) or type(model).__name__ for path in units}
    outside = [k for k in _flat_shapes(model) if () not in units
               and not any(k == n or k.startswith(n + "/") for n in names.values())]
    if outside:
        raise ValueError(f"{fn}: parameters outside any layer the loader reads (this package's layers with "
                         f"from_pyg, {sorted(t.__name__ for t in NATIVE)}): {outside}")
    parts = pm.split_state_dict(fn, state_dict, {names[p]: pm.pyg_prefix(p, rename) for p in units})
    updates = []  # (layer, its new params) for every unit, applied once all are read
    for path, layer in units.items():
        where, sub = f"{names[path]} ({type(layer).__name__})", parts[names[path]]
        if type(layer) in NATIVE:
            keys = {}
            for ours, (theirs, transpose) in NATIVE[type(layer)].items():
                var = getattr(layer, ours, None)
                if var is not None:
                    keys[theirs] = (ours, pm.array(fn, where, sub, theirs, var.shape, transpose))
            pm.check_keys(fn, where, sub, set(keys))
            updates.append((layer, dict(keys.values()), True))
        else:
            built = type(layer).from_pyg(sub, **pm.loader_options(type(layer).from_pyg, layer))
            pm.check_same_arrays(fn, where, _flat_shapes(layer), _flat_shapes(built))
            updates.append((layer, nnx.to_pure_dict(nnx.state(built, nnx.Param)), False))
    for layer, values, native in updates:
        if not native:
            load_variables(layer, {"params": values})
            continue
        for ours, a in values.items():
            var = getattr(layer, ours)
            var[...] = jnp.asarray(a, var[...].dtype)
    return model
