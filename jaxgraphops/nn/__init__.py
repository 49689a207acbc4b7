"""Graph neural-network layers on the fused kernels, for flax and equinox.

- :mod:`jaxgraphops.nn.flax`: ``SAGEConv``, ``GraphConv``, ``GATConv``, ``GATv2Conv``,
  ``TransformerConv``, ``GNOBlock``, ``RGCNConv``, ``DMPNNEncoder`` and ``InteractionNetwork`` as
  ``flax.linen`` modules, and ``from_pyg_*`` (``from_chemprop``) functions to load PyG (Chemprop)
  weights (needs ``pip install jaxgraphops[flax]``).
- :mod:`jaxgraphops.nn.equinox`: the same layers as equinox modules, with ``from_pyg``
  (``from_chemprop``) class methods (needs ``pip install jaxgraphops[equinox]``).
- :func:`add_self_loops`: the graph of ``A + I``, as ``GraphConv`` uses it.

Both flavours compute the same functions (``jaxgraphops.nn._functional``, ``_relational``,
``gno``); a convolution takes the graph and node features, ``layer(g, x)`` (``RGCNConv``: ``(g, x,
edge_types)``), and returns destination-node features; ``DMPNNEncoder`` maps a bond graph to atom
embeddings and ``InteractionNetwork`` returns updated ``(nodes, edges)``.
"""

from ._graph_utils import add_self_loops

__all__ = ["add_self_loops"]
