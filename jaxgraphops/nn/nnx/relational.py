"""The relational layers as ``flax.nnx`` modules: ``RGCNConv``, ``DMPNNEncoder`` and ``InteractionNetwork``, with
``from_pyg`` / ``from_chemprop`` class methods. The math: :mod:`jaxgraphops.nn._relational`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from flax import nnx

from ...graph import Graph
from .._common import check_layer, in_sizes
from .._relational import (check_dmpnn_config, check_rgcn_config, dmpnn_encoder, dmpnn_weights_from_chemprop,
                           interaction_network, pyg_glorot, rgcn_config_from_weights, rgcn_conv, rgcn_inputs,
                           rgcn_kernel_shape, rgcn_weights_from_pyg)
from ._common import Initializer, lecun, param, promote, value, with_weights, zeros

__all__ = ["DMPNNEncoder", "InteractionNetwork", "RGCNConv"]


class RGCNConv(nnx.Module):
    """Relational graph convolution (PyG's ``RGCNConv`` and ``FastRGCNConv``) on
    :func:`jaxgraphops.agg_hg_basis`, the linen :class:`jaxgraphops.nn.flax.RGCNConv` as an NNX module.

    ``out_i = x_i root + bias + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` with ``c_{i,r} = 1 / |N_r(i)|``
    (``aggr="mean"``) or 1 (``"add"``, ``"sum"``); ``W_r`` per relation, ``sum_b comp[r, b] kernel[b]``
    with ``num_bases``, or block-diagonal with ``num_blocks`` (float features only). Node ids (``x``
    None: ``arange``, or an integer array, PyG's featureless input) read rows of ``W_r`` and ``root``.

    Params (PyG's layout): ``kernel`` ``[R, F, out]``, ``[B, F, out]`` with ``comp [R, B]``, or ``[R,
    nb, F/nb, out/nb]``; ``root_kernel [F_dst, out]`` (with ``root_weight``); ``bias [out]`` (with
    ``use_bias``).

    Args:
      in_features: ``F``, or ``(F_src, F_dst)``; for node-id input the number of node ids (PyG's
        ``in_channels``).
      out_features: output features.
      num_relations, num_bases, aggr, root_weight, use_bias (``bias``), num_blocks: PyG's options.
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear`` (default: PyG's glorot).

    Call ``layer(g, x, edge_types)``: ``x`` float features ``[n_src, F]`` (or a pair), integer node
    ids ``[n_src]`` (or a pair), or None; ``edge_types`` integer ``[n_edges]`` in input edge order.
    Returns ``[n_dst, out_features]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = RGCNConv(4, 8, num_relations=3, num_bases=2, rngs=nnx.Rngs(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.array([0, 2, 1])).shape, layer.kernel.shape
    ((3, 8), (2, 4, 8))
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, num_relations: int, *,
                 num_bases: int | None = None, aggr: str = "mean", root_weight: bool = True, use_bias: bool = True,
                 num_blocks: int | None = None, kernel_init: Initializer = pyg_glorot,
                 bias_init: Initializer = zeros, dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        name = "RGCNConv"
        check_rgcn_config(name, num_relations, num_bases, num_blocks, aggr)
        check_layer(self, locals(), skip=("in_features",))
        in_src, in_dst = in_sizes(name, in_features)
        shape = rgcn_kernel_shape(name, num_relations, num_bases, num_blocks, in_src, out_features)
        self.kernel = param(kernel_init, rngs, shape, param_dtype)
        self.comp = None if num_bases is None else param(kernel_init, rngs, (num_relations, num_bases), param_dtype)
        self.root_kernel = param(kernel_init, rngs, (in_dst, out_features), param_dtype) if root_weight else None
        self.bias = param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.aggr, self.dtype = aggr, dtype

    def __call__(self, g: Graph, x, edge_types):
        root = self.root_kernel is not None
        mode, x_src, x_dst = rgcn_inputs("RGCNConv", g, x, need_dst=root)
        w = {n: getattr(self, n)[...] for n in ("kernel", "comp", "root_kernel", "bias")
             if getattr(self, n) is not None}
        if mode == "features":
            x_src, x_dst, w = promote(self.dtype, x_src, x_dst, w)
        else:
            (w,) = promote(self.dtype, w)
        return rgcn_conv(g, (x_src, x_dst) if root else x_src, edge_types, w, aggr=self.aggr)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "mean", dtype=None, param_dtype=jnp.float32) -> RGCNConv:
        """The layer with the weights of a PyG ``RGCNConv`` or ``FastRGCNConv`` ``state_dict()``.

        Sizes, ``num_relations``, ``num_bases``, ``num_blocks``, ``root_weight`` and ``bias`` follow
        from the entries (``weight``, ``comp``, ``root``, ``bias``); give PyG's ``aggr``.

        >>> import numpy as np
        >>> sd = {"weight": np.ones((2, 4, 8)), "comp": np.ones((3, 2)), "root": np.ones((4, 8))}
        >>> layer = RGCNConv.from_pyg(sd, aggr="add")
        >>> layer.comp.shape, layer.bias is None
        ((3, 2), True)
        """
        w = rgcn_weights_from_pyg("RGCNConv.from_pyg", state_dict)
        return with_weights(cls, w, aggr=aggr, dtype=dtype, param_dtype=param_dtype, **rgcn_config_from_weights(w))


class DMPNNEncoder(nnx.Module):
    """Chemprop's directed message-passing encoder (``BondMessagePassing``) on :func:`jaxgraphops.agg_dmpnn`,
    the linen :class:`jaxgraphops.nn.flax.DMPNNEncoder` (its equations) as an NNX module.

    Params: ``W_i``, ``W_h`` (``nnx.Linear``, biases with ``use_bias``), ``W_o`` (with a bias), ``W_d``
    (with ``d_vd``; else None), each ``kernel [in, out]`` and ``bias`` as the linen layer's.

    Args:
      d_v, d_e: atom and bond features.
      d_h: hidden (and output) features.
      depth: message-passing steps, counting the first (Chemprop's ``depth``).
      undirected: average each bond state with its reverse before each message.
      use_bias: biases on ``W_i`` and ``W_h`` (Chemprop's ``bias``).
      d_vd: atom-descriptor features (None: no ``W_d``).
      activation: ``tau`` (Chemprop's default ``relu``).
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear``.

    Call ``layer(g, atom_features, bond_features, rev_edge_ids, atom_descriptors=None)``:
    ``atom_features [n_atoms, d_v]``, ``bond_features [n_edges, d_e]`` in ``g``'s edge order,
    ``rev_edge_ids [n_edges]`` (Chemprop's ``rev_edge_index``; -1 for none); returns ``[n_atoms, d_h]``
    (``[n_atoms, d_h + d_vd]`` with descriptors).

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))  # bonds 0-1, 1-2
    >>> layer = DMPNNEncoder(5, 2, 16, depth=3, rngs=nnx.Rngs(0))
    >>> layer(g, jnp.ones((3, 5)), jnp.ones((4, 2)), jnp.array([1, 0, 3, 2])).shape
    (3, 16)
    """

    def __init__(self, d_v: int, d_e: int, d_h: int, *, depth: int = 3, undirected: bool = False,
                 use_bias: bool = False, d_vd: int | None = None, activation: Callable = nnx.relu,
                 kernel_init: Initializer = lecun, bias_init: Initializer = zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_dmpnn_config("DMPNNEncoder", depth, undirected)
        check_layer(self, locals())

        def linear(n_in, n_out, bias):
            return nnx.Linear(n_in, n_out, use_bias=bias, kernel_init=kernel_init, bias_init=bias_init,
                              param_dtype=param_dtype, rngs=rngs)

        self.W_i = linear(d_v + d_e, d_h, use_bias)
        self.W_h = linear(d_h, d_h, use_bias)
        self.W_o = linear(d_v + d_h, d_h, True)
        self.W_d = None if d_vd is None else linear(d_h + d_vd, d_h + d_vd, True)
        self.depth, self.undirected, self.activation, self.dtype = depth, undirected, activation, dtype

    def __call__(self, g: Graph, atom_features, bond_features, rev_edge_ids, atom_descriptors=None):
        w = {name: {"kernel": lin.kernel[...], "bias": value(lin.bias)}
             for name, lin in (("W_i", self.W_i), ("W_h", self.W_h), ("W_o", self.W_o), ("W_d", self.W_d))
             if lin is not None}
        atoms, bonds, descriptors, w = promote(self.dtype, atom_features, bond_features, atom_descriptors, w)
        return dmpnn_encoder(g, atoms, bonds, rev_edge_ids, w, depth=self.depth, undirected=self.undirected,
                             activation=self.activation, atom_descriptors=descriptors)

    @classmethod
    def from_chemprop(cls, state_dict, *, depth: int = 3, undirected: bool = False,
                      activation: Callable = nnx.relu, dtype=None, param_dtype=jnp.float32) -> DMPNNEncoder:
        """The layer with the weights of a Chemprop ``BondMessagePassing.state_dict()``.

        Sizes, ``use_bias`` and ``d_vd`` follow from the entries; give Chemprop's ``depth``,
        ``undirected`` and activation. Scaling transforms (``V_d_transform``, ``graph_transform``) are
        not read: apply them to the inputs.

        >>> import numpy as np
        >>> sd = {"W_i.weight": np.ones((8, 5)), "W_i.bias": np.zeros(8), "W_h.weight": np.ones((8, 8)),
        ...       "W_h.bias": np.zeros(8), "W_o.weight": np.ones((8, 11)), "W_o.bias": np.zeros(8)}
        >>> layer = DMPNNEncoder.from_chemprop(sd, undirected=True)
        >>> layer.W_i.kernel.shape, layer.W_h.bias.shape, layer.undirected
        ((5, 8), (8,), True)
        """
        w = dmpnn_weights_from_chemprop("DMPNNEncoder.from_chemprop", state_dict)
        d_h = w["W_h"]["kernel"].shape[0]
        d_v = w["W_o"]["kernel"].shape[0] - d_h
        return with_weights(cls, w, d_v, w["W_i"]["kernel"].shape[0] - d_v, d_h, depth=depth, undirected=undirected,
                            use_bias="bias" in w["W_i"], d_vd=w["W_d"]["kernel"].shape[0] - d_h if "W_d" in w else None,
                            activation=activation, dtype=dtype, param_dtype=param_dtype)


class InteractionNetwork(nnx.Module):
    """An interaction-network step (MeshGraphNet / GraphCast processor block) on
    :func:`jaxgraphops.update_efeat`, the linen :class:`jaxgraphops.nn.flax.InteractionNetwork` as an NNX module.

    ``e' = edge_mlp([e | x_src[src] | x_dst[dst]])``, ``x' = node_mlp([x_dst | sum_{e into i} e'])``;
    with ``residual`` it returns ``(x_dst + x', e + e')``, else ``(x', e')`` (jraph's
    ``InteractionNetwork`` with concatenating update functions).

    Args:
      edge_mlp: the edge update, an NNX module (or a function) ``[n_edges, F_e + F_src + F_dst] ->
        [n_edges, F_e']``.
      node_mlp: the node update, ``[n_dst, F_dst + F_e'] -> [n_dst, F']``.
      residual: add the inputs to the outputs (needs ``F_e' = F_e`` and ``F' = F_dst``).

    Call ``layer(g, nodes, edges)``: ``nodes [n, F]`` or a pair ``(x_src, x_dst)`` (only the
    destinations are updated), ``edges [n_edges, F_e]`` in input edge order; returns ``(nodes', edges')``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> rngs = nnx.Rngs(0)
    >>> layer = InteractionNetwork(nnx.Linear(4 + 8 + 8, 4, rngs=rngs), nnx.Linear(8 + 4, 8, rngs=rngs))
    >>> [a.shape for a in layer(g, jnp.ones((3, 8)), jnp.ones((3, 4)))]
    [(3, 8), (3, 4)]
    """

    def __init__(self, edge_mlp: Callable, node_mlp: Callable, *, residual: bool = True):
        check_layer(self, locals())
        self.edge_mlp, self.node_mlp, self.residual = edge_mlp, node_mlp, residual

    def __call__(self, g: Graph, nodes, edges):
        return interaction_network(g, nodes, edges, self.edge_mlp, self.node_mlp, residual=self.residual)
