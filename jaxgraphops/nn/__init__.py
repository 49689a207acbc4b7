"""Graph neural-network layers on the fused kernels, for flax (linen and nnx) and equinox.

- :mod:`jaxgraphops.nn.flax`: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``, ``GINEConv``,
  ``EdgeConv``, ``GATConv``, ``GATv2Conv``, ``TransformerConv``, ``GNOBlock``, ``RGCNConv``,
  ``DMPNNEncoder``, ``InteractionNetwork``, ``AttentionalAggregation`` and ``GraphNorm`` as
  ``flax.linen`` modules, and ``from_pyg_*`` (``from_chemprop``) functions to load PyG (Chemprop)
  weights (needs ``pip install jaxgraphops[flax]``).
- :mod:`jaxgraphops.nn.equinox`: the same layers as equinox modules, with ``from_pyg``
  (``from_chemprop``) class methods (needs ``pip install jaxgraphops[equinox]``).
- :mod:`jaxgraphops.nn.nnx`: the same layers and the DimeNet++ model as ``flax.nnx`` modules (the linen
  layers' params under the same names), with ``from_pyg`` (``from_chemprop``) class methods and
  ``load_variables`` to move linen variables into them (needs ``pip install jaxgraphops[flax]``).
- :mod:`jaxgraphops.nn.dimenet_flax` and :mod:`jaxgraphops.nn.dimenet_equinox`: the DimeNet++ model
  (``from_pyg_dimenet`` and ``DimeNetPlusPlus.from_pyg`` load PyG's ``DimeNetPlusPlus`` weights).
- :func:`add_self_loops`: the graph of ``A + I``, as ``GraphConv`` uses it; :func:`gcn_norm`: PyG's
  GCN normalisation (``GCNConv``'s graph and weights, to compute once for a fixed graph).
- :func:`global_add_pool`, :func:`global_mean_pool`, :func:`global_max_pool`: PyG's readouts over a
  :class:`~jaxgraphops.BatchedGraph` or graph ids.

All flavours compute the same functions (``jaxgraphops.nn._functional``, ``_basic``,
``_relational``, ``gno``, ``_dimenet``); a convolution takes the graph and node features, ``layer(g, x)``
(``RGCNConv``: ``(g, x, edge_types)``), and returns destination-node features; ``DMPNNEncoder`` maps
a bond graph to atom embeddings and ``InteractionNetwork`` returns updated ``(nodes, edges)``;
``AttentionalAggregation`` and ``GraphNorm`` take node features and the batch, ``layer(x, batch)``.
"""

from ._basic import gcn_norm, global_add_pool, global_max_pool, global_mean_pool
from ._graph_utils import add_self_loops

__all__ = ["add_self_loops", "gcn_norm", "global_add_pool", "global_max_pool", "global_mean_pool"]
