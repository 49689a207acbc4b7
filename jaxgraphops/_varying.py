"""Operands that agree on the manual mesh axes they vary over inside ``shard_map``.

JAX types a value inside ``shard_map`` with the set of manual axes it varies over. An op whose
result depends on several operands must give its result the union of their sets and see every
operand cast to it (``lax.pcast(..., to="varying")``), as JAX's own binary ops do: the transpose
of that cast sums a replicated operand's cotangent over the devices, which is its gradient.
"""

from __future__ import annotations

import jax


def varying_axes(x) -> frozenset:
    """The manual mesh axes ``x`` varies over (empty outside ``shard_map``)."""
    mat = getattr(jax.typeof(x), "mat", None)
    return mat.varying if mat is not None else frozenset()


def to_common_varying(*args) -> list:
    """``args`` cast to the union of the manual axes they vary over (unchanged outside ``shard_map``)."""
    axes = [varying_axes(x) for x in args]
    union = frozenset().union(*axes)
    if not union:
        return list(args)
    return [x if a == union else jax.lax.pcast(x, tuple(sorted(union - a, key=str)), to="varying")
            for x, a in zip(args, axes)]
