"""The softmax attention the attention families share, in pure JAX (the fallbacks and the JVPs).

Per head, with logits ``z [E, H]`` and values ``[E, H, C]``: ``lse`` the log-sum-exp of ``z`` over each
destination's in-edges, ``alpha = exp(z - lse[dst])``, ``out = sum_e alpha * value``.

Attention dropout multiplies the normalised weights by factors ``f [E, H]`` (0 or ``1 / (1 - rate)``,
:func:`dropout_factors`): ``out = sum_e alpha f value`` with ``lse`` unchanged, so ``dlse = sum alpha dz``,
``dout = sum alpha f (dvalue + dz value) - dlse out``, and the backward's ``dalpha = f <G, value>``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._philox import attention_dropout_factor, dropout_threshold
from ._primitive_utils import empty, rows
from ._primitives import spmm


def leaky_relu(t, slope):
    return jnp.where(t > 0, t, slope * t)


def leaky_relu_slope(t, slope):
    """The derivative of ``leaky_relu`` (``slope`` at 0, as in PyTorch)."""
    return jnp.where(t > 0, jnp.ones_like(t), jnp.full_like(t, slope))


def segment_lse(z, dst, n_dst):
    """``lse [n_dst, ...]``: the log-sum-exp of the logits ``z [E, ...]`` over each destination's
    in-edges, 0 for a destination without any (what the fused forward kernels return)."""
    m = jax.ops.segment_max(z, dst, num_segments=n_dst)
    m = jnp.where(jnp.isfinite(m), m, 0)
    total = jax.ops.segment_sum(jnp.exp(z - rows(m, dst)), dst, num_segments=n_dst)
    nonempty = total > 0
    return jnp.where(nonempty, m + jnp.log(jnp.where(nonempty, total, 1)), 0)


def dropout_factors(ga, key, heads, dropout_rate, dtype):
    """The dropout factors ``[E, H]`` of the key operand (:func:`jaxgraphops._philox.attention_dropout_factor`),
    or None for ``dropout_rate`` 0."""
    if not dropout_rate:
        return None
    return attention_dropout_factor(key, ga.n_edges, heads, dropout_rate, dtype)


def times(alpha, factors):
    """``alpha * factors`` (``alpha`` itself without dropout)."""
    return alpha if factors is None else alpha * factors


def dropout_operand(key, dropout_rate):
    """The key operand of a keyed primitive: the key's words, or an empty uint32 array for rate 0."""
    return key if dropout_rate else empty(jnp.uint32)


def dropout_attributes(dropout_rate):
    """The dropout attributes of the attention FFI calls (ffi/common/jgo/attention_args.h)."""
    rate = float(dropout_rate)
    return dict(dropout_threshold=np.int64(dropout_threshold(rate)),
                dropout_scale=np.float64(1.0 / (1.0 - rate)))


def softmax_aggregate(ga, z, values, factors=None):
    """``(out [n_dst, H, C], lse [n_dst, H])``: the softmax of the logits ``z [E, H]`` over each destination's
    in-edges (:func:`segment_lse`) and the sum of ``values [E, H, C]`` it weighs, times the dropout
    ``factors [E, H]`` if given (the attention forward in pure JAX)."""
    lse = segment_lse(z, ga.dst, ga.n_dst)
    alpha = times(jnp.exp(z - rows(lse, ga.dst)), factors)
    return jax.ops.segment_sum(alpha[..., None] * values, ga.dst, num_segments=ga.n_dst), lse


def softmax_cotangents(*residuals_and_cts, **params):
    """``(lse, G, delta)`` for the backward of an attention forward ``(out, lse)``, from its operands
    ``(..., out, lse)`` and cotangents ``(ct_out, ct_lse)``: ``G = ct_out``,
    ``delta = <G, out> - ct_lse`` per (destination, head), in ``lse``'s dtype."""
    *_, out, lse, ct_out, ct_lse = residuals_and_cts
    delta = jnp.sum(ct_out.astype(lse.dtype) * out.astype(lse.dtype), axis=-1) - ct_lse
    return lse, ct_out, delta


def softmax_aggregate_jvp(ga, values, d_values, alpha, adz, out, factors=None):
    """``(dout [n_dst, H, C], dlse [n_dst, H])``: the tangents of :func:`softmax_aggregate`'s results for
    values gathered from the sources, ``values, d_values [n_src, H, C]`` (value and tangent), the weights
    ``alpha [E, H]``, ``adz = alpha * dz`` (``dz`` the tangent of the logits) and the dropout ``factors``."""
    hc = tuple(values.shape[1:])
    dlse = spmm(ga, None, adz, op="copy_rhs", out_shape=hc[:1])[0]
    dout = (spmm(ga, d_values, times(alpha, factors)[..., None], op="mul", out_shape=hc)[0]
            + spmm(ga, values, times(adz, factors)[..., None], op="mul", out_shape=hc)[0] - dlse[..., None] * out)
    return dout, dlse


SOFTMAX_ATTENTION = dict(outputs=("out", "lse"), cotangent_operands=("lse", "grad", "delta"),
                         cotangents=softmax_cotangents)
"""The :class:`~._primitive_kit.FusedOp` fields of a forward ``(out, lse)`` whose backward kernels read
``(lse, G, delta)`` (:func:`softmax_cotangents`)."""
