"""The op registry of the tests (PyTorch's OpInfo pattern): one entry per public op, read by the tests that cut
across the ops, so that a new op joins all of them by its entry.

An entry (:class:`OpInfo`) gives the public callable; its cases on a graph (:meth:`OpInfo.cases`: named calls
``call(impl, *args)`` and their arguments, every argument differentiable; ``full`` adds the variants that only
the large runs need); the names of the differentiable arguments; whether the output has a row per edge; its
columns of the NaN/Inf table of ``docs/semantics.md`` (or why it has none); whether its kernels are checked for
thread-count independence (or where, or why not); and the FFI targets its forward and first-order backward run
(``ffi/targets.h``), from which follows whether CUDA handlers exist.

An entry also says how the fuzzer draws the op (:class:`Fuzz`: its target in ``fuzz.py``, weight, constraints,
the rows of its inputs and outputs, the padding modes of ``fuzz_padding.py`` it runs in), and its variants on
padded graphs and sampled blocks (``padding``: every operand and weight it takes); either one may instead be the
reason why the op has none. :data:`LAYERS` does the same for the layers (the names shared by ``jaxgraphops.nn.flax``,
``.nnx`` and ``.equinox``): whether the fuzzer draws them and whether ``test_blocks.py`` runs them on blocks.

Read by ``test_semantics.py`` (the table's columns), ``test_reproducibility.py`` (the thread-count cases),
``test_compositions.py`` (every case on the pure-JAX compositions), ``test_cuda_emulation.py`` (every case on
the emulated CUDA handlers), ``padding_ops.py`` (``test_padding.py``, ``test_blocks.py``: the padding variants),
``fuzz.py`` and ``fuzz_padding.py`` (the targets, the layers); ``test_op_db.py`` checks the registry itself: every
public op and layer has an entry, the targets are the ones the ops lower to, the fuzzer, the padding tests and the
block tests cover every entry that does not say why not.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo
from jaxgraphops.dimenet import agg_edge_to_edge, triplets

TARGETS_H = Path(__file__).resolve().parent.parent / "ffi" / "targets.h"


def _targets(macro: str) -> set[str]:
    """The FFI target names of one list of ``ffi/targets.h``."""
    text = TARGETS_H.read_text()
    body = text[text.index(f"#define {macro}(X)"):].split("\n\n", 1)[0]
    return set(re.findall(r"X\((jgo_\w+),", body))


CUDA_TARGETS = _targets("JGO_TARGETS")  # a CPU, a CUDA and an emulated CUDA handler each
HOST_TARGETS = _targets("JGO_HOST_TARGETS")  # a CPU handler only


class Inputs:
    """Random inputs for the cases of a graph ``g``: arrays of one float dtype, drawn from ``rng``; ``f`` features
    and ``heads`` attention heads (``f`` a multiple of it) set the widths."""

    def __init__(self, g, rng: np.random.Generator, dtype, f: int, heads: int):
        self.g, self.rng, self.dtype, self.f, self.heads = g, rng, dtype, f, heads

    def normal(self, *shape, scale=1.0):
        return jnp.asarray(self.rng.normal(size=shape) * scale, self.dtype)

    def positive(self, *shape):
        """Values in ``[0.5, 1.5)``: weights, and divisors away from 0."""
        return jnp.asarray(self.rng.uniform(0.5, 1.5, shape), self.dtype)

    def integers(self, high, size):
        return np.asarray(self.rng.integers(0, high, size))


def involution(e: int) -> np.ndarray:
    """Reverse edge ids for ``agg_dmpnn``: pairs (0, 1), (2, 3), ... among the first half, -1 after, one fixed
    point."""
    rev = np.full(e, -1)
    rev[:e // 2] = np.arange(e // 2) ^ 1
    rev[e - 2] = e - 2
    return rev


PADDING_MODES = ("pad", "reorder", "convert", "partition", "block")  # fuzz_padding.py's, in the order it draws them


@dataclasses.dataclass(frozen=True)
class Fuzz:
    """How ``fuzz.py`` draws a target (an op's, or the model's and the layers'): ``_gen_<target>`` and
    ``_apply_<target>`` there make and run its cases.

    ``weight``: its share of the drawn structures; ``square``: one node set; ``graph``: it takes a graph;
    ``min_edges``; ``concrete``: a concrete graph (host-side triplets), so no traced or hand-built ones;
    ``no_loops``: self loops are moved; ``mutable``: invalid variants are made. ``rows``: the rows of each named
    input (``src``, ``dst``, ``edge``; ``@option``: the rows the case's option names, ``u``/``v``/``e``; absent: a
    weight); ``outputs``: the rows of its outputs (one kind: every output; None: ``edge`` for an edge-valued op, else
    ``dst``); ``padding_modes``: the modes of ``fuzz_padding.py`` it runs in (``partition`` and ``block`` on square
    cases only), or why none; ``dst_default``: ``(source input, destination input)`` where it reads the
    destinations' rows from its sources' when the latter is absent (a partitioned case passes it explicitly)."""
    target: str
    weight: int
    square: bool = False
    graph: bool = True
    min_edges: int = 0
    concrete: bool = False
    no_loops: bool = False
    mutable: bool = True
    rows: dict = dataclasses.field(default_factory=dict)
    outputs: tuple | None = None
    padding_modes: tuple | str = PADDING_MODES
    dst_default: tuple | None = None


@dataclasses.dataclass(frozen=True)
class OpInfo:
    name: str  # as the user writes it after ``jgo.``: "gspmm", "dimenet.agg_edge_to_edge"
    fn: Callable
    cases: Callable  # (g, inputs, full) -> {case name: (call(impl, *args), args)}; None: not run on random graphs
    differentiable: tuple[str, ...]  # the arguments the cases differentiate, by name
    edge_valued: bool  # the output has a row per edge (input edge order)
    semantics: tuple[str, ...] | str  # its columns of the table in docs/semantics.md, or why it has none
    thread_reproducible: bool | str  # in test_reproducibility.py's thread-count check, or where / why not
    targets: tuple[str, ...]  # the FFI targets its forward and first-order backward run (ffi/targets.h)
    fuzz: Fuzz | str  # how fuzz.py draws it, or why it does not
    padding: Callable | str  # (g, ctx) -> {variant: (fn(g, xs, xd, ef, w, impl) -> outputs, kinds)}, or why none

    @property
    def cuda(self) -> bool:
        """The op runs CUDA kernels on a GPU: some of its targets have CUDA handlers (``JGO_TARGETS``; the host
        targets of ``JGO_HOST_TARGETS`` are XLA's own ops or other kernels there)."""
        return bool(set(self.targets) & CUDA_TARGETS)


# -- the cases of each op --------------------------------------------------------------------------------------

def _gspmm(g, a, full):
    x, ef, w = a.normal(g.n_src, a.f), a.normal(g.n_edges, a.f), a.positive(g.n_edges, a.f)
    cases = {"sum": (lambda impl, u, e: jgo.gspmm(g, u, e, op="u_mul_e", reduce="sum", impl=impl), (x, ef)),
             "max": (lambda impl, u: jgo.gspmm(g, u, op="copy_u", reduce="max", impl=impl), (x,))}
    if full:
        for op in ("copy_u", "copy_e", "u_mul_e", "u_add_e", "u_sub_e", "u_div_e"):
            for reduce in ("sum", "mean", "max", "min"):
                args = tuple(v for v, used in ((x, op != "copy_e"), (w if op == "u_div_e" else ef, op != "copy_u"))
                             if used)
                cases[f"{op}_{reduce}"] = (lambda impl, *xs, o=op, r=reduce: jgo.gspmm(
                    g, *(xs if o != "copy_e" else (None, *xs)), op=o, reduce=r, impl=impl), args)
        # one weight per edge and head, broadcast over the features (its gradient sums over them)
        cases["u_mul_e_heads"] = (lambda impl, u, e: jgo.gspmm(g, u, e, op="u_mul_e", reduce="sum", impl=impl),
                                  (x.reshape(g.n_src, a.heads, -1), a.normal(g.n_edges, a.heads)))
    return cases


def _gsddmm(g, a, full):
    x, y = a.normal(g.n_src, a.f), a.normal(g.n_src, a.f)
    cases = {"dot": (lambda impl, p, q: jgo.gsddmm(g, p, q, op="dot", impl=impl), (x, y))}
    if full:
        for op in ("add", "mul", "div"):
            rhs = a.positive(g.n_src, a.f) if op == "div" else y
            cases[op] = (lambda impl, p, q, op=op: jgo.gsddmm(g, p, q, op=op, impl=impl), (x, rhs))
        cases["u_e_sub"] = (lambda impl, p, q: jgo.gsddmm(g, p, q, op="sub", lhs_target="u", rhs_target="e",
                                                          impl=impl), (x, a.normal(g.n_edges, a.f)))
    return cases


def _edge_softmax(g, a, full):
    return {"heads": (lambda impl, z: jgo.edge_softmax(g, z, impl=impl), (a.normal(g.n_edges, a.heads),))}


def _agg(name):
    def cases(g, a, full):
        x, ef, w = a.normal(g.n_src, a.f), a.normal(g.n_edges, a.f), a.positive(g.n_edges)
        calls = {"agg_simple": (lambda impl, x, e, r: jgo.agg_simple(g, x, e, reduce=r, impl=impl), (x, ef)),
                 "agg_weighted": (lambda impl, x, w, r: jgo.agg_weighted(g, x, w, reduce=r, impl=impl), (x, w)),
                 "agg_concat": (lambda impl, x, e, w, r: jgo.agg_concat(g, x, edge_feat=e, edge_weight=w, reduce=r,
                                                                        impl=impl), (x, ef, w))}
        call, args = calls[name]
        reduces = ("sum", "mean", "max") if full else ("mean",)
        return {r: (lambda impl, *xs, r=r: call(impl, *xs, r), args) for r in reduces}
    return cases


def _pool(g, a, full):
    n_graphs = 16 if full else 3
    ids = np.sort(a.integers(n_graphs, g.n_src))
    reduces = ("sum", "mean", "max", "min") if full else ("mean", "max")
    x = a.normal(g.n_src, a.f)
    return {r: (lambda impl, x, r=r: jgo.pool(x, ids, n_graphs, reduce=r, ids_are_sorted=True, impl=impl), (x,))
            for r in reduces}


def _attention(name):
    def cases(g, a, full):
        h, c = a.heads, a.f // a.heads
        xs, xd, ef = a.normal(g.n_src, h * c), a.normal(g.n_dst, h * c), a.normal(g.n_edges, h * c)
        if name == "mha_gat":
            out = {"edge": (lambda impl, x, w, e: jgo.mha_gat(g, x, w, num_heads=h, edge_feat=e, impl=impl),
                            (xs, a.normal(3 * h * c, scale=0.3), ef))}
            if full:
                out["plain"] = (lambda impl, x, w: jgo.mha_gat(g, x, w, num_heads=h, impl=impl),
                                (xs, a.normal(2 * h * c, scale=0.3)))
                out["edge_bipartite"] = (lambda impl, x, y, w, e: jgo.mha_gat(
                    g, x, w, x_dst=y, num_heads=h, edge_feat=e, impl=impl),
                    (xs, xd, a.normal(3 * h * c, scale=0.3), ef))
        elif name == "mha_gat_v2":
            out = {"plain": (lambda impl, x, y, w: jgo.mha_gat_v2(g, x, y, w, num_heads=h, impl=impl),
                             (xs, xd, a.normal(h * c, scale=0.3)))}
            if full:
                out["edge"] = (lambda impl, x, y, w, e: jgo.mha_gat_v2(
                    g, x, y, w, num_heads=h, edge_feat=e, impl=impl), (xs, xd, a.normal(h * c, scale=0.3), ef))
        else:
            out = {"edge": (lambda impl, q, k, v, e: jgo.mha_simple(g, q, k, v, num_heads=h, edge_feat=e, impl=impl),
                            (0.3 * xd, 0.3 * xs, xs, ef))}
        return out
    return cases


def _gno(g, a, full):
    hidden, c_in, c_out = (16, 8, 8) if full else (4, 2, 3)
    f, dx = a.normal(g.n_src, c_in), a.normal(g.n_edges, 3)
    cases = {}
    for kernel, p in (("matrix", c_out * c_in), ("diagonal", c_in)) if full else (("matrix", c_out * c_in),):
        ops = (f, dx, a.normal(hidden, 3), a.normal(hidden, scale=0.1), a.normal(p, hidden, scale=0.3),
               a.normal(p, scale=0.1))
        cases[kernel] = (lambda impl, *w, k=kernel: jgo.gno_conv(g, *w, kernel=k, reduce="sum", impl=impl), ops)
        if full:
            cases[f"{kernel}_weighted"] = (lambda impl, *w, k=kernel: jgo.gno_conv(
                g, *w[:-1], kernel=k, reduce="mean", edge_weight=w[-1], impl=impl), ops + (a.positive(g.n_edges),))
    return cases


def _hg_basis(g, a, full):
    types3, types4 = a.integers(3, g.n_edges), a.integers(4, g.n_edges)
    x, xd = a.normal(g.n_src, a.f), a.normal(g.n_dst, a.f)
    return {"comp": (lambda impl, x, comp, xd: jgo.agg_hg_basis(
                g, x, types3, comp, n_edge_types=3, x_dst=xd, concat_own=True, norm_by_dst_degree=True, impl=impl),
                (x, a.normal(3, 2), xd)),
            "no_comp": (lambda impl, x: jgo.agg_hg_basis(g, x, types4, n_edge_types=4, concat_own=True, impl=impl),
                        (x[:, :a.f // 2],))}


def _update_efeat(g, a, full):
    ef, xs, xd = a.normal(g.n_edges, a.f), a.normal(g.n_src, a.f), a.normal(g.n_dst, a.f)
    return {"concat": (lambda impl, e, x: jgo.update_efeat(g, e[:, :2], x, x[:g.n_dst], impl=impl), (ef, xs)),
            "sum": (lambda impl, e, x, y: jgo.update_efeat(g, e, x, y, mode="sum", impl=impl), (ef, xs, xd))}


def _dmpnn(g, a, full):
    rev = involution(g.n_edges)
    return {"concat_own": (lambda impl, h: jgo.agg_dmpnn(g, h, rev, concat_own=True, impl=impl),
                           (a.normal(g.n_edges, a.f),))}


def molecule_graph(rng: np.random.Generator, n_atoms: int, degree: int = 4):
    """A graph of bounded in-degree without self loops (so the triplet count is about ``E * degree``)."""
    src = np.repeat(np.arange(n_atoms), degree)
    dst = (src + rng.integers(1, n_atoms, src.size)) % n_atoms
    return jgo.Graph.from_edges(src, dst, n_atoms, n_atoms)


def _dimenet(g, a, full):
    dg = molecule_graph(a.rng, max(g.n_src // 2, 8), 8 if full else 3)
    t = triplets(dg)
    pos = a.rng.normal(size=(dg.n_src, 3))
    n_emb, n_mid = (32, 8) if full else (5, 3)
    args = (jnp.asarray(pos[np.asarray(dg.src)] - pos[np.asarray(dg.dst)], a.dtype), a.normal(dg.n_edges, 42),
            a.normal(dg.n_edges, n_emb), a.normal(42 + n_emb, n_mid, scale=0.25))
    return {"triplets": (lambda impl, *w: agg_edge_to_edge(*w, t, impl=impl), args)}


# -- the variants of each op on padded graphs and sampled blocks (padding_ops.py) ----------------------------------
# ``padding(g, ctx)``: ``{variant: (fn(g, xs, xd, ef, w, impl) -> tuple of outputs, kinds)}`` with ``xs [n_src, F]``,
# ``xd [n_dst, F]``, ``ef [n_edges, F]``, ``w`` the dict of ``padding_ops.weights``, kinds "node" or "edge" per
# output; ``ctx``: the graph's edge types and reverse edges (:class:`PaddingContext`).

PADDING_HEADS = 2


@dataclasses.dataclass(frozen=True)
class PaddingContext:
    types: np.ndarray  # an edge type in [0, 3) per edge
    rev: np.ndarray  # reverse edge ids (-1: none), an involution over the real edges


def fit(a, n, fill=0):
    """An edge array fitted to ``n`` edges: cut (a sampled block's real edges), or extended with ``fill`` (a padded
    graph's padding edges)."""
    return jnp.asarray(np.concatenate([a[:n], np.full(max(n - len(a), 0), fill, a.dtype)]))


def _padding_gspmm(g, ctx):
    def spmm(op, reduce):
        return lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, xs, ef, op=op, reduce=reduce, impl=impl),)

    variants = {f"gspmm {op} {reduce}": spmm(op, reduce) for op, reduce in (
        ("u_mul_e", "sum"), ("u_add_e", "max"), ("u_div_e", "mean"), ("u_div_e", "min"), ("u_sub_e", "sum"))}
    variants["gspmm copy_u mean"] = lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, xs, reduce="mean", impl=impl),)
    variants["gspmm copy_e max"] = lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, e=ef, op="copy_e", reduce="max",
                                                                            impl=impl),)
    return {name: (fn, ("node",)) for name, fn in variants.items()}


def _padding_gsddmm(g, ctx):
    def sddmm(op, lhs, rhs):
        def fn(g, xs, xd, ef, w, impl):
            x = {"u": xs, "v": xd, "e": ef}
            return (jgo.gsddmm(g, x[lhs], x[rhs], op=op, lhs_target=lhs, rhs_target=rhs, impl=impl),)
        return fn, ("edge",)

    # both operands on one node (dot u u, mul v v): found by the fuzzer's padding modes
    return {f"gsddmm {op}" + ("" if (op, lhs, rhs) == ("dot", "u", "v") else f" {lhs} {rhs}"): sddmm(op, lhs, rhs)
            for op, lhs, rhs in (("dot", "u", "v"), ("div", "u", "v"), ("div", "v", "u"), ("div", "u", "e"),
                                 ("add", "u", "e"), ("sub", "e", "v"), ("mul", "e", "e"), ("dot", "u", "u"),
                                 ("mul", "v", "v"))}


def _padding_one(name, kinds, fn):
    """The padding variants of an op with one: ``{name: (fn, kinds)}``."""
    return lambda g, ctx: {name: (fn, kinds)}


def _padding_attention(name):
    h = PADDING_HEADS
    calls = {"mha_gat": lambda g, xs, xd, ef, w, impl: jgo.mha_gat(g, xs, w["a3"], x_dst=xd, num_heads=h, edge_feat=ef,
                                                                   return_attention=True, impl=impl),
             "mha_gat_v2": lambda g, xs, xd, ef, w, impl: jgo.mha_gat_v2(g, xs, xd, w["a1"], num_heads=h,
                                                                         edge_feat=ef, return_attention=True,
                                                                         impl=impl),
             "mha_simple": lambda g, xs, xd, ef, w, impl: jgo.mha_simple(g, xd, xs, xs, num_heads=h, edge_feat=ef,
                                                                         return_attention=True, impl=impl)}
    return _padding_one(name, ("node", "edge"), calls[name])


def _padding_hg_basis(g, ctx):
    return {"agg_hg_basis": (lambda g, xs, xd, ef, w, impl: (jgo.agg_hg_basis(
        g, xs, fit(ctx.types, g.n_edges), w["comp"], n_edge_types=3, norm_by_dst_degree=True, impl=impl),),
        ("node",))}


def _padding_dmpnn(g, ctx):
    """Needs one node set: none on a bipartite graph."""
    if g.n_src != g.n_dst:
        return {}
    return {"agg_dmpnn": (lambda g, xs, xd, ef, w, impl: (jgo.agg_dmpnn(g, ef, fit(ctx.rev, g.n_edges, -1),
                                                                         impl=impl),), ("edge",))}


_POSITIONS = "IEEE differences of positions, no reduction and no kernel"
_SAMPLED = "integer outputs (sampled ids), no floating-point arithmetic"
_SAMPLER_THREADS = "test_sampling.py: the same sample on one and two threads and in the pure-JAX sampler"
_NO_KERNEL = "no kernel: XLA's own element-wise ops"

_ATTENTION_ROWS = {"x_src": "src", "x_dst": "dst", "edge_feat": "edge"}
_ONE_NODE_SET = ("pad", "reorder", "convert")  # a block and a part's local graph are bipartite
_SAMPLER_PADDING = "integer outputs: test_padding_transforms.py samples padded graphs, fuzz_padding.py's block mode"


OPS = [
    OpInfo("gspmm", jgo.gspmm, _gspmm, ("u", "e"), False, ("gspmm sum", "gspmm mean", "gspmm max", "gspmm min"),
           True, ("jgo_spmm", "jgo_sddmm"), Fuzz("gspmm", 10, rows={"u": "src", "e": "edge"}), _padding_gspmm),
    OpInfo("gsddmm", jgo.gsddmm, _gsddmm, ("lhs", "rhs"), True, ("gsddmm",), True, ("jgo_sddmm", "jgo_spmm"),
           Fuzz("gsddmm", 7, rows={"lhs": "@lhs_target", "rhs": "@rhs_target"}), _padding_gsddmm),
    OpInfo("edge_softmax", jgo.edge_softmax, _edge_softmax, ("logits",), True, ("edge_softmax",), True,
           ("jgo_edge_softmax", "jgo_spmm", "jgo_sddmm"), Fuzz("edge_softmax", 6, rows={"logits": "edge"}),
           _padding_one("edge_softmax", ("edge",), lambda g, xs, xd, ef, w, impl: (
               jgo.edge_softmax(g, ef[:, :PADDING_HEADS], impl=impl),))),
    OpInfo("agg_simple", jgo.agg_simple, _agg("agg_simple"), ("x", "edge_feat"), False, ("agg_simple",), True,
           ("jgo_spmm", "jgo_sddmm"), Fuzz("agg_simple", 4, rows={"x": "src", "edge_feat": "edge"}),
           _padding_one("agg_simple max", ("node",), lambda g, xs, xd, ef, w, impl: (
               jgo.agg_simple(g, xs, ef, reduce="max", impl=impl),))),
    OpInfo("agg_weighted", jgo.agg_weighted, _agg("agg_weighted"), ("x", "edge_weight"), False, ("agg_weighted",),
           True, ("jgo_spmm", "jgo_sddmm"), Fuzz("agg_weighted", 4, rows={"x": "src", "edge_weight": "edge"}),
           _padding_one("agg_weighted mean", ("node",), lambda g, xs, xd, ef, w, impl: (
               jgo.agg_weighted(g, xs, ef[:, 0], reduce="mean", impl=impl),))),
    OpInfo("agg_concat", jgo.agg_concat, _agg("agg_concat"), ("x", "edge_feat", "edge_weight"), False,
           ("agg_concat",), True, ("jgo_spmm", "jgo_sddmm"),
           Fuzz("agg_concat", 4, rows={"x": "src", "x_dst": "dst", "edge_feat": "edge", "edge_weight": "edge"},
                dst_default=("x", "x_dst")),
           _padding_one("agg_concat", ("node",), lambda g, xs, xd, ef, w, impl: (
               jgo.agg_concat(g, xs, x_dst=xd, edge_feat=ef, reduce="mean", impl=impl),))),
    OpInfo("pool", jgo.pool, _pool, ("x",), False, ("pool",), True,
           ("jgo_pool_sorted", "jgo_pool_sorted_bwd", "jgo_spmm"),
           Fuzz("pool", 3, graph=False, padding_modes="no graph: rows pooled by graph ids"),
           "no graph: a padded batch's padding rows pool into the padding graph (test_padding.py, test_batching.py)"),
    OpInfo("mha_gat", jgo.mha_gat, _attention("mha_gat"), ("x_src", "attn_weights", "edge_feat"), False,
           ("mha_gat",), True, ("jgo_gat_fwd", "jgo_gat_bwd_dst", "jgo_gat_bwd_src", "jgo_rows_dot"),
           Fuzz("mha_gat", 5, rows=_ATTENTION_ROWS, outputs=("dst", "edge"), dst_default=("x_src", "x_dst")),
           _padding_attention("mha_gat")),
    OpInfo("mha_gat_v2", jgo.mha_gat_v2, _attention("mha_gat_v2"), ("x_src", "x_dst", "attn_weights", "edge_feat"),
           False, ("mha_gat_v2",), True, ("jgo_gatv2_fwd", "jgo_gatv2_bwd_dst", "jgo_gatv2_bwd_src", "jgo_rows_dot"),
           Fuzz("mha_gat_v2", 5, rows=_ATTENTION_ROWS, outputs=("dst", "edge"), dst_default=("x_src", "x_dst")),
           _padding_attention("mha_gat_v2")),
    OpInfo("mha_simple", jgo.mha_simple, _attention("mha_simple"), ("query", "key", "value", "edge_feat"), False,
           ("mha_simple",), True, ("jgo_mha_simple_fwd", "jgo_mha_simple_bwd_dst", "jgo_mha_simple_bwd_src"),
           Fuzz("mha_simple", 5, rows={"query": "dst", "key": "src", "value": "src", "edge_feat": "edge"},
                outputs=("dst", "edge")),
           _padding_attention("mha_simple")),
    OpInfo("gno_conv", jgo.gno_conv, _gno, ("f_src", "dx", "U", "b_u", "V", "b_v", "edge_weight"), False,
           ("gno_conv matrix", "gno_conv diagonal"), True,
           ("jgo_gno_fwd", "jgo_gno_bwd_src", "jgo_gno_bwd_dst", "jgo_spmm", "jgo_sddmm"),
           Fuzz("gno_conv", 6, rows={"f_src": "src", "dx": "edge", "edge_weight": "edge"}),
           _padding_one("gno_conv", ("node",), lambda g, xs, xd, ef, w, impl: (jgo.gno_conv(
               g, xs, ef[:, :2], w["U"], w["b_u"], w["V"], w["b_v"], edge_weight=ef[:, 2], reduce="mean",
               impl=impl),))),
    OpInfo("edge_vectors", jgo.edge_vectors, None, ("pos_src", "pos_dst"), True, _POSITIONS, _NO_KERNEL, (),
           Fuzz("edge_vectors", 2, rows={"pos_src": "src", "pos_dst": "dst"}, dst_default=("pos_src", "pos_dst")),
           _padding_one("edge_vectors", ("edge",), lambda g, xs, xd, ef, w, impl: (
               jgo.edge_vectors(g, xs[:, :3], xd[:, :3]),))),
    OpInfo("update_efeat", jgo.update_efeat, _update_efeat, ("edge_feat", "x_src", "x_dst"), True,
           ("update_efeat",), True,
           ("jgo_update_efeat_fwd", "jgo_update_efeat_bwd_src", "jgo_update_efeat_bwd_dst",
            "jgo_update_efeat_bwd_edge"),
           Fuzz("update_efeat", 3, rows={"edge_feat": "edge", "x_src": "src", "x_dst": "dst"}),
           _padding_one("update_efeat", ("edge",), lambda g, xs, xd, ef, w, impl: (
               jgo.update_efeat(g, ef, xs, xd, impl=impl),))),
    OpInfo("agg_hg_basis", jgo.agg_hg_basis, _hg_basis, ("x", "comp", "x_dst"), False, ("agg_hg_basis",), True,
           ("jgo_hg_basis_fwd", "jgo_hg_basis_bwd_src", "jgo_hg_basis_norm"),
           Fuzz("agg_hg_basis", 3, rows={"x": "src", "x_dst": "dst"}, dst_default=("x", "x_dst")), _padding_hg_basis),
    OpInfo("agg_dmpnn", jgo.agg_dmpnn, _dmpnn, ("h",), True, ("agg_dmpnn",), True, ("jgo_dmpnn_fwd", "jgo_dmpnn_bwd"),
           Fuzz("agg_dmpnn", 3, square=True, rows={"h": "edge"}, padding_modes=_ONE_NODE_SET), _padding_dmpnn),
    OpInfo("sample_neighbors", jgo.sample_neighbors, None, (), False, _SAMPLED, _SAMPLER_THREADS,
           ("jgo_sample_neighbors",), "test_sampling.py: the samplers' own checks (the fuzzer's block mode runs it)",
           _SAMPLER_PADDING),
    OpInfo("sample_blocks", jgo.sample_blocks, None, (), False, _SAMPLED, _SAMPLER_THREADS,
           ("jgo_sample_neighbors", "jgo_sample_relabel"), "test_sampling.py: the samplers' own checks",
           _SAMPLER_PADDING),
    OpInfo("dimenet.agg_edge_to_edge", jgo.dimenet.agg_edge_to_edge, _dimenet, ("vec", "sbf_rad", "emb", "weights"),
           True, ("dimenet agg_edge_to_edge",), True, ("jgo_dimenet_in", "jgo_dimenet_out", "jgo_rows_dot"),
           Fuzz("agg_edge_to_edge", 3, square=True, min_edges=1, concrete=True, no_loops=True,
                rows={"vec": "edge", "sbf_rad": "edge", "emb": "edge"}, padding_modes=_ONE_NODE_SET),
           "takes triplets, not a graph: test_padding_transforms.py runs it on a padded graph's triplets"),
    OpInfo("dimenet.radial_basis", jgo.dimenet.radial_basis, None, ("x", "w"), True,
           "element-wise on one distance per edge, no reduction and no kernel (``test_dimenet_basis.py``)",
           _NO_KERNEL, (), "element-wise on distances, no graph: test_dimenet_basis.py",
           "element-wise on distances, no graph"),
]
# the fuzzer's targets that are no op: DimeNet++ whole, and the layers of LAYERS
FUZZ_MODELS = (
    Fuzz("dimenet_model", 1, square=True, min_edges=1, concrete=True, no_loops=True, mutable=False,
         padding_modes="a whole model on its own molecule batch"),
    Fuzz("layer", 5, rows={"x": "src", "x_dst": "dst", "edge_attr": "edge", "dx": "edge", "f_dst": "dst"},
         # partition: the layers normalise by degrees a part does not see (GraphConv)
         padding_modes=("pad", "reorder", "convert", "block")),
)


def fuzz_targets() -> dict[str, Fuzz]:
    """The fuzzer's targets in the order it draws them: the ops' (registry order), then :data:`FUZZ_MODELS`; each
    with its ``outputs`` resolved."""
    specs = {op.fuzz.target: dataclasses.replace(op.fuzz, outputs=op.fuzz.outputs or (
        ("edge",) if op.edge_valued else ("dst",))) for op in OPS if isinstance(op.fuzz, Fuzz)}
    return specs | {f.target: dataclasses.replace(f, outputs=f.outputs or ("dst",)) for f in FUZZ_MODELS}


@dataclasses.dataclass(frozen=True)
class LayerInfo:
    """A layer of ``jaxgraphops.nn.flax``, ``.nnx`` and ``.equinox`` (one name in all three): ``fuzz``, whether
    ``fuzz.py`` draws it (its ``layer`` target: linen and Equinox), or why not; ``blocks``, whether
    ``test_blocks.py`` runs it on sampled blocks (all three frameworks), or why not."""
    name: str
    fuzz: bool | str
    blocks: bool | str


LAYERS = [  # the fuzzed layers first, in the order fuzz.py draws them
    LayerInfo("SAGEConv", True, True),
    LayerInfo("GraphConv", True, True),
    LayerInfo("GATConv", True, True),
    LayerInfo("GATv2Conv", True, True),
    LayerInfo("TransformerConv", True, True),
    LayerInfo("GNOBlock", True, True),
    LayerInfo("GCNConv", "GraphConv's normalised aggregation with PyG's degrees: test_pyg_parity.py",
              "square graphs only (gcn_norm: in-degrees on both sides): a block is bipartite"),
    LayerInfo("GINConv", "one agg_simple sum and an MLP: test_pyg_parity_layers.py", True),
    LayerInfo("GINEConv", "agg_simple with edge features and an MLP: test_pyg_parity_layers.py", True),
    LayerInfo("EdgeConv", "update_efeat and agg_simple around an MLP (fuzzed as ops): test_pyg_parity_layers.py",
              True),
    LayerInfo("RGCNConv", "agg_hg_basis (fuzzed as an op): test_peer_parity_relational.py", True),
    LayerInfo("DMPNNEncoder", "agg_dmpnn (fuzzed as an op) over depth steps: test_nn_relational.py",
              "edge-to-edge messages over reverse bonds: one node set, no block"),
    LayerInfo("InteractionNetwork", "update_efeat and agg_simple (fuzzed as ops): test_nn_relational.py",
              "not yet: it returns edges too (edge_fn of 0 at the padding edges), which the block test does not read"),
    LayerInfo("AttentionalAggregation", "a readout (pool by graph ids): test_nn_layers.py",
              "a readout over graphs of a batch, no edges"),
    LayerInfo("GraphNorm", "a readout (pool by graph ids): test_nn_layers.py",
              "a readout over graphs of a batch, no edges"),
    LayerInfo("DimeNetPlusPlus", "its own fuzz target (dimenet_model)",
              "a whole model on triplets of one node set: no block"),
]
BY_NAME = {op.name: op for op in OPS}
OP_MODULES = ("jaxgraphops.ops.", "jaxgraphops.dimenet.ops", "jaxgraphops.dimenet.basis", "jaxgraphops.sampling")


def public_ops() -> set[str]:
    """The public ops: the functions of ``jaxgraphops.__all__`` and ``jaxgraphops.dimenet.__all__`` defined by
    the op modules (not the graph constructors, transformations and helpers)."""
    names = set()
    for prefix, module in (("", jgo), ("dimenet.", jgo.dimenet)):
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, type) and obj.__module__.startswith(OP_MODULES):
                names.add(prefix + name)
    return names


def cases(g, rng, dtype, *, full: bool = False) -> dict:
    """``{"op/case": (call(impl, *args), args)}`` of every op with cases, on the graph ``g``: with ``full`` every
    variant, 32 features and 4 heads (large runs), else a representative case or two, 6 features, 2 heads."""
    inputs = Inputs(g, rng, dtype, 32 if full else 6, 4 if full else 2)
    return {f"{op.name}/{name}": case for op in OPS if op.cases is not None
            for name, case in op.cases(g, inputs, full).items()}


def small_graph():
    """The graph the registry's cases run on in the parity tests: 9 nodes, 40 edges, duplicates and nodes
    without in-edges, no self loops (DimeNet's edges need a length)."""
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 9, 40), rng.integers(0, 8, 40)
    src[src == dst] = (src[src == dst] + 1) % 8
    return jgo.Graph.from_edges(src, dst, 9, 9)


def results(impl) -> dict[str, np.ndarray]:
    """Every case on :func:`small_graph` in float64 (x64 must be on): its output and the gradients of a fixed
    random projection of it, ``{"op/case": out, "op/case/grad<k>": ...}``."""
    import jax

    out = {}
    for name, (fn, args) in cases(small_graph(), np.random.default_rng(11), jnp.float64).items():
        y = jax.jit(lambda *xs, fn=fn: fn(impl, *xs))(*args)
        proj = jnp.asarray(np.random.default_rng(3).normal(size=y.shape))
        grads = jax.jit(jax.grad(lambda *xs, fn=fn, proj=proj: jnp.sum(fn(impl, *xs) * proj),
                                 argnums=tuple(range(len(args)))))(*args)
        out[name] = np.asarray(y)
        out.update({f"{name}/grad{k}": np.asarray(gk) for k, gk in enumerate(grads)})
    return out


def results_in_child(tmp_path, kernels: str, child: str) -> dict[str, np.ndarray]:
    """The arrays saved by ``child`` (``"module.function"`` of the tests folder, called with an ``.npz`` path) run in
    a process with ``JGO_KERNELS=kernels``, started in the tests folder (not the repository root, whose
    ``jaxgraphops/`` is not built)."""
    import os
    import subprocess
    import sys

    path, folder = tmp_path / f"{kernels}.npz", Path(__file__).parent
    module, function = child.rsplit(".", 1)
    env = dict(os.environ, JGO_KERNELS=kernels, PYTHONPATH=str(folder))
    proc = subprocess.run([sys.executable, "-c", f"import {module} as t; t.{function}({str(path)!r})"], env=env,
                          capture_output=True, text=True, timeout=600, cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(path) as z:
        return {k: z[k] for k in z.files}
