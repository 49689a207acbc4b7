"""Threads and leaks (issue 19): concurrent calls from 8 Python threads give bitwise the single-threaded
results, and the resident set stays flat over 10,000 jitted calls."""

import os
import random
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo

N_THREADS = 8


def _inputs(seed=0, n=300, n_edges=3000, heads=2, c=8):
    rng = np.random.default_rng(seed)
    g = random_graph(rng, n, n, n_edges)
    f = lambda *s: jnp.asarray(rng.normal(size=s), jnp.float32)  # noqa: E731
    return g, dict(x=f(n, heads * c), y=f(n, heads * c), e=f(n_edges, heads * c), a2=f(2 * heads * c), a1=f(heads * c),
                   f=f(n, 3), dx=f(n_edges, 2), U=f(5, 2), b_u=f(5), V=f(6, 5), b_v=f(6), w=jnp.abs(f(n_edges)),
                   ids=jnp.asarray(np.sort(rng.integers(0, 7, n)), jnp.int32))


def _workloads(g, v):
    """name -> zero-argument function; every op, forward and gradients (weights included)."""
    t = jgo.dimenet.triplets(g)
    rng = np.random.default_rng(1)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    pos = rng.normal(size=(g.n_src, 3))
    vec = jnp.asarray(pos[src] - pos[dst] + 1e-3, jnp.float32)
    sbf = jnp.asarray(rng.normal(size=(g.n_edges, 42)), jnp.float32)
    emb = jnp.asarray(rng.normal(size=(g.n_edges, 4)), jnp.float32)
    wd = jnp.asarray(rng.normal(size=(46, 3)) / 4, jnp.float32)

    def loss(out):
        return jnp.sum(jnp.sin(out))

    fns = {
        "gspmm max": lambda x: jgo.gspmm(g, x, v["e"], op="u_mul_e", reduce="max"),
        "gspmm sum grad": jax.grad(lambda x, e: loss(jgo.gspmm(g, x, e, op="u_add_e", reduce="sum")), (0, 1)),
        "gsddmm dot grad": lambda x: jax.grad(lambda x, y: loss(jgo.gsddmm(g, x, y, op="dot")), (0, 1))(x, v["y"]),
        "edge_softmax grad": lambda x: jax.grad(lambda e: loss(jgo.edge_softmax(g, e)))(v["e"] * x[0, 0]),
        "mha_gat grad": lambda x: jax.grad(lambda x, a, e: loss(jgo.mha_gat(g, x, a, num_heads=2, edge_feat=e)),
                                           (0, 1, 2))(x, jnp.concatenate([v["a2"], v["a1"]]), v["e"]),
        "mha_gat_v2 grad": lambda x: jax.grad(lambda x, y, a: loss(jgo.mha_gat_v2(g, x, y, a, num_heads=2)),
                                              (0, 1, 2))(x, v["y"], v["a1"]),
        "mha_simple grad": lambda x: jax.grad(lambda q, k: loss(jgo.mha_simple(g, q, k, v["y"], num_heads=2)),
                                              (0, 1))(x, v["y"]),
        "gno_conv grad": lambda x: jax.grad(lambda *a: loss(jgo.gno_conv(g, *a, edge_weight=v["w"], reduce="mean")),
                                            tuple(range(6)))(v["f"] * x[0, 0], v["dx"], v["U"], v["b_u"], v["V"],
                                                             v["b_v"]),
        "agg_concat": lambda x: jgo.agg_concat(g, x, edge_weight=v["w"], reduce="mean"),
        "pool": lambda x: jgo.pool(x, v["ids"], 7, reduce="max", ids_are_sorted=True),
        "agg_edge_to_edge grad": lambda x: jax.grad(
            lambda vec, e, w: loss(jgo.dimenet.agg_edge_to_edge(vec, sbf, e, w, t)), (0, 1, 2))(vec, emb * x[0, 0], wd),
    }
    fns["gspmm sum grad"] = (lambda f: lambda x: f(x, v["e"]))(fns["gspmm sum grad"])
    work = {}
    for name, fn in fns.items():
        work[f"{name} eager"] = (lambda fn: lambda: fn(v["x"]))(fn)
        jitted = jax.jit(fn)
        work[f"{name} jit"] = (lambda jitted: lambda: jitted(v["x"]))(jitted)
    return work


def _bits(out):
    return [np.asarray(leaf).copy() for leaf in jax.tree_util.tree_leaves(jax.block_until_ready(out))]


def test_concurrent_calls_are_bitwise_the_single_threaded_results():
    g, v = _inputs()
    work = _workloads(g, v)
    single = {name: _bits(fn()) for name, fn in work.items()}  # also compiles everything once
    names = list(work)
    rounds = 2
    mismatches, errors, calls = [], [], [0]
    lock = threading.Lock()
    start = threading.Barrier(N_THREADS)

    def run(k):
        order = names * rounds
        random.Random(k).shuffle(order)
        start.wait()
        for name in order:
            try:
                got = _bits(work[name]())
            except Exception as exc:  # noqa: BLE001
                with lock:
                    errors.append(f"{name}: {exc!r}")
                continue
            same = len(got) == len(single[name]) and all(
                a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                for a, b in zip(got, single[name]))
            with lock:
                calls[0] += 1
                if not same:
                    mismatches.append(f"thread {k}: {name}")

    threads = [threading.Thread(target=run, args=(k,)) for k in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    assert not mismatches, mismatches[:10]
    assert calls[0] == N_THREADS * rounds * len(names)


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_resident_set_is_flat_over_10000_jitted_calls():
    g, v = _inputs(seed=2, n=40, n_edges=160, heads=2, c=4)
    t = jgo.dimenet.triplets(g)
    sbf = jnp.ones((g.n_edges, 42)) * 0.1
    vec = jnp.asarray(np.random.default_rng(3).normal(size=(g.n_edges, 3)), jnp.float32)

    @jax.jit
    def step(x, e, a1, U, V, w):
        def loss(x, e, a1, U, V, w):
            h = jgo.gspmm(g, x, e, op="u_mul_e", reduce="max")
            h = h + jgo.mha_gat_v2(g, x, x, a1, num_heads=2, edge_feat=e)
            h = h + jgo.mha_simple(g, x, x, x, num_heads=2)
            z = jgo.edge_softmax(g, jgo.gsddmm(g, x, x, op="dot"))
            gno = jgo.gno_conv(g, x[:, :2], v["dx"], U, v["b_u"], V, v["b_v"], edge_weight=w)
            tri = jgo.dimenet.agg_edge_to_edge(vec, sbf, e[:, :4], jnp.ones((46, 2)) * 0.1, t)
            return jnp.sum(h) + jnp.sum(z) + jnp.sum(gno) + jnp.sum(tri)
        return jax.grad(loss, argnums=(0, 1, 2, 3, 4, 5))(x, e, a1, U, V, w)

    x, e = v["x"], v["e"]
    U, V, a1, w = v["U"], jnp.ones((6, 5)) * 0.1, v["a1"], v["w"]

    def calls(n):
        out = None
        for _ in range(n):
            out = step(x, e, a1, U, V, w)
        jax.block_until_ready(out)

    calls(1000)  # warm-up: compilation, caches, allocator pools
    before = _rss_bytes()
    t0 = time.perf_counter()
    samples = []
    for _ in range(10):
        calls(1000)
        samples.append(_rss_bytes())
    seconds = time.perf_counter() - t0
    # A leak grows in every block of 1,000 calls; a one-time step (an allocator arena's next size, seen once in CI:
    # 856 MiB six times, then 865 four times) in one. So: the growth without the largest step (a leak of 0.45 KB a
    # call still adds 4 MiB over the other 9,000 calls), and that step bounded on its own.
    steps = np.diff([before, *samples]) / 2**20
    print(f"RSS {before / 2**20:.1f} MiB, then {[round(s / 2**20, 1) for s in samples]} MiB; {seconds:.1f} s")
    report = f"{[s // 2**20 for s in samples]} MiB after {before // 2**20} MiB"
    assert steps.sum() - steps.max() < 4, f"RSS grew {steps.sum():.1f} MiB over 10,000 calls: {report}"
    assert steps.max() < 32, f"RSS grew {steps.max():.1f} MiB in 1,000 calls: {report}"
    assert seconds < 30, f"10,000 calls took {seconds:.1f} s"
