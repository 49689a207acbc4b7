"""``flax.linen`` graph layers on the fused kernels, by family: ``conv`` (``SAGEConv``, ``GraphConv``, ``GCNConv``,
``GINConv``, ``GINEConv``, ``EdgeConv``), ``attention`` (``GATConv``, ``GATv2Conv``, ``TransformerConv``),
``readout`` (``AttentionalAggregation``, ``GraphNorm``), ``relational`` (``RGCNConv``, ``DMPNNEncoder``,
``InteractionNetwork``), ``gno`` (``GNOBlock``) and ``dimenet`` (the ``DimeNetPlusPlus`` model), with PyG (and
Chemprop) weight loaders.

Kernels are ``[in, out]`` as in ``flax.linen.Dense``. ``from_pyg_sage`` / ``from_pyg_gcn`` turn a
PyG layer's ``state_dict()`` (``from_pyg_gat``, ``from_pyg_rgcn`` ... too; ``from_chemprop`` a
Chemprop ``BondMessagePassing``'s) into the variables ``{"params": ...}`` that ``Module.apply`` takes.
A PyG layer's MLP (``nn``, ``gate_nn``: a ``torch.nn.Sequential`` of ``Linear`` layers and activations)
loads into ``flax.linen.Sequential`` of ``Dense`` layers at the same positions.

A layer's sizes (``features``; ``RGCNConv``: ``features, num_relations``; ``DMPNNEncoder``: ``d_h``) and its
required MLPs (``nn``, ``gate_nn``, ``edge_mlp``, ``node_mlp``) are its only positional fields; every option is
keyword-only and checked when the module is built. Every layer with parameters of its own takes ``dtype`` (the
computation's: inputs and parameters are cast to it; default None, their promoted dtype) and ``param_dtype``
(the parameters', default float32), as flax's own layers do. Needs ``pip install jaxgraphops[flax]``.
"""

from .attention import GATConv, GATv2Conv, TransformerConv, from_pyg_gat, from_pyg_gatv2, from_pyg_transformer
from .conv import (EdgeConv, GCNConv, GINConv, GINEConv, GraphConv, SAGEConv, from_pyg_edgeconv, from_pyg_gcn,
                   from_pyg_gin, from_pyg_gine, from_pyg_sage)
from .dimenet import DimeNetPlusPlus, energy_and_forces, from_pyg_dimenet
from .gno import GNOBlock
from .readout import AttentionalAggregation, GraphNorm, from_pyg_attentional_aggregation, from_pyg_graphnorm
from .relational import DMPNNEncoder, InteractionNetwork, RGCNConv, from_chemprop, from_pyg_rgcn
from .pyg_model import load_pyg_model

__all__ = ["AttentionalAggregation", "DMPNNEncoder", "DimeNetPlusPlus", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv",
           "GINConv", "GINEConv", "GNOBlock", "GraphConv", "GraphNorm", "InteractionNetwork", "RGCNConv", "SAGEConv",
           "TransformerConv", "energy_and_forces", "from_chemprop", "from_pyg_attentional_aggregation",
           "from_pyg_dimenet", "from_pyg_edgeconv", "from_pyg_gat", "from_pyg_gatv2", "from_pyg_gcn", "from_pyg_gin",
           "from_pyg_gine", "from_pyg_graphnorm", "from_pyg_rgcn", "from_pyg_sage", "from_pyg_transformer",
           "load_pyg_model"]
