"""What the linen layers share: their base class (options checked at construction), dtype promotion and
PyG MLPs as ``nn.Sequential`` params."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from .._common import check_layer

Initializer = Callable[..., Any]


class Layer(nn.Module):
    """A linen layer of this package: its fields after the sizes are keyword-only (each subclass declares
    ``_: dataclasses.KW_ONLY`` after them), and the fields that are options are checked when the module is
    constructed (:func:`~jaxgraphops.nn._common.check_layer`; ``NULLABLE`` names those that may also be None)."""

    NULLABLE = ()

    def __post_init__(self):
        check_layer(self, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, nullable=self.NULLABLE)
        super().__post_init__()


class ParamLayer(Layer):
    """A linen layer with parameters of its own: ``dtype`` (the computation's: inputs and parameters are cast to
    it; None, their promoted dtype) and ``param_dtype`` (the parameters'), as flax's own layers take them."""

    _: dataclasses.KW_ONLY
    dtype: Any = None
    param_dtype: Any = jnp.float32


def promote(dtype, *trees):
    """``trees`` with every array leaf cast to one dtype (``dtype``, or the promoted one), as flax's layers do."""
    leaves, treedef = jax.tree_util.tree_flatten(trees)
    return jax.tree_util.tree_unflatten(treedef, nn.dtypes.promote_dtype(*leaves, dtype=dtype))


def dense_stack(layers: dict) -> dict:
    """A linear stack (``linear_stack_from_pyg``) as the params of ``nn.Sequential`` (``layers_<i>``)
    or, for one ``Linear``, of ``nn.Dense``."""
    return layers[None] if None in layers else {f"layers_{i}": p for i, p in layers.items()}
