"""Primitives of RGCN's relational aggregation (``agg_hg_basis``), their lowerings and rules.

Per edge ``e = (j -> i)`` of type ``t = types[e]`` with weight ``w_e`` (1, or the per-relation
mean's ``1 / |{e' into i : types[e'] = t}|``)::

    with comp [R, B]:  out[i, b*D:(b+1)*D] += w_e comp[t, b] x[j]        b < B
    without comp:      out[i, t*D:(t+1)*D] += w_e x[j]                   (one D block per type)
    concat_own:        out[i, K*D:] = own[i]                             (K = B or R)

A fused op family (:mod:`._primitive_kit`):

``hg_basis_fwd``  fused forward ``(x, comp, own, w, types) -> out [n_dst, K*D (+D)]`` over the CSC.
``hg_basis_jvp``  its JVP, the JVP of the pure-JAX composition.
``hg_basis_vjp``  the backward, given ``G = ct_out``: ``part="src"`` (one kernel over the reverse
                  CSR, no atomics) gives ``(grad_x, grad_comp)``, ``grad_comp`` as per-task partial
                  sums reduced in a fixed order; ``part="own"`` is the slice ``G[:, K*D:]``.

``types`` (the edge types, in the graph's index dtype) and ``w`` (the weights, ``[E]`` or an empty
``[0]`` without normalisation) are operands the op is not differentiated in: ``w`` is a function of
the graph and the types only, computed once by a fourth primitive, ``hg_basis_norm`` (a kernel over
the CSC counting each row's types in O(E), never an ``[n_dst, R]`` table; its composition sorts the
edges by ``(dst, type)``). An absent ``comp``/``own``/``w`` is an empty ``[0]`` array. A batch (vmap)
runs the batch elements one after another.

Edge types outside ``[0, R)``: the CPU kernels fail with INVALID_ARGUMENT naming ``edge_types``; the
CUDA kernels and the compositions give such an edge no contribution (and ``w = 0``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching, xla

from ._primitive_kit import FusedOp, fused_op
from ._primitive_utils import (N_GRAPH, GraphArrays, KernelPrimitive, batch_over_graphs, empty, register_lowerings,
                               rows, shape_dtype, zero_tangent)


def n_blocks(comp, n_edge_types, has_comp):
    """K: the number of D blocks of the aggregation (bases with comp, edge types without)."""
    return comp.shape[1] if has_comp else n_edge_types


def _width(x, comp, n_edge_types, has_comp, concat_own):
    return (n_blocks(comp, n_edge_types, has_comp) + (1 if concat_own else 0)) * x.shape[1]


def _fwd_abstract(ga, x, comp, own, w, types, *, n_edge_types, has_comp, has_norm, concat_own):
    return (x.update(shape=(ga.n_dst, _width(x, comp, n_edge_types, has_comp, concat_own))),)


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _valid(types, n_edge_types):
    return (types >= 0) & (types < n_edge_types)


def _fwd_xla(ga, x, comp, own, w, types, *, n_edge_types, has_comp, has_norm, concat_own):
    n_dst, d = ga.n_dst, x.shape[1]
    valid = _valid(types, n_edge_types)
    scale = valid.astype(x.dtype)
    if has_norm:
        scale = scale * w
    x_j = rows(x, ga.src) * scale[:, None]  # [E, D]
    if has_comp:
        coef = comp[jnp.clip(types, 0, n_edge_types - 1)]  # [E, B]
        msg = (coef[:, :, None] * x_j[:, None, :]).reshape(x_j.shape[0], comp.shape[1] * d)
        out = jax.ops.segment_sum(msg, ga.dst, num_segments=n_dst)
    else:
        # one D block per type: the segment of edge e is (dst, type), no one-hot comp
        key = ga.dst.astype(jnp.int64 if jax.config.jax_enable_x64 else ga.dst.dtype) * n_edge_types + jnp.where(
            valid, types, 0)
        out = jax.ops.segment_sum(x_j, key, num_segments=n_dst * n_edge_types).reshape(n_dst, n_edge_types * d)
    if concat_own:
        out = jnp.concatenate([out, own], axis=1)
    return (out,)


def _floats(fn, ga, types, params):
    return lambda x, comp, own, w: fn(ga, x, comp, own, w, types, **params)


def _jvp_composed(ga, x, comp, own, w, types, out, tx, tcomp, town, tw, ttypes, **params):
    return jax.jvp(_floats(_fwd_xla, ga, types, params), (x, comp, own, w), (tx, tcomp, town, tw))[1]


def _cotangents(x, comp, own, w, types, out, ct_out, **params):
    return (ct_out,)


def _own_grad(G, x, own, concat_own):
    return G[:, G.shape[1] - x.shape[1]:] if concat_own else jnp.zeros_like(own)


def _vjp_composed(ga, x, comp, own, w, types, G, *, part, **params):
    if part == "own":
        return (_own_grad(G, x, own, params["concat_own"]),)
    gx, gcomp, _, _ = jax.vjp(_floats(_fwd_xla, ga, types, params), x, comp, own, w)[1]((G,))
    return gx, gcomp


# ---------------------------------------------------------------------------------------
# FFI calls


def _attrs(n_edge_types, has_comp, has_norm, concat_own):
    return dict(n_edge_types=int(n_edge_types), has_comp=bool(has_comp), has_norm=bool(has_norm),
                concat_own=bool(concat_own))


def _fwd_ffi(ga, x, comp, own, w, types, *, n_edge_types, has_comp, has_norm, concat_own):
    out = jax.ShapeDtypeStruct((ga.n_dst, _width(x, comp, n_edge_types, has_comp, concat_own)), x.dtype)
    call = jax.ffi.ffi_call("jgo_hg_basis_fwd", out)
    return (call(*ga.csc, x, types, comp, w, own, **_attrs(n_edge_types, has_comp, has_norm, concat_own)),)


def _vjp_ffi(ga, x, comp, own, w, types, G, *, part, n_edge_types, has_comp, has_norm, concat_own):
    if part == "own":
        return (_own_grad(G, x, own, concat_own),)
    call = jax.ffi.ffi_call("jgo_hg_basis_bwd_src", (shape_dtype(jax.typeof(x)), shape_dtype(jax.typeof(comp))))
    return tuple(call(*ga.csr, x, types, comp, w, G, **_attrs(n_edge_types, has_comp, has_norm, concat_own)))


HG_BASIS = fused_op(FusedOp(
    name="hg_basis", inputs=("x", "comp", "own", "w", "types"), outputs=("out",),
    parts={"src": ("x", "comp"), "own": ("own",)}, cotangent_operands=("ct_out",),
    forward_abstract=_fwd_abstract, forward=_fwd_xla, forward_ffi=_fwd_ffi, jvp=_jvp_composed,
    cotangents=_cotangents, vjp=_vjp_composed, vjp_ffi=_vjp_ffi, batch="graphs"))


# ---------------------------------------------------------------------------------------
# The per-relation mean's weights: w_e = 1 / |{e' into dst(e) : types[e'] = types[e]}|

hg_basis_norm_p = KernelPrimitive("jgo_hg_basis_norm")
hg_basis_norm_p.def_impl(lambda *args, **params: xla.apply_primitive(hg_basis_norm_p, *args, **params))


def _norm_abstract(*args, n_edge_types, dtype):
    types = args[N_GRAPH]
    return types.update(dtype=jnp.dtype(dtype), weak_type=False)


def _norm_xla(*args, n_edge_types, dtype):
    """Sorts the edges by (dst, type) and counts the runs: O(E log E), no [n_dst, R] table."""
    ga, types = GraphArrays(*args[:N_GRAPH]).padding_dropped(), args[N_GRAPH]
    n = types.shape[0]
    if n == 0:
        return jnp.zeros((0,), dtype)
    dst, ty, order = jax.lax.sort((ga.dst, types, jnp.arange(n, dtype=ga.dst.dtype)), num_keys=2)
    starts = jnp.concatenate([jnp.ones((1,), bool), (dst[1:] != dst[:-1]) | (ty[1:] != ty[:-1])])
    run = jnp.cumsum(starts) - 1
    count = jax.ops.segment_sum(jnp.ones((n,), dtype), run, num_segments=n)[run]
    w = jnp.zeros((n,), dtype).at[order].set(1 / count, unique_indices=True)
    return ga.at_real_edges(jnp.where(_valid(types, n_edge_types), w, 0))


def _norm_ffi(*args, n_edge_types, dtype):
    ga, types = GraphArrays(*args[:N_GRAPH]), args[N_GRAPH]
    call = jax.ffi.ffi_call("jgo_hg_basis_norm", jax.ShapeDtypeStruct(types.shape, dtype))
    return call(*ga.csc, types, n_edge_types=int(n_edge_types))


def _norm_jvp(primals, tangents, **params):
    out = hg_basis_norm_p.bind(*primals, **params)
    return out, zero_tangent(out)


hg_basis_norm_p.def_abstract_eval(_norm_abstract)
register_lowerings(hg_basis_norm_p, _norm_xla, _norm_ffi, multiple_results=False)
ad.primitive_jvps[hg_basis_norm_p] = _norm_jvp
batching.primitive_batchers[hg_basis_norm_p] = batch_over_graphs(hg_basis_norm_p)


def hg_basis_norm(ga, types, n_edge_types, dtype):
    """``w [E]``: each edge's ``1 / (in-edges of its destination with its type)``; 0 for an edge whose type is
    out of range where no kernel rejects it."""
    return hg_basis_norm_p.bind(*ga, types, n_edge_types=int(n_edge_types), dtype=jnp.dtype(dtype).name)


def hg_basis(ga, x, comp, own, types, *, n_edge_types, norm):
    """``[n_dst, K*D (+D)]``: the relational aggregation; ``comp`` and ``own`` may be None."""
    has_comp, concat_own = comp is not None, own is not None
    w = hg_basis_norm(ga, types, n_edge_types, x.dtype) if norm else empty(x.dtype)
    comp = comp if has_comp else empty(x.dtype)
    own = own if concat_own else empty(x.dtype)
    return HG_BASIS.bind(ga, x, comp, own, w, types, n_edge_types=int(n_edge_types), has_comp=has_comp,
                         has_norm=bool(norm), concat_own=concat_own)[0]
