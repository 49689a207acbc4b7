"""Primitives of the fused TransformerConv attention op (``mha_simple``), described for the primitive kit
(:mod:`._primitive_kit`), which derives the primitives and their rules.

Per head ``h`` and edge ``e = (j -> i)``, with ``k'_e = k[j] (+ ef[e])`` and ``v'_e = v[j] (+ ef[e])``::

    z_e = scale <q[i], k'_e>,   lse[i] = log sum_{e into i} exp(z_e),   alpha_e = exp(z_e - lse[i])
    out[i] = sum_{e into i} alpha_e v'_e

``jgo_mha_simple_fwd``  fused forward: ``(q, k, v, ef) -> (out [Nd,H,C], lse [Nd,H])`` (one pass per
                        destination with an online softmax; ``k'``, ``v'`` are never stored; ``lse``
                        is 0 for an empty row).
``jgo_mha_simple_jvp``  its JVP, linear in the tangents ``(dq, dk, dv, def)``:
                        ``dz = scale (<dq[i], k'> + <q[i], dk[j] + def>)``, ``dlse = sum alpha dz``,
                        ``dout = sum alpha (dv[j] + def + dz v') - dlse out``. Its transpose is
                        ``jgo_mha_simple_vjp``.
``jgo_mha_simple_vjp``  the fused backward kernels, given ``G = ct_out`` and ``delta = <G, out> - ct_lse``,
                        with ``ds_e = alpha_e (<G[i], v'_e> - delta[i])``:
                        ``part="src"`` (reverse CSR, no atomics): ``grad_k[j] = sum scale ds q[i]``,
                        ``grad_v[j] = sum alpha G[i]``;
                        ``part="dst"`` (CSC): ``grad_q[i] = sum scale ds k'``,
                        ``grad_ef[e] = scale ds q[i] + alpha G[i]``.

With ``dropout_rate`` > 0 the weights that sum ``v'`` are ``alpha_e f_e`` (the dropout factors of the
key operand, :mod:`._attention_math`): ``out``, ``grad_v`` and the ``alpha G`` term of ``grad_ef`` take
them, and ``ds_e`` takes ``f_e <G[i], v'_e>``; ``lse`` is unchanged.

All float operands are ``[rows, H, ...]``; an absent ``ef`` (``has_edge=False``) is an empty
``[0]`` array. Features (``q``, ``k``, ``v``, ``ef``, ``out``, their tangents and cotangents) may
be bfloat16 or float16, with ``lse`` in float32: the CUDA kernels read and write them as they are
and compute in float32; the CPU kernels and the compositions get them converted to float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._attention_math import (
    SOFTMAX_ATTENTION,
    dropout_attributes,
    dropout_factors,
    dropout_operand,
    softmax_aggregate,
    softmax_aggregate_jvp,
    times,
)
from ._primitive_kit import FusedOp, fused_op
from ._primitive_utils import HALF_TYPES, empty, rows, shape_dtype
from ._primitives import sddmm, spmm


def _fwd_abstract(ga, key, q, k, v, ef, *, scale, has_edge, dropout_rate):
    score = jnp.float32 if q.dtype in HALF_TYPES else q.dtype
    return q, q.update(shape=q.shape[:2], dtype=score)


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
    return jnp.exp(scale * _edge_dot(ga, q, k, ef, has_edge) - rows(lse, ga.dst))


def _logits_xla(ga, q, k, ef, has_edge, scale):
    """``z [E, H] = scale <q[i], k[j] (+ ef[e])>`` with plain gathers, as the kernels form it (one dot with the
    sum: an infinite query meets ``k + ef``, never ``k`` and ``ef`` apart)."""
    kp = rows(k, ga.src) + ef if has_edge else rows(k, ga.src)
    return scale * jnp.sum(rows(q, ga.dst) * kp, axis=-1)


def _fwd_xla(ga, key, q, k, v, ef, *, scale, has_edge, dropout_rate):
    vp = rows(v, ga.src) + ef if has_edge else rows(v, ga.src)
    z = _logits_xla(ga, q, k, ef, has_edge, scale)
    return softmax_aggregate(ga, z, vp, dropout_factors(ga, key, z.shape[1], dropout_rate, z.dtype))


def _jvp_composed(ga, key, q, k, v, ef, out, lse, dq, dk, dv, def_, *, scale, has_edge, dropout_rate):
    hc = tuple(k.shape[1:])
    alpha = _attention(ga, q, k, ef, lse, has_edge, scale)
    f = dropout_factors(ga, key, alpha.shape[1], dropout_rate, alpha.dtype)
    dz = scale * (_edge_dot(ga, dq, k, ef, has_edge) + _edge_dot(ga, q, dk, def_, has_edge))
    adz = alpha * dz
    dout, dlse = softmax_aggregate_jvp(ga, v, dv, alpha, adz, out, f)
    if has_edge:
        dout = dout + spmm(ga, None, times(alpha, f)[..., None] * def_ + times(adz, f)[..., None] * ef,
                           op="copy_rhs", out_shape=hc)[0]
    return dout, dlse


def _vjp_composed(ga, key, q, k, v, ef, lse, grad, delta, *, scale, has_edge, dropout_rate, part):
    hc = tuple(k.shape[1:])
    alpha = _attention(ga, q, k, ef, lse, has_edge, scale)
    f = dropout_factors(ga, key, alpha.shape[1], dropout_rate, alpha.dtype)
    sds = scale * alpha * (times(_edge_dot(ga, grad, v, ef, has_edge), f) - rows(delta, ga.dst))
    alpha = times(alpha, f)  # the weight of G in grad_v and grad_ef
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
# FFI calls


def _fwd_ffi(ga, key, q, k, v, ef, *, scale, has_edge, dropout_rate):
    avals = _fwd_abstract(ga, None, *(jax.typeof(x) for x in (q, k, v, ef)), scale=scale, has_edge=has_edge,
                          dropout_rate=dropout_rate)
    call = jax.ffi.ffi_call("jgo_mha_simple_fwd", tuple(shape_dtype(a) for a in avals))
    return call(*ga.csc, q, k, v, ef, key, scale=np.float64(scale), has_edge=bool(has_edge),
                **dropout_attributes(dropout_rate))


def _vjp_ffi(ga, key, q, k, v, ef, lse, grad, delta, *, scale, has_edge, dropout_rate, part):
    operands = dict(query=q, key=k, value=v, edge_feat=ef)
    info = jnp.stack([lse, delta], axis=1)  # [n_dst, 2, H]: one gathered row per edge
    target, walk = ("jgo_mha_simple_bwd_src", ga.csr) if part == "src" else ("jgo_mha_simple_bwd_dst", ga.csc)
    call = jax.ffi.ffi_call(target, tuple(shape_dtype(operands[name]) for name in MHA_SIMPLE.op.parts[part]))
    return call(*walk, q, k, v, ef, info, grad, key, scale=np.float64(scale), has_edge=bool(has_edge),
                **dropout_attributes(dropout_rate))


MHA_SIMPLE = fused_op(FusedOp(
    name="mha_simple", inputs=("query", "key", "value", "edge_feat"), edge_arrays=("edge_feat",),
    parts={"src": ("key", "value"), "dst": ("query", "edge_feat")}, forward_abstract=_fwd_abstract,
    forward=_fwd_xla, forward_ffi=_fwd_ffi, jvp=_jvp_composed, vjp=_vjp_composed, vjp_ffi=_vjp_ffi,
    keyed=True, **SOFTMAX_ATTENTION))


def mha_simple_core(ga, q, k, v, ef, *, scale, dropout_rate=0.0, dropout_key=None):
    """``(out [Nd,H,C], lse [Nd,H])`` of the fused forward; ``ef`` may be None; ``dropout_key`` (uint32[2]) is
    needed when ``dropout_rate`` > 0."""
    has_edge = ef is not None
    ef = ef if has_edge else empty(q.dtype)
    return MHA_SIMPLE.bind(ga, dropout_operand(dropout_key, dropout_rate), q, k, v, ef, scale=float(scale),
                           has_edge=has_edge, dropout_rate=float(dropout_rate))


def attention_weights_simple(ga, q, k, ef, lse, *, scale, dropout_rate=0.0, dropout_key=None):
    """``alpha [E, H]`` in input edge order (times the dropout factors), from the features and the forward's
    log-sum-exp; 0 at the padding edges, whose features are never read."""
    ga = ga.padding_dropped()
    q, k, ef = (None if x is None else x.astype(lse.dtype) for x in (q, k, ef))
    ef = None if ef is None else ga.at_real_edges(ef)
    z = _logits_xla(ga, q, k, ef, ef is not None, scale)
    alpha = jnp.exp(z - rows(lse, ga.dst))
    return ga.at_real_edges(times(alpha, dropout_factors(ga, dropout_key, z.shape[1], dropout_rate, z.dtype)))
