"""RGCN's ``agg_hg_basis``, MeshGraphNet's ``update_efeat`` and Chemprop's ``agg_dmpnn`` against the pure-JAX reference
(``impl="xla"``), forward and forward+backward (the value and gradient of ``sum(out ** 2)`` in
every float input, as the other suites), float32.

- ``agg_hg_basis``: N = 100k nodes, E = 1M uniformly random edges, D = 32, R = 8 relations, with
  B = 4 bases and without (one block per relation), mean per relation (the issue's shape).
- ``update_efeat``: a 2-D mesh of 200k nodes (6 nearest neighbours, both directions, about 1.6M
  edges), ``[edge | x_src | x_dst]`` with 32 features each (``"concat"``) and their sum (``"sum"``).
- ``agg_dmpnn``: a batch of QM9-sized molecules (chains of 18 atoms with a ring bond each, both
  directions of every bond, ``rev_edge_ids`` pairing them), D = 300 (Chemprop's hidden size),
  about 250k directed bonds at ``--scale 1``.

``python -m benchmarks --suite relational`` times them with the other suites."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

from .workloads import mesh_graph


def _loss_and_grads(fn, argnums):
    return jax.value_and_grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums)


def _hg_basis_cases(scale: float):
    n, e, d, r, b = int(100_000 * scale), int(1_000_000 * scale), 32, 8, 4
    rng = np.random.default_rng(0)
    g = jgo.Graph.from_edges(rng.integers(0, n, e).astype(np.int32), rng.integers(0, n, e).astype(np.int32), n, n)
    x = jnp.asarray(rng.normal(size=(n, d)).astype(np.float32))
    types = jnp.asarray(rng.integers(0, r, e).astype(np.int32))
    comp = jnp.asarray(rng.normal(size=(r, b)).astype(np.float32))
    for with_comp in (True, False):
        def op(impl, with_comp=with_comp):  # the graph is an argument, not a constant XLA would try to fold
            if with_comp:
                return lambda g, x, types, comp: jgo.agg_hg_basis(g, x, types, comp, n_edge_types=r,
                                                                  norm_by_dst_degree=True, impl=impl)
            return lambda g, x, types: jgo.agg_hg_basis(g, x, types, n_edge_types=r, norm_by_dst_degree=True,
                                                        impl=impl)

        operands = (g, x, types, comp) if with_comp else (g, x, types)
        argnums = (1, 3) if with_comp else 1
        shape = f"N={n:,} E={e:,} D={d} R={r} " + (f"B={b}" if with_comp else "no bases") + " mean f32"
        yield "agg_hg_basis", shape, "forward", jax.jit(op(None)), jax.jit(op("xla")), operands
        yield ("agg_hg_basis", shape, "forward+backward", jax.jit(_loss_and_grads(op(None), argnums)),
               jax.jit(_loss_and_grads(op("xla"), argnums)), operands)


def molecule_bonds(n_molecules: int, atoms: int = 18):
    """Directed bonds of ``n_molecules`` chains of ``atoms`` atoms closed by one ring bond: ``(src, dst, rev)``."""
    u = np.concatenate([np.arange(atoms - 1), [0]])
    v = np.concatenate([np.arange(1, atoms), [5]])
    offsets = np.repeat(np.arange(n_molecules) * atoms, len(u))
    u, v = np.tile(u, n_molecules) + offsets, np.tile(v, n_molecules) + offsets
    m = len(u)
    src, dst = np.concatenate([u, v]), np.concatenate([v, u])
    rev = np.concatenate([np.arange(m, 2 * m), np.arange(m)])
    return src.astype(np.int32), dst.astype(np.int32), rev.astype(np.int32)


def _update_efeat_cases(scale: float):
    n, f = int(200_000 * scale), 32
    src, dst = mesh_graph(n)
    g = jgo.Graph.from_edges(src, dst, n, n)
    rng = np.random.default_rng(0)
    e = jnp.asarray(rng.normal(size=(len(src), f)).astype(np.float32))
    x = jnp.asarray(rng.normal(size=(n, f)).astype(np.float32))
    for mode in ("concat", "sum"):
        def op(impl, mode=mode):
            return lambda g, e, x: jgo.update_efeat(g, e, x, x, mode=mode, impl=impl)

        shape = f"2-D mesh N={n:,} E={len(src):,} F={f} {mode} f32"
        yield "update_efeat", shape, "forward", jax.jit(op(None)), jax.jit(op("xla")), (g, e, x)
        yield ("update_efeat", shape, "forward+backward", jax.jit(_loss_and_grads(op(None), (1, 2))),
               jax.jit(_loss_and_grads(op("xla"), (1, 2))), (g, e, x))


def _dmpnn_cases(scale: float):
    n_mol, atoms, d = int(7_000 * scale), 18, 300
    src, dst, rev = molecule_bonds(n_mol, atoms)
    g = jgo.Graph.from_edges(src, dst, n_mol * atoms, n_mol * atoms)
    h = jnp.asarray(np.random.default_rng(0).normal(size=(len(src), d)).astype(np.float32))
    rev = jnp.asarray(rev)

    def op(impl):
        return lambda g, h, rev: jgo.agg_dmpnn(g, h, rev, impl=impl)

    shape = f"{n_mol:,} molecules of {atoms} atoms, E={len(src):,} directed bonds, D={d} f32"
    yield "agg_dmpnn", shape, "forward", jax.jit(op(None)), jax.jit(op("xla")), (g, h, rev)
    yield ("agg_dmpnn", shape, "forward+backward", jax.jit(_loss_and_grads(op(None), 1)),
           jax.jit(_loss_and_grads(op("xla"), 1)), (g, h, rev))


def cases(scale: float = 1.0):
    """Yields (name, shape, pass, kernel_fn, reference_fn, args) for agg_hg_basis, update_efeat and agg_dmpnn."""
    yield from _hg_basis_cases(scale)
    yield from _update_efeat_cases(scale)
    yield from _dmpnn_cases(scale)
