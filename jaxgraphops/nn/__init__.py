"""Graph neural-network layers on the fused kernels, for flax and equinox.

- :mod:`jaxgraphops.nn.flax`: ``SAGEConv``, ``GraphConv``, ``GATConv``, ``GATv2Conv`` and
  ``TransformerConv`` as ``flax.linen`` modules, and ``from_pyg_*`` functions to load PyG weights
  (needs ``pip install jaxgraphops[flax]``).
- :mod:`jaxgraphops.nn.equinox`: the same layers as equinox modules, with ``from_pyg`` class
  methods (needs ``pip install jaxgraphops[equinox]``).
- :func:`add_self_loops`: the graph of ``A + I``, as ``GraphConv`` uses it.

Both flavours compute the same functions (``jaxgraphops.nn._functional``); a layer takes the
graph and node features, ``layer(g, x)``, and returns destination-node features.
"""

from ._graph_utils import add_self_loops

__all__ = ["add_self_loops"]
