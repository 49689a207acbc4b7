"""Primitives of Chemprop's directed bond message (``agg_dmpnn``), their lowerings and rules.

Edges ``e = (v -> w)`` of a square graph, ``h [E, D]`` in input edge order, ``rev [E]`` the
input-order id of each edge's reverse (``-1``: none)::

    S[v] = sum_{e' into v} h[e']
    m[e] = S[v] - h[rev e]                       (S[v] where rev e = -1)
    out  = m, or [m | h] with concat_own         [E, D] or [E, 2D]

A fused op family (:mod:`._primitive_kit`):

``dmpnn_fwd``  ``(h, rev) -> out``: one pass. Per node the kernel sums the rows of its in-edges
               (CSC) and writes ``S - h[rev e]`` to each of its out-edges (CSR), the sum kept in
               registers (CUDA) or a row buffer (CPU).
``dmpnn_jvp``  its JVP: the op is linear in ``h``, so the forward composition of the tangent.
``dmpnn_vjp``  one backward part, ``"edges"``, given ``G = ct_out`` (``G_m`` its m block)::

                   T[u] = sum_{e out of u} G_m[e]
                   grad_h[x] = T[u] - G_m[rev x] (+ G[x, D:])      for every x into u

               the same one-pass kernel on the reverse graph (sum over the CSR, write over the
               CSC). ``rev^-1 = rev`` there, which holds because ``rev`` must be an involution on
               its defined entries (``rev[rev[e]] == e`` wherever ``rev[e] != -1``, as Chemprop's
               reverse-bond index always is): no scatter, no atomics.

The per-node buffer ``[n, D]`` of a two-phase design (node sums, then a per-edge pass) is not
needed: fusing the two phases per node keeps the node's sum in registers while its out-edges are
written, so there is neither a second primitive output kept as a residual nor a second FFI call, and
the sums make one round trip less through memory (the backward never needed ``S``: it sums ``G``).
The price is rows written in CSR (CSC) order rather than input order, each row still written whole by
adjacent lanes. (The CUDA kernels keep in scratch memory only the sums of nodes of more than 256
edges, whose chunks are walked apart: ffi/cuda/dmpnn.cu.) ``checked`` (static): the graph's values were
checked, so the CUDA kernels write every row without zero-filling the output first.

``rev`` is an integer operand of the primitives: its tangent is a ``float0`` zero and no part
returns its gradient. Second and higher orders differentiate the compositions, whose backward is the transpose of the
forward composition (right for any ``rev``: where no kernel runs, an unchecked traced ``rev``
that is not an involution still gets its true gradient). A batch (vmap) runs the batch elements
one after another.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._primitive_kit import FusedOp, fused_op
from ._primitive_utils import rows


def _fwd_abstract(ga, h, rev, *, concat_own, checked=False):
    return (h.update(shape=(h.shape[0], 2 * h.shape[1] if concat_own else h.shape[1])),)


# ---------------------------------------------------------------------------------------
# Pure-JAX compositions: the fallback lowerings and the source of higher-order derivatives


def _rows_of_rev(x, rev):
    """``x[rev e]`` per edge, 0 where ``rev e = -1``."""
    has = (rev >= 0)[:, None]
    return jnp.where(has, x[jnp.where(rev >= 0, rev, 0)], jnp.zeros((), x.dtype))


def _messages(ga, h, rev):
    """``m [E, D]``: the node sums over the in-edges gathered at each source, minus the reverse."""
    sums = jax.ops.segment_sum(h, ga.dst, num_segments=ga.n_dst)
    back = _rows_of_rev(h, rev)
    return jnp.where((rev >= 0)[:, None], rows(sums, ga.src) - back, rows(sums, ga.src))


def _fwd_xla(ga, h, rev, *, concat_own, checked=False):
    m = _messages(ga, h, rev)
    return (jnp.concatenate([m, h], axis=1) if concat_own else m,)


def _jvp_composed(ga, h, rev, out, dh, drev, *, concat_own, checked=False):
    return _fwd_xla(ga, dh, rev, concat_own=concat_own)  # linear in h


def _cotangents(h, rev, out, ct_out, **params):
    return (ct_out,)


def _vjp_composed(ga, h, rev, G, *, concat_own, part, checked=False):
    # the transpose of the composition itself (a scatter where rev names an edge): right for any rev,
    # where the kernels' T[dst x] - G[rev x] needs the involution
    return jax.vjp(lambda h: _fwd_xla(ga, h, rev, concat_own=concat_own)[0], h)[1](G)


# ---------------------------------------------------------------------------------------
# FFI calls


def _fwd_ffi(ga, h, rev, *, concat_own, checked=False):
    out = jax.ShapeDtypeStruct(_fwd_abstract(ga, h, rev, concat_own=concat_own)[0].shape, h.dtype)
    call = jax.ffi.ffi_call("jgo_dmpnn_fwd", out)
    return (call(ga.csc_offsets, ga.csc_eid, ga.csr_offsets, ga.csr_eid, rev, h, concat_own=bool(concat_own),
                 checked=bool(checked)),)


def _vjp_ffi(ga, h, rev, G, *, concat_own, part, checked=False):
    call = jax.ffi.ffi_call("jgo_dmpnn_bwd", jax.ShapeDtypeStruct(h.shape, h.dtype))
    return (call(ga.csr_offsets, ga.csr_eid, ga.csc_offsets, ga.csc_eid, rev, G, concat_own=bool(concat_own),
                 checked=bool(checked)),)


DMPNN = fused_op(FusedOp(
    name="dmpnn", inputs=("h", "rev"), outputs=("out",), edge_arrays=("h", "out"), parts={"edges": ("h",)},
    cotangent_operands=("ct_out",),
    forward_abstract=_fwd_abstract, forward=_fwd_xla, forward_ffi=_fwd_ffi, jvp=_jvp_composed,
    cotangents=_cotangents, vjp=_vjp_composed, vjp_ffi=_vjp_ffi, batch="graphs"))


def dmpnn(ga, h, rev, *, concat_own):
    """``[E, D]`` (or ``[E, 2D]`` with ``concat_own``): the directed bond messages of ``h``."""
    return DMPNN.bind(ga, h, rev, concat_own=bool(concat_own), checked=ga.checked)[0]
