"""Equinox graph layers on the fused kernels, by family: ``conv`` (``SAGEConv``, ``GraphConv``, ``GCNConv``,
``GINConv``, ``GINEConv``, ``EdgeConv``), ``attention`` (``GATConv``, ``GATv2Conv``, ``TransformerConv``),
``readout`` (``AttentionalAggregation``, ``GraphNorm``), ``relational`` (``RGCNConv``, ``DMPNNEncoder``,
``InteractionNetwork``), ``gno`` (``GNOBlock``) and ``dimenet`` (the ``DimeNetPlusPlus`` model and
:func:`energy_and_forces`).

Weights are ``eqx.nn.Linear`` layers (torch's ``[out, in]`` layout; RGCN keeps PyG's own arrays);
``from_pyg`` class methods build a layer from a PyG layer's ``state_dict()``
(``DMPNNEncoder.from_chemprop`` from a Chemprop ``BondMessagePassing``'s). Layers with an MLP take
any per-row equinox module or function (``eqx.nn.MLP``, ``eqx.nn.Sequential``) and vmap it over the
rows; ``from_pyg`` builds PyG's ``torch.nn.Sequential`` as an ``eqx.nn.Sequential``. A constructor takes the
sizes (and required MLPs) positionally and every option keyword-only, checked at construction, with ``key``
for the initial weights. Needs ``pip install jaxgraphops[equinox]``.
"""

from .attention import GATConv, GATv2Conv, TransformerConv
from .conv import EdgeConv, GCNConv, GINConv, GINEConv, GraphConv, SAGEConv
from .dimenet import DimeNetPlusPlus, energy_and_forces
from .gno import GNOBlock
from .readout import AttentionalAggregation, GraphNorm
from .relational import DMPNNEncoder, InteractionNetwork, RGCNConv
from .pyg_model import load_pyg_model

__all__ = ["AttentionalAggregation", "DMPNNEncoder", "DimeNetPlusPlus", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv",
           "GINConv", "GINEConv", "GNOBlock", "GraphConv", "GraphNorm", "InteractionNetwork", "RGCNConv", "SAGEConv",
           "TransformerConv", "energy_and_forces", "load_pyg_model"]
