"""The layers' math as pure functions, shared by the flax and equinox modules.

Kernels here are ``[in, out]`` (flax's layout); the equinox modules pass their ``[out, in]``
weights transposed. The ``*_from_pyg`` functions read PyG ``state_dict`` entries into that layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..graph import Graph
from ..ops.aggregation import agg_concat, agg_simple, agg_weighted
from ._graph_utils import add_self_loops

SAGE_AGGRS = ("mean", "max", "sum", "min")
GRAPH_CONV_NORMS = ("both", "right", "none")


def check_choice(layer: str, name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{layer}: {name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def split_sage_input(g: Graph, x):
    """``(x_src, x_dst)`` from SAGEConv's ``x``: an array, or a tuple for a bipartite graph."""
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ValueError(f"SAGEConv: x must be an array or a pair (x_src, x_dst); got a tuple of {len(x)}")
        return x
    if g.n_src != g.n_dst:
        raise ValueError(f"SAGEConv: x must be a pair (x_src, x_dst) for a bipartite graph "
                         f"(n_src={g.n_src}, n_dst={g.n_dst}); got one array")
    return x, x


def sage_conv(g: Graph, x_src, x_dst, neigh_kernel, root_kernel, bias, *, aggr: str, normalize: bool):
    """``aggr_{j->i} x_j @ neigh_kernel + x_i @ root_kernel + bias``, then optionally L2-normalised.

    ``root_kernel`` and ``bias`` may be None (no root term, no bias). The graph work is one
    ``agg_concat`` (or ``agg_simple`` without a root term), followed by one matmul.
    """
    if root_kernel is None:
        h, kernel = agg_simple(g, x_src, reduce=aggr), neigh_kernel
    else:
        h = agg_concat(g, x_src, x_dst=x_dst, reduce=aggr)
        kernel = jnp.concatenate([neigh_kernel, root_kernel], axis=0)
    out = h @ kernel
    if bias is not None:
        out = out + bias
    if normalize:  # PyG's F.normalize(out, p=2, dim=-1, eps=1e-12); the scale is constant below eps,
        # so a zero row has finite gradients
        out = out * jax.lax.rsqrt(jnp.maximum(jnp.sum(out * out, axis=-1, keepdims=True), 1e-24))
    return out


def gcn_edge_weights(g: Graph, dtype):
    """``1 / sqrt(out_degree(src) * in_degree(dst))`` per edge, ``[n_edges]`` (finite: both are >= 1)."""
    out_deg = g.out_degrees().astype(dtype)[g.src]
    in_deg = g.in_degrees().astype(dtype)[g.dst]
    return jax.lax.rsqrt(out_deg * in_deg)


def graph_conv(g: Graph, x, kernel, bias, *, norm: str, add_loops: bool):
    """``Â x @ kernel + bias`` with ``Â`` the adjacency (with self loops if ``add_loops``) normalised
    by ``norm``: ``both`` D_in^-1/2 A D_out^-1/2, ``right`` D_in^-1 A (mean), ``none`` A (sum).

    The matmul runs before the aggregation when it shrinks the features, as in DGL.
    """
    if add_loops:
        g = add_self_loops(g)
    transform_first = kernel.shape[0] > kernel.shape[1]
    if transform_first:
        x = x @ kernel
    if norm == "both":
        h = agg_weighted(g, x, gcn_edge_weights(g, jnp.result_type(x)), reduce="sum")
    else:
        h = agg_simple(g, x, reduce="mean" if norm == "right" else "sum")
    if not transform_first:
        h = h @ kernel
    return h if bias is None else h + bias


def _kernels_from_pyg(fn: str, state_dict, names: dict, required: str) -> dict:
    """The arrays of a PyG ``state_dict`` (numpy arrays or CPU tensors) renamed by ``names``, with
    torch's ``[out, in]`` weights transposed to ``[in, out]`` kernels; checks keys and shapes."""
    keys = set(state_dict)
    unexpected = sorted(keys - set(names))
    if required not in keys or unexpected:
        raise ValueError(f"{fn}: state_dict must have the key {required!r} and may have {sorted(names)}; "
                         f"got {sorted(keys)}")
    arrays = {k: jnp.asarray(np.asarray(state_dict[k])) for k in keys}
    ranks_ok = all(v.ndim == (2 if k.endswith("weight") else 1) for k, v in arrays.items())
    if not ranks_ok or len({v.shape[0] for v in arrays.values()}) != 1:
        raise ValueError(f"{fn}: state_dict must hold weights [out, in] and biases [out] with one out; "
                         f"got shapes { {k: tuple(v.shape) for k, v in arrays.items()} }")
    return {names[k]: (v.T if v.ndim == 2 else v) for k, v in arrays.items()}


def sage_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``SAGEConv`` weights as ``{neigh_kernel, root_kernel?, bias?}`` in ``[in, out]`` layout.

    ``lin_r.weight`` is absent for ``root_weight=False``, ``lin_l.bias`` for ``bias=False``;
    ``project=True`` (a ``lin`` entry) is not supported.
    """
    names = {"lin_l.weight": "neigh_kernel", "lin_r.weight": "root_kernel", "lin_l.bias": "bias"}
    return _kernels_from_pyg(fn, state_dict, names, "lin_l.weight")


def gcn_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``GCNConv`` weights as ``{kernel, bias?}`` in ``[in, out]`` layout."""
    return _kernels_from_pyg(fn, state_dict, {"lin.weight": "kernel", "bias": "bias"}, "lin.weight")
