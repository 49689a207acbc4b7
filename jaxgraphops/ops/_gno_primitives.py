"""Primitives of the fused graph-neural-operator kernel integral, their lowerings and rules.

Per edge ``e = (j -> i)`` with geometry ``dx_e``, weight ``w_e`` (1 without weights)::

    h_e = relu(U dx_e + b_u)                       [H]
    kappa_e = V h_e + b_v                          matrix: [c_out * c_in] viewed (c_out, c_in); diagonal: [c]
    out[i] = sum_{e into i} w_e K_e f[j]           (matrix: K_e @ f[j]; diagonal: kappa_e * f[j])

A fused op family (:mod:`._primitive_kit`, which derives the primitives and their rules):

``gno_fwd``  fused forward ``(f, dx, U, b_u, V, b_v, w) -> out [n_dst, c_out]``. The kernel
             accumulates ``A_i = sum_e w_e f_j (x) [h_e, 1]`` per destination (``c_in (H+1)``
             numbers) and contracts it with ``[V | b_v]`` once per row: kappa is never formed.
``gno_jvp``  its JVP, the JVP of the pure-JAX composition.
``gno_vjp``  the fused backward kernels, given ``G = ct_out``: ``part="src"`` (reverse CSR, no
             atomics) gives ``(grad_f, grad_V, grad_b_v)``; ``part="dst"`` (CSC) gives
             ``(grad_dx, grad_U, grad_b_u, grad_w)``. Parameter gradients are per-task partial
             sums reduced in a fixed order.

Second and higher orders differentiate the pure-JAX compositions (correct, and they do form
kappa). An absent ``w`` (``has_weight=False``) is an empty ``[0]`` array. A batch (vmap) runs
the batch elements one after another.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._primitive_kit import FusedOp, fused_op
from ._primitive_utils import empty, rows, shape_dtype

_HIGHEST = jax.lax.Precision.HIGHEST


def c_out_of(f, V, diagonal):
    return f.shape[1] if diagonal else V.shape[0] // f.shape[1]


def _fwd_abstract(ga, f, dx, U, b_u, V, b_v, w, *, diagonal, has_weight):
    return (f.update(shape=(ga.n_dst, c_out_of(f, V, diagonal))),)


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def kernel_values(dx, U, b_u, V, b_v):
    """``kappa [E, P]`` of every edge (materialised: the reference, not the fused kernel)."""
    h = jax.nn.relu(jnp.matmul(dx, U.T, precision=_HIGHEST) + b_u)
    return jnp.matmul(h, V.T, precision=_HIGHEST) + b_v


def edge_messages(f_j, kappa, diagonal):
    """The message ``K_e f_j`` of every edge, ``[E, c_out]``."""
    if diagonal:
        return kappa * f_j
    e, c_in = f_j.shape
    return jnp.einsum("eoc,ec->eo", kappa.reshape(e, -1, c_in), f_j, precision=_HIGHEST)


def _fwd_xla(ga, f, dx, U, b_u, V, b_v, w, *, diagonal, has_weight):
    f_j = rows(f, ga.src)
    if has_weight:
        f_j = f_j * w[:, None]
    msg = edge_messages(f_j, kernel_values(dx, U, b_u, V, b_v), diagonal)
    return (jax.ops.segment_sum(msg, ga.dst, num_segments=ga.n_dst),)


def _jvp_composed(ga, f, dx, U, b_u, V, b_v, w, out, *tangents, diagonal, has_weight):
    fwd = lambda *p: _fwd_xla(ga, *p, diagonal=diagonal, has_weight=has_weight)  # noqa: E731
    return jax.jvp(fwd, (f, dx, U, b_u, V, b_v, w), tangents)[1]  # (dout,)


def _cotangents(f, dx, U, b_u, V, b_v, w, out, ct_out, **params):
    return (ct_out,)


def _vjp_composed(ga, f, dx, U, b_u, V, b_v, w, G, *, diagonal, has_weight, part):
    fwd = lambda *p: _fwd_xla(ga, *p, diagonal=diagonal, has_weight=has_weight)  # noqa: E731
    f, dx, U, b_u, V, b_v, w = jax.vjp(fwd, f, dx, U, b_u, V, b_v, w)[1]((G,))
    if part == "src":
        return f, V, b_v
    return dx, U, b_u, (w if has_weight else empty(dx.dtype))


# ---------------------------------------------------------------------------------------
# FFI calls: [V | b_v] is passed in the layout each kernel reads contiguously


def _augmented(f, V, b_v, diagonal):
    """``Vb = [V | b_v]``: diagonal ``[C, H+1]``, matrix ``[c_out, c_in, H+1]``."""
    if diagonal:
        return jnp.concatenate([V, b_v[:, None]], axis=1)
    c_in = f.shape[1]
    c_out = V.shape[0] // c_in
    return jnp.concatenate([V.reshape(c_out, c_in, -1), b_v.reshape(c_out, c_in, 1)], axis=2)


def _fwd_ffi(ga, f, dx, U, b_u, V, b_v, w, *, diagonal, has_weight):
    vb = _augmented(f, V, b_v, diagonal)
    vb = vb if diagonal else vb.transpose(1, 2, 0)  # [c_in, H+1, c_out]
    out = jax.ShapeDtypeStruct((ga.n_dst, c_out_of(f, V, diagonal)), f.dtype)
    call = jax.ffi.ffi_call("jgo_gno_fwd", out)
    return (call(*ga.csc, f, dx, U, b_u, vb, w, diagonal=bool(diagonal), has_weight=bool(has_weight)),)


def _vjp_ffi(ga, f, dx, U, b_u, V, b_v, w, G, *, diagonal, has_weight, part):
    vb = _augmented(f, V, b_v, diagonal)
    attrs = dict(diagonal=bool(diagonal), has_weight=bool(has_weight))
    if part == "src":
        vb = vb if diagonal else vb.transpose(0, 2, 1)  # [c_out, H+1, c_in]
        gvb_shape = vb.shape if diagonal else (f.shape[1], G.shape[1], vb.shape[1])  # matrix: [c_in, c_out, H+1]
        call = jax.ffi.ffi_call("jgo_gno_bwd_src", (shape_dtype(f.aval), jax.ShapeDtypeStruct(gvb_shape, f.dtype)))
        gf, gvb = call(*ga.csr, f, dx, U, b_u, vb, w, G, **attrs)
        if not diagonal:
            gvb = gvb.transpose(1, 0, 2).reshape(V.shape[0], -1)  # [c_out * c_in, H+1]
        return gf, gvb[:, :-1], gvb[:, -1]
    call = jax.ffi.ffi_call("jgo_gno_bwd_dst", tuple(shape_dtype(x.aval) for x in (dx, U, b_u, w)))
    return tuple(call(*ga.csc, f, dx, U, b_u, vb, w, G, **attrs))


GNO = fused_op(FusedOp(
    name="gno", inputs=("f", "dx", "U", "b_u", "V", "b_v", "w"), outputs=("out",), edge_arrays=("dx", "w"),
    parts={"src": ("f", "V", "b_v"), "dst": ("dx", "U", "b_u", "w")}, cotangent_operands=("ct_out",),
    forward_abstract=_fwd_abstract, forward=_fwd_xla, forward_ffi=_fwd_ffi, jvp=_jvp_composed,
    cotangents=_cotangents, vjp=_vjp_composed, vjp_ffi=_vjp_ffi, batch="graphs"))


def gno(ga, f, dx, U, b_u, V, b_v, w, *, diagonal):
    """``out [n_dst, c_out]``: the weighted sum over in-edges of ``K_e f[src_e]``; ``w`` may be None."""
    has_weight = w is not None
    w = w if has_weight else empty(f.dtype)
    return GNO.bind(ga, f, dx, U, b_u, V, b_v, w, diagonal=bool(diagonal), has_weight=has_weight)[0]
