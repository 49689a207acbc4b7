"""DimeNet++ operators: the radial basis, the triplet structure and the fused triplet aggregation.

>>> import jaxgraphops as jgo
>>> jgo.dimenet.agg_edge_to_edge.__name__
'agg_edge_to_edge'
"""

from . import reference
from .basis import radial_basis
from .ops import agg_edge_to_edge
from .radius import neighbor_list, radius_graph_pbc
from .triplets import Triplets, triplets

__all__ = ["Triplets", "agg_edge_to_edge", "neighbor_list", "radial_basis", "radius_graph_pbc", "reference", "triplets"]
