"""Primitives of the fused multi-head GAT attention op, described for the primitive kit
(:mod:`._primitive_kit`), which derives the primitives and their rules.

Per head ``h`` and edge ``e = (j -> i)``, with per-node scores computed in JAX
(``s_src = <a_src, x_src>``, ``s_dst = <a_dst, x_dst>``, ``s_edge = <a_edge, edge_feat>``)::

    p_e = s_src[j] + s_dst[i] (+ s_edge[e]),   z_e = leaky_relu(p_e)
    lse[i] = log sum_{e into i} exp(z_e),      alpha_e = exp(z_e - lse[i])
    out[i] = sum_{e into i} alpha_e x[j]

``jgo_gat_fwd``  fused forward: ``(x, s_src, s_dst, s_edge) -> (out [Nd,H,C], lse [Nd,H])`` (one
                 pass per destination with an online softmax; ``lse`` is 0 for an empty row).
``jgo_gat_jvp``  its JVP, linear in the tangents ``(dx, ds_src, ds_dst, ds_edge)``:
                 ``dz = leaky_relu'(p) dp``, ``dlse = sum alpha dz``,
                 ``dout = sum alpha (dx[j] + dz x[j]) - dlse out``. Its transpose is ``jgo_gat_vjp``.
``jgo_gat_vjp``  the fused backward kernels, given ``G = ct_out`` and
                 ``delta = <G, out> - ct_lse``, with ``gp_e = alpha_e (<G[i], x[j]> - delta[i]) leaky_relu'(p_e)``:
                 ``part="src"`` (reverse CSR, no atomics): ``grad_x[j] = sum alpha G[i]``, ``grad_s_src[j] = sum gp``;
                 ``part="dst"`` (CSC): ``grad_s_dst[i] = sum gp``, ``grad_s_edge[e] = gp``.

With ``dropout_rate`` > 0 the weights that sum ``x`` are ``alpha_e f_e`` (the dropout factors of the
key operand, :mod:`._attention_math`): ``out`` and ``grad_x`` take them, and ``gp_e`` takes
``f_e <G[i], x[j]>``; ``lse`` is unchanged.

All float operands are ``[rows, H, ...]``; an absent ``s_edge`` (``has_edge=False``) is an
empty ``[0]`` array. Features (``x``, ``out``, their tangents and cotangents) may be bfloat16 or
float16 with float32 scores: the CUDA kernels read and write them as they are and compute in
float32; the CPU kernels and the compositions get them converted to float32.
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
    leaky_relu,
    leaky_relu_slope,
    softmax_aggregate,
    softmax_aggregate_jvp,
    times,
)
from ._primitive_kit import FusedOp, fused_op
from ._primitive_utils import empty, rows, shape_dtype
from ._primitives import sddmm, spmm


def _fwd_abstract(ga, key, x, s_src, s_dst, s_edge, *, negative_slope, has_edge, dropout_rate):
    nd, h = s_dst.shape
    return x.update(shape=(nd, h, x.shape[2])), s_dst


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _edge_logits(ga, s_src, s_dst, s_edge, has_edge, slope):
    p = rows(s_src, ga.src) + rows(s_dst, ga.dst)
    if has_edge:
        p = p + s_edge
    return p, leaky_relu(p, slope)


def _fwd_xla(ga, key, x, s_src, s_dst, s_edge, *, negative_slope, has_edge, dropout_rate):
    _, z = _edge_logits(ga, s_src, s_dst, s_edge, has_edge, negative_slope)
    return softmax_aggregate(ga, z, rows(x, ga.src), dropout_factors(ga, key, z.shape[1], dropout_rate, z.dtype))


def _jvp_composed(ga, key, x, s_src, s_dst, s_edge, out, lse, dx, ds_src, ds_dst, ds_edge, *, negative_slope,
                  has_edge, dropout_rate):
    p, z = _edge_logits(ga, s_src, s_dst, s_edge, has_edge, negative_slope)
    alpha = jnp.exp(z - rows(lse, ga.dst))
    dp = rows(ds_src, ga.src) + rows(ds_dst, ga.dst)
    if has_edge:
        dp = dp + ds_edge
    return softmax_aggregate_jvp(ga, x, dx, alpha, alpha * leaky_relu_slope(p, negative_slope) * dp, out,
                                 dropout_factors(ga, key, z.shape[1], dropout_rate, z.dtype))


def _vjp_composed(ga, key, x, s_src, s_dst, s_edge, lse, grad, delta, *, negative_slope, has_edge, dropout_rate,
                  part):
    hc = tuple(x.shape[1:])
    p, z = _edge_logits(ga, s_src, s_dst, s_edge, has_edge, negative_slope)
    alpha = jnp.exp(z - rows(lse, ga.dst))
    f = dropout_factors(ga, key, z.shape[1], dropout_rate, z.dtype)
    dalpha = times(sddmm(ga, grad, x, op="mul", lhs_target="dst", rhs_target="src", out_shape=hc, dot=True), f)
    gp = alpha * (dalpha - rows(delta, ga.dst)) * leaky_relu_slope(p, negative_slope)
    if part == "src":
        gx = spmm(ga, grad, times(alpha, f)[..., None], op="mul", reverse=True, out_shape=hc)[0]
        return gx, spmm(ga, None, gp, op="copy_rhs", reverse=True, out_shape=hc[:1])[0]
    gsd = spmm(ga, None, gp, op="copy_rhs", out_shape=hc[:1])[0]
    return gsd, (gp if has_edge else empty(gp.dtype))


# ---------------------------------------------------------------------------------------
# FFI calls


def _fwd_ffi(ga, key, x, s_src, s_dst, s_edge, *, negative_slope, has_edge, dropout_rate):
    avals = _fwd_abstract(ga, None, *(jax.typeof(v) for v in (x, s_src, s_dst, s_edge)),
                          negative_slope=negative_slope, has_edge=has_edge, dropout_rate=dropout_rate)
    call = jax.ffi.ffi_call("jgo_gat_fwd", tuple(shape_dtype(a) for a in avals))
    return call(*ga.csc, x, s_src, s_dst, s_edge, key, negative_slope=np.float64(negative_slope),
                has_edge=bool(has_edge), **dropout_attributes(dropout_rate))


def _vjp_ffi(ga, key, x, s_src, s_dst, s_edge, lse, grad, delta, *, negative_slope, has_edge, dropout_rate, part):
    dst_info = jnp.stack([s_dst, lse, delta], axis=1)  # [n_dst, 3, H]: one gathered row per edge
    grads = GAT.op.parts[part]
    operands = dict(x=x, s_src=s_src, s_dst=s_dst, s_edge=s_edge)
    target, walk = ("jgo_gat_bwd_src", ga.csr) if part == "src" else ("jgo_gat_bwd_dst", ga.csc)
    call = jax.ffi.ffi_call(target, tuple(shape_dtype(operands[name]) for name in grads))
    return call(*walk, x, s_src, s_edge, dst_info, grad, key, negative_slope=np.float64(negative_slope),
                has_edge=bool(has_edge), **dropout_attributes(dropout_rate))


GAT = fused_op(FusedOp(
    name="gat", inputs=("x", "s_src", "s_dst", "s_edge"), edge_arrays=("s_edge",),
    parts={"src": ("x", "s_src"), "dst": ("s_dst", "s_edge")},
    forward_abstract=_fwd_abstract, forward=_fwd_xla, forward_ffi=_fwd_ffi, jvp=_jvp_composed, vjp=_vjp_composed,
    vjp_ffi=_vjp_ffi, keyed=True, **SOFTMAX_ATTENTION))


def gat(ga, x, s_src, s_dst, s_edge, *, negative_slope, dropout_rate=0.0, dropout_key=None):
    """``(out [Nd,H,C], lse [Nd,H])`` of the fused GAT forward; ``s_edge`` may be None; ``dropout_key``
    (uint32[2]) is needed when ``dropout_rate`` > 0."""
    has_edge = s_edge is not None
    s_edge = s_edge if has_edge else empty(s_src.dtype)
    return GAT.bind(ga, dropout_operand(dropout_key, dropout_rate), x, s_src, s_dst, s_edge,
                    negative_slope=float(negative_slope), has_edge=has_edge, dropout_rate=float(dropout_rate))


def attention_weights(ga, s_src, s_dst, s_edge, lse, *, negative_slope, dropout_rate=0.0, dropout_key=None):
    """``alpha [E, H]`` in input edge order (times the dropout factors), from the scores and the forward's
    log-sum-exp; 0 at the padding edges, whose scores are never read."""
    ga = ga.padding_dropped()
    s_edge = None if s_edge is None else ga.at_real_edges(s_edge)
    _, z = _edge_logits(ga, s_src, s_dst, s_edge, s_edge is not None, negative_slope)
    alpha = jnp.exp(z - rows(lse, ga.dst))
    return ga.at_real_edges(times(alpha, dropout_factors(ga, dropout_key, z.shape[1], dropout_rate, z.dtype)))
