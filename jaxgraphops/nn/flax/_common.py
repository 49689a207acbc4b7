"""What the linen layers share: their base class (options checked at construction), dtype promotion and
PyG MLPs as ``nn.Sequential`` params."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from .._common import OPTIONS, check_options

Initializer = Callable[..., Any]


class Layer(nn.Module):
    """A linen layer of this package: its fields after the sizes are keyword-only (each subclass declares
    ``_: dataclasses.KW_ONLY`` after them), and the fields :func:`~jaxgraphops.nn._common.check_options` knows
    are checked when the module is constructed (``NULLABLE`` names those that may also be None)."""

    NULLABLE = ()

    def __post_init__(self):
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in OPTIONS}
        check_options(type(self).__name__, **{k: v for k, v in options.items()
                                              if not (v is None and k in self.NULLABLE)})
        super().__post_init__()


def promote(dtype, *trees):
    """``trees`` with every array leaf cast to one dtype (``dtype``, or the promoted one), as flax's layers do."""
    leaves, treedef = jax.tree_util.tree_flatten(trees)
    return jax.tree_util.tree_unflatten(treedef, nn.dtypes.promote_dtype(*leaves, dtype=dtype))


def dense_stack(layers: dict) -> dict:
    """A linear stack (``linear_stack_from_pyg``) as the params of ``nn.Sequential`` (``layers_<i>``)
    or, for one ``Linear``, of ``nn.Dense``."""
    return layers[None] if None in layers else {f"layers_{i}": p for i, p in layers.items()}
