"""Neighbour sampling for mini-batch training: :func:`sample_neighbors` and :func:`sample_blocks`.

A sampled *block* is a bipartite :class:`~jaxgraphops.Graph` of static shape whose destinations are
the seeds and whose sources are the block's input nodes, relabelled to local ids with the seeds
first (destinations are a prefix of the sources, as DGL's blocks and PyG's ``NeighborLoader``
relabelling), so that a jitted train step compiles once for every batch of the same size. Its empty
edge slots (a seed with fewer in-edges than the fanout) are padding edges of the graph
(:class:`~jaxgraphops.Graph`), after the sampled ones: every op and layer on a block computes exactly
what it computes on the sampled subgraph (a mean divides by the sampled in-degree, a softmax runs over
the sampled in-edges), with no masking by hand.

The sampling itself is a kernel (``jgo_sample_neighbors``: C++ on the CPU, CUDA on a GPU) whose
random numbers are counter-based (Philox-4x32-10 of the key, the seed's position and the draw's
index): a sample depends on the key only, not on the number of threads nor on the platform, and the
pure-JAX twin (``impl="xla"``, and backends without kernels) draws the same bits. The relabelling
(seeds first, then new nodes by first appearance) is defined uniquely: on the CPU a one-pass
hash-map kernel (``jgo_sample_relabel``) computes it, elsewhere sort-based ``jax.numpy`` code
(XLA's CPU sort was ~25x slower than the kernel); the tests check that both agree exactly.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _backend, reference
from ._checks import check_choice, prng_key_words
from .graph import Graph, check_graph, static_count

__all__ = ["SampledBlock", "sample_neighbors", "sample_blocks"]

IMPLS = (None, "ffi", "xla")


class SampledBlock(NamedTuple):
    """One sampled block (a pytree: a NamedTuple of arrays and a Graph, so it passes through ``jit``).

    With ``S = len(seeds)``, ``f`` the fanout and ``R`` the number of sampled in-edges (at most ``S * f``):

    - ``graph``: the block, a :class:`~jaxgraphops.Graph` with ``n_dst = S`` (the seeds),
      ``n_src = S * (1 + f)`` (the input nodes, local ids) and ``S * f`` edges: first the ``R`` sampled
      edges, seed by seed (edge ``k`` of the block goes into seed ``dst[k]`` from the local id ``src[k]`` of
      the neighbour; local source ``i < S`` is seed ``i`` itself, the prefix property), then ``S * f - R``
      **padding edges** (:class:`~jaxgraphops.Graph`: ``csc_offsets[-1] == R``), in no neighbourhood. So
      the block *is* the sampled subgraph for every op: ``graph.in_degrees()`` are the seeds' sampled
      in-degrees, a mean divides by them, a softmax or max runs over the sampled in-edges only, an
      edge-valued result is 0 at the padding edges, and nothing depends on what the padding rows hold.
    - ``edge_mask [S * f]`` (bool): the real edges, ``graph.real_edge_mask()`` (the first ``R``).
    - ``input_nodes [S * (1 + f)]``: the global id of each source (local id), -1 for padding: the
      seeds first (as given, -1 for padding seeds), then the newly reached nodes in order of first
      appearance among the edges, then -1.
    - ``node_mask [S * (1 + f)]`` (bool): ``input_nodes >= 0``.
    - ``edge_ids [S * f]``: the sampled edges' ids in ``g``'s input edge order (to gather edge
      features: ``jnp.where(edge_mask[:, None], ef[edge_ids], 0)``), -1 for padding.

    Gather the input features as ``x[input_nodes]`` (a padding row reads ``x[-1]``, which no op
    reads back; ``jnp.where(node_mask[:, None], x[input_nodes], 0)`` keeps them 0 for a readout or a
    loss over the block's nodes).
    """

    graph: Graph
    edge_mask: jax.Array
    input_nodes: jax.Array
    node_mask: jax.Array
    edge_ids: jax.Array


# -- argument checks ----------------------------------------------------------------------------

def _check_graph(fn: str, g) -> None:
    check_graph(fn, g)
    if g.n_src != g.n_dst:
        raise ValueError(f"{fn}: g must have one node set (n_src == n_dst): the seeds are destinations and the "
                         f"block's sources start with them; got n_src={g.n_src}, n_dst={g.n_dst}")


def _check_seeds(fn: str, g: Graph, seeds) -> jax.Array:
    if not hasattr(seeds, "dtype"):
        seeds = np.asarray(seeds)
    if not jnp.issubdtype(seeds.dtype, jnp.integer):
        raise TypeError(f"{fn}: seeds must have an integer dtype; got {seeds.dtype}")
    if seeds.ndim != 1:
        raise ValueError(f"{fn}: seeds must be 1-D [S]; got shape {tuple(seeds.shape)}")
    if not isinstance(seeds, jax.core.Tracer):
        s = np.asarray(seeds).astype(np.int64)
        bad = np.flatnonzero((s < -1) | (s >= g.n_dst))
        if bad.size:
            raise ValueError(f"{fn}: seeds[{bad[0]}] = {s[bad[0]]} is out of range [0, {g.n_dst}) "
                             f"(-1 marks a padding seed)")
        real = s[s >= 0]
        uniq, first, counts = np.unique(real, return_index=True, return_counts=True)
        if (counts > 1).any():
            v = uniq[np.argmax(counts > 1)]
            where = np.flatnonzero(s == v)
            raise ValueError(f"{fn}: seeds must be distinct; node {v} is at positions {where[0]} and {where[1]} "
                             f"(pad a short batch with -1 instead)")
    return jnp.asarray(seeds).astype(g.index_dtype)


# -- sampling -----------------------------------------------------------------------------------

def _kernel_slots(g: Graph, seeds, key_words, fanout: int, replace: bool):
    idx = g.index_dtype
    out = jax.ShapeDtypeStruct((seeds.shape[0] * fanout,), idx)
    call = jax.ffi.ffi_call("jgo_sample_neighbors", (out, out), vmap_method="sequential")
    src, eid = call(g.csc_offsets, g.csc_src, g.csc_eid, seeds, key_words, fanout=np.int64(fanout),
                    replace=bool(replace), n_src=np.int64(g.n_src))
    return src, eid


def _slots(g: Graph, seeds, key_words, fanout: int, replace: bool, impl):
    """(src, eid) of the edge slots, global ids, -1 for padding."""
    xla = lambda: reference.sample_neighbor_slots(g, seeds, key_words, fanout, replace=replace)  # noqa: E731
    if seeds.shape[0] * fanout == 0:
        empty = jnp.zeros(0, g.index_dtype)
        return empty, empty
    if impl == "xla":
        return xla()
    if not _backend.with_cuda() and jax.default_backend() == "gpu":
        _backend.warn_composition_on_gpu("jgo_sample_neighbors")
    kernel = lambda: _kernel_slots(g, seeds, key_words, fanout, replace)  # noqa: E731
    fallback = lambda: xla()  # noqa: E731
    return jax.lax.platform_dependent(cpu=kernel if _backend.kernels_on_cpu() else fallback,
                                      cuda=kernel if _backend.with_cuda() else fallback, default=fallback)


def _real_slots_first(slot_src, slot_eid, n_seeds: int, fanout: int):
    """The sampled edge slots (``[S * fanout]``, seed by seed, each seed's sampled slots first and -1 after) with the
    real ones first, in their order (so grouped by seed), and the empty ones after: ``(src, eid, csc_offsets [S + 1],
    dst [S * fanout])``, the block's CSC with its padding edges last (:class:`~jaxgraphops.Graph`) and each edge's
    seed (the last seed for a padding edge). Gathers only (XLA's CPU scatters cost a third of a two-hop sample)."""
    idx, E = slot_src.dtype, slot_src.shape[0]
    counts = (slot_src >= 0).reshape(n_seeds, fanout).sum(1, dtype=idx)
    csc_offsets = jnp.concatenate([jnp.zeros(1, idx), jnp.cumsum(counts, dtype=idx)])
    # the seed of each edge; the padding edges after the real ones repeat the last seed
    dst = jnp.repeat(jnp.arange(n_seeds, dtype=idx), counts, total_repeat_length=E)
    k = jnp.arange(E, dtype=idx)
    real = k < csc_offsets[-1]
    slot = jnp.where(real, dst * fanout + k - csc_offsets[jnp.minimum(dst, max(n_seeds - 1, 0))], 0)
    src, eid = (jnp.where(real, x[slot], -1).astype(idx) if E else x for x in (slot_src, slot_eid))
    return src, eid, csc_offsets, dst


def _block_graph(local_src, dst, csc_offsets, csr_offsets, csr_eid, n_seeds: int) -> Graph:
    """The block: its real edges first (seed by seed: the CSC is the input order), then its padding edges from
    the last source ``n_src - 1`` into the last seed; the CSR (``csr_offsets``, ``csr_eid``) of the relabelling
    ends where the real edges do. Valid by construction."""
    idx, E = local_src.dtype, local_src.shape[0]
    csr_offsets = jnp.minimum(csr_offsets, csc_offsets[-1])  # the padding edges (source n_src - 1) in no row
    g = Graph(local_src, dst, csc_offsets, local_src, jnp.arange(E, dtype=idx), csr_offsets, dst[csr_eid], csr_eid,
              n_seeds + E, n_seeds, validate=False)
    g._checked = True
    return g


def _relabel_block(seeds, slot_src):
    """``(local_src [E], input_nodes [N], csr_offsets [N + 1], csr_eid [E])``: the local id of each edge slot's
    source (``N - 1`` for an empty slot), the input node ids (seeds first, then the new nodes by first
    appearance in the edge slots, then -1) and the slots grouped by local source, from one stable sort of
    ``[seeds, slot_src]`` by global id.

    The sort groups the entries of one node (seed positions first, then its edge slots in order);
    the first position of a group names the node's local id. The CSR (edges grouped by local
    source, in edge order) follows from the same groups by counting, without a second sort.
    """
    idx = seeds.dtype
    S, E = seeds.shape[0], slot_src.shape[0]
    N = S + E
    ids = jnp.concatenate([seeds, slot_src])
    keys = jnp.where(ids < 0, jnp.iinfo(idx).max, ids)  # padding last
    order = jnp.argsort(keys, stable=True).astype(idx)
    sorted_keys = keys[order]
    first = jnp.concatenate([jnp.ones(min(N, 1), bool), sorted_keys[1:] != sorted_keys[:-1]])
    k = jnp.arange(N, dtype=idx)
    group_start = jax.lax.cummax(jnp.where(first, k, 0)) if N else k
    rep = jnp.zeros(N, idx).at[order].set(order[group_start])  # the first position holding the same id
    pos = k
    is_new = (pos >= S) & (rep == pos) & (ids >= 0)
    rank = jnp.cumsum(is_new.astype(idx)) - 1
    local_of_rep = jnp.where(rep < S, rep, S + rank[rep])
    local_src = jnp.where(slot_src >= 0, local_of_rep[S:], N - 1).astype(idx)
    input_nodes = jnp.full(N, -1, idx).at[:S].set(seeds)
    input_nodes = input_nodes.at[jnp.where(is_new, S + rank, N)].set(ids, mode="drop")
    # CSR: an edge's place among the edges of its group (its node), after the edges of lower local ids
    is_edge = (order >= S).astype(idx)
    seen = jnp.cumsum(is_edge)
    before_group = (seen - is_edge)[group_start]
    rank_in_node = seen - 1 - before_group  # for the edge entries of the sorted order
    slot = order - S
    local_sorted = (jnp.where(is_edge > 0, local_src[jnp.maximum(slot, 0)], N) if E  # N: not an edge
                    else jnp.full(N, N, idx))
    counts = jnp.zeros(N, idx).at[local_sorted].add(1, mode="drop")
    csr_offsets = jnp.concatenate([jnp.zeros(1, idx), jnp.cumsum(counts).astype(idx)])
    csr_pos = jnp.where(is_edge > 0, csr_offsets[jnp.minimum(local_sorted, N - 1)] + rank_in_node, E)
    csr_eid = jnp.zeros(E, idx).at[csr_pos].set(slot, mode="drop")
    return local_src, input_nodes, csr_offsets, csr_eid


def _kernel_relabel_block(seeds, slot_src):
    """``_relabel_block`` by the CPU kernel jgo_sample_relabel (one hash-map pass instead of a sort)."""
    idx = seeds.dtype
    S, E = seeds.shape[0], slot_src.shape[0]
    N = S + E
    shapes = [jax.ShapeDtypeStruct((n,), idx) for n in (E, N, N + 1, E)]
    call = jax.ffi.ffi_call("jgo_sample_relabel", shapes, vmap_method="sequential")
    return tuple(call(seeds, slot_src))


def _relabel(seeds, slot_src, impl):
    """:func:`_relabel_block`: the CPU kernel on the CPU (not when emulating CUDA, whose platform runs the
    sort-based twin as a GPU does), the jax.numpy version elsewhere."""
    twin = lambda: _relabel_block(seeds, slot_src)  # noqa: E731
    if impl == "xla" or not _backend.kernels_on_cpu() or _backend.emulating_cuda() or seeds.shape[0] == 0:
        return twin()
    kernel = lambda: _kernel_relabel_block(seeds, slot_src)  # noqa: E731
    return jax.lax.platform_dependent(cpu=kernel, default=twin)


def _sample(fn, key_words, g: Graph, seeds, fanout: int, replace: bool, impl) -> SampledBlock:
    S = seeds.shape[0]
    if S * (1 + fanout) > np.iinfo(g.index_dtype).max:
        raise ValueError(f"{fn}: len(seeds) * (1 + fanout) = {S * (1 + fanout)} does not fit the graph's index "
                         f"dtype {g.index_dtype}")
    slot_src, slot_eid = _slots(g, seeds, key_words, fanout, replace, impl)
    slot_src, slot_eid, csc_offsets, dst = _real_slots_first(slot_src, slot_eid, S, fanout)
    local_src, input_nodes, csr_offsets, csr_eid = _relabel(seeds, slot_src, impl)
    graph = _block_graph(local_src, dst, csc_offsets, csr_offsets, csr_eid, S)
    return SampledBlock(graph, slot_eid >= 0, input_nodes, input_nodes >= 0, slot_eid)


def sample_neighbors(key, g: Graph, seeds, fanout: int, *, replace: bool = False,
                     impl: str | None = None) -> SampledBlock:
    """Samples the incoming edges of each seed: one block of static shape.

    Without replacement each seed gets ``min(deg, fanout)`` distinct in-edges drawn uniformly (all
    of them when ``deg <= fanout``, Floyd's algorithm otherwise); with replacement ``fanout``
    independent uniform draws (none when ``deg = 0``), so an edge may appear several times. Edges
    go ``src -> dst`` as everywhere in the library: a seed's sampled neighbours are sources of
    its in-edges.

    The random numbers are counter-based: draw ``d`` of the seed at position ``s`` is
    Philox-4x32-10 of ``(d, s)`` under the key, so the sample depends on the key alone (not the
    number of threads, not the platform: CPU, CUDA and ``impl="xla"`` give the same sample). Bounded
    integers are Lemire's multiply-shift with rejection (exact unless four words in a row are
    rejected, probability below ``(deg / 2^32)^4``). In-degrees must be below ``2^32``.

    Args:
      key: a JAX PRNG key (``jax.random.key``; its data, or two words drawn from it for keys that
        are not two uint32 words) or a raw ``uint32[2]`` key (``jax.random.PRNGKey``).
      g: the graph, one node set (``n_src == n_dst``).
      seeds: ``[S]`` integer destination ids, distinct; ``-1`` marks a padding seed (to pad the
        last batch of an epoch to the static size), which samples nothing. Concrete seeds are
        checked (out of range or repeated: ``ValueError``). Under ``jit`` an id outside
        ``[-1, n)`` fails the CPU kernel when it runs; the CUDA kernel and ``impl="xla"`` treat it
        as a padding seed. Repeated seeds under ``jit`` are well defined: each position is its own
        destination and source slot, and a node reached through an edge maps to its first position.
      fanout: the number of edge slots per seed (a Python int).
      replace: sample with replacement.
      impl: None or ``"ffi"`` for the kernels, ``"xla"`` for the pure-JAX sampler (same result).

    Returns:
      A :class:`SampledBlock`: ``graph`` (``n_dst = S``, ``n_src = S * (1 + fanout)``,
      ``S * fanout`` edges: the sampled ones, seed by seed, then padding edges), ``edge_mask``,
      ``input_nodes``, ``node_mask``, ``edge_ids``. Every op on ``graph`` equals the op on the sampled
      subgraph: the empty slots are padding edges (see :class:`SampledBlock`).

    >>> import jax, numpy as np, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(np.array([0, 1, 3, 2]), np.array([2, 2, 2, 0]))
    >>> b = jgo.sample_neighbors(jax.random.key(0), g, np.array([0, 2]), 3)  # fanout >= degrees: all in-edges
    >>> b.graph
    Graph(n_src=8, n_dst=2, n_edges=6, index_dtype=int32)
    >>> b.input_nodes.tolist()            # the seeds, then the new nodes, then padding
    [0, 2, 1, 3, -1, -1, -1, -1]
    >>> b.graph.src.tolist(), b.graph.dst.tolist()   # local ids: 2 -> 0, then 0, 1, 3 -> 2, then 2 padding edges
    ([1, 0, 2, 3, 7, 7], [0, 1, 1, 1, 1, 1])
    >>> b.graph.in_degrees().tolist(), b.edge_mask.tolist(), b.edge_ids.tolist()
    ([1, 3], [True, True, True, True, False, False], [3, 0, 1, 2, -1, -1])
    >>> x = np.array([[1.0], [2.0], [4.0], [6.0]])
    >>> jgo.gspmm(b.graph, x[b.input_nodes], reduce="mean")[:, 0].tolist()  # the sampled neighbours' mean
    [4.0, 3.0]
    """
    fn = "sample_neighbors"
    check_choice(fn, "impl", impl, IMPLS)
    _check_graph(fn, g)
    key_words = prng_key_words(fn, "key", key)
    fanout = static_count(fn, "fanout", fanout)
    seeds = _check_seeds(fn, g, seeds)
    return _sample(fn, key_words, g, seeds, fanout, bool(replace), impl)


def sample_blocks(key, g: Graph, seeds, fanouts, *, replace: bool = False,
                  impl: str | None = None) -> list[SampledBlock]:
    """Multi-hop neighbour sampling (GraphSAGE's ``[25, 10]``): one :class:`SampledBlock` per layer.

    ``fanouts[i]`` is the fanout of ``blocks[i]``, and the blocks are in the order a model applies
    them (DGL's ``MultiLayerNeighborSampler``): ``blocks[-1]`` samples the in-edges of the seeds
    with ``fanouts[-1]``, and each earlier block samples the in-edges of the next block's input
    nodes (their padding slots are padding seeds, which sample nothing). So ``blocks[i].graph.n_dst
    == blocks[i + 1].graph.n_src``, ``blocks[i]``'s seeds are ``blocks[i + 1].input_nodes``, and
    the model reads its input features at ``blocks[0].input_nodes``. (PyG's ``NeighborLoader``
    lists ``num_neighbors`` from the seeds outwards: its ``[25, 10]`` is ``fanouts=[10, 25]``
    here.) Every shape is static: with ``S`` seeds, ``blocks[-1]`` has ``S * (1 + fanouts[-1])``
    sources, ``blocks[-2]`` that many destinations, and so on.

    The block next to the seeds is ``sample_neighbors(key, ...)``; the hop ``h`` away (h >= 1) uses
    ``jax.random.fold_in(key, h)``. Arguments as :func:`sample_neighbors`.

    >>> import jax, numpy as np, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))  # a 4-cycle
    >>> blocks = jgo.sample_blocks(jax.random.key(0), g, np.array([0]), [1, 1])
    >>> [b.graph.n_dst for b in blocks], [b.graph.n_src for b in blocks]
    ([2, 1], [4, 2])
    >>> blocks[1].input_nodes.tolist(), blocks[0].input_nodes.tolist()
    ([0, 3], [0, 3, 2, -1])
    """
    fn = "sample_blocks"
    check_choice(fn, "impl", impl, IMPLS)
    _check_graph(fn, g)
    key_words = prng_key_words(fn, "key", key)
    try:
        fanouts = [static_count(fn, f"fanouts[{i}]", f) for i, f in enumerate(fanouts)]
    except TypeError as e:
        if "fanouts[" in str(e):
            raise
        raise TypeError(f"{fn}: fanouts must be a sequence of ints; got {type(fanouts).__name__}") from None
    if not fanouts:
        raise ValueError(f"{fn}: fanouts must name at least one hop")
    cur = _check_seeds(fn, g, seeds)
    blocks = []
    for hop, fanout in enumerate(reversed(fanouts)):
        words = key_words if hop == 0 else jax.random.fold_in(key_words, hop)
        block = _sample(fn, words, g, cur, fanout, bool(replace), impl)
        blocks.append(block)
        cur = block.input_nodes
    return blocks[::-1]
