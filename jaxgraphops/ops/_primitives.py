"""The three kernel primitives behind every message-passing op: lowerings, binders, rules.

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

The binders (:func:`spmm`, :func:`sddmm`, :func:`softmax`) fill absent operands and keep layouts
within the kernels' reach; every op binds through them. The JVP, transpose and batching rules
are registered here, next to the primitives, and close on them: the tangent of every primitive
is a sum of ``spmm``/``sddmm`` forms that are linear in one tangent each (a max/min becomes a
masked sum routed to the winning edge), and the transpose of such a form is again a form: a
neighbourhood reduce transposes into the reduce over the reversed graph (``reverse`` flips
CSC <-> CSR) or into an edge-wise product, and vice versa (DGL's reverse-graph/SDDMM identity).
Derivatives of any order therefore stay on the kernels.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, xla

from .._layout import strided_view, sum_to_shape
from ._primitive_utils import (N_GRAPH, GraphArrays, KernelPrimitive, map_over_graphs, register_lowerings, rows,
                               unread_rows_filled, zero_tangent)

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


def rows_of(target: str, ga) -> int:
    return {"src": ga.n_src, "dst": ga.n_dst, "edge": ga.n_edges}[target]


# ---------------------------------------------------------------------------------------
# Abstract evaluation


# Output avals are derived from an operand's aval with ``update`` so that metadata such as the
# varying manual axes of ``shard_map`` carries over.


def _spmm_abstract(*args, op, reduce, reverse, masked, out_shape, checked=False):
    ga, (node, edge) = GraphArrays(*args[:N_GRAPH]), args[N_GRAPH:N_GRAPH + 2]
    rows = ga.n_src if reverse else ga.n_dst
    base = node if uses_lhs(op) else edge
    out = base.update(shape=(rows,) + out_shape, weak_type=False)
    arg_shape = (rows,) + out_shape if has_arg(reduce) else (0,)
    return out, base.update(shape=arg_shape, dtype=ga.src.dtype, weak_type=False)


def _sddmm_abstract(*args, op, lhs_target, rhs_target, dot, masked, out_shape, checked=False):
    ga, (lhs, rhs) = GraphArrays(*args[:N_GRAPH]), args[N_GRAPH:N_GRAPH + 2]
    shape = (ga.n_edges,) + (out_shape[:-1] if dot else out_shape)
    return (lhs if uses_lhs(op) else rhs).update(shape=shape, weak_type=False)


def _softmax_abstract(*args, checked=False):
    return args[N_GRAPH].update(weak_type=False)


spmm_p.def_abstract_eval(_spmm_abstract)
sddmm_p.def_abstract_eval(_sddmm_abstract)
softmax_p.def_abstract_eval(_softmax_abstract)


# ---------------------------------------------------------------------------------------
# FFI lowerings


def _feature_shape(x, used: bool, rank: int) -> tuple:
    return tuple(x.shape[1:]) if used else (1,) * rank


def _spmm_ffi(*args, op, reduce, reverse, masked, out_shape, checked=False):
    ga, (node, edge, mask_arg) = GraphArrays(*args[:N_GRAPH]), args[N_GRAPH:]
    offsets, nbr, eid = ga.csr if reverse else ga.csc
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
                node_strides=np.array(ns, np.int64), edge_strides=np.array(es, np.int64), checked=bool(checked))


def _sddmm_ffi(*args, op, lhs_target, rhs_target, dot, masked, out_shape, checked=False):
    ga, (lhs, rhs, mask_arg) = GraphArrays(*args[:N_GRAPH]), args[N_GRAPH:]
    k = len(out_shape)
    dims, (ls, rs) = strided_view(
        out_shape, [_feature_shape(lhs, uses_lhs(op), k), _feature_shape(rhs, uses_rhs(op), k)], keep_last=dot)
    aval = _sddmm_abstract(*args, op=op, lhs_target=lhs_target, rhs_target=rhs_target, dot=dot, masked=masked,
                           out_shape=out_shape)
    # Walk the view whose rows an operand reads, so those rows are read once per neighbourhood.
    by_src = "dst" not in (lhs_target, rhs_target) and "src" in (lhs_target, rhs_target)
    offsets, nbr, eid = ga.csr if by_src else ga.csc
    walk = {"src": "row" if by_src else "nbr", "dst": "nbr" if by_src else "row", "edge": "edge"}
    mask = 0 if not masked else _WALK_TARGET_CODE[walk["dst"]] + 1  # the mask is indexed by destination
    call = jax.ffi.ffi_call("jgo_sddmm", jax.ShapeDtypeStruct(aval.shape, aval.dtype))
    return call(offsets, nbr, eid, lhs, rhs, mask_arg, op=np.int64(_OP_CODE[op]),
                lhs_target=np.int64(_WALK_TARGET_CODE[walk[lhs_target]]),
                rhs_target=np.int64(_WALK_TARGET_CODE[walk[rhs_target]]), dot=bool(dot), mask=np.int64(mask),
                dims=np.array(dims, np.int64), lhs_strides=np.array(ls, np.int64), rhs_strides=np.array(rs, np.int64),
                checked=bool(checked))


def _softmax_ffi(*args, checked=False):
    ga, logits = GraphArrays(*args[:N_GRAPH]), args[N_GRAPH]
    call = jax.ffi.ffi_call("jgo_edge_softmax", jax.ShapeDtypeStruct(logits.shape, logits.dtype))
    flat = logits.reshape(logits.shape[0], int(np.prod(logits.shape[1:])))
    return call(ga.csc_offsets, ga.csc_eid, flat, checked=bool(checked)).reshape(logits.shape)


# ---------------------------------------------------------------------------------------
# Pure-JAX implementations (lowering where no handler exists; same semantics as the kernels: padding
# edges dropped from every segment, 0 at every edge-valued result)


def _gather_rows(x, target: str, ga):
    return x if target == "edge" else rows(x, ga.src if target == "src" else ga.dst)


def _mask(ga, mask_arg, shape):
    eid = jnp.arange(ga.n_edges, dtype=ga.src.dtype).reshape((-1,) + (1,) * (len(shape) - 1))
    return rows(mask_arg, ga.dst) == eid


def _combine(op, a, b):
    return {"copy_lhs": lambda: a, "copy_rhs": lambda: b, "add": lambda: a + b, "mul": lambda: a * b}[op]()


def _edge_messages(ga, lhs, rhs, op, lhs_target, rhs_target, out_shape):
    n_edges = ga.n_edges
    full = (n_edges,) + out_shape
    a = jnp.broadcast_to(_gather_rows(lhs, lhs_target, ga), full) if uses_lhs(op) else None
    b = jnp.broadcast_to(_gather_rows(rhs, rhs_target, ga), full) if uses_rhs(op) else None
    return _combine(op, a, b)


def spmm_xla(*args, op, reduce, reverse, masked, out_shape, checked=False):
    ga, (node, edge, mask_arg) = GraphArrays(*args[:N_GRAPH]).padding_dropped(), args[N_GRAPH:]
    nbr_target, row_ids = ("dst", ga.src) if reverse else ("src", ga.dst)
    rows = ga.n_src if reverse else ga.n_dst
    msg = _edge_messages(ga, node, edge, op, nbr_target, "edge", out_shape)
    if masked:
        msg = jnp.where(_mask(ga, mask_arg, msg.shape), msg, 0)
    seg = partial(jax.ops.segment_sum, segment_ids=row_ids, num_segments=rows)
    if reduce in ("sum", "mean"):
        out = seg(msg)
        if reduce == "mean":
            deg = jax.ops.segment_sum(jnp.ones_like(row_ids, msg.dtype), row_ids, num_segments=rows)
            out = out / jnp.maximum(deg, 1).reshape((-1,) + (1,) * len(out_shape))
        return out, jnp.zeros((0,), ga.src.dtype)
    best_fn = jax.ops.segment_max if reduce == "max" else jax.ops.segment_min
    best = best_fn(msg, row_ids, num_segments=rows)
    nan = jnp.isnan(msg)
    row_nan = jax.ops.segment_max(nan, row_ids, num_segments=rows)  # NaN is the extreme of its row (np.max)
    n_edges = ga.n_edges
    eid = jnp.broadcast_to(jnp.arange(n_edges, dtype=ga.src.dtype).reshape((-1,) + (1,) * len(out_shape)), msg.shape)
    winner = jnp.where(jnp.where(row_nan[row_ids], nan, msg == best[row_ids]), eid, n_edges)
    arg = jax.ops.segment_min(winner, row_ids, num_segments=rows)
    empty = arg >= n_edges
    out = jnp.where(empty, 0, jnp.where(row_nan, jnp.nan, best))
    return out.astype(msg.dtype), jnp.where(empty, -1, arg).astype(ga.src.dtype)


def sddmm_xla(*args, op, lhs_target, rhs_target, dot, masked, out_shape, checked=False):
    ga, (lhs, rhs, mask_arg) = GraphArrays(*args[:N_GRAPH]).padding_dropped(), args[N_GRAPH:]
    msg = _edge_messages(ga, lhs, rhs, op, lhs_target, rhs_target, out_shape)
    if masked:
        msg = jnp.where(_mask(ga, mask_arg, msg.shape), msg, 0)
    return ga.at_real_edges(msg.sum(-1) if dot else msg)


def softmax_xla(*args, checked=False):
    ga, logits = GraphArrays(*args[:N_GRAPH]).padding_dropped(), args[N_GRAPH]
    dst, n = ga.dst, ga.n_dst
    m = jax.ops.segment_max(logits, dst, num_segments=n)
    z = jnp.exp(logits - rows(jnp.where(jnp.isneginf(m), 0, m), dst))  # a row of only -inf logits gets 0
    total = rows(jax.ops.segment_sum(z, dst, num_segments=n), dst)
    # a NaN total (a NaN or +inf logit) stays NaN, as in NumPy
    return ga.at_real_edges(z / jnp.where(total == 0, 1, total))


for _prim, _ref, _ffi, _multi in ((spmm_p, spmm_xla, _spmm_ffi, True), (sddmm_p, sddmm_xla, _sddmm_ffi, False),
                                  (softmax_p, softmax_xla, _softmax_ffi, False)):
    register_lowerings(_prim, _ref, _ffi, multiple_results=_multi)


# ---------------------------------------------------------------------------------------
# Binders


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
    return spmm_p.bind(*ga, _filled(node, dtype), _filled(edge, dtype), _filled(mask_arg, ga.src.dtype),
                       op=op, reduce=reduce, reverse=bool(reverse), masked=mask_arg is not None,
                       out_shape=tuple(out_shape), checked=ga.checked)


def sddmm(ga, lhs, rhs, *, op, lhs_target, rhs_target, out_shape, dot=False, mask_arg=None):
    """Returns ``out [E, *out_shape]`` (``[E, *out_shape[:-1]]`` with ``dot``); see ``sddmm_p``."""
    lhs, rhs = _fit(out_shape, lhs, rhs, keep_last=dot)
    dtype = (lhs if lhs is not None else rhs).dtype
    return sddmm_p.bind(*ga, _filled(lhs, dtype), _filled(rhs, dtype), _filled(mask_arg, ga.src.dtype),
                        op=op, lhs_target=lhs_target, rhs_target=rhs_target, dot=bool(dot),
                        masked=mask_arg is not None, out_shape=tuple(out_shape), checked=ga.checked)


def softmax(ga, logits):
    """Softmax of ``logits [E, ...]`` over the in-edges of each destination."""
    return softmax_p.bind(*ga, logits, checked=ga.checked)


# ---------------------------------------------------------------------------------------
# Differentiation and batching rules


def _value(t):
    return None if type(t) is ad.Zero else ad.instantiate_zeros(t)


def _linear_terms(op, lhs, rhs, d_lhs, d_rhs, form):
    """Tangent of ``op(lhs, rhs)`` pushed through a form that is linear in each operand."""
    terms = []
    if op == "mul":
        if d_lhs is not None:
            terms.append(form(d_lhs, rhs, "mul"))
        if d_rhs is not None:
            terms.append(form(lhs, d_rhs, "mul"))
    else:
        d_lhs = d_lhs if uses_lhs(op) else None
        d_rhs = d_rhs if uses_rhs(op) else None
        if d_lhs is not None and d_rhs is not None:
            terms.append(form(d_lhs, d_rhs, "add"))
        elif d_lhs is not None:
            terms.append(form(d_lhs, None, "copy_lhs"))
        elif d_rhs is not None:
            terms.append(form(None, d_rhs, "copy_rhs"))
    return terms


def _sum_terms(terms, like):
    if not terms:
        return zero_tangent(like)
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _inv_degree(ga, reverse, rank, dtype):
    offsets = ga.csr_offsets if reverse else ga.csc_offsets
    deg = jnp.diff(offsets).astype(dtype)
    return (1 / jnp.maximum(deg, 1)).reshape((-1,) + (1,) * rank)


# ---------------------------------------------------------------------------------------
# spmm


def _spmm_jvp(primals, tangents, *, op, reduce, reverse, masked, out_shape, checked=False):
    ga, (node, edge, mask_arg) = GraphArrays.of(primals, checked), primals[N_GRAPH:]
    params = dict(op=op, reduce=reduce, reverse=reverse, masked=masked, out_shape=out_shape, checked=checked)
    out, arg = spmm_p.bind(*primals, **params)
    if has_arg(reduce):  # the derivative of a max/min flows through the winning edge
        t_reduce, t_mask = "sum", arg
    else:
        t_reduce, t_mask = reduce, (mask_arg if masked else None)

    def form(n, e, o):
        return spmm(ga, n, e, op=o, reduce=t_reduce, reverse=reverse, mask_arg=t_mask, out_shape=out_shape)[0]

    terms = _linear_terms(op, node, edge, _value(tangents[8]), _value(tangents[9]), form)
    return (out, arg), (_sum_terms(terms, out), zero_tangent(arg))


def _edge_contract(ga, ct_e, other, other_target, target, mask_arg, out_shape, target_shape):
    """``sum_e ct_e[e] * other[other_target(e)]`` gathered into rows of ``target``.

    ``ct_e [E, *c]`` lives on edges; the result, reduced to ``target_shape``, is indexed by
    source nodes, destination nodes or edges. This is the transpose of every form.
    """
    if target == "edge":
        if other is None and mask_arg is None:  # the cotangent itself, 0 at the padding edges (they reach no output)
            return sum_to_shape(ga.at_real_edges(jnp.broadcast_to(ct_e, (ct_e.shape[0],) + tuple(out_shape))),
                                target_shape)
        return _edge_wise(ga, ct_e, "edge", other, other_target, mask_arg, out_shape, target_shape)
    reverse = target == "src"
    nbr_target = "dst" if reverse else "src"
    kw = dict(reduce="sum", reverse=reverse, mask_arg=mask_arg, out_shape=out_shape)
    if other is None:
        full = spmm(ga, None, ct_e, op="copy_rhs", **kw)[0]
    elif other_target == nbr_target:
        full = spmm(ga, other, ct_e, op="mul", **kw)[0]
    elif other_target == "edge":
        full = spmm(ga, None, ct_e * other, op="copy_rhs", **kw)[0]
    else:  # the other operand lives on the same node as the result; a row no edge reads gets an exact 0, never
        # 0 * NaN from what a padding row holds
        full = spmm(ga, None, ct_e, op="copy_rhs", **kw)[0] * unread_rows_filled(other, ga.rows_read(target))
    return sum_to_shape(full, target_shape)


def _node_contract(ga, ct_r, reverse, edge, mask_arg, out_shape, target_shape):
    """Transpose of a neighbourhood reduce in its node operand: reduce over the reversed view."""
    op = "mul" if edge is not None else "copy_lhs"
    full = spmm(ga, ct_r, edge, op=op, reduce="sum", reverse=not reverse, mask_arg=mask_arg, out_shape=out_shape)[0]
    return sum_to_shape(full, target_shape)


def _spmm_transpose(cts, *args, op, reduce, reverse, masked, out_shape, checked=False):
    ga, (node, edge, mask_arg) = GraphArrays.of(args, checked), args[N_GRAPH:]
    if reduce not in ("sum", "mean"):
        raise NotImplementedError(f"spmm with reduce={reduce!r} is not linear")
    ct = cts[0]
    result = [None] * len(args)
    if type(ct) is ad.Zero:
        for i, x in zip((8, 9), (node, edge)):
            if ad.is_undefined_primal(x):
                result[i] = ad.Zero(x.aval)
        return result
    if reduce == "mean":
        ct = ct * _inv_degree(ga, reverse, len(out_shape), ct.dtype)
    m = mask_arg if masked else None
    if ad.is_undefined_primal(node):
        e = edge if op == "mul" else None
        result[8] = _node_contract(ga, ct, reverse, e, m, out_shape, node.aval.shape)
    if ad.is_undefined_primal(edge):
        n = node if op == "mul" else None
        rows, nbr = ("src", "dst") if reverse else ("dst", "src")
        result[9] = _edge_wise(ga, ct, rows, n, nbr, m, out_shape, edge.aval.shape)  # ct[row(e)] * node[nbr(e)]
    return result


def _edge_wise(ga, a, a_target, b, b_target, mask_arg, out_shape, target_shape):
    """``a[a_target(e)] * b[b_target(e)]`` (b may be None) reduced to ``target_shape [E, ...]``."""
    op = "mul" if b is not None else "copy_lhs"
    dot = op == "mul" and len(out_shape) > 0 and target_shape[-1] == 1 and out_shape[-1] != 1
    full = sddmm(ga, a, b, op=op, lhs_target=a_target, rhs_target=b_target if b is not None else "edge",
                 out_shape=out_shape, dot=dot, mask_arg=mask_arg)
    return sum_to_shape(full[..., None] if dot else full, target_shape)


# ---------------------------------------------------------------------------------------
# sddmm


def _sddmm_jvp(primals, tangents, *, op, lhs_target, rhs_target, dot, masked, out_shape, checked=False):
    ga, (lhs, rhs, mask_arg) = GraphArrays.of(primals, checked), primals[N_GRAPH:]
    params = dict(op=op, lhs_target=lhs_target, rhs_target=rhs_target, dot=dot, masked=masked, out_shape=out_shape,
                  checked=checked)
    out = sddmm_p.bind(*primals, **params)

    def form(a, b, o):
        return sddmm(ga, a, b, op=o, lhs_target=lhs_target, rhs_target=rhs_target, out_shape=out_shape, dot=dot,
                     mask_arg=mask_arg if masked else None)

    terms = _linear_terms(op, lhs, rhs, _value(tangents[8]), _value(tangents[9]), form)
    return out, _sum_terms(terms, out)


def _sddmm_transpose(ct, *args, op, lhs_target, rhs_target, dot, masked, out_shape, checked=False):
    ga, (lhs, rhs, mask_arg) = GraphArrays.of(args, checked), args[N_GRAPH:]
    result = [None] * len(args)
    operands = ((8, lhs, lhs_target, rhs, rhs_target, uses_lhs(op)), (9, rhs, rhs_target, lhs, lhs_target, uses_rhs(op)))
    for i, x, target, other, other_target, used in operands:
        if not ad.is_undefined_primal(x):
            continue
        if type(ct) is ad.Zero or not used:
            result[i] = ad.Zero(x.aval)
            continue
        ct_e = ad.instantiate_zeros(ct)
        ct_e = ct_e[..., None] if dot else ct_e
        o = other if op == "mul" else None
        result[i] = _edge_contract(ga, ct_e, o, other_target if o is not None else None, target,
                                   mask_arg if masked else None, out_shape, x.aval.shape)
    return result


# ---------------------------------------------------------------------------------------
# edge softmax


def _softmax_jvp(primals, tangents, *, checked=False):
    ga, logits = GraphArrays.of(primals, checked), primals[N_GRAPH]
    y = softmax_p.bind(*primals, checked=checked)
    dx = _value(tangents[N_GRAPH])
    if dx is None:
        return y, zero_tangent(y)
    feat = tuple(logits.shape[1:])
    yd = y * dx
    total = spmm(ga, None, yd, op="copy_rhs", out_shape=feat)[0]  # [n_dst, ...]
    at_edge = sddmm(ga, total, None, op="copy_lhs", lhs_target="dst", rhs_target="edge", out_shape=feat)
    return y, yd - y * at_edge


# ---------------------------------------------------------------------------------------
# batching: a batch over features is folded into the feature axes (one kernel call); a batch
# over graphs runs the graphs one after another.


def _to_feature_axis(x, d, used):
    """Moves a batch axis to position 1 (just after the row axis); adds a unit axis if unbatched."""
    if not used or x.ndim == 1 and x.shape[0] == 0:
        return x
    return jnp.moveaxis(x, d, 1) if d is not None else jnp.expand_dims(x, 1)


def _batched_mask(mask_arg, d, masked, size, out_shape):
    if not masked:
        return mask_arg
    if d is not None:
        return jnp.moveaxis(mask_arg, d, 1)
    return jnp.broadcast_to(jnp.expand_dims(mask_arg, 1), (mask_arg.shape[0], size) + tuple(out_shape))


def _batch_binary(prim, args, dims, params, out_dims):
    """Folds a batch of the two data operands (and the mask) into a leading feature axis."""
    if any(d is not None for d in dims[:N_GRAPH]):
        return map_over_graphs(prim, args, dims, params)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    op, out_shape = params["op"], params["out_shape"]
    (lhs, rhs, mask_arg), (d_lhs, d_rhs, d_mask) = args[N_GRAPH:], dims[N_GRAPH:]
    lhs = _to_feature_axis(lhs, d_lhs, uses_lhs(op))
    rhs = _to_feature_axis(rhs, d_rhs, uses_rhs(op))
    mask_arg = _batched_mask(mask_arg, d_mask, params["masked"], size, out_shape)
    out = prim.bind(*args[:N_GRAPH], lhs, rhs, mask_arg, **dict(params, out_shape=(size,) + tuple(out_shape)))
    return out, out_dims


def _spmm_batch(args, dims, **params):
    return _batch_binary(spmm_p, args, dims, params, (1, 1 if has_arg(params["reduce"]) else None))


def _sddmm_batch(args, dims, **params):
    return _batch_binary(sddmm_p, args, dims, params, 1)


def _softmax_batch(args, dims, *, checked=False):
    if any(d is not None for d in dims[:N_GRAPH]):
        return map_over_graphs(softmax_p, args, dims, {"checked": checked})
    logits = jnp.moveaxis(args[N_GRAPH], dims[N_GRAPH], 1)
    return softmax(GraphArrays.of(args, checked), logits), 1


ad.primitive_jvps[spmm_p] = _spmm_jvp
ad.primitive_transposes[spmm_p] = _spmm_transpose
batching.primitive_batchers[spmm_p] = _spmm_batch
ad.primitive_jvps[sddmm_p] = _sddmm_jvp
ad.primitive_transposes[sddmm_p] = _sddmm_transpose
batching.primitive_batchers[sddmm_p] = _sddmm_batch
ad.primitive_jvps[softmax_p] = _softmax_jvp
batching.primitive_batchers[softmax_p] = _softmax_batch
