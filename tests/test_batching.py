"""Tests of batches for jit (jaxgraphops/batching.py): batch, pad_batch, masks, pool under jit, jraph interop.

Oracles: hand-computed tables, NumPy loops over the graphs of a batch, fresh ``Graph.from_edges`` builds,
jraph's own ``batch``/``pad_with_graphs``/``get_*_padding_mask``, and, for the padded training step, the
same step on the unpadded batch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_graph import LEAVES, assert_same_graph

import jaxgraphops as jgo
from jaxgraphops import BatchedGraph, Graph, batch, pad, pad_batch


def assert_same_batch(a: BatchedGraph, b: BatchedGraph):
    assert a.n_graphs == b.n_graphs
    assert_same_graph(a.graph, b.graph)
    for name in ("src_graph_ids", "dst_graph_ids", "graph_mask"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), err_msg=name)


def edge_list(g: Graph):
    return list(zip(np.asarray(g.src).tolist(), np.asarray(g.dst).tolist()))


def three_graphs():
    a = Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))  # triangle
    b = Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 2)  # no edges
    c = Graph.from_edges(np.array([1, 0]), np.array([0, 0]), 3)  # node 2 isolated
    return a, b, c


def random_graphs(rng, sizes):
    """Graphs of ``sizes`` nodes with up to 2n random edges (self loops and duplicates included)."""
    graphs = []
    for n in sizes:
        m = int(rng.integers(0, 2 * n + 1))
        graphs.append(Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n))
    return graphs


def per_graph(x, sizes, reduce):
    """NumPy oracle of a readout: ``reduce`` over consecutive row blocks of ``sizes`` (0 for an empty block)."""
    out, start = [], 0
    for n in sizes:
        rows = np.asarray(x[start:start + n], np.float64)
        out.append(getattr(np, reduce)(rows, axis=0) if n else np.zeros(x.shape[1:]))
        start += n
    return np.stack(out)


@pytest.fixture
def jraph():
    return pytest.importorskip("jraph", reason="jraph (the interop peer) is not installed")


# -- batch ------------------------------------------------------------------------------


def test_batch():
    bg = batch(three_graphs())
    assert isinstance(bg, BatchedGraph) and bg.n_graphs == 3
    g = bg.graph
    assert (g.n_src, g.n_dst, g.n_edges) == (8, 8, 5)
    assert edge_list(g) == [(0, 1), (1, 2), (2, 0), (6, 5), (5, 5)]
    assert_same_graph(g, Graph.from_edges(g.src, g.dst, 8))  # groupings equal a fresh build
    np.testing.assert_array_equal(g.csc_offsets, [0, 1, 2, 3, 3, 3, 5, 5, 5])
    np.testing.assert_array_equal(g.csc_eid, [2, 0, 1, 3, 4])
    for ids in (bg.src_graph_ids, bg.dst_graph_ids):
        assert ids.dtype == jnp.int32
        np.testing.assert_array_equal(ids, [0, 0, 0, 1, 1, 2, 2, 2])
    assert bg.graph_mask.tolist() == [True] * 3
    assert bg.node_mask.tolist() == [True] * 8 and bg.edge_mask.tolist() == [True] * 5


def test_batch_bipartite_and_jit():
    a = Graph.from_edges(np.array([1, 0, 1]), np.array([2, 2, 0]), n_src=2, n_dst=3)
    b = Graph.from_edges(np.array([0, 0]), np.array([1, 0]), n_src=1, n_dst=2)
    bg = jax.jit(batch)([a, b, a])  # the whole BatchedGraph comes out of jit: n_graphs is static
    expected = Graph.from_edges(np.array([1, 0, 1, 2, 2, 4, 3, 4]), np.array([2, 2, 0, 4, 3, 7, 7, 5]), 5, 8)
    assert_same_graph(bg.graph, expected)
    assert bg.n_graphs == 3
    np.testing.assert_array_equal(bg.src_graph_ids, [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(bg.dst_graph_ids, [0, 0, 0, 1, 1, 2, 2, 2])


def test_batch_errors():
    with pytest.raises(ValueError, match="batch: graphs must be a non-empty sequence"):
        batch([])
    with pytest.raises(TypeError, match="batch: graphs must be a sequence of Graph; got ndarray"):
        batch([three_graphs()[0], np.zeros(3)])
    with jax.enable_x64(True):
        g64 = Graph.from_edges(np.array([0]), np.array([1]), index_dtype=np.int64)
    with pytest.raises(ValueError, match="batch: all graphs must have one index dtype"):
        batch([three_graphs()[0], g64])


def test_batched_graph_pytree_keeps_n_graphs_static():
    bg = batch(three_graphs())
    leaves, treedef = jax.tree_util.tree_flatten(bg)
    assert all(isinstance(x, jax.Array) for x in leaves) and len(leaves) == len(LEAVES) + 3
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert_same_batch(back, bg)
    assert jax.jit(lambda b: b)(bg).n_graphs == 3
    # stacked along a leading axis (data parallel over devices): the aux data stays one int
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), bg, bg)
    assert stacked.n_graphs == 3 and stacked.graph_mask.shape == (2, 3)


def test_batched_graph_constructor_checks():
    bg = batch(three_graphs())
    g, ids = bg.graph, np.asarray(bg.dst_graph_ids)
    with pytest.raises(TypeError, match="BatchedGraph: graph must be a Graph, got ndarray"):
        BatchedGraph(np.zeros(3), ids, ids, 3)
    with pytest.raises(ValueError, match=r"BatchedGraph: src_graph_ids must be an integer array of shape \(8,\)"):
        BatchedGraph(g, ids[:-1], ids, 3)
    with pytest.raises(ValueError, match=r"BatchedGraph: dst_graph_ids\[5\] = 3 is out of range \[0, 3\)"):
        BatchedGraph(g, ids, np.where(ids == 2, 3, ids), 3)
    with pytest.raises(ValueError, match=r"dst_graph_ids must never decrease .* dst_graph_ids\[3\] = 0 follows 1"):
        BatchedGraph(g, ids, np.array([0, 0, 1, 0, 1, 2, 2, 2]), 3)
    with pytest.raises(ValueError, match=r"BatchedGraph: graph_mask must be a bool array of shape \(3,\)"):
        BatchedGraph(g, ids, ids, 3, jnp.ones(3, jnp.int32))
    with pytest.raises(TypeError, match="BatchedGraph: n_graphs must be an int, got float"):
        BatchedGraph(g, ids, ids, 3.0)
    assert_same_batch(BatchedGraph(g, ids, ids, 3), bg)


# -- pad_batch --------------------------------------------------------------------------


def test_pad_batch_table():
    bg = batch(three_graphs())  # 8 nodes (3, 2, 3), 5 edges (3, 0, 2), 3 graphs
    p = pad_batch(bg, n_nodes=11, n_edges=8, n_graphs=5)
    assert p.n_graphs == 5 and (p.graph.n_src, p.graph.n_dst, p.graph.n_edges) == (11, 11, 8)
    # jraph's convention: the padding graph (id 3) owns nodes 8..10 and the 3 padding edges, all 8 -> 8
    assert edge_list(p.graph) == edge_list(bg.graph) + [(8, 8)] * 3
    np.testing.assert_array_equal(p.dst_graph_ids, [0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3])
    np.testing.assert_array_equal(p.src_graph_ids, p.dst_graph_ids)
    assert p.graph_mask.tolist() == [True, True, True, False, False]
    assert p.node_mask.tolist() == [True] * 8 + [False] * 3
    assert p.src_node_mask.tolist() == p.node_mask.tolist()
    assert p.edge_mask.tolist() == [True] * 5 + [False] * 3
    # the padding edges are the graph's padding edges: in no row, after the real ones in both groupings
    np.testing.assert_array_equal(p.graph.csc_offsets, [0, 1, 2, 3, 3, 3, 5, 5, 5, 5, 5, 5])
    assert int(p.graph.csr_offsets[-1]) == 5
    fresh = Graph.from_edges(p.graph.src, p.graph.dst, 11)  # the groupings of a fresh build, ended at 5 edges
    for name in ("csc_src", "csc_eid", "csr_dst", "csr_eid"):
        np.testing.assert_array_equal(getattr(p.graph, name), getattr(fresh, name), err_msg=name)
    assert_same_batch(bg.pad(11, 8, 5), p)
    # no padding edges: the padding graph owns nodes only
    q = pad_batch(bg, 9, 5, 4)
    assert edge_list(q.graph) == edge_list(bg.graph) and q.node_mask.tolist() == [True] * 8 + [False]


def test_pad_batch_bipartite():
    a = Graph.from_edges(np.array([1, 0, 1]), np.array([2, 2, 0]), n_src=2, n_dst=3)
    bg = batch([a, a])  # 4 sources, 6 destinations
    p = pad_batch(bg, n_nodes=(6, 7), n_edges=8, n_graphs=3)
    assert (p.graph.n_src, p.graph.n_dst) == (6, 7)
    assert edge_list(p.graph)[6:] == [(4, 6), (4, 6)]  # first padding source -> first padding destination
    np.testing.assert_array_equal(p.src_graph_ids, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(p.dst_graph_ids, [0, 0, 0, 1, 1, 1, 2])
    assert int(p.graph.csc_offsets[-1]) == int(p.graph.csr_offsets[-1]) == 6  # the 2 padding edges in no row
    assert_same_graph(jgo.Graph(*p.graph.tree_flatten()[0], 6, 7), p.graph)  # valid
    x_src = p.pad_nodes(jnp.ones((4, 2)), side="src")
    assert x_src.shape == (6, 2) and x_src[4:].sum() == 0


def test_pad_batch_inside_jit_and_twice():
    bg = batch(random_graphs(np.random.default_rng(0), [4, 2, 5]))
    eager = pad_batch(bg, 16, 30, 5)
    assert_same_batch(jax.jit(lambda b: pad_batch(b, 16, 30, 5))(bg), eager)
    # padding a padded batch appends a second padding graph; the first stays masked
    twice = pad_batch(eager, 20, 32, 7)
    assert twice.graph_mask.tolist() == [True] * 3 + [False] * 4
    assert twice.node_mask.tolist() == [True] * 11 + [False] * 9
    assert twice.edge_mask.tolist() == eager.edge_mask.tolist() + [False] * 2


def test_pad_batch_errors():
    bg = batch(three_graphs())  # 8 nodes, 5 edges, 3 graphs
    with pytest.raises(ValueError, match=r"pad_batch: n_nodes=8 leaves no padding node: the batch has 8 nodes .* "
                                         r"n_nodes must be at least 9"):
        pad_batch(bg, 8, 5, 4)
    with pytest.raises(ValueError, match="pad_batch: n_edges=4 is smaller than the batch's 5 edges"):
        pad_batch(bg, 9, 4, 4)
    with pytest.raises(ValueError, match=r"pad_batch: n_graphs=3 leaves no room for the padding graph: the batch "
                                         r"has 3 graphs, so n_graphs must be at least 4"):
        pad_batch(bg, 9, 5, 3)
    with pytest.raises(ValueError, match=r"pad_batch: n_nodes\[1\]=8 leaves no padding node: the batch has 8 "
                                         r"destination nodes"):
        pad_batch(bg, (9, 8), 5, 4)
    with pytest.raises(ValueError, match=r"pad_batch: n_nodes must be an int or a pair \(n_src, n_dst\)"):
        pad_batch(bg, (9,), 5, 4)
    with pytest.raises(TypeError, match="pad_batch: n_edges must be an int, got float"):
        pad_batch(bg, 9, 5.0, 4)
    with pytest.raises(TypeError, match="pad_batch: n_graphs must be a static int .* got a traced value"):
        jax.jit(lambda b, n: pad_batch(b, 9, 5, n))(bg, 4)
    with pytest.raises(TypeError, match=r"pad_batch: batched must be a BatchedGraph \(pad a single Graph with pad\)"):
        pad_batch(bg.graph, 9, 5, 4)
    with pytest.raises(TypeError, match=r"pad: g must be a Graph \(pad a BatchedGraph with pad_batch\); "
                                        r"got BatchedGraph"):
        pad(bg, 9, 9, 5)


def test_pad_features():
    bg = batch(three_graphs())
    p = pad_batch(bg, 10, 7, 4)
    x = {"a": jnp.arange(8.0), "b": jnp.ones((8, 2), jnp.int32)}
    px = p.pad_nodes(x)
    np.testing.assert_array_equal(px["a"], list(range(8)) + [0, 0])
    assert px["b"].shape == (10, 2) and px["b"].dtype == jnp.int32 and int(px["b"][8:].sum()) == 0
    assert p.pad_edges(jnp.ones((5, 3))).shape == (7, 3)
    np.testing.assert_array_equal(p.pad_graphs(jnp.array([1.0, 2.0, 3.0])), [1, 2, 3, 0])
    with pytest.raises(ValueError, match=r"BatchedGraph.pad_nodes: x must hold arrays with 8 rows \(the real "
                                         r"nodes\); got shape \(7,\)"):
        p.pad_nodes(jnp.ones(7))
    with pytest.raises(ValueError, match=r"BatchedGraph.pad_graphs: x must hold arrays with 3 rows"):
        p.pad_graphs(jnp.ones(4))
    with pytest.raises(ValueError, match="BatchedGraph.pad_nodes: side must be one of 'src', 'dst'"):
        p.pad_nodes(jnp.ones(8), side="source")
    # under jit the masks are traced: only the padded size bounds x
    assert jax.jit(lambda b, e: b.pad_edges(e))(p, jnp.ones(5)).shape == (7,)


# -- pool -------------------------------------------------------------------------------


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_pool_on_batched_graph_inside_jit(reduce):
    sizes = [4, 1, 6, 3]
    bg = batch(random_graphs(np.random.default_rng(1), sizes))
    x = jax.random.normal(jax.random.key(0), (bg.graph.n_dst, 3))
    expected = per_graph(np.asarray(x), sizes, reduce)
    # the failure of issue 18: n_graphs was an array leaf, so pool got a tracer
    f = jax.jit(lambda b, x: jgo.pool(x, b.dst_graph_ids, b.n_graphs, reduce=reduce))
    np.testing.assert_allclose(f(bg, x), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda b, x: b.pool(x, reduce=reduce))(bg, x), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(bg.pool(x, reduce=reduce, impl="xla"), expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"BatchedGraph.pool: x must have one row per node, \[14, \.\.\.\]"):
        bg.pool(x[:-1])


@pytest.mark.parametrize("reduce", ["mean", "sum", "max"])
def test_pool_ignores_padding(reduce):
    sizes = [3, 5, 2]
    bg = batch(random_graphs(np.random.default_rng(2), sizes))
    p = pad_batch(bg, 16, 40, 6)
    x = jax.random.normal(jax.random.key(1), (bg.graph.n_dst, 4))
    # padding rows hold large values: a real graph reading one would be far off
    xp = jnp.where(p.node_mask[:, None], p.pad_nodes(x), 1e3)
    pooled = jax.jit(lambda b, x: b.pool(x, reduce=reduce))(p, xp)
    np.testing.assert_allclose(pooled[:3], per_graph(np.asarray(x), sizes, reduce), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(pooled[4:], 0.0)  # the empty graphs after the padding graph


# -- a jitted training step over a stream of padded batches -------------------------------

F, H = 3, 8
PADDED = {"n_nodes": 48, "n_edges": 96, "n_graphs": 7}  # room for 5 graphs of 8 nodes and 16 edges


def gnn(params, bg, x):
    """Two mean-aggregation layers (GraphSAGE's concat form) and a mean readout: ``[n_graphs]``."""
    g = bg.graph
    h = jax.nn.relu(jgo.agg_concat(g, x, reduce="mean") @ params["w1"] + params["b1"])
    h = jnp.tanh(jgo.agg_concat(g, h, reduce="mean") @ params["w2"])
    return (bg.pool(h, reduce="mean") @ params["w3"])[:, 0]


def loss_fn(params, bg, x, y):
    err = jnp.where(bg.graph_mask, (gnn(params, bg, x) - y) ** 2, 0.0)
    return err.sum() / bg.graph_mask.sum()


def test_padded_training_step_compiles_once_and_matches_unpadded():
    rng = np.random.default_rng(3)
    keys = jax.random.split(jax.random.key(2), 4)
    params = {"w1": jax.random.normal(keys[0], (2 * F, H)) / 2, "b1": jnp.full(H, 0.1),
              "w2": jax.random.normal(keys[1], (2 * H, H)) / 3, "w3": jax.random.normal(keys[2], (H, 1))}
    traces = []

    @jax.jit
    def step(params, bg, x, y):
        traces.append(bg.graph.n_dst)  # runs once per trace
        return jax.value_and_grad(loss_fn)(params, bg, x, y)

    unpadded_step = jax.jit(jax.value_and_grad(loss_fn))  # compiles per batch: its sizes differ
    real_sizes = set()
    for i in range(3):
        sizes = rng.integers(2, 9, int(rng.integers(2, 6)))  # 2..5 graphs of 2..8 nodes
        bg = batch(random_graphs(rng, sizes))
        x = jax.random.normal(jax.random.fold_in(keys[3], i), (bg.graph.n_dst, F))
        y = jnp.asarray(rng.normal(size=bg.n_graphs), jnp.float32)
        real_sizes.add((bg.n_graphs, bg.graph.n_dst, bg.graph.n_edges))

        padded = pad_batch(bg, **PADDED)
        loss, grads = step(params, padded, padded.pad_nodes(x), padded.pad_graphs(y))
        want_loss, want_grads = unpadded_step(params, bg, x, y)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-5)
        for name in params:
            np.testing.assert_allclose(grads[name], want_grads[name], rtol=1e-5, atol=1e-5, err_msg=name)
        assert float(jnp.abs(grads["w1"]).sum()) > 0
    assert len(real_sizes) == 3  # every batch had other real sizes ...
    assert traces == [PADDED["n_nodes"]] and step._cache_size() == 1  # ... and the step compiled once


# -- jraph interop ----------------------------------------------------------------------


def jraph_batch(jraph, graphs, rng):
    """The graphs with random node/edge/global features, as jraph tuples batched by jraph itself."""
    tuples = [jraph.GraphsTuple(nodes=rng.normal(size=(g.n_dst, 2)).astype(np.float32),
                                edges=rng.normal(size=(g.n_edges, 3)).astype(np.float32),
                                globals=rng.normal(size=(1, 1)).astype(np.float32),
                                senders=np.asarray(g.src), receivers=np.asarray(g.dst),
                                n_node=np.array([g.n_dst], np.int32), n_edge=np.array([g.n_edges], np.int32))
              for g in graphs]
    return jraph.batch_np(tuples)


def assert_same_tuple(a, b):
    for name in ("n_node", "n_edge", "senders", "receivers", "nodes", "edges", "globals"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), err_msg=name)


def test_to_jraph_equals_pad_with_graphs(jraph):
    rng = np.random.default_rng(4)
    graphs = random_graphs(rng, [3, 6, 1, 4])
    theirs_unpadded = jraph_batch(jraph, graphs, rng)
    theirs = jraph.pad_with_graphs(theirs_unpadded, n_node=20, n_edge=40, n_graph=7)

    p = pad_batch(batch(graphs), 20, 40, 7)

    def to_jraph(p, t):
        return p.to_jraph(nodes=p.pad_nodes(t.nodes), edges=p.pad_edges(t.edges), globals=p.pad_graphs(t.globals))

    for ours in (to_jraph(p, theirs_unpadded), jax.jit(to_jraph)(p, theirs_unpadded)):
        assert_same_tuple(ours, theirs)
        np.testing.assert_array_equal(jraph.get_node_padding_mask(ours), p.node_mask)
        np.testing.assert_array_equal(jraph.get_edge_padding_mask(ours), p.edge_mask)
        np.testing.assert_array_equal(jraph.get_graph_padding_mask(ours), p.graph_mask)
    # unpadded: the batch is jraph's batch
    bg = batch(graphs)
    assert_same_tuple(bg.to_jraph(nodes=theirs_unpadded.nodes, edges=theirs_unpadded.edges,
                                  globals=theirs_unpadded.globals), theirs_unpadded)


def test_from_jraph_inside_jit(jraph):
    rng = np.random.default_rng(5)
    graphs = random_graphs(rng, [2, 5, 3])
    unpadded = jraph_batch(jraph, graphs, rng)
    theirs = jraph.pad_with_graphs(unpadded, n_node=16, n_edge=32, n_graph=6)

    ours = jax.jit(lambda t: BatchedGraph.from_jraph(t, padded=True))(theirs)
    assert_same_batch(ours, pad_batch(batch(graphs), 16, 32, 6))
    np.testing.assert_array_equal(ours.graph_mask, jraph.get_graph_padding_mask(theirs))
    np.testing.assert_array_equal(ours.node_mask, jraph.get_node_padding_mask(theirs))
    np.testing.assert_array_equal(ours.edge_mask, jraph.get_edge_padding_mask(theirs))
    assert_same_batch(BatchedGraph.from_jraph(unpadded), batch(graphs))
    # round trip, padding included
    assert_same_tuple(ours.to_jraph(nodes=theirs.nodes, edges=theirs.edges, globals=theirs.globals), theirs)


def test_graph_from_jraph_inside_jit(jraph):
    rng = np.random.default_rng(6)
    graphs = random_graphs(rng, [4, 3])
    t = jraph.pad_with_graphs(jraph_batch(jraph, graphs, rng), n_node=9, n_edge=20, n_graph=3)
    padded = pad_batch(batch(graphs), 9, 20, 3).graph
    expected = Graph.from_edges(padded.src, padded.dst, 9)  # Graph.from_jraph knows no padding: ordinary edges
    assert_same_graph(jax.jit(lambda t: Graph.from_jraph(t))(t), expected)  # node count from t.nodes' shape
    no_nodes = t._replace(nodes=None, edges=None, globals=None)
    assert_same_graph(jax.jit(lambda t: Graph.from_jraph(t, n_nodes=9))(no_nodes), expected)
    assert_same_graph(Graph.from_jraph(no_nodes), expected)  # concrete n_node: its sum
    with pytest.raises(ValueError, match=r"Graph.from_jraph: the node count is data-dependent: graphs.n_node is "
                                         r"traced \(inside jit\) .* pass n_nodes=<static int>"):
        jax.jit(lambda t: Graph.from_jraph(t))(no_nodes)
    with pytest.raises(ValueError, match=r"BatchedGraph.from_jraph: the node count is data-dependent"):
        jax.jit(lambda t: BatchedGraph.from_jraph(t))(no_nodes)
    with pytest.raises(ValueError, match=r"Graph.from_jraph: the node counts disagree: n_nodes = 8, "
                                         r"sum\(graphs.n_node\) = 9"):
        Graph.from_jraph(t, n_nodes=8)
    with pytest.raises(ValueError, match=r"Graph.from_jraph: sum\(graphs.n_edge\) = 19, but graphs.senders has 20"):
        Graph.from_jraph(t._replace(n_edge=t.n_edge - np.array([1, 0, 0])))
    with pytest.raises(TypeError, match="Graph.from_jraph: n_nodes must be a static int"):
        jax.jit(lambda t, n: Graph.from_jraph(t, n_nodes=n))(no_nodes, 9)


def test_to_jraph_errors(jraph):
    a = Graph.from_edges(np.array([1, 0]), np.array([2, 2]), n_src=2, n_dst=3)
    with pytest.raises(ValueError, match=r"BatchedGraph.to_jraph: jraph graphs are square; this batch is "
                                         r"bipartite \(n_src=4, n_dst=6\)"):
        batch([a, a]).to_jraph()
    square_union = batch([a, Graph.from_edges(np.array([0]), np.array([0]), n_src=2, n_dst=1)])  # 4 x 4
    with pytest.raises(ValueError, match="src_graph_ids differ from dst_graph_ids"):
        square_union.to_jraph()
    bg = batch(three_graphs())
    with pytest.raises(ValueError, match=r"BatchedGraph.to_jraph: edges must hold arrays \[5, \.\.\.\]; "
                                         r"got shape \(4, 2\)"):
        bg.to_jraph(edges=jnp.ones((4, 2)))


# -- other conversions inside jit ---------------------------------------------------------


def test_conversions_inside_jit():
    src, dst = jnp.array([0, 2, 1]), jnp.array([1, 0, 1])
    expected = Graph.from_edges(src, dst, 3)
    assert_same_graph(jax.jit(lambda ei: Graph.from_edge_index(ei, 3))(jnp.stack([src, dst])), expected)
    assert_same_graph(jax.jit(lambda s, r: Graph.from_senders_receivers(s, r, 3))(src, dst), expected)
    np.testing.assert_array_equal(jax.jit(lambda g: g.to_edge_index(padding="keep"))(expected), [src, dst])
    with pytest.raises(ValueError, match=r"Graph.from_edge_index: num_nodes \(a static int\) is required when "
                                         r"edge_index is traced"):
        jax.jit(lambda ei: Graph.from_edge_index(ei))(jnp.stack([src, dst]))
    with pytest.raises(TypeError, match="Graph.to_scipy: needs concrete arrays .* call it outside jax.jit"):
        jax.jit(lambda g: g.to_scipy().shape[0])(expected)
    with pytest.raises(TypeError, match="Graph.to_networkx: needs concrete arrays"):
        jax.jit(lambda g: g.to_networkx().number_of_nodes())(expected)
