"""The torch peers of the report's cases: PyG (``torch_geometric.utils.scatter``, its
MessagePassing aggregation path, and ``utils.spmm`` over a CSR adjacency), DGL (``dgl.ops``
and its conv layers) and neuraloperator, on the CPU, or on CUDA when JAX runs on a GPU.

The attention layers get ``Identity`` projections and no bias, so that they compute exactly the
op jaxgraphops is timed on (projected features in, attention-weighted sums out), with the
attention vectors as their differentiated parameters. DGL's max returns -inf for a node without
in-edges; a fill to 0 gives jaxgraphops' convention. DGL needs ``dgl.graphbolt`` stubbed out:
its compiled parts exist only for torch <= 2.2 and are not used here.
"""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import torch

from .runners import implements, torch_runner

DEVICE = "cpu"


def use_cuda(enabled: bool) -> None:
    """Runs the torch peers on CUDA (when JAX runs on a GPU and torch sees one)."""
    global DEVICE
    DEVICE = "cuda" if enabled and torch.cuda.is_available() else "cpu"


def _t(a, dtype=None):
    return torch.tensor(np.asarray(a), dtype=dtype, device=DEVICE)


def _dgl():
    if "dgl.graphbolt" not in sys.modules:
        stub = types.ModuleType("dgl.graphbolt")
        stub.__path__ = []
        sys.modules["dgl.graphbolt"] = stub
    import dgl
    return dgl


def _dgl_graph(d):
    return _dgl().graph((_t(d["src"], torch.int64), _t(d["dst"], torch.int64)), num_nodes=d["n"])


def _edge_index(d):
    return _t(np.stack([d["src"], d["dst"]]), torch.int64)


def _heads(d):
    h = d["heads"]
    return h, d["x"].shape[1] // h


def _set(param, value):
    with torch.no_grad():
        param.copy_(_t(value).reshape(param.shape))
    return param


# -- PyG -----------------------------------------------------------------------------------------

def _pyg_scatter(d, reduce, weighted=False):
    from torch_geometric.utils import scatter

    s, t = _t(d["src"], torch.int64), _t(d["dst"], torch.int64)
    x = _t(d["x"])
    if weighted:
        w = _t(d["w"])
        return torch_runner(lambda: scatter(x[s] * w[:, None], t, 0, d["n"], reduce=reduce), [x, w])
    return torch_runner(lambda: scatter(x[s], t, 0, d["n"], reduce=reduce), [x])


implements("gspmm_sum", "PyG")(lambda d: _pyg_scatter(d, "sum", weighted=True))
implements("agg_mean", "PyG")(lambda d: _pyg_scatter(d, "mean"))
implements("agg_max", "PyG")(lambda d: _pyg_scatter(d, "max"))


@implements("gspmm_sum", "PyG CSR spmm")
def _pyg_spmm(d):
    """``torch_geometric.utils.spmm`` (``torch.sparse.mm``) of the weighted adjacency, rows = destinations."""
    from torch_geometric.utils import spmm

    order = np.argsort(d["dst"], kind="stable")
    crow = np.concatenate([[0], np.cumsum(np.bincount(d["dst"], minlength=d["n"]))])
    crow, col, w, x = _t(crow, torch.int64), _t(d["src"][order], torch.int64), _t(d["w"][order]), _t(d["x"])

    def fn():
        with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
            warnings.simplefilter("ignore", UserWarning)
            adj = torch.sparse_csr_tensor(crow, col, w, (d["n"], d["n"]), check_invariants=False)
        return spmm(adj, x, reduce="sum")

    dense = "not timed: torch.sparse's gradient in the CSR values materialises a dense N x N matrix"
    return torch_runner(fn, [x, w], untimed={"forward+backward": dense})


def _pyg_pool(d, pool):
    import torch_geometric.nn as pyg

    x, batch = _t(d["x"]), _t(d["ids"], torch.int64)
    return torch_runner(lambda: getattr(pyg, pool)(x, batch, size=d["n_graphs"]), [x])


implements("pool_sum", "PyG")(lambda d: _pyg_pool(d, "global_add_pool"))
implements("pool_max", "PyG")(lambda d: _pyg_pool(d, "global_max_pool"))


@implements("gat", "PyG")
def _pyg_gat(d):
    from torch_geometric.nn import GATConv

    h, c = _heads(d)
    conv = GATConv(h * c, c, heads=h, add_self_loops=False, bias=False).to(DEVICE)
    conv.lin = torch.nn.Identity()
    _set(conv.att_src, d["att"][: h * c]), _set(conv.att_dst, d["att"][h * c:])
    x, ei = _t(d["x"]), _edge_index(d)
    return torch_runner(lambda: conv(x, ei), [x], [conv.att_src, conv.att_dst])


@implements("gatv2", "PyG")
def _pyg_gatv2(d):
    from torch_geometric.nn import GATv2Conv

    h, c = _heads(d)
    conv = GATv2Conv(h * c, c, heads=h, add_self_loops=False, bias=False, share_weights=True).to(DEVICE)
    conv.lin_l = conv.lin_r = torch.nn.Identity()
    _set(conv.att, d["att"])
    x, ei = _t(d["x"]), _edge_index(d)
    return torch_runner(lambda: conv(x, ei), [x], [conv.att])


@implements("transformer", "PyG")
def _pyg_transformer(d):
    from torch_geometric.nn import TransformerConv

    h, c = _heads(d)
    conv = TransformerConv(h * c, c, heads=h, root_weight=False).to(DEVICE)
    conv.lin_query = conv.lin_key = conv.lin_value = torch.nn.Identity()
    x, ei = _t(d["x"]), _edge_index(d)
    return torch_runner(lambda: conv(x, ei), [x])


@implements("dimenet", "PyG")
def _pyg_dimenet(d):
    """The triplet step of PyG's ``InteractionPPBlock`` with DimeNet++'s angle and PyG's
    ``SphericalBasisLayer`` angular functions: ``sbf = sbf_rad[kj] * Y_l(angle)``, the two
    ``lin_sbf`` projections, ``emb[kj] * ...``, a scatter-sum at ``ji``."""
    from torch_geometric.nn.models.dimenet import SphericalBasisLayer

    sph_funcs = SphericalBasisLayer(7, 6, 5.0, 5).sph_funcs
    kj, ji = _t(d["idx_kj"], torch.int64), _t(d["idx_ji"], torch.int64)
    vec, sbf_rad, emb = _t(d["vec"]), _t(d["sbf_rad"]), _t(d["emb"])
    w = d["w"]
    w1, w2 = _t(np.ascontiguousarray(w[:42].T)), _t(w[42:])  # lin_sbf1.weight [n_mid, 42], lin_sbf2.weight [n_emb, n_mid]

    def fn():
        v_ji, v_kj = vec[ji], vec[kj]
        angle = torch.atan2(torch.cross(v_ji, v_kj, dim=1).norm(dim=-1), (v_ji * v_kj).sum(dim=-1))
        cbf = torch.stack([f(angle) for f in sph_funcs], dim=1)
        sbf = (sbf_rad[kj].view(-1, 7, 6) * cbf.view(-1, 7, 1)).view(-1, 42)
        t = emb[kj] * torch.nn.functional.linear(torch.nn.functional.linear(sbf, w1), w2)
        return torch.zeros_like(emb).index_add_(0, ji, t)

    return torch_runner(fn, [vec, sbf_rad, emb, w1, w2], force=(vec, [sbf_rad, emb, w1, w2]))


@implements("gno_matrix", "PyG")
def _pyg_nnconv(d):
    """PyG's NNConv (mean) with the kernel MLP ``Linear(d, H) -> ReLU -> Linear(H, c_in * c_out)``."""
    from torch_geometric.nn import NNConv

    (hidden, dim), c = d["U"].shape, d["f"].shape[1]
    net = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, c * c))
    conv = NNConv(c, c, nn=net, aggr="mean", root_weight=False, bias=False).to(DEVICE)
    # NNConv views the kernel output as [c_in, c_out]; jaxgraphops' is [c_out, c_in] row-major
    inv = np.argsort(np.arange(c * c).reshape(c, c).T.ravel())
    _set(net[0].weight, d["U"]), _set(net[0].bias, d["b_u"])
    _set(net[2].weight, d["V"][inv]), _set(net[2].bias, d["b_v"][inv])
    pos, f, ei = _t(d["pos"]), _t(d["f"]), _edge_index(d)
    return torch_runner(lambda: conv(f, ei, edge_attr=pos[ei[1]] - pos[ei[0]]), [pos, f], list(net.parameters()))


class DxKernel(torch.nn.Module):
    """neuraloperator's kernel input is ``cat([y_j, x_i])``; this kernel MLP reads ``dx = x_i - y_j``."""

    def __init__(self, dim, hidden, c):
        super().__init__()
        self.in_channels, self.out_channels, self.dim = 2 * dim, c, dim
        self.U, self.V = torch.nn.Linear(dim, hidden), torch.nn.Linear(hidden, c)

    def forward(self, agg):
        return self.V(torch.relu(self.U(agg[..., self.dim:] - agg[..., :self.dim])))


@implements("gno_diagonal", "neuraloperator")
def _neuralop_integral_transform(d):
    from neuralop.layers.integral_transform import IntegralTransform

    (hidden, dim), c = d["U"].shape, d["f"].shape[1]
    kernel = DxKernel(dim, hidden, c).to(DEVICE)
    _set(kernel.U.weight, d["U"]), _set(kernel.U.bias, d["b_u"]), _set(kernel.V.weight, d["V"]), _set(kernel.V.bias, d["b_v"])
    transform = IntegralTransform(channel_mlp=kernel, transform_type="linear", reduction="sum", use_torch_scatter=False)
    neighbors = {"neighbors_index": _t(d["src"], torch.int64), "neighbors_row_splits": _t(d["offsets"], torch.int64)}
    pos, f = _t(d["pos"]), _t(d["f"])
    slow = ("not timed: without torch_scatter (no wheel for this torch) neuraloperator reduces with a Python "
            "loop over rows whose backward allocates an [E, c] gradient per row, quadratic in the mesh size")
    return torch_runner(lambda: transform(pos, neighbors, x=pos, f_y=f), [pos, f], list(kernel.parameters()),
                        untimed={"forward+backward": slow})


# -- DGL -----------------------------------------------------------------------------------------

@implements("gspmm_sum", "DGL")
def _dgl_gspmm(d):
    g, x, w = _dgl_graph(d), _t(d["x"]), _t(d["w"])
    return torch_runner(lambda: _dgl().ops.u_mul_e_sum(g, x, w[:, None]), [x, w])


@implements("agg_mean", "DGL")
def _dgl_mean(d):
    g, x = _dgl_graph(d), _t(d["x"])
    return torch_runner(lambda: _dgl().ops.copy_u_mean(g, x), [x])


@implements("agg_max", "DGL")
def _dgl_max(d):
    g, x = _dgl_graph(d), _t(d["x"])
    return torch_runner(lambda: torch.nan_to_num(_dgl().ops.copy_u_max(g, x), neginf=0.0), [x])


def _dgl_pool(d, reducer):
    x, seglen = _t(d["x"]), _t(d["sizes"], torch.int64)
    return torch_runner(lambda: _dgl().ops.segment_reduce(seglen, x, reducer), [x])


implements("pool_sum", "DGL")(lambda d: _dgl_pool(d, "sum"))
implements("pool_max", "DGL")(lambda d: _dgl_pool(d, "max"))


@implements("gat", "DGL")
def _dgl_gat(d):
    _dgl()
    from dgl.nn import GATConv

    h, c = _heads(d)
    conv = GATConv(h * c, c, h, allow_zero_in_degree=True, bias=False).to(DEVICE)
    conv.fc = torch.nn.Identity()
    _set(conv.attn_l, d["att"][: h * c]), _set(conv.attn_r, d["att"][h * c:])
    g, x = _dgl_graph(d), _t(d["x"])
    return torch_runner(lambda: conv(g, x).reshape(d["n"], h * c), [x], [conv.attn_l, conv.attn_r])


@implements("gatv2", "DGL")
def _dgl_gatv2(d):
    _dgl()
    from dgl.nn import GATv2Conv

    h, c = _heads(d)
    conv = GATv2Conv(h * c, c, h, allow_zero_in_degree=True, bias=False, share_weights=True).to(DEVICE)
    conv.fc_src = conv.fc_dst = torch.nn.Identity()
    _set(conv.attn, d["att"])
    g, x = _dgl_graph(d), _t(d["x"])
    return torch_runner(lambda: conv(g, x).reshape(d["n"], h * c), [x], [conv.attn])


# -- relational ----------------------------------------------------------------------------------

@implements("update_efeat", "PyG")
def _pyg_update_efeat(d):
    """PyG's message passing gathers ``x_j``/``x_i`` with ``index_select``; a MeshGraphNet edge block concatenates."""
    s, t = _t(d["src"], torch.int64), _t(d["dst"], torch.int64)
    e, x = _t(d["e"]), _t(d["x"])
    return torch_runner(lambda: torch.cat([e, x.index_select(0, s), x.index_select(0, t)], dim=1), [e, x])


@implements("dmpnn", "Chemprop")
def _chemprop_dmpnn(d):
    """Chemprop's own ``BondMessagePassing.message`` (its scatter_reduce and reverse-bond gather) on the batch."""
    from chemprop.nn import BondMessagePassing

    mp = BondMessagePassing(d_h=d["h"].shape[1]).to(DEVICE)
    bmg = types.SimpleNamespace(V=torch.zeros(d["n"], 1, device=DEVICE),
                                edge_index=_t(np.stack([d["src"], d["dst"]]), torch.int64),
                                rev_edge_index=_t(d["rev"], torch.int64))
    h = _t(d["h"])
    return torch_runner(lambda: mp.message(h, bmg), [h])
