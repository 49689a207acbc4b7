"""What the equinox layers share: ``eqx.nn.Linear`` weights as ``[in, out]`` kernels, loading ``[in, out]``
arrays into fields, per-row modules vmapped over the rows, PyG MLPs as ``eqx.nn.Sequential``."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax


def kernel(lin: eqx.nn.Linear | None):
    """``lin``'s weight as an ``[in, out]`` kernel (None for None)."""
    return None if lin is None else lin.weight.T


def load(layer, fields: dict, w: dict):
    """``layer`` with the arrays ``w`` (``[in, out]`` kernels, transposed here) at ``fields``."""
    for name, value in w.items():
        layer = eqx.tree_at(fields[name], layer, value.T if name.endswith("kernel") else value)
    return layer


def rows(module):
    """``module`` (per row, e.g. ``eqx.nn.MLP``) applied to every row of a ``[rows, F]`` array."""
    return None if module is None else jax.vmap(module)


def sequential(layers: dict, activation: Callable):
    """An ``eqx.nn.Sequential`` of ``Linear`` layers at the indices of a linear stack
    (``linear_stack_from_pyg``) with ``activation`` at the other positions; one ``Linear`` for index None."""
    def linear(p):
        n_in, n_out = p["kernel"].shape
        lin = eqx.nn.Linear(n_in, n_out, use_bias="bias" in p, key=jax.random.key(0))
        lin = eqx.tree_at(lambda m: m.weight, lin, p["kernel"].T)
        return eqx.tree_at(lambda m: m.bias, lin, p["bias"]) if "bias" in p else lin

    if None in layers:
        return linear(layers[None])
    return eqx.nn.Sequential([linear(layers[i]) if i in layers else eqx.nn.Lambda(activation)
                              for i in range(max(layers) + 1)])
