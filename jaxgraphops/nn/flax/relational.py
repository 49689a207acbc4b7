"""The relational layers as ``flax.linen`` modules: ``RGCNConv``, ``DMPNNEncoder``, ``InteractionNetwork``, and
their weight loaders (``from_pyg_rgcn``, ``from_chemprop``). The math: :mod:`jaxgraphops.nn._relational`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax

from ...graph import Graph
from .._relational import (check_dmpnn_config, check_rgcn_config, dmpnn_encoder, dmpnn_weights_from_chemprop,
                           interaction_network, pyg_glorot, rgcn_conv, rgcn_inputs, rgcn_kernel_shape,
                           rgcn_weights_from_pyg)
from ._common import Initializer, Layer, ParamLayer, promote

__all__ = ["DMPNNEncoder", "InteractionNetwork", "RGCNConv", "from_chemprop", "from_pyg_rgcn"]


class RGCNConv(ParamLayer):
    """Relational graph convolution (PyG's ``RGCNConv`` and ``FastRGCNConv``) on :func:`jaxgraphops.agg_hg_basis`.

    ``out_i = x_i root + bias + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` with ``c_{i,r} = 1 / |N_r(i)|``
    (``aggr="mean"``: a mean per relation; a relation absent at ``i`` adds nothing) or 1 (``"add"``,
    ``"sum"``). ``W_r`` is a weight per relation, ``sum_b comp[r, b] kernel[b]`` with ``num_bases``, or
    block-diagonal with ``num_blocks`` (float features only). Float features take one fused
    aggregation ``[n_dst, (B or R) * F (+ F)]`` and one matmul with the stacked weights; node ids
    (``x`` None: ``arange``, or an integer array, PyG's featureless input) read rows of ``W_r`` and
    ``root`` as embeddings. The edge order is free (PyG's ``is_sorted`` only changes its speed).

    Params (PyG's layout, :func:`from_pyg_rgcn` loads them): ``kernel`` (PyG's ``weight``) ``[R, F,
    features]``, ``[B, F, features]`` with ``comp [R, B]``, or ``[R, nb, F/nb, features/nb]``;
    ``root_kernel [F_dst, features]`` (with ``root_weight``); ``bias [features]`` (with ``use_bias``).

    Attributes:
      features: output features.
      num_relations: R, the number of edge types.
      num_bases: B, basis decomposition (None: a full weight per relation).
      aggr: ``mean``, ``add`` or ``sum``.
      root_weight: add ``x_i root``.
      use_bias: add ``bias``.
      num_blocks: block-diagonal decomposition into this many blocks.
      num_nodes: the number of node ids (the weights' F) for integer node-id input; default
        ``g.n_src`` for ``x=None``.
      dtype: the computation dtype (default: inferred from the inputs and params).
      param_dtype: the dtype of the created params.

    Call ``layer(g, x, edge_types)``: ``x`` is ``[n_src, F]`` features (or a pair ``(x_src [n_src,
    F], x_dst [n_dst, F_dst])`` for a bipartite graph), integer node ids ``[n_src]`` (or a pair), or
    None; ``edge_types`` is an integer ``[n_edges]`` in input edge order. Returns ``[n_dst, features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> x, types = jnp.ones((3, 4)), jnp.array([0, 2, 1])
    >>> layer = RGCNConv(8, num_relations=3, num_bases=2)
    >>> variables = layer.init(jax.random.key(0), g, x, types)
    >>> layer.apply(variables, g, x, types).shape, variables["params"]["kernel"].shape
    ((3, 8), (2, 4, 8))
    """

    features: int
    num_relations: int
    _: dataclasses.KW_ONLY
    num_bases: int | None = None
    aggr: str = "mean"
    root_weight: bool = True
    use_bias: bool = True
    num_blocks: int | None = None
    num_nodes: int | None = None
    kernel_init: Initializer = pyg_glorot
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x, edge_types):
        name = "RGCNConv"
        check_rgcn_config(name, self.num_relations, self.num_bases, self.num_blocks, self.aggr)
        mode, x_src, x_dst = rgcn_inputs(name, g, x, need_dst=self.root_weight)
        if mode == "ids":
            if self.num_nodes is None and x is not None:
                raise ValueError(f"{name}: num_nodes (the number of node ids) is required for integer node-id input")
            n_src = n_dst = g.n_src if self.num_nodes is None else self.num_nodes
        else:
            n_src, n_dst = x_src.shape[-1], None if x_dst is None else x_dst.shape[-1]
        shape = rgcn_kernel_shape(name, self.num_relations, self.num_bases, self.num_blocks, n_src, self.features)
        w = {"kernel": self.param("kernel", self.kernel_init, shape, self.param_dtype)}
        if self.num_bases is not None:
            w["comp"] = self.param("comp", self.kernel_init, (self.num_relations, self.num_bases), self.param_dtype)
        if self.root_weight:
            w["root_kernel"] = self.param("root_kernel", self.kernel_init, (n_dst, self.features), self.param_dtype)
        if self.use_bias:
            w["bias"] = self.param("bias", self.bias_init, (self.features,), self.param_dtype)
        if mode == "features":
            x_src, x_dst, w = promote(self.dtype, x_src, x_dst, w)
        else:
            (w,) = promote(self.dtype, w)
        x = (x_src, x_dst) if self.root_weight else x_src
        return rgcn_conv(g, x, edge_types, w, aggr=self.aggr)


def from_pyg_rgcn(state_dict) -> dict:
    """Variables for :class:`RGCNConv` from a PyG ``RGCNConv`` or ``FastRGCNConv`` ``state_dict()``.

    Reads ``weight`` (``[R or B, in, out]``, or ``[R, nb, in/nb, out/nb]`` with blocks), ``comp``
    (with ``num_bases``), ``root`` (with ``root_weight``) and ``bias``, as they are (PyG stores them
    ``[in, out]``); build the flax layer with the same ``num_relations``, ``num_bases``,
    ``num_blocks``, ``aggr``, ``root_weight`` and ``bias``.

    >>> import numpy as np
    >>> sd = {"weight": np.ones((2, 4, 8)), "comp": np.ones((3, 2)), "root": np.ones((4, 8)), "bias": np.zeros(8)}
    >>> from_pyg_rgcn(sd)["params"]["kernel"].shape
    (2, 4, 8)
    """
    return {"params": rgcn_weights_from_pyg("from_pyg_rgcn", state_dict)}


class DMPNNEncoder(ParamLayer):
    """Chemprop's directed message-passing encoder (``BondMessagePassing``) on :func:`jaxgraphops.agg_dmpnn`.

    On the bond graph ``g`` (edges = directed bonds), with atom features ``V``, bond features ``E``
    and ``tau`` the activation::

        H0 = W_i([V[src] | E]);  H = tau(H0)
        depth - 1 times:  (undirected: H = (H + H[rev]) / 2)
                          H = tau(H0 + W_h(sum_{e' into src(e)} H[e'] - H[rev(e)]))
        out = tau(W_o([V | sum of H over the bonds into each atom]))
        with atom_descriptors V_d:  out = W_d([out | V_d])

    Dropout is not supported (Chemprop's default is 0).

    Params (``{"kernel": [in, out], "bias"}`` each, as ``flax.linen.Dense``; :func:`from_chemprop`
    loads Chemprop's): ``W_i [d_v + d_e, d_h]``, ``W_h [d_h, d_h]`` (biases with ``use_bias``),
    ``W_o [d_v + d_h, d_h]`` with a bias, and ``W_d [d_h + d_vd, d_h + d_vd]`` with a bias when the
    layer is initialised with ``atom_descriptors``.

    Attributes:
      d_h: hidden (and output) features.
      depth: message-passing steps, counting the first (Chemprop's ``depth``).
      undirected: average each bond state with its reverse before each message.
      use_bias: biases on ``W_i`` and ``W_h`` (Chemprop's ``bias``).
      activation: ``tau`` (Chemprop's default ``relu``).
      dtype, param_dtype: as in ``flax.linen.Dense``.

    Call ``layer(g, atom_features, bond_features, rev_edge_ids, atom_descriptors=None)``:
    ``atom_features [n_atoms, d_v]``, ``bond_features [n_edges, d_e]`` in ``g``'s edge order,
    ``rev_edge_ids [n_edges]`` the id of each bond's reverse (Chemprop's ``rev_edge_index``; -1 for
    none); returns ``[n_atoms, d_h]`` (``[n_atoms, d_h + d_vd]`` with descriptors). Build ``g``
    with ``Graph.from_edge_index(bmg.edge_index, n_atoms)`` from a Chemprop ``BatchMolGraph``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))  # bonds 0-1, 1-2
    >>> atoms, bonds, rev = jnp.ones((3, 5)), jnp.ones((4, 2)), jnp.array([1, 0, 3, 2])
    >>> layer = DMPNNEncoder(16, depth=3)
    >>> variables = layer.init(jax.random.key(0), g, atoms, bonds, rev)
    >>> layer.apply(variables, g, atoms, bonds, rev).shape
    (3, 16)
    """

    d_h: int
    _: dataclasses.KW_ONLY
    depth: int = 3
    undirected: bool = False
    use_bias: bool = False
    activation: Callable = nn.relu
    kernel_init: Initializer = nn.initializers.lecun_normal()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, atom_features, bond_features, rev_edge_ids, atom_descriptors=None):
        check_dmpnn_config("DMPNNEncoder", self.depth, self.undirected)
        d_v, d_e = atom_features.shape[-1], bond_features.shape[-1]

        def dense(name, n_in, n_out, bias):
            def init(key, n_in, n_out):
                k_w, k_b = jax.random.split(key)
                p = {"kernel": self.kernel_init(k_w, (n_in, n_out), self.param_dtype)}
                return {**p, "bias": self.bias_init(k_b, (n_out,), self.param_dtype)} if bias else p
            return self.param(name, init, n_in, n_out)

        w = {"W_i": dense("W_i", d_v + d_e, self.d_h, self.use_bias), "W_h": dense("W_h", self.d_h, self.d_h,
                                                                                    self.use_bias),
             "W_o": dense("W_o", d_v + self.d_h, self.d_h, True)}
        inputs = [atom_features, bond_features]
        if atom_descriptors is not None:
            n_d = self.d_h + atom_descriptors.shape[-1]
            w["W_d"] = dense("W_d", n_d, n_d, True)
            inputs.append(atom_descriptors)
        *inputs, w = promote(self.dtype, *inputs, w)
        return dmpnn_encoder(g, inputs[0], inputs[1], rev_edge_ids, w, depth=self.depth, undirected=self.undirected,
                             activation=self.activation, atom_descriptors=inputs[2] if len(inputs) > 2 else None)


def from_chemprop(state_dict) -> dict:
    """Variables for :class:`DMPNNEncoder` from a Chemprop ``BondMessagePassing.state_dict()``.

    Reads ``W_i``, ``W_h`` (with their biases for Chemprop's ``bias=True``: build the layer with
    ``use_bias=True``), ``W_o`` and ``W_d`` (with ``d_vd``: call the layer with ``atom_descriptors``);
    torch's ``[out, in]`` weights become ``[in, out]`` kernels. Build the layer with Chemprop's
    ``d_h``, ``depth`` and ``undirected``. Scaling transforms (``V_d_transform``,
    ``graph_transform``) are not read: apply them to the inputs.

    >>> import numpy as np
    >>> sd = {"W_i.weight": np.ones((16, 7)), "W_h.weight": np.ones((16, 16)), "W_o.weight": np.ones((16, 21)),
    ...       "W_o.bias": np.zeros(16)}
    >>> from_chemprop(sd)["params"]["W_o"]["kernel"].shape  # d_v = 21 - 16 = 5 atom, 2 bond features
    (21, 16)
    """
    return {"params": dmpnn_weights_from_chemprop("from_chemprop", state_dict)}


class InteractionNetwork(Layer):
    """An interaction-network step (MeshGraphNet / GraphCast processor block) on :func:`jaxgraphops.update_efeat`.

    ``e' = edge_mlp([e | x_src[src] | x_dst[dst]])``, ``x' = node_mlp([x_dst | sum_{e into i} e'])``;
    with ``residual`` it returns ``(x_dst + x', e + e')`` (the sum is over ``e'``, before the
    residual), else ``(x', e')``: then it is ``jraph.InteractionNetwork`` with update functions that
    concatenate their inputs. The MLPs are any flax modules (or functions) mapping ``[rows, in]``
    to ``[rows, out]``.

    Attributes:
      edge_mlp: the edge update, ``[n_edges, F_e + F_src + F_dst] -> [n_edges, F_e']``.
      node_mlp: the node update, ``[n_dst, F_dst + F_e'] -> [n_dst, F']``.
      residual: add the inputs to the outputs (needs ``F_e' = F_e`` and ``F' = F_dst``).

    Call ``layer(g, nodes, edges)``: ``nodes [n, F]`` for a square graph, or a pair ``(x_src,
    x_dst)`` (bipartite, e.g. GraphCast's grid-to-mesh: only the destinations are updated);
    ``edges [n_edges, F_e]`` in input edge order. Returns ``(nodes', edges')``.

    >>> import jax, jax.numpy as jnp, flax.linen as nn, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = InteractionNetwork(nn.Dense(4), nn.Dense(8))
    >>> nodes, edges = jnp.ones((3, 8)), jnp.ones((3, 4))
    >>> variables = layer.init(jax.random.key(0), g, nodes, edges)
    >>> [a.shape for a in layer.apply(variables, g, nodes, edges)]
    [(3, 8), (3, 4)]
    """

    edge_mlp: Callable
    node_mlp: Callable
    _: dataclasses.KW_ONLY
    residual: bool = True

    def __call__(self, g: Graph, nodes, edges):
        return interaction_network(g, nodes, edges, self.edge_mlp, self.node_mlp, residual=self.residual)
