"""Shape buckets for streams of small graphs under ``jit``: a few static padded sizes instead of one.

``jit`` compiles once per set of shapes. Padding every batch of a stream (molecules, meshes) to the
largest batch it can meet compiles once but computes the padding as if it were real; padding each
batch to its own size computes no padding but compiles for nearly every batch. A few buckets sit
between the two: :func:`bucket_sizes` picks at most ``n_buckets`` padded ``(n_nodes, n_edges)``
sizes from the graphs' sizes, so that every batch of ``batch_size`` graphs fits one (the largest
holds the ``batch_size`` largest graphs together); :func:`pick_bucket` gives a batch its smallest
bucket; :func:`padded_batches` cuts a list of graphs into padded batches, one compilation per
bucket.

>>> import numpy as np, jaxgraphops as jgo
>>> rng = np.random.default_rng(0)
>>> nodes = rng.integers(5, 30, 1000)  # a stream of 1,000 graphs
>>> buckets = jgo.bucket_sizes(nodes, 2 * nodes, batch_size=32, n_buckets=3)
>>> len(buckets), all(a.n_nodes < b.n_nodes for a, b in zip(buckets, buckets[1:]))
(3, True)
>>> jgo.pick_bucket(buckets, n_nodes=int(nodes[:32].sum()), n_edges=int(2 * nodes[:32].sum())) in buckets
True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from .batching import BatchedGraph, batch, pad_batch
from .graph import Graph

__all__ = ["Bucket", "bucket_sizes", "padded_batches", "pick_bucket"]


class Bucket(NamedTuple):
    """Padded sizes of a batch: ``n_nodes`` (the real nodes plus at least one padding node, as
    :func:`~jaxgraphops.pad_batch` needs) and ``n_edges``."""

    n_nodes: int
    n_edges: int


def _counts(fn: str, name: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.integer) or (x < 0).any():
        raise ValueError(f"{fn}: {name} must be a non-empty 1-D array of non-negative ints (one count per graph); "
                         f"got shape {x.shape}, dtype {x.dtype}")
    return x.astype(np.int64)


def _positive(fn: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{fn}: {name} must be a positive int; got {value!r}")
    return int(value)


def _round_up(x, multiple: int):
    return -(-np.asarray(x, np.int64) // multiple) * multiple


def bucket_sizes(n_nodes, n_edges, batch_size: int, *, n_buckets: int = 4, multiple: int = 8, samples: int = 4096,
                 seed: int = 0) -> tuple[Bucket, ...]:
    """At most ``n_buckets`` padded sizes that every batch of ``batch_size`` of these graphs fits.

    Args:
      n_nodes, n_edges: ``[G]`` ints, each graph's node and edge count (the stream, or a sample of it).
      batch_size: graphs per batch.
      n_buckets: the most buckets (compilations) wanted.
      multiple: sizes are rounded up to a multiple of this.
      samples, seed: random batches drawn (without replacement within a batch) to place the smaller
        buckets at the quantiles ``k / n_buckets`` of their node and edge totals.

    Returns:
      :class:`Bucket` s sorted by size. The last holds the ``batch_size`` largest graphs by nodes and by
      edges together, plus a padding node, so any batch fits it; the others are the quantiles of the
      sampled batches (a batch over a bucket's node or edge size goes to a larger one).

    >>> bucket_sizes([3, 4, 5, 6], [2, 3, 4, 5], batch_size=2, n_buckets=1)
    (Bucket(n_nodes=16, n_edges=16),)
    """
    fn = "bucket_sizes"
    nodes, edges = _counts(fn, "n_nodes", n_nodes), _counts(fn, "n_edges", n_edges)
    if nodes.shape != edges.shape:
        raise ValueError(f"{fn}: n_nodes and n_edges must have one entry per graph; got {nodes.size} and {edges.size}")
    size = min(_positive(fn, "batch_size", batch_size), nodes.size)
    n_buckets, multiple = _positive(fn, "n_buckets", n_buckets), _positive(fn, "multiple", multiple)
    samples = _positive(fn, "samples", samples)
    largest = Bucket(int(_round_up(_largest(nodes, size).sum() + 1, multiple)),
                     int(_round_up(_largest(edges, size).sum(), multiple)))
    picks = _random_batches(np.random.default_rng(seed), nodes.size, size, samples)
    totals_n, totals_e = nodes[picks].sum(1) + 1, edges[picks].sum(1)
    quantiles = np.arange(1, n_buckets) / n_buckets
    smaller = zip(_round_up(np.quantile(totals_n, quantiles, method="higher"), multiple),
                  _round_up(np.quantile(totals_e, quantiles, method="higher"), multiple), strict=True)
    found = {Bucket(int(n), int(e)) for n, e in smaller if n < largest.n_nodes or e < largest.n_edges}
    return tuple(sorted(found | {largest}))


def _largest(x, k: int):
    """The ``k`` largest entries of ``x`` (in no order)."""
    return np.partition(x, x.size - k)[x.size - k:]


def _random_batches(rng, n: int, size: int, samples: int) -> np.ndarray:
    """``[samples, size]``: ``samples`` uniform random batches of ``size`` distinct ids of ``range(n)``. Each
    is one ``Generator.choice`` without replacement (a hash-set Floyd draw for ``size`` small against a large
    ``n``): memory ``samples * size``, never ``samples * n``."""
    return np.stack([rng.choice(n, size, replace=False, shuffle=False) for _ in range(samples)])


def pick_bucket(buckets: Sequence[Bucket], n_nodes: int, n_edges: int) -> Bucket:
    """The smallest of ``buckets`` (by nodes, then edges) that a batch of ``n_nodes`` real nodes and
    ``n_edges`` edges fits, with its padding node; a ``ValueError`` if none does.

    >>> pick_bucket([Bucket(16, 40), Bucket(32, 64)], n_nodes=15, n_edges=50)
    Bucket(n_nodes=32, n_edges=64)
    """
    for bucket in sorted(buckets):
        if bucket.n_nodes > n_nodes and bucket.n_edges >= n_edges:
            return bucket
    raise ValueError(f"pick_bucket: a batch of {n_nodes} nodes and {n_edges} edges fits none of the buckets "
                     f"{list(buckets)} (it needs n_nodes > {n_nodes} and n_edges >= {n_edges})")


def padded_batches(graphs: Sequence[Graph], batch_size: int, buckets: Sequence[Bucket], *,
                   order=None) -> Iterator[tuple[BatchedGraph, np.ndarray]]:
    """Cuts ``graphs`` (in ``order``, default as given) into batches of ``batch_size`` (the last may be
    shorter) and pads each to its bucket (:func:`pick_bucket`) with ``batch_size + 1`` graph slots, so a
    jitted step compiles once per bucket. Yields ``(padded BatchedGraph, indices of its graphs)``.

    >>> import numpy as np, jaxgraphops as jgo
    >>> ring = lambda n: jgo.Graph.from_edges(np.arange(n), np.roll(np.arange(n), 1))
    >>> graphs = [ring(n) for n in (3, 4, 5, 6, 7)]
    >>> buckets = jgo.bucket_sizes([3, 4, 5, 6, 7], [3, 4, 5, 6, 7], batch_size=2, n_buckets=2)
    >>> [(bg.graph.n_dst, bg.n_graphs, idx.tolist()) for bg, idx in jgo.padded_batches(graphs, 2, buckets)]
    [(16, 3, [0, 1]), (16, 3, [2, 3]), (16, 3, [4])]
    """
    fn = "padded_batches"
    batch_size = _positive(fn, "batch_size", batch_size)
    order = np.arange(len(graphs)) if order is None else _order(fn, order, len(graphs))
    for start in range(0, order.size, batch_size):
        idx = order[start:start + batch_size]
        union = batch([graphs[i] for i in idx])
        bucket = pick_bucket(buckets, union.graph.n_dst, union.graph.n_edges)
        yield pad_batch(union, bucket.n_nodes, bucket.n_edges, batch_size + 1), idx


def _order(fn: str, order, n: int) -> np.ndarray:
    """``order`` as a 1-D int array of graph indices in ``[0, n)``, or a ValueError naming the bad entry."""
    order = np.asarray(order)
    if order.ndim != 1 or not (np.issubdtype(order.dtype, np.integer) or order.size == 0):
        raise ValueError(f"{fn}: order must be a 1-D array of graph indices (ints); got shape {order.shape}, "
                         f"dtype {order.dtype}")
    bad = np.flatnonzero((order < 0) | (order >= n))
    if bad.size:
        raise ValueError(f"{fn}: order[{bad[0]}] = {order[bad[0]]} is not a graph index: graphs has {n} graphs, so "
                         f"order must index [0, {n}) (e.g. a permutation, np.random.permutation({n}))")
    return order.astype(np.int64)
