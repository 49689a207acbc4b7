"""Draws the data-flow figures of the user guide (``docs/_static/figures/*.svg``).

Run once after changing a figure, from outside the repository root (it imports the installed
jaxgraphops for the graph layouts and the sampled block it shows), and commit the SVGs:

    cd /tmp && python /path/to/jaxgraphops/docs/_figures_src/make_figures.py [--png]

Every figure uses the guide's example graph: 4 nodes and 6 edges in input order
``e0: 0->1, e1: 2->0, e2: 3->1, e3: 1->2, e4: 2->1, e5: 3->0`` (node 3 has no in-edges). The arrays
drawn are the library's own (``Graph.from_edges``, ``sample_neighbors``), not retyped.
"""

import argparse
from pathlib import Path

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

import jaxgraphops as jgo

OUT = Path(__file__).resolve().parent.parent / "_static" / "figures"
SRC = np.array([0, 2, 3, 1, 2, 3])
DST = np.array([1, 0, 1, 2, 1, 0])
GRAPH = jgo.Graph.from_edges(SRC, DST, 4, 4)
NODE_COLORS = ["#8ecae6", "#ffb703", "#90be6d", "#f4a3a8"]  # node 0..3
EDGE_COLOR, OP_COLOR, INK, MUTED = "#e9ecef", "#fff3d6", "#212529", "#6c757d"
NODE_POS = {0: (0.0, 0.5), 1: (1.0, 0.5), 2: (0.5, 0.0), 3: (0.5, 1.0)}  # a diamond: no edges cross
CELL_W, CELL_H = 0.42, 0.27

plt.rcParams.update(
    {"svg.fonttype": "none", "svg.hashsalt": "jaxgraphops", "font.family": "DejaVu Sans", "font.size": 9}
)


def canvas(width, height):
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def column(ax, x, y_top, labels, colors, title=None, shape=None, width=CELL_W, group_gaps=(), fontsize=8):
    """A column of cells from ``y_top`` down; returns (x_left, y_bottom, x_right, y_top). ``group_gaps``:
    row indices before which a small gap separates groups (a CSC grouping)."""
    y = y_top
    for i, (label, color) in enumerate(zip(labels, colors)):
        if i in group_gaps:
            y -= 0.07
        ax.add_patch(Rectangle((x, y - CELL_H), width, CELL_H, facecolor=color, edgecolor=INK, lw=0.6))
        ax.text(x + width / 2, y - CELL_H / 2, label, ha="center", va="center", fontsize=fontsize, color=INK)
        y -= CELL_H
    if title:
        ax.text(x + width / 2, y_top + 0.08, title, ha="center", va="bottom", fontsize=9, color=INK, weight="bold")
    if shape:
        ax.text(x + width / 2, y - 0.07, shape, ha="center", va="top", fontsize=7.5, color=MUTED)
    return x, y, x + width, y_top


def box(ax, cx, cy, text, width, height, color=OP_COLOR, fontsize=8.5):
    ax.add_patch(
        FancyBboxPatch(
            (cx - width / 2, cy - height / 2),
            width,
            height,
            boxstyle="round,pad=0.04,rounding_size=0.08",
            facecolor=color,
            edgecolor=INK,
            lw=0.8,
        )
    )
    ax.text(cx, cy, text, ha="center", va="center", fontsize=fontsize, color=INK, linespacing=1.35)
    return cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2


def arrow(ax, start, end, text=None, color=INK, rad=0.0, lw=1.0, text_offset=(0, 0.08), fontsize=7.5):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=9,
            color=color,
            lw=lw,
            connectionstyle=f"arc3,rad={rad}",
            shrinkA=1,
            shrinkB=1,
        )
    )
    if text:
        ax.text(
            (start[0] + end[0]) / 2 + text_offset[0],
            (start[1] + end[1]) / 2 + text_offset[1],
            text,
            ha="center",
            va="bottom",
            fontsize=fontsize,
            color=MUTED,
        )


def right(b):
    return b[2], (b[1] + b[3]) / 2


def left(b):
    return b[0], (b[1] + b[3]) / 2


def graph(ax, origin, scale=0.9, edge_labels=True, highlight=None, node_colors=NODE_COLORS, title=None):
    """The example graph at ``origin`` (lower left); ``highlight``: edge ids drawn thick."""
    pos = {v: (origin[0] + scale * p[0], origin[1] + scale * p[1]) for v, p in NODE_POS.items()}
    for e, (s, d) in enumerate(zip(SRC, DST)):
        rad = 0.25 if (d, s) in zip(SRC, DST) else 0.0
        thick = highlight is not None and e in highlight
        ax.add_patch(
            FancyArrowPatch(
                pos[s],
                pos[d],
                arrowstyle="-|>",
                mutation_scale=9,
                shrinkA=9,
                shrinkB=9,
                connectionstyle=f"arc3,rad={rad}",
                color=INK if thick or highlight is None else MUTED,
                lw=1.8 if thick else 0.9,
            )
        )
        if edge_labels:  # beside the curve's midpoint, on the side arc3 bends it to (dy, -dx)
            mx, my = (pos[s][0] + pos[d][0]) / 2, (pos[s][1] + pos[d][1]) / 2
            dx, dy = pos[d][0] - pos[s][0], pos[d][1] - pos[s][1]
            norm = np.hypot(dx, dy)
            off = 0.12 + rad * norm / 2
            ax.text(
                mx + dy / norm * off, my - dx / norm * off, f"e{e}", ha="center", va="center", fontsize=7, color=MUTED
            )
    for v, p in pos.items():
        ax.add_patch(plt.Circle(p, 0.12, facecolor=node_colors[v], edgecolor=INK, lw=0.8, zorder=3))
        ax.text(*p, str(v), ha="center", va="center", fontsize=8.5, zorder=4, weight="bold")
    if title:
        ax.text(origin[0] + scale / 2, origin[1] + scale + 0.25, title, ha="center", fontsize=9, weight="bold")


def row_title(ax, x, y, text):
    ax.text(x, y, text, ha="left", va="center", fontsize=10, weight="bold", color=INK, family="DejaVu Sans Mono")


def save(fig, name, png):
    OUT.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT / f"{name}.svg", metadata={"Date": None, "Creator": None})
    if png:
        fig.savefig(Path(png) / f"{name}.png", dpi=110)
    plt.close(fig)


# -- the figures ---------------------------------------------------------------------------------------


def fig_graph(png):
    """Input edge order, the CSC view (edges grouped by destination) and the reverse CSR view (by source)."""
    g = GRAPH
    fig, ax = canvas(10.2, 3.5)
    graph(ax, (0.3, 1.1), scale=1.4, title="edges src -> dst")
    ax.text(1.0, 0.75, "node 3: no in-edges", ha="center", fontsize=7.5, color=MUTED)
    E = g.n_edges
    edge_colors = [NODE_COLORS[d] for d in DST]
    top = 2.95
    x = 2.5
    ax.text(x + 0.65, top + 0.32, "input edge order", ha="center", fontsize=9.5, weight="bold")
    column(ax, x, top, [str(s) for s in SRC], [NODE_COLORS[s] for s in SRC], title="src")
    column(ax, x + 0.46, top, [str(d) for d in DST], edge_colors, title="dst")
    column(ax, x + 0.92, top, [f"e{e}" for e in range(E)], [EDGE_COLOR] * E, title="edge")
    ax.text(
        x + 0.65,
        top - E * CELL_H - 0.3,
        "edge-valued arrays (weights,\nfeatures, attention) use this order",
        ha="center",
        va="top",
        fontsize=7.5,
        color=MUTED,
    )

    def grouped(x, kind, offsets, other, eid, n_groups, group_name, other_name, group_color):
        gaps = [int(o) for o in offsets[1:-1]]
        ax.text(x + 0.9, top + 0.32, kind, ha="center", fontsize=9.5, weight="bold")
        column(
            ax,
            x,
            top,
            [str(int(o)) for o in offsets],
            [EDGE_COLOR] * len(offsets),
            title=f"{kind.split()[0].lower()}_offsets",
            width=0.55,
        )
        column(
            ax,
            x + 0.7,
            top,
            [str(int(v)) for v in other],
            [NODE_COLORS[int(v)] for v in other],
            title=other_name,
            group_gaps=gaps,
            width=0.55,
        )
        column(
            ax,
            x + 1.3,
            top,
            [f"e{int(e)}" for e in eid],
            [group_color(int(e)) for e in eid],
            title=f"{kind.split()[0].lower()}_eid",
            group_gaps=gaps,
            width=0.55,
        )
        y = top
        for grp in range(n_groups):
            lo, hi = int(offsets[grp]), int(offsets[grp + 1])
            if lo == hi:
                continue
            y_lo = top - lo * CELL_H - 0.07 * sum(1 for gp in gaps if gp <= lo)
            y_hi = top - hi * CELL_H - 0.07 * sum(1 for gp in gaps if gp < hi)
            ax.plot(
                [x + 1.9, x + 1.95, x + 1.95, x + 1.9],
                [y_lo - 0.02, y_lo - 0.02, y_hi + 0.02, y_hi + 0.02],
                color=INK,
                lw=0.7,
            )
            ax.text(x + 2.0, (y_lo + y_hi) / 2, f"{group_name} {grp}", va="center", fontsize=7.5, color=INK)
            y = y_hi
        return y

    grouped(
        4.35,
        "CSC (by destination)",
        g.csc_offsets,
        g.csc_src,
        g.csc_eid,
        4,
        "into",
        "csc_src",
        lambda e: NODE_COLORS[DST[e]],
    )
    grouped(
        7.25,
        "CSR (by source)",
        g.csr_offsets,
        g.csr_dst,
        g.csr_eid,
        4,
        "from",
        "csr_dst",
        lambda e: NODE_COLORS[DST[e]],
    )
    ax.text(
        5.6,
        0.45,
        "forward reductions walk the CSC (one task per destination, in input order within it);\n"
        "backward passes for source-side gradients walk the CSR: no atomics, results independent of threads",
        ha="center",
        fontsize=7.5,
        color=MUTED,
    )
    save(fig, "graph", png)


def fig_generic(png):
    fig, ax = canvas(10.2, 5.9)
    E = len(SRC)
    # gspmm: the u arrow passes above e, which starts lower
    row_title(ax, 0.2, 5.65, "gspmm(g, u, e, op, reduce)")
    u = column(ax, 0.3, 5.25, [f"u[{v}]" for v in range(4)], NODE_COLORS, title="u", shape="[n_src, F]")
    e = column(ax, 1.05, 4.75, [f"e{k}" for k in range(E)], [EDGE_COLOR] * E, title="e", shape="[E, ...]")
    msg = column(
        ax,
        3.15,
        5.25,
        [f"op(u[{s}], e{k})" for k, s in enumerate(SRC)],
        [NODE_COLORS[d] for d in DST],
        width=1.1,
        title="message per edge",
        shape="input edge order",
    )
    arrow(ax, (u[2], 5.1), (msg[0], 5.1), "gather u[src_e]", text_offset=(0.3, 0.03))
    arrow(
        ax,
        right(e),
        (msg[0], right(e)[1]),
        "op: copy_u, copy_e, u_mul_e,\nu_add_e, u_sub_e, u_div_e",
        text_offset=(0, -0.5),
    )
    red = box(ax, 5.75, 4.45, "reduce over the\nin-edges of each dst\n(CSC: sum, mean,\nmax, min)", 1.45, 0.95)
    arrow(ax, right(msg), left(red))
    out = column(
        ax,
        7.2,
        5.0,
        ["Σ e1, e5", "Σ e0, e2, e4", "Σ e3", "0 (empty)"],
        NODE_COLORS,
        width=1.05,
        title="out",
        shape="[n_dst, F]",
    )
    arrow(ax, right(red), left(out))
    ax.text(
        8.45,
        4.5,
        "max/min: the gradient goes\nto the first extreme edge\nin input edge order;\n"
        "an empty row gives 0\nand zero gradients",
        fontsize=7.5,
        color=MUTED,
        va="center",
    )
    # gsddmm
    row_title(ax, 0.2, 2.65, "gsddmm(g, lhs, rhs, op, lhs_target, rhs_target)")
    lhs = column(ax, 0.3, 2.25, [f"x[{v}]" for v in range(4)], NODE_COLORS, title="lhs (u)", shape="[n_src, F]")
    rhs = column(ax, 1.05, 1.75, [f"y[{v}]" for v in range(4)], NODE_COLORS, title="rhs (v)", shape="[n_dst, F]")
    pe = box(
        ax,
        3.35,
        1.45,
        "per edge e = (s -> d):\nop(lhs[s], rhs[d])\n\nop: dot, add, sub, mul, div\ntargets: u (src), v (dst), e",
        2.0,
        1.2,
    )
    arrow(ax, (lhs[2], 2.05), (pe[0], 2.05), "lhs[src_e]", text_offset=(0.25, 0.03))
    arrow(ax, right(rhs), (pe[0], right(rhs)[1]), "rhs[dst_e]", text_offset=(0.1, 0.03))
    out2 = column(
        ax,
        4.85,
        2.25,
        [f"e{k}: {s}->{d}" for k, (s, d) in enumerate(zip(SRC, DST))],
        [EDGE_COLOR] * E,
        width=0.95,
        title="out",
        shape="[E, ...] (dot: last axis reduced)",
    )
    arrow(ax, right(pe), left(out2))
    # edge_softmax
    ax.text(6.3, 2.65, "edge_softmax(g, logits)", fontsize=10, weight="bold", family="DejaVu Sans Mono")
    lg = column(
        ax,
        6.4,
        2.25,
        [f"z{k}" for k in range(E)],
        [NODE_COLORS[d] for d in DST],
        title="logits",
        shape="[E] or [E, H, ...]",
    )
    sm = box(ax, 7.85, 1.45, "softmax over each\ndst's in-edges\n(max subtracted)", 1.3, 0.8)
    arrow(ax, right(lg), left(sm))
    w = column(
        ax,
        9.0,
        2.25,
        ["α0", "α1", "α2", "α3", "α4", "α5"],
        [NODE_COLORS[d] for d in DST],
        title="weights",
        shape="α1+α5 = 1, α0+α2+α4 = 1",
    )
    arrow(ax, right(sm), left(w))
    ax.text(
        5.1,
        0.12,
        "colours: the destination node each edge row belongs to; every edge-valued array is in input edge order",
        ha="center",
        fontsize=7.5,
        color=MUTED,
    )
    save(fig, "generic", png)


def fig_aggregation(png):
    fig, ax = canvas(10.2, 4.6)
    E = len(SRC)
    ax.text(
        0.2,
        4.35,
        "The aggregation family at node 1 (in-edges e0: 0 -> 1, e2: 3 -> 1, e4: 2 -> 1)",
        fontsize=10,
        weight="bold",
    )
    top = 3.85
    column(ax, 0.3, top, [f"x[{v}]" for v in range(4)], NODE_COLORS, title="x", shape="[n_src, F]")
    column(ax, 1.05, top, [f"f{k}" for k in range(E)], [EDGE_COLOR] * E, title="edge_feat", shape="[E, Fe]")
    column(ax, 1.95, top, [f"w{k}" for k in range(E)], [EDGE_COLOR] * E, title="edge_weight", shape="[E]")
    xd = column(
        ax, 2.75, top, [f"x_dst[{v}]" for v in range(4)], NODE_COLORS, title="x_dst", shape="[n_dst, Fd]", width=0.62
    )
    into = [0, 2, 4]
    gathered = column(
        ax,
        4.45,
        top - 0.3,
        [f"w{e}·x[{SRC[e]}]" for e in into],
        [NODE_COLORS[SRC[e]] for e in into],
        width=0.8,
        title="messages",
    )
    column(ax, 5.3, top - 0.3, [f"f{e}" for e in into], [EDGE_COLOR] * 3, width=0.45, title="f_e")
    arrow(ax, (xd[2], top - 0.7), (gathered[0], top - 0.7), "gather the\nin-edges (CSC)", text_offset=(0, 0.03))
    red = box(ax, 6.75, top - 0.7, "reduce:\nsum, mean,\nmax or min", 1.0, 0.75)
    arrow(ax, (5.8, top - 0.7), left(red))
    x0, y0 = 7.55, top - 0.7 - CELL_H / 2
    for k, (label, color, width) in enumerate(
        (("agg (w·)x", NODE_COLORS[1], 0.95), ("agg f", EDGE_COLOR, 0.6), ("x_dst[1]", NODE_COLORS[1], 0.75))
    ):
        ax.add_patch(Rectangle((x0, y0), width, CELL_H, facecolor=color, edgecolor=INK, lw=0.6))
        ax.text(x0 + width / 2, y0 + CELL_H / 2, label, ha="center", va="center", fontsize=8)
        x0 += width
    ax.text(7.55 + 1.15, y0 + CELL_H + 0.1, "out[1] (agg_concat)", ha="center", fontsize=9, weight="bold")
    arrow(ax, right(red), (7.55, top - 0.7))
    rows = [
        (
            "agg_simple(g, x, edge_feat, reduce)",
            "[agg x | agg edge_feat]: either part alone, or both",
            "[n_dst, F + Fe]",
        ),
        (
            "agg_weighted(g, x, edge_weight, reduce)",
            "agg of w_e·x[src_e]; mean divides by Σ w_e (0 where it is 0)",
            "[n_dst, F]",
        ),
        (
            "agg_concat(g, x, x_dst=, edge_feat=, edge_weight=, reduce)",
            ("[agg (w·)x | agg edge_feat | x_dst] (SAGEConv's input)"),
            "[n_dst, F (+Fe) + Fd]",
        ),
        ("pool(x, graph_ids, n_graphs, reduce)", "reduces node rows by graph id (a batch's readout)", "[n_graphs, F]"),
    ]
    for k, (call, what, shape) in enumerate(rows):
        y = 1.7 - k * 0.36
        ax.text(0.3, y, call, fontsize=8, family="DejaVu Sans Mono", va="center", weight="bold")
        ax.text(5.0, y, what + "   " + shape, fontsize=7.5, va="center", color=MUTED)
    ax.text(
        0.3,
        0.2,
        "an empty neighbourhood gives 0 (node 3 here) and zero gradients; each part is one fused pass of "
        "the gspmm kernel",
        fontsize=7.5,
        color=MUTED,
    )
    save(fig, "aggregation", png)


def fig_attention(png):
    fig, ax = canvas(10.2, 4.5)
    ax.text(
        0.2,
        4.25,
        "node 1's in-edges: e0 (0 -> 1), e2 (3 -> 1), e4 (2 -> 1); per head h, features head-major [n, H·C]",
        fontsize=8.5,
        color=INK,
    )
    graph(ax, (0.3, 2.2), scale=1.4, highlight=(0, 2, 4))
    logits = [
        ("mha_gat", "z_e = leaky_relu(<a_src, x_src[j]> + <a_dst, x_dst[i]> (+ <a_edge, edge_feat[e]>))"),
        ("mha_gat_v2", "z_e = <a, leaky_relu(x_src[j] + x_dst[i] (+ edge_feat[e]))>"),
        ("mha_simple", "z_e = <query[i], key[j] (+ edge_feat[e])> / sqrt(C)"),
    ]
    for k, (name, formula) in enumerate(logits):
        cy = 3.75 - k * 0.42
        ax.text(2.2, cy, name, fontsize=8.5, weight="bold", family="DejaVu Sans Mono", va="center")
        ax.text(3.3, cy, formula, fontsize=8.3, va="center")
    lg = column(ax, 2.3, 2.2, ["z0", "z2", "z4"], [NODE_COLORS[1]] * 3, title="logits", shape="[deg, H]")
    sm = box(ax, 4.2, 1.8, "online softmax over\nthe in-edges of i\n(one pass, max kept running)", 2.0, 0.75)
    arrow(ax, right(lg), left(sm))
    al = column(ax, 5.6, 2.2, ["α0", "α2", "α4"], [NODE_COLORS[1]] * 3, title="α", shape="return_attention: [E, H]")
    arrow(ax, right(sm), left(al))
    ws = box(ax, 7.45, 1.8, "Σ_e α_e · value_e\nvalue = x_src[j]\n(mha_simple: value[j] (+ edge_feat[e]))", 2.35, 0.75)
    arrow(ax, right(al), left(ws))
    out = column(
        ax,
        9.0,
        1.8 + CELL_H / 2,
        ["out[1]"],
        [NODE_COLORS[1]],
        width=0.8,
        title="out",
        shape="heads: concat\n[n_dst, H·C] or\nmean [n_dst, C]",
    )
    arrow(ax, right(ws), left(out))
    ax.text(
        0.2,
        0.45,
        "fused: nothing of size E x H x C is written in the forward or the first-order backward; the "
        "backward runs one atomic-free pass over the CSR (source gradients)\nand one over the CSC (destination, "
        "edge and attention-vector gradients). A -inf logit gets weight 0; a destination without in-edges gets 0.",
        fontsize=7.5,
        color=MUTED,
    )
    save(fig, "attention", png)


def fig_dimenet(png):
    fig, ax = canvas(10.2, 4.4)
    # the triplet geometry k -> j -> i
    pk, pj, pi = np.array([0.5, 1.9]), np.array([1.4, 2.9]), np.array([2.4, 2.15])
    for p, name, c in ((pk, "k", NODE_COLORS[0]), (pj, "j", NODE_COLORS[1]), (pi, "i", NODE_COLORS[2])):
        ax.add_patch(plt.Circle(p, 0.14, facecolor=c, edgecolor=INK, lw=0.8, zorder=3))
        ax.text(*p, name, ha="center", va="center", weight="bold", zorder=4)
    ax.add_patch(FancyArrowPatch(pk, pj, arrowstyle="-|>", mutation_scale=10, shrinkA=10, shrinkB=10, color=INK))
    ax.add_patch(FancyArrowPatch(pj, pi, arrowstyle="-|>", mutation_scale=10, shrinkA=10, shrinkB=10, color=INK))
    ax.text(0.85, 2.5, "e_in = k->j", fontsize=8, color=INK, ha="right")
    ax.text(2.0, 2.65, "e_out = j->i", fontsize=8, color=INK)
    ax.text(1.42, 2.5, "θ", fontsize=11, ha="center")
    ax.text(
        0.3,
        1.35,
        "cos θ = <vec[e_out], vec[e_in]>\n          / (|vec[e_out]| |vec[e_in]|)\nvec = pos[src] - pos[dst];\n"
        "triplets exclude k == i",
        fontsize=7.8,
        color=MUTED,
        va="center",
    )
    ax.text(
        0.2,
        4.15,
        "dimenet.agg_edge_to_edge(vec, sbf_rad, emb, weights, triplets)",
        fontsize=10,
        weight="bold",
        family="DejaVu Sans Mono",
    )
    ins = [
        ("vec", "[E, 3]"),
        ("sbf_rad", "[E, 42] (radial_basis)"),
        ("emb", "[E, n_emb]"),
        ("weights", "[42 + n_emb, n_mid]"),
    ]
    for k, (name, shape) in enumerate(ins):
        ax.text(3.2, 3.6 - k * 0.35, name, fontsize=8.5, weight="bold", family="DejaVu Sans Mono", va="center")
        ax.text(4.05, 3.6 - k * 0.35, shape, fontsize=8, color=MUTED, va="center")
    b1 = box(
        ax,
        8.1,
        3.3,
        "per triplet t = (e_in, e_out):\nsbf_t[l·6+n] = sbf_rad[e_in, l·6+n] · Y_l(cos θ_t)\n"
        "Y_l = sqrt((2l+1)/4π) P_l,   7 × 6 basis",
        3.6,
        0.95,
    )
    arrow(ax, (5.95, 3.3), left(b1))
    b2 = box(
        ax, 8.1, 1.95, "message_t = emb[e_in] ⊙ (W_b (W_a^T sbf_t))\nW_a = weights[:42],  W_b = weights[42:]", 3.6, 0.7
    )
    arrow(ax, (8.1, b1[1]), (8.1, b2[3]))
    b3 = box(
        ax,
        8.1,
        0.75,
        "out[e_out] = Σ over the triplets into e_out\n(grouped by e_out; backward grouped by e_in)",
        3.6,
        0.65,
    )
    arrow(ax, (8.1, b2[1]), (8.1, b3[3]))
    ax.text(
        3.2,
        1.5,
        "fused kernels for the forward,\nthe backward and the second\norder (forces in the loss),\n"
        "for every float input,\nincluding vec",
        fontsize=7.8,
        color=MUTED,
        va="center",
    )
    ax.text(8.1, 0.3, "out: [E, n_emb]", fontsize=8, color=MUTED, ha="center", va="center")
    save(fig, "dimenet", png)


def fig_gno(png):
    fig, ax = canvas(10.2, 3.9)
    ax.text(
        0.2,
        3.65,
        "gno_conv(g, f_src, dx, U, b_u, V, b_v, kernel, reduce, edge_weight)",
        fontsize=10,
        weight="bold",
        family="DejaVu Sans Mono",
    )
    pos = box(ax, 0.85, 2.75, "positions\npos_src, pos_dst", 1.2, 0.55, color=EDGE_COLOR)
    dx = box(ax, 2.75, 2.75, "edge_vectors:\ndx_e = pos_dst[dst]\n      - pos_src[src]", 1.55, 0.75, color=EDGE_COLOR)
    arrow(ax, right(pos), left(dx))
    mlp = box(ax, 5.0, 2.75, "kernel MLP per edge\nh_e = relu(U dx_e + b_u)   [H]\nκ_e = V h_e + b_v", 2.2, 0.75)
    arrow(ax, right(dx), left(mlp), "[E, d]")
    f = box(ax, 5.0, 1.4, "f_src[src_e]\n[n_src, c_in] gathered", 2.0, 0.55, color=NODE_COLORS[0])
    msg = box(ax, 7.55, 2.1, "message m_e\nmatrix: κ_e.reshape(c_out, c_in) @ f_j\ndiagonal: κ_e ⊙ f_j", 2.45, 0.8)
    arrow(ax, right(mlp), (msg[0], 2.3))
    arrow(ax, right(f), (msg[0], 1.9))
    red = box(ax, 7.55, 0.85, "reduce at dst: sum (Σ w_e m_e)\nor mean (÷ Σ w_e)  ->  [n_dst, c_out]", 2.45, 0.6)
    arrow(ax, (7.55, msg[1]), (7.55, red[3]))
    ax.text(
        0.2,
        0.75,
        "fused: κ (E × c_out × c_in numbers) is never formed. Per destination the kernel accumulates\n"
        "A_i = Σ_e w_e f_j ⊗ [h_e, 1]  (c_in (H+1) numbers) and contracts it with [V | b_v] once per row;\n"
        "the backward passes do the same over the CSR (f_src, V, b_v) and the CSC (dx, U, b_u, edge_weight).",
        fontsize=7.5,
        color=MUTED,
        va="center",
    )
    save(fig, "gno", png)


def fig_relational(png):
    fig, ax = canvas(10.2, 5.7)
    E = len(SRC)
    types = np.array([0, 1, 0, 1, 1, 0])
    # agg_hg_basis
    row_title(ax, 0.2, 5.45, "agg_hg_basis(g, x, edge_types, comp, n_edge_types, concat_own, norm_by_dst_degree)")
    column(ax, 0.3, 5.05, [f"x[{v}]" for v in range(4)], NODE_COLORS, title="x", shape="[n_src, D]")
    t = column(ax, 1.05, 5.05, [f"r={r}" for r in types], [EDGE_COLOR] * E, title="edge_types", shape="[E]", width=0.5)
    b = box(
        ax,
        4.0,
        4.35,
        "with comp [R, B]: block b of out[v] =\nΣ_{e into v} comp[r_e, b] · norm · x[src_e]\n"
        "without: block r = Σ_{e into v, r_e = r} norm · x[src_e]\nnorm = 1 / (# edges of type r_e into v) or 1",
        3.3,
        1.0,
    )
    arrow(ax, (t[2], 4.35), (b[0], 4.35), "x[src_e], r_e", text_offset=(0, 0.03))
    out = column(
        ax,
        6.2,
        5.05,
        ["blk 0", "blk 1", "own"],
        [NODE_COLORS[1]] * 2 + ["#ffffff"],
        title="out[1]",
        shape="[n_dst, B·D or R·D (+ D)]",
        width=0.55,
    )
    arrow(ax, right(b), left(out))
    ax.text(
        7.1,
        4.45,
        "a layer multiplies by the stacked\nweights [(B or R)(+1), D, D_out]\n(RGCNConv); no one-hot comp,\n"
        "backward atomic-free over the CSR",
        fontsize=7.5,
        color=MUTED,
        va="center",
    )
    # update_efeat
    row_title(ax, 0.2, 3.1, "update_efeat(g, edge_feat, x_src, x_dst, mode)")
    rows = [f"[f{k} | x[{s}] | x[{d}]]" for k, (s, d) in enumerate(zip(SRC, DST))]
    uf = column(ax, 3.2, 2.75, rows, [EDGE_COLOR] * E, width=1.7, title="out (concat)", shape="[E, Fe + Fs + Fd]")
    ax.text(
        0.3,
        2.35,
        "edge e = (s -> d):\nconcat: [edge_feat[e] | x_src[s] | x_dst[d]]\nsum: edge_feat[e] + x_src[s] + x_dst[d]",
        fontsize=8,
        va="center",
    )
    arrow(ax, (2.6, 2.35), left(uf))
    ax.text(
        3.2 + 1.85,
        2.2,
        "one pass over the edges writes\nwhole rows (input edge order);\nnode gradients reduced over\n"
        "the CSR (x_src) and CSC (x_dst)",
        fontsize=7.5,
        color=MUTED,
        va="center",
    )
    # agg_dmpnn
    row_title(ax, 7.0, 3.1, "agg_dmpnn(g, h, rev_edge_ids)")
    ax.text(
        7.0,
        2.5,
        "directed bonds e = (v -> w):\nm[e] = Σ_{e' into v} h[e'] - h[rev(e)]\n"
        "(rev = -1: nothing subtracted;\n concat_own: [m | h])",
        fontsize=8,
        va="center",
    )
    ax.text(
        7.0,
        1.6,
        "example: e3 = 1 -> 2, rev(e3) = e4:\nm[e3] = h[e0] + h[e2] + h[e4] - h[e4]",
        fontsize=8,
        va="center",
        color=INK,
    )
    ax.text(
        7.0,
        0.95,
        "fused: one pass per node keeps its sum\nwhile writing its out-edges; the backward\nlikewise over the "
        "reverse graph (no atomics)",
        fontsize=7.5,
        color=MUTED,
        va="center",
    )
    save(fig, "relational", png)


def fig_sampling(png):
    g = GRAPH
    seeds = np.array([1, 0, 3])  # node 3 has no in-edges: its slots are padding
    block = jgo.sample_neighbors(jax.random.key(0), g, seeds, 2)
    S, f = len(seeds), 2
    inputs = block.input_nodes.tolist()
    fig, ax = canvas(10.2, 4.3)
    ax.text(
        0.2,
        4.05,
        "sample_neighbors(key, g, seeds=[1, 0, 3], fanout=2)",
        fontsize=10,
        weight="bold",
        family="DejaVu Sans Mono",
    )
    graph(ax, (0.3, 1.8), scale=1.4, highlight=tuple(int(e) for e in block.edge_ids.tolist() if e >= 0))
    ax.text(
        1.0,
        1.3,
        "sampled in-edges drawn thick\n(Philox counter-based draws:\nthe same on any thread count,\nCPU and CUDA)",
        ha="center",
        fontsize=7.5,
        color=MUTED,
        va="top",
    )
    colors = [NODE_COLORS[v] if v >= 0 else "#ffffff" for v in inputs]
    column(
        ax,
        3.0,
        3.55,
        [f"{i}: {v}" for i, v in enumerate(inputs)],
        colors,
        width=0.7,
        title="input_nodes",
        shape="[S (1 + fanout)]\nlocal id: global id",
    )
    ax.text(3.8, 3.55 - 0.5 * CELL_H, "<- seeds first", fontsize=7.5, color=MUTED, va="center")
    ax.text(3.8, 3.55 - (S + 0.5) * CELL_H, "<- new nodes", fontsize=7.5, color=MUTED, va="center")
    ax.text(3.8, 3.55 - (len(inputs) - 0.5) * CELL_H, "<- padding (-1)", fontsize=7.5, color=MUTED, va="center")
    src, dst, mask, eids = (
        block.graph.src.tolist(),
        block.graph.dst.tolist(),
        block.edge_mask.tolist(),
        block.edge_ids.tolist(),
    )
    labels = [f"{s} -> {d}" + ("" if m else " (pad)") for s, d, m in zip(src, dst, mask)]
    column(
        ax,
        5.3,
        3.55,
        labels,
        [NODE_COLORS[inputs[d]] if m else "#ffffff" for d, m in zip(dst, mask)],
        width=1.0,
        title="edges (local ids)",
        shape=f"[S · fanout] = [{S * f}]\nthe sampled ones seed by seed,\nthen padding edges",
    )
    column(
        ax,
        6.6,
        3.55,
        [str(e) for e in eids],
        [EDGE_COLOR] * len(eids),
        width=0.45,
        title="edge_ids",
        shape="-1: padding",
    )
    ax.text(
        7.4,
        2.65,
        "block.graph: n_dst = S (the seeds),\nn_src = S (1 + fanout), static shapes;\n"
        "the empty slots are padding edges\n(in no neighbourhood: every op sees\nthe sampled subgraph)\n\n"
        "sample_blocks(key, g, seeds, [f0, f1]):\nblocks[-1] samples the seeds' in-edges,\n"
        "blocks[i] those of blocks[i+1].input_nodes;\nthe model reads its features at\n"
        "blocks[0].input_nodes",
        fontsize=7.8,
        color=INK,
        va="center",
    )
    save(fig, "sampling", png)


def fig_differentiation(png):
    fig, ax = canvas(10.2, 2.9)
    ax.text(0.2, 2.65, "A fused op is three primitives; JAX's rules connect them", fontsize=10, weight="bold")
    fwd = box(
        ax,
        1.25,
        1.85,
        "op_fwd\nfused forward kernel\n(+ residuals: scores,\nargmax positions)",
        2.1,
        0.95,
        color=NODE_COLORS[0],
    )
    jvp = box(
        ax,
        4.6,
        1.85,
        "op_jvp\nlinear in the tangents\n(lowered as a composition\nof gspmm/gsddmm primitives)",
        2.5,
        0.95,
        color=OP_COLOR,
    )
    vjp = box(
        ax,
        8.45,
        1.85,
        "op_vjp\nfused backward kernels, one per part:\nCSR walk (source gradients),\nCSC walk (dst / edge / weights)",
        3.1,
        0.95,
        color=NODE_COLORS[2],
    )
    arrow(ax, right(fwd), left(jvp), "JVP rule")
    arrow(ax, right(jvp), left(vjp), "transpose rule")
    ax.text(
        0.2,
        0.7,
        "jax.grad runs op_fwd + op_vjp: first-order training stays on the fused kernels. jax.jvp / jacfwd "
        "evaluate op_jvp.\nSecond and higher orders differentiate the compositions (correct, slower); DimeNet++'s "
        "triplet aggregation has fused second-order kernels (forces in the loss).\n"
        "gspmm / gsddmm / edge_softmax are closed under transposition (the transpose of gspmm in u is gspmm on the "
        "reversed graph, in e a gsddmm),\nso every derivative order of the generic ops stays on their kernels. "
        "Batching rules fold a vmapped axis into the feature axis: one kernel call.",
        fontsize=7.8,
        color=INK,
        va="center",
    )
    save(fig, "differentiation", png)


FIGURES = (
    fig_graph,
    fig_generic,
    fig_aggregation,
    fig_attention,
    fig_dimenet,
    fig_gno,
    fig_relational,
    fig_sampling,
    fig_differentiation,
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--png", metavar="DIR", help="also write PNG previews into DIR")
    args = parser.parse_args()
    for make in FIGURES:
        make(args.png)
        print(f"wrote {OUT / make.__name__[4:]}.svg")


if __name__ == "__main__":
    main()
