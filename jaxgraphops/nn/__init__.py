"""Graph neural-network layers on the fused kernels, for flax (linen and nnx) and equinox.

One module per layer family holds the math as pure functions of arrays and weights, shared by every framework
(``_conv``, ``_attention``, ``_readout``, ``_relational``, ``_gno``, ``_dimenet``; ``_common``, ``_graph_utils``
and ``_pyg`` hold what they share), and one folder per framework holds its modules in files of the same names
(``conv.py``, ``attention.py``, ``readout.py``, ``relational.py``, ``gno.py``, ``dimenet.py``), each importing only
its own framework:

- :mod:`jaxgraphops.nn.flax`: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``, ``GINEConv``,
  ``EdgeConv``, ``GATConv``, ``GATv2Conv``, ``TransformerConv``, ``GNOBlock``, ``RGCNConv``,
  ``DMPNNEncoder``, ``InteractionNetwork``, ``AttentionalAggregation``, ``GraphNorm`` and the
  ``DimeNetPlusPlus`` model as ``flax.linen`` modules, and ``from_pyg_*`` (``from_chemprop``) functions to load
  PyG (Chemprop) weights (needs ``pip install jaxgraphops[flax]``).
- :mod:`jaxgraphops.nn.equinox`: the same layers as equinox modules, with ``from_pyg``
  (``from_chemprop``) class methods (needs ``pip install jaxgraphops[equinox]``).
- :mod:`jaxgraphops.nn.nnx`: the same layers as ``flax.nnx`` modules (the linen layers' params under the same
  names), with ``from_pyg`` (``from_chemprop``) class methods and ``load_variables`` to move linen variables into
  them (needs ``pip install jaxgraphops[flax]``).
- :func:`add_self_loops`: the graph of ``A + I``, as ``GraphConv`` uses it; :func:`gcn_norm`: PyG's
  GCN normalisation (``GCNConv``'s graph and weights, to compute once for a fixed graph).
- :func:`global_add_pool`, :func:`global_mean_pool`, :func:`global_max_pool`: PyG's readouts over a
  :class:`~jaxgraphops.BatchedGraph` or graph ids.

In every framework a layer's sizes are its only positional arguments (``GATConv(16, 8, heads=4)``; every
option is keyword-only, so a call in PyG's positional order is a TypeError, not a silent mix-up), its options
are checked at construction (errors name the layer and the option), and its call runs inside
``jax.named_scope("jgo.nn.<Layer>")``. A convolution takes the graph and node features, ``layer(g, x)``
(``RGCNConv``: ``(g, x, edge_types)``), and returns destination-node features; ``DMPNNEncoder`` maps a bond
graph to atom embeddings and ``InteractionNetwork`` returns updated ``(nodes, edges)``;
``AttentionalAggregation`` and ``GraphNorm`` take node features and the batch, ``layer(x, batch)``.

**Padding.** On a padded graph (:func:`jaxgraphops.pad`, :func:`jaxgraphops.pad_batch`) the layers that project
edge features densely (``GATConv``, ``GATv2Conv`` and ``TransformerConv`` with ``edge_dim``, ``GINEConv`` with
``edge_dim``, ``DMPNNEncoder``) set the padding edges' rows to 0 first, and the others read edge features through
the ops (``InteractionNetwork``'s edge MLP sees :func:`jaxgraphops.update_efeat`'s zeros there), so whatever those
rows hold (0, NaN, inf) never reaches a real node's output or a gradient. Padding *node* rows go through the dense
projections as they are: keep them finite (``pad_batch`` writes zeros), as for any dense layer.
"""

from ._conv import gcn_norm
from ._graph_utils import add_self_loops
from ._readout import global_add_pool, global_max_pool, global_mean_pool

__all__ = ["add_self_loops", "gcn_norm", "global_add_pool", "global_max_pool", "global_mean_pool"]
