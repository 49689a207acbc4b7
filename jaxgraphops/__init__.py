"""jaxgraphops: fused graph-neural-network operators for JAX.

Every op is an XLA FFI kernel (C++ on CPU, CUDA on GPU) wrapped as a JAX primitive, so ``jit``,
``grad`` (of any order), ``jvp``, ``vmap`` and ``shard_map`` compose with it.

>>> import jax.numpy as jnp, jaxgraphops as jgo
>>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 0]))
>>> jgo.gspmm(g, jnp.ones((3, 4)), op="copy_u", reduce="mean").shape
(3, 4)
"""

# The one place the version is written: both pyproject files (core and plugins/cuda13) read it from here.
__version__ = "0.1.0"

from . import _versions  # noqa: E402

_versions.check()  # warns once if jax/jaxlib are outside the tested range
_versions.apply_workarounds()  # jaxlib 0.11.2: the GSPMD partitioner instead of a crashing Shardy

from . import dimenet  # noqa: E402
from ._backend import kernel_platform, with_cuda  # noqa: E402
from ._cuda_plugin import CudaPluginWarning  # noqa: E402
from .batching import BatchedGraph, batch, pad_batch  # noqa: E402
from .buckets import Bucket, bucket_sizes, padded_batches, pick_bucket  # noqa: E402
from .distributed import PartitionedGraph, halo_exchange, partition_graph, shard_parts  # noqa: E402
from .graph import Graph, pad, padding_masks  # noqa: E402
from .loader import GraphBatch, GraphLoader, NeighborBatch, NeighborLoader  # noqa: E402
from .neighbors import knn_graph, radius_graph  # noqa: E402
from .ops.aggregation import agg_concat, agg_simple, agg_weighted, pool  # noqa: E402
from .ops.attention import mha_gat, mha_gat_v2, mha_simple  # noqa: E402
from .ops.dmpnn import agg_dmpnn  # noqa: E402
from .ops.gno import edge_vectors, gno_conv  # noqa: E402
from .ops.hg_basis import agg_hg_basis  # noqa: E402
from .ops.message_passing import edge_softmax, gsddmm, gspmm  # noqa: E402
from .ops.update_efeat import update_efeat  # noqa: E402
from .reorder import Permutation, reorder  # noqa: E402
from .ops._primitive_utils import PartitionedJitWarning  # noqa: E402
from .sampling import SampledBlock, sample_blocks, sample_neighbors  # noqa: E402
from ._versions import JaxWorkaroundWarning, UntestedVersionWarning  # noqa: E402
from . import nn  # noqa: E402  (jgo.nn.gcn_norm etc.; its flax/equinox/nnx modules stay opt-in imports)


__all__ = [
    "BatchedGraph",
    "Bucket",
    "CudaPluginWarning",
    "Graph",
    "GraphBatch",
    "GraphLoader",
    "JaxWorkaroundWarning",
    "NeighborBatch",
    "NeighborLoader",
    "PartitionedGraph",
    "PartitionedJitWarning",
    "Permutation",
    "SampledBlock",
    "UntestedVersionWarning",
    "__version__",
    "agg_concat",
    "agg_dmpnn",
    "agg_hg_basis",
    "agg_simple",
    "agg_weighted",
    "batch",
    "bucket_sizes",
    "dimenet",
    "edge_softmax",
    "edge_vectors",
    "gno_conv",
    "gsddmm",
    "gspmm",
    "halo_exchange",
    "kernel_platform",
    "knn_graph",
    "mha_gat",
    "mha_gat_v2",
    "mha_simple",
    "nn",
    "pad",
    "pad_batch",
    "padded_batches",
    "padding_masks",
    "partition_graph",
    "pick_bucket",
    "pool",
    "radius_graph",
    "reorder",
    "sample_blocks",
    "sample_neighbors",
    "shard_parts",
    "update_efeat",
    "with_cuda",
]
