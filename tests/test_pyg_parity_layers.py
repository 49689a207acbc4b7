"""PyG's GCNConv, GINConv, GINEConv, EdgeConv, global pools, AttentionalAggregation and GraphNorm against
the flax and equinox layers loaded with the same weights (torch, CPU, float32): outputs, input gradients
and weight gradients. A torch module's weight gradients, read by our loader as if they were its weights,
must equal our gradients with respect to the loaded weights (the loaders only rename and transpose)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo
import jaxgraphops.nn as jgo_nn

torch = pytest.importorskip("torch", reason="torch/torch_geometric not installed")
pytest.importorskip("torch_geometric", reason="torch/torch_geometric not installed")
eqx = pytest.importorskip("equinox", reason="equinox not installed")
linen = pytest.importorskip("flax.linen", reason="flax not installed")

import torch_geometric.nn as pyg_nn  # noqa: E402

from jaxgraphops.nn import equinox as eqx_nn  # noqa: E402
from jaxgraphops.nn import flax as flax_nn  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)
FRAMEWORKS = ("flax", "equinox")

# 7 nodes: self loops at 2 and 5, in-degrees 0..3 that differ from the out-degrees, node 6 isolated
EDGE_INDEX = np.array([[0, 1, 2, 3, 3, 4, 1, 2, 5, 0, 4],
                       [1, 2, 0, 0, 1, 1, 4, 2, 5, 3, 5]])
N = 7


def numpy_state(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def torch_run(module, call, inputs, r):
    """``call(*inputs)`` in torch, and the gradients of ``sum(out * r)``: per input, and per
    ``state_dict`` entry (zeros for buffers and unused weights)."""
    ts = [torch.tensor(a, requires_grad=np.issubdtype(a.dtype, np.floating)) for a in inputs]
    module.zero_grad()
    out = call(*ts)
    (out * torch.tensor(r)).sum().backward()
    params = dict(module.named_parameters())
    weight_grads = {k: (np.zeros_like(v) if params.get(k) is None or params[k].grad is None
                        else params[k].grad.numpy()) for k, v in numpy_state(module).items()}
    input_grads = [None if t.grad is None else t.grad.numpy() for t in ts]
    return out.detach().numpy(), input_grads, weight_grads


def jax_run(params, fn, inputs, r, n_float):
    """``fn(params, *inputs)``, and the gradients of ``sum(out * r)`` for the params and the first
    ``n_float`` inputs."""
    floats, rest = [jnp.asarray(a) for a in inputs[:n_float]], list(inputs[n_float:])
    out, vjp = jax.vjp(lambda p, *xs: fn(p, *xs, *rest), params, *floats)
    param_grads, *input_grads = vjp(jnp.asarray(r))
    return np.asarray(out), [np.asarray(d) for d in input_grads], param_grads


def assert_trees_close(ours, theirs):
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **TOL)


def check(framework, pyg, torch_call, inputs, r, *, flax_layer, flax_load, eqx_load, jax_call, n_float=1):
    """Outputs, input gradients (first ``n_float`` inputs) and weight gradients of PyG's ``pyg`` and
    of ours: ``jax_call(layer_fn, *inputs)`` with ``layer_fn`` the flax apply or the equinox module."""
    t_out, t_input_grads, t_weight_grads = torch_run(pyg, torch_call, inputs, r)
    sd = numpy_state(pyg)
    if framework == "flax":
        variables = flax_load(sd)

        def fn(v, *xs):
            return jax_call(lambda *args: flax_layer.apply(v, *args), *xs)

        expected_grads = flax_load(t_weight_grads)
    else:
        params, static = eqx.partition(eqx_load(sd), eqx.is_array)
        variables = params

        def fn(p, *xs):
            return jax_call(eqx.combine(p, static), *xs)

        expected_grads = eqx.partition(eqx_load(t_weight_grads), eqx.is_array)[0]
    out, input_grads, weight_grads = jax_run(variables, fn, inputs, r, n_float)
    np.testing.assert_allclose(out, t_out, **TOL)
    for ours, theirs in zip(input_grads, t_input_grads):
        np.testing.assert_allclose(ours, np.zeros_like(ours) if theirs is None else theirs, **TOL)
    assert_trees_close(weight_grads, expected_grads)


def data(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s).astype(np.float32) for s in shapes]


def torch_mlp(n_in, n_out, hidden=6):
    return torch.nn.Sequential(torch.nn.Linear(n_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, n_out))


def flax_mlp(n_out, hidden=6):
    return linen.Sequential([linen.Dense(hidden), linen.relu, linen.Dense(n_out)])


# -- GCNConv --------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_gcn_conv(framework, improved, weighted, add_self_loops):
    torch.manual_seed(0)
    x, r = data(0, (N, 5), (N, 4))
    w = np.random.default_rng(1).uniform(0.5, 2.0, EDGE_INDEX.shape[1]).astype(np.float32)
    g = jgo.Graph.from_edge_index(EDGE_INDEX, N)
    pyg = pyg_nn.GCNConv(5, 4, improved=improved, add_self_loops=add_self_loops)
    torch.nn.init.normal_(pyg.bias)
    # PyG's edge_index path forgets `improved` without edge weights (its loops get weight 1, not 2):
    # it gets explicit weights then, 1 and 2 on the existing loops, the A + 2I of its documentation
    # and of its SparseTensor path (fill_diag)
    unit = np.where(EDGE_INDEX[0] == EDGE_INDEX[1], 2.0 if improved and add_self_loops else 1.0, 1.0).astype(np.float32)
    t_w = w if weighted else unit
    ew = w if weighted else None
    check(framework, pyg, lambda x, w: pyg(x, torch.tensor(EDGE_INDEX), w), [x, t_w], r,
          flax_layer=flax_nn.GCNConv(4, improved=improved, add_self_loops=add_self_loops),
          flax_load=flax_nn.from_pyg_gcn,
          eqx_load=lambda sd: eqx_nn.GCNConv.from_pyg(sd, improved=improved, add_self_loops=add_self_loops),
          jax_call=lambda layer, x, _: layer(g, x, ew))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gcn_conv_edge_weight_gradients(framework):
    """The gradient reaches the edge weights, the loops' included (a kept loop's weight is PyG's)."""
    torch.manual_seed(1)
    x, r = data(2, (N, 3), (N, 2))
    w = np.random.default_rng(3).uniform(0.5, 2.0, EDGE_INDEX.shape[1]).astype(np.float32)
    g = jgo.Graph.from_edge_index(EDGE_INDEX, N)
    pyg = pyg_nn.GCNConv(3, 2, improved=True)
    check(framework, pyg, lambda x, w: pyg(x, torch.tensor(EDGE_INDEX), w), [x, w], r,
          flax_layer=flax_nn.GCNConv(2, improved=True), flax_load=flax_nn.from_pyg_gcn,
          eqx_load=lambda sd: eqx_nn.GCNConv.from_pyg(sd, improved=True),
          jax_call=lambda layer, x, w: layer(g, x, w), n_float=2)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_conv_without_normalization(framework, weighted):
    torch.manual_seed(2)
    x, r = data(4, (N, 3), (N, 5))
    w = np.random.default_rng(5).uniform(0.5, 2.0, EDGE_INDEX.shape[1]).astype(np.float32)
    g = jgo.Graph.from_edge_index(EDGE_INDEX, N)
    pyg = pyg_nn.GCNConv(3, 5, normalize=False)
    ew = w if weighted else None
    check(framework, pyg, lambda x: pyg(x, torch.tensor(EDGE_INDEX), None if ew is None else torch.tensor(ew)),
          [x], r, flax_layer=flax_nn.GCNConv(5, normalize=False), flax_load=flax_nn.from_pyg_gcn,
          eqx_load=lambda sd: eqx_nn.GCNConv.from_pyg(sd, normalize=False),
          jax_call=lambda layer, x: layer(g, x, ew))


def test_gcn_norm_is_pygs_cache():
    """PyG's ``cached=True``: ``gcn_norm`` once, then the layer with ``normalize=False``."""
    torch.manual_seed(3)
    (x,) = data(6, (N, 3))
    w = np.random.default_rng(7).uniform(0.5, 2.0, EDGE_INDEX.shape[1]).astype(np.float32)
    pyg = pyg_nn.GCNConv(3, 4, cached=True)
    for _ in range(2):  # the second call reads PyG's cache
        expected = pyg(torch.tensor(x), torch.tensor(EDGE_INDEX), torch.tensor(w)).detach().numpy()
    g_hat, w_hat = jgo_nn.gcn_norm(jgo.Graph.from_edge_index(EDGE_INDEX, N), w)
    layer = flax_nn.GCNConv(4, normalize=False)
    out = jax.jit(layer.apply)(flax_nn.from_pyg_gcn(numpy_state(pyg)), g_hat, x, w_hat)
    np.testing.assert_allclose(out, expected, **TOL)


# -- GIN, GINE, EdgeConv --------------------------------------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("train_eps", [False, True])
def test_gin_conv(framework, train_eps):
    torch.manual_seed(4)
    x, r = data(8, (N, 5), (N, 3))
    g = jgo.Graph.from_edge_index(EDGE_INDEX, N)
    pyg = pyg_nn.GINConv(torch_mlp(5, 3), eps=0.25, train_eps=train_eps)
    check(framework, pyg, lambda x: pyg(x, torch.tensor(EDGE_INDEX)), [x], r,
          flax_layer=flax_nn.GINConv(flax_mlp(3), eps=0.25, train_eps=train_eps),
          flax_load=lambda sd: flax_nn.from_pyg_gin(sd, train_eps=train_eps),
          eqx_load=lambda sd: eqx_nn.GINConv.from_pyg(sd, train_eps=train_eps),
          jax_call=lambda layer, x: layer(g, x))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gin_conv_with_pyg_mlp(framework):
    """PyG's own ``MLP`` (``norm=None``) as ``nn`` loads as ``Sequential(Dense, relu, Dense, relu, Dense)``."""
    torch.manual_seed(11)
    x, r = data(16, (N, 4), (N, 2))
    g = jgo.Graph.from_edge_index(EDGE_INDEX, N)
    pyg = pyg_nn.GINConv(pyg_nn.MLP([4, 6, 5, 2], norm=None))
    flax_nn3 = linen.Sequential([linen.Dense(6), linen.relu, linen.Dense(5), linen.relu, linen.Dense(2)])
    check(framework, pyg, lambda x: pyg(x, torch.tensor(EDGE_INDEX)), [x], r,
          flax_layer=flax_nn.GINConv(flax_nn3), flax_load=flax_nn.from_pyg_gin, eqx_load=eqx_nn.GINConv.from_pyg,
          jax_call=lambda layer, x: layer(g, x))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gin_conv_bipartite(framework):
    torch.manual_seed(5)
    ei = np.array([[0, 1, 2, 4, 4, 3], [0, 0, 1, 2, 1, 2]])
    x_src, x_dst, r = data(9, (5, 4), (3, 4), (3, 2))
    g = jgo.Graph.from_edges(ei[0], ei[1], 5, 3)
    pyg = pyg_nn.GINConv(torch_mlp(4, 2), eps=-0.5, train_eps=True)
    check(framework, pyg, lambda xs, xd: pyg((xs, xd), torch.tensor(ei), size=(5, 3)), [x_src, x_dst], r,
          flax_layer=flax_nn.GINConv(flax_mlp(2), train_eps=True),
          flax_load=lambda sd: flax_nn.from_pyg_gin(sd, train_eps=True),
          eqx_load=lambda sd: eqx_nn.GINConv.from_pyg(sd, train_eps=True),
          jax_call=lambda layer, xs, xd: layer(g, (xs, xd)), n_float=2)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("edge_dim", [None, 2])
def test_gine_conv(framework, edge_dim):
    torch.manual_seed(6)
    n_e = EDGE_INDEX.shape[1]
    x, e, r = data(10, (N, 4), (n_e, edge_dim or 4), (N, 3))
    g = jgo.Graph.from_edge_index(EDGE_INDEX, N)
    pyg = pyg_nn.GINEConv(torch_mlp(4, 3), eps=0.1, train_eps=True, edge_dim=edge_dim)
    check(framework, pyg, lambda x, e: pyg(x, torch.tensor(EDGE_INDEX), e), [x, e], r,
          flax_layer=flax_nn.GINEConv(flax_mlp(3), train_eps=True, edge_dim=edge_dim),
          flax_load=lambda sd: flax_nn.from_pyg_gine(sd, train_eps=True),
          eqx_load=lambda sd: eqx_nn.GINEConv.from_pyg(sd, train_eps=True),
          jax_call=lambda layer, x, e: layer(g, x, e), n_float=2)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("aggr", ["max", "add", "mean"])
def test_edge_conv(framework, aggr):
    torch.manual_seed(7)
    x, r = data(11, (N, 3), (N, 4))
    g = jgo.Graph.from_edge_index(EDGE_INDEX, N)
    pyg = pyg_nn.EdgeConv(torch_mlp(6, 4), aggr=aggr)
    ours = "sum" if aggr == "add" else aggr
    check(framework, pyg, lambda x: pyg(x, torch.tensor(EDGE_INDEX)), [x], r,
          flax_layer=flax_nn.EdgeConv(flax_mlp(4), aggr=ours), flax_load=flax_nn.from_pyg_edgeconv,
          eqx_load=lambda sd: eqx_nn.EdgeConv.from_pyg(sd, aggr=ours),
          jax_call=lambda layer, x: layer(g, x))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bipartite_edge_conv_and_gine_conv(framework):
    """A pair (x_src, x_dst) on a bipartite graph; destination 2 has no in-edge."""
    torch.manual_seed(10)
    ei = np.array([[0, 1, 2, 4, 4, 3], [0, 0, 1, 3, 1, 3]])
    x_src, x_dst, e, r = data(15, (5, 3), (4, 3), (6, 2), (4, 2))
    g = jgo.Graph.from_edges(ei[0], ei[1], 5, 4)
    pyg = pyg_nn.EdgeConv(torch_mlp(6, 2))
    check(framework, pyg, lambda xs, xd: pyg((xs, xd), torch.tensor(ei)), [x_src, x_dst], r,
          flax_layer=flax_nn.EdgeConv(flax_mlp(2)), flax_load=flax_nn.from_pyg_edgeconv,
          eqx_load=eqx_nn.EdgeConv.from_pyg, jax_call=lambda layer, xs, xd: layer(g, (xs, xd)), n_float=2)
    pyg = pyg_nn.GINEConv(torch_mlp(3, 2), edge_dim=2)
    check(framework, pyg, lambda xs, xd, e: pyg((xs, xd), torch.tensor(ei), e, size=(5, 4)), [x_src, x_dst, e], r,
          flax_layer=flax_nn.GINEConv(flax_mlp(2), edge_dim=2), flax_load=flax_nn.from_pyg_gine,
          eqx_load=eqx_nn.GINEConv.from_pyg, jax_call=lambda layer, xs, xd, e: layer(g, (xs, xd), e), n_float=3)


# -- readouts and GraphNorm over a batch ----------------------------------------------------------

def two_graph_batch():
    """A batch of a 3-node and a 4-node graph padded with an empty graph: ids [0,0,0,1,1,1,1]."""
    a = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 2]), 3, 3)
    b = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 3]), 4, 4)
    bg = jgo.batch([a, b])
    return jgo.BatchedGraph(bg.graph, bg.src_graph_ids, bg.dst_graph_ids, 3)


@pytest.mark.parametrize("reduce", ["add", "mean", "max"])
@pytest.mark.parametrize("batched", [False, True])
def test_global_pools(reduce, batched):
    x, r = data(12, (7, 3), (3, 3))
    ids = np.array([2, 0, 2, 0, 2, 2, 0])  # unsorted; graph 1 is empty
    ours = getattr(jgo_nn, f"global_{reduce}_pool")
    theirs = getattr(pyg_nn, f"global_{reduce}_pool")
    bg = two_graph_batch() if batched else None
    t_ids = np.asarray(bg.dst_graph_ids) if batched else ids
    tx = torch.tensor(x, requires_grad=True)
    t_out = theirs(tx, torch.tensor(t_ids, dtype=torch.long), 3)
    (t_out * torch.tensor(r)).sum().backward()
    out, vjp = jax.vjp(lambda x: ours(x, bg if batched else ids, 3), jnp.asarray(x))
    np.testing.assert_allclose(out, t_out.detach().numpy(), **TOL)
    np.testing.assert_allclose(vjp(jnp.asarray(r))[0], tx.grad.numpy(), **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("with_nn", [False, True])
@pytest.mark.parametrize("pyg_mlp", [False, True])
def test_attentional_aggregation(framework, with_nn, pyg_mlp):
    torch.manual_seed(8)
    x, r = data(13, (7, 4), (3, 5 if with_nn else 4))
    bg = two_graph_batch()
    ids = torch.tensor(np.asarray(bg.dst_graph_ids), dtype=torch.long)
    make = (lambda n_in, n_out: pyg_nn.MLP([n_in, 6, n_out], norm=None)) if pyg_mlp else torch_mlp
    pyg = pyg_nn.aggr.AttentionalAggregation(make(4, 1), make(4, 5) if with_nn else None)
    check(framework, pyg, lambda x: pyg(x, ids, dim_size=3), [x], r,
          flax_layer=flax_nn.AttentionalAggregation(flax_mlp(1), nn=flax_mlp(5) if with_nn else None),
          flax_load=flax_nn.from_pyg_attentional_aggregation, eqx_load=eqx_nn.AttentionalAggregation.from_pyg,
          jax_call=lambda layer, x: layer(x, bg))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_graph_norm(framework):
    torch.manual_seed(9)
    x, r = data(14, (7, 4), (7, 4))
    ids = np.array([0, 0, 0, 2, 2, 2, 2])
    pyg = pyg_nn.GraphNorm(4, eps=1e-3)
    with torch.no_grad():
        for p in pyg.parameters():
            p.normal_()
    check(framework, pyg, lambda x: pyg(x, torch.tensor(ids), 3), [x], r,
          flax_layer=flax_nn.GraphNorm(eps=1e-3), flax_load=flax_nn.from_pyg_graphnorm,
          eqx_load=lambda sd: eqx_nn.GraphNorm.from_pyg(sd, eps=1e-3),
          jax_call=lambda layer, x: layer(x, ids, 3))
