"""Primitives of the fused multi-head GATv2 attention op, their lowerings and rules (DESIGN §4).

Per head ``h`` and edge ``e = (j -> i)``, with ``t_e = xs[j] + xd[i] (+ ef[e])`` (a ``C``-vector)::

    z_e = <a[h], leaky_relu(t_e)>,   lse[i] = log sum_{e into i} exp(z_e),   alpha_e = exp(z_e - lse[i])
    out[i] = sum_{e into i} alpha_e xs[j]

``gatv2_fwd_p``  fused forward: ``(xs, xd, a, ef) -> (out [Nd,H,C], lse [Nd,H])`` (one pass per
                 destination with an online softmax; ``t_e`` is never stored; ``lse`` is 0 for an
                 empty row).
``gatv2_jvp_p``  its JVP, linear in the tangents ``(dxs, dxd, da, def)``:
                 ``dz = <da, leaky_relu(t)> + <a, leaky_relu'(t) (dxs[j] + dxd[i] + def)>``,
                 ``dlse = sum alpha dz``, ``dout = sum alpha (dxs[j] + dz xs[j]) - dlse out``.
                 Its transpose is ``gatv2_vjp_p``.
``gatv2_vjp_p``  the fused backward kernels, given ``G = ct_out`` and ``delta = <G, out> - ct_lse``,
                 with ``dz_e = alpha_e (<G[i], xs[j]> - delta[i])`` and ``dt_e = dz_e a leaky_relu'(t_e)``:
                 ``part="src"`` (reverse CSR, no atomics): ``grad_xs[j] = sum alpha G[i] + dt``;
                 ``part="dst"`` (CSC): ``grad_xd[i] = sum dt``, ``grad_a = sum dz leaky_relu(t)``
                 (per-destination partials from the kernel, summed here in a fixed order by
                 ``rows_dot``), ``grad_ef[e] = dt``.

So first-order reverse mode runs the fused kernels. ``gatv2_jvp_p`` is lowered as a composition of
the message-passing primitives (``spmm``/``sddmm``, ``E x H x C`` intermediates), and the JVPs of
``gatv2_jvp_p`` and ``gatv2_vjp_p`` (second and higher orders) come from those compositions.

Float operands are ``[rows, H, ...]`` except the attention weights ``a [H, C]``; an absent
``ef`` (``has_edge=False``) is an empty ``[0]`` array. Features (``xs``, ``xd``, ``ef``, ``out``
and their tangents and cotangents) may be bfloat16 or float16 with float32 ``a``: the CUDA
kernels read and write them as they are and compute in float32; the CPU kernels and the
compositions get them converted to float32. Batching folds a batch into the head axis
(heads are independent); a batch over graphs runs the graphs one after another.
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
from ._primitive_utils import (all_zero, composed_jvp, empty, fold_batch_into_heads, in_float32, leaky_relu,
                               leaky_relu_slope, register_lowerings, segment_lse, shape_dtype, zero_tangent)
from ._primitives import n_dst_of
from ._rows_primitives import rows_dot

gatv2_fwd_p = KernelPrimitive("jgo_gatv2_fwd")
gatv2_jvp_p = KernelPrimitive("jgo_gatv2_jvp")
gatv2_vjp_p = KernelPrimitive("jgo_gatv2_vjp")
for _p in (gatv2_fwd_p, gatv2_jvp_p, gatv2_vjp_p):
    _p.multiple_results = True
    _p.def_impl(partial(xla.apply_primitive, _p))


# ---------------------------------------------------------------------------------------
# Abstract evaluation (avals derived with ``update`` to keep shard_map metadata)


def _fwd_abstract(*args, negative_slope, has_edge):
    xs, xd, a = args[8], args[9], args[10]
    nd, h, c = xd.shape
    return (xs.update(shape=(nd, h, xs.shape[2]), weak_type=False), a.update(shape=(nd, h), weak_type=False))


def _jvp_abstract(*args, negative_slope, has_edge):
    out, lse = args[12], args[13]
    return out.update(weak_type=False), lse.update(weak_type=False)


def _vjp_abstract(*args, negative_slope, has_edge, part):
    xs, xd, a, ef = args[8:12]
    if part == "src":
        return (xs.update(weak_type=False),)
    return xd.update(weak_type=False), a.update(weak_type=False), ef.update(weak_type=False)


gatv2_fwd_p.def_abstract_eval(_fwd_abstract)
gatv2_jvp_p.def_abstract_eval(_jvp_abstract)
gatv2_vjp_p.def_abstract_eval(_vjp_abstract)


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _pre(ga, xs, xd, ef, has_edge):
    """``t [E, H, C] = xs[src] + xd[dst] (+ ef)`` (composition path only)."""
    t = sddmm(ga, xs, xd, op="add", lhs_target="src", rhs_target="dst", out_shape=tuple(xs.shape[1:]))
    return t + ef if has_edge else t


def edge_logits_xla(ga, xs, xd, a, ef, has_edge, slope):
    """``(t, z)`` with plain gathers: ``t [E, H, C]``, ``z [E, H]``."""
    t = xs[ga[0]] + xd[ga[1]]
    if has_edge:
        t = t + ef
    return t, jnp.sum(a * leaky_relu(t, slope), axis=-1)


def gatv2_fwd_xla(*args, negative_slope, has_edge):
    ga, (xs, xd, a, ef) = args[:_N_GRAPH], args[_N_GRAPH:]
    nd, dst = n_dst_of(ga), ga[1]
    _, z = edge_logits_xla(ga, xs, xd, a, ef, has_edge, negative_slope)
    lse = segment_lse(z, dst, nd)
    alpha = jnp.exp(z - lse[dst])
    out = jax.ops.segment_sum(alpha[..., None] * xs[ga[0]], dst, num_segments=nd)
    return out, lse


def gatv2_jvp_composed(*args, negative_slope, has_edge):
    ga = args[:_N_GRAPH]
    xs, xd, a, ef, out, lse, dxs, dxd, da, def_ = args[_N_GRAPH:]
    hc = tuple(xs.shape[1:])
    t = _pre(ga, xs, xd, ef, has_edge)
    u = leaky_relu(t, negative_slope)
    alpha = jnp.exp(jnp.sum(a * u, axis=-1) - lse[ga[1]])
    dt = _pre(ga, dxs, dxd, def_, has_edge)
    dz = jnp.sum(da * u, axis=-1) + jnp.sum(a * leaky_relu_slope(t, negative_slope) * dt, axis=-1)
    adz = alpha * dz
    dlse = spmm(ga, None, adz, op="copy_rhs", out_shape=hc[:1])[0]
    dout = (spmm(ga, dxs, alpha[..., None], op="mul", out_shape=hc)[0]
            + spmm(ga, xs, adz[..., None], op="mul", out_shape=hc)[0] - dlse[..., None] * out)
    return dout, dlse


def gatv2_vjp_composed(*args, negative_slope, has_edge, part):
    ga = args[:_N_GRAPH]
    xs, xd, a, ef, lse, grad, delta = args[_N_GRAPH:]
    hc = tuple(xs.shape[1:])
    t = _pre(ga, xs, xd, ef, has_edge)
    u = leaky_relu(t, negative_slope)
    alpha = jnp.exp(jnp.sum(a * u, axis=-1) - lse[ga[1]])
    dalpha = sddmm(ga, grad, xs, op="mul", lhs_target="dst", rhs_target="src", out_shape=hc, dot=True)
    dz = alpha * (dalpha - delta[ga[1]])
    dt = dz[..., None] * a * leaky_relu_slope(t, negative_slope)
    if part == "src":
        gxs = (spmm(ga, grad, alpha[..., None], op="mul", reverse=True, out_shape=hc)[0]
               + spmm(ga, None, dt, op="copy_rhs", reverse=True, out_shape=hc)[0])
        return (gxs,)
    gxd = spmm(ga, None, dt, op="copy_rhs", out_shape=hc)[0]
    g_a = rows_dot(u, dz[..., None])[..., 0]  # a sum over the edges in a fixed order
    return gxd, g_a, (dt if has_edge else empty(dt.dtype))


# ---------------------------------------------------------------------------------------
# FFI lowerings


def _gatv2_fwd_ffi(*args, negative_slope, has_edge):
    ga, (xs, xd, a, ef) = args[:_N_GRAPH], args[_N_GRAPH:]
    avals = _fwd_abstract(*args, negative_slope=negative_slope, has_edge=has_edge)
    call = jax.ffi.ffi_call("jgo_gatv2_fwd", tuple(shape_dtype(v) for v in avals))
    return call(ga[2], ga[3], ga[4], xs, xd, a, ef, negative_slope=np.float64(negative_slope),
                has_edge=bool(has_edge))


def _gatv2_vjp_ffi(*args, negative_slope, has_edge, part):
    ga = args[:_N_GRAPH]
    xs, xd, a, ef, lse, grad, delta = args[_N_GRAPH:]
    info = jnp.stack([lse, delta], axis=1)  # [n_dst, 2, H]: one gathered row per edge
    attrs = dict(negative_slope=np.float64(negative_slope), has_edge=bool(has_edge))
    if part == "src":
        call = jax.ffi.ffi_call("jgo_gatv2_bwd_src", (shape_dtype(xs),))
        return tuple(call(*ga[5:8], xs, xd, a, ef, info, grad, **attrs))
    rows = jax.ShapeDtypeStruct(xd.shape, a.dtype)
    call = jax.ffi.ffi_call("jgo_gatv2_bwd_dst", (shape_dtype(xd), rows, shape_dtype(ef)))
    gxd, ga_rows, gef = call(*ga[2:5], xs, xd, a, ef, info, grad, **attrs)
    # the per-destination weight-gradient partials, summed in a fixed order (any thread count)
    return gxd, rows_dot(ga_rows)[..., 0], gef


for _p, _ref, _ffi, _abstract, _cuda_half in (
        (gatv2_fwd_p, gatv2_fwd_xla, _gatv2_fwd_ffi, _fwd_abstract, True),
        (gatv2_jvp_p, gatv2_jvp_composed, gatv2_jvp_composed, _jvp_abstract, False),
        (gatv2_vjp_p, gatv2_vjp_composed, _gatv2_vjp_ffi, _vjp_abstract, True)):
    register_lowerings(_p, _ref, _ffi, multiple_results=True, abstract=_abstract, cuda_half=_cuda_half)


# ---------------------------------------------------------------------------------------
# Differentiation


def _gatv2_fwd_jvp(primals, tangents, *, negative_slope, has_edge):
    params = dict(negative_slope=negative_slope, has_edge=has_edge)
    out, lse = gatv2_fwd_p.bind(*primals, **params)
    ts = tangents[_N_GRAPH:]
    if all_zero(ts):
        return (out, lse), (zero_tangent(out), zero_tangent(lse))
    dxs, dxd, da, def_ = (ad.instantiate_zeros(t) for t in ts)
    dout, dlse = gatv2_jvp_p.bind(*primals, out, lse, dxs, dxd, da, def_, **params)
    return (out, lse), (dout, dlse)


def _gatv2_jvp_transpose(cts, *args, negative_slope, has_edge):
    ga = args[:_N_GRAPH]
    primals = args[_N_GRAPH:_N_GRAPH + 6]
    for name, v in zip(("x_src", "x_dst", "attn_weights", "edge_feat", "out", "lse"), primals):
        if ad.is_undefined_primal(v):
            raise NotImplementedError(f"gatv2_jvp is not linear in {name}")
    xs, xd, a, ef, out, lse = primals
    i_xs, i_xd, i_a, i_ef = range(_N_GRAPH + 6, _N_GRAPH + 10)
    result = [None] * len(args)
    undefined = [i for i in (i_xs, i_xd, i_a, i_ef) if ad.is_undefined_primal(args[i])]
    if all_zero(cts):
        for i in undefined:
            result[i] = ad.Zero(args[i].aval)
        return result
    ct_out, ct_lse = (ad.instantiate_zeros(c) for c in cts)
    delta = jnp.sum(ct_out.astype(lse.dtype) * out.astype(lse.dtype), axis=-1) - ct_lse
    params = dict(negative_slope=negative_slope, has_edge=has_edge)
    operands = (*ga, xs, xd, a, ef, lse, ct_out, delta)
    if i_xs in undefined:
        (result[i_xs],) = gatv2_vjp_p.bind(*operands, part="src", **params)
    if any(i in undefined for i in (i_xd, i_a, i_ef)):
        gxd, g_a, gef = gatv2_vjp_p.bind(*operands, part="dst", **params)
        for i, v in ((i_xd, gxd), (i_a, g_a), (i_ef, gef)):
            result[i] = v if i in undefined else None
    return result


ad.primitive_jvps[gatv2_fwd_p] = _gatv2_fwd_jvp
ad.primitive_jvps[gatv2_jvp_p] = composed_jvp(in_float32(gatv2_jvp_composed, _jvp_abstract), gatv2_jvp_p)
ad.primitive_transposes[gatv2_jvp_p] = _gatv2_jvp_transpose
ad.primitive_jvps[gatv2_vjp_p] = composed_jvp(in_float32(gatv2_vjp_composed, _vjp_abstract), gatv2_vjp_p)


# ---------------------------------------------------------------------------------------
# Batching: heads are independent, so a batch over the float operands folds into the head axis
# (one kernel call, head index b * H + h); a batch over graphs runs the graphs one after another.

# Float operands (offsets after the graph arrays) laid out [H, C] instead of [rows, H, ...].
_HEAD_LEADING = {gatv2_fwd_p: (2,), gatv2_jvp_p: (2, 8), gatv2_vjp_p: (2,)}


def _head_leading_outputs(prim):
    """The "dst" backward returns the gradient of ``a [H, C]`` (no row axis) second."""
    return lambda params: (1,) if prim is gatv2_vjp_p and params.get("part") == "dst" else ()


for _p in (gatv2_fwd_p, gatv2_jvp_p, gatv2_vjp_p):
    batching.primitive_batchers[_p] = fold_batch_into_heads(_p, _HEAD_LEADING[_p], _head_leading_outputs(_p))


# ---------------------------------------------------------------------------------------
# Binder


def gatv2(ga, xs, xd, a, ef, *, negative_slope):
    """``(out [Nd,H,C], lse [Nd,H])`` of the fused GATv2 forward; ``ef`` may be None."""
    has_edge = ef is not None
    ef = ef if has_edge else empty(xs.dtype)
    return gatv2_fwd_p.bind(*ga, xs, xd, a, ef, negative_slope=float(negative_slope), has_edge=has_edge)


def attention_weights_v2(ga, xs, xd, a, ef, lse, *, negative_slope):
    """``alpha [E, H]`` in input edge order, from the features and the forward's log-sum-exp."""
    xs, xd, ef = (None if x is None else x.astype(lse.dtype) for x in (xs, xd, ef))
    _, z = edge_logits_xla(ga, xs, xd, a, ef, ef is not None, negative_slope)
    return jnp.exp(z - lse[ga[1]])
