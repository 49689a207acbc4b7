"""The three kernel primitives behind every message-passing op, and their lowerings.

``spmm_p``   neighbourhood reduce: ``out[r] = reduce_k op(node[nbr_k], edge[eid_k])`` over the
             in-edges of each destination (``reverse=False``, CSC) or the out-edges of each
             source (``reverse=True``, CSR); max/min also return the winning edge id.
``sddmm_p``  edge-wise op: ``out[e] = op(lhs[t_l(e)], rhs[t_r(e)])``, optionally a dot product
             over the last feature axis; targets are ``src``, ``dst`` or ``edge``.
``softmax_p`` softmax of edge logits over the in-edges of each destination.

Every primitive takes the eight index arrays of a :class:`~jaxgraphops.Graph` first
(``graph_arrays``), so that derivative rules can switch between the CSC and CSR views.
``masked=True`` (sums only) keeps element ``f`` of edge ``e`` only where
``mask_arg[dst[e], f] == e``: the derivative of a max/min, which flows to the winning edge.

On CPU, and on CUDA when the CUDA handlers were built, the primitives lower to the FFI kernels;
elsewhere they lower to the pure-JAX implementations below, with identical semantics.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import xla

from .._layout import strided_view
from ._primitive_utils import KernelPrimitive, register_lowerings

OPS = ("copy_lhs", "copy_rhs", "add", "mul")  # copy_lhs = node / lhs only, copy_rhs = edge / rhs only
_OP_CODE = {"copy_lhs": 0, "copy_rhs": 1, "add": 2, "mul": 3}
_REDUCE_CODE = {"sum": 0, "mean": 1, "max": 2, "min": 3}
_WALK_TARGET_CODE = {"row": 0, "nbr": 1, "edge": 2}

spmm_p = KernelPrimitive("jgo_spmm")
spmm_p.multiple_results = True
sddmm_p = KernelPrimitive("jgo_sddmm")
softmax_p = KernelPrimitive("jgo_edge_softmax")

for _p in (spmm_p, sddmm_p, softmax_p):
    _p.def_impl(partial(xla.apply_primitive, _p))


def uses_lhs(op: str) -> bool:
    return op != "copy_rhs"


def uses_rhs(op: str) -> bool:
    return op != "copy_lhs"


def has_arg(reduce: str) -> bool:
    return reduce in ("max", "min")


def n_src_of(ga) -> int:
    return ga[5].shape[0] - 1


def n_dst_of(ga) -> int:
    return ga[2].shape[0] - 1


def rows_of(target: str, ga) -> int:
    return {"src": n_src_of(ga), "dst": n_dst_of(ga), "edge": ga[0].shape[0]}[target]


# ---------------------------------------------------------------------------------------
# Abstract evaluation


# Output avals are derived from an operand's aval with ``update`` so that metadata such as the
# varying manual axes of ``shard_map`` carries over.


def _spmm_abstract(*args, op, reduce, reverse, masked, out_shape):
    ga, node, edge = args[:8], args[8], args[9]
    rows = n_src_of(ga) if reverse else n_dst_of(ga)
    base = node if uses_lhs(op) else edge
    out = base.update(shape=(rows,) + out_shape, weak_type=False)
    arg_shape = (rows,) + out_shape if has_arg(reduce) else (0,)
    return out, base.update(shape=arg_shape, dtype=ga[0].dtype, weak_type=False)


def _sddmm_abstract(*args, op, lhs_target, rhs_target, dot, masked, out_shape):
    ga, lhs, rhs = args[:8], args[8], args[9]
    shape = (ga[0].shape[0],) + (out_shape[:-1] if dot else out_shape)
    return (lhs if uses_lhs(op) else rhs).update(shape=shape, weak_type=False)


def _softmax_abstract(*args):
    return args[8].update(weak_type=False)


spmm_p.def_abstract_eval(_spmm_abstract)
sddmm_p.def_abstract_eval(_sddmm_abstract)
softmax_p.def_abstract_eval(_softmax_abstract)


# ---------------------------------------------------------------------------------------
# FFI lowerings


def _feature_shape(x, used: bool, rank: int) -> tuple:
    return tuple(x.shape[1:]) if used else (1,) * rank


def _spmm_ffi(*args, op, reduce, reverse, masked, out_shape):
    ga, node, edge, mask_arg = args[:8], args[8], args[9], args[10]
    offsets, nbr, eid = (ga[5], ga[6], ga[7]) if reverse else (ga[2], ga[3], ga[4])
    k = len(out_shape)
    dims, (ns, es) = strided_view(
        out_shape, [_feature_shape(node, uses_lhs(op), k), _feature_shape(edge, uses_rhs(op), k)])
    out_aval, arg_aval = _spmm_abstract(*args, op=op, reduce=reduce, reverse=reverse, masked=masked,
                                        out_shape=out_shape)
    call = jax.ffi.ffi_call("jgo_spmm", (jax.ShapeDtypeStruct(out_aval.shape, out_aval.dtype),
                                         jax.ShapeDtypeStruct(arg_aval.shape, arg_aval.dtype)))
    mask = 0 if not masked else (2 if reverse else 1)
    return call(offsets, nbr, eid, node, edge, mask_arg, op=np.int64(_OP_CODE[op]),
                reduce=np.int64(_REDUCE_CODE[reduce]), mask=np.int64(mask), dims=np.array(dims, np.int64),
                node_strides=np.array(ns, np.int64), edge_strides=np.array(es, np.int64))


def _sddmm_ffi(*args, op, lhs_target, rhs_target, dot, masked, out_shape):
    ga, lhs, rhs, mask_arg = args[:8], args[8], args[9], args[10]
    k = len(out_shape)
    dims, (ls, rs) = strided_view(
        out_shape, [_feature_shape(lhs, uses_lhs(op), k), _feature_shape(rhs, uses_rhs(op), k)], keep_last=dot)
    aval = _sddmm_abstract(*args, op=op, lhs_target=lhs_target, rhs_target=rhs_target, dot=dot, masked=masked,
                           out_shape=out_shape)
    # Walk the view whose rows an operand reads, so those rows are read once per neighbourhood.
    by_src = "dst" not in (lhs_target, rhs_target) and "src" in (lhs_target, rhs_target)
    offsets, nbr, eid = (ga[5], ga[6], ga[7]) if by_src else (ga[2], ga[3], ga[4])
    walk = {"src": "row" if by_src else "nbr", "dst": "nbr" if by_src else "row", "edge": "edge"}
    mask = 0 if not masked else _WALK_TARGET_CODE[walk["dst"]] + 1  # the mask is indexed by destination
    call = jax.ffi.ffi_call("jgo_sddmm", jax.ShapeDtypeStruct(aval.shape, aval.dtype))
    return call(offsets, nbr, eid, lhs, rhs, mask_arg, op=np.int64(_OP_CODE[op]),
                lhs_target=np.int64(_WALK_TARGET_CODE[walk[lhs_target]]),
                rhs_target=np.int64(_WALK_TARGET_CODE[walk[rhs_target]]), dot=bool(dot), mask=np.int64(mask),
                dims=np.array(dims, np.int64), lhs_strides=np.array(ls, np.int64), rhs_strides=np.array(rs, np.int64))


def _softmax_ffi(*args):
    ga, logits = args[:8], args[8]
    call = jax.ffi.ffi_call("jgo_edge_softmax", jax.ShapeDtypeStruct(logits.shape, logits.dtype))
    flat = logits.reshape(logits.shape[0], int(np.prod(logits.shape[1:])))
    return call(ga[2], ga[4], flat).reshape(logits.shape)


# ---------------------------------------------------------------------------------------
# Pure-JAX implementations (lowering where no handler exists; same semantics as the kernels)


def _gather_rows(x, target: str, ga):
    return x if target == "edge" else x[ga[0] if target == "src" else ga[1]]


def _mask(ga, mask_arg, shape):
    eid = jnp.arange(ga[0].shape[0], dtype=ga[0].dtype).reshape((-1,) + (1,) * (len(shape) - 1))
    return mask_arg[ga[1]] == eid


def _combine(op, a, b):
    return {"copy_lhs": lambda: a, "copy_rhs": lambda: b, "add": lambda: a + b, "mul": lambda: a * b}[op]()


def _edge_messages(ga, lhs, rhs, op, lhs_target, rhs_target, out_shape):
    n_edges = ga[0].shape[0]
    full = (n_edges,) + out_shape
    a = jnp.broadcast_to(_gather_rows(lhs, lhs_target, ga), full) if uses_lhs(op) else None
    b = jnp.broadcast_to(_gather_rows(rhs, rhs_target, ga), full) if uses_rhs(op) else None
    return _combine(op, a, b)


def spmm_xla(*args, op, reduce, reverse, masked, out_shape):
    ga, node, edge, mask_arg = args[:8], args[8], args[9], args[10]
    nbr_target, row_ids = ("dst", ga[0]) if reverse else ("src", ga[1])
    rows = n_src_of(ga) if reverse else n_dst_of(ga)
    msg = _edge_messages(ga, node, edge, op, nbr_target, "edge", out_shape)
    if masked:
        msg = jnp.where(_mask(ga, mask_arg, msg.shape), msg, 0)
    seg = partial(jax.ops.segment_sum, segment_ids=row_ids, num_segments=rows)
    if reduce in ("sum", "mean"):
        out = seg(msg)
        if reduce == "mean":
            deg = jax.ops.segment_sum(jnp.ones_like(row_ids, msg.dtype), row_ids, num_segments=rows)
            out = out / jnp.maximum(deg, 1).reshape((-1,) + (1,) * len(out_shape))
        return out, jnp.zeros((0,), ga[0].dtype)
    best_fn = jax.ops.segment_max if reduce == "max" else jax.ops.segment_min
    best = best_fn(msg, row_ids, num_segments=rows)
    nan = jnp.isnan(msg)
    row_nan = jax.ops.segment_max(nan, row_ids, num_segments=rows)  # NaN is the extreme of its row (np.max)
    n_edges = ga[0].shape[0]
    eid = jnp.broadcast_to(jnp.arange(n_edges, dtype=ga[0].dtype).reshape((-1,) + (1,) * len(out_shape)), msg.shape)
    winner = jnp.where(jnp.where(row_nan[row_ids], nan, msg == best[row_ids]), eid, n_edges)
    arg = jax.ops.segment_min(winner, row_ids, num_segments=rows)
    empty = arg >= n_edges
    out = jnp.where(empty, 0, jnp.where(row_nan, jnp.nan, best))
    return out.astype(msg.dtype), jnp.where(empty, -1, arg).astype(ga[0].dtype)


def sddmm_xla(*args, op, lhs_target, rhs_target, dot, masked, out_shape):
    ga, lhs, rhs, mask_arg = args[:8], args[8], args[9], args[10]
    msg = _edge_messages(ga, lhs, rhs, op, lhs_target, rhs_target, out_shape)
    if masked:
        msg = jnp.where(_mask(ga, mask_arg, msg.shape), msg, 0)
    return msg.sum(-1) if dot else msg


def softmax_xla(*args):
    ga, logits = args[:8], args[8]
    dst, n = ga[1], n_dst_of(ga)
    m = jax.ops.segment_max(logits, dst, num_segments=n)
    z = jnp.exp(logits - jnp.where(jnp.isneginf(m), 0, m)[dst])  # a row of only -inf logits gets 0
    total = jax.ops.segment_sum(z, dst, num_segments=n)[dst]
    return z / jnp.where(total == 0, 1, total)  # a NaN total (a NaN or +inf logit) stays NaN, as in NumPy


for _prim, _ref, _ffi, _multi in ((spmm_p, spmm_xla, _spmm_ffi, True), (sddmm_p, sddmm_xla, _sddmm_ffi, False),
                                  (softmax_p, softmax_xla, _softmax_ffi, False)):
    register_lowerings(_prim, _ref, _ffi, multiple_results=_multi)
