"""Loaders: batches with their features for a jitted training step, prepared by a background thread.

- :class:`GraphLoader`: padded batches of a dataset of graphs (molecules, meshes), in shape buckets, with node,
  edge and per-graph features gathered and padded with the graph (PyG's ``DataLoader``).
- :class:`NeighborLoader`: sampled mini-batches of one large graph, the blocks of each batch of seeds with the
  input nodes' features and the seeds' targets (PyG's ``NeighborLoader``).

Both yield pytrees (NamedTuples) of arrays (host arrays that a jitted step's call transfers, device arrays), one
shape per bucket (:class:`GraphLoader`) or one shape in
all (:class:`NeighborLoader`), so a jitted step compiles once per bucket or once; both shuffle with a JAX key and
both prepare the next batches in a bounded background thread while the device computes.
"""

from .graphs import GraphBatch, GraphLoader
from .neighbors import NeighborBatch, NeighborLoader

__all__ = ["GraphBatch", "GraphLoader", "NeighborBatch", "NeighborLoader"]
