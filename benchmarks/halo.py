"""``python -m benchmarks.halo``: what a partitioned layer exchanges (jgo.partition_graph), per method.

For a mesh-like graph (a triangulated 2-D grid) and a power-law graph, each of at least 100k nodes, and
each partition method and part count: the balance of the parts (local edges, max over mean), the halo
rows (each part's copies of other parts' nodes), and the bytes one layer moves for float32 features of
width ``--features``: the halo rows themselves, what ``halo_exchange``'s ``all_to_all`` moves (its send
table is padded to the largest message), and what an all-gather of every node would move. No timing
but the partitioning's: these are counts. ``--markdown FILE`` writes the tables into FILE, with the
paper model of a layer at ogbn-products scale on 8 GPUs (:func:`paper_model`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import jaxgraphops as jgo

from .tables import replace_section

BEGIN, END = "<!-- halo:begin -->", "<!-- halo:end -->"
METHODS = ("metis", "coordinates", "contiguous")


def mesh_graph(side: int):
    """A triangulated ``side x side`` grid, both directions of every edge; its node coordinates."""
    ids = np.arange(side * side).reshape(side, side)
    pairs = [(ids[:, :-1], ids[:, 1:]), (ids[:-1, :], ids[1:, :]), (ids[:-1, :-1], ids[1:, 1:])]
    a = np.concatenate([p[0].ravel() for p in pairs])
    b = np.concatenate([p[1].ravel() for p in pairs])
    xy = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1).reshape(-1, 2)
    return jgo.Graph.from_edges(np.concatenate([a, b]), np.concatenate([b, a]), side * side, side * side), xy


def power_law_graph(n: int, avg_degree: int, seed: int = 0):
    """Undirected edges whose endpoints follow a Zipf-like law (a few hubs), both directions; random
    coordinates (the graph has no geometry, so coordinate bisection has nothing to use)."""
    rng = np.random.default_rng(seed)
    p = (np.arange(n) + 1.0) ** -0.9
    p /= p.sum()
    m = n * avg_degree // 2
    a, b = rng.integers(0, n, m), rng.choice(n, m, p=p)
    keep = a != b
    a, b = a[keep], rng.permutation(n)[b[keep]]  # hubs at random ids
    return jgo.Graph.from_edges(np.concatenate([a, b]), np.concatenate([b, a]), n, n), rng.normal(size=(n, 2))


def measure(g, coords, method: str, n_parts: int, features: int) -> dict:
    start = time.perf_counter()
    pg = jgo.partition_graph(g, n_parts, method=method, coords=coords if method == "coordinates" else None)
    seconds = time.perf_counter() - start
    valid = np.asarray(pg.edges) >= 0
    edges = valid.sum(axis=1)
    halo = np.asarray(pg.halo_valid).sum(axis=1)
    row = 4 * features
    cut = (valid & (np.asarray(pg.graph.src) >= pg.n_owned)).sum() / g.n_edges  # edges from a halo row
    return dict(method=method, parts=n_parts, seconds=seconds, edge_balance=edges.max() / edges.mean(), cut=cut,
                halo_total=int(halo.sum()), halo_max=int(halo.max()), halo_bytes=int(halo.sum()) * row,
                all_to_all_bytes=n_parts * n_parts * pg.send.shape[2] * row,
                all_gather_bytes=(n_parts - 1) * g.n_dst * row, n_nodes=g.n_dst)


def table(rows) -> str:
    head = ("| method | parts | partition s | local edges max/mean | cut edges | halo rows (total) | halo rows (max "
            "part) | halo MB | all_to_all MB | all-gather MB |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    return head + "".join(
        f"| {r['method']} | {r['parts']} | {r['seconds']:.1f} | {r['edge_balance']:.2f} | {r['cut']:.1%} "
        f"| {r['halo_total']:,} "
        f"| {r['halo_max']:,} | {r['halo_bytes'] / 1e6:.1f} | {r['all_to_all_bytes'] / 1e6:.1f} "
        f"| {r['all_gather_bytes'] / 1e6:.1f} |\n" for r in rows)


def paper_model(halo_per_owned: float, features: int = 256) -> str:
    """Time per layer per GPU at ogbn-products scale on 8 H100s: exchange vs kernel at the roofline."""
    nodes, edges, gpus = 2_449_029, 123_718_280, 8  # ogbn-products, both directions of its 61.9M edges
    row = 4 * features
    hbm, link = 3.35e12, 450e9  # H100 SXM HBM3; NVLink 4, one direction (900 GB/s both)
    owned = nodes / gpus
    exchange = halo_per_owned * owned * row
    kernel = (edges / gpus) * (row + 8) + owned * row  # a gathered row and an index per edge, the output rows
    return (f"Paper model, one `gspmm` sum layer of width {features} (float32) at ogbn-products scale "
            f"({nodes:,} nodes, {edges:,} directed edges) on {gpus} H100 SXM GPUs. Assumptions: the halo "
            f"per owned node of the power-law graph above with METIS on {gpus} parts ({halo_per_owned:.2f}) "
            f"carries over to products (pessimistic: products has communities for METIS to find, this random "
            f"graph none); the exchange runs at NVLink 4's {link / 1e9:.0f} GB/s per direction, "
            f"the kernel at HBM3's {hbm / 1e12:.2f} TB/s with no reuse of gathered rows (its upper bound). "
            f"Per GPU: exchange {exchange / 1e6:.0f} MB -> {exchange / link * 1e3:.2f} ms; kernel "
            f"{kernel / 1e9:.1f} GB -> {kernel / hbm * 1e3:.2f} ms. The exchange is "
            f"{exchange / link / (kernel / hbm):.0%} of the kernel time, and it can overlap the local "
            f"edges' work (not done today: the exchange precedes the op).\n")


def run(mesh_side: int, power_nodes: int, parts, features: int):
    graphs = {"mesh": mesh_graph(mesh_side), "power-law": power_law_graph(power_nodes, 10)}
    results = {}
    for name, (g, coords) in graphs.items():
        results[name] = [measure(g, coords, m, p, features) for p in parts for m in METHODS]
        print(f"\n{name}: {g.n_dst:,} nodes, {g.n_edges:,} edges\n" + table(results[name]), flush=True)
    return graphs, results


def markdown(graphs, results, features: int, command: str) -> str:
    text = (f"Command: `{command}`; features {features} float32 (MB = 10^6 bytes per layer, forward; the "
            f"backward moves the same again). Halo rows: the copies of other parts' nodes a layer needs; "
            f"all_to_all: what `halo_exchange` moves (its send table padded to the largest message); "
            f"all-gather: every node to every part.\n\n")
    for name, (g, _) in graphs.items():
        text += f"**{name}** ({g.n_dst:,} nodes, {g.n_edges:,} directed edges)\n\n{table(results[name])}\n"
    metis8 = [r for r in results["power-law"] if r["method"] == "metis" and r["parts"] == max(r["parts"] for r in
                                                                                             results["power-law"])]
    ratio = metis8[0]["halo_total"] / metis8[0]["n_nodes"]
    return text + paper_model(ratio)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.halo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mesh-side", type=int, default=320, help="grid side of the mesh graph (320: 102,400 nodes)")
    parser.add_argument("--power-nodes", type=int, default=100_000, help="nodes of the power-law graph")
    parser.add_argument("--parts", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--markdown", help="write the tables into this file (e.g. BENCHMARKS.md)")
    args = parser.parse_args(argv)
    graphs, results = run(args.mesh_side, args.power_nodes, args.parts, args.features)
    if args.markdown:
        body = markdown(graphs, results, args.features, "python -m benchmarks.halo --markdown BENCHMARKS.md")
        replace_section(Path(args.markdown), BEGIN, END, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
