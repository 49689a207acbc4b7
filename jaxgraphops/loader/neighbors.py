"""A neighbour loader over one large graph: :class:`NeighborLoader` yields :class:`NeighborBatch` es."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_choice
from ..graph import Graph
from ..sampling import SampledBlock, _check_seeds, sample_blocks
from ._common import EpochLoader, check_positive, check_rows

__all__ = ["NeighborBatch", "NeighborLoader"]


class NeighborBatch(NamedTuple):
    """One mini-batch of :class:`NeighborLoader` (a pytree: pass it to a jitted step whole).

    With ``S`` the loader's ``batch_size``:

    - ``blocks``: the :class:`~jaxgraphops.SampledBlock` s of :func:`~jaxgraphops.sample_blocks`, in the order a
      model applies them (``blocks[-1]``'s destinations are the seeds). Their empty slots are padding edges, so
      every op and layer on them computes on the exact sampled subgraph.
    - ``inputs``: the ``nodes`` pytree's rows of ``blocks[0].input_nodes``, zero rows for padding input nodes.
    - ``targets``: the ``targets`` pytree's rows of the seeds, ``[S, ...]``, zero rows for padding seeds.
    - ``seeds``: ``[S]`` the seed node ids, -1 for the padding seeds of a short last batch.
    - ``seed_mask``: ``[S]`` bool, ``seeds >= 0`` (weight a loss by it).
    """

    blocks: list[SampledBlock]
    inputs: Any
    targets: Any
    seeds: jax.Array
    seed_mask: jax.Array


GATHERS = ("host", "device")


def _masked_rows(xp, tree, ids, mask):
    """``tree``'s rows ``ids``, zero where ``mask`` is False (``xp``: NumPy on the host, ``jnp`` on the device)."""
    def gather(x):
        rows = xp.take(x, xp.maximum(ids, 0), axis=0)
        if xp is np:
            rows[~mask] = 0  # in place: a second pass over the rows costs as much as the gather
            return rows
        return jnp.where(mask.reshape(mask.shape + (1,) * (rows.ndim - 1)), rows, jnp.zeros((), rows.dtype))
    return jax.tree_util.tree_map(gather, tree)


def _batch(xp, blocks, seeds, nodes, targets) -> NeighborBatch:
    ids = blocks[0].input_nodes if xp is jnp else np.asarray(blocks[0].input_nodes)
    seed_mask = seeds >= 0
    return NeighborBatch(blocks, _masked_rows(xp, nodes, ids, ids >= 0), _masked_rows(xp, targets, seeds, seed_mask),
                         seeds, seed_mask)


def _sample_and_gather(key, g, seeds, nodes, targets, *, fanouts, replace):
    return _batch(jnp, sample_blocks(key, g, seeds, fanouts, replace=replace), seeds, nodes, targets)


@cache
def _sampler(fanouts: tuple[int, ...], replace: bool, gather: str):
    """The jitted sampling call (with the gathers for ``gather="device"``), one per set of options: loaders that
    share them share its compilations."""
    sample = _sample_and_gather if gather == "device" else sample_blocks
    return jax.jit(partial(sample, fanouts=list(fanouts), replace=replace))


class NeighborLoader(EpochLoader):
    """Sampled mini-batches of one large graph, with their input features and targets (PyG's ``NeighborLoader``).

    Each epoch (each ``iter(loader)``; ``loader.iter_epoch(e)`` replays epoch ``e``, ``len(loader)`` counts its
    batches) cuts the seed nodes, shuffled or not, into batches of ``batch_size`` (the last padded with padding
    seeds, -1, so every batch has one shape and a jitted step compiles once), samples the blocks of each batch
    (:func:`~jaxgraphops.sample_blocks`, one jitted function that the loader compiles once) and gathers the input
    nodes' features and the seeds' targets (:class:`NeighborBatch`). A background thread prepares up to
    ``prefetch`` batches ahead while the device computes, and stops as :class:`~jaxgraphops.GraphLoader`'s does.

    Keys: epoch ``e`` uses ``shuffle_key, sample_key = split(fold_in(key, e))``; its order is
    ``seeds[permutation(shuffle_key, len(seeds))]`` (with ``shuffle=True``) and its batch ``i`` is
    ``sample_blocks(fold_in(sample_key, i), graph, seeds_i, fanouts)``. So a batch depends on ``key``, the
    epoch and its position only, not on the thread or on what the consumer did.

    Args:
      graph: the graph, one node set (``n_src == n_dst``).
      fanouts: the fanout of each block, in the order a model applies them (:func:`~jaxgraphops.sample_blocks`;
        PyG's ``num_neighbors=[25, 10]`` is ``fanouts=[10, 25]``).
      batch_size: seeds per batch (``S``).
      seeds: the seed node ids (distinct, e.g. the training nodes); default every node.
      nodes: a pytree of node features ``[n, ...]`` (n: ``graph.n_dst``).
      targets: a pytree of per-node targets ``[n, ...]`` (labels), gathered at the seeds.
      key: a JAX PRNG key (required: it drives the sampling).
      shuffle: visit the seeds in a new random order each epoch.
      replace: sample with replacement.
      drop_last: drop the epoch's last batch when it is short (instead of padding it).
      prefetch: batches prepared ahead by the background thread (0: in the consumer's thread).
      progress: a tqdm bar over each epoch: True, or its description (a string).
      gather: where the features and targets are gathered: ``"host"`` (NumPy, after the sampling call: the
        default on a CPU backend, where XLA's gather of feature rows is several times slower than NumPy's) or
        ``"device"`` (in the jitted sampling call: the default elsewhere; the features stay on the device).
        Either gives the same batch.

    >>> import jax, numpy as np, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(np.array([0, 1, 2, 3, 4]), np.array([1, 2, 3, 4, 0]))  # a 5-cycle
    >>> loader = jgo.NeighborLoader(g, [2, 2], 2, nodes=np.arange(5.0)[:, None], targets=np.arange(5) % 2,
    ...                             key=jax.random.key(0))
    >>> [(b.seeds.tolist(), b.targets.tolist()) for b in loader]
    [([0, 1], [0, 1]), ([2, 3], [0, 1]), ([4, -1], [0, 0])]
    >>> b = next(iter(loader))
    >>> b.blocks[1].input_nodes.tolist(), b.blocks[0].input_nodes[:4].tolist(), b.inputs[:4, 0].tolist()
    ([0, 1, 4, -1, -1, -1], [0, 1, 4, -1], [0.0, 1.0, 4.0, 0.0])
    """

    def __init__(self, graph: Graph, fanouts: Sequence[int], batch_size: int, *, seeds=None, nodes=None,
                 targets=None, key, shuffle: bool = False, replace: bool = False, drop_last: bool = False,
                 prefetch: int = 2, progress=False, gather: str | None = None):
        fn = "NeighborLoader"
        if not isinstance(graph, Graph):
            raise TypeError(f"{fn}: graph must be a Graph; got {type(graph).__name__}")
        if graph.n_src != graph.n_dst:
            raise ValueError(f"{fn}: graph must have one node set (n_src == n_dst); got n_src={graph.n_src}, "
                             f"n_dst={graph.n_dst}")
        self.graph = graph
        self.batch_size = check_positive(fn, "batch_size", batch_size)
        self.fanouts = tuple(check_positive(fn, f"fanouts[{i}]", f) for i, f in enumerate(fanouts))
        if not self.fanouts:
            raise ValueError(f"{fn}: fanouts must name at least one hop")
        seeds = np.arange(graph.n_dst) if seeds is None else seeds
        self.seeds = np.asarray(_check_seeds(fn, graph, seeds))
        if (self.seeds < 0).any():
            raise ValueError(f"{fn}: seeds must be node ids; seeds[{np.argmax(self.seeds < 0)}] is -1 (the loader "
                             f"pads the last batch itself)")
        if self.seeds.size == 0:
            raise ValueError(f"{fn}: seeds must name at least one node")
        n = graph.n_dst
        check_choice(fn, "gather", gather, (None, *GATHERS))
        self.gather = gather or ("host" if jax.default_backend() == "cpu" else "device")
        put = (lambda t: jax.tree_util.tree_map(np.asarray, t)) if self.gather == "host" else jax.device_put
        self.nodes = put(check_rows(fn, "nodes", nodes, n, "node of the graph"))
        self.targets = put(check_rows(fn, "targets", targets, n, "node of the graph"))
        self._items = self.seeds  # what an epoch visits
        self._setup(fn, key, shuffle, drop_last, prefetch, progress, key_required=True)
        self._sample = _sampler(self.fanouts, bool(replace), self.gather)

    def __repr__(self) -> str:
        return (f"NeighborLoader({self.seeds.size} seeds, fanouts={list(self.fanouts)}, batch_size={self.batch_size},"
                f" {len(self)} batches, shuffle={self.shuffle})")

    def _make_batch(self, items: np.ndarray, key, position: int) -> NeighborBatch:
        seeds = np.full(self.batch_size, -1, items.dtype)
        seeds[:items.size] = items
        key = jax.random.fold_in(key, position)
        if self.gather == "device":
            return self._sample(key, self.graph, jax.device_put(seeds), self.nodes, self.targets)
        return _batch(np, self._sample(key, self.graph, jax.device_put(seeds)), seeds, self.nodes, self.targets)
