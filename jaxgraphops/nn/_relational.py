"""The relational layers' math as pure functions, shared by the linen, NNX and equinox modules, and their weight
loaders.

- :func:`rgcn_conv`: PyG's ``RGCNConv`` / ``FastRGCNConv`` on :func:`jaxgraphops.agg_hg_basis`
  (weights from :func:`rgcn_weights_from_pyg`).
- :func:`dmpnn_encoder`: Chemprop v2's ``BondMessagePassing`` on :func:`jaxgraphops.agg_dmpnn`
  (weights from :func:`dmpnn_weights_from_chemprop`).
- :func:`interaction_network`: the MeshGraphNet / GraphCast processor block (jraph's
  ``InteractionNetwork`` with concatenating updates, plus residuals) on :func:`jaxgraphops.update_efeat`.

Kernels are ``[in, out]``. RGCN's weights keep PyG's own layout, which is already ``[K, in, out]``;
a Chemprop ``nn.Linear`` weight ``[out, in]`` is transposed by the loader.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import as_float_array, check_bool, check_edge_types
from ..graph import Graph, check_graph
from ..ops.aggregation import agg_simple
from ..ops.dmpnn import agg_dmpnn
from ..ops.hg_basis import agg_hg_basis
from ..ops.update_efeat import update_efeat
from ._common import check_choice, check_features, check_options, layer_scope, real_edge_rows
from ._pyg import array as _array

RGCN_AGGRS = ("mean", "add", "sum")


def pyg_glorot(key, shape, dtype=jnp.float32):
    """PyG's ``glorot``: uniform in ``+-sqrt(6 / (shape[-2] + shape[-1]))``; leading axes are a batch
    (RGCN's per-relation and per-block weights), not part of the fans."""
    limit = np.sqrt(6.0 / (shape[-2] + shape[-1]))
    return jax.random.uniform(key, shape, dtype, -limit, limit)


# -- RGCNConv -------------------------------------------------------------------------------------

def check_rgcn_config(layer: str, num_relations, num_bases, num_blocks, aggr) -> None:
    """PyG's constructor checks: ``num_relations >= 1``; ``num_bases`` and ``num_blocks`` None or
    positive, not both; ``aggr`` one of ``mean``, ``add``, ``sum``."""
    check_options(layer, num_relations=num_relations, num_bases=num_bases, num_blocks=num_blocks)
    if num_bases is not None and num_blocks is not None:
        raise ValueError(f"{layer}: num_bases and num_blocks cannot both be set (basis and block-diagonal "
                         f"decomposition are exclusive, as in PyG); got num_bases={num_bases}, num_blocks={num_blocks}")
    check_choice(layer, "aggr", aggr, RGCN_AGGRS)


def rgcn_kernel_shape(layer: str, num_relations: int, num_bases, num_blocks, in_features: int,
                      out_features: int) -> tuple[int, ...]:
    """The shape of PyG's ``weight``: ``[B or R, in, out]``, or ``[R, nb, in/nb, out/nb]`` with blocks."""
    if num_blocks is None:
        return (num_relations if num_bases is None else num_bases, in_features, out_features)
    if in_features % num_blocks or out_features % num_blocks:
        raise ValueError(f"{layer}: num_blocks={num_blocks} must divide the input and output features; got "
                         f"{in_features} in, {out_features} out")
    return (num_relations, num_blocks, in_features // num_blocks, out_features // num_blocks)


def _node_input(layer: str, name: str, x, rows: int, rows_name: str):
    """``("features", x [rows, F])``, ``("ids", ids [rows])`` (integer node ids; None: ``arange(rows)``)."""
    if x is None:
        return "ids", jnp.arange(rows)
    x = x if isinstance(x, jax.Array) else np.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.integer):
        if x.shape != (rows,):
            raise ValueError(f"{layer}: {name} given as node ids must be [{rows_name}] = ({rows},); "
                             f"got shape {x.shape}")
        return "ids", jnp.asarray(x)
    x = as_float_array(layer, name, x, rows, rows_name)
    if x.ndim != 2:
        raise ValueError(f"{layer}: {name} must be [{rows_name}, F] features or [{rows_name}] node ids; "
                         f"got shape {x.shape}")
    return "features", x


def _check_ids(layer: str, name: str, ids, n: int, weight: str) -> None:
    if not isinstance(ids, jax.core.Tracer) and ids.size:
        i = np.asarray(ids)
        bad = np.flatnonzero((i < 0) | (i >= n))
        if bad.size:
            raise ValueError(f"{layer}: {name}[{bad[0]}] = {i[bad[0]]} is out of range [0, {n}) (the node ids "
                             f"index the rows of {weight})")


def rgcn_inputs(layer: str, g: Graph, x, need_dst: bool):
    """``(mode, x_src, x_dst)`` from RGCN's ``x``: float features ``[n, F]``, integer node ids ``[n]``
    or None (``arange``: PyG's featureless input), or a pair ``(x_src, x_dst)`` of one kind.
    ``x_dst`` is None when it is not needed (no root weight)."""
    pair = isinstance(x, tuple)
    if pair:
        if len(x) != 2:
            raise ValueError(f"{layer}: x must be an array, None, or a pair (x_src, x_dst); got a tuple of {len(x)}")
        x, x_dst = x
        if x_dst is None and need_dst:
            raise ValueError(f"{layer}: the root weight needs x_dst; got the pair (x_src, None)")
    elif x is None or g.n_src == g.n_dst:
        x_dst = x
    elif need_dst:
        raise ValueError(f"{layer}: x must be a pair (x_src, x_dst) for a bipartite graph with a root weight "
                         f"(n_src={g.n_src}, n_dst={g.n_dst}); got one array")
    else:
        x_dst = None
    mode, x_src = _node_input(layer, "x_src" if pair else "x", x, g.n_src, "n_src")
    if not need_dst:
        return mode, x_src, None
    dst_mode, x_dst = _node_input(layer, "x_dst", x_dst, g.n_dst, "n_dst")
    if dst_mode != mode:
        raise TypeError(f"{layer}: x_src and x_dst must both be float features or both node ids; got {mode} "
                        f"and {dst_mode}")
    return mode, x_src, x_dst


@layer_scope("RGCNConv")
def rgcn_conv(g: Graph, x, edge_types, w: dict, *, aggr: str):
    """PyG's ``RGCNConv`` / ``FastRGCNConv``: ``out_i = x_i root + bias + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r``.

    ``c_{i,r} = 1 / |N_r(i)|`` for ``aggr="mean"`` (a mean per relation; a relation absent at ``i``
    adds nothing), 1 for ``"add"``/``"sum"``. ``w`` holds PyG's arrays: ``kernel`` (PyG's ``weight``:
    ``[R, F, out]``; ``[B, F, out]`` bases with ``comp [R, B]``, ``W_r = sum_b comp[r, b] kernel[b]``;
    or ``[R, nb, F/nb, out/nb]`` block-diagonal ``W_r``), ``root_kernel [F_dst, out]`` and ``bias
    [out]`` (each optional). The edge order is free (PyG's ``is_sorted`` only changes its speed).

    Float features take the "post" form: one :func:`jaxgraphops.agg_hg_basis` (``[n_dst, K*F]``, the
    own block appended when the root weight applies to same-width features) and one matmul with the
    stacked ``[K*F (+F), out]`` weights. Node ids (``x`` None or integer, PyG's featureless input)
    read row ``x_j`` of ``W_r`` per edge (``W_r`` formed from the bases), summed with
    :func:`jaxgraphops.agg_simple`, and ``root[x_i]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([2, 2, 2]))
    >>> w = {"kernel": jnp.stack([jnp.eye(2), 2 * jnp.eye(2)])}  # W_0 = I, W_1 = 2 I
    >>> x = jnp.array([[1.0, 0.0], [3.0, 0.0], [0.0, 1.0]])
    >>> rgcn_conv(g, x, jnp.array([0, 0, 1]), w, aggr="mean")[2]  # mean(x_0, x_1) + 2 x_2
    Array([2., 2.], dtype=float32)
    """
    layer = "RGCNConv"
    check_graph(layer, g)
    check_choice(layer, "aggr", aggr, RGCN_AGGRS)
    kernel, comp, root, bias = (w.get(k) for k in ("kernel", "comp", "root_kernel", "bias"))
    blocks = kernel.ndim == 4
    n_rel = kernel.shape[0] if comp is None else comp.shape[0]
    mean = aggr == "mean"
    types = check_edge_types(layer, g, edge_types, n_rel, "num_relations")
    mode, x_src, x_dst = rgcn_inputs(layer, g, x, need_dst=root is not None)
    n_in = kernel.shape[1] * kernel.shape[2] if blocks else kernel.shape[1]
    out_features = kernel.shape[1] * kernel.shape[3] if blocks else kernel.shape[2]
    if mode == "ids":
        if blocks:
            raise ValueError(f"{layer}: block-diagonal decomposition (num_blocks) needs float features; got node "
                             f"ids (as PyG, which rejects them too)")
        _check_ids(layer, "x_src", x_src, n_in, "the relation weights")
        weight = kernel if comp is None else jnp.einsum("rb,bio->rio", comp, kernel)
        msgs = weight[types, x_src[g.src]]
        if mean:
            counts = jnp.zeros((g.n_dst, n_rel), msgs.dtype).at[g.dst, types].add(1)
            msgs = msgs / counts[g.dst, types][:, None]
        out = agg_simple(g, edge_feat=msgs, reduce="sum")
        if root is not None:
            _check_ids(layer, "x_dst", x_dst, root.shape[0], "root")
            out = out + root[x_dst]
    else:
        check_features(layer, "x_src", x_src, n_in)
        if root is not None:
            check_features(layer, "x_dst", x_dst, root.shape[0], "in_features[1]")
        own = root is not None and not blocks and x_dst.shape[1] == n_in
        h = agg_hg_basis(g, x_src, types, None if blocks else comp, n_edge_types=n_rel,
                         x_dst=x_dst if own else None, concat_own=own, norm_by_dst_degree=mean)
        if blocks:
            n_blocks = kernel.shape[1]
            h = h.reshape(g.n_dst, n_rel, n_blocks, n_in // n_blocks)
            out = jnp.einsum("nrbi,rbio->nbo", h, kernel).reshape(g.n_dst, out_features)
        else:
            stacked = kernel.reshape(-1, out_features)
            out = h @ (jnp.concatenate([stacked, root.astype(stacked.dtype)]) if own else stacked)
        if root is not None and not own:
            out = out + x_dst @ root
    return out if bias is None else out + bias


def rgcn_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``RGCNConv`` / ``FastRGCNConv`` weights as ``{kernel, comp?, root_kernel?, bias?}`` (PyG's
    ``weight``, ``comp``, ``root``, ``bias``, unchanged: PyG already stores them ``[..., in, out]``)."""
    names = {"weight": "kernel", "comp": "comp", "root": "root_kernel", "bias": "bias"}
    keys = set(state_dict)
    if "weight" not in keys or not keys <= set(names):
        raise ValueError(f"{fn}: state_dict must have the key 'weight' and may have 'comp', 'root', 'bias' "
                         f"(PyG RGCNConv/FastRGCNConv); got {sorted(keys)}")
    a = {k: _array(state_dict[k]) for k in keys}
    shapes = {k: tuple(v.shape) for k, v in a.items()}
    weight = a["weight"]
    if weight.ndim not in (3, 4) or ("comp" in a and weight.ndim != 3):
        raise ValueError(f"{fn}: weight must be [R or B, in, out], or [R, num_blocks, in/nb, out/nb] without "
                         f"comp; got shapes {shapes}")
    out = weight.shape[2] if weight.ndim == 3 else weight.shape[1] * weight.shape[3]
    ok = ("comp" not in a or (a["comp"].ndim == 2 and a["comp"].shape[1] == weight.shape[0])) and \
         ("root" not in a or (a["root"].ndim == 2 and a["root"].shape[1] == out)) and \
         ("bias" not in a or a["bias"].shape == (out,))
    if not ok:
        raise ValueError(f"{fn}: comp must be [R, B] with B = weight.shape[0], root [in, {out}], bias [{out}]; "
                         f"got shapes {shapes}")
    return {names[k]: v for k, v in a.items()}


def rgcn_config_from_weights(w: dict) -> dict:
    """The constructor arguments of the NNX and Equinox ``RGCNConv`` that hold the weights ``w`` of
    :func:`rgcn_weights_from_pyg`: ``in_features`` (a pair), ``out_features``, ``num_relations``, ``num_bases``,
    ``root_weight``, ``use_bias``, ``num_blocks``."""
    kernel, comp, root = w["kernel"], w.get("comp"), w.get("root_kernel")
    blocks = kernel.ndim == 4
    in_src = kernel.shape[1] * kernel.shape[2] if blocks else kernel.shape[1]
    return {"in_features": (in_src, in_src if root is None else root.shape[0]),
            "out_features": kernel.shape[1] * kernel.shape[3] if blocks else kernel.shape[2],
            "num_relations": kernel.shape[0] if comp is None else comp.shape[0],
            "num_bases": None if comp is None else comp.shape[1], "root_weight": root is not None,
            "use_bias": "bias" in w, "num_blocks": kernel.shape[1] if blocks else None}


# -- DMPNNEncoder ---------------------------------------------------------------------------------

CHEMPROP_KEYS = ("W_i.weight", "W_i.bias", "W_h.weight", "W_h.bias", "W_o.weight", "W_o.bias", "W_d.weight",
                 "W_d.bias")


def _dense(x, p: dict):
    y = x @ p["kernel"]
    return y if p.get("bias") is None else y + p["bias"]


def check_dmpnn_config(layer: str, depth, undirected) -> None:
    check_options(layer, depth=depth, undirected=undirected)


def _reverse_rows(h, rev):
    """``h[rev[e]]``, or ``h[e]`` where ``rev[e] == -1`` (an edge without a reverse is its own)."""
    rev = jnp.asarray(rev)
    return h[jnp.where(rev >= 0, rev, jnp.arange(rev.shape[0], dtype=rev.dtype))]


@layer_scope("DMPNNEncoder")
def dmpnn_encoder(g: Graph, atom_features, bond_features, rev_edge_ids, w: dict, *, depth: int, undirected: bool,
                  activation: Callable = jax.nn.relu, atom_descriptors=None):
    """Chemprop v2's ``BondMessagePassing.forward`` (no dropout) on the bond graph ``g`` (edges = directed bonds).

    With ``V`` the atom features, ``E`` the bond features and ``tau`` the activation::

        H0 = W_i([V[src] | E]);  H = tau(H0)
        depth - 1 times:  (undirected: H = (H + H[rev]) / 2)
                          H = tau(H0 + W_h(agg_dmpnn(g, H, rev)))
        out = tau(W_o([V | sum of H over the bonds into each atom]))      [n_atoms, d_h]
        with descriptors:  out = W_d([out | atom_descriptors])             [n_atoms, d_h + d_vd]

    ``w`` holds ``{"kernel": [in, out], "bias"?}`` per linear map ``W_i``, ``W_h``, ``W_o`` (and
    ``W_d``). ``W_i`` is applied as ``(V @ W_i[:d_v])[src] + E @ W_i[d_v:]``: the atoms are projected
    before the gather (:func:`jaxgraphops.update_efeat`, mode ``"sum"``), the bonds after the padding edges'
    rows are set to 0 (whatever they hold never reaches a weight gradient). An edge whose
    ``rev_edge_ids`` is -1 is its own reverse in the undirected average.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 0]))  # one bond, both directions
    >>> w = {"W_i": {"kernel": jnp.ones((2, 1))}, "W_h": {"kernel": jnp.ones((1, 1))},
    ...      "W_o": {"kernel": jnp.ones((2, 1)), "bias": jnp.zeros(1)}}
    >>> dmpnn_encoder(g, jnp.array([[1.0], [2.0]]), jnp.array([[0.5], [0.5]]), jnp.array([1, 0]), w,
    ...               depth=2, undirected=False)  # H = [1.5, 2.5] (no other bond: no message); atom 0: 1 + 2.5
    Array([[3.5],
           [3.5]], dtype=float32)
    """
    layer = "DMPNNEncoder"
    check_graph(layer, g)
    check_dmpnn_config(layer, depth, undirected)
    if g.n_src != g.n_dst:
        raise ValueError(f"{layer}: g must be the square bond graph of one set of atoms (n_src == n_dst); "
                         f"got n_src={g.n_src}, n_dst={g.n_dst}")
    atoms = as_float_array(layer, "atom_features", atom_features, g.n_dst, "n_atoms")
    bonds = as_float_array(layer, "bond_features", bond_features, g.n_edges, "n_edges (directed bonds)")
    if atoms.ndim != 2 or bonds.ndim != 2:
        raise ValueError(f"{layer}: atom_features must be [n_atoms, d_v] and bond_features [n_edges, d_e]; got "
                         f"shapes {atoms.shape} and {bonds.shape}")
    rev = rev_edge_ids if isinstance(rev_edge_ids, jax.Array) else np.asarray(rev_edge_ids)
    if not jnp.issubdtype(rev.dtype, jnp.integer) or rev.shape != (g.n_edges,):
        raise ValueError(f"{layer}: rev_edge_ids must be an integer array [n_edges] = ({g.n_edges},); got "
                         f"{rev.dtype} {rev.shape}")
    d_v, d_e = atoms.shape[1], bonds.shape[1]
    k_i, k_o = w["W_i"]["kernel"], w["W_o"]["kernel"]
    d_h = k_i.shape[1]
    if k_i.shape[0] != d_v + d_e or k_o.shape[0] != d_v + d_h:
        want_v, want_e = k_o.shape[0] - d_h, k_i.shape[0] - k_o.shape[0] + d_h
        raise ValueError(f"{layer}: the weights take {want_v} atom and {want_e} bond features (W_i [{k_i.shape[0]}, "
                         f"{d_h}], W_o [{k_o.shape[0]}, {k_o.shape[1]}]; the layer was built with d_v={want_v}, "
                         f"d_e={want_e}); got {d_v} and {d_e}: build it with d_v={d_v}, d_e={d_e}")
    if ("W_d" in w) != (atom_descriptors is not None):
        raise ValueError(f"{layer}: atom_descriptors are {'missing' if 'W_d' in w else 'given'}, but the layer "
                         f"{'has' if 'W_d' in w else 'has no'} descriptor weights W_d (Chemprop's d_vd)")

    w_i = {"kernel": k_i[d_v:], "bias": w["W_i"].get("bias")}
    h0 = update_efeat(g, _dense(real_edge_rows(g, bonds), w_i), atoms @ k_i[:d_v], mode="sum")
    h = activation(h0)
    for _ in range(depth - 1):
        if undirected:
            h = (h + _reverse_rows(h, rev)) / 2
        h = activation(h0 + _dense(agg_dmpnn(g, h, rev), w["W_h"]))
    out = activation(_dense(jnp.concatenate([atoms, agg_simple(g, edge_feat=h, reduce="sum")], axis=1), w["W_o"]))
    if atom_descriptors is not None:
        v_d = as_float_array(layer, "atom_descriptors", atom_descriptors, g.n_dst, "n_atoms")
        if v_d.ndim != 2 or out.shape[1] + v_d.shape[1] != w["W_d"]["kernel"].shape[0]:
            raise ValueError(f"{layer}: atom_descriptors must be [n_atoms, {w['W_d']['kernel'].shape[0] - d_h}] "
                             f"for W_d; got shape {v_d.shape}")
        out = _dense(jnp.concatenate([out, v_d], axis=1), w["W_d"])
    return out


def dmpnn_weights_from_chemprop(fn: str, state_dict) -> dict:
    """Chemprop ``BondMessagePassing.state_dict()`` as ``{W_i, W_h, W_o, W_d?}``, each ``{"kernel": [in, out],
    "bias"?}`` (torch's ``[out, in]`` transposed). ``W_i.bias``/``W_h.bias`` are Chemprop's ``bias=True``;
    ``W_d`` its ``d_vd``."""
    keys = set(state_dict)
    required = {"W_i.weight", "W_h.weight", "W_o.weight", "W_o.bias"}
    extra = keys - set(CHEMPROP_KEYS)
    if not required <= keys or extra:
        hint = ("; V_d_transform and graph_transform only scale the inputs: apply them to the features "
                "before the call, and a learned activation (tau.weight, PReLU) is not supported") if extra else ""
        raise ValueError(f"{fn}: state_dict must have the keys {sorted(required)} and may have "
                         f"{sorted(set(CHEMPROP_KEYS) - required)} (Chemprop BondMessagePassing); got {sorted(keys)}"
                         f"{hint}")
    for pair in (("W_i.bias", "W_h.bias"), ("W_d.weight", "W_d.bias")):
        if (pair[0] in keys) != (pair[1] in keys):
            raise ValueError(f"{fn}: {pair[0]} and {pair[1]} must both be present or both absent; got {sorted(keys)}")
    a = {k: _array(state_dict[k]) for k in keys}
    shapes = {k: tuple(v.shape) for k, v in a.items()}
    d_h = a["W_h.weight"].shape[0] if a["W_h.weight"].ndim == 2 else -1
    d_v = a["W_o.weight"].shape[-1] - d_h
    expected = {"W_h.weight": (d_h, d_h), "W_i.weight": (d_h, None), "W_o.weight": (d_h, None)}
    if "W_d.weight" in a:
        n_d = a["W_d.weight"].shape[0]
        expected["W_d.weight"] = (n_d, n_d) if n_d > d_h else (None, -1)
    ok = d_h > 0 and d_v > 0 and a["W_i.weight"].ndim == 2 and a["W_i.weight"].shape[1] >= d_v
    for k, v in a.items():
        if k.endswith("weight"):
            rows, cols = expected[k]
            ok = ok and v.ndim == 2 and rows in (None, v.shape[0]) and cols in (None, v.shape[1])
        else:
            ok = ok and v.shape == (a[k.replace("bias", "weight")].shape[0],)
    if not ok:
        raise ValueError(f"{fn}: shapes do not fit Chemprop's W_i [d_h, d_v + d_e], W_h [d_h, d_h], W_o [d_h, d_v + "
                         f"d_h], W_d [d_h + d_vd, d_h + d_vd] and [out] biases; got {shapes}")
    w = {}
    for k, v in a.items():
        name, kind = k.split(".")
        w.setdefault(name, {})["kernel" if kind == "weight" else "bias"] = v.T if kind == "weight" else v
    return w


# -- InteractionNetwork ---------------------------------------------------------------------------

@layer_scope("InteractionNetwork")
def interaction_network(g: Graph, nodes, edges, edge_fn: Callable, node_fn: Callable, *, residual: bool):
    """One interaction-network step (MeshGraphNet / GraphCast): returns ``(nodes', edges')``.

    ``e' = edge_fn([e | x_src[src] | x_dst[dst]])`` (:func:`jaxgraphops.update_efeat`),
    ``x' = node_fn([x_dst | sum of e' over the edges into the node])`` (:func:`jaxgraphops.agg_simple`);
    with ``residual`` the outputs are ``x_dst + x'`` and ``e + e'`` (the aggregated edges are ``e'``,
    before the residual). Without it this is jraph's ``InteractionNetwork`` whose update functions
    concatenate their inputs. ``nodes`` is ``[n, F]`` for a square graph or a pair ``(x_src, x_dst)``
    (only the destinations are updated); ``edge_fn``/``node_fn`` map row batches ``[rows, in]`` to
    ``[rows, out]``. ``edge_fn``'s input is 0 at the padding edges (:func:`jaxgraphops.update_efeat`'s rows there),
    so whatever their rows of ``edges`` hold never reaches a weight gradient.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> x, e = jnp.array([[1.0], [2.0]]), jnp.array([[10.0], [20.0]])
    >>> x2, e2 = interaction_network(g, x, e, lambda m: m.sum(1, keepdims=True), lambda m: m[:, 1:],
    ...                              residual=True)
    >>> e2.ravel(), x2.ravel()  # e' = [13, 24]; x' = [0, 37]
    (Array([23., 44.], dtype=float32), Array([ 1., 39.], dtype=float32))
    """
    layer = "InteractionNetwork"
    check_graph(layer, g)
    check_bool(layer, "residual", residual)
    if isinstance(nodes, tuple):
        if len(nodes) != 2:
            raise ValueError(f"{layer}: nodes must be an array or a pair (x_src, x_dst); got a tuple of {len(nodes)}")
        x_src, x_dst = nodes
    elif g.n_src != g.n_dst:
        raise ValueError(f"{layer}: nodes must be a pair (x_src, x_dst) for a bipartite graph (n_src={g.n_src}, "
                         f"n_dst={g.n_dst}); got one array")
    else:
        x_src = x_dst = nodes
    pair = isinstance(nodes, tuple)
    x_src = as_float_array(layer, "x_src" if pair else "nodes", x_src, g.n_src, "n_src")
    x_dst = x_src if not pair else as_float_array(layer, "x_dst", x_dst, g.n_dst, "n_dst")
    edges = as_float_array(layer, "edges", edges, g.n_edges, "n_edges")
    if x_src.ndim != 2 or x_dst.ndim != 2 or edges.ndim != 2:
        raise ValueError(f"{layer}: nodes and edges must be 2-D [rows, features]; got shapes {x_src.shape}, "
                         f"{x_dst.shape} (destinations) and {edges.shape}")
    new_edges = edge_fn(update_efeat(g, edges, x_src, x_dst, mode="concat"))
    if new_edges.ndim != 2 or new_edges.shape[0] != g.n_edges:
        raise ValueError(f"{layer}: edge_mlp must return [n_edges, F] = [{g.n_edges}, F]; got shape {new_edges.shape}")
    new_nodes = node_fn(jnp.concatenate([x_dst, agg_simple(g, edge_feat=new_edges, reduce="sum")], axis=1))
    if new_nodes.ndim != 2 or new_nodes.shape[0] != g.n_dst:
        raise ValueError(f"{layer}: node_mlp must return [n_dst, F] = [{g.n_dst}, F]; got shape {new_nodes.shape}")
    if not residual:
        return new_nodes, new_edges
    for name, old, new in (("node_mlp", x_dst, new_nodes), ("edge_mlp", edges, new_edges)):
        if new.shape != old.shape:
            raise ValueError(f"{layer}: residual=True adds {name}'s output to its input, so it must keep the width; "
                             f"got {old.shape} -> {new.shape} (or residual=False)")
    return x_dst + new_nodes, edges + new_edges
