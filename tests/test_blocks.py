"""A sampled block is its sampled subgraph (issue 34): every op (the padding variants of the op registry) and every
layer (``op_db.LAYERS`` marked for blocks, in linen, NNX and Equinox) on ``sample_neighbors``' block equals the same
op or layer on the graph of the sampled edges alone, values and gradients (of the features and of every weight),
through the kernels (CPU; the emulated CUDA kernels under ``JGO_KERNELS=cuda-emulation``) and the pure-JAX reference.

The oracle is the op on ``Graph.from_edges(src[:R], dst[:R])``, the block's ``R`` real edges with the same nodes:
a graph without padding, whose unread rows (the block's padding sources) hold zeros. The block's padding rows hold
NaN, infinities and huge values for the ops (the layers' dense projections mix rows, so there they hold finite
junk: what padding rows must hold for a layer is the layers' concern). The graph is skewed (most seeds have fewer
in-edges than the fanout, as in the issue's 2,000-node probe: a mean divided by the fanout, a softmax putting most
of its mass on empty slots, a max seeing a zero row).
"""

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from padding_ops import F, families, output_shapes, outputs_and_gradients, weights

import jaxgraphops as jgo

FANOUT = 4


def _block(seed):
    """``(rng, block, sub)``: a block of 12 seeds (one a padding seed) of a skewed graph, and its real edges alone."""
    rng = np.random.default_rng(seed)
    n, E = 300, 420
    dst = np.minimum(rng.zipf(1.6, E), n) - 1  # most nodes receive 0 or 1 edges, a few more than the fanout
    g = jgo.Graph.from_edges(rng.integers(0, n, E), dst, n, n)
    seeds = np.concatenate([rng.permutation(40)[:11], [-1]])
    b = jgo.sample_neighbors(jax.random.key(seed), g, seeds, FANOUT)
    real = int(b.graph.csc_offsets[-1])
    assert 0 < real < b.graph.n_edges * 3 / 4 and np.asarray(b.graph.in_degrees()).max() == FANOUT
    sub = jgo.Graph.from_edges(np.asarray(b.graph.src)[:real], np.asarray(b.graph.dst)[:real], b.graph.n_src,
                               b.graph.n_dst)
    return rng, b, sub


def _features(rng, b, junk):
    """``(block inputs, subgraph inputs)``, each ``(xs, xd, ef)``: real rows away from 0 (divisors), the block's
    padding rows ``junk(shape)``, the subgraph's unread rows 0."""
    S, real = b.graph.n_dst, int(b.graph.csc_offsets[-1])
    node_mask = np.asarray(b.node_mask)
    xs = (rng.choice([-1, 1], (b.graph.n_src, F)) * (0.5 + np.abs(rng.normal(size=(b.graph.n_src, F))))).astype(
        np.float32)
    ef = (rng.choice([-1, 1], (real, F)) * (0.5 + np.abs(rng.normal(size=(real, F))))).astype(np.float32)
    sub = (np.where(node_mask[:, None], xs, 0), np.where(node_mask[:S, None], xs[:S], 0), ef)
    pad_xs = np.where(node_mask[:, None], xs, junk(xs.shape)).astype(np.float32)
    block = (pad_xs, pad_xs[:S], np.concatenate([ef, junk((b.graph.n_edges - real, F))]).astype(np.float32))
    return block, sub


def _nonfinite_junk(rng):
    return lambda shape: rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, 1e30]), shape)


@pytest.mark.parametrize("impl", [None, "xla"])
def test_every_op_on_a_block_equals_the_sampled_subgraph(impl):
    """Outputs (0 at the padding edges), the gradients of the features (exactly 0 at the padding edges and sources)
    and of every weight; the cotangents at the padding edges are junk, which must reach nothing. The rows of the
    padding seed are not compared (a padding seed is no node: ``agg_concat`` copies its junk ``x_dst`` row)."""
    rng, b, sub = _block(0)
    real, seeds = int(b.graph.csc_offsets[-1]), np.asarray(b.input_nodes)[: b.graph.n_dst] >= 0
    block_in, sub_in = _features(rng, b, _nonfinite_junk(rng))
    w = weights(rng)
    ops = families(rng, b.graph)
    cots = {name: [rng.normal(size=s).astype(np.float32) for s in shapes]
            for name, shapes in output_shapes(ops, impl, sub, *sub_in, w).items()}
    block_cots = {name: [np.concatenate([c, 1e3 * rng.normal(size=(s[0] - c.shape[0],) + s[1:])]).astype(np.float32)
                         for c, s in zip(cots[name], shapes)]
                  for name, shapes in output_shapes(ops, impl, b.graph, *block_in, w).items()}
    got = outputs_and_gradients(ops, impl)(b.graph, *block_in, w, block_cots)
    want = outputs_and_gradients(ops, impl)(sub, *sub_in, w, cots)
    for name, (_, kinds) in ops.items():
        for k, (a, c, kind) in enumerate(zip(got[name][0], want[name][0], kinds)):
            a, c = np.asarray(a), np.asarray(c)
            if kind == "edge":
                np.testing.assert_array_equal(a[real:], 0, err_msg=f"{name} output {k} at the padding edges")
                a = a[:real]
            else:
                a, c = a[seeds], c[seeds]
            np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5, err_msg=f"{name} output {k}")
        (d_xs, d_xd, d_ef, d_w), (want_xs, want_xd, want_ef, want_w) = got[name][1], want[name][1]
        np.testing.assert_allclose(d_xs, want_xs, rtol=2e-4, atol=2e-5, err_msg=f"{name}: gradient of xs")
        np.testing.assert_array_equal(np.asarray(d_xs)[~np.asarray(b.node_mask)], 0, err_msg=f"{name}: xs padding")
        np.testing.assert_allclose(d_xd[seeds], want_xd[seeds], rtol=2e-4, atol=2e-5, err_msg=f"{name}: xd")
        np.testing.assert_array_equal(d_ef[real:], 0, err_msg=f"{name}: gradient at the padding edges")
        np.testing.assert_allclose(d_ef[:real], want_ef, rtol=2e-4, atol=2e-5, err_msg=f"{name}: gradient of ef")
        for key in w:
            np.testing.assert_allclose(d_w[key], want_w[key], rtol=2e-4, atol=2e-5,
                                       err_msg=f"{name}: gradient of {key}")


@dataclasses.dataclass(frozen=True)
class Layer:
    """A layer that runs on blocks, as every framework builds it: ``cls`` built from ``in_features`` (NNX and
    Equinox only), the ``sizes`` (Equinox and NNX also ``coord_dim``, which linen infers) and the ``options``, or
    from an MLP ``mlp = (in, out)`` (GIN, GINE, EdgeConv: NNX and Equinox also get ``in_features`` and the rngs/key
    where an ``edge_dim`` maps the edges); ``args(graph, xs, xd, ef, types)``: the call's arguments after the graph."""
    cls: str
    sizes: tuple = ()
    options: dict = dataclasses.field(default_factory=dict)
    args: Callable = lambda gr, xs, xd, ef, types: ((xs, xd),)
    in_features: object = (F, F)
    coord_dim: int | None = None
    mlp: tuple[int, int] | None = None


def _with_edges(gr, xs, xd, ef, types):
    return (xs, xd), ef


# the layers that run on blocks (bipartite pairs), as mini-batch training runs them (PyG's NeighborLoader)
LAYERS = {
    "SAGEConv mean": Layer("SAGEConv", (6,), {"aggr": "mean"}),
    "SAGEConv max": Layer("SAGEConv", (6,), {"aggr": "max"}),
    "GATConv": Layer("GATConv", (3,), {"heads": 2}),
    "GATConv edge_dim": Layer("GATConv", (3,), {"heads": 2, "edge_dim": F}, _with_edges),
    "GATv2Conv": Layer("GATv2Conv", (3,), {"heads": 2}),
    "TransformerConv": Layer("TransformerConv", (3,), {"heads": 2, "edge_dim": F}, _with_edges),
    "GraphConv": Layer("GraphConv", (6,), {"add_self_loops": False}, lambda gr, xs, xd, ef, types: (xs,),
                       in_features=F),  # norm="both": the sources' out-degrees count real edges only
    "GINConv": Layer("GINConv", options={"train_eps": True}, mlp=(F, 6)),
    "GINEConv": Layer("GINEConv", options={"edge_dim": F}, args=_with_edges, mlp=(F, 6)),
    "EdgeConv": Layer("EdgeConv", options={"aggr": "mean"}, mlp=(2 * F, 6)),
    "RGCNConv": Layer("RGCNConv", (6, 3), {"num_bases": 2},
                      lambda gr, xs, xd, ef, types: ((xs, xd), jnp.asarray(types[: gr.n_edges]))),
    "GNOBlock": Layer("GNOBlock", (3,), {"kernel_width": 4, "skip": True},
                      lambda gr, xs, xd, ef, types: (xs, ef[:, :2], xd), in_features=F, coord_dim=2),
}


def _build(framework, layer, gr, inputs):
    """``(params, apply(params, graph, *args))`` of ``layer`` in ``framework`` (``flax``: linen), its parameters
    initialised on ``gr`` with ``inputs`` (the call's arguments after the graph)."""
    nn = pytest.importorskip(f"jaxgraphops.nn.{framework}", reason=f"the layers need {framework}")
    cls, kw = getattr(nn, layer.cls), dict(layer.options)
    if framework == "flax":
        import flax.linen
        m = cls(flax.linen.Dense(layer.mlp[1]), **kw) if layer.mlp else cls(*layer.sizes, **kw)
        return m.init(jax.random.key(0), gr, *inputs), m.apply
    sizes = (layer.in_features, *layer.sizes, *([layer.coord_dim] if layer.coord_dim else []))
    if framework == "nnx":
        from flax import nnx
        rngs = nnx.Rngs(0)
        if layer.mlp:
            if "edge_dim" in kw:
                kw.update(in_features=F, rngs=rngs)
            m = cls(nnx.Linear(*layer.mlp, rngs=rngs), **kw)
        else:
            m = cls(*sizes, **kw, rngs=rngs)
        graphdef, params, rest = nnx.split(m, nnx.Param, ...)
        return params, lambda p, gr, *a: nnx.merge(graphdef, p, rest)(gr, *a)
    import equinox as eqx
    key, mlp_key = jax.random.split(jax.random.key(0))
    if layer.mlp:
        if "edge_dim" in kw:
            kw.update(in_features=F, key=key)
        m = cls(eqx.nn.Linear(*layer.mlp, key=mlp_key), **kw)
    else:
        m = cls(*sizes, **kw, key=key)
    params, static = eqx.partition(m, eqx.is_inexact_array)
    return params, lambda p, gr, *a: eqx.combine(p, static)(gr, *a)


@pytest.mark.parametrize("framework", ["flax", "nnx", "equinox"])
def test_every_layer_on_a_block_equals_the_sampled_subgraph(framework):
    """The layers of :data:`LAYERS` (linen, NNX or Equinox) on a block, with finite junk in the padding rows,
    against the same parameters on the subgraph: outputs at the real seeds (a padding seed's row holds its junk
    root term), the gradients of the inputs (0 at the padding sources and edges) and of every parameter. All layers
    in one ``jit`` per graph."""
    rng, b, sub = _block(2)
    real, seeds = int(b.graph.csc_offsets[-1]), np.asarray(b.input_nodes)[: b.graph.n_dst] >= 0
    block_in, sub_in = _features(rng, b, lambda shape: 1e3 * rng.normal(size=shape))
    types = rng.integers(0, 3, b.graph.n_edges)
    built = {name: _build(framework, layer, sub, layer.args(sub, *sub_in, types)) for name, layer in LAYERS.items()}
    params = {name: p for name, (p, _) in built.items()}

    @jax.jit
    def run(params, gr, xs, xd, ef):
        result = {}
        for name, layer in LAYERS.items():
            def loss(p, xs, xd, ef, apply=built[name][1], args=layer.args):
                out = apply(p, gr, *args(gr, xs, xd, ef, types))[seeds]
                return jnp.sum(jnp.tanh(out) ** 2), out
            result[name] = jax.grad(loss, (0, 1, 2, 3), has_aux=True)(params[name], xs, xd, ef)
        return result

    got, want = run(params, b.graph, *block_in), run(params, sub, *sub_in)
    node_mask = np.asarray(b.node_mask)
    for name in LAYERS:
        (d_p, d_xs, d_xd, d_ef), out = got[name]
        (want_p, want_xs, want_xd, want_ef), want_out = want[name]
        assert any(np.any(np.asarray(leaf) != 0) for leaf in jax.tree.leaves(d_p)), f"{name}: no parameter gradient"
        np.testing.assert_allclose(out, want_out, rtol=2e-5, atol=2e-5, err_msg=name)
        jax.tree.map(lambda a, c: np.testing.assert_allclose(a, c, rtol=2e-4, atol=2e-5, err_msg=f"{name}: params"),
                     d_p, want_p)
        np.testing.assert_allclose(d_xs[node_mask], want_xs[node_mask], rtol=2e-4, atol=2e-5, err_msg=name)
        np.testing.assert_array_equal(d_xs[~node_mask], 0, err_msg=f"{name}: gradient at the padding sources")
        np.testing.assert_allclose(d_xd, want_xd, rtol=2e-4, atol=2e-5, err_msg=name)
        np.testing.assert_allclose(d_ef[:real], want_ef, rtol=2e-4, atol=2e-5, err_msg=name)
        np.testing.assert_array_equal(d_ef[real:], 0, err_msg=f"{name}: gradient at the padding edges")


def test_two_hop_graphsage_mean_on_blocks_needs_no_masking():
    """The sampling guide's model: two SAGE-mean hops on ``sample_blocks`` with the features gathered at the input
    nodes as they are (no mask, no division by hand) equal the same hops on the sampled subgraphs."""
    rng = np.random.default_rng(3)
    n, E = 500, 900
    g = jgo.Graph.from_edges(rng.integers(0, n, E), np.minimum(rng.zipf(1.6, E), n) - 1, n, n)
    x = rng.normal(size=(n, F)).astype(np.float32)
    w1, w2 = (jnp.asarray(rng.normal(size=(2 * F, F)), jnp.float32) for _ in range(2))
    blocks = jax.jit(lambda k, s: jgo.sample_blocks(k, g, s, [3, 5]))(jax.random.key(0), jnp.arange(16))

    def sage(gr, h, w):
        return jnp.concatenate([jgo.gspmm(gr, h, reduce="mean"), h[: gr.n_dst]], 1) @ w

    def model(graphs, h):
        return sage(graphs[1], jax.nn.relu(sage(graphs[0], h, w1)), w2)

    subs = []
    for b in blocks:
        real = int(b.graph.csc_offsets[-1])
        subs.append(jgo.Graph.from_edges(np.asarray(b.graph.src)[:real], np.asarray(b.graph.dst)[:real],
                                         b.graph.n_src, b.graph.n_dst))
    inputs = np.asarray(blocks[0].input_nodes)
    h = x[inputs]  # padding rows read x[-1]: junk, unread
    want = model(subs, np.where((inputs >= 0)[:, None], h, 0))
    np.testing.assert_allclose(jax.jit(model)([b.graph for b in blocks], h), want, rtol=1e-5, atol=1e-5)
