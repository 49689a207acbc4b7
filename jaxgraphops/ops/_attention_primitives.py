"""Primitives of the fused multi-head GAT attention op, their lowerings and rules (DESIGN §4).

Per head ``h`` and edge ``e = (j -> i)``, with per-node scores computed in JAX
(``s_src = <a_src, x_src>``, ``s_dst = <a_dst, x_dst>``, ``s_edge = <a_edge, edge_feat>``)::

    p_e = s_src[j] + s_dst[i] (+ s_edge[e]),   z_e = leaky_relu(p_e)
    lse[i] = log sum_{e into i} exp(z_e),      alpha_e = exp(z_e - lse[i])
    out[i] = sum_{e into i} alpha_e x[j]

``gat_fwd_p``  fused forward: ``(x, s_src, s_dst, s_edge) -> (out [Nd,H,C], lse [Nd,H])`` (one
               pass per destination with an online softmax; ``lse`` is 0 for an empty row).
``gat_jvp_p``  its JVP, linear in the tangents ``(dx, ds_src, ds_dst, ds_edge)``:
               ``dz = leaky_relu'(p) dp``, ``dlse = sum alpha dz``,
               ``dout = sum alpha (dx[j] + dz x[j]) - dlse out``. Its transpose is ``gat_vjp_p``.
``gat_vjp_p``  the fused backward kernels, given ``G = ct_out`` and
               ``delta = <G, out> - ct_lse``, with ``gp_e = alpha_e (<G[i], x[j]> - delta[i]) leaky_relu'(p_e)``:
               ``part="src"`` (reverse CSR, no atomics): ``grad_x[j] = sum alpha G[i]``, ``grad_s_src[j] = sum gp``;
               ``part="dst"`` (CSC): ``grad_s_dst[i] = sum gp``, ``grad_s_edge[e] = gp``.

So first-order reverse mode runs the fused kernels. ``gat_jvp_p`` is lowered as a composition of
the message-passing primitives (``spmm``/``sddmm``), and the JVPs of ``gat_jvp_p`` and
``gat_vjp_p`` (second and higher orders) come from those compositions.

All float operands are ``[rows, H, ...]``; an absent ``s_edge`` (``has_edge=False``) is an
empty ``[0]`` array. Features (``x``, ``out``, their tangents and cotangents) may be bfloat16 or
float16 with float32 scores: the CUDA kernels read and write them as they are and compute in
float32; the CPU kernels and the compositions get them converted to float32. Batching folds a batch into the head axis (heads are independent).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, xla

from ._calls import sddmm, spmm
from ._primitive_utils import KernelPrimitive
from ._primitive_utils import N_GRAPH as _N_GRAPH
from ._primitive_utils import (all_zero, composed_jvp, empty, fold_batch_into_heads, in_float32, leaky_relu_slope,
                               register_lowerings, segment_lse, shape_dtype, zero_tangent)
from ._primitives import n_dst_of

gat_fwd_p = KernelPrimitive("jgo_gat_fwd")
gat_jvp_p = KernelPrimitive("jgo_gat_jvp")
gat_vjp_p = KernelPrimitive("jgo_gat_vjp")
for _p in (gat_fwd_p, gat_jvp_p, gat_vjp_p):
    _p.multiple_results = True
    _p.def_impl(partial(xla.apply_primitive, _p))


# ---------------------------------------------------------------------------------------
# Abstract evaluation (avals derived with ``update`` to keep shard_map metadata)


def _fwd_abstract(*args, negative_slope, has_edge):
    x, s_dst = args[8], args[10]
    nd, h = s_dst.shape
    return (x.update(shape=(nd, h, x.shape[2]), weak_type=False), s_dst.update(weak_type=False))


def _jvp_abstract(*args, negative_slope, has_edge):
    out, lse = args[12], args[13]
    return out.update(weak_type=False), lse.update(weak_type=False)


def _vjp_abstract(*args, negative_slope, has_edge, part):
    x, s_src, s_dst, s_edge = args[8:12]
    if part == "src":
        return x.update(weak_type=False), s_src.update(weak_type=False)
    return s_dst.update(weak_type=False), s_edge.update(weak_type=False)


gat_fwd_p.def_abstract_eval(_fwd_abstract)
gat_jvp_p.def_abstract_eval(_jvp_abstract)
gat_vjp_p.def_abstract_eval(_vjp_abstract)


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _edge_logits(ga, s_src, s_dst, s_edge, has_edge, slope):
    p = s_src[ga[0]] + s_dst[ga[1]]
    if has_edge:
        p = p + s_edge
    return p, jnp.where(p > 0, p, slope * p)


def gat_fwd_xla(*args, negative_slope, has_edge):
    ga, (x, s_src, s_dst, s_edge) = args[:_N_GRAPH], args[_N_GRAPH:]
    nd, dst = n_dst_of(ga), ga[1]
    _, z = _edge_logits(ga, s_src, s_dst, s_edge, has_edge, negative_slope)
    lse = segment_lse(z, dst, nd)
    alpha = jnp.exp(z - lse[dst])
    out = jax.ops.segment_sum(alpha[..., None] * x[ga[0]], dst, num_segments=nd)
    return out, lse


def gat_jvp_composed(*args, negative_slope, has_edge):
    ga = args[:_N_GRAPH]
    x, s_src, s_dst, s_edge, out, lse, dx, ds_src, ds_dst, ds_edge = args[_N_GRAPH:]
    hc = tuple(x.shape[1:])
    p, z = _edge_logits(ga, s_src, s_dst, s_edge, has_edge, negative_slope)
    alpha = jnp.exp(z - lse[ga[1]])
    dp = ds_src[ga[0]] + ds_dst[ga[1]]
    if has_edge:
        dp = dp + ds_edge
    adz = alpha * leaky_relu_slope(p, negative_slope) * dp
    dlse = spmm(ga, None, adz, op="copy_rhs", out_shape=hc[:1])[0]
    dout = (spmm(ga, dx, alpha[..., None], op="mul", out_shape=hc)[0]
            + spmm(ga, x, adz[..., None], op="mul", out_shape=hc)[0] - dlse[..., None] * out)
    return dout, dlse


def gat_vjp_composed(*args, negative_slope, has_edge, part):
    ga = args[:_N_GRAPH]
    x, s_src, s_dst, s_edge, lse, grad, delta = args[_N_GRAPH:]
    hc = tuple(x.shape[1:])
    p, z = _edge_logits(ga, s_src, s_dst, s_edge, has_edge, negative_slope)
    alpha = jnp.exp(z - lse[ga[1]])
    dalpha = sddmm(ga, grad, x, op="mul", lhs_target="dst", rhs_target="src", out_shape=hc, dot=True)
    gp = alpha * (dalpha - delta[ga[1]]) * leaky_relu_slope(p, negative_slope)
    if part == "src":
        gx = spmm(ga, grad, alpha[..., None], op="mul", reverse=True, out_shape=hc)[0]
        return gx, spmm(ga, None, gp, op="copy_rhs", reverse=True, out_shape=hc[:1])[0]
    gsd = spmm(ga, None, gp, op="copy_rhs", out_shape=hc[:1])[0]
    return gsd, (gp if has_edge else empty(gp.dtype))


# ---------------------------------------------------------------------------------------
# FFI lowerings


def _gat_fwd_ffi(*args, negative_slope, has_edge):
    ga, (x, s_src, s_dst, s_edge) = args[:_N_GRAPH], args[_N_GRAPH:]
    avals = _fwd_abstract(*args, negative_slope=negative_slope, has_edge=has_edge)
    call = jax.ffi.ffi_call("jgo_gat_fwd", tuple(shape_dtype(a) for a in avals))
    return call(ga[2], ga[3], ga[4], x, s_src, s_dst, s_edge, negative_slope=np.float64(negative_slope),
                has_edge=bool(has_edge))


def _gat_vjp_ffi(*args, negative_slope, has_edge, part):
    ga = args[:_N_GRAPH]
    x, s_src, s_dst, s_edge, lse, grad, delta = args[_N_GRAPH:]
    avals = _vjp_abstract(*args, negative_slope=negative_slope, has_edge=has_edge, part=part)
    dst_info = jnp.stack([s_dst, lse, delta], axis=1)  # [n_dst, 3, H]: one gathered row per edge
    target, (offsets, nbr, eid) = ("jgo_gat_bwd_src", ga[5:8]) if part == "src" else ("jgo_gat_bwd_dst", ga[2:5])
    call = jax.ffi.ffi_call(target, tuple(shape_dtype(a) for a in avals))
    return call(offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, negative_slope=np.float64(negative_slope),
                has_edge=bool(has_edge))


for _p, _ref, _ffi, _abstract, _cuda_half in (
        (gat_fwd_p, gat_fwd_xla, _gat_fwd_ffi, _fwd_abstract, True),
        (gat_jvp_p, gat_jvp_composed, gat_jvp_composed, _jvp_abstract, False),
        (gat_vjp_p, gat_vjp_composed, _gat_vjp_ffi, _vjp_abstract, True)):
    register_lowerings(_p, _ref, _ffi, multiple_results=True, abstract=_abstract, cuda_half=_cuda_half)


# ---------------------------------------------------------------------------------------
# Differentiation


def _gat_fwd_jvp(primals, tangents, *, negative_slope, has_edge):
    params = dict(negative_slope=negative_slope, has_edge=has_edge)
    out, lse = gat_fwd_p.bind(*primals, **params)
    ts = tangents[_N_GRAPH:]
    if all_zero(ts):
        return (out, lse), (zero_tangent(out), zero_tangent(lse))
    dx, ds_src, ds_dst, ds_edge = (ad.instantiate_zeros(t) for t in ts)
    dout, dlse = gat_jvp_p.bind(*primals, out, lse, dx, ds_src, ds_dst, ds_edge, **params)
    return (out, lse), (dout, dlse)


def _gat_jvp_transpose(cts, *args, negative_slope, has_edge):
    ga = args[:_N_GRAPH]
    x, s_src, s_dst, s_edge, out, lse = args[_N_GRAPH:_N_GRAPH + 6]
    for name, v in zip(("x", "s_src", "s_dst", "s_edge", "out", "lse"), (x, s_src, s_dst, s_edge, out, lse)):
        if ad.is_undefined_primal(v):
            raise NotImplementedError(f"gat_jvp is not linear in {name}")
    lin = {i: args[i] for i in range(_N_GRAPH + 6, _N_GRAPH + 10)}  # dx, ds_src, ds_dst, ds_edge
    result = [None] * len(args)
    undefined = [i for i, v in lin.items() if ad.is_undefined_primal(v)]
    if all_zero(cts):
        for i in undefined:
            result[i] = ad.Zero(lin[i].aval)
        return result
    ct_out, ct_lse = (ad.instantiate_zeros(c) for c in cts)
    delta = jnp.sum(ct_out.astype(lse.dtype) * out.astype(lse.dtype), axis=-1) - ct_lse
    params = dict(negative_slope=negative_slope, has_edge=has_edge)
    operands = (*ga, x, s_src, s_dst, s_edge, lse, ct_out, delta)
    i_dx, i_ss, i_sd, i_se = _N_GRAPH + 6, _N_GRAPH + 7, _N_GRAPH + 8, _N_GRAPH + 9
    if i_dx in undefined or i_ss in undefined:
        gx, gss = gat_vjp_p.bind(*operands, part="src", **params)
        result[i_dx] = gx if i_dx in undefined else None
        result[i_ss] = gss if i_ss in undefined else None
    if i_sd in undefined or i_se in undefined:
        gsd, gse = gat_vjp_p.bind(*operands, part="dst", **params)
        result[i_sd] = gsd if i_sd in undefined else None
        result[i_se] = gse if i_se in undefined else None
    return result


ad.primitive_jvps[gat_fwd_p] = _gat_fwd_jvp
ad.primitive_jvps[gat_jvp_p] = composed_jvp(in_float32(gat_jvp_composed, _jvp_abstract), gat_jvp_p)
ad.primitive_transposes[gat_jvp_p] = _gat_jvp_transpose
ad.primitive_jvps[gat_vjp_p] = composed_jvp(in_float32(gat_vjp_composed, _vjp_abstract), gat_vjp_p)


# ---------------------------------------------------------------------------------------
# Batching: heads are independent, so a batch over the float operands folds into the head axis
# (one kernel call); a batch over graphs runs the graphs one after another.

for _p in (gat_fwd_p, gat_jvp_p, gat_vjp_p):
    batching.primitive_batchers[_p] = fold_batch_into_heads(_p)


# ---------------------------------------------------------------------------------------
# Binder


def gat(ga, x, s_src, s_dst, s_edge, *, negative_slope):
    """``(out [Nd,H,C], lse [Nd,H])`` of the fused GAT forward; ``s_edge`` may be None."""
    has_edge = s_edge is not None
    s_edge = s_edge if has_edge else empty(s_src.dtype)
    return gat_fwd_p.bind(*ga, x, s_src, s_dst, s_edge, negative_slope=float(negative_slope), has_edge=has_edge)


def attention_weights(ga, s_src, s_dst, s_edge, lse, *, negative_slope):
    """``alpha [E, H]`` in input edge order, from the scores and the forward's log-sum-exp."""
    _, z = _edge_logits(ga, s_src, s_dst, s_edge, s_edge is not None, negative_slope)
    return jnp.exp(z - lse[ga[1]])
