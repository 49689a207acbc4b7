"""The relational layers as equinox modules: ``RGCNConv``, ``DMPNNEncoder`` and ``InteractionNetwork``, with
``from_pyg`` / ``from_chemprop`` class methods. The math: :mod:`jaxgraphops.nn._relational`.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from ...graph import Graph
from .._common import check_layer, in_sizes
from .._relational import (check_dmpnn_config, check_rgcn_config, dmpnn_encoder, dmpnn_weights_from_chemprop,
                           interaction_network, pyg_glorot, rgcn_config_from_weights, rgcn_conv, rgcn_kernel_shape,
                           rgcn_weights_from_pyg)

__all__ = ["DMPNNEncoder", "InteractionNetwork", "RGCNConv"]


class RGCNConv(eqx.Module):
    """Relational graph convolution (PyG's ``RGCNConv`` and ``FastRGCNConv``) on :func:`jaxgraphops.agg_hg_basis`.

    ``out_i = x_i root + bias + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` with ``c_{i,r} = 1 / |N_r(i)|``
    (``aggr="mean"``: a mean per relation; a relation absent at ``i`` adds nothing) or 1 (``"add"``,
    ``"sum"``). ``W_r`` is a weight per relation, ``sum_b comp[r, b] weight[b]`` with ``num_bases``, or
    block-diagonal with ``num_blocks`` (float features only). Float features take one fused
    aggregation and one matmul with the stacked weights; node ids (``x`` None: ``arange``, or an
    integer array, PyG's featureless input) read rows of ``W_r`` and ``root`` as embeddings. The
    edge order is free (PyG's ``is_sorted`` only changes its speed).

    Fields as PyG's parameters, in PyG's layout: ``weight [R, F, out]`` (``[B, F, out]`` with
    ``comp [R, B]``; ``[R, nb, F/nb, out/nb]`` with blocks), ``root [F_dst, out]`` (None without
    ``root_weight``), ``bias [out]`` (zeros at first; None without ``use_bias``); PyG's glorot
    initialisation.

    **Arguments:**

    - ``in_features``: ``F``, or ``(F_src, F_dst)`` for a bipartite graph; for node-id input the
      number of node ids (PyG's ``in_channels``).
    - ``out_features``: output features.
    - ``num_relations``: R, the number of edge types.
    - ``num_bases``: B, basis decomposition (None: a full weight per relation).
    - ``aggr``: ``mean``, ``add`` or ``sum``.
    - ``root_weight``, ``use_bias``: PyG's ``root_weight`` and ``bias``.
    - ``num_blocks``: block-diagonal decomposition into this many blocks.
    - ``key``: PRNG key for the initial weights.

    Call ``layer(g, x, edge_types)``: ``x`` is ``[n_src, F]`` features (or a pair ``(x_src, x_dst)``
    for a bipartite graph), integer node ids ``[n_src]`` (or a pair), or None; ``edge_types`` is an
    integer ``[n_edges]`` in input edge order. Returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = RGCNConv(4, 8, num_relations=3, num_bases=2, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.array([0, 2, 1])).shape
    (3, 8)
    """

    weight: jax.Array
    comp: jax.Array | None
    root: jax.Array | None
    bias: jax.Array | None
    aggr: str = eqx.field(static=True)

    def __init__(self, in_features: int | tuple[int, int], out_features: int, num_relations: int, *,
                 num_bases: int | None = None, aggr: str = "mean", root_weight: bool = True, use_bias: bool = True,
                 num_blocks: int | None = None, key: jax.Array):
        check_rgcn_config("RGCNConv", num_relations, num_bases, num_blocks, aggr)
        check_layer(self, locals(), skip=("in_features",))
        in_src, in_dst = in_sizes("RGCNConv", in_features)
        shape = rgcn_kernel_shape("RGCNConv", num_relations, num_bases, num_blocks, in_src, out_features)
        k_weight, k_comp, k_root = jax.random.split(key, 3)
        self.weight = pyg_glorot(k_weight, shape)
        self.comp = None if num_bases is None else pyg_glorot(k_comp, (num_relations, num_bases))
        self.root = pyg_glorot(k_root, (in_dst, out_features)) if root_weight else None
        self.bias = jnp.zeros(out_features) if use_bias else None
        self.aggr = aggr

    def __call__(self, g: Graph, x, edge_types):
        w = {"kernel": self.weight, "comp": self.comp, "root_kernel": self.root, "bias": self.bias}
        return rgcn_conv(g, x, edge_types, {k: v for k, v in w.items() if v is not None}, aggr=self.aggr)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "mean") -> RGCNConv:
        """The layer with the weights of a PyG ``RGCNConv`` or ``FastRGCNConv`` ``state_dict()``.

        Sizes, ``num_relations``, ``num_bases``, ``num_blocks``, ``root_weight`` and ``bias`` follow
        from the entries (``weight``, ``comp``, ``root``, ``bias``); give PyG's ``aggr``.

        >>> import numpy as np
        >>> layer = RGCNConv.from_pyg({"weight": np.ones((3, 4, 8)), "bias": np.zeros(8)}, aggr="add")
        >>> layer.weight.shape, layer.root is None, layer.comp is None
        ((3, 4, 8), True, True)
        """
        w = rgcn_weights_from_pyg("RGCNConv.from_pyg", state_dict)
        layer = cls(aggr=aggr, **rgcn_config_from_weights(w), key=jax.random.key(0))
        fields = {"kernel": lambda m: m.weight, "comp": lambda m: m.comp, "root_kernel": lambda m: m.root,
                  "bias": lambda m: m.bias}
        for name, value in w.items():
            layer = eqx.tree_at(fields[name], layer, value)
        return layer


class DMPNNEncoder(eqx.Module):
    """Chemprop's directed message-passing encoder (``BondMessagePassing``) on :func:`jaxgraphops.agg_dmpnn`,
    the linen :class:`jaxgraphops.nn.flax.DMPNNEncoder` (its equations) as an equinox module.

    Dropout is not supported (Chemprop's default is 0).

    Fields as Chemprop's: ``W_i``, ``W_h`` (``eqx.nn.Linear``, biases with ``use_bias``), ``W_o``
    (with a bias), ``W_d`` (with ``d_vd``, else None).

    **Arguments:**

    - ``d_v``, ``d_e``: atom and bond features.
    - ``d_h``: hidden (and output) features.
    - ``depth``: message-passing steps, counting the first (Chemprop's ``depth``).
    - ``undirected``: average each bond state with its reverse before each message.
    - ``use_bias``: biases on ``W_i`` and ``W_h`` (Chemprop's ``bias``).
    - ``d_vd``: atom-descriptor features (None: no ``W_d``).
    - ``activation``: ``tau`` (Chemprop's default ``relu``).
    - ``key``: PRNG key for the initial weights.

    Call ``layer(g, atom_features, bond_features, rev_edge_ids, atom_descriptors=None)``:
    ``atom_features [n_atoms, d_v]``, ``bond_features [n_edges, d_e]`` in ``g``'s edge order,
    ``rev_edge_ids [n_edges]`` the id of each bond's reverse (Chemprop's ``rev_edge_index``; -1 for
    none); returns ``[n_atoms, d_h]`` (``[n_atoms, d_h + d_vd]`` with descriptors).

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))  # bonds 0-1, 1-2
    >>> layer = DMPNNEncoder(5, 2, 16, depth=3, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 5)), jnp.ones((4, 2)), jnp.array([1, 0, 3, 2])).shape
    (3, 16)
    """

    W_i: eqx.nn.Linear
    W_h: eqx.nn.Linear
    W_o: eqx.nn.Linear
    W_d: eqx.nn.Linear | None
    depth: int = eqx.field(static=True)
    undirected: bool = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)

    def __init__(self, d_v: int, d_e: int, d_h: int, *, depth: int = 3, undirected: bool = False,
                 use_bias: bool = False, d_vd: int | None = None, activation: Callable = jax.nn.relu,
                 key: jax.Array):
        check_dmpnn_config("DMPNNEncoder", depth, undirected)
        check_layer(self, locals())
        keys = jax.random.split(key, 4)
        self.W_i = eqx.nn.Linear(d_v + d_e, d_h, use_bias=use_bias, key=keys[0])
        self.W_h = eqx.nn.Linear(d_h, d_h, use_bias=use_bias, key=keys[1])
        self.W_o = eqx.nn.Linear(d_v + d_h, d_h, key=keys[2])
        self.W_d = None if d_vd is None else eqx.nn.Linear(d_h + d_vd, d_h + d_vd, key=keys[3])
        self.depth, self.undirected, self.activation = depth, undirected, activation

    def __call__(self, g: Graph, atom_features, bond_features, rev_edge_ids, atom_descriptors=None):
        w = {name: {"kernel": lin.weight.T, "bias": lin.bias} for name, lin in
             (("W_i", self.W_i), ("W_h", self.W_h), ("W_o", self.W_o), ("W_d", self.W_d)) if lin is not None}
        return dmpnn_encoder(g, atom_features, bond_features, rev_edge_ids, w, depth=self.depth,
                             undirected=self.undirected, activation=self.activation,
                             atom_descriptors=atom_descriptors)

    @classmethod
    def from_chemprop(cls, state_dict, *, depth: int = 3, undirected: bool = False,
                      activation: Callable = jax.nn.relu) -> DMPNNEncoder:
        """The layer with the weights of a Chemprop ``BondMessagePassing.state_dict()``.

        Sizes, ``use_bias`` and ``d_vd`` follow from the entries; give Chemprop's ``depth``,
        ``undirected`` and activation. Scaling transforms (``V_d_transform``, ``graph_transform``)
        are not read: apply them to the inputs.

        >>> import numpy as np
        >>> sd = {"W_i.weight": np.ones((16, 7)), "W_h.weight": np.ones((16, 16)), "W_o.weight": np.ones((16, 21)),
        ...       "W_o.bias": np.zeros(16)}
        >>> layer = DMPNNEncoder.from_chemprop(sd, depth=4)
        >>> layer.W_i.weight.shape, layer.W_h.bias is None, layer.W_d is None
        ((16, 7), True, True)
        """
        w = dmpnn_weights_from_chemprop("DMPNNEncoder.from_chemprop", state_dict)
        d_h = w["W_h"]["kernel"].shape[0]
        d_v = w["W_o"]["kernel"].shape[0] - d_h
        d_vd = w["W_d"]["kernel"].shape[0] - d_h if "W_d" in w else None
        layer = cls(d_v, w["W_i"]["kernel"].shape[0] - d_v, d_h, depth=depth, undirected=undirected,
                    use_bias="bias" in w["W_i"], d_vd=d_vd, activation=activation, key=jax.random.key(0))
        for name, p in w.items():
            layer = eqx.tree_at(lambda m, n=name: getattr(m, n).weight, layer, p["kernel"].T)
            if "bias" in p:
                layer = eqx.tree_at(lambda m, n=name: getattr(m, n).bias, layer, p["bias"])
        return layer


class InteractionNetwork(eqx.Module):
    """An interaction-network step (MeshGraphNet / GraphCast processor block) on :func:`jaxgraphops.update_efeat`.

    ``e' = edge_mlp([e | x_src[src] | x_dst[dst]])``, ``x' = node_mlp([x_dst | sum_{e into i} e'])``;
    with ``residual`` it returns ``(x_dst + x', e + e')`` (the sum is over ``e'``, before the
    residual), else ``(x', e')``: then it is ``jraph.InteractionNetwork`` with update functions that
    concatenate their inputs.

    **Arguments:**

    - ``edge_mlp``: the edge update on one row, ``[F_e + F_src + F_dst] -> [F_e']`` (an equinox
      module such as ``eqx.nn.MLP``, or any function); it is vmapped over the edges.
    - ``node_mlp``: the node update on one row, ``[F_dst + F_e'] -> [F']``, vmapped over the nodes.
    - ``residual``: add the inputs to the outputs (needs ``F_e' = F_e`` and ``F' = F_dst``).

    Call ``layer(g, nodes, edges)``: ``nodes [n, F]`` for a square graph, or a pair ``(x_src,
    x_dst)`` (bipartite: only the destinations are updated); ``edges [n_edges, F_e]`` in input edge
    order. Returns ``(nodes', edges')``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> layer = InteractionNetwork(eqx.nn.MLP(4 + 8 + 8, 4, 16, 1, key=k1), eqx.nn.MLP(8 + 4, 8, 16, 1, key=k2))
    >>> [a.shape for a in layer(g, jnp.ones((3, 8)), jnp.ones((3, 4)))]
    [(3, 8), (3, 4)]
    """

    edge_mlp: Callable
    node_mlp: Callable
    residual: bool = eqx.field(static=True)

    def __init__(self, edge_mlp: Callable, node_mlp: Callable, *, residual: bool = True):
        check_layer(self, locals())
        self.edge_mlp, self.node_mlp, self.residual = edge_mlp, node_mlp, residual

    def __call__(self, g: Graph, nodes, edges):
        return interaction_network(g, nodes, edges, jax.vmap(self.edge_mlp), jax.vmap(self.node_mlp),
                                   residual=self.residual)
