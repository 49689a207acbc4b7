"""The flax and equinox layers against a direct segment-op computation; jit, grad, loaders, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo
import jaxgraphops.nn as jgo_nn
from jaxgraphops.nn import equinox as eqx_nn
from jaxgraphops.nn import flax as flax_nn

FRAMEWORKS = ("flax", "equinox")
AGGRS = ("mean", "max", "sum", "min")
TOL = dict(rtol=1e-5, atol=1e-5)


# -- the direct computation ------------------------------------------------------------------

def ref_aggregate(src, dst, n_dst, x, aggr):
    msgs = x[src]
    count = jax.ops.segment_sum(jnp.ones(src.shape[0]), dst, n_dst)[:, None]
    total = jax.ops.segment_sum(msgs, dst, n_dst)
    if aggr == "sum":
        return total
    if aggr == "mean":
        return total / jnp.maximum(count, 1)
    extreme = (jax.ops.segment_max if aggr == "max" else jax.ops.segment_min)(msgs, dst, n_dst)
    return jnp.where(count > 0, extreme, 0)


def ref_sage(g, x_src, x_dst, w, aggr, normalize=False):
    out = ref_aggregate(g.src, g.dst, g.n_dst, x_src, aggr) @ w["neigh_kernel"]
    if "root_kernel" in w:
        out = out + x_dst @ w["root_kernel"]
    if "bias" in w:
        out = out + w["bias"]
    if normalize:
        out = out / jnp.maximum(jnp.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out


def ref_graph_conv(g, x, w, norm, add_loops):
    src, dst = g.src, g.dst
    if add_loops:
        src, dst = jnp.concatenate([src, jnp.arange(g.n_src)]), jnp.concatenate([dst, jnp.arange(g.n_dst)])
    ones = jnp.ones(src.shape[0])
    in_deg = jax.ops.segment_sum(ones, dst, g.n_dst)
    out_deg = jax.ops.segment_sum(ones, src, g.n_src)
    if norm == "both":
        coef = 1 / jnp.sqrt(out_deg[src] * in_deg[dst])
        h = jax.ops.segment_sum(x[src] * coef[:, None], dst, g.n_dst)
    else:
        h = jax.ops.segment_sum(x[src], dst, g.n_dst)
        if norm == "right":
            h = h / jnp.maximum(in_deg, 1)[:, None]
    out = h @ w["kernel"]
    return out + w["bias"] if "bias" in w else out


# -- the same weights in both frameworks -------------------------------------------------------

def sage_state_dict(rng, in_src, in_dst, out, root_weight=True, bias=True):
    """Random weights named and laid out as PyG's ``SAGEConv.state_dict()``."""
    sd = {"lin_l.weight": rng.normal(size=(out, in_src)).astype(np.float32)}
    if bias:
        sd["lin_l.bias"] = rng.normal(size=out).astype(np.float32)
    if root_weight:
        sd["lin_r.weight"] = rng.normal(size=(out, in_dst)).astype(np.float32)
    return sd


def gcn_state_dict(rng, in_features, out, bias=True):
    """Random weights named and laid out as PyG's ``GCNConv.state_dict()``."""
    sd = {"lin.weight": rng.normal(size=(out, in_features)).astype(np.float32)}
    if bias:
        sd["bias"] = rng.normal(size=out).astype(np.float32)
    return sd


def ref_weights(sd):
    """A PyG state dict as the reference's ``[in, out]`` kernels and biases."""
    names = {"lin_l.weight": "neigh_kernel", "lin_r.weight": "root_kernel", "lin_l.bias": "bias",
             "lin.weight": "kernel", "bias": "bias"}
    return {names[k]: jnp.asarray(v.T if v.ndim == 2 else v) for k, v in sd.items()}


class Layer:
    """A layer as ``apply(params, g, x)`` with its ``params``, and ``weights(params)`` in ``[in, out]`` layout."""

    def __init__(self, apply, params, weights):
        self.apply, self.params, self.weights = apply, params, weights

    def __call__(self, g, x):
        return self.apply(self.params, g, x)


def _call_module(module, g, x):
    return module(g, x)


def _eqx_sage_weights(m):
    w = {"neigh_kernel": m.lin_neigh.weight.T}
    if m.lin_neigh.bias is not None:
        w["bias"] = m.lin_neigh.bias
    if m.lin_root is not None:
        w["root_kernel"] = m.lin_root.weight.T
    return w


def _eqx_gcn_weights(m):
    return {"kernel": m.lin.weight.T, **({} if m.bias is None else {"bias": m.bias})}


def sage_layer(framework, sd, *, aggr, normalize=False):
    if framework == "flax":
        layer = flax_nn.SAGEConv(sd["lin_l.weight"].shape[0], aggr=aggr, root_weight="lin_r.weight" in sd,
                                 use_bias="lin_l.bias" in sd, normalize=normalize)
        return Layer(layer.apply, flax_nn.from_pyg_sage(sd), lambda p: p["params"])
    return Layer(_call_module, eqx_nn.SAGEConv.from_pyg(sd, aggr=aggr, normalize=normalize), _eqx_sage_weights)


def graph_conv_layer(framework, sd, *, norm="both", add_self_loops=True):
    if framework == "flax":
        layer = flax_nn.GraphConv(sd["lin.weight"].shape[0], norm=norm, add_self_loops=add_self_loops,
                                  use_bias="bias" in sd)
        return Layer(layer.apply, flax_nn.from_pyg_gcn(sd), lambda p: p["params"])
    layer = eqx_nn.GraphConv.from_pyg(sd, norm=norm, add_self_loops=add_self_loops)
    return Layer(_call_module, layer, _eqx_gcn_weights)


def features(rng, n, f):
    return jnp.asarray(rng.normal(size=(n, f)), jnp.float32)


def tie_free_graph(rng, n_src=9, n_dst=8, n_edges=30):
    """Distinct random edges, so that max/min have no ties; destination ``n_dst - 1`` has none."""
    pairs = rng.choice(n_src * (n_dst - 1), n_edges, replace=False)
    return jgo.Graph.from_edges(pairs // (n_dst - 1), pairs % (n_dst - 1), n_src, n_dst)


# -- SAGEConv ---------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("aggr", AGGRS)
@pytest.mark.parametrize("root_weight,bias,normalize", [(True, True, False), (False, True, False),
                                                        (True, False, True), (False, False, True)])
def test_sage_matches_reference(rng, framework, aggr, root_weight, bias, normalize):
    g = random_graph(rng, 8, 8, 30)  # isolated node, self loop, duplicate edge
    x = features(rng, 8, 5)
    sd = sage_state_dict(rng, 5, 5, 6, root_weight, bias)
    out = sage_layer(framework, sd, aggr=aggr, normalize=normalize)(g, x)
    ref = ref_sage(g, x, x, ref_weights(sd), aggr, normalize)
    assert out.shape == (8, 6) and out.dtype == jnp.float32
    np.testing.assert_allclose(out, ref, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("aggr", AGGRS)
def test_sage_bipartite(rng, framework, aggr):
    g = random_graph(rng, 9, 5, 20)
    x_src, x_dst = features(rng, 9, 3), features(rng, 5, 4)
    sd = sage_state_dict(rng, 3, 4, 6)
    layer = sage_layer(framework, sd, aggr=aggr)
    out = layer(g, (x_src, x_dst))
    np.testing.assert_allclose(out, ref_sage(g, x_src, x_dst, ref_weights(sd), aggr), **TOL)
    with pytest.raises(ValueError, match="x must be a pair"):
        layer(g, x_src)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_sage_jit_and_grad(rng, framework, aggr):
    g = tie_free_graph(rng, 8, 8)
    x = features(rng, 8, 5)
    sd = sage_state_dict(rng, 5, 5, 4)
    layer = sage_layer(framework, sd, aggr=aggr, normalize=True)
    np.testing.assert_allclose(jax.jit(layer.apply)(layer.params, g, x), layer(g, x), **TOL)

    r = features(rng, 8, 4)
    loss = jax.jit(lambda p, x: jnp.sum(jnp.tanh(layer.apply(p, g, x)) * r))
    ref_loss = lambda w, x: jnp.sum(jnp.tanh(ref_sage(g, x, x, w, aggr, True)) * r)  # noqa: E731
    d_params, d_x = jax.grad(loss, argnums=(0, 1))(layer.params, x)
    ref_d_w, ref_d_x = jax.grad(ref_loss, argnums=(0, 1))(ref_weights(sd), x)
    np.testing.assert_allclose(d_x, ref_d_x, **TOL)
    for name, d in layer.weights(d_params).items():
        np.testing.assert_allclose(d, ref_d_w[name], err_msg=name, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sage_normalize_zero_row_has_finite_gradient(rng, framework):
    g = random_graph(rng, 6, 6, 12)  # node 5 receives nothing: its output row is 0
    sd = sage_state_dict(rng, 3, 3, 4, root_weight=False, bias=False)
    layer = sage_layer(framework, sd, aggr="sum", normalize=True)
    x = features(rng, 6, 3)
    np.testing.assert_array_equal(layer(g, x)[5], 0)
    d_params, d_x = jax.grad(lambda p, x: jnp.sum(layer.apply(p, g, x)), argnums=(0, 1))(layer.params, x)
    assert all(np.isfinite(leaf).all() for leaf in jax.tree_util.tree_leaves((d_params, d_x)))


# -- GraphConv --------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("norm", ["both", "right", "none"])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])  # transform before / after aggregating
def test_graph_conv_matches_reference(rng, framework, norm, add_self_loops, shape):
    g = random_graph(rng, 8, 8, 30)
    x = features(rng, 8, shape[0])
    sd = gcn_state_dict(rng, *shape)
    out = graph_conv_layer(framework, sd, norm=norm, add_self_loops=add_self_loops)(g, x)
    ref = ref_graph_conv(g, x, ref_weights(sd), norm, add_self_loops)
    assert out.shape == (8, shape[1])
    np.testing.assert_allclose(out, ref, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_graph_conv_bipartite_without_loops(rng, framework):
    g = random_graph(rng, 9, 5, 20)
    x = features(rng, 9, 4)
    sd = gcn_state_dict(rng, 4, 3, bias=False)
    out = graph_conv_layer(framework, sd, add_self_loops=False)(g, x)
    np.testing.assert_allclose(out, ref_graph_conv(g, x, ref_weights(sd), "both", False), **TOL)
    with pytest.raises(ValueError, match="add_self_loops: g must be square"):
        graph_conv_layer(framework, sd, add_self_loops=True)(g, x)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_graph_conv_jit_and_grad(rng, framework):
    g = random_graph(rng, 8, 8, 30)
    x = features(rng, 8, 5)
    sd = gcn_state_dict(rng, 5, 4)
    layer = graph_conv_layer(framework, sd)
    np.testing.assert_allclose(jax.jit(layer.apply)(layer.params, g, x), layer(g, x), **TOL)

    r = features(rng, 8, 4)
    loss = jax.jit(lambda p, x: jnp.sum(jnp.tanh(layer.apply(p, g, x)) * r))
    ref_loss = lambda w, x: jnp.sum(jnp.tanh(ref_graph_conv(g, x, w, "both", True)) * r)  # noqa: E731
    d_params, d_x = jax.grad(loss, argnums=(0, 1))(layer.params, x)
    ref_d_w, ref_d_x = jax.grad(ref_loss, argnums=(0, 1))(ref_weights(sd), x)
    np.testing.assert_allclose(d_x, ref_d_x, **TOL)
    for name, d in layer.weights(d_params).items():
        np.testing.assert_allclose(d, ref_d_w[name], err_msg=name, **TOL)


# -- both frameworks, initialisation, loaders --------------------------------------------------

def test_flax_and_equinox_identical(rng):
    g = random_graph(rng, 8, 8, 30)
    x = features(rng, 8, 5)
    sage_sd, gcn_sd = sage_state_dict(rng, 5, 5, 6), gcn_state_dict(rng, 5, 6)
    for aggr in AGGRS:
        a, b = (sage_layer(f, sage_sd, aggr=aggr) for f in FRAMEWORKS)
        np.testing.assert_array_equal(a(g, x), b(g, x))
        np.testing.assert_array_equal(jax.jit(a.apply)(a.params, g, x), jax.jit(b.apply)(b.params, g, x))
    a, b = (graph_conv_layer(f, gcn_sd) for f in FRAMEWORKS)
    np.testing.assert_array_equal(a(g, x), b(g, x))


def test_init(rng):
    g = random_graph(rng, 9, 5, 20)
    x_src, x_dst = features(rng, 9, 3), features(rng, 5, 4)
    key = jax.random.key(0)
    params = flax_nn.SAGEConv(6).init(key, g, (x_src, x_dst))["params"]
    assert {k: v.shape for k, v in params.items()} == {"neigh_kernel": (3, 6), "root_kernel": (4, 6), "bias": (6,)}
    params = flax_nn.SAGEConv(6, root_weight=False, use_bias=False).init(key, g, (x_src, x_dst))["params"]
    assert {k: v.shape for k, v in params.items()} == {"neigh_kernel": (3, 6)}
    layer = eqx_nn.SAGEConv((3, 4), 6, key=key)
    assert (layer.lin_neigh.weight.shape, layer.lin_neigh.bias.shape, layer.lin_root.weight.shape) == ((6, 3), (6,), (6, 4))
    assert eqx_nn.SAGEConv(3, 6, root_weight=False, use_bias=False, key=key).lin_root is None

    square = random_graph(rng, 6, 6, 20)
    params = flax_nn.GraphConv(6).init(key, square, x_src[:6])["params"]
    assert {k: v.shape for k, v in params.items()} == {"kernel": (3, 6), "bias": (6,)}
    layer = eqx_nn.GraphConv(3, 6, key=key)
    assert layer.lin.weight.shape == (6, 3) and layer.lin.bias is None
    np.testing.assert_array_equal(layer.bias, 0)
    assert eqx_nn.GraphConv(3, 6, use_bias=False, key=key).bias is None


def test_loaders_reject_bad_state_dicts(rng):
    sd = sage_state_dict(rng, 3, 3, 4)
    with pytest.raises(ValueError, match="from_pyg_sage: state_dict must have the key 'lin_l.weight'"):
        flax_nn.from_pyg_sage({**sd, "lin.weight": sd["lin_l.weight"]})  # project=True
    with pytest.raises(ValueError, match="SAGEConv.from_pyg: state_dict must have the key"):
        eqx_nn.SAGEConv.from_pyg({"lin_r.weight": sd["lin_r.weight"]})
    with pytest.raises(ValueError, match="from_pyg_gcn: state_dict must hold weights"):
        flax_nn.from_pyg_gcn({"lin.weight": np.ones((4, 3)), "bias": np.ones(5)})
    with pytest.raises(ValueError, match="GraphConv.from_pyg: state_dict must hold weights"):
        eqx_nn.GraphConv.from_pyg({"lin.weight": np.ones(4)})


def test_bad_choices(rng):
    g, x = random_graph(rng, 5, 5, 10), features(rng, 5, 3)
    with pytest.raises(ValueError, match="SAGEConv: aggr must be one of"):
        flax_nn.SAGEConv(4, aggr="avg").init(jax.random.key(0), g, x)
    with pytest.raises(ValueError, match="SAGEConv: aggr must be one of"):
        eqx_nn.SAGEConv(3, 4, aggr="avg", key=jax.random.key(0))
    with pytest.raises(ValueError, match="GraphConv: norm must be one of"):
        flax_nn.GraphConv(4, norm="left").init(jax.random.key(0), g, x)
    with pytest.raises(ValueError, match="GraphConv: norm must be one of"):
        eqx_nn.GraphConv(3, 4, norm="left", key=jax.random.key(0))


# -- add_self_loops ---------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_add_self_loops_equals_rebuilt_graph(x64, rng, index_dtype):
    g = random_graph(rng, 7, 7, 20, index_dtype=index_dtype)
    nodes = np.arange(7)
    expected = jgo.Graph.from_edges(np.concatenate([g.src, nodes]), np.concatenate([g.dst, nodes]), 7, 7,
                                    index_dtype=index_dtype)
    for looped in (jgo_nn.add_self_loops(g), jax.jit(jgo_nn.add_self_loops)(g)):
        assert (looped.n_src, looped.n_dst) == (7, 7)
        for a, b in zip(jax.tree_util.tree_leaves(looped), jax.tree_util.tree_leaves(expected)):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def test_misspelt_choices_are_suggested_and_dst_rows_checked(rng):
    """Issue 19: a misspelt option gets a "did you mean"; an x_dst with the wrong number of rows is an error
    (the layers used to drop the extra rows, or ignore x_dst, silently)."""
    g, x = random_graph(rng, 5, 5, 10), features(rng, 5, 3)
    with pytest.raises(ValueError, match=r"SAGEConv: aggr must be one of .*; got 'maen' \(did you mean 'mean'\?\)"):
        flax_nn.SAGEConv(4, aggr="maen").init(jax.random.key(0), g, x)
    with pytest.raises(ValueError, match=r"GraphConv: norm must be one of .*\(did you mean 'right'\?\)"):
        eqx_nn.GraphConv(3, 4, norm="rigth", key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"GNOBlock: kernel must be one of .*\(did you mean 'diagonal'\?\)"):
        eqx_nn.GNOBlock(3, 3, 2, kernel="Diagonal", key=jax.random.key(0))
    bip = random_graph(rng, 5, 4, 10)
    x_dst = features(rng, 5, 3)  # one row too many
    for layer in (flax_nn.SAGEConv(4), flax_nn.SAGEConv(4, root_weight=False), flax_nn.GATConv(4),
                  flax_nn.GATv2Conv(4), flax_nn.TransformerConv(4)):
        with pytest.raises(ValueError, match=r"Conv: x_dst must be \[n_dst, F\] with n_dst=4; got shape \(5, 3\)"):
            layer.init(jax.random.key(0), bip, (x, x_dst))
