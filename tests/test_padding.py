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
from padding_ops import F, H, families, output_shapes, outputs_and_gradients, weights

import jaxgraphops as jgo


def _padded_rows(rng, real, n, width):
    """``real [r, width]`` followed by ``n - r`` rows of junk: huge values, infinities and NaN."""
    junk = rng.choice(np.array([1e30, -np.inf, np.inf, np.nan, 3.0]), size=(n - real.shape[0],) + real.shape[1:])
    return np.concatenate([real, junk]).astype(real.dtype)


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
        elif not name.startswith("agg_concat"):  # agg_concat's x_dst block copies the padding rows
            np.testing.assert_array_equal(a[n_real:], 0, err_msg=f"{name} output {k} at the padding nodes")


@pytest.mark.parametrize("impl", [None, "xla"])
def test_every_op_on_a_padded_graph_equals_the_graph_itself(impl):
    """Every op's outputs, the gradients of its features and of every weight it takes: the unpadded graph's on the
    real rows and for the weights, an empty neighbourhood's at the padding nodes, 0 at the padding edges, exactly
    0 gradients at every padding row, whatever the padding rows hold: 0 (what ``pad_nodes``/``pad_edges`` write,
    the divisor of ``u_div_e`` and gsddmm's ``div``), NaN, inf, a mix; and whatever cotangent reaches the padding
    rows of the outputs. Issue 34's cases: ``e = ef @ W`` with zero padding rows got a NaN ``dL/dW`` through
    ``u_div_e`` (every reduction) and a ``v``-target ``div``; gsddmm's ``add``/``sub`` passed a padding edge's
    cotangent back to it; NaN padding rows made ``mha_gat``'s attention vector's and ``gno_conv``'s ``V``'s
    gradients NaN; ``impl="xla"`` raised outside ``jit`` (mha_gat, mha_gat_v2, mha_simple, agg_concat)."""
    rng, g, padded, real, _ = _case(0)
    w = weights(rng)
    ops = families(rng, g)
    cots = {name: [rng.normal(size=s).astype(np.float32) for s in shapes]
            for name, shapes in output_shapes(ops, impl, g, *real, w).items()}
    want = outputs_and_gradients(ops, impl)(g, *real, w, cots)
    # the cotangents of the padding rows of the outputs: finite junk, which must reach nothing
    padded_cots = {name: [np.concatenate([c, 1e3 * rng.normal(size=(s[0] - c.shape[0],) + s[1:])]).astype(np.float32)
                          for c, s in zip(cots[name], shapes)]
                   for name, shapes in output_shapes(ops, impl, padded, *_with_padding_rows(rng, g, padded, real, 0.0),
                                                     w).items()}
    run = outputs_and_gradients(ops, impl)
    for fill in (0.0, np.nan, np.inf, None):
        got = run(padded, *_with_padding_rows(rng, g, padded, real, fill), w, padded_cots)
        for name, (_, kinds) in ops.items():
            where = f"{name}, padding rows {fill if fill is not None else 'mixed'}"
            _check_outputs(where, kinds, got[name][0], want[name][0], g, padded)
            (grads, w_grad), (want_grads, want_w) = (got[name][1][:3], got[name][1][3]), (want[name][1][:3],
                                                                                           want[name][1][3])
            for k, (a, b, n) in enumerate(zip(grads, want_grads, (g.n_src, g.n_dst, g.n_edges))):
                np.testing.assert_allclose(a[:n], b, rtol=2e-4, atol=2e-5, err_msg=f"{where}: gradient {k}")
                # agg_concat copies x_dst into its output: a padding node's row gets that block's cotangent
                tail = padded_cots[name][0][n:, -F:] if (name, k) == ("agg_concat", 1) else 0
                np.testing.assert_array_equal(a[n:], tail, err_msg=f"{where}: gradient {k} at the padding rows")
            for key in w:
                np.testing.assert_allclose(w_grad[key], want_w[key], rtol=2e-4, atol=2e-5,
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
    jgo.graph.check_graph("test", jgo.Graph(*p.tree_flatten()[0], 9, 8))  # valid
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
    jgo.graph.check_graph("test", jgo.Graph(*map(np.asarray, loops.tree_flatten()[0]), 14, 14))  # valid
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


def test_gat_self_loops_on_a_padded_bipartite_graph():
    """The GAT layers' ``add_self_loops`` on a bipartite graph adds ``i -> i`` for ``i < min(n_src, n_dst)`` of the
    graph it is given (PyG's rule, by position): padding a graph with fewer sources than destinations gives the real
    destination ``n_src`` a loop from the first padding source (docs/semantics.md, "Padding"; the long fuzz's seeds
    28361-28368). The documented way out is exact: the loops in the edge list before padding, and
    ``add_self_loops=False``."""
    nn = pytest.importorskip("jaxgraphops.nn.flax", reason="the layers need flax")
    rng = np.random.default_rng(9)
    src, dst = rng.integers(0, 4, 9), rng.integers(0, 6, 9)
    src, dst = src[src != dst], dst[src != dst]  # PyG removes a graph's own loops: none here, to keep the edges
    g = jgo.Graph.from_edges(src, dst, 4, 6)
    x_src, x_dst = (rng.normal(size=(n, 3)).astype(np.float32) for n in (4, 6))
    pad_src = lambda junk: np.concatenate([x_src, junk * np.ones((1, 3), np.float32)])  # noqa: E731
    pad_dst = np.concatenate([x_dst, np.zeros((1, 3), np.float32)])
    with_loops, without = nn.GATConv(2, heads=2), nn.GATConv(2, heads=2, add_self_loops=False)
    variables = with_loops.init(jax.random.key(0), g, (x_src, x_dst))
    want = np.asarray(with_loops.apply(variables, g, (x_src, x_dst)))

    padded = jgo.pad(g, 5, 7, g.n_edges + 2)
    first, second = (np.asarray(with_loops.apply(variables, padded, (pad_src(j), pad_dst)))[:6] for j in (-7, 5))
    np.testing.assert_allclose(first[:4], want[:4], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(first[5:], want[5:], rtol=1e-5, atol=1e-6)
    assert np.abs(first[4] - second[4]).max() > 1e-3  # destination 4 reads padding source 4 through its loop

    loops = np.arange(4)
    built = jgo.pad(jgo.Graph.from_edges(np.r_[src, loops], np.r_[dst, loops], 4, 6), 5, 7, g.n_edges + 6)
    for junk in (-7, 5):
        got = np.asarray(without.apply(variables, built, (pad_src(junk), pad_dst)))[:6]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


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


def test_the_reference_on_a_padded_graph_outside_jit():
    """Issue 34: ``impl="xla"`` outside ``jit`` raised ``reference.edge_softmax: g.src[2] = 3 is out of range`` for
    the attention ops and ``agg_concat`` with ``edge_weight`` on any padded graph (an id the user never wrote); it
    equals the kernels, eagerly as under ``jit``."""
    rng, g, padded, real, pad = _case(4)
    w = weights(rng)
    ew = np.abs(pad[2][:, 0]) + 0.5
    for name, call in {
        "mha_gat": lambda impl: jgo.mha_gat(padded, pad[0], w["a3"], num_heads=H, edge_feat=pad[2], impl=impl),
        "mha_gat_v2": lambda impl: jgo.mha_gat_v2(padded, pad[0], pad[1], w["a1"], num_heads=H, impl=impl),
        "mha_simple": lambda impl: jgo.mha_simple(padded, pad[1], pad[0], pad[0], num_heads=H, impl=impl),
        "agg_concat": lambda impl: jgo.agg_concat(padded, pad[0], edge_weight=ew, edge_feat=pad[2], impl=impl),
    }.items():
        np.testing.assert_allclose(call("xla"), call(None), rtol=2e-5, atol=2e-5, err_msg=name)


def test_hg_basis_reference_edge_types_out_of_range_under_jit():
    """Issue 34: under ``jit`` the reference put an edge whose type is outside ``[0, R)`` into a neighbouring
    destination's block (``dst * R + type``), and with ``norm_by_dst_degree`` gave NaN gradients of ``comp`` on a
    padded graph. Such an edge now adds nothing, as on the CUDA kernels (the CPU kernels raise)."""
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 0]), np.array([1, 1, 0, 2]), 3)
    x = jnp.arange(6.0).reshape(3, 2)
    types = jnp.array([0, 3, 1, -1])  # edges 1 and 3 out of range [0, 2)
    ref = jax.jit(lambda t: jgo.agg_hg_basis(g, x, t, n_edge_types=2, impl="xla"))(types)
    sub = jgo.Graph.from_edges(np.array([0, 2]), np.array([1, 0]), 3)  # the two edges of valid type
    np.testing.assert_array_equal(ref, jgo.agg_hg_basis(sub, x, np.array([0, 1]), n_edge_types=2, impl="xla"))
    with pytest.raises(ValueError, match=r"agg_hg_basis: edge_types\[1\] = 3 is out of range \[0, n_edge_types=2\)"):
        jgo.agg_hg_basis(g, x, types, n_edge_types=2)


def test_padding_edges_types_are_not_read():
    """A padding edge's ``edge_types`` entry, like its ``rev_edge_ids`` entry, is never read: junk there (out of
    range) is no error, eagerly or under ``jit``, and changes nothing."""
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 0]), np.array([1, 1, 0, 2]), 3)
    p = jgo.pad(g, 4, 4, 7)
    x = jnp.arange(8.0).reshape(4, 2)
    types = np.array([0, 1, 1, 0, -7, 99, 2])
    comp = jnp.array([[1.0, 0.5], [-1.0, 2.0]])
    for impl in (None, "xla"):
        for call in (lambda p, t, impl=impl: jgo.agg_hg_basis(p, x, t, comp, n_edge_types=2, impl=impl),
                     jax.jit(lambda p, t, impl=impl: jgo.agg_hg_basis(p, x, t, comp, n_edge_types=2, impl=impl))):
            out = call(p, types)
            np.testing.assert_allclose(out[:3], jgo.agg_hg_basis(g, x[:3], types[:4], comp, n_edge_types=2,
                                                                 impl="xla"), rtol=1e-6)
            np.testing.assert_array_equal(out[3:], 0)


def test_rev_edge_ids_naming_a_padding_edge_is_an_error():
    """Issue 34: a real edge whose ``rev_edge_ids`` entry names a padding edge passed the involution check (the
    padding edge naming it back) and the kernels subtracted the padding row (-96 instead of 4). It is an error naming
    the edge: a ValueError eagerly, the CPU kernels' error under ``jit``; the CUDA kernels, which cannot raise, write
    NaN there (their policy for a malformed entry); the padding edges' own entries are not read."""
    g = jgo.Graph.from_edges(np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1]))  # bonds 0-1 (edges 0, 1), 1-2 (2, 3)
    p = jgo.pad(g, 4, 4, 6)
    h = jnp.concatenate([jnp.ones((4, 1)), jnp.full((2, 1), 100.0)])
    rev = jnp.array([1, 0, 4, -1, 2, -1])  # edge 2's reverse named as padding edge 4 (which names it back)
    with pytest.raises(ValueError, match=r"agg_dmpnn: rev_edge_ids\[2\] = 4 names a padding edge: the graph's edges "
                                         r"from 4 on are padding"):
        jgo.agg_dmpnn(p, h, rev)
    f = jax.jit(lambda p, h, r: jgo.agg_dmpnn(p, h, r))
    if jgo.kernel_platform() == "cpu":
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"INVALID_ARGUMENT: .*agg_dmpnn \(jgo_dmpnn_fwd\): "
                                                              r"rev_edge_ids\[2\] = 4 names a padding edge"):
            jax.block_until_ready(f(p, h, rev))
    else:
        out = np.asarray(f(p, h, rev))
        assert np.isnan(out[2]).all() and np.isfinite(np.delete(out, 2, axis=0)).all()
    # the padding edges' entries, whatever they hold, are not read: the unpadded graph's messages
    good = jnp.array([1, 0, 3, 2, 5, 0])
    want = jgo.agg_dmpnn(g, h[:4], good[:4])
    for impl in (None, "xla"):
        np.testing.assert_array_equal(jgo.agg_dmpnn(p, h, good, impl=impl)[:4], want)
        np.testing.assert_array_equal(f(p, h, good)[4:], 0)


@pytest.mark.parametrize("sizes, match", [
    ((4.0, 4, 5), r"pad: n_src must be an int, got float"),
    ((4, np.int64(4), "5"), r"pad: n_edges must be an int, got str"),
    ((4, -1, 5), r"pad: n_dst must be >= 0, got -1"),
])
def test_pad_sizes_must_be_ints(sizes, match):
    """Issue 34: ``pad(g, 4.0, ...)`` failed deep inside with an unclear error."""
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    with pytest.raises((TypeError, ValueError), match=match):
        jgo.pad(g, *sizes)
