"""``flax.nnx`` graph layers on the fused kernels, by family: ``conv`` (``SAGEConv``, ``GraphConv``, ``GCNConv``,
``GINConv``, ``GINEConv``, ``EdgeConv``), ``attention`` (``GATConv``, ``GATv2Conv``, ``TransformerConv``),
``readout`` (``AttentionalAggregation``, ``GraphNorm``), ``relational`` (``RGCNConv``, ``DMPNNEncoder``,
``InteractionNetwork``), ``gno`` (``GNOBlock``) and ``dimenet`` (the ``DimeNetPlusPlus`` model).

They compute what the ``flax.linen`` layers of :mod:`jaxgraphops.nn.flax` compute, with the same
functions (the families' modules ``jaxgraphops.nn._conv``, ``_attention``, ...), and hold the same params under
the same names (``[in, out]`` kernels; an ``nnx.Sequential`` MLP names its layers ``layers/<i>`` where linen's
``nn.Sequential`` has ``layers_<i>``), created eagerly: a constructor takes the input sizes (``in_features``, as
``nnx.Linear``) and the output sizes positionally, every option keyword-only (checked at construction), ``rngs``
and, like ``nnx.Linear``, ``dtype`` (of the computation; None: the inputs' and params' promoted dtype) and
``param_dtype``. ``X.from_pyg(state_dict)`` (``DMPNNEncoder.from_chemprop``) builds a layer with a PyG (Chemprop)
layer's weights, read by the linen loaders' conversion; :func:`load_variables` copies a linen layer's variables
into an NNX layer. Needs ``pip install jaxgraphops[flax]``.
"""

from ._common import load_variables
from .attention import GATConv, GATv2Conv, TransformerConv
from .conv import EdgeConv, GCNConv, GINConv, GINEConv, GraphConv, SAGEConv
from .dimenet import DimeNetPlusPlus
from .gno import GNOBlock
from .readout import AttentionalAggregation, GraphNorm
from .relational import DMPNNEncoder, InteractionNetwork, RGCNConv
from .pyg_model import load_pyg_model

__all__ = ["AttentionalAggregation", "DMPNNEncoder", "DimeNetPlusPlus", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv",
           "GINConv", "GINEConv", "GNOBlock", "GraphConv", "GraphNorm", "InteractionNetwork", "RGCNConv", "SAGEConv",
           "TransformerConv", "load_pyg_model", "load_variables"]
