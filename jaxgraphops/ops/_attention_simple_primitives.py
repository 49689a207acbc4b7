"""Primitives of the fused TransformerConv attention op (``mha_simple``), their lowerings and rules.

Per head ``h`` and edge ``e = (j -> i)``, with ``k'_e = k[j] (+ ef[e])`` and ``v'_e = v[j] (+ ef[e])``::

    z_e = scale <q[i], k'_e>,   lse[i] = log sum_{e into i} exp(z_e),   alpha_e = exp(z_e - lse[i])
    out[i] = sum_{e into i} alpha_e v'_e

``mha_simple_fwd_p``  fused forward: ``(q, k, v, ef) -> (out [Nd,H,C], lse [Nd,H])`` (one pass per
                      destination with an online softmax; ``k'``, ``v'`` are never stored; ``lse``
                      is 0 for an empty row).
``mha_simple_jvp_p``  its JVP, linear in the tangents ``(dq, dk, dv, def)``:
                      ``dz = scale (<dq[i], k'> + <q[i], dk[j] + def>)``, ``dlse = sum alpha dz``,
                      ``dout = sum alpha (dv[j] + def + dz v') - dlse out``. Its transpose is
                      ``mha_simple_vjp_p``.
``mha_simple_vjp_p``  the fused backward kernels, given ``G = ct_out`` and ``delta = <G, out> - ct_lse``,
                      with ``ds_e = alpha_e (<G[i], v'_e> - delta[i])``:
                      ``part="src"`` (reverse CSR, no atomics): ``grad_k[j] = sum scale ds q[i]``,
                      ``grad_v[j] = sum alpha G[i]``;
                      ``part="dst"`` (CSC): ``grad_q[i] = sum scale ds k'``,
                      ``grad_ef[e] = scale ds q[i] + alpha G[i]``.

So first-order reverse mode runs the fused kernels. ``mha_simple_jvp_p`` is lowered as a composition
of the message-passing primitives (``spmm``/``sddmm``), and the JVPs of ``mha_simple_jvp_p`` and
``mha_simple_vjp_p`` (second and higher orders) come from those compositions.

All float operands are ``[rows, H, ...]``; an absent ``ef`` (``has_edge=False``) is an empty
``[0]`` array. Features (``q``, ``k``, ``v``, ``ef``, ``out``, their tangents and cotangents) may
be bfloat16 or float16, with ``lse`` in float32: the CUDA kernels read and write them as they are
and compute in float32; the CPU kernels and the compositions get them converted to float32. Batching folds a batch into the head axis (heads are independent; ``scale``
depends on ``C`` only); a batch over graphs runs the graphs one after another.
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
from ._primitive_utils import (HALF_TYPES, all_zero, composed_jvp, empty, fold_batch_into_heads, in_float32,
                               register_lowerings, segment_lse, shape_dtype, zero_tangent)
from ._primitives import n_dst_of

mha_simple_fwd_p = KernelPrimitive("jgo_mha_simple_fwd")
mha_simple_jvp_p = KernelPrimitive("jgo_mha_simple_jvp")
mha_simple_vjp_p = KernelPrimitive("jgo_mha_simple_vjp")
for _p in (mha_simple_fwd_p, mha_simple_jvp_p, mha_simple_vjp_p):
    _p.multiple_results = True
    _p.def_impl(partial(xla.apply_primitive, _p))


# ---------------------------------------------------------------------------------------
# Abstract evaluation (avals derived with ``update`` to keep shard_map metadata)


def _fwd_abstract(*args, scale, has_edge):
    q = args[_N_GRAPH]
    score = jnp.float32 if q.dtype in HALF_TYPES else q.dtype
    return q.update(weak_type=False), q.update(shape=q.shape[:2], dtype=score, weak_type=False)


def _jvp_abstract(*args, scale, has_edge):
    out, lse = args[_N_GRAPH + 4], args[_N_GRAPH + 5]
    return out.update(weak_type=False), lse.update(weak_type=False)


def _vjp_abstract(*args, scale, has_edge, part):
    q, k, v, ef = args[_N_GRAPH:_N_GRAPH + 4]
    if part == "src":
        return k.update(weak_type=False), v.update(weak_type=False)
    return q.update(weak_type=False), ef.update(weak_type=False)


mha_simple_fwd_p.def_abstract_eval(_fwd_abstract)
mha_simple_jvp_p.def_abstract_eval(_jvp_abstract)
mha_simple_vjp_p.def_abstract_eval(_vjp_abstract)


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _edge_dot(ga, node_dst, node_src, ef, has_edge):
    """``<node_dst[i], node_src[j] (+ ef[e])>`` per (edge, head) with the SDDMM kernel, ``[E, H]``."""
    hc = tuple(node_src.shape[1:])
    d = sddmm(ga, node_dst, node_src, op="mul", lhs_target="dst", rhs_target="src", out_shape=hc, dot=True)
    if has_edge:
        d = d + sddmm(ga, node_dst, ef, op="mul", lhs_target="dst", rhs_target="edge", out_shape=hc, dot=True)
    return d


def _attention(ga, q, k, ef, lse, has_edge, scale):
    """``alpha [E, H]`` from the features and the log-sum-exp (composition path)."""
    return jnp.exp(scale * _edge_dot(ga, q, k, ef, has_edge) - lse[ga[1]])


def mha_simple_fwd_xla(*args, scale, has_edge):
    ga, (q, k, v, ef) = args[:_N_GRAPH], args[_N_GRAPH:]
    nd, src, dst = n_dst_of(ga), ga[0], ga[1]
    kp, vp = k[src], v[src]
    if has_edge:
        kp, vp = kp + ef, vp + ef
    z = scale * jnp.sum(q[dst] * kp, axis=-1)
    lse = segment_lse(z, dst, nd)
    alpha = jnp.exp(z - lse[dst])
    return jax.ops.segment_sum(alpha[..., None] * vp, dst, num_segments=nd), lse


def mha_simple_jvp_composed(*args, scale, has_edge):
    ga = args[:_N_GRAPH]
    q, k, v, ef, out, lse, dq, dk, dv, def_ = args[_N_GRAPH:]
    hc = tuple(k.shape[1:])
    alpha = _attention(ga, q, k, ef, lse, has_edge, scale)
    dz = scale * (_edge_dot(ga, dq, k, ef, has_edge) + _edge_dot(ga, q, dk, def_, has_edge))
    adz = alpha * dz
    dlse = spmm(ga, None, adz, op="copy_rhs", out_shape=hc[:1])[0]
    dout = (spmm(ga, dv, alpha[..., None], op="mul", out_shape=hc)[0]
            + spmm(ga, v, adz[..., None], op="mul", out_shape=hc)[0] - dlse[..., None] * out)
    if has_edge:
        dout = dout + spmm(ga, None, alpha[..., None] * def_ + adz[..., None] * ef, op="copy_rhs", out_shape=hc)[0]
    return dout, dlse


def mha_simple_vjp_composed(*args, scale, has_edge, part):
    ga = args[:_N_GRAPH]
    q, k, v, ef, lse, grad, delta = args[_N_GRAPH:]
    hc = tuple(k.shape[1:])
    alpha = _attention(ga, q, k, ef, lse, has_edge, scale)
    sds = scale * alpha * (_edge_dot(ga, grad, v, ef, has_edge) - delta[ga[1]])
    if part == "src":
        gk = spmm(ga, q, sds[..., None], op="mul", reverse=True, out_shape=hc)[0]
        gv = spmm(ga, grad, alpha[..., None], op="mul", reverse=True, out_shape=hc)[0]
        return gk, gv
    gq = spmm(ga, k, sds[..., None], op="mul", out_shape=hc)[0]
    if not has_edge:
        return gq, empty(gq.dtype)
    gq = gq + spmm(ga, None, sds[..., None] * ef, op="copy_rhs", out_shape=hc)[0]
    gef = (sddmm(ga, q, sds[..., None], op="mul", lhs_target="dst", rhs_target="edge", out_shape=hc)
           + sddmm(ga, grad, alpha[..., None], op="mul", lhs_target="dst", rhs_target="edge", out_shape=hc))
    return gq, gef


# ---------------------------------------------------------------------------------------
# FFI lowerings


def _mha_simple_fwd_ffi(*args, scale, has_edge):
    ga, (q, k, v, ef) = args[:_N_GRAPH], args[_N_GRAPH:]
    avals = _fwd_abstract(*args, scale=scale, has_edge=has_edge)
    call = jax.ffi.ffi_call("jgo_mha_simple_fwd", tuple(shape_dtype(a) for a in avals))
    return call(*ga[2:5], q, k, v, ef, scale=np.float64(scale), has_edge=bool(has_edge))


def _mha_simple_vjp_ffi(*args, scale, has_edge, part):
    ga = args[:_N_GRAPH]
    q, k, v, ef, lse, grad, delta = args[_N_GRAPH:]
    avals = _vjp_abstract(*args, scale=scale, has_edge=has_edge, part=part)
    info = jnp.stack([lse, delta], axis=1)  # [n_dst, 2, H]: one gathered row per edge
    target, walk = ("jgo_mha_simple_bwd_src", ga[5:8]) if part == "src" else ("jgo_mha_simple_bwd_dst", ga[2:5])
    call = jax.ffi.ffi_call(target, tuple(shape_dtype(a) for a in avals))
    return call(*walk, q, k, v, ef, info, grad, scale=np.float64(scale), has_edge=bool(has_edge))


for _p, _ref, _ffi, _abstract, _cuda_half in (
        (mha_simple_fwd_p, mha_simple_fwd_xla, _mha_simple_fwd_ffi, _fwd_abstract, True),
        (mha_simple_jvp_p, mha_simple_jvp_composed, mha_simple_jvp_composed, _jvp_abstract, False),
        (mha_simple_vjp_p, mha_simple_vjp_composed, _mha_simple_vjp_ffi, _vjp_abstract, True)):
    register_lowerings(_p, _ref, _ffi, multiple_results=True, abstract=_abstract, cuda_half=_cuda_half)


# ---------------------------------------------------------------------------------------
# Differentiation


def _mha_simple_fwd_jvp(primals, tangents, *, scale, has_edge):
    params = dict(scale=scale, has_edge=has_edge)
    out, lse = mha_simple_fwd_p.bind(*primals, **params)
    ts = tangents[_N_GRAPH:]
    if all_zero(ts):
        return (out, lse), (zero_tangent(out), zero_tangent(lse))
    dq, dk, dv, def_ = (ad.instantiate_zeros(t) for t in ts)
    dout, dlse = mha_simple_jvp_p.bind(*primals, out, lse, dq, dk, dv, def_, **params)
    return (out, lse), (dout, dlse)


def _mha_simple_jvp_transpose(cts, *args, scale, has_edge):
    ga = args[:_N_GRAPH]
    primals = args[_N_GRAPH:_N_GRAPH + 6]
    for name, v in zip(("query", "key", "value", "edge_feat", "out", "lse"), primals):
        if ad.is_undefined_primal(v):
            raise NotImplementedError(f"mha_simple_jvp is not linear in {name}")
    q, k, v, ef, out, lse = primals
    i_q, i_k, i_v, i_ef = range(_N_GRAPH + 6, _N_GRAPH + 10)
    result = [None] * len(args)
    undefined = [i for i in (i_q, i_k, i_v, i_ef) if ad.is_undefined_primal(args[i])]
    if all_zero(cts):
        for i in undefined:
            result[i] = ad.Zero(args[i].aval)
        return result
    ct_out, ct_lse = (ad.instantiate_zeros(c) for c in cts)
    delta = jnp.sum(ct_out.astype(lse.dtype) * out.astype(lse.dtype), axis=-1) - ct_lse
    params = dict(scale=scale, has_edge=has_edge)
    operands = (*ga, q, k, v, ef, lse, ct_out, delta)
    for part, slots in (("src", (i_k, i_v)), ("dst", (i_q, i_ef))):
        if any(i in undefined for i in slots):
            grads = mha_simple_vjp_p.bind(*operands, part=part, **params)
            for i, gr in zip(slots, grads):
                result[i] = gr if i in undefined else None
    return result


ad.primitive_jvps[mha_simple_fwd_p] = _mha_simple_fwd_jvp
ad.primitive_jvps[mha_simple_jvp_p] = composed_jvp(in_float32(mha_simple_jvp_composed, _jvp_abstract),
                                                   mha_simple_jvp_p)
ad.primitive_transposes[mha_simple_jvp_p] = _mha_simple_jvp_transpose
ad.primitive_jvps[mha_simple_vjp_p] = composed_jvp(in_float32(mha_simple_vjp_composed, _vjp_abstract),
                                                   mha_simple_vjp_p)


# ---------------------------------------------------------------------------------------
# Batching: heads are independent, so a batch over the float operands folds into the head axis
# (one kernel call, head index b * H + h); a batch over graphs runs the graphs one after another.

for _p in (mha_simple_fwd_p, mha_simple_jvp_p, mha_simple_vjp_p):
    batching.primitive_batchers[_p] = fold_batch_into_heads(_p)


# ---------------------------------------------------------------------------------------
# Binders


def mha_simple_core(ga, q, k, v, ef, *, scale):
    """``(out [Nd,H,C], lse [Nd,H])`` of the fused forward; ``ef`` may be None."""
    has_edge = ef is not None
    ef = ef if has_edge else empty(q.dtype)
    return mha_simple_fwd_p.bind(*ga, q, k, v, ef, scale=float(scale), has_edge=has_edge)


def attention_weights_simple(ga, q, k, ef, lse, *, scale):
    """``alpha [E, H]`` in input edge order, from the features and the forward's log-sum-exp."""
    q, k, ef = (None if x is None else x.astype(lse.dtype) for x in (q, k, ef))
    return _attention(ga, q, k, ef, lse, ef is not None, scale)
