"""JVP, transpose and batching rules of the kernel primitives.

The rules close on the primitives themselves: the tangent of every primitive is a sum of
``spmm``/``sddmm`` forms that are linear in one tangent each (a max/min becomes a masked sum
routed to the winning edge), and the transpose of such a form is again a form: a neighbourhood
reduce transposes into the reduce over the reversed graph (``reverse`` flips CSC <-> CSR) or
into an edge-wise product, and vice versa (DGL's reverse-graph/SDDMM identity). Derivatives of
any order therefore stay on the kernels.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.interpreters import ad, batching

from ._calls import sddmm, softmax, spmm
from .._layout import sum_to_shape
from ._primitive_utils import N_GRAPH as _N_GRAPH
from ._primitive_utils import map_over_graphs, zero_tangent
from ._primitives import has_arg, sddmm_p, softmax_p, spmm_p, uses_lhs, uses_rhs


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
    offsets = ga[5] if reverse else ga[2]
    deg = jnp.diff(offsets).astype(dtype)
    return (1 / jnp.maximum(deg, 1)).reshape((-1,) + (1,) * rank)


# ---------------------------------------------------------------------------------------
# spmm


def _spmm_jvp(primals, tangents, *, op, reduce, reverse, masked, out_shape):
    ga, (node, edge, mask_arg) = primals[:_N_GRAPH], primals[_N_GRAPH:]
    params = dict(op=op, reduce=reduce, reverse=reverse, masked=masked, out_shape=out_shape)
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
        if other is None and mask_arg is None:
            return sum_to_shape(jnp.broadcast_to(ct_e, (ct_e.shape[0],) + tuple(out_shape)), target_shape)
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
    else:  # the other operand lives on the same node as the result
        full = spmm(ga, None, ct_e, op="copy_rhs", **kw)[0] * other
    return sum_to_shape(full, target_shape)


def _node_contract(ga, ct_r, reverse, edge, mask_arg, out_shape, target_shape):
    """Transpose of a neighbourhood reduce in its node operand: reduce over the reversed view."""
    op = "mul" if edge is not None else "copy_lhs"
    full = spmm(ga, ct_r, edge, op=op, reduce="sum", reverse=not reverse, mask_arg=mask_arg, out_shape=out_shape)[0]
    return sum_to_shape(full, target_shape)


def _spmm_transpose(cts, *args, op, reduce, reverse, masked, out_shape):
    ga, (node, edge, mask_arg) = args[:_N_GRAPH], args[_N_GRAPH:]
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


def _sddmm_jvp(primals, tangents, *, op, lhs_target, rhs_target, dot, masked, out_shape):
    ga, (lhs, rhs, mask_arg) = primals[:_N_GRAPH], primals[_N_GRAPH:]
    params = dict(op=op, lhs_target=lhs_target, rhs_target=rhs_target, dot=dot, masked=masked, out_shape=out_shape)
    out = sddmm_p.bind(*primals, **params)

    def form(a, b, o):
        return sddmm(ga, a, b, op=o, lhs_target=lhs_target, rhs_target=rhs_target, out_shape=out_shape, dot=dot,
                     mask_arg=mask_arg if masked else None)

    terms = _linear_terms(op, lhs, rhs, _value(tangents[8]), _value(tangents[9]), form)
    return out, _sum_terms(terms, out)


def _sddmm_transpose(ct, *args, op, lhs_target, rhs_target, dot, masked, out_shape):
    ga, (lhs, rhs, mask_arg) = args[:_N_GRAPH], args[_N_GRAPH:]
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


def _softmax_jvp(primals, tangents):
    ga, logits = primals[:_N_GRAPH], primals[_N_GRAPH]
    y = softmax_p.bind(*primals)
    dx = _value(tangents[_N_GRAPH])
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
    if any(d is not None for d in dims[:_N_GRAPH]):
        return map_over_graphs(prim, args, dims, params)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    op, out_shape = params["op"], params["out_shape"]
    lhs = _to_feature_axis(args[8], dims[8], uses_lhs(op))
    rhs = _to_feature_axis(args[9], dims[9], uses_rhs(op))
    mask_arg = _batched_mask(args[10], dims[10], params["masked"], size, out_shape)
    out = prim.bind(*args[:_N_GRAPH], lhs, rhs, mask_arg, **dict(params, out_shape=(size,) + tuple(out_shape)))
    return out, out_dims


def _spmm_batch(args, dims, **params):
    return _batch_binary(spmm_p, args, dims, params, (1, 1 if has_arg(params["reduce"]) else None))


def _sddmm_batch(args, dims, **params):
    return _batch_binary(sddmm_p, args, dims, params, 1)


def _softmax_batch(args, dims):
    if any(d is not None for d in dims[:_N_GRAPH]):
        return map_over_graphs(softmax_p, args, dims, {})
    logits = jnp.moveaxis(args[_N_GRAPH], dims[_N_GRAPH], 1)
    return softmax(args[:_N_GRAPH], logits), 1


ad.primitive_jvps[spmm_p] = _spmm_jvp
ad.primitive_transposes[spmm_p] = _spmm_transpose
batching.primitive_batchers[spmm_p] = _spmm_batch
ad.primitive_jvps[sddmm_p] = _sddmm_jvp
ad.primitive_transposes[sddmm_p] = _sddmm_transpose
batching.primitive_batchers[sddmm_p] = _sddmm_batch
ad.primitive_jvps[softmax_p] = _softmax_jvp
batching.primitive_batchers[softmax_p] = _softmax_batch
