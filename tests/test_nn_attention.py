"""GATConv, GATv2Conv and TransformerConv (flax and equinox) against direct segment-op computations; jit,
grad, loaders, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

from jaxgraphops.nn import equinox as eqx_nn
from jaxgraphops.nn import flax as flax_nn

FRAMEWORKS = ("flax", "equinox")
TOL = dict(rtol=1e-5, atol=1e-5)


# -- the direct computation (PyG's GATConv written with jax.ops segment ops) ------------------

def pyg_loops(src, dst, n_src, n_dst, edge_attr, add_loops):
    """PyG's remove + add self loops: ``(src, dst, live, edge_attr)`` with removed loops kept in
    place but not ``live``, the loops' edge attributes the mean of the node's incoming ones."""
    src, dst = np.asarray(src), np.asarray(dst)
    live = np.ones(src.shape[0], bool)
    if add_loops:
        m = min(n_src, n_dst)
        live = src != dst
        if edge_attr is not None:
            keep = live & (dst < m)
            tot = jax.ops.segment_sum(edge_attr * keep[:, None], dst, n_dst)[:m]
            cnt = jax.ops.segment_sum(keep.astype(np.float32), dst, n_dst)[:m]
            edge_attr = jnp.concatenate([edge_attr, tot / jnp.maximum(cnt, 1)[:, None]])
        src, dst = np.concatenate([src, np.arange(m)]), np.concatenate([dst, np.arange(m)])
        live = np.concatenate([live, np.ones(m, bool)])
    return src, dst, live, edge_attr


def softmax_aggregate(logit, messages, dst, live, n_dst, concat, bias):
    """Segment softmax of ``logit [E, H]`` over live edges, weighted sum of ``messages [E, H, C]``."""
    logit = jnp.where(live[:, None], logit, -jnp.inf)
    seg = np.where(live, dst, n_dst)  # removed loops go to a discarded segment
    mx = jax.ops.segment_max(logit, seg, n_dst + 1)
    p = jnp.where(live[:, None], jnp.exp(logit - mx[seg]), 0.0)
    alpha = p / jax.ops.segment_sum(p, seg, n_dst + 1)[seg]
    alpha = jnp.where(live[:, None], alpha, 0.0)
    out = jax.ops.segment_sum(alpha[..., None] * messages, seg, n_dst + 1)[:n_dst]
    out = out.reshape(n_dst, -1) if concat else out.mean(axis=1)
    return (out if bias is None else out + bias), alpha


def ref_gat(src, dst, n_src, n_dst, x_src, x_dst, w, *, heads, concat, negative_slope=0.2, add_loops=True,
            edge_attr=None):
    """Returns ``(out, alpha)`` with alpha over ``g``'s edges (0 for removed loops), then the loops."""
    k_src = w.get("kernel", w.get("src_kernel"))
    k_dst = w.get("kernel", w.get("dst_kernel"))
    c = w["att_src"].shape[-1]
    hs = (x_src @ k_src).reshape(n_src, heads, c)
    hd = ((x_src if x_dst is None else x_dst) @ k_dst)[:n_dst].reshape(n_dst, heads, c)
    src, dst, live, edge_attr = pyg_loops(src, dst, n_src, n_dst, edge_attr, add_loops)
    logit = (hs * w["att_src"]).sum(-1)[src] + (hd * w["att_dst"]).sum(-1)[dst]
    if edge_attr is not None:
        logit = logit + ((edge_attr @ w["edge_kernel"]).reshape(-1, heads, c) * w["att_edge"]).sum(-1)
    logit = jnp.where(logit > 0, logit, negative_slope * logit)
    return softmax_aggregate(logit, hs[src], dst, live, n_dst, concat, w.get("bias"))


def ref_gatv2(src, dst, n_src, n_dst, x_src, x_dst, w, *, heads, concat, negative_slope=0.2, add_loops=True,
              edge_attr=None):
    """PyG's GATv2Conv from ``[in, out]`` kernels ``src_kernel``/``dst_kernel`` (+ biases)."""
    c = w["att"].shape[-1]
    xl = (x_src @ w["src_kernel"] + w.get("src_bias", 0)).reshape(n_src, heads, c)
    xr = ((x_src if x_dst is None else x_dst) @ w["dst_kernel"] + w.get("dst_bias", 0))[:n_dst]
    xr = jnp.concatenate([xr.reshape(n_dst, heads, c), jnp.zeros((1, heads, c), xr.dtype)])
    src, dst, live, edge_attr = pyg_loops(src, dst, n_src, n_dst, edge_attr, add_loops)
    z = xl[src] + xr[np.where(live, dst, n_dst)]
    if edge_attr is not None:
        z = z + (edge_attr @ w["edge_kernel"]).reshape(-1, heads, c)
    z = jnp.where(z > 0, z, negative_slope * z)
    out, alpha = softmax_aggregate((z * w["att"]).sum(-1), xl[src], dst, live, n_dst, concat, w.get("bias"))
    if "res_kernel" in w:
        out = out + (x_src if x_dst is None else x_dst)[:n_dst] @ w["res_kernel"]
    return out, alpha


def gat_state_dict(rng, in_src, in_dst, heads, c, *, concat=True, edge_dim=None, pair=False, bias=True):
    """Random weights named and laid out as PyG's ``GATConv.state_dict()``."""
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    sd = {"att_src": f32(1, heads, c), "att_dst": f32(1, heads, c)}
    if pair:
        sd["lin_src.weight"], sd["lin_dst.weight"] = f32(heads * c, in_src), f32(heads * c, in_dst)
    else:
        sd["lin.weight"] = f32(heads * c, in_src)
    if edge_dim is not None:
        sd["lin_edge.weight"], sd["att_edge"] = f32(heads * c, edge_dim), f32(1, heads, c)
    if bias:
        sd["bias"] = f32(heads * c if concat else c)
    return sd


def ref_weights(sd):
    names = {"lin.weight": "kernel", "lin_src.weight": "src_kernel", "lin_dst.weight": "dst_kernel",
             "lin_edge.weight": "edge_kernel"}
    return {names.get(k, k): (v.T if k in names else v) for k, v in sd.items()}


def make_layer(framework, sd, *, concat=True, negative_slope=0.2, add_loops=True):
    """Our layer loaded with ``sd``, as ``f(g, x, edge_attr=None, return_attention_weights=False)``."""
    if framework == "equinox":
        return eqx_nn.GATConv.from_pyg(sd, concat=concat, negative_slope=negative_slope, add_self_loops=add_loops)
    _, heads, c = sd["att_src"].shape
    edge_dim = sd["lin_edge.weight"].shape[1] if "lin_edge.weight" in sd else None
    layer = flax_nn.GATConv(c, heads=heads, concat=concat, negative_slope=negative_slope, add_self_loops=add_loops,
                            edge_dim=edge_dim, use_bias="bias" in sd, share_weights="lin.weight" in sd)
    variables = flax_nn.from_pyg_gat(sd)
    return lambda *a, **k: layer.apply(variables, *a, **k)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("edge_dim", [None, 2])
def test_gat_conv_vs_direct(framework, heads, concat, edge_dim):
    rng = np.random.default_rng(heads + 2 * concat)
    g = random_graph(rng, 9, 9, 30)  # self loops, a duplicate edge, node 8 isolated
    x = jnp.asarray(rng.normal(size=(9, 5)).astype(np.float32))
    ea = None if edge_dim is None else jnp.asarray(rng.normal(size=(30, edge_dim)).astype(np.float32))
    sd = gat_state_dict(rng, 5, 5, heads, 4, concat=concat, edge_dim=edge_dim)
    layer = make_layer(framework, sd, concat=concat)
    out, alpha = layer(g, x, ea, return_attention_weights=True)
    r_out, r_alpha = ref_gat(g.src, g.dst, 9, 9, x, None, ref_weights(sd), heads=heads, concat=concat, edge_attr=ea)
    assert out.shape == (9, heads * 4 if concat else 4) and alpha.shape == (39, heads)
    np.testing.assert_allclose(out, r_out, **TOL)
    np.testing.assert_allclose(alpha, r_alpha, **TOL)
    np.testing.assert_allclose(layer(g, x, ea), out, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("add_loops", [True, False])
def test_gat_conv_bipartite(framework, add_loops):
    rng = np.random.default_rng(7)
    g = random_graph(rng, 8, 6, 20)
    xs = jnp.asarray(rng.normal(size=(8, 5)).astype(np.float32))
    xd = jnp.asarray(rng.normal(size=(6, 3)).astype(np.float32))
    sd = gat_state_dict(rng, 5, 3, 2, 4, pair=True)
    out = make_layer(framework, sd, add_loops=add_loops)(g, (xs, xd))
    r_out, _ = ref_gat(g.src, g.dst, 8, 6, xs, xd, ref_weights(sd), heads=2, concat=True, add_loops=add_loops)
    np.testing.assert_allclose(out, r_out, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gat_conv_no_loops_isolated_node_is_bias(framework):
    rng = np.random.default_rng(3)
    g = random_graph(rng, 7, 7, 20)
    x = jnp.asarray(rng.normal(size=(7, 4)).astype(np.float32))
    sd = gat_state_dict(rng, 4, 4, 3, 2)
    out = make_layer(framework, sd, add_loops=False, negative_slope=0.1)(g, x)
    r_out, _ = ref_gat(g.src, g.dst, 7, 7, x, None, ref_weights(sd), heads=3, concat=True, negative_slope=0.1,
                       add_loops=False)
    np.testing.assert_allclose(out, r_out, **TOL)
    np.testing.assert_allclose(out[6], sd["bias"], **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("edge_dim", [None, 3])
def test_gat_conv_jit_and_grad(framework, edge_dim):
    rng = np.random.default_rng(5)
    g = random_graph(rng, 9, 9, 30)
    x = jnp.asarray(rng.normal(size=(9, 5)).astype(np.float32))
    ea = None if edge_dim is None else jnp.asarray(rng.normal(size=(30, edge_dim)).astype(np.float32))
    sd = gat_state_dict(rng, 5, 5, 3, 4, edge_dim=edge_dim)
    layer = make_layer(framework, sd)
    w = ref_weights(sd)

    def loss_ours(x, ea, g):
        return jnp.sum(jnp.sin(layer(g, x, ea)))

    def loss_ref(x, ea):
        return jnp.sum(jnp.sin(ref_gat(g.src, g.dst, 9, 9, x, None, w, heads=3, concat=True, edge_attr=ea)[0]))

    argnums = (0,) if edge_dim is None else (0, 1)
    val, grads = jax.jit(jax.value_and_grad(loss_ours, argnums))(x, ea, g)  # the graph is traced too
    r_val, r_grads = jax.value_and_grad(loss_ref, argnums)(x, ea)
    np.testing.assert_allclose(val, r_val, **TOL)
    for a, b in zip(grads, r_grads):
        np.testing.assert_allclose(a, b, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gat_conv_param_grads(framework):
    rng = np.random.default_rng(6)
    g = random_graph(rng, 8, 8, 25)
    x = jnp.asarray(rng.normal(size=(8, 4)).astype(np.float32))
    ea = jnp.asarray(rng.normal(size=(25, 2)).astype(np.float32))
    sd = gat_state_dict(rng, 4, 4, 2, 3, edge_dim=2)
    w = ref_weights(sd)
    r_grads = jax.grad(lambda w: jnp.sum(ref_gat(g.src, g.dst, 8, 8, x, None, w, heads=2, concat=True,
                                                 edge_attr=ea)[0] ** 2))(w)
    if framework == "flax":
        layer = flax_nn.GATConv(3, heads=2, edge_dim=2)
        grads = jax.grad(lambda v: jnp.sum(layer.apply(v, g, x, ea) ** 2))(flax_nn.from_pyg_gat(sd))["params"]
    else:
        m = eqx_nn.GATConv.from_pyg(sd)
        gm = jax.grad(lambda m: jnp.sum(m(g, x, ea) ** 2))(m)
        grads = {"kernel": gm.lin.weight.T, "edge_kernel": gm.lin_edge.weight.T, "att_src": gm.att_src,
                 "att_dst": gm.att_dst, "att_edge": gm.att_edge, "bias": gm.bias}
    for k, v in r_grads.items():
        np.testing.assert_allclose(grads[k], v, rtol=1e-4, atol=1e-4, err_msg=k)


def test_flax_equals_equinox():
    rng = np.random.default_rng(8)
    g = random_graph(rng, 10, 10, 40)
    x = jnp.asarray(rng.normal(size=(10, 6)).astype(np.float32))
    ea = jnp.asarray(rng.normal(size=(40, 2)).astype(np.float32))
    for concat in (True, False):
        sd = gat_state_dict(rng, 6, 6, 3, 4, concat=concat, edge_dim=2)
        a = make_layer("flax", sd, concat=concat)(g, x, ea, return_attention_weights=True)
        b = make_layer("equinox", sd, concat=concat)(g, x, ea, return_attention_weights=True)
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-6)


def test_init_shapes():
    rng = np.random.default_rng(9)
    g = random_graph(rng, 6, 6, 12)
    x = jnp.ones((6, 5))
    v = flax_nn.GATConv(4, heads=3, concat=False, edge_dim=2).init(jax.random.key(0), g, x, jnp.ones((12, 2)))
    shapes = jax.tree.map(jnp.shape, v["params"])
    assert shapes == {"kernel": (5, 12), "att_src": (1, 3, 4), "att_dst": (1, 3, 4), "edge_kernel": (2, 12),
                      "att_edge": (1, 3, 4), "bias": (4,)}
    m = eqx_nn.GATConv((5, 3), 4, heads=3, key=jax.random.key(0))
    assert m.lin is None and m.lin_src.weight.shape == (12, 5) and m.lin_dst.weight.shape == (12, 3)
    assert m.bias.shape == (12,) and m.lin_edge is None


def test_errors():
    rng = np.random.default_rng(10)
    g = random_graph(rng, 6, 6, 12)
    x = jnp.ones((6, 4))
    sd = gat_state_dict(rng, 4, 4, 2, 3)
    with pytest.raises(ValueError, match="edge_attr given"):
        eqx_nn.GATConv.from_pyg(sd)(g, x, jnp.ones((12, 2)))
    with pytest.raises(ValueError, match="edge_attr is required"):
        eqx_nn.GATConv.from_pyg(gat_state_dict(rng, 4, 4, 2, 3, edge_dim=2))(g, x)
    with pytest.raises(ValueError, match="state_dict must have"):
        flax_nn.from_pyg_gat({"lin.weight": sd["lin.weight"]})
    with pytest.raises(ValueError, match="bias has shape"):
        eqx_nn.GATConv.from_pyg(sd, concat=False)
    with pytest.raises(ValueError, match="fill_value"):
        eqx_nn.GATConv(4, 3, fill_value="max", key=jax.random.key(0))
    gb = random_graph(rng, 6, 4, 10)
    with pytest.raises(ValueError, match="pair"):
        eqx_nn.GATConv.from_pyg(sd)(gb, x)


# -- GATv2Conv --------------------------------------------------------------------------------

def gatv2_state_dict(rng, in_src, in_dst, heads, c, *, concat=True, edge_dim=None, bias=True, residual=False,
                     share=False):
    """Random weights named and laid out as PyG's ``GATv2Conv.state_dict()``."""
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    sd = {"lin_l.weight": f32(heads * c, in_src), "att": f32(1, heads, c)}
    sd["lin_r.weight"] = sd["lin_l.weight"] if share else f32(heads * c, in_dst)
    if bias:
        sd["lin_l.bias"] = f32(heads * c)
        sd["lin_r.bias"] = sd["lin_l.bias"] if share else f32(heads * c)
        sd["bias"] = f32(heads * c if concat else c)
    if edge_dim is not None:
        sd["lin_edge.weight"] = f32(heads * c, edge_dim)
    if residual:
        sd["res.weight"] = f32(heads * c if concat else c, in_dst)
    return sd


def ref_weights_v2(sd):
    names = {"lin_l.weight": "src_kernel", "lin_l.bias": "src_bias", "lin_r.weight": "dst_kernel",
             "lin_r.bias": "dst_bias", "lin_edge.weight": "edge_kernel", "res.weight": "res_kernel"}
    return {names.get(k, k): (v.T if k.endswith("weight") else v) for k, v in sd.items()}


def make_layer_v2(framework, sd, *, concat=True, add_loops=True, share_weights=False):
    if framework == "equinox":
        return eqx_nn.GATv2Conv.from_pyg(sd, concat=concat, add_self_loops=add_loops, share_weights=share_weights)
    _, heads, c = sd["att"].shape
    edge_dim = sd["lin_edge.weight"].shape[1] if "lin_edge.weight" in sd else None
    layer = flax_nn.GATv2Conv(c, heads=heads, concat=concat, add_self_loops=add_loops, edge_dim=edge_dim,
                              use_bias="bias" in sd, share_weights=share_weights, residual="res.weight" in sd)
    variables = flax_nn.from_pyg_gatv2(sd, share_weights=share_weights)
    return lambda *a, **k: layer.apply(variables, *a, **k)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("edge_dim", [None, 2])
def test_gatv2_conv_vs_direct(framework, heads, concat, edge_dim):
    rng = np.random.default_rng(30 + heads + 2 * concat)
    g = random_graph(rng, 9, 9, 30)
    x = jnp.asarray(rng.normal(size=(9, 5)).astype(np.float32))
    ea = None if edge_dim is None else jnp.asarray(rng.normal(size=(30, edge_dim)).astype(np.float32))
    sd = gatv2_state_dict(rng, 5, 5, heads, 4, concat=concat, edge_dim=edge_dim, residual=heads > 1)
    layer = make_layer_v2(framework, sd, concat=concat)
    out, alpha = layer(g, x, ea, return_attention_weights=True)
    r_out, r_alpha = ref_gatv2(g.src, g.dst, 9, 9, x, None, ref_weights_v2(sd), heads=heads, concat=concat,
                               edge_attr=ea)
    assert out.shape == (9, heads * 4 if concat else 4) and alpha.shape == (39, heads)
    np.testing.assert_allclose(out, r_out, **TOL)
    np.testing.assert_allclose(alpha, r_alpha, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("add_loops", [True, False])
def test_gatv2_conv_bipartite(framework, add_loops):
    rng = np.random.default_rng(37)
    g = random_graph(rng, 8, 6, 20)
    xs = jnp.asarray(rng.normal(size=(8, 5)).astype(np.float32))
    xd = jnp.asarray(rng.normal(size=(6, 3)).astype(np.float32))
    sd = gatv2_state_dict(rng, 5, 3, 2, 4, residual=True)
    out = make_layer_v2(framework, sd, add_loops=add_loops)(g, (xs, xd))
    r_out, _ = ref_gatv2(g.src, g.dst, 8, 6, xs, xd, ref_weights_v2(sd), heads=2, concat=True, add_loops=add_loops)
    np.testing.assert_allclose(out, r_out, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gatv2_conv_shared_weights_jit_and_grads(framework):
    rng = np.random.default_rng(38)
    g = random_graph(rng, 9, 9, 30)
    x = jnp.asarray(rng.normal(size=(9, 5)).astype(np.float32))
    ea = jnp.asarray(rng.normal(size=(30, 2)).astype(np.float32))
    sd = gatv2_state_dict(rng, 5, 5, 3, 4, edge_dim=2, share=True)
    w = ref_weights_v2(sd)
    layer = make_layer_v2(framework, sd, share_weights=True)

    def loss_ref(x, ea):
        return jnp.sum(jnp.sin(ref_gatv2(g.src, g.dst, 9, 9, x, None, w, heads=3, concat=True, edge_attr=ea)[0]))

    val, grads = jax.jit(jax.value_and_grad(lambda x, ea, g: jnp.sum(jnp.sin(layer(g, x, ea))), (0, 1)))(x, ea, g)
    r_val, r_grads = jax.value_and_grad(loss_ref, (0, 1))(x, ea)
    np.testing.assert_allclose(val, r_val, **TOL)
    for a, b in zip(grads, r_grads):
        np.testing.assert_allclose(a, b, **TOL)

    # parameter gradients: the shared kernel gets both the source and the destination parts
    shared = {"src_kernel": w["src_kernel"], "src_bias": w["src_bias"]}
    rest = {k: v for k, v in w.items() if k not in ("src_kernel", "src_bias", "dst_kernel", "dst_bias")}

    def ref_param_loss(shared):
        full = {**rest, **shared, "dst_kernel": shared["src_kernel"], "dst_bias": shared["src_bias"]}
        return jnp.sum(ref_gatv2(g.src, g.dst, 9, 9, x, None, full, heads=3, concat=True, edge_attr=ea)[0] ** 2)

    r_shared = jax.grad(ref_param_loss)(shared)
    if framework == "flax":
        module = flax_nn.GATv2Conv(4, heads=3, edge_dim=2, share_weights=True)
        p = jax.grad(lambda v: jnp.sum(module.apply(v, g, x, ea) ** 2))(
            flax_nn.from_pyg_gatv2(sd, share_weights=True))["params"]
        kernel, kernel_bias = p["kernel"], p["kernel_bias"]
    else:
        gm = jax.grad(lambda m: jnp.sum(m(g, x, ea) ** 2))(eqx_nn.GATv2Conv.from_pyg(sd, share_weights=True))
        assert gm.lin_r is None
        kernel, kernel_bias = gm.lin_l.weight.T, gm.lin_l.bias
    np.testing.assert_allclose(kernel, r_shared["src_kernel"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kernel_bias, r_shared["src_bias"], rtol=1e-4, atol=1e-4)


def test_gatv2_flax_equals_equinox_and_init_shapes():
    rng = np.random.default_rng(39)
    g = random_graph(rng, 10, 10, 40)
    x = jnp.asarray(rng.normal(size=(10, 6)).astype(np.float32))
    ea = jnp.asarray(rng.normal(size=(40, 2)).astype(np.float32))
    sd = gatv2_state_dict(rng, 6, 6, 3, 4, concat=False, edge_dim=2, residual=True)
    a = make_layer_v2("flax", sd, concat=False)(g, x, ea, return_attention_weights=True)
    b = make_layer_v2("equinox", sd, concat=False)(g, x, ea, return_attention_weights=True)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-6)
    v = flax_nn.GATv2Conv(4, heads=3, concat=False, edge_dim=2, residual=True).init(jax.random.key(0), g, x, ea)
    assert jax.tree.map(jnp.shape, v["params"]) == {
        "src_kernel": (6, 12), "src_bias": (12,), "dst_kernel": (6, 12), "dst_bias": (12,), "att": (1, 3, 4),
        "edge_kernel": (2, 12), "res_kernel": (6, 4), "bias": (4,)}
    m = eqx_nn.GATv2Conv((6, 3), 4, heads=3, share_weights=False, use_bias=False, key=jax.random.key(0))
    assert m.lin_l.weight.shape == (12, 6) and m.lin_r.weight.shape == (12, 3) and m.lin_l.bias is None


def test_gatv2_errors():
    rng = np.random.default_rng(40)
    g = random_graph(rng, 6, 6, 12)
    sd = gatv2_state_dict(rng, 4, 4, 2, 3)
    with pytest.raises(ValueError, match="share_weights=True needs"):
        flax_nn.from_pyg_gatv2(sd, share_weights=True)
    with pytest.raises(ValueError, match="bias has shape"):
        eqx_nn.GATv2Conv.from_pyg(sd, concat=False)
    with pytest.raises(ValueError, match="state_dict must have"):
        eqx_nn.GATv2Conv.from_pyg({k: v for k, v in sd.items() if k != "att"})
    with pytest.raises(ValueError, match="lin_edge.weight has shape"):
        flax_nn.from_pyg_gatv2({**sd, "lin_edge.weight": np.ones((5, 2), np.float32)})
    with pytest.raises(ValueError, match="edge_attr given"):
        eqx_nn.GATv2Conv.from_pyg(sd)(g, jnp.ones((6, 4)), jnp.ones((12, 2)))
    with pytest.raises(ValueError, match="fill_value"):
        flax_nn.GATv2Conv(3, fill_value="max").init(jax.random.key(0), g, jnp.ones((6, 4)))


# -- TransformerConv --------------------------------------------------------------------------

def transformer_state_dict(rng, in_src, in_dst, heads, c, *, concat=True, edge_dim=None, bias=True, beta=False):
    """Random weights named and laid out as PyG's ``TransformerConv.state_dict()``."""
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    out = heads * c if concat else c
    sd = {"lin_query.weight": f32(heads * c, in_dst), "lin_key.weight": f32(heads * c, in_src),
          "lin_value.weight": f32(heads * c, in_src), "lin_skip.weight": f32(out, in_dst)}
    if bias:
        sd.update({"lin_query.bias": f32(heads * c), "lin_key.bias": f32(heads * c), "lin_value.bias": f32(heads * c),
                   "lin_skip.bias": f32(out)})
    if edge_dim is not None:
        sd["lin_edge.weight"] = f32(heads * c, edge_dim)
    if beta:
        sd["lin_beta.weight"] = f32(1, 3 * out)
    return sd


def ref_transformer(src, dst, n_dst, x_src, x_dst, sd, *, heads, concat, edge_attr=None, root_weight=True):
    """PyG's TransformerConv written with segment ops, from the PyG-named ``sd``."""
    def lin(name, x):
        return x @ sd[f"lin_{name}.weight"].T + sd.get(f"lin_{name}.bias", 0)

    x_dst = x_src if x_dst is None else x_dst
    c = sd["lin_query.weight"].shape[0] // heads
    q = lin("query", x_dst).reshape(-1, heads, c)[dst]
    k = lin("key", x_src).reshape(-1, heads, c)[src]
    v = lin("value", x_src).reshape(-1, heads, c)[src]
    if edge_attr is not None:
        e = lin("edge", edge_attr).reshape(-1, heads, c)
        k, v = k + e, v + e
    out, alpha = softmax_aggregate((q * k).sum(-1) / np.sqrt(c), v, np.asarray(dst), np.ones(len(src), bool), n_dst,
                                   concat, None)
    if root_weight:
        x_r = lin("skip", x_dst)
        if "lin_beta.weight" in sd:
            b = jax.nn.sigmoid(jnp.concatenate([out, x_r, out - x_r], -1) @ sd["lin_beta.weight"].T)
            out = b * x_r + (1 - b) * out
        else:
            out = out + x_r
    return out, alpha


def make_transformer(framework, sd, *, heads, concat=True, root_weight=True):
    if framework == "equinox":
        return eqx_nn.TransformerConv.from_pyg(sd, heads=heads, concat=concat, root_weight=root_weight)
    width = sd["lin_query.weight"].shape[0]
    layer = flax_nn.TransformerConv(width // heads, heads=heads, concat=concat, beta="lin_beta.weight" in sd,
                                    edge_dim=sd["lin_edge.weight"].shape[1] if "lin_edge.weight" in sd else None,
                                    use_bias="lin_query.bias" in sd, root_weight=root_weight)
    variables = flax_nn.from_pyg_transformer(sd, heads=heads, concat=concat, root_weight=root_weight)
    return lambda *a, **k: layer.apply(variables, *a, **k)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("edge_dim", [None, 2])
def test_transformer_conv_vs_direct(framework, heads, concat, edge_dim):
    rng = np.random.default_rng(50 + heads + 2 * concat)
    g = random_graph(rng, 9, 9, 30)
    x = jnp.asarray(rng.normal(size=(9, 5)).astype(np.float32))
    ea = None if edge_dim is None else jnp.asarray(rng.normal(size=(30, edge_dim)).astype(np.float32))
    sd = transformer_state_dict(rng, 5, 5, heads, 4, concat=concat, edge_dim=edge_dim, beta=heads > 1)
    out, alpha = make_transformer(framework, sd, heads=heads, concat=concat)(g, x, ea, return_attention_weights=True)
    r_out, r_alpha = ref_transformer(g.src, g.dst, 9, x, None, sd, heads=heads, concat=concat, edge_attr=ea)
    assert out.shape == (9, heads * 4 if concat else 4) and alpha.shape == (30, heads)
    np.testing.assert_allclose(out, r_out, **TOL)
    np.testing.assert_allclose(alpha, r_alpha, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_transformer_conv_bipartite_jit_and_grads(framework):
    rng = np.random.default_rng(55)
    g = random_graph(rng, 8, 6, 20)
    xs = jnp.asarray(rng.normal(size=(8, 5)).astype(np.float32))
    xd = jnp.asarray(rng.normal(size=(6, 3)).astype(np.float32))
    ea = jnp.asarray(rng.normal(size=(20, 2)).astype(np.float32))
    sd = transformer_state_dict(rng, 5, 3, 2, 4, edge_dim=2, beta=True)
    layer = make_transformer(framework, sd, heads=2)

    def loss_ref(xs, xd, ea):
        return jnp.sum(jnp.sin(ref_transformer(g.src, g.dst, 6, xs, xd, sd, heads=2, concat=True, edge_attr=ea)[0]))

    val, grads = jax.jit(jax.value_and_grad(lambda xs, xd, ea, g: jnp.sum(jnp.sin(layer(g, (xs, xd), ea))),
                                            (0, 1, 2)))(xs, xd, ea, g)
    r_val, r_grads = jax.value_and_grad(loss_ref, (0, 1, 2))(xs, xd, ea)
    np.testing.assert_allclose(val, r_val, **TOL)
    for a, b in zip(grads, r_grads):
        np.testing.assert_allclose(a, b, **TOL)


def test_transformer_param_grads_flax_equals_equinox_and_shapes():
    rng = np.random.default_rng(56)
    g = random_graph(rng, 9, 9, 30)
    x = jnp.asarray(rng.normal(size=(9, 5)).astype(np.float32))
    ea = jnp.asarray(rng.normal(size=(30, 2)).astype(np.float32))
    sd = transformer_state_dict(rng, 5, 5, 2, 3, concat=False, edge_dim=2, beta=True)
    module = flax_nn.TransformerConv(3, heads=2, concat=False, beta=True, edge_dim=2)
    fg = jax.grad(lambda v: jnp.sum(module.apply(v, g, x, ea) ** 2))(
        flax_nn.from_pyg_transformer(sd, heads=2, concat=False))["params"]
    eg = jax.grad(lambda m: jnp.sum(m(g, x, ea) ** 2))(eqx_nn.TransformerConv.from_pyg(sd, heads=2, concat=False))
    rg = jax.grad(lambda sd: jnp.sum(ref_transformer(g.src, g.dst, 9, x, None, sd, heads=2, concat=False,
                                                     edge_attr=ea)[0] ** 2))(sd)
    for name in ("query", "key", "value", "edge", "skip", "beta"):
        np.testing.assert_allclose(fg[f"{name}_kernel"], rg[f"lin_{name}.weight"].T, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(getattr(eg, f"lin_{name}").weight, rg[f"lin_{name}.weight"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fg["skip_bias"], rg["lin_skip.bias"], rtol=1e-4, atol=1e-4)
    v = flax_nn.TransformerConv(4, heads=3, edge_dim=2, root_weight=False, use_bias=False).init(
        jax.random.key(0), g, x, ea)
    assert jax.tree.map(jnp.shape, v["params"]) == {"query_kernel": (5, 12), "key_kernel": (5, 12),
                                                    "value_kernel": (5, 12), "edge_kernel": (2, 12)}


def test_transformer_errors():
    rng = np.random.default_rng(57)
    sd = transformer_state_dict(rng, 4, 4, 2, 3)
    with pytest.raises(ValueError, match="heads must be a positive int"):
        flax_nn.from_pyg_transformer(sd, heads=4)
    with pytest.raises(ValueError, match=r"lin_skip\.bias has shape \(6,\)"):
        eqx_nn.TransformerConv.from_pyg(sd, heads=2, concat=False)
    with pytest.raises(ValueError, match="state_dict must have"):
        eqx_nn.TransformerConv.from_pyg({k: v for k, v in sd.items() if k != "lin_key.weight"}, heads=2)
    with pytest.raises(ValueError, match="must all have a bias or none"):
        flax_nn.from_pyg_transformer({k: v for k, v in sd.items() if k != "lin_key.bias"}, heads=2)
    g = random_graph(rng, 6, 6, 12)
    with pytest.raises(ValueError, match="edge_attr is required"):
        eqx_nn.TransformerConv(4, 3, edge_dim=2, key=jax.random.key(0))(g, jnp.ones((6, 4)))
    with pytest.raises(ValueError, match="pair"):
        eqx_nn.TransformerConv.from_pyg(sd, heads=2)(random_graph(rng, 6, 4, 10), jnp.ones((6, 4)))
