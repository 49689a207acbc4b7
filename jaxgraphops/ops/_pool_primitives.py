"""The graph readout over sorted graph ids: ``pool_sorted_p`` and the graph of edges node -> its graph.

``pool_sorted_p(x [N, ...], ids [N]; n_graphs, mean) -> [n_graphs, ...]``: the sum (or mean) of the rows
of ``x`` whose id is ``g``, for ids that never decrease (what :func:`jaxgraphops.batch` gives); an id
outside ``[0, n_graphs)`` belongs to no graph. One pass over ``x``:

- CPU: the ``jgo_pool_sorted`` kernel (ffi/cpu/message_passing.cc): each graph's rows are consecutive and
  are summed in vector registers, graphs split by work over XLA's thread pool; it rejects ids that
  decrease (a wrong ``ids_are_sorted=True``) with an error instead of a wrong sum;
- CUDA, and the emulated CUDA handlers: the same target (ffi/cuda/message_passing.cu): each graph's
  rows from a binary search of the ids, summed by the chunked row-walk engine with row ``k`` read at
  position ``k`` (no membership graph, no index array); ids that decrease give wrong sums there;
- elsewhere: XLA's sorted segment sum.

Linear in ``x``: its JVP is itself and its transpose is ``pool_sorted_bwd_p(ct [n_graphs, ...], ids [N])
-> [N, ...]``, each graph's cotangent row copied to its nodes (divided by the graph's size for the mean, 0
for an id outside ``[0, n_graphs)``): the ``jgo_pool_sorted_bwd`` kernel on the CPU and on CUDA (one read of
the ids, one write of each row), elsewhere XLA's gather. The
two primitives are each other's transposes, so derivatives of every order compose. A batch (vmap) of
``x`` or ``ct`` folds into the feature axis (one call); a batch of ids runs element by element.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching, xla

from .. import _backend
from ..graph import Graph
from ._primitive_utils import KernelPrimitive, register_lowerings

pool_sorted_p = KernelPrimitive("jgo_pool_sorted")
pool_sorted_p.def_impl(partial(xla.apply_primitive, pool_sorted_p))


def sorted_bounds(ids, n: int):
    """``[n + 1]`` (``ids``' dtype): where each value ``0 .. n`` first appears (or would) in never decreasing
    ``ids [N]``, so that value ``g``'s positions are ``bounds[g]:bounds[g + 1]``: binary searches (``n log N``
    work; a bincount would be a scatter over all ``N`` ids). On a GPU (and the emulated one) the search is
    unrolled, as XLA's while loop costs a GPU a round trip to the host per step; the CPU keeps the loop, which
    runs faster there than the unrolled steps.

    >>> sorted_bounds(jnp.array([0, 0, 2]), 3)
    Array([0, 2, 2, 3], dtype=int32)
    """
    values = jnp.arange(n + 1, dtype=ids.dtype)

    def search(method):
        return lambda: jnp.searchsorted(ids, values, side="left", method=method).astype(ids.dtype)

    cpu = "scan_unrolled" if _backend.emulating_cuda() else "scan"
    return jax.lax.platform_dependent(cpu=search(cpu), default=search("scan_unrolled"))


def membership_graph(ids, n_graphs: int, ids_are_sorted: bool) -> Graph:
    """The graph of edges node -> its graph (``ids [N]`` checked or traced), built with at most one sort.

    It has ``n_graphs + 2`` destinations: graph ``g`` is destination ``g + 1``, destination 0 collects the
    ids below 0 and destination ``n_graphs + 1`` those from ``n_graphs`` on, so every id is in range and
    sorted ids stay sorted; a reduction over it gives ``out[1:-1]`` (:func:`graph_rows`). Grouped by
    source it is the identity; grouped by destination it is the stable order of the ids.
    """
    index_dtype = jnp.int64 if ids.dtype == jnp.int64 else jnp.int32
    dst = jnp.clip(ids.astype(index_dtype) + 1, 0, n_graphs + 1)
    n = ids.shape[0]
    nodes = jnp.arange(n, dtype=index_dtype)
    order = nodes if ids_are_sorted else jnp.argsort(dst, stable=True).astype(index_dtype)
    # destination d's nodes are order[csc_offsets[d]:csc_offsets[d+1]]
    sorted_dst = dst if ids_are_sorted else dst[order]
    csc_offsets = sorted_bounds(sorted_dst, n_graphs + 2)
    g = Graph(nodes, dst, csc_offsets, order, order, jnp.arange(n + 1, dtype=index_dtype), dst, nodes, n,
              n_graphs + 2, validate=False)
    g._checked = True  # the ids were checked by the caller (concrete) or cannot be (traced)
    return g


def graph_rows(out):
    """The rows of the graphs in a result over :func:`membership_graph`'s destinations (``[1:-1]``)."""
    return out[1:-1]


def _abstract(x, ids, *, n_graphs, mean):
    return x.update(shape=(n_graphs,) + x.shape[1:], weak_type=False)


pool_sorted_p.def_abstract_eval(_abstract)


def _pool_xla(x, ids, *, n_graphs, mean):
    out = jax.ops.segment_sum(x, ids, num_segments=n_graphs, indices_are_sorted=True)
    if not mean:
        return out
    counts = jax.ops.segment_sum(jnp.ones(ids.shape, x.dtype), ids, num_segments=n_graphs, indices_are_sorted=True)
    counts = counts.reshape(counts.shape + (1,) * (x.ndim - 1))
    return jnp.where(counts > 0, out / jnp.maximum(counts, 1), 0)


def _pool_ffi(x, ids, *, n_graphs, mean):
    call = jax.ffi.ffi_call("jgo_pool_sorted", jax.ShapeDtypeStruct((n_graphs,) + x.shape[1:], x.dtype))
    return call(x, ids, mean=bool(mean))


register_lowerings(pool_sorted_p, _pool_xla, _pool_ffi, multiple_results=False)


def pool_sorted(x, ids, n_graphs: int, *, mean: bool):
    """``[n_graphs, ...]``: the sum (``mean``: the mean) of the rows of ``x [N, ...]`` (float32 or float64) by
    never decreasing ``ids [N]`` (int32 or int64)."""
    return pool_sorted_p.bind(x, ids, n_graphs=int(n_graphs), mean=bool(mean))


# ---------------------------------------------------------------------------------------
# Differentiation: linear in x


def _linear_jvp(prim):
    """The JVP rule of ``prim(values, ids, **params)``, linear in ``values``: ``prim`` of the tangent."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if type(tangents[0]) is ad.Zero:
            return out, ad.Zero.from_primal_value(out)
        return out, prim.bind(ad.instantiate_zeros(tangents[0]), *primals[1:], **params)
    return jvp


def _transpose(ct, x, ids, *, n_graphs, mean):
    if ad.is_undefined_primal(ids):
        raise NotImplementedError("pool_sorted is not linear in its graph ids")
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval), None]
    if mean:
        counts = jnp.diff(sorted_bounds(ids, n_graphs)).astype(ct.dtype).reshape((n_graphs,) + (1,) * (ct.ndim - 1))
        ct = jnp.where(counts > 0, ct / jnp.maximum(counts, 1), 0)
    return [pool_sorted_bwd_p.bind(ct, ids), None]


ad.primitive_jvps[pool_sorted_p] = _linear_jvp(pool_sorted_p)
ad.primitive_transposes[pool_sorted_p] = _transpose


# ---------------------------------------------------------------------------------------
# The transpose: each graph's row copied to its nodes

pool_sorted_bwd_p = KernelPrimitive("jgo_pool_sorted_bwd")
pool_sorted_bwd_p.def_impl(partial(xla.apply_primitive, pool_sorted_bwd_p))
pool_sorted_bwd_p.def_abstract_eval(lambda ct, ids: ct.update(shape=ids.shape + ct.shape[1:], weak_type=False))


def _bwd_xla(ct, ids):
    n_graphs = ct.shape[0]
    if n_graphs == 0:
        return jnp.zeros(ids.shape + ct.shape[1:], ct.dtype)
    inside = ((ids >= 0) & (ids < n_graphs)).reshape(ids.shape + (1,) * (ct.ndim - 1))
    return jnp.where(inside, ct[jnp.clip(ids, 0, n_graphs - 1)], 0)


def _bwd_ffi(ct, ids):
    return jax.ffi.ffi_call("jgo_pool_sorted_bwd", jax.ShapeDtypeStruct(ids.shape + ct.shape[1:], ct.dtype))(ct, ids)


register_lowerings(pool_sorted_bwd_p, _bwd_xla, _bwd_ffi, multiple_results=False)


def _bwd_transpose(g, ct, ids):
    if ad.is_undefined_primal(ids):
        raise NotImplementedError("pool_sorted_bwd is not linear in its graph ids")
    if type(g) is ad.Zero:
        return [ad.Zero(ct.aval), None]
    return [pool_sorted_p.bind(g, ids, n_graphs=ct.aval.shape[0], mean=False), None]


ad.primitive_jvps[pool_sorted_bwd_p] = _linear_jvp(pool_sorted_bwd_p)
ad.primitive_transposes[pool_sorted_bwd_p] = _bwd_transpose


# ---------------------------------------------------------------------------------------
# Batching


def _batch_rule(prim):
    """The batching rule of ``prim(values [rows, ...], ids [N], **params)``: a batch of ``values`` alone
    becomes a feature axis (one call); a batch of ids runs element by element."""
    def batch(args, dims, **params):
        (v, ids), (dv, di) = args, dims
        if di is None:
            return prim.bind(jnp.moveaxis(v, dv, 1), ids, **params), 1
        size = ids.shape[di]
        v = jnp.moveaxis(v, dv, 0) if dv is not None else jnp.broadcast_to(v, (size,) + v.shape)
        one = partial(prim.bind, **params)
        return jax.lax.map(lambda vi: one(*vi), (v, jnp.moveaxis(ids, di, 0))), 0
    return batch


batching.primitive_batchers[pool_sorted_p] = _batch_rule(pool_sorted_p)
batching.primitive_batchers[pool_sorted_bwd_p] = _batch_rule(pool_sorted_bwd_p)
