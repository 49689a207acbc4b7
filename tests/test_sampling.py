"""Neighbour sampling: jgo.sample_neighbors and jgo.sample_blocks.

Oracles: hand-computed tables (degrees below the fanout make the sample deterministic), NumPy
checks of the definition (every sampled edge is an in-edge of its seed, no repeats without
replacement, the relabelling by first appearance), chi-square tests of uniformity (which a
deliberately biased sampler fails), the pure-JAX sampler (``impl="xla"``, same bits by
construction) and subprocesses for other thread counts and the emulated CUDA kernel.
"""

import json
import os
import subprocess
import sys
from itertools import combinations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxgraphops as jgo
from conftest import kernel_index_error, kernel_only

P_MIN = 1e-4  # chi-square p-values below this fail a uniformity test (fixed keys: deterministic)


def _star_graph(n_stars, deg, index_dtype=None):
    """``n_stars`` destinations 0..n_stars-1, each with ``deg`` in-edges from distinct other nodes;
    node ids of the sources are n_stars + star * deg + k, so CSC position k of a star is source k."""
    dst = np.repeat(np.arange(n_stars), deg)
    src = n_stars + np.arange(n_stars * deg)
    n = n_stars * (deg + 1)
    return jgo.Graph.from_edges(src, dst, n, n, index_dtype=index_dtype)


def _seed_rows(block, fanout):
    """``[S, fanout]``: each seed's sampled edge ids (``g``'s ids) in the order sampled, then -1, read from the
    block's CSC (its real edges, seed by seed, then the padding edges)."""
    off, eid = np.asarray(block.graph.csc_offsets), np.asarray(block.edge_ids)
    rows = np.full((block.graph.n_dst, fanout), -1, np.int64)
    for s in range(block.graph.n_dst):
        rows[s, :off[s + 1] - off[s]] = eid[off[s]:off[s + 1]]
    return rows


def _positions(block, n_stars, deg, fanout):
    """The CSC positions (0..deg-1) sampled for each star seed, ``[n_stars, fanout]`` (-1: none)."""
    eid = _seed_rows(block, fanout)
    return np.where(eid >= 0, eid - np.arange(n_stars)[:, None] * deg, -1)


def _in_edges(g):
    dst = np.asarray(g.dst)
    return {v: np.flatnonzero(dst == v) for v in range(g.n_dst)}


def _relabel_np(seeds, slot_src):
    """Input node ids by first appearance (seeds first) and the local source of each slot."""
    nodes = [int(s) for s in seeds]
    local = {}
    for i, s in enumerate(nodes):
        if s >= 0:
            local.setdefault(s, i)
    out = []
    for s in slot_src:
        s = int(s)
        if s < 0:
            out.append(None)
            continue
        if s not in local:
            local[s] = len(nodes)
            nodes.append(s)
        out.append(local[s])
    n = len(seeds) + len(slot_src)
    nodes += [-1] * (n - len(nodes))
    return np.array(nodes), [n - 1 if o is None else o for o in out]


def _check_block(g, seeds, fanout, b, replace):
    """Every property of one block, from the definition."""
    seeds = np.asarray(seeds)
    S = len(seeds)
    gb = b.graph
    assert (gb.n_dst, gb.n_src, gb.n_edges) == (S, S * (1 + fanout), S * fanout)
    jgo.Graph(*gb.tree_flatten()[0], gb.n_src, gb.n_dst)  # a valid graph (the constructor checks it)
    eid, mask = np.asarray(b.edge_ids), np.asarray(b.edge_mask)
    assert np.array_equal(mask, eid >= 0)
    n_real = int(mask.sum())
    # the real edges first, seed by seed (the CSC is the input order); the rest are padding edges, in no row
    assert np.array_equal(mask, np.arange(S * fanout) < n_real) and int(gb.csc_offsets[-1]) == n_real
    assert np.array_equal(np.asarray(gb.real_edge_mask()), mask)
    counts = np.diff(np.asarray(gb.csc_offsets))
    assert np.array_equal(np.asarray(gb.dst)[:n_real], np.repeat(np.arange(S), counts))
    assert np.array_equal(np.asarray(gb.in_degrees()), counts)
    inputs = np.asarray(b.input_nodes)
    assert np.array_equal(np.asarray(b.node_mask), inputs >= 0)
    assert np.array_equal(inputs[:S], seeds)  # the prefix property
    gsrc, gdst = np.asarray(g.src), np.asarray(g.dst)
    bsrc = np.asarray(gb.src)
    ins = _in_edges(g)
    rows = _seed_rows(b, fanout)
    for s, v in enumerate(seeds):
        row = rows[s]
        real = row[row >= 0]
        deg = 0 if v < 0 else len(ins[v])
        if v >= 0:
            assert set(real.tolist()) <= set(ins[v].tolist())  # edges of g into the seed
            assert np.all(gdst[real] == v)
        if replace:
            assert len(real) == (fanout if deg else 0)
        else:
            assert len(real) == min(deg, fanout)
            assert len(set(real.tolist())) == len(real)  # no repeats
            if deg <= fanout:
                assert sorted(real.tolist()) == sorted(ins[v].tolist()) if v >= 0 else len(real) == 0
        assert np.all(row[len(real):] == -1)  # real slots first
    real = mask
    assert np.array_equal(inputs[bsrc[real]], gsrc[eid[real]])  # local ids name the right nodes
    if not real.all():
        assert np.all(bsrc[~real] == gb.n_src - 1) and inputs[-1] == -1
    expected_nodes, expected_local = _relabel_np(seeds, np.where(real, gsrc[np.maximum(eid, 0)], -1))
    assert np.array_equal(inputs, expected_nodes)
    assert np.array_equal(bsrc, expected_local)


# -- literal tables -------------------------------------------------------------------------------

def test_all_neighbours_when_degree_at_most_fanout_table():
    # in-edges: node 2 <- 0 (e0), 1 (e1), 3 (e2); node 0 <- 2 (e3); nodes 1 and 3 none
    g = jgo.Graph.from_edges(np.array([0, 1, 3, 2]), np.array([2, 2, 2, 0]))
    for replace_key in range(3):
        b = jgo.sample_neighbors(jax.random.key(replace_key), g, np.array([2, 0, 1, -1]), 3)
        assert b.edge_ids.tolist() == [0, 1, 2, 3, -1, -1, -1, -1, -1, -1, -1, -1]
        assert b.input_nodes.tolist() == [2, 0, 1, -1, 3] + [-1] * 11
        assert b.graph.src.tolist() == [1, 2, 4, 0] + [15] * 8
        assert b.graph.csc_offsets.tolist() == [0, 3, 4, 4, 4]  # the empty slots are padding edges, in no row
        assert b.graph.dst.tolist() == [0, 0, 0, 1] + [3] * 8
        assert b.edge_mask.tolist() == [True] * 4 + [False] * 8
        assert b.node_mask.tolist() == [True, True, True, False, True] + [False] * 11


def test_degree_zero_seed_and_padding_seed_with_replacement():
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([2, 2]), 4)
    b = jgo.sample_neighbors(jax.random.key(1), g, np.array([3, 2, -1]), 4, replace=True)
    assert b.graph.in_degrees().tolist() == [0, 4, 0]
    eid = _seed_rows(b, 4)
    assert eid[0].tolist() == [-1] * 4 and eid[2].tolist() == [-1] * 4
    assert set(eid[1].tolist()) <= {0, 1} and (eid[1] >= 0).all()


@pytest.mark.parametrize("replace", [False, True])
def test_zero_edge_graph(replace):
    g = jgo.Graph.from_edges(np.zeros(0, int), np.zeros(0, int), 5)
    b = jgo.sample_neighbors(jax.random.key(0), g, np.array([0, 4]), 2, replace=replace)
    assert b.edge_ids.tolist() == [-1] * 4 and not b.edge_mask.any()
    assert b.input_nodes.tolist() == [0, 4, -1, -1, -1, -1]
    blocks = jgo.sample_blocks(jax.random.key(0), g, np.array([1]), [2, 3], replace=replace)
    assert [b.graph.n_src for b in blocks] == [12, 4]
    assert blocks[0].input_nodes.tolist() == [1] + [-1] * 11


def test_zero_fanout_and_no_seeds():
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    b = jgo.sample_neighbors(jax.random.key(0), g, np.array([1, 0]), 0)
    assert b.graph.n_edges == 0 and b.input_nodes.tolist() == [1, 0]
    b = jgo.sample_neighbors(jax.random.key(0), g, np.zeros(0, np.int32), 3)
    assert b.graph.n_src == 0 and b.edge_ids.shape == (0,)


# -- the definition on random graphs --------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("replace", [False, True])
def test_random_graph_definition(index_dtype, replace, x64):
    rng = np.random.default_rng(0)
    n, E = 60, 500
    src, dst = rng.integers(0, n, E), rng.integers(0, n - 5, E)  # nodes n-5.. have no in-edges
    g = jgo.Graph.from_edges(src, dst, n, n, index_dtype=index_dtype)
    for k in range(4):
        seeds = rng.permutation(n)[:25]
        seeds[3] = -1
        b = jgo.sample_neighbors(jax.random.key(k), g, seeds, 6, replace=replace)
        assert b.edge_ids.dtype == index_dtype and b.graph.index_dtype == index_dtype
        _check_block(g, seeds, 6, b, replace)


@pytest.mark.parametrize("impl", [None, "xla"])
def test_sample_blocks_structure(impl):
    rng = np.random.default_rng(1)
    n, E = 300, 2000
    g = jgo.Graph.from_edges(rng.integers(0, n, E), rng.integers(0, n, E), n, n)
    seeds = rng.permutation(n)[:16]
    fanouts = [4, 3, 2]
    blocks = jgo.sample_blocks(jax.random.key(5), g, seeds, fanouts, impl=impl)
    assert len(blocks) == 3
    cur = seeds
    for i in (2, 1, 0):
        b = blocks[i]
        _check_block(g, cur, fanouts[i], b, False)
        if i > 0:
            assert blocks[i - 1].graph.n_dst == b.graph.n_src
        cur = np.asarray(b.input_nodes)
    real = np.asarray(blocks[0].input_nodes)
    real = real[real >= 0]
    assert len(np.unique(real)) == len(real)
    # the hop next to the seeds is sample_neighbors under the same key
    one = jgo.sample_neighbors(jax.random.key(5), g, seeds, 2, impl=impl)
    assert np.array_equal(one.edge_ids, blocks[-1].edge_ids)


def test_a_block_is_its_sampled_subgraph():
    """Issue 34's case: a skewed graph whose seeds fill few of their slots. Every reduction on the block equals
    the NumPy reduction over each seed's sampled neighbours (the mean divides by the sampled degree, the max and
    min see no zero row of an empty slot), and the softmax gives the empty slots no weight, whatever the padding
    source rows hold. (Every op and layer: tests/test_blocks.py.)"""
    rng = np.random.default_rng(2)
    n, E, fanout = 2000, 2400, 5
    dst = np.minimum(rng.zipf(1.6, E), n) - 1  # most seeds have 0 or 1 in-edges, a few hubs more than the fanout
    g = jgo.Graph.from_edges(rng.integers(0, n, E), dst, n, n)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    seeds = np.arange(0, 128, 2)
    b = jgo.sample_neighbors(jax.random.key(0), g, seeds, fanout)
    mask = np.asarray(b.edge_mask)
    assert 0 < mask.sum() < mask.size / 2
    h = x[np.asarray(b.input_nodes)]  # the padding rows read x[-1]: junk no op reads
    h[~np.asarray(b.node_mask)] = np.nan
    rows = _seed_rows(b, fanout)
    gsrc = np.asarray(g.src)
    for reduce, np_reduce in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)):
        out = np.asarray(jgo.gspmm(b.graph, h, reduce=reduce))
        want = np.stack([np_reduce(x[gsrc[r[r >= 0]]], axis=0) if (r >= 0).any() else np.zeros(3) for r in rows])
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6, err_msg=reduce)
    alpha = np.asarray(jgo.edge_softmax(b.graph, np.zeros(mask.size, np.float32)))
    seed_of = np.asarray(b.graph.dst)
    np.testing.assert_allclose(alpha[mask], 1 / np.asarray(b.graph.in_degrees())[seed_of[mask]], rtol=1e-6)
    assert (alpha[~mask] == 0).all()


# -- uniformity -----------------------------------------------------------------------------------

def _subset_counts(positions, deg, fanout):
    index = {c: i for i, c in enumerate(combinations(range(deg), fanout))}
    counts = np.zeros(len(index))
    for row in positions:
        counts[index[tuple(sorted(row.tolist()))]] += 1
    return counts


def _biased_positions(rng, n_rows, deg, fanout):
    """A deliberately biased sampler: positions drawn as (uniform 4-bit word) % deg, repeats skipped."""
    rows = []
    for _ in range(n_rows):
        row = []
        while len(row) < fanout:
            t = int(rng.integers(0, 16)) % deg
            if t not in row:
                row.append(t)
        rows.append(row)
    return np.array(rows)


def test_uniform_without_replacement_chi_square():
    n_stars, deg, fanout = 2000, 5, 2
    g = _star_graph(n_stars, deg)
    seeds = np.arange(n_stars)
    pos = np.concatenate([_positions(jgo.sample_neighbors(jax.random.key(k), g, seeds, fanout), n_stars, deg, fanout)
                          for k in range(3)])
    counts = _subset_counts(pos, deg, fanout)  # the 10 subsets of 2 of 5 in-edges: uniform
    assert stats.chisquare(counts).pvalue > P_MIN
    biased = _subset_counts(_biased_positions(np.random.default_rng(0), len(pos), deg, fanout), deg, fanout)
    assert stats.chisquare(biased).pvalue < P_MIN  # the test can fail
    # marginals of a larger neighbourhood: each of 10 in-edges taken with probability 3/10
    g10 = _star_graph(1000, 10)
    pos10 = np.concatenate([_positions(jgo.sample_neighbors(jax.random.key(k), g10, np.arange(1000), 3), 1000, 10, 3)
                            for k in range(4)])
    assert stats.chisquare(np.bincount(pos10.ravel(), minlength=10)).pvalue > P_MIN
    biased10 = _biased_positions(np.random.default_rng(1), len(pos10), 10, 3)
    assert stats.chisquare(np.bincount(biased10.ravel(), minlength=10)).pvalue < P_MIN


def test_uniform_with_replacement_chi_square():
    n_stars, deg, fanout = 3000, 7, 3
    g = _star_graph(n_stars, deg)
    pos = np.concatenate([_positions(jgo.sample_neighbors(jax.random.key(k), g, np.arange(n_stars), fanout,
                                                          replace=True), n_stars, deg, fanout) for k in range(2)])
    for slot in range(fanout):  # each draw uniform over the 7 in-edges
        assert stats.chisquare(np.bincount(pos[:, slot], minlength=deg)).pvalue > P_MIN
    pairs = np.bincount(pos[:, 0] * deg + pos[:, 1], minlength=deg * deg)  # draws independent
    assert stats.chisquare(pairs).pvalue > P_MIN
    biased = np.array([int(t) % deg for t in np.random.default_rng(2).integers(0, 16, len(pos))])
    assert stats.chisquare(np.bincount(biased, minlength=deg)).pvalue < P_MIN


# -- reproducibility ------------------------------------------------------------------------------

def test_same_key_same_sample_different_keys_differ():
    g = _star_graph(500, 12)
    seeds = np.arange(500)
    a = jgo.sample_neighbors(jax.random.key(7), g, seeds, 4)
    b = jgo.sample_neighbors(jax.random.key(7), g, seeds, 4)
    c = jgo.sample_neighbors(jax.random.key(8), g, seeds, 4)
    assert np.array_equal(a.edge_ids, b.edge_ids)
    assert np.mean(np.asarray(a.edge_ids) != np.asarray(c.edge_ids)) > 0.5
    raw = jgo.sample_neighbors(jax.random.key_data(jax.random.key(7)), g, seeds, 4)  # a raw uint32[2] key
    assert np.array_equal(a.edge_ids, raw.edge_ids)
    legacy = jgo.sample_neighbors(jax.random.PRNGKey(7), g, seeds, 4)
    assert np.array_equal(a.edge_ids, legacy.edge_ids)


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_kernel_matches_pure_jax_sampler_bitwise(replace, index_dtype, x64):
    rng = np.random.default_rng(3)
    n, E = 400, 6000
    g = jgo.Graph.from_edges(rng.integers(0, n, E), rng.integers(0, n, E), n, n, index_dtype=index_dtype)
    seeds = rng.permutation(n)[:300]
    seeds[::7] = -1
    for fanout in (1, 5, 30):
        a, b = (jax.jit(lambda k, s, impl=impl: jgo.sample_neighbors(k, g, s, fanout, replace=replace, impl=impl))(
            jax.random.key(11), seeds) for impl in (None, "xla"))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            assert np.array_equal(x, y)


_WORKER = r"""
import json, os, sys
os.sched_setaffinity(0, json.loads(sys.argv[1]))
import jax, numpy as np
import jaxgraphops as jgo
rng = np.random.default_rng(4)
n, E = 5000, 50000
g = jgo.Graph.from_edges(rng.integers(0, n, E), rng.integers(0, n, E), n, n)
seeds = rng.permutation(n)[:2000]  # 8 tasks of 256 seeds in the CPU kernel
out = {}
for replace in (False, True):
    blocks = jax.jit(lambda k, s: jgo.sample_blocks(k, g, s, [3, 10], replace=replace))(jax.random.key(3), seeds)
    for i, b in enumerate(blocks):
        out[f"{replace}_{i}_eid"] = np.asarray(b.edge_ids)
        out[f"{replace}_{i}_nodes"] = np.asarray(b.input_nodes)
out["platform"] = np.array(jgo.kernel_platform())
np.savez(sys.argv[2], **out)
"""


def _run_worker(tmp_path, cpus, kernels):
    out = tmp_path / f"{kernels}_{len(cpus)}.npz"
    env = dict(os.environ, JGO_KERNELS=kernels)
    env.pop("XLA_FLAGS", None)  # the default CPU client: thread pool sized from the affinity mask
    subprocess.run([sys.executable, "-c", _WORKER, json.dumps(cpus), str(out)], check=True, env=env, timeout=300,
                   cwd=tmp_path)  # not the repository root, whose jaxgraphops/ has no compiled extension
    return dict(np.load(out))


_TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")


def _assert_same_samples(expected, *others):
    for name in expected:
        if name != "platform":
            for other in others:
                assert np.array_equal(expected[name], other[name]), name


@_TWO_CPUS
def test_same_sample_on_one_and_two_threads_and_in_the_pure_jax_sampler(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    one = _run_worker(tmp_path, cpus[:1], "cpu")
    two = _run_worker(tmp_path, cpus, "cpu")
    pure = _run_worker(tmp_path, cpus, "xla")
    assert str(one["platform"]) == "cpu" and str(pure["platform"]) == "xla"
    _assert_same_samples(one, two, pure)


@_TWO_CPUS
@pytest.mark.skipif(not jgo._ext.with_cuda_emulation,
                    reason="this build has no emulated CUDA handlers (install with JGO_CUDA_EMULATION=ON; "
                           "CI's emulated leg runs this test)")
def test_same_sample_on_the_cpu_and_the_emulated_cuda_kernel(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    one = _run_worker(tmp_path, cpus[:1], "cpu")
    emulated = _run_worker(tmp_path, cpus, "cuda-emulation")
    assert str(emulated["platform"]) == "cuda-emulation"
    _assert_same_samples(one, emulated)


# -- jit, vmap, a train step ----------------------------------------------------------------------

def test_jit_train_step_compiles_once_across_batches():
    rng = np.random.default_rng(5)
    n, E, F, C = 2000, 20000, 8, 3
    g = jgo.Graph.from_edges(rng.integers(0, n, E), rng.integers(0, n, E), n, n)
    x = jnp.asarray(rng.normal(size=(n, F)), jnp.float32)
    y = jnp.asarray(rng.integers(0, C, n))
    params = {"w1": jnp.asarray(rng.normal(size=(2 * F, 16)) * 0.3, jnp.float32),
              "w2": jnp.asarray(rng.normal(size=(32, C)) * 0.3, jnp.float32)}
    traces = []

    def sage(block, h, w):  # sum over the sampled in-edges, concatenated with the destination's own row
        h = h * block.node_mask[:, None]  # padding sources carry zeros
        agg = jgo.gspmm(block.graph, h, op="copy_u", reduce="sum")
        return jnp.concatenate([h[:block.graph.n_dst], agg], 1) @ w

    @jax.jit
    def step(params, key, seeds):
        traces.append(1)
        blocks = jgo.sample_blocks(key, g, seeds, [10, 5])

        def loss(p):
            h = x[blocks[0].input_nodes]
            h = jax.nn.relu(sage(blocks[0], h, p["w1"]))
            logits = sage(blocks[1], h, p["w2"])
            real = seeds >= 0
            ll = jax.nn.log_softmax(logits)[jnp.arange(seeds.shape[0]), y[seeds]]
            return -(ll * real).sum() / real.sum()

        val, grads = jax.value_and_grad(loss)(params)
        return val, jax.tree.map(lambda p, d: p - 0.1 * d, params, grads)

    losses = []
    for i in range(4):
        seeds = rng.permutation(n)[:64]
        if i == 3:
            seeds[50:] = -1  # a short last batch, padded
        loss, params = step(params, jax.random.fold_in(jax.random.key(0), i), jnp.asarray(seeds, jnp.int32))
        losses.append(float(loss))
    assert len(traces) == 1
    assert all(np.isfinite(losses))


def test_vmap_over_keys():
    g = _star_graph(50, 9)
    seeds = np.arange(50)
    keys = jax.random.split(jax.random.key(0), 3)
    batched = jax.vmap(lambda k: jgo.sample_neighbors(k, g, seeds, 4).edge_ids)(keys)
    for i in range(3):
        assert np.array_equal(batched[i], jgo.sample_neighbors(keys[i], g, seeds, 4).edge_ids)


# -- errors ---------------------------------------------------------------------------------------

def test_bad_arguments():
    g = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"sample_neighbors: seeds\[1\] = 3 is out of range \[0, 3\)"):
        jgo.sample_neighbors(key, g, np.array([0, 3]), 2)
    with pytest.raises(ValueError, match=r"sample_neighbors: seeds\[0\] = -2"):
        jgo.sample_neighbors(key, g, np.array([-2]), 2)
    with pytest.raises(ValueError, match="sample_neighbors: seeds must be distinct; node 1 is at positions 0 and 2"):
        jgo.sample_neighbors(key, g, np.array([1, 0, 1]), 2)
    with pytest.raises(TypeError, match="sample_neighbors: seeds must have an integer dtype"):
        jgo.sample_neighbors(key, g, np.array([0.0]), 2)
    with pytest.raises(ValueError, match="sample_neighbors: fanout must be >= 0"):
        jgo.sample_neighbors(key, g, np.array([0]), -1)
    with pytest.raises(TypeError, match="sample_neighbors: key must be a JAX PRNG key"):
        jgo.sample_neighbors(np.array([1, 2, 3]), g, np.array([0]), 2)
    with pytest.raises(ValueError, match="sample_neighbors: impl must be one of"):
        jgo.sample_neighbors(key, g, np.array([0]), 2, impl="cuda")
    bip = jgo.Graph.from_edges(np.array([0]), np.array([0]), 2, 1)
    with pytest.raises(ValueError, match="sample_neighbors: g must have one node set"):
        jgo.sample_neighbors(key, bip, np.array([0]), 2)
    with pytest.raises(TypeError, match=r"sample_blocks: fanouts\[1\] must be an int"):
        jgo.sample_blocks(key, g, np.array([0]), [2, 1.5])
    with pytest.raises(ValueError, match="sample_blocks: fanouts must name at least one hop"):
        jgo.sample_blocks(key, g, np.array([0]), [])


def test_out_of_range_seed_under_jit_fails_the_cpu_kernel():
    g = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    f = jax.jit(lambda s: jgo.sample_neighbors(jax.random.key(0), g, s, 2).edge_ids)
    with kernel_index_error(r"jaxgraphops: jgo_sample_neighbors: seed 7 at position 1 out of range \[0, 3\)"):
        out = f(jnp.array([0, 7], jnp.int32)).block_until_ready()
        assert out.tolist()[2:] == [-1, -1]  # the CUDA kernel: a padding seed
    assert f(jnp.array([0, -1], jnp.int32)).tolist() == [2, -1, -1, -1]


def test_malformed_graph_under_jit_fails_the_cpu_kernel():
    g = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    leaves = list(g.tree_flatten()[0])
    leaves[3] = jnp.array([0, 5, 2], jnp.int32)  # csc_src: source 5 of 3
    bad = kernel_only(jgo.Graph(*leaves, 3, 3, validate=False))
    with kernel_index_error("jaxgraphops: jgo_sample_neighbors: an in-edge of seed 1 at position 0 has a source or "
                            "edge id out of range"):
        jgo.sample_neighbors(jax.random.key(0), bad, jnp.array([1]), 2).edge_ids.block_until_ready()
