"""jaxgraphops.distributed: partitioned forward and gradients on 4 simulated devices equal one device.

Each op family runs as one layer on a partitioned graph inside shard_map (halo exchange, then the op on
the local graph); the loss is taken on the gathered nodes, and the gradients w.r.t. node features, edge
features and replicated layer weights must equal the single-device computation on the whole graph.
Runs in a subprocess: the number of host devices is set before JAX starts.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import jaxgraphops as jgo
from jaxgraphops.distributed import halo_exchange, partition_graph

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    from jax.sharding import Mesh, PartitionSpec as P

    assert len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()), ("parts",))
    rng = np.random.default_rng(0)
    F, H = 4, 2

    def random_graph(n=60, e=300):
        src, dst = rng.integers(0, n - 3, e), rng.integers(0, n - 3, e)  # the last 3 nodes are isolated
        src[:25] = 5  # a hub
        return jgo.Graph.from_edges(src, dst, n, n)

    def two_cliques():  # with contiguous parts of 2 nodes: parts without a halo
        src, dst = np.array([0, 1, 2, 3, 4, 5, 6, 7]), np.array([1, 0, 3, 2, 5, 4, 7, 6])
        return jgo.Graph.from_edges(src, dst, 8, 8)

    def params_of(name):
        a = lambda *s: jnp.asarray(rng.normal(size=s), jnp.float32) / 2  # noqa: E731
        return {"gat": a(3 * F), "gatv2": a(F), "gno": (a(3, 2), a(3), a(F * F, 3), a(F * F))}.get(name, a(1) + 1)

    OPS = ("copy_u", "copy_e", "u_mul_e", "u_add_e", "u_sub_e", "u_div_e")

    def every_gspmm(g, xs, w, p):
        w = (jnp.abs(w) + 0.5) * p  # u_div_e away from 0
        return jnp.concatenate([jgo.gspmm(g, None if op == "copy_e" else xs, None if op == "copy_u" else w, op=op,
                                          reduce=r) for op in OPS for r in ("sum", "mean", "max", "min")], axis=1)

    def every_agg(g, xs, xd, w, p):
        ew = jnp.abs(w[:, 0]) + 0.1
        return jnp.concatenate([jgo.agg_simple(g, xs * p, reduce="max"),
                                jgo.agg_weighted(g, xs, ew * p, reduce="mean"),
                                jgo.agg_concat(g, xs, x_dst=xd, edge_feat=w, edge_weight=ew, reduce="sum")], axis=1)

    # (x_src [n_src, F], x_dst [n_dst, F], w [E, F], params) -> [n_dst, ...] on any graph g
    FAMILIES = {
        "gspmm": lambda g, xs, xd, w, p: every_gspmm(g, xs, w, p),
        "agg": every_agg,
        "gat": lambda g, xs, xd, w, p: jgo.mha_gat(g, xs, p, x_dst=xd, num_heads=1, edge_feat=w),
        "gatv2": lambda g, xs, xd, w, p: jgo.mha_gat_v2(g, xs, xd, p, num_heads=2, edge_feat=w),
        "mha_simple": lambda g, xs, xd, w, p: jgo.mha_simple(g, xd * p, xs, xs, num_heads=2, edge_feat=w),
        "gno": lambda g, xs, xd, w, p: jgo.gno_conv(g, xs, w[:, :2], *p),
    }

    def check(g, pg, name):
        n, f = g.n_dst, FAMILIES[name]
        x = jnp.asarray(rng.normal(size=(n, F)), jnp.float32)
        w = jnp.asarray(rng.normal(size=(g.n_edges, F)), jnp.float32)
        p = params_of(name)
        proj = jnp.asarray(rng.normal(size=f(g, x, x, w, p).shape), jnp.float32)

        def one_device(x, w, p):
            return jnp.sum(f(g, x, x, w, p) * proj)

        def body(pg, x_owned, w_local, p):
            xs = jgo.halo_exchange(pg, x_owned[0], "parts")
            return f(pg.local_graph, xs, x_owned[0], w_local[0], p)[None]

        layer = jax.shard_map(body, mesh=mesh, in_specs=(P("parts"), P("parts"), P("parts"), P()),
                              out_specs=P("parts"))

        def partitioned(x, w, p):
            return jnp.sum(pg.gather_nodes(layer(pg, pg.scatter_nodes(x), pg.scatter_edges(w), p)) * proj)

        want = jax.jit(jax.value_and_grad(one_device, argnums=(0, 1, 2)))(x, w, p)
        got = jax.jit(jax.value_and_grad(partitioned, argnums=(0, 1, 2)))(x, w, p)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):  # 1e-5 of the largest entry
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(b).max())), err_msg=name)

    g = random_graph()
    coords = rng.normal(size=(g.n_dst, 2))
    for method in ("metis", "coordinates", "contiguous"):
        pg = jgo.partition_graph(g, 4, method=method, coords=coords if method == "coordinates" else None)
        for name in FAMILIES:
            check(g, pg, name)
    tiny = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))  # 3 nodes on 4 parts: an empty part
    assert (np.asarray(jgo.partition_graph(tiny, 4).owned) >= 0).sum(axis=1).min() == 0
    check(tiny, jgo.partition_graph(tiny, 4), "gspmm")
    check(tiny, jgo.partition_graph(tiny, 4), "gat")
    cliques = two_cliques()
    pg = jgo.partition_graph(cliques, 4, method="contiguous", balance="nodes")
    assert not np.asarray(pg.halo_valid).any()  # no part has a halo
    check(cliques, pg, "gspmm")

    # plain jit with a sharded operand: right, and one warning that it is not scaled
    import warnings
    from jax.sharding import NamedSharding
    x = jnp.asarray(rng.normal(size=(g.n_dst, F)), jnp.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            y = jax.jit(lambda x: jgo.gspmm(g, x))(jax.device_put(x, NamedSharding(mesh, P("parts"))))
    np.testing.assert_allclose(y, jgo.gspmm(g, x), rtol=1e-6)
    assert [w.category for w in caught] == [jgo.PartitionedJitWarning], caught
    print("ok")
""")


def test_partitioned_forward_and_gradients_equal_one_device():
    """Every op family (gspmm with every op and reduce, agg_simple/weighted/concat, the three attention ops,
    gno_conv) on METIS, coordinate and contiguous partitions of a graph with a hub and isolated nodes; an
    empty part; parts without a halo: values and gradients (node features, edge features, replicated layer
    weights) to 1e-5 in float32, relative to the largest entry. Then plain jit with a sharded operand: the
    same result, and one PartitionedJitWarning."""
    # simulated host devices: the CPU backend, also on a machine with one GPU (which would be the only device)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=900,
                          cwd=pathlib.Path(__file__).parent)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-4000:]


def _cycle(n):
    return jgo.Graph.from_edges(np.arange(n), (np.arange(n) + 1) % n)


@pytest.mark.parametrize("method", ["contiguous", "coordinates", "metis"])
def test_partition_tables_against_the_edge_list(method):
    """Each edge of the graph is in exactly one part, into its owner, from an owned row or a halo row that
    names its source; a halo row is sent by the source's owner. Oracle: the edge list."""
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 40, 200), rng.integers(0, 40, 200)
    g = jgo.Graph.from_edges(src, dst, 40, 40)
    pg = partition_graph(g, 3, method=method, coords=rng.normal(size=(40, 3)) if method == "coordinates" else None)
    owned, edges = np.asarray(pg.owned), np.asarray(pg.edges)
    send, halo, valid = np.asarray(pg.send), np.asarray(pg.halo), np.asarray(pg.halo_valid)
    owner = {int(v): (p, r) for p in range(3) for r, v in enumerate(owned[p]) if v >= 0}
    assert sorted(owner) == list(range(40)) and all(owned[:, -1] == -1)  # a partition; the last row pads
    assert sorted(edges[edges >= 0].tolist()) == list(range(200))
    n_send = send.shape[2]
    for p in range(3):
        lsrc, ldst = np.asarray(pg.graph.src[p]), np.asarray(pg.graph.dst[p])
        halo_nodes = []
        for k in np.flatnonzero(valid[p]):
            q, j = divmod(int(halo[p, k]), n_send)
            halo_nodes.append(int(owned[q, send[q, p, j]]))  # what q sends p in slot j
        for k, e in enumerate(edges[p]):
            if e < 0:
                assert (lsrc[k], ldst[k]) == (pg.n_owned + pg.n_halo - 1, pg.n_owned - 1)
                continue
            assert owner[int(dst[e])] == (p, ldst[k])
            s = int(src[e])
            assert (owned[p, lsrc[k]] == s) if lsrc[k] < pg.n_owned else (halo_nodes[lsrc[k] - pg.n_owned] == s)


def test_scatter_gather_round_trip_and_one_part_exchange():
    """gather_nodes inverts scatter_nodes; on one part the exchange adds only the zero padding row."""
    g = _cycle(5)
    pg = partition_graph(g, 2)
    x = jnp.arange(10.0).reshape(5, 2)
    np.testing.assert_array_equal(pg.gather_nodes(pg.scatter_nodes(x)), x)
    one = partition_graph(g, 1)
    mesh = Mesh(np.array(jax.devices()[:1]), ("parts",))
    f = jax.shard_map(lambda pg, x: halo_exchange(pg, x[0], "parts")[None], mesh=mesh,
                      in_specs=(P("parts"), P("parts")), out_specs=P("parts"))
    out = f(one, one.scatter_nodes(x))[0]
    np.testing.assert_array_equal(out, jnp.concatenate([x, jnp.zeros((2, 2))]))  # owned + padding, halo padding


def test_bad_arguments_name_the_function_and_argument():
    g = _cycle(4)
    with pytest.raises(ValueError, match="partition_graph: method must be one of .*did you mean 'metis'"):
        partition_graph(g, 2, method="metsi")
    with pytest.raises(ValueError, match="partition_graph: n_parts must be an int >= 1"):
        partition_graph(g, 0)
    with pytest.raises(ValueError, match="partition_graph: method='coordinates' needs coords"):
        partition_graph(g, 2, method="coordinates")
    with pytest.raises(ValueError, match="partition_graph: g must have as many sources as destinations"):
        partition_graph(jgo.Graph.from_edges(np.array([0]), np.array([0]), 2, 1), 2)
    with pytest.raises(TypeError, match="partition_graph: g must be a Graph with concrete arrays"):
        jax.jit(lambda g: partition_graph(g, 2))(g)
    pg = partition_graph(g, 2)
    with pytest.raises(ValueError, match="scatter_nodes: x must have 4 rows"):
        pg.scatter_nodes(jnp.zeros((3, 1)))
    with pytest.raises(ValueError, match="scatter_edges: w must have 4 rows"):
        pg.scatter_edges(jnp.zeros((5,)))
    with pytest.raises(ValueError, match="halo_exchange: pg must be one part"):
        halo_exchange(pg, jnp.zeros((pg.n_owned, 1)), "parts")


def test_a_graph_without_edges_and_the_repr():
    """Issue 34: ``scatter_edges`` of a graph without edges raised ``TypeError: Slice size at index 0 in gather op is
    out of range``; it gives the parts' (padding) edge rows, zeros, and ``gather_edges`` the empty array back.
    ``PartitionedGraph`` had no repr."""
    g = jgo.Graph.from_edges(np.zeros(0, int), np.zeros(0, int), 5)
    pg = partition_graph(g, 2)
    assert repr(pg) == ("PartitionedGraph(n_parts=2, n_nodes=5, n_edges=0, n_owned=4, n_halo=1, n_edges_local=1, "
                        "index_dtype=int32)")
    w = pg.scatter_edges(jnp.zeros((0, 3)))
    assert w.shape == (2, 1, 3) and not np.asarray(w).any()
    assert pg.gather_edges(w).shape == (0, 3)
    x = jnp.arange(5.0)[:, None]
    np.testing.assert_array_equal(pg.gather_nodes(pg.scatter_nodes(x)), x)


def _two_process_inputs(jgo):
    """The graph, features, edge features, GAT weights and loss projection both sides use."""
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 50, 250), rng.integers(0, 50, 250)
    g = jgo.Graph.from_edges(src, dst, 50, 50)
    f = lambda *s: jnp.asarray(rng.normal(size=s), jnp.float32)  # noqa: E731
    return g, f(50, 4), f(250, 4), f(12) / 2, f(50, 4)


def _gat_layer(jgo, g, x_src, x_dst, w, p):
    return jgo.mha_gat(g, x_src, p, x_dst=x_dst, edge_feat=w)


def _two_process_child(port, process_id, path):
    """One of two processes with 2 CPU devices each: a partitioned GAT layer's loss and gradients."""
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding

    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=process_id)
    assert jax.device_count() == 4 and jax.local_device_count() == 2
    g, x, w, p, proj = _two_process_inputs(jgo)
    pg = partition_graph(g, 4, method="metis")
    mesh = Mesh(np.array(jax.devices()), ("parts",))

    def body(pg, x_owned, w_local, p):
        xs = halo_exchange(pg, x_owned[0], "parts")
        return _gat_layer(jgo, pg.local_graph, xs, x_owned[0], w_local[0], p)[None]

    layer = jax.shard_map(body, mesh=mesh, in_specs=(P("parts"), P("parts"), P("parts"), P()), out_specs=P("parts"))
    loss = lambda pg, xp, wp, p: jnp.sum(pg.gather_nodes(layer(pg, xp, wp, p)) * proj)  # noqa: E731
    step = jax.jit(jax.value_and_grad(loss, argnums=(1, 2, 3)))  # the graph is an argument, never closed over
    args = jgo.shard_parts((pg, pg.scatter_nodes(x), pg.scatter_edges(w)), mesh, "parts")
    p_global = jax.make_array_from_callback(p.shape, NamedSharding(mesh, P()), lambda index: np.asarray(p)[index])
    value, (gx, gw, gp) = step(*args, p_global)
    gx, gw, gp = (multihost_utils.process_allgather(a, tiled=True) for a in (gx, gw, gp))
    if process_id == 0:
        np.savez(path, value=np.asarray(value.addressable_data(0)), gx=pg.gather_nodes(gx),
                 gw=pg.gather_edges(gw), gp=gp)
    jax.distributed.shutdown()


def test_two_processes_equal_one_process(tmp_path):
    """2 processes x 2 CPU devices (jax.distributed on localhost, gloo collectives): a METIS-partitioned
    GAT layer's loss and gradients (node and edge features, replicated weights) equal one process."""
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    path = tmp_path / "two_processes.npz"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(pathlib.Path(__file__).parent))
    code = "import sys, test_distributed as t; t._two_process_child(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(port), str(i), str(path)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=pathlib.Path(__file__).parent)
             for i in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-4000:]
    got = np.load(path)
    g, x, w, p, proj = _two_process_inputs(jgo)
    value, grads = jax.value_and_grad(lambda x, w, p: jnp.sum(_gat_layer(jgo, g, x, x, w, p) * proj),
                                      argnums=(0, 1, 2))(x, w, p)
    for key, want in zip(("value", "gx", "gw", "gp"), (value, *grads)):
        np.testing.assert_allclose(np.squeeze(got[key]), want, rtol=1e-5, atol=1e-5, err_msg=key)


def test_halo_volumes_against_the_edge_list():
    """benchmarks.halo's counts: halo rows = distinct (part, source) pairs with a source the part does not
    own, counted from the edge list and the owner of each node; bytes follow from rows and width."""
    from benchmarks import halo as bench

    g, coords = bench.mesh_graph(12)
    results = []
    for method in ("metis", "coordinates", "contiguous"):
        r = bench.measure(g, coords, method, 3, features=8)
        results.append(r)
        pg = partition_graph(g, 3, method=method, coords=coords if method == "coordinates" else None)
        owned = np.asarray(pg.owned)
        owner = np.empty(g.n_dst, np.int64)
        for p in range(3):
            owner[owned[p][owned[p] >= 0]] = p
        src, dst = np.asarray(g.src), np.asarray(g.dst)
        crossing = owner[src] != owner[dst]
        halo_pairs = {(int(owner[d]), int(s)) for s, d in zip(src[crossing], dst[crossing])}
        assert r["halo_total"] == len(halo_pairs), method
        assert r["cut"] == pytest.approx(crossing.mean()), method
        assert r["halo_bytes"] == 4 * 8 * len(halo_pairs) and r["all_gather_bytes"] == 2 * g.n_dst * 4 * 8
    assert "Paper model" in bench.markdown({"power-law": (g, coords)}, {"power-law": results}, 8, "cmd")
