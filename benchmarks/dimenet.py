"""DimeNet++ triplet aggregation (fused) against its pure-JAX reference ``impl="xla"`` (gathers,
two matmuls, a segment sum): forward, forward+backward and a force-training step (the gradient
in the parameters of a loss on ``d energy / d vec``, a second-order derivative)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo


def knn_graph(n_nodes: int, k: int, seed: int = 0):
    """Directed edges ``j -> i`` from the ``k`` nearest neighbours ``j`` of each of ``n_nodes``
    random points (a molecule-like batch), and the edge vectors ``pos[j] - pos[i]``."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, (n_nodes / 0.05) ** (1 / 3), size=(n_nodes, 3))
    _, nbr = cKDTree(pos).query(pos, k + 1)
    dst = np.repeat(np.arange(n_nodes), k)
    src = nbr[:, 1:].reshape(-1)
    g = jgo.Graph.from_edges(src.astype(np.int32), dst.astype(np.int32), n_nodes, n_nodes)
    return g, pos[src] - pos[dst]


def cases(scale: float = 1.0):
    """Yields (name, shape, pass, kernel_fn, reference_fn, args) for the DimeNet++ benchmark."""
    n_emb, n_mid = 64, 8
    g, vec = knn_graph(int(1500 * scale), 20)
    t = jgo.dimenet.triplets(g)
    rng = np.random.default_rng(1)
    e = g.n_edges
    vec = jnp.asarray(vec, jnp.float32)
    dist = jnp.linalg.norm(vec, axis=1)
    _, sbf = jgo.dimenet.radial_basis(dist / (1.01 * dist.max()), jnp.pi * jnp.arange(1, 7, dtype=jnp.float32))
    emb = jnp.asarray(rng.normal(size=(e, n_emb)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(42 + n_emb, n_mid)) / np.sqrt(42), jnp.float32)

    def op(impl):
        return lambda vec, sbf, emb, w: jgo.dimenet.agg_edge_to_edge(vec, sbf, emb, w, t, impl=impl)

    def forward_backward(fn):
        return jax.value_and_grad(lambda *a: jnp.mean(fn(*a) ** 2), (0, 1, 2, 3))

    def force_step(fn):
        def loss(sbf, emb, w, vec):
            forces = jax.grad(lambda v: jnp.sum(jnp.tanh(fn(v, sbf, emb, w))))(vec)
            return jnp.mean(forces**2)
        return jax.value_and_grad(lambda vec, sbf, emb, w: loss(sbf, emb, w, vec), (1, 2, 3))

    shape = f"E={e:,} T={t.n_triplets:,} n_emb={n_emb} n_mid={n_mid} f32"
    args = (vec, sbf, emb, w)
    yield "agg_edge_to_edge", shape, "forward", jax.jit(op(None)), jax.jit(op("xla")), args
    yield ("agg_edge_to_edge", shape, "forward+backward", jax.jit(forward_backward(op(None))),
           jax.jit(forward_backward(op("xla"))), args)
    yield ("agg_edge_to_edge", shape, "force step (2nd order)", jax.jit(force_step(op(None))),
           jax.jit(force_step(op("xla"))), args)
