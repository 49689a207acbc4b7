"""Padding edges (jaxgraphops.Graph): every op on a padded graph equals the op on the graph itself.

A graph padded with random numbers of nodes and edges (``jgo.pad``, ``jgo.pad_batch``) and features whose
padding rows hold large values, infinities and NaN: every op family, forward and gradients, through the
kernels and the pure-JAX reference, under ``jit`` and ``vmap``, gives the unpadded results on the real
nodes and edges, an empty neighbourhood's at the padding nodes, 0 at the padding edges, and zero gradients
for every padding row. The oracle is the same op on the unpadded graph.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo

F, H = 4, 2


def _padded_rows(rng, real, n, width):
    """``real [r, width]`` followed by ``n - r`` rows of junk: huge values, infinities and NaN."""
    junk = rng.choice(np.array([1e30, -np.inf, np.inf, np.nan, 3.0]), size=(n - real.shape[0],) + real.shape[1:])
    return np.concatenate([real, junk]).astype(real.dtype)


def _weights(rng, g):
    """The weights the ops take besides features, as a dict (differentiated as well)."""
    normal = lambda *shape: jnp.asarray(rng.normal(size=shape) / 2, jnp.float32)  # noqa: E731
    return {"a3": normal(3 * F), "a1": normal(F), "U": normal(3, 2), "b_u": normal(3), "V": normal(F * F, 3),
            "b_v": normal(F * F), "comp": normal(3, 2)}


def _families(rng, g):
    """``{name: (fn(g, xs, xd, ef, w, impl) -> tuple of outputs, kinds)}`` with kinds "node", "edge" per output;
    ``w`` the dict of :func:`_weights`. Every op, with every edge operand and weight it takes."""
    types = rng.integers(0, 3, g.n_edges)
    rev = np.full(g.n_edges, -1)  # pairs (2k, 2k + 1) as reverse bonds where they are
    for k in range(0, g.n_edges - 1, 2):
        if np.asarray(g.src)[k] == np.asarray(g.dst)[k + 1] and np.asarray(g.dst)[k] == np.asarray(g.src)[k + 1]:
            rev[k], rev[k + 1] = k + 1, k

    def t(fn, *kinds):
        return fn, kinds

    def spmm(op, reduce):
        return t(lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, xs, ef, op=op, reduce=reduce, impl=impl),), "node")

    def sddmm(op, lhs, rhs):
        def fn(g, xs, xd, ef, w, impl):
            x = {"u": xs, "v": xd, "e": ef}
            return (jgo.gsddmm(g, x[lhs], x[rhs], op=op, lhs_target=lhs, rhs_target=rhs, impl=impl),)
        return t(fn, "edge")

    return {
        "gspmm u_mul_e sum": spmm("u_mul_e", "sum"),
        "gspmm u_add_e max": spmm("u_add_e", "max"),
        "gspmm u_div_e mean": spmm("u_div_e", "mean"),
        "gspmm u_div_e min": spmm("u_div_e", "min"),
        "gspmm u_sub_e sum": spmm("u_sub_e", "sum"),
        "gspmm copy_u mean": t(lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, xs, reduce="mean", impl=impl),), "node"),
        "gspmm copy_e max": t(lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, e=ef, op="copy_e", reduce="max",
                                                                       impl=impl),), "node"),
        "gsddmm dot": sddmm("dot", "u", "v"),
        "gsddmm div u v": sddmm("div", "u", "v"),
        "gsddmm div v u": sddmm("div", "v", "u"),
        "gsddmm div u e": sddmm("div", "u", "e"),
        "gsddmm add u e": sddmm("add", "u", "e"),
        "gsddmm sub e v": sddmm("sub", "e", "v"),
        "gsddmm mul e e": sddmm("mul", "e", "e"),
        "edge_softmax": t(lambda g, xs, xd, ef, w, impl: (jgo.edge_softmax(g, ef[:, :H], impl=impl),), "edge"),
        "agg_simple max": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_simple(g, xs, ef, reduce="max", impl=impl),),
                            "node"),
        "agg_weighted mean": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_weighted(g, xs, ef[:, 0], reduce="mean",
                                                                               impl=impl),), "node"),
        "agg_concat": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_concat(g, xs, x_dst=xd, edge_feat=ef, reduce="mean",
                                                                       impl=impl),), "node"),
        "mha_gat": t(lambda g, xs, xd, ef, w, impl: jgo.mha_gat(g, xs, w["a3"], x_dst=xd, num_heads=H, edge_feat=ef,
                                                                return_attention=True, impl=impl), "node", "edge"),
        "mha_gat_v2": t(lambda g, xs, xd, ef, w, impl: jgo.mha_gat_v2(g, xs, xd, w["a1"], num_heads=H, edge_feat=ef,
                                                                      return_attention=True, impl=impl),
                        "node", "edge"),
        "mha_simple": t(lambda g, xs, xd, ef, w, impl: jgo.mha_simple(g, xd, xs, xs, num_heads=H, edge_feat=ef,
                                                                      return_attention=True, impl=impl),
                        "node", "edge"),
        "gno_conv": t(lambda g, xs, xd, ef, w, impl: (jgo.gno_conv(g, xs, ef[:, :2], w["U"], w["b_u"], w["V"],
                                                                   w["b_v"], edge_weight=ef[:, 2], reduce="mean",
                                                                   impl=impl),), "node"),
        "agg_hg_basis": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_hg_basis(g, xs, _fit(types, g.n_edges), w["comp"],
                                                                           n_edge_types=3, norm_by_dst_degree=True,
                                                                           impl=impl),), "node"),
        "update_efeat": t(lambda g, xs, xd, ef, w, impl: (jgo.update_efeat(g, ef, xs, xd, impl=impl),), "edge"),
        "agg_dmpnn": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_dmpnn(g, ef, _fit(rev, g.n_edges, -1), impl=impl),),
                       "edge"),
        "edge_vectors": t(lambda g, xs, xd, ef, w, impl: (jgo.edge_vectors(g, xs[:, :3], xd[:, :3]),),
                          "edge"),
    }


def _fit(a, n, fill=0):
    """An edge array of the real graph extended to ``n`` edges (padding entries ``fill``)."""
    return jnp.asarray(np.concatenate([a, np.full(n - len(a), fill, a.dtype)]))


def _case(seed, square=True):
    rng = np.random.default_rng(seed)
    g = random_graph(rng, 7, 7 if square else 5, 30)
    ps, pd, pe = (int(v) for v in rng.integers(1, 6, 3))
    pd = ps if square else pd
    padded = jgo.pad(g, g.n_src + ps, g.n_dst + pd, g.n_edges + pe)
    # features away from 0 (the divisors of u_div_e and gsddmm's div)
    xs, xd, ef = (_away_from_zero(rng, (n, F)) for n in (g.n_src, g.n_dst, g.n_edges))
    if square:
        xd = xs
    real = (xs, xd, ef)
    return rng, g, padded, real, _with_padding_rows(rng, g, padded, real, None, square)


def _away_from_zero(rng, shape):
    return (rng.choice([-1, 1], shape) * (0.5 + np.abs(rng.normal(size=shape)))).astype(np.float32)


def _with_padding_rows(rng, g, padded, real, fill, square=True):
    """``real = (xs, xd, ef)`` extended to ``padded``'s rows, the padding rows ``fill`` (0.0, NaN, inf; None: a
    mix of 1e30, +-inf, NaN and 3)."""
    def extend(x, n):
        if fill is None:
            return _padded_rows(rng, x, n, F)
        return np.concatenate([x, np.full((n - x.shape[0],) + x.shape[1:], fill, x.dtype)])

    xs, xd, ef = extend(real[0], padded.n_src), extend(real[1], padded.n_dst), extend(real[2], padded.n_edges)
    return (xs, xs if square else xd, ef)


def _check_outputs(name, kinds, got, want, g, padded):
    for k, (kind, a, b) in enumerate(zip(kinds, got, want)):
        n_real = g.n_dst if kind == "node" else g.n_edges
        np.testing.assert_allclose(a[:n_real], b, rtol=2e-5, atol=2e-5, err_msg=f"{name} output {k}")
        if kind == "edge":
            np.testing.assert_array_equal(a[n_real:], 0, err_msg=f"{name} output {k} at the padding edges")
        elif name != "agg_concat":  # agg_concat's x_dst block copies the padding rows
            np.testing.assert_array_equal(a[n_real:], 0, err_msg=f"{name} output {k} at the padding nodes")


@pytest.mark.parametrize("impl", [None, "xla"])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_op_on_a_padded_graph_equals_the_graph_itself(seed, impl):
    rng, g, padded, real, pad = _case(seed)
    w = _weights(rng, g)
    for name, (fn, kinds) in _families(rng, g).items():
        want = [np.asarray(o) for o in fn(g, *real, w, impl)]
        got = [np.asarray(o) for o in jax.jit(fn, static_argnums=5)(padded, *pad, w, impl)]
        _check_outputs(name, kinds, got, want, g, padded)


@pytest.mark.parametrize("impl", [None, "xla"])
def test_gradients_on_a_padded_graph(impl):
    """Every input's gradient and every weight's: the unpadded one on the real rows and for the weights, exactly 0
    on every padding row, whatever the padding rows hold: 0 (what ``pad_nodes``/``pad_edges`` write, the divisor
    of ``u_div_e`` and gsddmm's ``div``), NaN, inf, a mix. Issue 34's case: ``e = ef @ W`` with zero padding rows
    got a NaN ``dL/dW`` through ``u_div_e`` and a ``v``-target ``div``; gsddmm's ``add``/``sub`` passed a padding
    edge's cotangent back to it."""
    rng, g, padded, real, _ = _case(2)
    weights = _weights(rng, g)
    for name, (fn, kinds) in _families(rng, g).items():
        cot = [rng.normal(size=(o.shape[0] if kind == "edge" else g.n_dst,) + o.shape[1:]).astype(np.float32)
               for o, kind in zip(fn(g, *real, weights, impl), kinds)]

        def loss(gr, xs, xd, ef, w, cots):
            outs = fn(gr, xs, xd, ef, w, impl)
            return sum(jnp.sum(o[: c.shape[0]] * c) for o, c in zip(outs, cots))

        want = jax.grad(loss, (1, 2, 3, 4))(g, *real, weights, cot)
        padded_grad = jax.jit(jax.grad(loss, (1, 2, 3, 4)))
        for fill in (0.0, np.nan, np.inf, None):
            got = padded_grad(padded, *_with_padding_rows(rng, g, padded, real, fill), weights, cot)
            where = f"{name}, padding rows {fill if fill is not None else 'mixed'}"
            for k, (a, b, n) in enumerate(zip(got[:3], want[:3], (g.n_src, g.n_dst, g.n_edges))):
                np.testing.assert_allclose(a[:n], b, rtol=2e-4, atol=2e-5, err_msg=f"{where}: gradient {k}")
                np.testing.assert_array_equal(a[n:], 0, err_msg=f"{where}: gradient {k} at the padding rows")
            for key in weights:
                np.testing.assert_allclose(got[3][key], want[3][key], rtol=2e-4, atol=2e-5,
                                           err_msg=f"{where}: gradient of {key}")


def test_vmap_and_the_bipartite_case():
    rng, g, padded, real, pad = _case(3, square=False)
    xs, xd, ef = real
    pxs, pxd, pef = pad
    f = lambda gr, x, e: jgo.gspmm(gr, x, e[:, 0], op="u_mul_e", reduce="sum")  # noqa: E731
    got = jax.jit(jax.vmap(f, (None, 0, None)))(padded, np.stack([pxs, 2 * pxs]), pef)
    want = jax.vmap(f, (None, 0, None))(g, np.stack([xs, 2 * xs]), ef)
    np.testing.assert_allclose(got[:, : g.n_dst], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[:, g.n_dst:], 0)
    att = jax.jit(lambda gr, s, d: jgo.mha_gat_v2(gr, s, d, jnp.ones(F) / 4, num_heads=H))
    np.testing.assert_allclose(att(padded, pxs, pxd)[: g.n_dst], att(g, xs, xd), rtol=1e-5, atol=1e-6)


def test_padded_batches_share_a_compilation_and_match_the_unpadded_batch():
    """A stream of batches of different real sizes padded to one size: one compilation, each batch's GAT
    layer and readout equal to the unpadded batch's (the real sizes travel in the graph's arrays)."""
    rng = np.random.default_rng(4)
    traces = []

    @jax.jit
    def step(bg, x, w):
        traces.append(1)
        h = jgo.mha_gat(bg.graph, x, w, num_heads=1)
        return bg.pool(jnp.tanh(h), reduce="sum"), jax.grad(lambda w: jnp.sum(jgo.mha_gat(bg.graph, x, w) ** 2))(w)

    w = jnp.asarray(rng.normal(size=2 * F), jnp.float32)
    for sizes in ([3, 5], [4, 2, 6], [7]):
        graphs = [jgo.Graph.from_edges(rng.integers(0, n, 2 * n), rng.integers(0, n, 2 * n), n) for n in sizes]
        bg = jgo.batch(graphs)
        x = rng.normal(size=(bg.graph.n_dst, F)).astype(np.float32)
        padded = jgo.pad_batch(bg, n_nodes=20, n_edges=40, n_graphs=4)
        assert int(padded.graph.csc_offsets[-1]) == bg.graph.n_edges
        readout, grad = step(padded, padded.pad_nodes(x), w)
        want_readout, want_grad = step.__wrapped__(bg, x, w)
        np.testing.assert_allclose(readout[: bg.n_graphs], want_readout, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(readout[bg.n_graphs:], 0)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)
    assert len(traces) == 1 + 3  # one compilation for the padded stream (the unpadded calls trace each time)


def test_padded_graph_validation_and_pad_of_a_padded_graph():
    rng = np.random.default_rng(5)
    g = random_graph(rng, 5, 5, 12)
    p = jgo.pad(jgo.pad(g, 7, 7, 15), 9, 8, 20)  # padding twice keeps every padding edge last
    assert int(p.csc_offsets[-1]) == int(p.csr_offsets[-1]) == 12
    np.testing.assert_array_equal(p.real_edge_mask(), np.arange(20) < 12)
    jgo._checks.check_graph("test", jgo.Graph(*p.tree_flatten()[0], 9, 8))  # valid
    x = rng.normal(size=(9, 3)).astype(np.float32)
    np.testing.assert_allclose(jgo.gspmm(p, x)[:5], jgo.gspmm(g, x[:5]), rtol=1e-6)
    arrays = list(p.tree_flatten()[0])
    swapped = arrays[4].at[14].set(15).at[15].set(14)  # two padding edges swapped in the CSC tail: still valid
    jgo.Graph(*arrays[:4], swapped, *arrays[5:], 9, 8)
    k = int(np.flatnonzero(np.asarray(arrays[4]) == 3)[0])
    arrays[4] = arrays[4].at[14].set(3).at[k].set(14)  # a real edge's id in the tail, a padding edge's in a row
    with pytest.raises(ValueError, match=r"padding edges must come last: the groupings end at 12 of 20 edges, so "
                                         r"g.csc_eid\[14:\] must hold the edge ids 12..19; g.csc_eid\[14\] = 3"):
        jgo.Graph(*arrays, 9, 8)
    arrays = list(p.tree_flatten()[0])
    arrays[5] = arrays[5].at[-1].set(13)  # the CSR ends elsewhere than the CSC
    with pytest.raises(ValueError, match=r"g.csr_offsets must start at 0, never decrease and end at n_edges=20 \(or"):
        jgo.Graph(*arrays, 9, 8)
    with pytest.raises(ValueError, match=r"batch: graphs\[0\] has padding edges"):
        jgo.batch([p, g])


def test_the_kernels_skip_the_padding():
    """The kernels' own checks accept a padded graph passed into jit (no Python check), and a padding edge's
    junk neighbour id, never read, is not an error."""
    rng = np.random.default_rng(6)
    g = random_graph(rng, 6, 6, 20)
    p = jgo.pad(g, 8, 8, 30)
    arrays = list(p.tree_flatten()[0])
    arrays[3] = arrays[3].at[25].set(99)  # csc_src of a padding edge: out of range, but in no row
    hand = jgo.Graph(*arrays, 8, 8, validate=False)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    out = jax.jit(lambda gr, x: jgo.gspmm(gr, x))(hand, x)
    np.testing.assert_allclose(out[:6], jgo.gspmm(g, x[:6]), rtol=1e-6)


@pytest.mark.parametrize("layer", ["GCNConv", "GATConv", "GATv2Conv"])
def test_layers_that_add_self_loops_on_a_padded_batch(layer):
    """GCN's ``add_self_loops`` keeps the padding edges last (valid graph, the loops real); GAT's and GATv2's
    PyG graph sends them into its dropped extra row: on a padded batch the layers give the unpadded batch's
    values and gradients on the real nodes (found by the fuzzer: a padded graph broke both groupings)."""
    nn = pytest.importorskip("jaxgraphops.nn.flax", reason="the layers need flax")
    rng = np.random.default_rng(7)
    parts = [random_graph(rng, n, n, 2 * n) for n in (4, 6)]
    bg = jgo.batch(parts)
    padded = jgo.pad_batch(bg, 14, 24, 3)
    loops = jgo.nn.add_self_loops(padded.graph)
    jgo._checks.check_graph("test", jgo.Graph(*map(np.asarray, loops.tree_flatten()[0]), 14, 14))  # valid
    assert int(loops.csc_offsets[-1]) == bg.graph.n_edges + 14  # padding edges still last, loops real
    module = {"GCNConv": lambda: nn.GCNConv(3), "GATConv": lambda: nn.GATConv(3, heads=2),
              "GATv2Conv": lambda: nn.GATv2Conv(3, heads=2)}[layer]()
    x = rng.normal(size=(10, 5)).astype(np.float32)
    xp = _padded_rows(rng, x, 14, 5)
    xp[10:] = 0.0  # the layers' linear maps mix features: keep the padding rows finite for the gradient check
    variables = module.init(jax.random.key(0), bg.graph, x)

    def loss(graph, x, rows):
        return jnp.sum(module.apply(variables, graph, x)[:rows] ** 2)

    np.testing.assert_allclose(module.apply(variables, padded.graph, xp)[:10], module.apply(variables, bg.graph, x),
                               rtol=1e-5, atol=1e-6)
    grad = jax.jit(jax.grad(loss, argnums=1), static_argnums=2)
    np.testing.assert_allclose(grad(padded.graph, xp, 10)[:10], grad(bg.graph, x, 10), rtol=1e-4, atol=1e-6)


def test_gcn_norm_of_a_padded_graph():
    """gcn_norm's weights follow add_self_loops' order (loops before the padding edges): on the real edges and
    loops they equal the unpadded graph's, with and without edge weights."""
    rng = np.random.default_rng(8)
    g = random_graph(rng, 6, 6, 14)
    p = jgo.pad(g, 8, 8, 20)
    w = rng.uniform(0.5, 2, 14).astype(np.float32)
    wp = _padded_rows(rng, w[:, None], 20, 1)[:, 0]
    for args in ((None, None), (w, wp)):
        g_hat, w_hat = jgo.nn.gcn_norm(g, args[0])
        p_hat, pw_hat = jgo.nn.gcn_norm(p, args[1])
        real = np.asarray(p_hat.real_edge_mask())
        assert real.sum() == 14 + 8
        np.testing.assert_array_equal(np.asarray(p_hat.src)[:20], np.r_[np.asarray(g_hat.src)[:14], np.arange(6)])
        np.testing.assert_allclose(np.asarray(pw_hat)[:20], np.asarray(w_hat), rtol=1e-6)
        x = rng.normal(size=(8, 3)).astype(np.float32)
        np.testing.assert_allclose(jgo.agg_weighted(p_hat, x, pw_hat)[:6], jgo.agg_weighted(g_hat, x[:6], w_hat),
                                   rtol=1e-5, atol=1e-6)
