"""What the NNX layers share: params created eagerly, dtype promotion, moving linen variables in
(:func:`load_variables`), building a layer around given weights, PyG MLPs as ``nnx.Sequential``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, traverse_util
from flax.nnx.nn.dtypes import promote_dtype

Initializer = Callable[..., Any]
lecun = nnx.initializers.lecun_normal()
glorot = nnx.initializers.glorot_uniform()
zeros = nnx.initializers.zeros_init()


def param(init: Initializer, rngs: nnx.Rngs, shape: tuple[int, ...], dtype) -> nnx.Param:
    return nnx.Param(init(rngs.params(), shape, dtype))


def value(p):
    """A param's array, or None."""
    return None if p is None else p[...]


def promote(dtype, *trees):
    """``trees`` with every array leaf cast to one dtype (``dtype``, or the promoted one), as ``nnx.Linear`` does."""
    leaves, treedef = jax.tree_util.tree_flatten(trees)
    return jax.tree_util.tree_unflatten(treedef, promote_dtype(tuple(leaves), dtype=dtype))


def _as_mapping(tree):
    """``tree`` with its lists as dicts keyed by position (as NNX states hold ``nnx.List`` items)."""
    if isinstance(tree, (list, tuple)):
        return {i: _as_mapping(v) for i, v in enumerate(tree)}
    return {k: _as_mapping(v) for k, v in tree.items()} if isinstance(tree, dict) else tree


def load_variables(layer: nnx.Module, variables: dict) -> nnx.Module:
    """Sets ``layer``'s params in place from a linen layer's variables (``{"params": ...}``) and returns it.

    The NNX and linen layers of this package name their params alike, so this moves weights, such as those of a
    checkpoint or of a ``from_pyg_*`` loader, between the two; an MLP given as ``nnx.Sequential`` holds its layers under
    ``layers/<i>`` (linen's ``nn.Sequential``: ``layers_<i>``), and lists of params stand for ``nnx.List``
    items. Names and shapes must match exactly; the arrays are cast to the params' dtypes.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> from jaxgraphops.nn import flax as linen_layers
    >>> g, x = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1])), jnp.ones((3, 4))
    >>> variables = linen_layers.SAGEConv(8).init(jax.random.key(0), g, x)
    >>> from jaxgraphops.nn.nnx import SAGEConv
    >>> layer = load_variables(SAGEConv(4, 8, rngs=nnx.Rngs(1)), variables)
    >>> bool(jnp.allclose(layer(g, x), linen_layers.SAGEConv(8).apply(variables, g, x)))
    True
    """
    name = f"load_variables({type(layer).__name__})"
    if not isinstance(variables, dict) or set(variables) != {"params"}:
        raise ValueError(f"{name}: variables must be a dict {{'params': ...}}; got "
                         f"{sorted(variables) if isinstance(variables, dict) else type(variables).__name__}")
    params = _as_mapping(variables["params"])
    state = nnx.state(layer, nnx.Param)
    have = {tuple(str(k) for k in path): tuple(var.shape) for path, var in nnx.to_flat_state(state)}
    given = {tuple(str(k) for k in path): tuple(np.shape(v)) for path, v in traverse_util.flatten_dict(params).items()}
    if have != given:
        def fmt(d):
            return {"/".join(k): v for k, v in sorted(d.items())}
        raise ValueError(f"{name}: the params must have the layer's names and shapes {fmt(have)}; got {fmt(given)}")
    nnx.replace_by_pure_dict(state, params,
                             replace_fn=lambda var, v: var.replace(jnp.asarray(v, var.dtype)))
    nnx.update(layer, state)
    return layer


def with_weights(cls, params: dict, *args, **kwargs):
    """``cls(*args, **kwargs)`` holding ``params`` (built abstractly: no initialisation is computed)."""
    layer = nnx.eval_shape(lambda: cls(*args, **kwargs, rngs=nnx.Rngs(0)))
    return load_variables(layer, {"params": params})


def sequential(layers: dict, activation: Callable, param_dtype) -> nnx.Module:
    """The ``nnx.Sequential`` of a linear stack (``linear_stack_from_pyg``): ``nnx.Linear`` layers at its
    indices, ``activation`` at the other positions; one ``nnx.Linear`` for index None."""
    def linear(p):
        return with_weights(nnx.Linear, p, *p["kernel"].shape, use_bias="bias" in p, param_dtype=param_dtype)

    if None in layers:
        return linear(layers[None])
    return nnx.Sequential(*[linear(layers[i]) if i in layers else activation for i in range(max(layers) + 1)])
