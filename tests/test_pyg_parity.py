"""SAGEConv and GraphConv against PyG's SAGEConv and GCNConv (torch, CPU) with the same weights."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

torch = pytest.importorskip("torch", reason="torch/torch_geometric not installed")
pytest.importorskip("torch_geometric", reason="torch/torch_geometric not installed")

import torch_geometric.nn as pyg_nn  # noqa: E402

from jaxgraphops.nn import equinox as eqx_nn  # noqa: E402
from jaxgraphops.nn import flax as flax_nn  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)


def directed_graph(rng, n_src, n_dst, n_edges):
    """Distinct random edges (no ties for max); destinations ``n_dst - 2`` and ``n_dst - 1`` get none."""
    pairs = rng.choice(n_src * (n_dst - 2), n_edges, replace=False)
    return np.stack([pairs // (n_dst - 2), pairs % (n_dst - 2)])


def undirected_graph(rng, n, n_pairs):
    """Both directions of distinct random edges, no self loops; node ``n - 1`` is isolated."""
    i, j = np.triu_indices(n - 1, k=1)
    keep = rng.choice(i.size, n_pairs, replace=False)
    return np.concatenate([np.stack([i[keep], j[keep]]), np.stack([j[keep], i[keep]])], axis=1)


def state_dict(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def ours(framework, layer_kind, sd, **kw):
    """Our layer loaded with ``sd``, as a function ``(g, x) -> out``."""
    if framework == "equinox":
        return (eqx_nn.SAGEConv if layer_kind == "sage" else eqx_nn.GraphConv).from_pyg(sd, **kw)
    if layer_kind == "sage":
        layer = flax_nn.SAGEConv(sd["lin_l.weight"].shape[0], root_weight="lin_r.weight" in sd, **kw)
        variables = flax_nn.from_pyg_sage(sd)
    else:
        layer, variables = flax_nn.GraphConv(sd["lin.weight"].shape[0]), flax_nn.from_pyg_gcn(sd)
    return lambda g, x: layer.apply(variables, g, x)


def outputs_and_input_grads(torch_fn, our_fn, xs, r):
    """Outputs of both, and the gradients of ``sum(out * r)`` with respect to the inputs ``xs``
    (torch leaves the gradient of an unused input at None: 0 here)."""
    txs = [torch.tensor(x, requires_grad=True) for x in xs]
    t_out = torch_fn(*txs)
    (t_out * torch.tensor(r)).sum().backward()
    j_out, j_vjp = jax.vjp(our_fn, *[jnp.asarray(x) for x in xs])
    j_grads = j_vjp(jnp.asarray(r))
    t_grads = [np.zeros_like(x) if t.grad is None else t.grad.numpy() for x, t in zip(xs, txs)]
    return (t_out.detach().numpy(), t_grads), (np.asarray(j_out), [np.asarray(d) for d in j_grads])


@pytest.mark.parametrize("framework", ["flax", "equinox"])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
@pytest.mark.parametrize("normalize", [False, True])
def test_sage_conv(framework, aggr, normalize):
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    edge_index = directed_graph(rng, 12, 12, 40)
    g = jgo.Graph.from_edge_index(edge_index, 12)
    x = rng.normal(size=(12, 5)).astype(np.float32)
    r = rng.normal(size=(12, 7)).astype(np.float32)
    pyg = pyg_nn.SAGEConv(5, 7, aggr=aggr, normalize=normalize)
    ours_fn = ours(framework, "sage", state_dict(pyg), aggr=aggr, normalize=normalize)
    (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
        lambda x: pyg(x, torch.tensor(edge_index)), lambda x: ours_fn(g, x), [x], r)
    np.testing.assert_allclose(j_out, t_out, **TOL)
    np.testing.assert_allclose(j_grads[0], t_grads[0], **TOL)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
@pytest.mark.parametrize("root_weight", [True, False])
def test_sage_conv_bipartite(framework, aggr, root_weight):
    rng = np.random.default_rng(1)
    torch.manual_seed(1)
    edge_index = directed_graph(rng, 10, 6, 25)
    g = jgo.Graph.from_edges(edge_index[0], edge_index[1], 10, 6)
    x_src, x_dst = rng.normal(size=(10, 4)).astype(np.float32), rng.normal(size=(6, 3)).astype(np.float32)
    r = rng.normal(size=(6, 5)).astype(np.float32)
    pyg = pyg_nn.SAGEConv((4, 3), 5, aggr=aggr, root_weight=root_weight)
    ours_fn = ours(framework, "sage", state_dict(pyg), aggr=aggr)
    (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
        lambda xs, xd: pyg((xs, xd), torch.tensor(edge_index), size=(10, 6)),
        lambda xs, xd: ours_fn(g, (xs, xd)), [x_src, x_dst], r)
    np.testing.assert_allclose(j_out, t_out, **TOL)
    for t, j in zip(t_grads, j_grads):
        np.testing.assert_allclose(j, t, **TOL)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
def test_gcn_conv(framework):
    rng = np.random.default_rng(2)
    torch.manual_seed(2)
    edge_index = undirected_graph(rng, 12, 20)
    g = jgo.Graph.from_edge_index(edge_index, 12)
    x = rng.normal(size=(12, 5)).astype(np.float32)
    r = rng.normal(size=(12, 7)).astype(np.float32)
    pyg = pyg_nn.GCNConv(5, 7)
    torch.nn.init.normal_(pyg.bias)  # non-zero, so that it is compared too
    ours_fn = ours(framework, "gcn", state_dict(pyg))
    (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
        lambda x: pyg(x, torch.tensor(edge_index)), lambda x: ours_fn(g, x), [x], r)
    np.testing.assert_allclose(j_out, t_out, **TOL)
    np.testing.assert_allclose(j_grads[0], t_grads[0], **TOL)
