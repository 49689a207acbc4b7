"""Primitives of the fused multi-head GATv2 attention op, described for the primitive kit
(:mod:`._primitive_kit`), which derives the primitives and their rules.

Per head ``h`` and edge ``e = (j -> i)``, with ``t_e = xs[j] + xd[i] (+ ef[e])`` (a ``C``-vector)::

    z_e = <a[h], leaky_relu(t_e)>,   lse[i] = log sum_{e into i} exp(z_e),   alpha_e = exp(z_e - lse[i])
    out[i] = sum_{e into i} alpha_e xs[j]

``jgo_gatv2_fwd``  fused forward: ``(xs, xd, a, ef) -> (out [Nd,H,C], lse [Nd,H])`` (one pass per
                   destination with an online softmax; ``t_e`` is never stored; ``lse`` is 0 for an
                   empty row).
``jgo_gatv2_jvp``  its JVP, linear in the tangents ``(dxs, dxd, da, def)``:
                   ``dz = <da, leaky_relu(t)> + <a, leaky_relu'(t) (dxs[j] + dxd[i] + def)>``,
                   ``dlse = sum alpha dz``, ``dout = sum alpha (dxs[j] + dz xs[j]) - dlse out``.
                   Its transpose is ``jgo_gatv2_vjp``.
``jgo_gatv2_vjp``  the fused backward kernels, given ``G = ct_out`` and ``delta = <G, out> - ct_lse``,
                   with ``dz_e = alpha_e (<G[i], xs[j]> - delta[i])`` and ``dt_e = dz_e a leaky_relu'(t_e)``:
                   ``part="src"`` (reverse CSR, no atomics): ``grad_xs[j] = sum alpha G[i] + dt``;
                   ``part="dst"`` (CSC): ``grad_xd[i] = sum dt``, ``grad_a = sum dz leaky_relu(t)``
                   (per-destination partials from the kernel, summed here in a fixed order by
                   ``rows_dot``), ``grad_ef[e] = dt``.

With ``dropout_rate`` > 0 the weights that sum ``xs`` are ``alpha_e f_e`` (the dropout factors of the
key operand, :mod:`._attention_math`): ``out`` and the ``alpha G`` term of ``grad_xs`` take them, and
``dz_e`` takes ``f_e <G[i], xs[j]>``; ``lse`` is unchanged.

Float operands are ``[rows, H, ...]`` except the attention weights ``a [H, C]``; an absent
``ef`` (``has_edge=False``) is an empty ``[0]`` array. Features (``xs``, ``xd``, ``ef``, ``out``
and their tangents and cotangents) may be bfloat16 or float16 with float32 ``a``: the CUDA
kernels read and write them as they are and compute in float32; the CPU kernels and the
compositions get them converted to float32.
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
from ._rows_primitives import rows_dot


def _fwd_abstract(ga, key, xs, xd, a, ef, *, negative_slope, has_edge, dropout_rate):
    nd, h, _ = xd.shape
    return xs.update(shape=(nd, h, xs.shape[2])), a.update(shape=(nd, h))


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _pre(ga, xs, xd, ef, has_edge):
    """``t [E, H, C] = xs[src] + xd[dst] (+ ef)`` (composition path only)."""
    t = sddmm(ga, xs, xd, op="add", lhs_target="src", rhs_target="dst", out_shape=tuple(xs.shape[1:]))
    return t + ef if has_edge else t


def edge_logits_xla(ga, xs, xd, a, ef, has_edge, slope):
    """``(t, z)`` with plain gathers: ``t [E, H, C]``, ``z [E, H]``."""
    t = rows(xs, ga.src) + rows(xd, ga.dst)
    if has_edge:
        t = t + ef
    return t, jnp.sum(a * leaky_relu(t, slope), axis=-1)


def _fwd_xla(ga, key, xs, xd, a, ef, *, negative_slope, has_edge, dropout_rate):
    _, z = edge_logits_xla(ga, xs, xd, a, ef, has_edge, negative_slope)
    return softmax_aggregate(ga, z, rows(xs, ga.src), dropout_factors(ga, key, z.shape[1], dropout_rate, z.dtype))


def _jvp_composed(ga, key, xs, xd, a, ef, out, lse, dxs, dxd, da, def_, *, negative_slope, has_edge, dropout_rate):
    t = _pre(ga, xs, xd, ef, has_edge)
    u = leaky_relu(t, negative_slope)
    alpha = jnp.exp(jnp.sum(a * u, axis=-1) - rows(lse, ga.dst))
    dt = _pre(ga, dxs, dxd, def_, has_edge)
    dz = jnp.sum(da * u, axis=-1) + jnp.sum(a * leaky_relu_slope(t, negative_slope) * dt, axis=-1)
    return softmax_aggregate_jvp(ga, xs, dxs, alpha, alpha * dz, out,
                                 dropout_factors(ga, key, dz.shape[1], dropout_rate, dz.dtype))


def _vjp_composed(ga, key, xs, xd, a, ef, lse, grad, delta, *, negative_slope, has_edge, dropout_rate, part):
    hc = tuple(xs.shape[1:])
    t = _pre(ga, xs, xd, ef, has_edge)
    u = leaky_relu(t, negative_slope)
    alpha = jnp.exp(jnp.sum(a * u, axis=-1) - rows(lse, ga.dst))
    f = dropout_factors(ga, key, alpha.shape[1], dropout_rate, alpha.dtype)
    dalpha = times(sddmm(ga, grad, xs, op="mul", lhs_target="dst", rhs_target="src", out_shape=hc, dot=True), f)
    dz = alpha * (dalpha - rows(delta, ga.dst))
    dt = dz[..., None] * a * leaky_relu_slope(t, negative_slope)
    if part == "src":
        gxs = (spmm(ga, grad, times(alpha, f)[..., None], op="mul", reverse=True, out_shape=hc)[0]
               + spmm(ga, None, dt, op="copy_rhs", reverse=True, out_shape=hc)[0])
        return (gxs,)
    gxd = spmm(ga, None, dt, op="copy_rhs", out_shape=hc)[0]
    g_a = rows_dot(u, dz[..., None])[..., 0]  # a sum over the edges in a fixed order
    return gxd, g_a, (dt if has_edge else empty(dt.dtype))


# ---------------------------------------------------------------------------------------
# FFI calls


def _fwd_ffi(ga, key, xs, xd, a, ef, *, negative_slope, has_edge, dropout_rate):
    avals = _fwd_abstract(ga, None, jax.typeof(xs), jax.typeof(xd), jax.typeof(a), jax.typeof(ef),
                          negative_slope=negative_slope, has_edge=has_edge, dropout_rate=dropout_rate)
    call = jax.ffi.ffi_call("jgo_gatv2_fwd", tuple(shape_dtype(v) for v in avals))
    return call(*ga.csc, xs, xd, a, ef, key, negative_slope=np.float64(negative_slope), has_edge=bool(has_edge),
                **dropout_attributes(dropout_rate))


def _vjp_ffi(ga, key, xs, xd, a, ef, lse, grad, delta, *, negative_slope, has_edge, dropout_rate, part):
    info = jnp.stack([lse, delta], axis=1)  # [n_dst, 2, H]: one gathered row per edge
    attrs = dict(negative_slope=np.float64(negative_slope), has_edge=bool(has_edge), **dropout_attributes(dropout_rate))
    if part == "src":
        call = jax.ffi.ffi_call("jgo_gatv2_bwd_src", (shape_dtype(xs),))
        return tuple(call(*ga.csr, xs, xd, a, ef, info, grad, key, **attrs))
    rows = jax.ShapeDtypeStruct(xd.shape, a.dtype)
    call = jax.ffi.ffi_call("jgo_gatv2_bwd_dst", (shape_dtype(xd), rows, shape_dtype(ef)))
    gxd, ga_rows, gef = call(*ga.csc, xs, xd, a, ef, info, grad, key, **attrs)
    # the per-destination weight-gradient partials, summed in a fixed order (any thread count)
    return gxd, rows_dot(ga_rows)[..., 0], gef


GATV2 = fused_op(FusedOp(
    name="gatv2", inputs=("x_src", "x_dst", "attn_weights", "edge_feat"), edge_arrays=("edge_feat",),
    head_leading=("attn_weights",),
    parts={"src": ("x_src",), "dst": ("x_dst", "attn_weights", "edge_feat")}, forward_abstract=_fwd_abstract,
    forward=_fwd_xla, forward_ffi=_fwd_ffi, jvp=_jvp_composed, vjp=_vjp_composed, vjp_ffi=_vjp_ffi,
    keyed=True, **SOFTMAX_ATTENTION))


def gatv2(ga, xs, xd, a, ef, *, negative_slope, dropout_rate=0.0, dropout_key=None):
    """``(out [Nd,H,C], lse [Nd,H])`` of the fused GATv2 forward; ``ef`` may be None; ``dropout_key``
    (uint32[2]) is needed when ``dropout_rate`` > 0."""
    has_edge = ef is not None
    ef = ef if has_edge else empty(xs.dtype)
    return GATV2.bind(ga, dropout_operand(dropout_key, dropout_rate), xs, xd, a, ef,
                      negative_slope=float(negative_slope), has_edge=has_edge, dropout_rate=float(dropout_rate))


def attention_weights_v2(ga, xs, xd, a, ef, lse, *, negative_slope, dropout_rate=0.0, dropout_key=None):
    """``alpha [E, H]`` in input edge order (times the dropout factors), from the features and the forward's
    log-sum-exp; 0 at the padding edges, whose features are never read."""
    ga = ga.padding_dropped()
    xs, xd, ef = (None if x is None else x.astype(lse.dtype) for x in (xs, xd, ef))
    ef = None if ef is None else ga.at_real_edges(ef)
    _, z = edge_logits_xla(ga, xs, xd, a, ef, ef is not None, negative_slope)
    alpha = jnp.exp(z - rows(lse, ga.dst))
    return ga.at_real_edges(times(alpha, dropout_factors(ga, dropout_key, z.shape[1], dropout_rate, z.dtype)))
