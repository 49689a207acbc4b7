"""GATConv, GATv2Conv and TransformerConv against PyG's layers of the same names (torch, CPU) with
the same weights: outputs, attention weights and gradients with respect to the inputs."""

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


def graph_with_loops(rng, n, n_edges):
    """Random edges incl. a duplicate and two self loops; node ``n - 1`` receives no edge."""
    src, dst = rng.integers(0, n, n_edges), rng.integers(0, n - 1, n_edges)
    src[1], dst[1] = src[0], dst[0]
    src[2], dst[2] = 3, 3
    src[5], dst[5] = 4, 4
    return np.stack([src, dst])


def state_dict(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def randomize(pyg):
    """Non-zero bias and larger attention vectors, so that every parameter matters."""
    with torch.no_grad():
        for name, p in pyg.named_parameters():
            if name == "bias" or name.startswith("att"):
                p.normal_()


def ours(framework, sd, *, residual=False, **kw):
    """Our layer loaded with ``sd``, as ``f(g, x, edge_attr=None, return_attention_weights=False)``."""
    if framework == "equinox":
        return eqx_nn.GATConv.from_pyg(sd, **kw)
    kw["residual"] = residual
    _, heads, c = sd["att_src"].shape
    edge_dim = sd["lin_edge.weight"].shape[1] if "lin_edge.weight" in sd else None
    layer = flax_nn.GATConv(c, heads=heads, edge_dim=edge_dim, use_bias="bias" in sd,
                            share_weights="lin.weight" in sd, **kw)
    variables = flax_nn.from_pyg_gat(sd)
    return lambda *a, **k: layer.apply(variables, *a, **k)


def ours_v2(framework, sd, *, share_weights=False, **kw):
    """Our GATv2Conv loaded with ``sd``, as ``f(g, x, edge_attr=None, return_attention_weights=False)``."""
    if framework == "equinox":
        return eqx_nn.GATv2Conv.from_pyg(sd, share_weights=share_weights, **kw)
    _, heads, c = sd["att"].shape
    edge_dim = sd["lin_edge.weight"].shape[1] if "lin_edge.weight" in sd else None
    layer = flax_nn.GATv2Conv(c, heads=heads, edge_dim=edge_dim, use_bias="bias" in sd, share_weights=share_weights,
                              residual="res.weight" in sd, **kw)
    variables = flax_nn.from_pyg_gatv2(sd, share_weights=share_weights)
    return lambda *a, **k: layer.apply(variables, *a, **k)


def outputs_and_input_grads(torch_fn, our_fn, xs, r):
    """Outputs of both, and the gradients of ``sum(out * r)`` with respect to the inputs ``xs``."""
    txs = [torch.tensor(x, requires_grad=True) for x in xs]
    t_out = torch_fn(*txs)
    (t_out * torch.tensor(r)).sum().backward()
    j_out, j_vjp = jax.vjp(our_fn, *[jnp.asarray(x) for x in xs])
    j_grads = j_vjp(jnp.asarray(r))
    return (t_out.detach().numpy(), [t.grad.numpy() for t in txs]), (np.asarray(j_out), [np.asarray(d) for d in j_grads])


@pytest.mark.parametrize("kind", ["GATConv", "GATv2Conv"])
@pytest.mark.parametrize("framework", ["flax", "equinox"])
@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("edge_dim", [None, 3])
def test_gat_conv(kind, framework, heads, concat, edge_dim):
    rng = np.random.default_rng(heads + 10 * concat)
    torch.manual_seed(heads)
    n, n_e = 12, 40
    edge_index = graph_with_loops(rng, n, n_e)
    g = jgo.Graph.from_edge_index(edge_index, n)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    ea = None if edge_dim is None else rng.normal(size=(n_e, edge_dim)).astype(np.float32)
    pyg = getattr(pyg_nn, kind)(5, 6, heads=heads, concat=concat, edge_dim=edge_dim)
    randomize(pyg)
    layer = (ours if kind == "GATConv" else ours_v2)(framework, state_dict(pyg), concat=concat)
    r = rng.normal(size=(n, 6 * heads if concat else 6)).astype(np.float32)
    xs = [x] if ea is None else [x, ea]
    ti = torch.tensor(edge_index)
    (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
        lambda *a: pyg(a[0], ti, *a[1:]), lambda *a: layer(g, *a), xs, r)
    np.testing.assert_allclose(j_out, t_out, **TOL)
    for t, j in zip(t_grads, j_grads):
        np.testing.assert_allclose(j, t, **TOL)

    # attention weights: PyG's edges are ours without the removed self loops, then the loops
    t_out, (t_ei, t_alpha) = pyg(torch.tensor(x), ti, None if ea is None else torch.tensor(ea),
                                 return_attention_weights=True)
    j_out, j_alpha = layer(g, jnp.asarray(x), None if ea is None else jnp.asarray(ea), return_attention_weights=True)
    kept = np.concatenate([edge_index[0] != edge_index[1], np.ones(n, bool)])
    ours_ei = np.concatenate([edge_index, np.stack([np.arange(n)] * 2)], axis=1)[:, kept]
    np.testing.assert_array_equal(t_ei.numpy(), ours_ei)
    np.testing.assert_allclose(np.asarray(j_alpha)[kept], t_alpha.detach().numpy(), **TOL)
    np.testing.assert_array_equal(np.asarray(j_alpha)[~kept], 0)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_gat_conv_bipartite(framework, add_self_loops):
    rng = np.random.default_rng(3)
    torch.manual_seed(3)
    n_src, n_dst, n_e = 10, 7, 30
    edge_index = np.stack([rng.integers(0, n_src, n_e), rng.integers(0, n_dst - 1, n_e)])
    edge_index[:, 2] = 2  # a self loop (removed by PyG when adding loops)
    g = jgo.Graph.from_edges(edge_index[0], edge_index[1], n_src, n_dst)
    x_src, x_dst = rng.normal(size=(n_src, 4)).astype(np.float32), rng.normal(size=(n_dst, 3)).astype(np.float32)
    pyg = pyg_nn.GATConv((4, 3), 5, heads=2, add_self_loops=add_self_loops)
    randomize(pyg)
    layer = ours(framework, state_dict(pyg), add_self_loops=add_self_loops)
    r = rng.normal(size=(n_dst, 10)).astype(np.float32)
    ti = torch.tensor(edge_index)
    (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
        lambda xs, xd: pyg((xs, xd), ti, size=(n_src, n_dst)), lambda xs, xd: layer(g, (xs, xd)), [x_src, x_dst], r)
    np.testing.assert_allclose(j_out, t_out, **TOL)
    for t, j in zip(t_grads, j_grads):
        np.testing.assert_allclose(j, t, **TOL)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
def test_gat_conv_options(framework):
    """No self loops, negative_slope, no bias, a constant fill_value."""
    rng = np.random.default_rng(4)
    torch.manual_seed(4)
    n, n_e = 9, 30
    edge_index = graph_with_loops(rng, n, n_e)
    g = jgo.Graph.from_edge_index(edge_index, n)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    ea = rng.normal(size=(n_e, 2)).astype(np.float32)
    ti = torch.tensor(edge_index)
    for kw in (dict(add_self_loops=False, negative_slope=0.05), dict(fill_value=0.5)):
        pyg = pyg_nn.GATConv(5, 3, heads=2, edge_dim=2, bias=False, **kw)
        randomize(pyg)
        layer = ours(framework, state_dict(pyg), **kw)
        r = rng.normal(size=(n, 6)).astype(np.float32)
        (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
            lambda x, e: pyg(x, ti, e), lambda x, e: layer(g, x, e), [x, ea], r)
        np.testing.assert_allclose(j_out, t_out, **TOL)
        for t, j in zip(t_grads, j_grads):
            np.testing.assert_allclose(j, t, **TOL)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
def test_gat_conv_residual(framework):
    rng = np.random.default_rng(5)
    torch.manual_seed(5)
    n, n_e = 9, 30
    edge_index = graph_with_loops(rng, n, n_e)
    g = jgo.Graph.from_edge_index(edge_index, n)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    ti = torch.tensor(edge_index)
    for concat in (True, False):
        pyg = pyg_nn.GATConv(5, 3, heads=2, concat=concat, residual=True)
        randomize(pyg)
        layer = ours(framework, state_dict(pyg), concat=concat, residual=True)
        r = rng.normal(size=(n, 6 if concat else 3)).astype(np.float32)
        (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
            lambda x: pyg(x, ti), lambda x: layer(g, x), [x], r)
        np.testing.assert_allclose(j_out, t_out, **TOL)
        np.testing.assert_allclose(j_grads[0], t_grads[0], **TOL)


# -- GATv2Conv ------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", ["flax", "equinox"])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_gatv2_conv_bipartite(framework, add_self_loops):
    rng = np.random.default_rng(23)
    torch.manual_seed(23)
    n_src, n_dst, n_e = 10, 7, 30
    edge_index = np.stack([rng.integers(0, n_src, n_e), rng.integers(0, n_dst - 1, n_e)])
    edge_index[:, 2] = 2
    g = jgo.Graph.from_edges(edge_index[0], edge_index[1], n_src, n_dst)
    x_src, x_dst = rng.normal(size=(n_src, 4)).astype(np.float32), rng.normal(size=(n_dst, 3)).astype(np.float32)
    pyg = pyg_nn.GATv2Conv((4, 3), 5, heads=2, add_self_loops=add_self_loops, edge_dim=2, residual=True)
    randomize(pyg)
    layer = ours_v2(framework, state_dict(pyg), add_self_loops=add_self_loops)
    ea = rng.normal(size=(n_e, 2)).astype(np.float32)
    r = rng.normal(size=(n_dst, 10)).astype(np.float32)
    ti = torch.tensor(edge_index)
    (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
        lambda xs, xd, e: pyg((xs, xd), ti, e), lambda xs, xd, e: layer(g, (xs, xd), e),
        [x_src, x_dst, ea], r)
    np.testing.assert_allclose(j_out, t_out, **TOL)
    for t, j in zip(t_grads, j_grads):
        np.testing.assert_allclose(j, t, **TOL)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
def test_gatv2_conv_options(framework):
    """share_weights, residual, no bias, no self loops, negative_slope, a constant fill_value."""
    rng = np.random.default_rng(24)
    torch.manual_seed(24)
    n, n_e = 9, 30
    edge_index = graph_with_loops(rng, n, n_e)
    g = jgo.Graph.from_edge_index(edge_index, n)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    ea = rng.normal(size=(n_e, 2)).astype(np.float32)
    ti = torch.tensor(edge_index)
    cases = (dict(share_weights=True, residual=True), dict(add_self_loops=False, negative_slope=0.05, bias=False),
             dict(fill_value=0.5, concat=False, residual=True))
    for kw in cases:
        pyg = pyg_nn.GATv2Conv(5, 3, heads=2, edge_dim=2, **kw)
        randomize(pyg)
        ours_kw = {k: v for k, v in kw.items() if k not in ("residual", "bias")}
        layer = ours_v2(framework, state_dict(pyg), **ours_kw)
        r = rng.normal(size=(n, 3 if kw.get("concat") is False else 6)).astype(np.float32)
        (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
            lambda x, e: pyg(x, ti, e), lambda x, e: layer(g, x, e), [x, ea], r)
        np.testing.assert_allclose(j_out, t_out, **TOL, err_msg=str(kw))
        for t, j in zip(t_grads, j_grads):
            np.testing.assert_allclose(j, t, **TOL, err_msg=str(kw))


# -- TransformerConv ------------------------------------------------------------------------------

def ours_transformer(framework, sd, *, heads, concat=True, root_weight=True, beta=False):
    if framework == "equinox":
        return eqx_nn.TransformerConv.from_pyg(sd, heads=heads, concat=concat, root_weight=root_weight)
    width = sd["lin_query.weight"].shape[0]
    edge_dim = sd["lin_edge.weight"].shape[1] if "lin_edge.weight" in sd else None
    layer = flax_nn.TransformerConv(width // heads, heads=heads, concat=concat, beta=beta, edge_dim=edge_dim,
                                    use_bias="lin_query.bias" in sd, root_weight=root_weight)
    variables = flax_nn.from_pyg_transformer(sd, heads=heads, concat=concat, root_weight=root_weight)
    return lambda *a, **k: layer.apply(variables, *a, **k)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("edge_dim", [None, 3])
def test_transformer_conv(framework, heads, concat, edge_dim):
    rng = np.random.default_rng(40 + heads + 10 * concat)
    torch.manual_seed(heads)
    n, n_e = 12, 40
    edge_index = graph_with_loops(rng, n, n_e)
    g = jgo.Graph.from_edge_index(edge_index, n)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    ea = None if edge_dim is None else rng.normal(size=(n_e, edge_dim)).astype(np.float32)
    pyg = pyg_nn.TransformerConv(5, 6, heads=heads, concat=concat, edge_dim=edge_dim)
    layer = ours_transformer(framework, state_dict(pyg), heads=heads, concat=concat)
    r = rng.normal(size=(n, 6 * heads if concat else 6)).astype(np.float32)
    xs = [x] if ea is None else [x, ea]
    ti = torch.tensor(edge_index)
    (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
        lambda *a: pyg(a[0], ti, *a[1:]), lambda *a: layer(g, *a), xs, r)
    np.testing.assert_allclose(j_out, t_out, **TOL)
    for t, j in zip(t_grads, j_grads):
        np.testing.assert_allclose(j, t, **TOL)

    _, (t_ei, t_alpha) = pyg(torch.tensor(x), ti, None if ea is None else torch.tensor(ea),
                             return_attention_weights=True)
    _, j_alpha = layer(g, jnp.asarray(x), None if ea is None else jnp.asarray(ea), return_attention_weights=True)
    np.testing.assert_array_equal(t_ei.numpy(), edge_index)
    np.testing.assert_allclose(np.asarray(j_alpha), t_alpha.detach().numpy(), **TOL)


@pytest.mark.parametrize("framework", ["flax", "equinox"])
def test_transformer_conv_options(framework):
    """Bipartite inputs, beta gate, no root weight, no bias, mean over heads."""
    rng = np.random.default_rng(45)
    torch.manual_seed(45)
    n_src, n_dst, n_e = 10, 7, 30
    edge_index = np.stack([rng.integers(0, n_src, n_e), rng.integers(0, n_dst - 1, n_e)])
    g = jgo.Graph.from_edges(edge_index[0], edge_index[1], n_src, n_dst)
    x_src, x_dst = rng.normal(size=(n_src, 4)).astype(np.float32), rng.normal(size=(n_dst, 3)).astype(np.float32)
    ea = rng.normal(size=(n_e, 2)).astype(np.float32)
    ti = torch.tensor(edge_index)
    cases = (dict(beta=True), dict(beta=True, concat=False), dict(root_weight=False), dict(bias=False),
             dict(root_weight=False, concat=False, bias=False))
    for kw in cases:
        pyg = pyg_nn.TransformerConv((4, 3), 5, heads=2, edge_dim=2, **kw)
        ours_kw = {k: v for k, v in kw.items() if k != "bias"}
        layer = ours_transformer(framework, state_dict(pyg), heads=2, **ours_kw)
        r = rng.normal(size=(n_dst, 5 if kw.get("concat") is False else 10)).astype(np.float32)
        (t_out, t_grads), (j_out, j_grads) = outputs_and_input_grads(
            lambda xs, xd, e: pyg((xs, xd), ti, e), lambda xs, xd, e: layer(g, (xs, xd), e), [x_src, x_dst, ea], r)
        np.testing.assert_allclose(j_out, t_out, **TOL, err_msg=str(kw))
        for t, j in zip(t_grads, j_grads):
            np.testing.assert_allclose(j, t, **TOL, err_msg=str(kw))
