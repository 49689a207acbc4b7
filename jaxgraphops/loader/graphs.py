"""A padded batch loader over a dataset of graphs: :class:`GraphLoader` yields :class:`GraphBatch` es."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from ..batching import BatchedGraph
from ..buckets import Bucket, bucket_sizes, pick_bucket
from ..graph import Graph
from ._common import EpochLoader, check_positive, check_rows

__all__ = ["GraphBatch", "GraphLoader"]


class GraphBatch(NamedTuple):
    """One padded batch of :class:`GraphLoader` (a pytree: pass it to a jitted step whole).

    Its leaves are NumPy arrays: the jitted step's call transfers them to the device (in JAX's C++ dispatch,
    ~2 µs an array on the CPU, where a ``jax.device_put`` from Python costs ~30 µs an array).

    With ``B`` the loader's ``batch_size`` and ``(N, E)`` the batch's bucket:

    - ``graph``: the :class:`~jaxgraphops.BatchedGraph`, ``N`` nodes, ``E`` edges and ``B + 1`` graph slots, the
      real graphs first, then the padding graph that owns the padding nodes and edges (as
      :func:`~jaxgraphops.pad_batch`); its ``node_mask``, ``edge_mask`` and ``graph_mask`` tell real rows from
      padding.
    - ``nodes``: the ``nodes`` pytree's rows of the batch's graphs, ``[N, ...]``, zero rows after the real ones.
    - ``edges``: likewise ``[E, ...]``, in the batch graph's input edge order.
    - ``globals``: the ``globals`` pytree's rows (per-graph features, targets), ``[B + 1, ...]``, zero rows after.
    - ``indices``: ``[B + 1]`` the dataset index of each graph slot, -1 for padding slots.
    """

    graph: BatchedGraph
    nodes: Any
    edges: Any
    globals: Any  # jraph's field name
    indices: jax.Array


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])`` without a Python loop."""
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(lengths.sum())


class _Dataset:
    """The graphs' arrays on the host, concatenated once (local ids; per-graph node and edge offsets), so that a
    batch's union is a few NumPy gathers (no per-graph work)."""

    def __init__(self, fn: str, graphs: Sequence[Graph]):
        graphs = list(graphs)
        if not graphs:
            raise ValueError(f"{fn}: graphs must be a non-empty sequence of Graph; got an empty one")
        for i, g in enumerate(graphs):
            if not isinstance(g, Graph):
                raise TypeError(f"{fn}: graphs[{i}] must be a Graph; got {type(g).__name__}")
            if g.n_src != g.n_dst:
                raise ValueError(f"{fn}: graphs[{i}] is bipartite (n_src={g.n_src}, n_dst={g.n_dst}); the loader "
                                 f"batches graphs with one node set")
        dtypes = {g.index_dtype for g in graphs}
        if len(dtypes) > 1:
            raise ValueError(f"{fn}: all graphs must have one index dtype; got {sorted(map(str, dtypes))}")
        self.index_dtype = dtypes.pop()
        self.n_nodes = np.array([g.n_dst for g in graphs], np.int64)
        self.n_edges = np.array([g.n_edges for g in graphs], np.int64)
        self.node_offsets = np.cumsum(self.n_nodes) - self.n_nodes
        self.edge_offsets = np.cumsum(self.n_edges) - self.n_edges
        host = [tuple(np.asarray(a) for a in g.tree_flatten()[0]) for g in graphs]
        for i, (g, arrays) in enumerate(zip(graphs, host)):
            if arrays[2][-1] != g.n_edges:
                raise ValueError(f"{fn}: graphs[{i}] has padding edges ({g.n_edges - arrays[2][-1]} of {g.n_edges}); "
                                 f"give the loader the unpadded graphs: it pads each batch")
        fields = list(zip(*host))  # src, dst, csc_offsets, csc_src, csc_eid, csr_offsets, csr_dst, csr_eid
        self.src, self.dst, self.csc_src, self.csc_eid, self.csr_dst, self.csr_eid = (
            np.concatenate(fields[k]) for k in (0, 1, 3, 4, 6, 7))
        self.csc_starts, self.csr_starts = (np.concatenate([o[:-1] for o in fields[k]]) for k in (2, 5))
        self.checked = all(g._checked for g in graphs)

    def __len__(self) -> int:
        return self.n_nodes.size

    def union(self, idx: np.ndarray, bucket: Bucket, n_graphs: int):
        """The arrays of the padded batch of the graphs ``idx`` (as :func:`~jaxgraphops.pad_batch` of their
        :func:`~jaxgraphops.batch`), its node and edge positions in the dataset, and its graph ids and mask."""
        idt = self.index_dtype
        nodes, edges = self.n_nodes[idx], self.n_edges[idx]
        node_pos = _ranges(self.node_offsets[idx], nodes)
        edge_pos = _ranges(self.edge_offsets[idx], edges)
        n, e = int(nodes.sum()), int(edges.sum())
        node_shift = np.repeat((np.cumsum(nodes) - nodes).astype(idt), edges)  # each edge's graph's first node
        edge_shift = np.repeat((np.cumsum(edges) - edges).astype(idt), edges)  # each edge's graph's first edge
        row_shift = np.repeat((np.cumsum(edges) - edges).astype(idt), nodes)  # each node's graph's first edge
        n_pad, e_pad = bucket.n_nodes - n, bucket.n_edges - e
        pad_node, pad_eid = np.full(e_pad, n, idt), np.arange(e, bucket.n_edges, dtype=idt)
        end = np.full(n_pad + 1, e, idt)  # the padding nodes' rows are empty: the padding edges are in no row

        def ids(local, shift, pad):
            return np.concatenate([local[edge_pos] + shift, pad])

        arrays = (ids(self.src, node_shift, pad_node), ids(self.dst, node_shift, pad_node),
                  np.concatenate([self.csc_starts[node_pos] + row_shift, end]),
                  ids(self.csc_src, node_shift, pad_node), ids(self.csc_eid, edge_shift, pad_eid),
                  np.concatenate([self.csr_starts[node_pos] + row_shift, end]),
                  ids(self.csr_dst, node_shift, pad_node), ids(self.csr_eid, edge_shift, pad_eid))
        k = idx.size
        graph_ids = np.concatenate([np.repeat(np.arange(k, dtype=np.int32), nodes), np.full(n_pad, k, np.int32)])
        return arrays, node_pos, edge_pos, graph_ids, np.arange(n_graphs) < k


def _gather_padded(tree, rows: np.ndarray, n: int):
    """``tree``'s rows ``rows``, zero rows after them up to ``n`` (NumPy, on the host)."""
    def gather(leaf):
        out = np.zeros((n, *leaf.shape[1:]), leaf.dtype)
        out[:rows.size] = leaf[rows]
        return out
    return jax.tree_util.tree_map(gather, tree)


class GraphLoader(EpochLoader):
    """Padded batches of a dataset of graphs, with their features, for a jitted step (PyG's ``DataLoader``).

    Each epoch (each ``iter(loader)``; ``loader.iter_epoch(e)`` replays epoch ``e``, ``len(loader)`` counts its
    batches) cuts the graphs, shuffled or not, into batches of ``batch_size`` and pads each batch to the smallest
    of a few shape buckets (:func:`~jaxgraphops.bucket_sizes`), so a jitted step compiles once per bucket; the
    node, edge and per-graph features travel with the graph, gathered and padded (:class:`GraphBatch`). A
    background thread prepares up to ``prefetch`` batches ahead (NumPy gathers on the host) while the device
    computes; it stops at the end of the epoch, when the consumer stops or raises (close the iterator, or let it
    go), and re-raises the producer's errors in the consumer.

    Args:
      graphs: ``G`` unpadded graphs with one node set (``n_src == n_dst``) and one index dtype.
      batch_size: graphs per batch (``B``); every batch has ``B + 1`` graph slots.
      nodes: a pytree of arrays ``[sum of the graphs' nodes, ...]``: the graphs' node rows one graph after
        another (``np.concatenate`` of per-graph arrays), as PyG's collated ``x``; None for none.
      edges: likewise ``[sum of the graphs' edges, ...]``, each graph's rows in its input edge order.
      globals: a pytree of per-graph arrays ``[G, ...]`` (graph features, targets).
      indices: the graphs an epoch visits (dataset indices, e.g. the training split; PyG's ``dataset[idx]``);
        default all. The buckets and :meth:`batch` cover every graph, so one loader serves the evaluation too.
      buckets: the padded sizes (:class:`~jaxgraphops.Bucket` s); default
        ``bucket_sizes(n_nodes, n_edges, batch_size, n_buckets=n_buckets)`` of the graphs.
      n_buckets: the most buckets (compilations) when ``buckets`` is None.
      shuffle, key: with ``shuffle=True`` epoch ``e`` visits the graphs in the order
        ``jax.random.permutation(split(fold_in(key, e))[0], G)``; else in the given order.
      drop_last: drop the epoch's last batch when it is short.
      prefetch: batches prepared ahead by the background thread (0: prepared in the consumer's thread).
      progress: a tqdm bar over each epoch: True, or its description (a string).

    >>> import jax, numpy as np, jaxgraphops as jgo
    >>> ring = lambda n: jgo.Graph.from_edges(np.arange(n), np.roll(np.arange(n), 1))
    >>> graphs = [ring(n) for n in (3, 4, 5)]
    >>> loader = jgo.GraphLoader(graphs, 2, nodes=np.arange(12.0)[:, None], globals=np.array([0, 1, 2]))
    >>> [(b.graph.graph.n_dst, b.indices.tolist(), b.globals.tolist()) for b in loader]
    [(8, [0, 1, -1], [0, 1, 0]), (8, [2, -1, -1], [2, 0, 0])]
    >>> batch = next(iter(loader))
    >>> batch.nodes[:8, 0].tolist(), batch.graph.node_mask[:8].tolist()
    ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0], [True, True, True, True, True, True, True, False])
    """

    def __init__(self, graphs: Sequence[Graph], batch_size: int, *, nodes=None, edges=None, globals=None,
                 indices=None, buckets: Sequence[Bucket] | None = None, n_buckets: int = 4, shuffle: bool = False,
                 key=None, drop_last: bool = False, prefetch: int = 2, progress=False):
        fn = "GraphLoader"
        self._data = _Dataset(fn, graphs)
        self.batch_size = check_positive(fn, "batch_size", batch_size)
        n_graphs = len(self._data)
        self.nodes = check_rows(fn, "nodes", nodes, int(self._data.n_nodes.sum()), "node of the graphs")
        self.edges = check_rows(fn, "edges", edges, int(self._data.n_edges.sum()), "edge of the graphs")
        self.globals = check_rows(fn, "globals", globals, n_graphs, "graph")
        self.nodes, self.edges, self.globals = jax.tree_util.tree_map(np.asarray, (self.nodes, self.edges,
                                                                                    self.globals))
        self.indices = np.arange(n_graphs) if indices is None else self._check_indices(fn, "indices", indices)
        if buckets is None:
            buckets = bucket_sizes(self._data.n_nodes, self._data.n_edges, self.batch_size,
                                   n_buckets=check_positive(fn, "n_buckets", n_buckets))
        self.buckets = tuple(sorted(Bucket(*b) for b in buckets))
        if not self.buckets:
            raise ValueError(f"{fn}: buckets must name at least one Bucket")
        k = min(self.batch_size, n_graphs)  # the worst batch: the largest graphs by nodes and by edges
        worst = (int(np.sort(self._data.n_nodes)[-k:].sum()), int(np.sort(self._data.n_edges)[-k:].sum()))
        if not any(b.n_nodes > worst[0] and b.n_edges >= worst[1] for b in self.buckets):
            raise ValueError(f"{fn}: no bucket holds the {k} largest graphs together ({worst[0]} nodes, {worst[1]} "
                             f"edges: a bucket needs n_nodes > {worst[0]} and n_edges >= {worst[1]}); got "
                             f"{[tuple(b) for b in self.buckets]} (jgo.bucket_sizes picks buckets that do)")
        self._items = self.indices  # what an epoch visits
        self._setup(fn, key, shuffle, drop_last, prefetch, progress, key_required=False)

    def __repr__(self) -> str:
        return (f"GraphLoader({self.indices.size} of {len(self._data)} graphs, batch_size={self.batch_size}, "
                f"{len(self)} batches, buckets={[tuple(b) for b in self.buckets]}, shuffle={self.shuffle})")

    def _make_batch(self, items: np.ndarray, key, position: int) -> GraphBatch:
        return self.batch(items)

    def _check_indices(self, fn: str, name: str, indices) -> np.ndarray:
        idx = np.asarray(indices)
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"{fn}: {name} must be a non-empty 1-D array of graph indices (ints); got shape "
                             f"{idx.shape}, dtype {idx.dtype}")
        bad = np.flatnonzero((idx < 0) | (idx >= len(self._data)))
        if bad.size:
            raise ValueError(f"{fn}: {name}[{bad[0]}] = {idx[bad[0]]} is out of range [0, {len(self._data)})")
        return idx.astype(np.int64)

    def batch(self, indices) -> GraphBatch:
        """The padded batch of the graphs ``indices`` (at most ``batch_size`` dataset indices), NumPy arrays."""
        idx = self._check_indices("GraphLoader.batch", "indices", indices)
        if idx.size > self.batch_size:
            raise ValueError(f"GraphLoader.batch: indices must name at most batch_size={self.batch_size} graphs; "
                             f"got {idx.size}")
        data, n_graphs = self._data, self.batch_size + 1
        bucket = pick_bucket(self.buckets, int(data.n_nodes[idx].sum()), int(data.n_edges[idx].sum()))
        arrays, node_pos, edge_pos, graph_ids, mask = data.union(idx, bucket, n_graphs)
        slots = np.concatenate([idx, np.full(n_graphs - idx.size, -1, idx.dtype)]).astype(np.int32)
        g = Graph(*arrays, bucket.n_nodes, bucket.n_nodes, validate=False)
        g._checked = data.checked
        bg = BatchedGraph(g, graph_ids, graph_ids, n_graphs, mask, validate=False)
        return GraphBatch(bg, _gather_padded(self.nodes, node_pos, bucket.n_nodes),
                          _gather_padded(self.edges, edge_pos, bucket.n_edges),
                          _gather_padded(self.globals, idx, n_graphs), slots)
