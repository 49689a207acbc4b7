"""Binders of the kernel primitives: fill absent operands, keep layouts within the kernels' reach.

``ga`` holds the eight index arrays of a Graph (:class:`~._primitive_utils.GraphArrays`).
"""

from __future__ import annotations

import jax.numpy as jnp

from .._layout import strided_view
from ._primitive_utils import GraphArrays
from ._primitives import sddmm_p, softmax_p, spmm_p


def graph_arrays(g) -> GraphArrays:
    """The index arrays of a Graph in the order every primitive takes them."""
    return GraphArrays(g.src, g.dst, g.csc_offsets, g.csc_src, g.csc_eid, g.csr_offsets, g.csr_dst, g.csr_eid)


def _fit(out_shape, a, b, keep_last=False):
    """Broadcasts operands explicitly when their pattern needs more than three strided axes."""
    k = len(out_shape)
    shape = lambda x: tuple(x.shape[1:]) if x is not None else (1,) * k  # noqa: E731
    for attempt in range(3):
        if strided_view(out_shape, [shape(a), shape(b)], keep_last) is not None:
            return a, b
        if attempt == 0 and a is not None:
            a = jnp.broadcast_to(a, (a.shape[0],) + tuple(out_shape))
        elif b is not None:
            b = jnp.broadcast_to(b, (b.shape[0],) + tuple(out_shape))
    return a, b


def _filled(x, dtype):
    return x if x is not None else jnp.zeros((0,), dtype)


def spmm(ga, node, edge, *, op, out_shape, reduce="sum", reverse=False, mask_arg=None):
    """Returns ``(out, arg)`` of the neighbourhood reduce (see ``spmm_p``).

    ``node [n_nbr, *fn]`` and ``edge [E, *fe]`` (either may be None per ``op``) have feature
    shapes of the rank of ``out_shape`` that broadcast to it.
    """
    node, edge = _fit(out_shape, node, edge)
    dtype = (node if node is not None else edge).dtype
    return spmm_p.bind(*ga, _filled(node, dtype), _filled(edge, dtype), _filled(mask_arg, ga[0].dtype),
                       op=op, reduce=reduce, reverse=bool(reverse), masked=mask_arg is not None,
                       out_shape=tuple(out_shape))


def sddmm(ga, lhs, rhs, *, op, lhs_target, rhs_target, out_shape, dot=False, mask_arg=None):
    """Returns ``out [E, *out_shape]`` (``[E, *out_shape[:-1]]`` with ``dot``); see ``sddmm_p``."""
    lhs, rhs = _fit(out_shape, lhs, rhs, keep_last=dot)
    dtype = (lhs if lhs is not None else rhs).dtype
    return sddmm_p.bind(*ga, _filled(lhs, dtype), _filled(rhs, dtype), _filled(mask_arg, ga[0].dtype),
                        op=op, lhs_target=lhs_target, rhs_target=rhs_target, dot=bool(dot),
                        masked=mask_arg is not None, out_shape=tuple(out_shape))


def softmax(ga, logits):
    """Softmax of ``logits [E, ...]`` over the in-edges of each destination."""
    return softmax_p.bind(*ga, logits)
