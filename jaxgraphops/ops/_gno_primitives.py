"""Primitives of the fused graph-neural-operator kernel integral, their lowerings and rules.

Per edge ``e = (j -> i)`` with geometry ``dx_e``, weight ``w_e`` (1 without weights)::

    h_e = relu(U dx_e + b_u)                       [H]
    kappa_e = V h_e + b_v                          matrix: [c_out * c_in] viewed (c_out, c_in); diagonal: [c]
    out[i] = sum_{e into i} w_e K_e f[j]           (matrix: K_e @ f[j]; diagonal: kappa_e * f[j])

``gno_fwd_p``  fused forward ``(f, dx, U, b_u, V, b_v, w) -> out [n_dst, c_out]``. The kernel
               accumulates ``A_i = sum_e w_e f_j (x) [h_e, 1]`` per destination (``c_in (H+1)``
               numbers) and contracts it with ``[V | b_v]`` once per row: kappa is never formed.
``gno_jvp_p``  its JVP, linear in the tangents ``(df, ddx, dU, db_u, dV, db_v, dw)``; lowered as
               the JVP of the pure-JAX composition. Its transpose is ``gno_vjp_p``.
``gno_vjp_p``  the fused backward kernels, given ``G = ct_out``: ``part="src"`` (reverse CSR, no
               atomics) gives ``(grad_f, grad_V, grad_b_v)``; ``part="dst"`` (CSC) gives
               ``(grad_dx, grad_U, grad_b_u, grad_w)``. Parameter gradients are per-task partial
               sums reduced in a fixed order.

So first-order reverse mode runs the fused kernels; second and higher orders differentiate the
pure-JAX compositions of ``gno_jvp_p`` and ``gno_vjp_p`` (correct, and they do form kappa).
An absent ``w`` (``has_weight=False``) is an empty ``[0]`` array. A batch (vmap) runs the
batch elements one after another.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching, xla

from ._primitive_utils import KernelPrimitive
from ._primitive_utils import N_GRAPH as _N_GRAPH
from ._primitive_utils import all_zero, composed_jvp, empty, map_over_graphs, register_lowerings, shape_dtype
from ._primitive_utils import zero_tangent
from ._primitives import n_dst_of

gno_fwd_p = KernelPrimitive("jgo_gno_fwd")
gno_jvp_p = KernelPrimitive("jgo_gno_jvp")
gno_vjp_p = KernelPrimitive("jgo_gno_vjp")
for _p in (gno_fwd_p, gno_jvp_p, gno_vjp_p):
    _p.multiple_results = True  # one result for the forward and the JVP, to share the scaffolding
    _p.def_impl(partial(xla.apply_primitive, _p))

_HIGHEST = jax.lax.Precision.HIGHEST


def c_out_of(f, V, diagonal):
    return f.shape[1] if diagonal else V.shape[0] // f.shape[1]


# ---------------------------------------------------------------------------------------
# Abstract evaluation


def _fwd_abstract(*args, diagonal, has_weight):
    ga, f, V = args[:_N_GRAPH], args[_N_GRAPH], args[_N_GRAPH + 4]
    return (f.update(shape=(n_dst_of(ga), c_out_of(f, V, diagonal)), weak_type=False),)


def _jvp_abstract(*args, diagonal, has_weight):
    return _fwd_abstract(*args[: _N_GRAPH + 7], diagonal=diagonal, has_weight=has_weight)


def _vjp_abstract(*args, diagonal, has_weight, part):
    f, dx, U, b_u, V, b_v, w = args[_N_GRAPH:_N_GRAPH + 7]
    keep = (f, V, b_v) if part == "src" else (dx, U, b_u, w)
    return tuple(x.update(weak_type=False) for x in keep)


gno_fwd_p.def_abstract_eval(_fwd_abstract)
gno_jvp_p.def_abstract_eval(_jvp_abstract)
gno_vjp_p.def_abstract_eval(_vjp_abstract)


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


def gno_fwd_xla(*args, diagonal, has_weight):
    ga, (f, dx, U, b_u, V, b_v, w) = args[:_N_GRAPH], args[_N_GRAPH:]
    f_j = f[ga[0]]
    if has_weight:
        f_j = f_j * w[:, None]
    msg = edge_messages(f_j, kernel_values(dx, U, b_u, V, b_v), diagonal)
    return (jax.ops.segment_sum(msg, ga[1], num_segments=n_dst_of(ga)),)


def gno_jvp_composed(*args, diagonal, has_weight):
    ga, primals, tangents = args[:_N_GRAPH], args[_N_GRAPH:_N_GRAPH + 7], args[_N_GRAPH + 7:]
    fwd = lambda *p: gno_fwd_xla(*ga, *p, diagonal=diagonal, has_weight=has_weight)  # noqa: E731
    return jax.jvp(fwd, primals, tangents)[1]  # (dout,)


def gno_vjp_composed(*args, diagonal, has_weight, part):
    ga, primals, G = args[:_N_GRAPH], args[_N_GRAPH:_N_GRAPH + 7], args[_N_GRAPH + 7]
    fwd = lambda *p: gno_fwd_xla(*ga, *p, diagonal=diagonal, has_weight=has_weight)  # noqa: E731
    f, dx, U, b_u, V, b_v, w = jax.vjp(fwd, *primals)[1]((G,))
    if part == "src":
        return f, V, b_v
    return dx, U, b_u, (w if has_weight else empty(dx.dtype))


# ---------------------------------------------------------------------------------------
# FFI lowerings: [V | b_v] is passed in the layout each kernel reads contiguously


def _augmented(f, V, b_v, diagonal):
    """``Vb = [V | b_v]``: diagonal ``[C, H+1]``, matrix ``[c_out, c_in, H+1]``."""
    if diagonal:
        return jnp.concatenate([V, b_v[:, None]], axis=1)
    c_in = f.shape[1]
    c_out = V.shape[0] // c_in
    return jnp.concatenate([V.reshape(c_out, c_in, -1), b_v.reshape(c_out, c_in, 1)], axis=2)


def _gno_fwd_ffi(*args, diagonal, has_weight):
    ga, (f, dx, U, b_u, V, b_v, w) = args[:_N_GRAPH], args[_N_GRAPH:]
    vb = _augmented(f, V, b_v, diagonal)
    vb = vb if diagonal else vb.transpose(1, 2, 0)  # [c_in, H+1, c_out]
    call = jax.ffi.ffi_call("jgo_gno_fwd", shape_dtype(_fwd_abstract(*args, diagonal=diagonal, has_weight=has_weight)[0]))
    return (call(ga[2], ga[3], ga[4], f, dx, U, b_u, vb, w, diagonal=bool(diagonal), has_weight=bool(has_weight)),)


def _gno_vjp_ffi(*args, diagonal, has_weight, part):
    ga, (f, dx, U, b_u, V, b_v, w, G) = args[:_N_GRAPH], args[_N_GRAPH:]
    vb = _augmented(f, V, b_v, diagonal)
    attrs = dict(diagonal=bool(diagonal), has_weight=bool(has_weight))
    if part == "src":
        vb = vb if diagonal else vb.transpose(0, 2, 1)  # [c_out, H+1, c_in]
        gvb_shape = vb.shape if diagonal else (f.shape[1], G.shape[1], vb.shape[1])  # matrix: [c_in, c_out, H+1]
        call = jax.ffi.ffi_call("jgo_gno_bwd_src", (shape_dtype(f.aval), jax.ShapeDtypeStruct(gvb_shape, f.dtype)))
        gf, gvb = call(ga[5], ga[6], ga[7], f, dx, U, b_u, vb, w, G, **attrs)
        if not diagonal:
            gvb = gvb.transpose(1, 0, 2).reshape(V.shape[0], -1)  # [c_out * c_in, H+1]
        return gf, gvb[:, :-1], gvb[:, -1]
    outs = tuple(shape_dtype(x.aval) for x in (dx, U, b_u, w))
    call = jax.ffi.ffi_call("jgo_gno_bwd_dst", outs)
    return tuple(call(ga[2], ga[3], ga[4], f, dx, U, b_u, vb, w, G, **attrs))


for _p, _ref, _ffi in ((gno_fwd_p, gno_fwd_xla, _gno_fwd_ffi), (gno_jvp_p, gno_jvp_composed, gno_jvp_composed),
                       (gno_vjp_p, gno_vjp_composed, _gno_vjp_ffi)):
    register_lowerings(_p, _ref, _ffi, multiple_results=True)


# ---------------------------------------------------------------------------------------
# Differentiation


def _gno_fwd_jvp(primals, tangents, *, diagonal, has_weight):
    params = dict(diagonal=diagonal, has_weight=has_weight)
    out = gno_fwd_p.bind(*primals, **params)
    ts = tangents[_N_GRAPH:]
    if all_zero(ts):
        return out, [zero_tangent(out[0])]
    ts = [ad.instantiate_zeros(t) for t in ts]
    return out, gno_jvp_p.bind(*primals, *ts, **params)


def _gno_jvp_transpose(cts, *args, diagonal, has_weight):
    ga, primals, lin = args[:_N_GRAPH], args[_N_GRAPH:_N_GRAPH + 7], args[_N_GRAPH + 7:]
    for name, v in zip(("f", "dx", "U", "b_u", "V", "b_v", "w"), primals):
        if ad.is_undefined_primal(v):
            raise NotImplementedError(f"gno_jvp is not linear in {name}")
    result = [None] * len(args)
    undefined = [k for k, v in enumerate(lin) if ad.is_undefined_primal(v)]
    if all_zero(cts):
        for k in undefined:
            result[_N_GRAPH + 7 + k] = ad.Zero(lin[k].aval)
        return result
    G = ad.instantiate_zeros(cts[0])
    params = dict(diagonal=diagonal, has_weight=has_weight)
    for part, slots in (("src", (0, 4, 5)), ("dst", (1, 2, 3, 6))):
        if any(k in undefined for k in slots):
            grads = gno_vjp_p.bind(*ga, *primals, G, part=part, **params)
            for k, g in zip(slots, grads):
                if k in undefined:
                    result[_N_GRAPH + 7 + k] = g
    return result


ad.primitive_jvps[gno_fwd_p] = _gno_fwd_jvp
ad.primitive_jvps[gno_jvp_p] = composed_jvp(gno_jvp_composed, gno_jvp_p)
ad.primitive_transposes[gno_jvp_p] = _gno_jvp_transpose
ad.primitive_jvps[gno_vjp_p] = composed_jvp(gno_vjp_composed, gno_vjp_p)


# ---------------------------------------------------------------------------------------
# Batching: one kernel call per batch element


def _batch_rule(prim):
    def rule(args, dims, **params):
        return map_over_graphs(prim, args, dims, params)
    return rule


for _p in (gno_fwd_p, gno_jvp_p, gno_vjp_p):
    batching.primitive_batchers[_p] = _batch_rule(_p)


# ---------------------------------------------------------------------------------------
# Binder


def gno(ga, f, dx, U, b_u, V, b_v, w, *, diagonal):
    """``out [n_dst, c_out]``: the weighted sum over in-edges of ``K_e f[src_e]``; ``w`` may be None."""
    has_weight = w is not None
    w = w if has_weight else empty(f.dtype)
    return gno_fwd_p.bind(*ga, f, dx, U, b_u, V, b_v, w, diagonal=bool(diagonal), has_weight=has_weight)[0]
