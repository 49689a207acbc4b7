"""The ops of the peer report and their inputs (NumPy), one :class:`Case` per op.

Every library implements a case from the same arrays (see ``impl_jax.py`` and ``impl_torch.py``),
and the report checks that each library's forward output agrees with jaxgraphops' before it
times anything. ``min_bytes`` and ``no_reuse_bytes`` bound the memory traffic of the forward of a
memory-bound op: every input read once and the output written once
(perfect reuse), or every gathered row read from memory (no reuse).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import workloads

PASSES = ("forward", "forward+backward")


@dataclass(frozen=True)
class Case:
    """One op on one realistic input: ``key`` names it to the implementations."""

    key: str
    op: str
    family: str
    shape: str
    data: dict = field(repr=False)
    passes: tuple = PASSES
    min_bytes: int | None = None
    no_reuse_bytes: int | None = None


def _graph_cases(scale: float):
    """An ogbn-arxiv-sized power-law graph (169,343 nodes, 1,166,243 edges, 128 features)."""
    n, e, f, heads = int(169_343 * scale), int(1_166_243 * scale), 128, 8
    src, dst = workloads.power_law_graph(n, e)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, f)).astype(np.float32)
    # GCN's symmetric normalisation, the typical u_mul_e weight
    deg = np.maximum(np.bincount(dst, minlength=n), 1).astype(np.float32)
    w = (deg[src] * deg[dst]) ** -0.5
    att = (rng.normal(size=2 * f) / np.sqrt(f // heads)).astype(np.float32)
    graph = dict(src=src, dst=dst, n=n, x=x)
    shape = f"power-law N={n:,} E={e:,} F={f}"
    att_shape = f"power-law N={n:,} E={e:,} H={heads} C={f // heads}"
    # int32 indices (one per edge, one offset per node), read x, write out; no reuse: x[src] per edge
    agg = dict(min_bytes=e * 4 + n * 4 + 2 * n * f * 4, no_reuse_bytes=e * (4 + f * 4) + n * (4 + f * 4))
    gspmm = {k: v + e * 4 for k, v in agg.items()}  # + the edge weights
    return [
        Case("gspmm_sum", "gspmm u_mul_e sum", "gspmm", shape, dict(graph, w=w), **gspmm),
        Case("agg_mean", "agg_simple mean", "aggregation", shape, graph, **agg),
        Case("agg_max", "agg_simple max", "aggregation", shape, graph, **agg),
        Case("gat", "mha_gat (GATConv)", "attention", att_shape, dict(graph, att=att, heads=heads)),
        Case("gatv2", "mha_gat_v2 (GATv2Conv)", "attention", att_shape, dict(graph, att=att[:f], heads=heads)),
        Case("transformer", "mha_simple (TransformerConv)", "attention", att_shape, dict(graph, heads=heads)),
    ]


def _pool_cases(scale: float):
    """A QM9-like batch of molecules: graph readout of 128 features."""
    sizes = workloads.molecule_batch_sizes(int(4096 * scale))
    n, f = int(sizes.sum()), 128
    ids = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    x = np.random.default_rng(2).normal(size=(n, f)).astype(np.float32)
    data = dict(x=x, ids=ids, sizes=sizes, n_graphs=len(sizes))
    shape = f"molecules graphs={len(sizes):,} N={n:,} F={f}"
    nbytes = n * 4 + n * f * 4 + len(sizes) * f * 4  # ids, read x once (contiguous), write out
    return [Case("pool_sum", "pool sum", "pool", shape, data, min_bytes=nbytes, no_reuse_bytes=nbytes),
            Case("pool_max", "pool max", "pool", shape, data, min_bytes=nbytes, no_reuse_bytes=nbytes)]


def _dimenet_case(scale: float):
    """An OC20-like batch of 4 periodic metal slabs (MLPerf HPC's DimeNet++ step), cutoff 5 Å."""
    import jaxgraphops as jgo

    structures = workloads.catalyst_batch(max(1, round(4 * scale)))
    g, shifts, _ = jgo.dimenet.radius_graph_pbc(structures, 5.0)
    pos = np.concatenate([p for p, _, _ in structures])
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    vec = (pos[src] + shifts - pos[dst]).astype(np.float32)
    tri = jgo.dimenet.triplets(g)
    n_emb, n_mid = 64, 8
    rng = np.random.default_rng(3)
    dist = np.linalg.norm(vec, axis=1)
    _, sbf_rad = jgo.dimenet.radial_basis(dist / 5.0, np.pi * np.arange(1, 7, dtype=np.float32))
    data = dict(src=src, dst=dst, n=len(pos), vec=vec, sbf_rad=np.asarray(sbf_rad, np.float32),
                emb=rng.normal(size=(g.n_edges, n_emb)).astype(np.float32),
                w=(rng.normal(size=(42 + n_emb, n_mid)) / np.sqrt(42)).astype(np.float32),
                triplets=tri, idx_kj=np.asarray(tri.pairs()[0]), idx_ji=np.asarray(tri.pairs()[1]))
    shape = f"{len(structures)} slabs E={g.n_edges:,} T={tri.n_triplets:,} n_emb={n_emb} n_mid={n_mid}"
    return [Case("dimenet", "agg_edge_to_edge (DimeNet++)", "dimenet", shape, data,
                 passes=PASSES + ("force step",))]


def _gno_cases(scale: float):
    """GNO on pygsp's airfoil mesh: a radius graph (r = 0.01 of the domain, 77 neighbours per node on average), H=64, c=32."""
    import jaxgraphops as jgo

    pos = workloads.airfoil_points()
    g = jgo.radius_graph(pos, None, 0.01 * scale ** 0.5)
    d, hidden, c = 2, 64, 32
    rng = np.random.default_rng(4)
    data = dict(src=np.asarray(g.src), dst=np.asarray(g.dst), offsets=np.asarray(g.csc_offsets), n=len(pos),
                pos=pos.astype(np.float32), f=rng.normal(size=(len(pos), c)).astype(np.float32),
                U=(rng.normal(size=(hidden, d)) * 10).astype(np.float32),
                b_u=rng.normal(size=hidden).astype(np.float32))
    shape = f"airfoil N={len(pos):,} E={g.n_edges:,} H={hidden} c={c}"

    def kernel(p):
        return dict(data, V=(rng.normal(size=(p, hidden)) / np.sqrt(hidden)).astype(np.float32),
                    b_v=rng.normal(size=p).astype(np.float32))

    return [Case("gno_matrix", "gno_conv matrix (NNConv)", "gno", shape, kernel(c * c)),
            Case("gno_diagonal", "gno_conv diagonal (IntegralTransform)", "gno", shape, kernel(c))]


def _relational_cases(scale: float):
    """RGCN's aggregation on the power-law graph, MeshGraphNet's edge-update input on a 2-D mesh, and
    Chemprop's bond message on a batch of molecules (Chemprop's hidden size, 300)."""
    from .relational import molecule_bonds

    rng = np.random.default_rng(5)
    n, e, f, r, b = int(169_343 * scale), int(1_166_243 * scale), 64, 8, 4
    src, dst = workloads.power_law_graph(n, e)
    rgcn = dict(src=src, dst=dst, n=n, x=rng.normal(size=(n, f)).astype(np.float32),
                types=rng.integers(0, r, e).astype(np.int32), comp=rng.normal(size=(r, b)).astype(np.float32))
    n_mesh, fe = int(200_000 * scale), 32
    src, dst = workloads.mesh_graph(n_mesh)
    mesh = dict(src=src, dst=dst, n=n_mesh, x=rng.normal(size=(n_mesh, fe)).astype(np.float32),
                e=rng.normal(size=(len(src), fe)).astype(np.float32))
    n_mol, atoms, d = int(7_000 * scale), 18, 300
    src, dst, rev = molecule_bonds(n_mol, atoms)
    bonds = dict(src=src, dst=dst, n=n_mol * atoms, rev=rev, h=rng.normal(size=(len(src), d)).astype(np.float32))
    return [
        Case("hg_basis", "agg_hg_basis (RGCN, bases, mean)", "relational",
             f"power-law N={n:,} E={e:,} D={f} R={r} B={b}", rgcn),
        Case("update_efeat", "update_efeat concat (MeshGraphNet)", "relational",
             f"2-D mesh N={n_mesh:,} E={len(mesh['src']):,} F={fe}+{fe}+{fe}", mesh),
        Case("dmpnn", "agg_dmpnn (Chemprop)", "relational",
             f"{n_mol:,} molecules E={len(src):,} bonds D={d}", bonds),
    ]


def cases(scale: float = 1.0) -> list[Case]:
    """Every case of the report; ``scale`` multiplies the graph sizes (1: the shapes above)."""
    return [*_graph_cases(scale), *_pool_cases(scale), *_dimenet_case(scale), *_gno_cases(scale),
            *_relational_cases(scale)]
