"""Primitives of the edge-update input ``update_efeat`` (MeshGraphNet / GraphCast), their lowerings and rules.

Per edge ``e = (src_e -> dst_e)`` in input edge order, each part optional::

    concat: out[e] = [edge_feat[e] | x_src[src_e] | x_dst[dst_e]]      [E, Fe + Fs + Fd]
    sum:    out[e] =  edge_feat[e] + x_src[src_e] + x_dst[dst_e]       [E, F]

A fused op family (:mod:`._primitive_kit`, which derives the primitives and their rules):

``update_efeat_fwd``  one pass over the edges in input order writing whole output rows.
``update_efeat_jvp``  its JVP: the op is linear, so the forward of the tangents.
``update_efeat_vjp``  given ``G = ct_out``: ``part="src"`` walks the reverse CSR,
                      ``grad_x_src[u] = sum over the out-edges e of u of G[e, src block]``;
                      ``part="dst"`` walks the CSC, ``grad_x_dst[v]`` from the in-edges of v;
                      no atomics. ``part="edge"`` is ``grad_edge_feat``, G's edge block (0 at the
                      padding edges), copied by a kernel: as a slice, XLA fuses it with G's producer
                      (``2 * out`` for ``sum(out ** 2)``), which then reads ``out`` again and keeps it
                      alive, so G gets a fresh buffer instead of ``out``'s (the slower for page faults).
                      Each part is its own pass, so that it runs only where needed.

Second and higher orders differentiate the pure-JAX compositions (gathers and segment sums). An
absent part is an empty ``[0]`` array with its ``has_*`` flag False, and its gradient is ``[0]``
too; ``summed`` selects the sum mode. A batch (vmap) runs the batch elements one after another (``batch="graphs"``): simple and
correct; folding it into the feature axis would need the output's blocks interleaved back.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._primitive_kit import FusedOp, fused_op
from ._primitive_utils import empty, rows


def _flags(has_edge, has_src, has_dst):
    return dict(has_edge=bool(has_edge), has_src=bool(has_src), has_dst=bool(has_dst))


def _width(ef, xs, xd, *, summed, has_edge, has_src, has_dst):
    widths = [x.shape[1] for x, has in ((ef, has_edge), (xs, has_src), (xd, has_dst)) if has]
    return widths[0] if summed else sum(widths)


def _columns(ef, xs, xd, *, summed, has_edge, has_src, has_dst):
    """The first column of each part's block in ``out`` (all 0 when summing)."""
    if summed:
        return 0, 0, 0
    fe = ef.shape[1] if has_edge else 0
    fs = xs.shape[1] if has_src else 0
    return 0, fe, fe + fs


def _fwd_abstract(ga, ef, xs, xd, **params):
    present = next(x for x, has in ((ef, params["has_edge"]), (xs, params["has_src"]), (xd, params["has_dst"])) if has)
    return (present.update(shape=(ga.n_edges, _width(ef, xs, xd, **params))),)


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _fwd_xla(ga, ef, xs, xd, *, summed, has_edge, has_src, has_dst):
    parts = ([ef] if has_edge else []) + ([rows(xs, ga.src)] if has_src else []) + ([rows(xd, ga.dst)] if has_dst else [])
    if not summed:
        return (jnp.concatenate(parts, axis=1),)
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return (out,)


def _jvp_composed(ga, ef, xs, xd, out, t_ef, t_xs, t_xd, **params):
    return _fwd_xla(ga, t_ef, t_xs, t_xd, **params)  # linear: the forward of the tangents


def _cotangents(ef, xs, xd, out, ct_out, **params):
    return (ct_out,)


def _edge_block(ga, ef, G, col, has_edge):
    """``grad_edge_feat``: G's edge block, 0 at the padding edges (the composition of part ``"edge"``)."""
    return (ga.at_real_edges(G[:, col:col + ef.shape[1]]) if has_edge else empty(G.dtype),)


def _vjp_composed(ga, ef, xs, xd, G, *, part, **params):
    c_edge, c_src, c_dst = _columns(ef, xs, xd, **params)
    if part == "edge":
        return _edge_block(ga, ef, G, c_edge, params["has_edge"])
    x, has, col, ids, n = ((xs, params["has_src"], c_src, ga.src, ga.n_src) if part == "src"
                           else (xd, params["has_dst"], c_dst, ga.dst, ga.n_dst))
    if not has:
        return (empty(G.dtype),)
    return (jax.ops.segment_sum(G[:, col:col + x.shape[1]], ids, num_segments=n),)


# ---------------------------------------------------------------------------------------
# FFI calls


def _fwd_ffi(ga, ef, xs, xd, *, summed, has_edge, has_src, has_dst):
    (aval,) = _fwd_abstract(ga, ef, xs, xd, summed=summed, has_edge=has_edge, has_src=has_src, has_dst=has_dst)
    call = jax.ffi.ffi_call("jgo_update_efeat_fwd", jax.ShapeDtypeStruct(aval.shape, aval.dtype))
    return (call(ga.csc_offsets, ga.src, ga.dst, ef, xs, xd, sum=bool(summed),
                 **_flags(has_edge, has_src, has_dst)),)


def _block_grad(target, offsets, eid, G, x, col):
    """The gradient of the part ``x`` whose block of G starts at ``col``; ``eid`` None for the edge pass."""
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, G.dtype))
    return call(offsets, *([] if eid is None else [eid]), G, col=np.int64(col))


def _vjp_ffi(ga, ef, xs, xd, G, *, part, **params):
    c_edge, c_src, c_dst = _columns(ef, xs, xd, **params)
    if part == "edge":
        if not params["has_edge"]:
            return (empty(G.dtype),)
        return (_block_grad("jgo_update_efeat_bwd_edge", ga.csc_offsets, None, G, ef, c_edge),)
    if part == "src":
        if not params["has_src"]:
            return (empty(G.dtype),)
        return (_block_grad("jgo_update_efeat_bwd_src", ga.csr_offsets, ga.csr_eid, G, xs, c_src),)
    if not params["has_dst"]:
        return (empty(G.dtype),)
    return (_block_grad("jgo_update_efeat_bwd_dst", ga.csc_offsets, ga.csc_eid, G, xd, c_dst),)


UPDATE_EFEAT = fused_op(FusedOp(
    name="update_efeat", inputs=("edge_feat", "x_src", "x_dst"), outputs=("out",),
    edge_arrays=("edge_feat", "out"),
    parts={"src": ("x_src",), "dst": ("x_dst",), "edge": ("edge_feat",)}, cotangent_operands=("ct_out",),
    forward_abstract=_fwd_abstract, forward=_fwd_xla, forward_ffi=_fwd_ffi, jvp=_jvp_composed,
    cotangents=_cotangents, vjp=_vjp_composed, vjp_ffi=_vjp_ffi, batch="graphs"))


def update_efeat(ga, edge_feat, x_src, x_dst, *, summed):
    """``out [E, F]`` of the present parts (None: absent), concatenated or summed (``summed``)."""
    flags = _flags(edge_feat is not None, x_src is not None, x_dst is not None)
    dtype = next(x.dtype for x in (edge_feat, x_src, x_dst) if x is not None)
    ops = [empty(dtype) if x is None else x for x in (edge_feat, x_src, x_dst)]
    return UPDATE_EFEAT.bind(ga, *ops, summed=bool(summed), **flags)[0]
