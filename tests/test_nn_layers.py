"""GCNConv, GINConv, GINEConv, EdgeConv, the global pools, AttentionalAggregation and GraphNorm (flax and
equinox) against NumPy loops over the edges and nodes (no PyG); jit, gradients, dtypes, loaders, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, random_graph

import jaxgraphops as jgo
import jaxgraphops.nn as jgo_nn

eqx = pytest.importorskip("equinox", reason="equinox not installed")
linen = pytest.importorskip("flax.linen", reason="flax not installed")

from jaxgraphops.nn import equinox as eqx_nn  # noqa: E402
from jaxgraphops.nn import flax as flax_nn  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)


def graph(seed=0, n=7, n_edges=24):
    """A multigraph with self loops, a duplicate edge and a node without in-edges."""
    return random_graph(np.random.default_rng(seed), n, n, n_edges)


def normal(seed, *shape):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def np_mlp(params):
    """``nn.Sequential([Dense, relu, Dense])``'s params as a NumPy function."""
    p0, p2 = params["layers_0"], params["layers_2"]
    return lambda h: np.maximum(h @ np.asarray(p0["kernel"]) + np.asarray(p0["bias"]), 0) @ np.asarray(
        p2["kernel"]) + np.asarray(p2["bias"])


def mlp(n_out):
    return linen.Sequential([linen.Dense(5), linen.relu, linen.Dense(n_out)])


# -- NumPy oracles --------------------------------------------------------------------------------

def np_gcn_weights(src, dst, n, w, improved, add_loops):
    """The GCN adjacency as a dense matrix ``A[dst, src]``, normalised (PyG's documented semantics)."""
    a = np.zeros((n, n))
    for s, d, we in zip(src, dst, w):
        if add_loops and s == d:
            continue
        a[d, s] += we
    if add_loops:
        for i in range(n):
            loops = [k for k in range(len(src)) if src[k] == dst[k] == i]
            a[i, i] = w[loops[-1]] if loops and w is not None and not np.all(w == 1) else (2.0 if improved else 1.0)
    deg = a.sum(axis=1)
    d = np.where(deg > 0, 1 / np.sqrt(np.where(deg > 0, deg, 1)), 0)
    return d[:, None] * a * d[None, :]


def np_segment(values, seg, n, reduce):
    out = np.zeros((n,) + values.shape[1:], values.dtype)
    for i in range(n):
        rows = values[seg == i]
        if len(rows):
            out[i] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[reduce]
    return out


# -- GCNConv --------------------------------------------------------------------------------------

@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_conv_against_dense_matrix(improved, weighted):
    g = graph(1)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    x = normal(2, 7, 4)
    w = np.random.default_rng(3).uniform(0.5, 2.0, g.n_edges).astype(np.float32) if weighted else None
    layer = flax_nn.GCNConv(3, improved=improved, bias_init=linen.initializers.normal())
    variables = layer.init(jax.random.key(0), g, x)
    out = jax.jit(layer.apply)(variables, g, x, w)
    a = np_gcn_weights(src, dst, 7, np.ones(g.n_edges) if w is None else w, improved, True)
    p = variables["params"]
    np.testing.assert_allclose(out, a @ x @ np.asarray(p["kernel"]) + np.asarray(p["bias"]), **TOL)


def test_gcn_norm_table():
    """Hand-computed: edges 0->1, 1->1 (w 3), 2->1, 1->0; node 2 has no in-edge."""
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 1]), np.array([1, 1, 1, 0]), 3, 3)
    g_hat, w = jgo_nn.gcn_norm(g, np.array([1.0, 3.0, 1.0, 1.0], np.float32))
    # degrees: node 0: 1 + loop 1 = 2; node 1: 1 + 1 + kept loop 3 = 5; node 2: loop 1 = 1
    expected = [1 / np.sqrt(2 * 5), 0.0, 1 / np.sqrt(5), 1 / np.sqrt(5 * 2), 1 / 2, 3 / 5, 1.0]
    assert (np.asarray(g_hat.src).tolist(), np.asarray(g_hat.dst).tolist()) == ([0, 1, 2, 1, 0, 1, 2],
                                                                                 [1, 1, 1, 0, 0, 1, 2])
    np.testing.assert_allclose(w, expected, **TOL)
    _, w_plain = jgo_nn.gcn_norm(g, add_self_loops=False)  # in-degrees 1, 3, 0
    np.testing.assert_allclose(w_plain, [1 / np.sqrt(3), 1 / 3, 0.0, 1 / np.sqrt(3)], **TOL)


def test_gcn_conv_equinox_equals_flax_and_cached_graph():
    g = graph(4)
    x = normal(5, 7, 6)
    layer = eqx_nn.GCNConv(6, 3, improved=True, key=jax.random.key(1))
    variables = {"params": {"kernel": layer.lin.weight.T, "bias": layer.bias}}
    np.testing.assert_allclose(layer(g, x), flax_nn.GCNConv(3, improved=True).apply(variables, g, x), **TOL)
    g_hat, w_hat = jgo_nn.gcn_norm(g, improved=True)
    cached = eqx_nn.GCNConv(6, 3, normalize=False, key=jax.random.key(1))
    np.testing.assert_allclose(cached(g_hat, x, w_hat), layer(g, x), **TOL)


def test_gcn_conv_dtypes():
    g, x = graph(6), normal(7, 7, 4)
    layer = flax_nn.GCNConv(3, param_dtype=jnp.float16, dtype=jnp.float32)
    variables = layer.init(jax.random.key(0), g, x)
    assert {a.dtype for a in jax.tree_util.tree_leaves(variables)} == {jnp.dtype(jnp.float16)}
    assert layer.apply(variables, g, x).dtype == jnp.float32


def test_gcn_conv_gradients(x64):
    g = graph(8)
    x = normal(9, 7, 3).astype(np.float64)
    w = np.random.default_rng(10).uniform(0.5, 2.0, g.n_edges)
    kernel = normal(11, 3, 2).astype(np.float64)
    f = lambda x, w, k: jgo_nn._conv.gcn_conv(g, x, k, None, edge_weight=w, improved=True)  # noqa: E731
    check_grads(f, (x, w, kernel), order=1, modes=("fwd", "rev"), eps=1e-4)


# -- GIN, GINE, EdgeConv --------------------------------------------------------------------------

@pytest.mark.parametrize("train_eps", [False, True])
def test_gin_conv(train_eps):
    g = graph(12)
    x = normal(13, 7, 4)
    layer = flax_nn.GINConv(mlp(3), eps=0.5, train_eps=train_eps)
    variables = layer.init(jax.random.key(0), g, x)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    h = np_segment(x[src], dst, 7, "sum") + 1.5 * x
    np.testing.assert_allclose(jax.jit(layer.apply)(variables, g, x), np_mlp(variables["params"]["nn"])(h), **TOL)
    grads = jax.grad(lambda v: layer.apply(v, g, x).sum())(variables)["params"]
    assert ("eps" in grads) == train_eps
    assert all(np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves(grads))
    if train_eps:
        assert np.abs(grads["eps"]).sum() > 0


@pytest.mark.parametrize("edge_dim", [None, 2])
def test_gine_conv(edge_dim):
    g = graph(14)
    x, e = normal(15, 7, 4), normal(16, g.n_edges, edge_dim or 4)
    layer = flax_nn.GINEConv(mlp(3), eps=-0.25, edge_dim=edge_dim)
    variables = layer.init(jax.random.key(0), g, x, e)
    p = variables["params"]
    e_mapped = e if edge_dim is None else e @ np.asarray(p["edge_kernel"]) + np.asarray(p["edge_bias"])
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    h = np_segment(np.maximum(x[src] + e_mapped, 0), dst, 7, "sum") + 0.75 * x
    np.testing.assert_allclose(jax.jit(layer.apply)(variables, g, x, e), np_mlp(p["nn"])(h), **TOL)


@pytest.mark.parametrize("aggr", ["max", "sum", "mean"])
def test_edge_conv(aggr):
    g = graph(17)
    x = normal(18, 7, 3)
    layer = flax_nn.EdgeConv(mlp(4), aggr=aggr)
    variables = layer.init(jax.random.key(0), g, x)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    messages = np_mlp(variables["params"]["nn"])(np.concatenate([x[dst], x[src] - x[dst]], axis=1))
    np.testing.assert_allclose(jax.jit(layer.apply)(variables, g, x), np_segment(messages, dst, 7, aggr), **TOL)


def test_equinox_convs_equal_flax():
    """The equinox GIN/GINE/EdgeConv with the same MLP weights compute what the flax ones do."""
    g = graph(19)
    x, e = normal(20, 7, 4), normal(21, g.n_edges, 2)
    key = jax.random.key(2)
    seq = eqx.nn.Sequential([eqx.nn.Linear(4, 5, key=key), eqx.nn.Lambda(jax.nn.relu),
                             eqx.nn.Linear(5, 3, key=jax.random.key(3))])
    nn_params = {f"layers_{i}": {"kernel": seq.layers[i].weight.T, "bias": seq.layers[i].bias} for i in (0, 2)}
    gin = eqx_nn.GINConv(seq, eps=0.5, train_eps=True)
    np.testing.assert_allclose(gin(g, x), flax_nn.GINConv(mlp(3), train_eps=True).apply(
        {"params": {"nn": nn_params, "eps": jnp.full(1, 0.5)}}, g, x), **TOL)
    gine = eqx_nn.GINEConv(seq, edge_dim=2, in_features=4, key=key)
    flax_gine = {"params": {"nn": nn_params, "edge_kernel": gine.lin.weight.T, "edge_bias": gine.lin.bias}}
    np.testing.assert_allclose(gine(g, x, e), flax_nn.GINEConv(mlp(3), edge_dim=2).apply(flax_gine, g, x, e), **TOL)
    seq8 = eqx.nn.Sequential([eqx.nn.Linear(8, 5, key=key), eqx.nn.Lambda(jax.nn.relu),
                              eqx.nn.Linear(5, 3, key=jax.random.key(3))])
    params8 = {f"layers_{i}": {"kernel": seq8.layers[i].weight.T, "bias": seq8.layers[i].bias} for i in (0, 2)}
    np.testing.assert_allclose(eqx.filter_jit(eqx_nn.EdgeConv(seq8, aggr="mean"))(g, x),
                               flax_nn.EdgeConv(mlp(3), aggr="mean").apply({"params": {"nn": params8}}, g, x), **TOL)


def test_graph_without_edges():
    """No edges: GCN sees only the loops (``x W + b``), GIN/GINE only ``(1 + eps) x``, EdgeConv gives 0."""
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 3)
    x = normal(35, 3, 4)
    gcn = eqx_nn.GCNConv(4, 2, key=jax.random.key(0))
    np.testing.assert_allclose(gcn(g, x), x @ np.asarray(gcn.lin.weight).T, **TOL)
    dense = linen.Dense(2)
    gin = flax_nn.GINConv(dense, eps=1.0)
    variables = gin.init(jax.random.key(0), g, x)
    expected = dense.apply({"params": variables["params"]["nn"]}, 2 * x)
    np.testing.assert_allclose(gin.apply(variables, g, x), expected, **TOL)
    gine = flax_nn.GINEConv(dense, eps=1.0)
    np.testing.assert_allclose(gine.apply(variables, g, x, np.zeros((0, 4), np.float32)), expected, **TOL)
    edge = flax_nn.EdgeConv(linen.Dense(2))
    np.testing.assert_array_equal(edge.apply(edge.init(jax.random.key(0), g, x), g, x), np.zeros((3, 2)))


# -- readouts and GraphNorm -----------------------------------------------------------------------

def padded_batch():
    a = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 2]), 3, 3)
    b = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]), 2, 2)
    return jgo.pad_batch(jgo.batch([a, b]), n_nodes=8, n_edges=6, n_graphs=4)


@pytest.mark.parametrize("reduce", ["add", "mean", "max"])
def test_global_pools(reduce):
    x = normal(22, 6, 3)
    ids = np.array([1, 0, 1, 3, 0, 1])  # unsorted; graph 2 empty
    pool = getattr(jgo_nn, f"global_{reduce}_pool")
    np_reduce = {"add": "sum"}.get(reduce, reduce)
    expected = np_segment(x, ids, 4, np_reduce)
    np.testing.assert_allclose(pool(x, ids), expected, **TOL)  # size from the ids: max + 1
    np.testing.assert_allclose(jax.jit(pool, static_argnums=2)(x, ids, 4), expected, **TOL)
    np.testing.assert_allclose(pool(x), np_segment(x, 0 * ids, 1, np_reduce), **TOL)  # one graph
    bg = padded_batch()
    xb = normal(23, 8, 3)
    np.testing.assert_allclose(jax.jit(pool)(xb, bg), np_segment(xb, np.asarray(bg.dst_graph_ids), 4, np_reduce),
                               **TOL)


def test_attentional_aggregation():
    bg = padded_batch()
    x = normal(24, 8, 3)
    layer = flax_nn.AttentionalAggregation(linen.Dense(1), nn=mlp(4))
    variables = layer.init(jax.random.key(0), x, bg)
    p = variables["params"]
    ids = np.asarray(bg.dst_graph_ids)
    gate = x @ np.asarray(p["gate_nn"]["kernel"]) + np.asarray(p["gate_nn"]["bias"])
    h = np_mlp(p["nn"])(x)
    expected = np.zeros((4, 4))
    for b in range(4):
        if np.any(ids == b):
            a = np.exp(gate[ids == b] - gate[ids == b].max())
            expected[b] = (a / a.sum() * h[ids == b]).sum(0)
    np.testing.assert_allclose(jax.jit(layer.apply)(variables, x, bg), expected, **TOL)
    eqx_layer = eqx_nn.AttentionalAggregation(eqx.nn.Linear(3, 3, key=jax.random.key(1)))  # a gate per feature
    w, bias = np.asarray(eqx_layer.gate_nn.weight), np.asarray(eqx_layer.gate_nn.bias)
    gate = x @ w.T + bias
    for b in (0, 1):
        a = np.exp(gate[ids == b] - gate[ids == b].max(0))
        np.testing.assert_allclose(eqx_layer(x, bg)[b], (a / a.sum(0) * x[ids == b]).sum(0), **TOL)


def test_graph_norm():
    x = normal(25, 6, 3)
    ids = np.array([0, 0, 0, 2, 2, 2])
    layer = flax_nn.GraphNorm(eps=1e-3)
    p = {"weight": normal(26, 3), "bias": normal(27, 3), "mean_scale": normal(28, 3)}
    out = jax.jit(layer.apply, static_argnums=3)({"params": p}, x, ids, 3)
    expected = np.zeros_like(x)
    for b in (0, 2):
        rows = x[ids == b]
        shifted = rows - rows.mean(0) * p["mean_scale"]
        expected[ids == b] = p["weight"] * shifted / np.sqrt((shifted ** 2).mean(0) + 1e-3) + p["bias"]
    np.testing.assert_allclose(out, expected, **TOL)
    eqx_layer = eqx_nn.GraphNorm(3, eps=1e-3)
    eqx_layer = eqx.tree_at(lambda m: (m.weight, m.bias, m.mean_scale), eqx_layer,
                            (p["weight"], p["bias"], p["mean_scale"]))
    np.testing.assert_allclose(eqx_layer(x, ids, 3), expected, **TOL)
    grads = eqx.filter_grad(lambda m: (m(x, ids, 3) ** 2).sum())(eqx_layer)
    assert all(np.all(np.isfinite(a)) and np.abs(a).sum() > 0 for a in (grads.weight, grads.bias, grads.mean_scale))


# -- loaders and errors ---------------------------------------------------------------------------

def test_loaders_map_sequential_positions():
    sd = {"eps": np.full(1, 0.5, np.float32), "nn.0.weight": normal(29, 5, 4), "nn.0.bias": normal(30, 5),
          "nn.2.weight": normal(31, 3, 5), "nn.2.bias": normal(32, 3)}
    params = flax_nn.from_pyg_gin(sd)["params"]
    np.testing.assert_array_equal(params["nn"]["layers_2"]["kernel"], sd["nn.2.weight"].T)
    layer = eqx_nn.GINConv.from_pyg(sd, train_eps=True)
    np.testing.assert_array_equal(layer.nn.layers[0].weight, sd["nn.0.weight"])
    np.testing.assert_array_equal(layer.eps, [0.5])
    g, x = graph(33), normal(34, 7, 4)
    np.testing.assert_allclose(layer(g, x), flax_nn.GINConv(mlp(3), eps=0.5).apply({"params": params}, g, x), **TOL)


@pytest.mark.parametrize("call, match", [
    (lambda: jgo_nn.gcn_norm(jgo.Graph.from_edges(np.array([0]), np.array([1]), 2, 3)), "gcn_norm: g must be square"),
    (lambda: jgo_nn.gcn_norm(graph(), np.ones(3, np.float32)), "gcn_norm: edge_weight must have 24 rows"),
    (lambda: jgo_nn.gcn_norm(graph(), improved=1), "gcn_norm: improved must be a bool"),
    (lambda: eqx_nn.GCNConv(3, 2, add_self_loops=True, normalize=False, key=jax.random.key(0)),
     "GCNConv: add_self_loops=True needs normalize=True"),
    (lambda: eqx_nn.GCNConv(3, 2, key=jax.random.key(0))(jgo.Graph.from_edges(np.array([0]), np.array([1]), 2, 3),
                                                         np.ones((2, 3))), "GCNConv: g must be square"),
    (lambda: eqx_nn.GCNConv(3, 2, key=jax.random.key(0))(graph(), np.ones((6, 3))), r"GCNConv: x must be \[n_src, F\]"),
    (lambda: eqx_nn.EdgeConv(jnp.tanh, aggr="min"), "EdgeConv: aggr must be one of 'max', 'sum', 'mean'; got 'min'"),
    (lambda: eqx_nn.EdgeConv(jnp.tanh, aggr="maxx"), "did you mean 'max'"),
    (lambda: eqx_nn.GINConv(jnp.tanh)(graph(), (np.ones((7, 3)),)), "GINConv: x must be an array or a pair"),
    (lambda: eqx_nn.GINConv(jnp.tanh)(graph(), (np.ones((7, 3)), np.ones((7, 2)))),
     "GINConv: x_src and x_dst must have one width"),
    (lambda: eqx_nn.GINEConv(jnp.tanh)(graph(), np.ones((7, 3)), np.ones((24, 2))),
     "GINEConv: edge_attr must have the node features' width 3"),
    (lambda: eqx_nn.GINEConv(jnp.tanh, edge_dim=2), "GINEConv: edge_dim needs in_features"),
    (lambda: jgo_nn.global_add_pool(np.ones((4, 2)), np.zeros(3, np.int32)),
     r"global_add_pool: batch must be a BatchedGraph, integer graph ids of shape \(4,\)"),
    (lambda: jax.jit(jgo_nn.global_mean_pool)(np.ones((4, 2)), np.zeros(4, np.int32)),
     "global_mean_pool: size .* is required for traced graph ids"),
    (lambda: jgo_nn.global_max_pool(np.ones((8, 2)), padded_batch(), 3),
     "global_max_pool: size=3 disagrees with the batch's n_graphs=4"),
    (lambda: jgo_nn.global_max_pool(np.ones(8), padded_batch()), r"global_max_pool: x must be \[N, F\]"),
    (lambda: eqx_nn.AttentionalAggregation(lambda row: row[:2])(np.ones((4, 3))),
     r"AttentionalAggregation: gate_nn must give \[N, 1\] or \[N, 3\]"),
    (lambda: eqx_nn.GraphNorm(3)(np.ones((4, 2))), r"GraphNorm: weight must be \[2\]"),
    (lambda: flax_nn.from_pyg_gin({"eps": np.zeros(1), "nn.0.weight": np.ones((2, 2)),
                                   "nn.1.running_mean": np.ones(2)}), "from_pyg_gin: nn must be a torch.nn.Sequential"),
    (lambda: flax_nn.from_pyg_gin({"nn.weight": np.ones((2, 2))}), r"from_pyg_gin: .* missing \['eps'\]"),
    (lambda: eqx_nn.GraphNorm.from_pyg({"weight": np.ones(3), "bias": np.ones(3), "mean_scale": np.ones(2)}),
     "GraphNorm.from_pyg: weight, bias and mean_scale must be"),
])
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize("name", ["SAGEConv", "GraphConv", "GATConv", "GATv2Conv", "TransformerConv"])
def test_linen_layers_take_dtype_and_param_dtype(x64, name):
    """As flax's layers: ``param_dtype`` sets the parameters' dtype, ``dtype`` the output's (inputs and params
    cast to it); float64 parameters with float32 inputs compute in float64 by default (promotion)."""
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 3, 0]), np.array([1, 2, 3, 0, 2]))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)), jnp.float32)
    layer = getattr(flax_nn, name)(4, param_dtype=jnp.float64)
    variables = layer.init(jax.random.key(0), g, x)
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(variables)} == {jnp.dtype(jnp.float64)}
    assert layer.apply(variables, g, x).dtype == jnp.float64
    half = getattr(flax_nn, name)(4, param_dtype=jnp.float64, dtype=jnp.bfloat16)
    out = half.apply(variables, g, x)
    assert out.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(out, np.float32), layer.apply(variables, g, x), rtol=0.05, atol=0.05)
