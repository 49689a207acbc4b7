"""A crash-safe fuzzer of jaxgraphops' public API (issue 19).

Every case is a pure function of one integer seed: a random or adversarial graph (empty, isolated
nodes, self loops, duplicate edges, heavy hubs, bipartite, int32/int64 indices), the inputs of one
public op or layer (every float dtype, NaN/Inf entries, ties) and, in about half the cases, one
mutation that makes the input invalid (out-of-range and negative ids, a hand-built ``Graph`` with
corrupted CSC/CSR/COO arrays, wrong shapes, ranks and dtypes, misspelt options). A case runs eager
or under ``jit``, forward or backward (the gradient of every float input, weights included).

Oracle: on valid input the result must match the pure-JAX reference (``impl="xla"``, run in float32
for half-precision inputs) within a tolerance of the dtype, with NaN and Inf at the same places;
on invalid input the call must raise a clear Python exception (ValueError, TypeError or
JaxRuntimeError whose message names the function or the argument; a misspelt option must get a
"did you mean"). Outcomes: ``ok``, ``clear_error``, ``xfail`` (a known gap, see the flags below),
and the failures ``crash``, ``hang``, ``silent_difference``, ``unclear_error`` and
``rejected_valid`` (valid input that the op rejects while the reference computes it).

Cases run in worker subprocesses (``python tests/fuzz.py --worker``) that keep their compiled
functions across cases; a worker that dies is a ``crash`` of the case it was running (named by its
seed) and is restarted; a case that runs past the time limit is a ``hang``.

Profiles: ``pytest tests/test_fuzz.py`` runs the quick one (``QUICK_CASES``); the long one is
``JGO_FUZZ_CASES=50000 pytest tests/test_fuzz.py`` or ``python tests/fuzz.py --cases 50000``
(also ``python -m tests.fuzz`` from the repository root). Replay one case with ``--replay SEED``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import difflib
import functools
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import traceback

import numpy as np

if __name__ == "__main__" and "--worker" in sys.argv[1:]:
    # a worker's stdout is its protocol (worker_main): whatever the imports below print goes to stderr (the registry
    # imports jaxgraphops, whose editable install may rebuild it and say so)
    PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

try:
    import fuzz_padding
    import op_db
    from xla_compile import cheap_compile_flags
except ImportError:  # python -m tests.fuzz, from the repository root
    from . import fuzz_padding, op_db
    from .xla_compile import cheap_compile_flags

# -- known gaps, each a flag to flip once it is closed ----------------------------------------------

# Graph.from_edges inside jit checks its (traced) edge list when the computation runs (jgo_check_edges):
# these mutations of graphs built with build="traced" must raise a JaxRuntimeError naming it.
TRACED_EDGE_MUTATIONS = ("traced_src_negative", "traced_dst_negative", "traced_src_too_large",
                         "traced_dst_too_large")

# A hand-built Graph passed into jit is checked for its shapes and dtypes (at trace time), but its
# values only by the CPU kernels, for the arrays each reads (ranges, permutations): a corrupted array
# that JAX code reads (degrees from offsets, gathers by src/dst, the reference) or that is in range
# but inconsistent with the other copies gives a wrong answer (documented in Graph's docstring).
# Concrete hand-built graphs are checked by every op (a ValueError naming the array). The gated
# cases are the hand_* value mutations under jit whose answer differs from the valid graph's.
HAND_BUILT_GRAPHS_CHECKED_UNDER_JIT = False


def _layer(case):
    return dict(case.config).get("layer") if case.target == "layer" else None


def _special(case, names=None, values=("nan", "inf")):
    """Whether the case put NaN/Inf (``values``) into one of ``names`` (any input if None)."""
    if not case.special:
        return False
    name, value = case.special.split(":")
    return (names is None or name in names) and any(v in value for v in values)


# Defects of the C++ kernels that this fuzzer found (issue 19); each is described in docs and left
# to the kernels' owners. While ``fixed`` is False, a silent difference on a case the predicate
# matches counts as an xfail. Set ``fixed`` to True once the kernel is fixed.
KNOWN_DEFECTS = {
    # mha_gat's scores <a_h, x_h> are one GEMM against a block-diagonal [H*C, H] matrix (P1 of
    # docs/semantics.md): a NaN or inf in one head's features meets the other heads' zeros and every
    # head of the row is NaN, where the reference keeps the heads apart.
    "gat_head_mixing": (False, lambda c, d: (c.target == "mha_gat" or _layer(c) == "GATConv") and _special(c),
                        "jaxgraphops/ops/attention.py"),
    # The fused gno kernels factor the message through A_i = sum_e f_j (x) [relu(U dx_e + b_u), 1]:
    # padded hidden lanes compute 0 * inf = NaN for an infinite dx, an infinite f_src meets the
    # zeros of relu (inf * 0), and NaN in V or b_v reaches rows without in-edges (0 * NaN) that the
    # reference sets to 0.
    "gno_nonfinite": (False, lambda c, d: (c.target == "gno_conv" or _layer(c) == "GNOBlock") and _special(c),
                      "ffi/cpu/gno.cc"),
    # The fused DimeNet++ kernels distribute emb[e_in] over the terms of the projection, so an
    # infinite emb (or vec/sbf_rad/weights) meets terms of both signs (inf - inf = NaN) where the
    # reference multiplies it by the summed projection once (+-inf).
    "dimenet_nonfinite": (False, lambda c, d: c.target == "agg_edge_to_edge" and _special(c, values=("inf",)),
                          "ffi/cpu/dimenet.cc"),
}

# JGO_FUZZ_FIXED=HAND_BUILT_GRAPHS_CHECKED_UNDER_JIT,gno_nonfinite (flags and defect names, or "all") runs as if
# those were fixed: to see the gated cases fail, or pass, before flipping a flag here
for _name in filter(None, os.environ.get("JGO_FUZZ_FIXED", "").split(",")):
    if _name in ("HAND_BUILT_GRAPHS_CHECKED_UNDER_JIT", "all"):
        HAND_BUILT_GRAPHS_CHECKED_UNDER_JIT = True
    for _defect in KNOWN_DEFECTS:
        if _name in (_defect, "all"):
            KNOWN_DEFECTS[_defect] = (True, *KNOWN_DEFECTS[_defect][1:])

QUICK_CASES = 2000  # CI (the ci and exhaustive test profiles)
SMOKE_CASES = 400  # the default test profile
LONG_CASES = 50000
BATCH = 30
REPEAT = 10  # consecutive seeds that share a structure (and compiled functions); BATCH is a multiple
CASE_TIMEOUT_S = 180.0  # per case: the first cases of a worker compile a lot; a loaded CI machine is slow

OUTCOMES = ("ok", "clear_error", "xfail", "crash", "hang", "silent_difference", "unclear_error", "rejected_valid")
FAILURES = ("crash", "hang", "silent_difference", "unclear_error", "rejected_valid")

# -- case description (numpy only) ------------------------------------------------------------------

# (n_src, n_dst, n_edges): few sizes, so compiled functions are reused across cases
SIZES = [(0, 0, 0), (1, 1, 0), (1, 1, 1), (3, 3, 0), (2, 2, 3), (5, 5, 8), (6, 4, 10), (4, 6, 9), (8, 8, 24)]
SIZE_WEIGHTS = [1, 1, 2, 1, 3, 6, 3, 3, 4]
GRAPH_KINDS = ("random", "self_loops", "duplicates", "hub_dst", "hub_src", "isolated", "chain")
# graphs derived by the library: the ops must treat them as the reference does
TRANSFORMS = ("none", "reverse", "batch", "pad", "self_loops")
TRANSFORM_WEIGHTS = (12, 2, 2, 2, 2)


def transformed_sizes(transform, n_src, n_dst, n_edges):
    return {"none": (n_src, n_dst, n_edges), "reverse": (n_dst, n_src, n_edges),
            "batch": (2 * n_src, 2 * n_dst, 2 * n_edges), "pad": (n_src + 1, n_dst + 1, n_edges + 2),
            "self_loops": (n_src, n_dst, n_edges + n_src)}[transform]


def apply_transform(jgo, g, transform):
    if transform == "reverse":
        return g.reverse()
    if transform == "batch":
        return jgo.batch([g, g]).graph
    if transform == "pad":
        return jgo.pad(g, g.n_src + 1, g.n_dst + 1, g.n_edges + 2)
    if transform == "self_loops":
        import jaxgraphops.nn
        return jaxgraphops.nn.add_self_loops(g)
    return g
HALF = ("bfloat16", "float16")
RTOL = {"float64": 1e-9, "float32": 1e-4, "bfloat16": 6e-2, "float16": 2e-2}


@dataclasses.dataclass
class Case:
    seed: int
    target: str
    config: tuple = ()
    mode: str = "eager"            # eager | jit
    grad: bool = False
    x64: bool = False
    dtype: str = "float32"
    index_dtype: str = "int32"
    build: str = "edges"           # edges (from_edges, concrete) | traced (from_edges inside jit) | hand | none
    transform: str = "none"        # applied to the built graph: reverse | batch | pad | self_loops | none
    src: np.ndarray | None = None
    dst: np.ndarray | None = None
    n_src: int = 0
    n_dst: int = 0
    hand: list | None = None       # the eight arrays of a hand-built Graph
    arrays: list = dataclasses.field(default_factory=list)   # differentiable inputs
    names: list = dataclasses.field(default_factory=list)    # their argument names
    extra: dict = dataclasses.field(default_factory=dict)    # other inputs (ids, static sizes)
    impl: str | None = None        # the subject: None (kernels) or "xla"
    mutation: str | None = None    # None: valid input
    expect_names: tuple = ()       # a clear error names one of these
    did_you_mean: bool = False
    gate: str | None = None        # a known gap: not raising is an xfail
    special: str | None = None     # nan/inf/ties put in the inputs
    padding: str | None = None     # a padding mode (tests/fuzz_padding.py): the op against the unpadded graph

    def label(self) -> str:
        cfg = ",".join(f"{k}={v}" for k, v in self.config)
        return (f"seed={self.seed} {self.target}({cfg}) {self.mode} {'grad' if self.grad else 'fwd'} "
                f"{self.dtype}/{self.index_dtype}{' x64' if self.x64 else ''} graph={self.build}"
                f"{'' if self.transform == 'none' else '+' + self.transform}"
                f"[{self.n_src}x{self.n_dst},E={0 if self.src is None else len(self.src)}] impl={self.impl}"
                f"{' special=' + self.special if self.special else ''}"
                f"{' padding=' + self.padding if self.padding else ''}"
                f"{' mutation=' + self.mutation if self.mutation else ''}")


def _pick(rng, items, weights=None):
    if weights is None:
        return items[int(rng.integers(len(items)))]
    p = np.asarray(weights, float)
    return items[int(rng.choice(len(items), p=p / p.sum()))]


def random_edges(rng, n_src, n_dst, n_edges, kind):
    """Edges ``src, dst`` (int64) of one adversarial kind on the given sizes."""
    if n_edges == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    src = rng.integers(0, n_src, n_edges)
    dst = rng.integers(0, n_dst, n_edges)
    if kind == "self_loops":
        m = min(n_src, n_dst)
        k = rng.random(n_edges) < 0.5
        src[k] = dst[k] = rng.integers(0, m, int(k.sum()))
    elif kind == "duplicates":
        src[1::2], dst[1::2] = src[0:n_edges - 1:2][: len(src[1::2])], dst[0:n_edges - 1:2][: len(dst[1::2])]
    elif kind == "hub_dst":
        dst[rng.random(n_edges) < 0.8] = rng.integers(0, n_dst)
    elif kind == "hub_src":
        src[rng.random(n_edges) < 0.8] = rng.integers(0, n_src)
    elif kind == "isolated":  # only the first half of the nodes take part
        src = rng.integers(0, max(1, n_src // 2), n_edges)
        dst = rng.integers(0, max(1, n_dst // 2), n_edges)
    elif kind == "chain":
        src = np.arange(n_edges) % n_src
        dst = (np.arange(n_edges) + 1) % n_dst
    return src.astype(np.int64), dst.astype(np.int64)


def typo(rng, word):
    """A misspelling of ``word`` (a swap, a dropped or a doubled character)."""
    if len(word) < 2:
        return word + "x"
    i = int(rng.integers(len(word) - 1))
    kind = int(rng.integers(3))
    if kind == 0 and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == 1 and len(word) > 3:
        return word[:i] + word[i + 1:]
    return word[:i] + word[i] + word[i:]


def close_match(word, choices):
    """Whether jaxgraphops must suggest a choice (difflib's match, or the same word in another case)."""
    strings = [c for c in choices if isinstance(c, str)]
    return bool(difflib.get_close_matches(word, strings, n=1)) or word.lower() in strings


class Gen:
    """What a target's generator gets: the rng, sizes and dtypes, and helpers to make inputs."""

    def __init__(self, rng, data, case, sizes):
        self.rng, self.data, self.case = rng, data, case  # structure (shared by REPEAT seeds), data
        self.n_src, self.n_dst, self.n_edges = sizes  # of the graph the op gets (after the transform)
        self.layer = None  # the layer to build, if the structure prescribes one
        self.options = {}   # name -> (value, choices): string options a mutation may misspell

    def normal(self, *shape):
        return self.data.normal(size=shape)

    def add(self, name, x):
        self.case.arrays.append(np.asarray(x, np.float64))
        self.case.names.append(name)

    def choice(self, name, choices, weights=None):
        value = _pick(self.rng, list(choices), weights)
        self.options[name] = (value, tuple(choices))
        return value


# -- targets: generators (numpy) and appliers (jax) -------------------------------------------------

GENERATORS = {}


def target(name):
    """Registers the generator of a target of the registry (``op_db.fuzz_targets()``: its weight, constraints and
    rows are there)."""
    def register(gen):
        GENERATORS[name] = gen
        return gen
    return register


@target("gspmm")
def _gen_gspmm(t):
    op = t.choice("op", ("copy_u", "copy_e", "u_mul_e", "u_add_e", "u_sub_e", "u_div_e"))
    reduce = t.choice("reduce", ("sum", "mean", "max", "min"))
    f = _pick(t.rng, [1, 3])
    shape = _pick(t.rng, ["flat", "heads", "edge_scalar"])
    if op != "copy_e":
        t.add("u", t.normal(t.n_src, 2, f) if shape == "heads" else t.normal(t.n_src, f))
    if op != "copy_u":
        if shape == "edge_scalar" and op != "copy_e":
            t.add("e", t.normal(t.n_edges))
        elif shape == "heads":
            t.add("e", t.normal(t.n_edges, 2))
        else:
            t.add("e", t.normal(t.n_edges, f))
    if op == "u_div_e":
        t.case.arrays[-1] = np.sign(t.case.arrays[-1]) * (0.5 + np.abs(t.case.arrays[-1]))
    return (("op", op), ("reduce", reduce), ("shape", shape))


def _apply_gspmm(jgo, g, a, x, cfg, impl):
    kw = dict(cfg)
    u = a[0] if kw["op"] != "copy_e" else None
    e = a[-1] if kw["op"] != "copy_u" else None
    return jgo.gspmm(g, u, e, op=kw["op"], reduce=kw["reduce"], impl=impl)


@target("gsddmm")
def _gen_gsddmm(t):
    op = t.choice("op", ("dot", "add", "sub", "mul", "div"))
    lt = t.choice("lhs_target", ("u", "v", "e"))
    rt = t.choice("rhs_target", ("u", "v", "e"))
    rows = {"u": t.n_src, "v": t.n_dst, "e": t.n_edges}
    f = _pick(t.rng, [1, 4])
    t.add("lhs", t.normal(rows[lt], f))
    t.add("rhs", t.normal(rows[rt], f))
    if op == "div":
        t.case.arrays[-1] = np.sign(t.case.arrays[-1]) * (0.5 + np.abs(t.case.arrays[-1]))
    return (("op", op), ("lhs_target", lt), ("rhs_target", rt))


def _apply_gsddmm(jgo, g, a, x, cfg, impl):
    return jgo.gsddmm(g, a[0], a[1], **dict(cfg), impl=impl)


@target("edge_softmax")
def _gen_edge_softmax(t):
    heads = _pick(t.rng, [0, 1, 3])
    t.add("logits", 3 * (t.normal(t.n_edges) if heads == 0 else t.normal(t.n_edges, heads)))
    return (("heads", heads),)


def _apply_edge_softmax(jgo, g, a, x, cfg, impl):
    return jgo.edge_softmax(g, a[0], impl=impl)


@target("agg_simple")
def _gen_agg_simple(t):
    reduce = t.choice("reduce", ("sum", "mean", "max", "min"))
    parts = _pick(t.rng, ["x", "edge_feat", "both"])
    if parts in ("x", "both"):
        t.add("x", t.normal(t.n_src, 3))
    if parts in ("edge_feat", "both"):
        t.add("edge_feat", t.normal(t.n_edges, 2))
    return (("reduce", reduce), ("parts", parts))


def _apply_agg_simple(jgo, g, a, x, cfg, impl):
    kw = dict(cfg)
    xs = a[0] if kw["parts"] != "edge_feat" else None
    ef = a[-1] if kw["parts"] != "x" else None
    return jgo.agg_simple(g, xs, ef, reduce=kw["reduce"], impl=impl)


@target("agg_weighted")
def _gen_agg_weighted(t):
    reduce = t.choice("reduce", ("sum", "mean", "max", "min"))
    t.add("x", t.normal(t.n_src, 3))
    w = t.normal(t.n_edges)
    if t.data.random() < 0.3:  # zero total weights
        w[t.data.random(t.n_edges) < 0.5] = 0
    t.add("edge_weight", w)
    return (("reduce", reduce),)


def _apply_agg_weighted(jgo, g, a, x, cfg, impl):
    return jgo.agg_weighted(g, a[0], a[1], reduce=dict(cfg)["reduce"], impl=impl)


@target("agg_concat")
def _gen_agg_concat(t):
    reduce = t.choice("reduce", ("sum", "mean", "max", "min"))
    t.add("x", t.normal(t.n_src, 3))
    with_dst = t.n_src != t.n_dst or t.rng.random() < 0.5
    if with_dst:
        t.add("x_dst", t.normal(t.n_dst, 2))
    with_ef, with_w = t.rng.random() < 0.4, t.rng.random() < 0.4
    if with_ef:
        t.add("edge_feat", t.normal(t.n_edges, 2))
    if with_w:
        t.add("edge_weight", np.abs(t.normal(t.n_edges)) + 0.1)
    return (("reduce", reduce), ("x_dst", with_dst), ("edge_feat", with_ef), ("edge_weight", with_w))


def _named(case_names, a):
    return dict(zip(case_names, a))


def _apply_agg_concat(jgo, g, a, x, cfg, impl):
    kw, v = dict(cfg), _named(x["names"], a)
    return jgo.agg_concat(g, v["x"], x_dst=v.get("x_dst"), edge_feat=v.get("edge_feat"),
                          edge_weight=v.get("edge_weight"), reduce=kw["reduce"], impl=impl)


@target("pool")
def _gen_pool(t):
    reduce = t.choice("reduce", ("sum", "mean", "max", "min"))
    n_graphs = _pick(t.rng, [1, 3])
    n = t.n_src
    sorted_ids = bool(t.rng.random() < 0.5)
    ids = t.data.integers(0, n_graphs, n)
    ids = np.sort(ids) if sorted_ids else ids
    is_sorted = sorted_ids and bool(t.rng.random() < 0.7)
    t.case.extra["graph_ids"] = ids.astype(np.int32)
    t.add("x", t.normal(n, 2))
    return (("reduce", reduce), ("n_graphs", n_graphs), ("ids_are_sorted", is_sorted))


def _apply_pool(jgo, g, a, x, cfg, impl):
    kw = dict(cfg)
    return jgo.pool(a[0], x["graph_ids"], kw["n_graphs"], reduce=kw["reduce"], ids_are_sorted=kw["ids_are_sorted"],
                    impl=impl)


def _attention_common(t, with_dst_default):
    heads, c = _pick(t.rng, [1, 2]), _pick(t.rng, [1, 3])
    concat = bool(t.rng.random() < 0.6)
    with_ef = bool(t.rng.random() < 0.4)
    ret = bool(t.rng.random() < 0.4)
    with_dst = t.n_src != t.n_dst or (with_dst_default and t.rng.random() < 0.5)
    return heads, c, concat, with_ef, ret, with_dst


@target("mha_gat")
def _gen_mha_gat(t):
    heads, c, concat, with_ef, ret, with_dst = _attention_common(t, True)
    w = heads * c
    t.add("x_src", t.normal(t.n_src, w))
    t.add("attn_weights", t.normal((3 if with_ef else 2) * w))
    if with_dst:
        t.add("x_dst", t.normal(t.n_dst, w))
    if with_ef:
        t.add("edge_feat", t.normal(t.n_edges, w))
    slope = float(_pick(t.rng, [0.2, 0.0, 1.0]))
    return (("num_heads", heads), ("concat_heads", concat), ("negative_slope", slope), ("return_attention", ret))


def _apply_mha_gat(jgo, g, a, x, cfg, impl):
    v = _named(x["names"], a)
    return jgo.mha_gat(g, v["x_src"], v["attn_weights"], x_dst=v.get("x_dst"), edge_feat=v.get("edge_feat"),
                       **dict(cfg), impl=impl)


@target("mha_gat_v2")
def _gen_mha_gat_v2(t):
    heads, c, concat, with_ef, ret, with_dst = _attention_common(t, True)
    w = heads * c
    t.add("x_src", t.normal(t.n_src, w))
    if with_dst:
        t.add("x_dst", t.normal(t.n_dst, w))
    t.add("attn_weights", t.normal(w))
    if with_ef:
        t.add("edge_feat", t.normal(t.n_edges, w))
    slope = float(_pick(t.rng, [0.2, 0.0, 1.0]))
    return (("num_heads", heads), ("concat_heads", concat), ("negative_slope", slope), ("return_attention", ret))


def _apply_mha_gat_v2(jgo, g, a, x, cfg, impl):
    v = _named(x["names"], a)
    return jgo.mha_gat_v2(g, v["x_src"], v.get("x_dst"), v["attn_weights"], edge_feat=v.get("edge_feat"),
                          **dict(cfg), impl=impl)


@target("mha_simple")
def _gen_mha_simple(t):
    heads, c, concat, with_ef, ret, _ = _attention_common(t, False)
    w = heads * c
    t.add("query", t.normal(t.n_dst, w))
    t.add("key", t.normal(t.n_src, w))
    t.add("value", t.normal(t.n_src, w))
    if with_ef:
        t.add("edge_feat", t.normal(t.n_edges, w))
    return (("num_heads", heads), ("concat_heads", concat), ("return_attention", ret))


def _apply_mha_simple(jgo, g, a, x, cfg, impl):
    v = _named(x["names"], a)
    return jgo.mha_simple(g, v["query"], v["key"], v["value"], edge_feat=v.get("edge_feat"), **dict(cfg), impl=impl)


@target("gno_conv")
def _gen_gno_conv(t):
    kernel = t.choice("kernel", ("matrix", "diagonal"))
    reduce = t.choice("reduce", ("sum", "mean"))
    c_in = _pick(t.rng, [0, 1, 2, 2, 3], )
    c_out = c_in if kernel == "diagonal" else _pick(t.rng, [1, 2])
    d, h = _pick(t.rng, [1, 2]), _pick(t.rng, [1, 3])
    p = c_in if kernel == "diagonal" else c_in * c_out
    t.add("f_src", t.normal(t.n_src, c_in))
    t.add("dx", t.normal(t.n_edges, d))
    t.add("U", t.normal(h, d))
    t.add("b_u", t.normal(h))
    t.add("V", t.normal(p, h))
    t.add("b_v", t.normal(p))
    with_w = bool(t.rng.random() < 0.4)
    if with_w:
        w = np.abs(t.normal(t.n_edges))
        w[t.data.random(t.n_edges) < 0.2] = 0
        t.add("edge_weight", w)
    return (("kernel", kernel), ("reduce", reduce), ("edge_weight", with_w))


def _apply_gno_conv(jgo, g, a, x, cfg, impl):
    kw = dict(cfg)
    v = _named(x["names"], a)
    return jgo.gno_conv(g, *(v[n] for n in ("f_src", "dx", "U", "b_u", "V", "b_v")), kernel=kw["kernel"],
                        reduce=kw["reduce"], edge_weight=v.get("edge_weight"), impl=impl)


@target("edge_vectors")
def _gen_edge_vectors(t):
    d = _pick(t.rng, [1, 3])
    t.add("pos_src", t.normal(t.n_src, d))
    with_dst = t.n_src != t.n_dst or t.rng.random() < 0.5
    if with_dst:
        t.add("pos_dst", t.normal(t.n_dst, d))
    return (("pos_dst", with_dst),)


def _apply_edge_vectors(jgo, g, a, x, cfg, impl):
    v = _named(x["names"], a)
    if impl == "xla":  # edge_vectors has no impl: its reference is the gather itself
        return jgo.reference.edge_vectors(g, v["pos_src"], v.get("pos_dst", v["pos_src"]))
    return jgo.edge_vectors(g, v["pos_src"], v.get("pos_dst"))


@target("update_efeat")
def _gen_update_efeat(t):
    mode = t.choice("mode", ("concat", "sum"))
    present = [bool(t.rng.random() < 0.7) for _ in range(3)]
    if not any(present):
        present[int(t.rng.integers(3))] = True
    widths = [_pick(t.rng, [0, 1, 3]) for _ in range(3)]
    if mode == "sum":
        widths = [widths[0]] * 3
    for name, rows, on, w in zip(("edge_feat", "x_src", "x_dst"), (t.n_edges, t.n_src, t.n_dst), present, widths):
        if on:
            t.add(name, t.normal(rows, w))
    return (("mode", mode),)


def _apply_update_efeat(jgo, g, a, x, cfg, impl):
    v = _named(x["names"], a)
    return jgo.update_efeat(g, v.get("edge_feat"), v.get("x_src"), v.get("x_dst"), **dict(cfg), impl=impl)


@target("agg_hg_basis")
def _gen_agg_hg_basis(t):
    r = _pick(t.rng, [1, 2, 3])
    with_comp, concat_own = bool(t.rng.random() < 0.6), bool(t.rng.random() < 0.4)
    t.add("x", t.normal(t.n_src, _pick(t.rng, [0, 1, 3])))
    if with_comp:
        t.add("comp", t.normal(r, _pick(t.rng, [1, 2])))
    if concat_own and (t.n_src < t.n_dst or t.rng.random() < 0.5):
        t.add("x_dst", t.normal(t.n_dst, t.case.arrays[0].shape[1]))
    types = tuple(int(k) for k in t.rng.integers(0, r, t.n_edges))
    return (("n_edge_types", r), ("edge_types", types), ("concat_own", concat_own),
            ("norm_by_dst_degree", bool(t.rng.random() < 0.5)))


def _apply_agg_hg_basis(jgo, g, a, x, cfg, impl):
    kw, v = dict(cfg), _named(x["names"], a)
    types = np.asarray(kw.pop("edge_types"), np.int32).reshape(-1)
    return jgo.agg_hg_basis(g, v["x"], types, v.get("comp"), x_dst=v.get("x_dst"), **kw, impl=impl)


@target("agg_dmpnn")
def _gen_agg_dmpnn(t):
    t.add("h", t.normal(t.n_edges, _pick(t.rng, [0, 1, 3])))
    # a padded graph's last 2 edges are padding: a real edge's reverse is real (naming a padding edge is an error)
    padding = 2 if t.case.transform == "pad" else 0
    rev = involution(t.n_edges - padding, int(t.rng.integers(3)))
    rev = tuple(int(k) for k in np.concatenate([rev, np.full(padding, -1)]))
    return (("concat_own", bool(t.rng.random() < 0.4)), ("rev_edge_ids", rev))


def involution(n_edges, pairing):
    """``rev_edge_ids`` pairing consecutive edges (``pairing`` 0), leaving some without reverse (1: every third
    is -1) or as their own reverse (2: every third is a fixed point)."""
    rev = np.arange(n_edges) ^ 1
    rev[rev >= n_edges] = -1
    if pairing:
        lone = np.arange(0, n_edges, 6)
        lone_pairs = np.concatenate([lone, lone + 1])
        lone_pairs = lone_pairs[lone_pairs < n_edges]
        rev[lone_pairs] = -1 if pairing == 1 else lone_pairs
    return rev


def _apply_agg_dmpnn(jgo, g, a, x, cfg, impl):
    kw, v = dict(cfg), _named(x["names"], a)
    rev = np.asarray(kw.pop("rev_edge_ids"), np.int32).reshape(-1)
    return jgo.agg_dmpnn(g, v["h"], rev, **kw, impl=impl)


@target("agg_edge_to_edge")
def _gen_agg_edge_to_edge(t):
    n_emb, n_mid = _pick(t.rng, [1, 3]), _pick(t.rng, [1, 2])
    pos = t.normal(t.n_src, 3)  # noqa: F841
    src, dst = t.case.src, t.case.dst
    vec = pos[src] - pos[dst]
    vec[src == dst] = t.normal(int(np.sum(src == dst)), 3) if np.any(src == dst) else vec[src == dst]
    t.add("vec", vec)
    t.add("sbf_rad", t.normal(t.n_edges, 42))
    t.add("emb", t.normal(t.n_edges, n_emb))
    t.add("weights", t.normal(42 + n_emb, n_mid) / 4)
    return (("n_emb", n_emb),)


def _apply_agg_edge_to_edge(jgo, g, a, x, cfg, impl):
    return jgo.dimenet.agg_edge_to_edge(*a, x["triplets"], impl=impl)


MODEL_KW = dict(hidden=8, out_emb=8, int_emb=4, basis_emb=2, num_blocks=1, cutoff=4.0)


@target("dimenet_model")
def _gen_dimenet_model(t):
    """DimeNet++ (jaxgraphops.nn.flax) on a small molecule-like graph: energies, or forces and weight
    gradients; the oracle is the model with impl="xla"."""
    t.add("pos", 1.5 * t.normal(t.n_src, 3))
    t.case.extra["z"] = t.data.integers(1, 10, t.n_src).astype(np.int32)
    if t.case.dtype in HALF:
        t.case.dtype = "float32"  # a whole model in half precision is not compared to one in float32
    return (("blocks", MODEL_KW["num_blocks"]),)


def _dimenet_model(impl):
    from jaxgraphops.nn.flax import DimeNetPlusPlus
    return DimeNetPlusPlus(**MODEL_KW, impl=impl)


def _apply_dimenet_model(jgo, g, a, x, cfg, impl):
    import jax.numpy as jnp
    pos, params = a
    n = pos.shape[0]
    return _dimenet_model(impl).apply({"params": params}, x["z"], pos, g, jnp.zeros((g.n_edges, 3), pos.dtype),
                                      x["triplets"], jnp.zeros(n, jnp.int32), 1)


def _model_params(case, jax, jnp, extra, arrays, dtype, g):
    """The model's parameters (initialised once, jitted; perturbed per case) as the last input."""
    key = ("model_init", repr(case.config))
    if key not in _CACHE:
        n = case.n_src
        _CACHE[key] = jax.jit(_dimenet_model(None).init, static_argnums=7)(
            jax.random.key(0), jnp.asarray(extra["z"]), jnp.zeros((n, 3)), g, jnp.zeros((g.n_edges, 3)),
            extra["triplets"], jnp.zeros(n, jnp.int32), 1)["params"]
    rng = np.random.default_rng([0x21, case.seed])
    params = jax.tree_util.tree_map(
        lambda p: jnp.asarray(np.asarray(p, np.float64) * (1 + 0.05 * rng.normal(size=p.shape)), case.dtype)
        .astype(dtype), _CACHE[key])
    return arrays + [params]


# Layers: the oracle runs them with every op on impl="xla" (the modules call the ops without impl).
LAYERS = tuple(layer.name for layer in op_db.LAYERS if layer.fuzz is True)


@target("layer")
def _gen_layer(t):
    name = _pick(t.rng, list(LAYERS))
    name = t.layer or name
    flavour = _pick(t.rng, ["flax", "equinox"])
    if name == "GraphConv" and t.n_src != t.n_dst:
        name = "SAGEConv"
    opts = {}
    if name == "SAGEConv":
        opts["aggr"] = t.choice("aggr", ("mean", "max", "sum", "min"))
        opts["normalize"] = bool(t.rng.random() < 0.3)
        opts["root_weight"] = bool(t.rng.random() < 0.8)
    elif name == "GraphConv":
        opts["norm"] = t.choice("norm", ("both", "right", "none"))
        opts["add_self_loops"] = bool(t.rng.random() < 0.7)
    elif name in ("GATConv", "GATv2Conv"):
        opts["heads"] = _pick(t.rng, [1, 2])
        opts["concat"] = bool(t.rng.random() < 0.5)
        opts["add_self_loops"] = bool(t.rng.random() < 0.6)
        opts["edge_dim"] = _pick(t.rng, [None, 2])
    elif name == "TransformerConv":
        opts["heads"] = _pick(t.rng, [1, 2])
        opts["concat"] = bool(t.rng.random() < 0.5)
        opts["beta"] = bool(t.rng.random() < 0.3)
        opts["edge_dim"] = _pick(t.rng, [None, 2])
    else:
        opts["kernel"] = t.choice("kernel", ("matrix", "diagonal"))
        opts["reduce"] = t.choice("reduce", ("mean", "sum"))
        opts["skip"] = bool(t.rng.random() < 0.5)
    f_in = 3
    features = f_in if name == "GNOBlock" and opts["kernel"] == "diagonal" else 2
    t.add("x", t.normal(t.n_src, f_in))
    if t.n_src != t.n_dst and name in ("SAGEConv", "GATConv", "GATv2Conv", "TransformerConv"):
        t.add("x_dst", t.normal(t.n_dst, f_in))
    if opts.get("edge_dim"):
        t.add("edge_attr", t.normal(t.n_edges, opts["edge_dim"]))
    if name == "GNOBlock":
        t.add("dx", t.normal(t.n_edges, 2))
        if opts["skip"] and t.n_src != t.n_dst:
            t.add("f_dst", t.normal(t.n_dst, f_in))
    return (("layer", name), ("flavour", flavour), ("features", features), *sorted(opts.items()))


def _layer_module(cfg, in_shapes, dtype):
    """A layer and its parameters (flax: the params dict; equinox: the module's float leaves)."""
    import jax
    key = ("module", cfg, tuple(sorted(in_shapes.items())), str(dtype))
    if key in _CACHE:
        return _CACHE[key]
    kw = dict(cfg)
    name, flavour, features = kw.pop("layer"), kw.pop("flavour"), kw.pop("features")
    f_in, f_dst = in_shapes.get("x", 3), in_shapes.get("x_dst")
    if flavour == "flax":
        from jaxgraphops.nn import flax as m
        layer = getattr(m, name)(features, **({"kernel_width": 4} if name == "GNOBlock" else {}), **kw)
        built = ("flax", layer)
    else:
        import equinox as eqx
        from jaxgraphops.nn import equinox as m
        k = jax.random.key(1)
        ins = (f_in, f_dst) if f_dst is not None else f_in
        if name == "GNOBlock":
            layer = m.GNOBlock(f_in, features, in_shapes.get("dx", 2), kernel_width=4,
                               skip_features=f_dst, key=k, **kw)
        else:
            layer = getattr(m, name)(ins, features, key=k, **kw)
        params, static = eqx.partition(layer, eqx.is_inexact_array)
        built = ("equinox", static, params)
    _CACHE[key] = built
    return built


def _layer_inputs(v):
    x = v["x"] if "x_dst" not in v else (v["x"], v["x_dst"])
    return x


def _call_layer(cfg, module, params, g, v):
    kw = dict(cfg)
    name = kw["layer"]
    if module[0] == "flax":
        layer = module[1]
        call = functools.partial(layer.apply, {"params": params})
    else:
        import equinox as eqx
        call = eqx.combine(params, module[1])
    if name == "GNOBlock":
        return call(g, v["x"], v["dx"], v.get("f_dst"))
    if name in ("GATConv", "GATv2Conv", "TransformerConv"):
        return call(g, _layer_inputs(v), v.get("edge_attr"))
    return call(g, _layer_inputs(v))


@contextlib.contextmanager
def _reference_ops():
    """The layers' ops on impl="xla" (the modules take no impl)."""
    from jaxgraphops.nn import _attention, _conv, _gno
    names = ("agg_concat", "agg_simple", "agg_weighted", "mha_gat", "mha_gat_v2", "mha_simple", "gno_conv")
    saved = {(m, n): getattr(m, n) for m in (_conv, _attention, _gno) for n in names if hasattr(m, n)}
    try:
        for (m, n), f in saved.items():
            setattr(m, n, functools.partial(f, impl="xla"))
        yield
    finally:
        for (m, n), f in saved.items():
            setattr(m, n, f)


def _apply_layer(jgo, g, a, x, cfg, impl):
    v = _named(x["names"], a[:-1])
    params = a[-1]
    module = x["module"]
    if impl == "xla":
        with _reference_ops():
            return _call_layer(cfg, module, params, g, v)
    return _call_layer(cfg, module, params, g, v)


# the targets in the order they are drawn, from the registry: each spec's fields (op_db.Fuzz) and its generator
TARGETS = {name: dict(dataclasses.asdict(spec), gen=GENERATORS[name]) for name, spec in op_db.fuzz_targets().items()
           if name in GENERATORS}
if set(GENERATORS) != set(op_db.fuzz_targets()):
    raise SystemExit(f"fuzz.py: targets of the registry without a generator: "
                     f"{sorted(set(op_db.fuzz_targets()) - set(GENERATORS))}; generators of no target: "
                     f"{sorted(set(GENERATORS) - set(op_db.fuzz_targets()))}")
APPLY = {name: globals()[f"_apply_{name}"] for name in TARGETS}
# JGO_FUZZ_TARGETS=name,name fuzzes those targets only (e.g. a new op's); unknown names are an error
ONLY_TARGETS = [n for n in os.environ.get("JGO_FUZZ_TARGETS", "").split(",") if n]
if set(ONLY_TARGETS) - set(TARGETS) - {"layer"}:
    raise SystemExit(f"JGO_FUZZ_TARGETS: unknown targets {sorted(set(ONLY_TARGETS) - set(TARGETS))}; "
                     f"known: {sorted(TARGETS)}")


# -- mutations --------------------------------------------------------------------------------------

GRAPH_ARRAYS = ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets", "csr_dst", "csr_eid")
# what a clear message about each corrupted array may call it (the kernels describe the data)
ARRAY_WORDS = {
    "src": ("src", "node index", "Graph"), "dst": ("dst", "node index", "Graph"),
    "csc_offsets": ("csc_offsets", "offsets"), "csr_offsets": ("csr_offsets", "offsets"),
    "csc_src": ("csc_src", "node index", "neighbours"), "csr_dst": ("csr_dst", "node index", "neighbours"),
    "csc_eid": ("csc_eid", "edge id", "edge ids"), "csr_eid": ("csr_eid", "edge id", "edge ids"),
}
# a layer's bad input is reported by the op it reaches
OP_NAMES = ("agg_concat", "agg_simple", "agg_weighted", "mha_gat", "mha_gat_v2", "mha_simple", "gno_conv",
            "add_self_loops")


def _expect(case, names, *, did_you_mean=False, gate=None):
    if case.target == "layer":
        names = (*names, *OP_NAMES)
    case.expect_names = tuple(names)
    case.did_you_mean = did_you_mean
    case.gate = gate


def _public_name(case):
    if case.target == "layer":
        return dict(case.config)["layer"]
    return case.target


def mutate_edge_list(rng, case):
    """Invalid edges given to Graph.from_edges, concrete or (under jit) traced."""
    e = len(case.src)
    which = _pick(rng, ["src", "dst"])
    n = case.n_src if which == "src" else case.n_dst
    bad = _pick(rng, ["negative", "too_large"])
    arr = getattr(case, which).copy()
    arr[int(rng.integers(e))] = -1 - int(rng.integers(3)) if bad == "negative" else n + int(rng.integers(3))
    setattr(case, which, arr)
    if case.build == "traced":
        case.mutation = f"traced_{which}_{bad}"
        _expect(case, ("Graph.from_edges",))
    else:
        case.mutation = f"edges_{which}_{bad}"
        _expect(case, ("Graph.from_edges",))


def mutate_edge_args(rng, case):
    """Malformed arguments of Graph.from_edges (dtype, rank, lengths, sizes)."""
    kind = _pick(rng, ["float_ids", "rank2_ids", "length", "negative_size", "float_size", "index_dtype"])
    case.mutation = f"from_edges_{kind}"
    if kind == "float_ids":
        case.extra["edge_dtype"] = "float32"
    elif kind == "rank2_ids":
        case.extra["edge_rank2"] = True
    elif kind == "length":
        case.dst = np.concatenate([case.dst, [0]])
    elif kind == "negative_size":
        case.extra["n_src_override"] = -1
    elif kind == "float_size":
        case.extra["n_src_override"] = 2.5
    else:
        case.extra["index_dtype_override"] = "int64" if not case.x64 else "float32"
    _expect(case, ("Graph.from_edges",))


def _graph_np(case):
    """The eight arrays of the valid graph of ``case`` (as from_edges builds them)."""
    src, dst = case.src, case.dst
    out = [src, dst]
    for keys, vals, n in ((dst, src, case.n_dst), (src, dst, case.n_src)):
        order = np.argsort(keys, kind="stable")
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(keys, minlength=n), out=offsets[1:])
        out += [offsets, vals[order], order]
    return [a.astype(case.index_dtype) for a in out]


def mutate_hand_graph(rng, case):
    """A hand-built Graph with one corrupted array."""
    arrays = _graph_np(case)
    e = len(case.src)
    kinds = []
    for side, n_rows, n_nbr in (("csc", case.n_dst, case.n_src), ("csr", case.n_src, case.n_dst)):
        nbr = f"{side}_src" if side == "csc" else f"{side}_dst"
        if n_rows >= 1:
            kinds += [(f"{side}_offsets", "start"), (f"{side}_offsets", "end")]
        if n_rows >= 2 and e >= 1:
            kinds.append((f"{side}_offsets", "decrease"))
        if e >= 1:
            kinds += [(f"{side}_eid", "out_of_range"), (nbr, "out_of_range"), (nbr, "negative")]
        if e >= 2:
            kinds += [(f"{side}_eid", "duplicate"), (f"{side}_eid", "swap")]
        if e >= 1 and n_nbr >= 2:
            kinds.append((nbr, "inconsistent"))
        kinds += [(f"{side}_offsets", "short"), (nbr, "long")]
    if e >= 1:
        kinds += [("src", "out_of_range"), ("dst", "negative")]
        if case.n_src >= 2:
            kinds.append(("src", "inconsistent"))
    kinds.append(("csc_eid", "float"))
    if case.x64:
        kinds.append(("csr_eid", "other_int"))
    name, how = _pick(rng, kinds)
    i = GRAPH_ARRAYS.index(name)
    a = arrays[i].copy()
    n_nbr = {"src": case.n_src, "dst": case.n_dst, "csc_src": case.n_src, "csr_dst": case.n_dst}.get(name, e)
    k = int(rng.integers(max(len(a), 1)))
    if how == "start":
        a[0] = 1
    elif how == "end":
        a[-1] = e + 1 if (e == 0 or rng.random() < 0.5) else e - 1
    elif how == "decrease":
        j = int(rng.integers(1, len(a) - 1)) if len(a) > 2 else 1
        a[j] = a[-1] + 1 if j < len(a) - 1 else a[j]
        if np.all(np.diff(a) >= 0):
            a[1] = e + 1
    elif how == "out_of_range":
        a[k] = n_nbr + int(rng.integers(3))
    elif how == "negative":
        a[k] = -1 - int(rng.integers(3))
    elif how == "duplicate":
        j = (k + 1 + int(rng.integers(len(a) - 1))) % len(a)
        a[j] = a[k]
    elif how == "swap":  # two edges of different groups, so that the groupings disagree with src/dst
        key = case.dst if name == "csc_eid" else case.src
        pairs = [(p, q) for p in range(len(a)) for q in range(p + 1, len(a)) if key[a[p]] != key[a[q]]]
        if pairs:
            p, q = pairs[int(rng.integers(len(pairs)))]
            a[p], a[q] = a[q], a[p]
        else:  # every edge in one group: a repeated id instead
            a[1] = a[0]
    elif how == "inconsistent":
        a[k] = (a[k] + 1 + int(rng.integers(n_nbr - 1))) % n_nbr
    elif how == "short":
        a = a[:-1]
    elif how == "long":
        a = np.concatenate([a, a[:1] if len(a) else np.zeros(1, a.dtype)])
    elif how == "float":
        a = a.astype(np.float32)
    elif how == "other_int":
        a = a.astype(np.int32 if case.index_dtype == "int64" else np.int64)
    arrays[i] = a
    case.hand = arrays
    case.build = "hand"
    case.mutation = f"hand_{name}_{how}"
    # Shapes and dtypes are checked at trace time; under jit the values only by the kernels that
    # read them: a wrong answer there is the documented limitation, unless it equals the answer of
    # the valid graph (the corrupted array was not read)
    gate = None
    if case.mode == "jit" and how not in ("short", "long", "float", "other_int"):
        case.extra["unread_ok"] = True
        if not HAND_BUILT_GRAPHS_CHECKED_UNDER_JIT:
            gate = "HAND_BUILT_GRAPHS_CHECKED_UNDER_JIT"
    _expect(case, (*ARRAY_WORDS[name], "Graph", _public_name(case)), gate=gate)


def mutate_input(rng, case, options):
    """A malformed op argument: rows, rank, dtype, or a misspelt/ill-typed option."""
    kinds = []
    if case.arrays:
        kinds += ["rows", "int_dtype", "scalar"]
    if options:
        kinds += ["typo", "typo"]
    if case.target in ("agg_concat", "agg_weighted", "agg_simple", "gno_conv", "mha_gat", "mha_gat_v2",
                       "mha_simple"):
        kinds.append("rank3")
    if case.target in ("mha_gat", "mha_gat_v2", "mha_simple"):
        kinds.append("num_heads")
    if case.target not in ("pool", "layer", "agg_edge_to_edge"):
        kinds.append("not_a_graph")
    if case.target != "edge_vectors" and case.target != "layer":
        kinds.append("impl_typo")
    kind = _pick(rng, kinds)
    public = _public_name(case)
    idx = int(rng.integers(len(case.arrays))) if case.arrays else 0
    if kind in ("rows", "int_dtype", "scalar", "rank3"):
        if kind == "rank3":
            cands = [i for i, n in enumerate(case.names) if n in ("x", "x_dst", "edge_feat", "f_src", "x_src",
                                                                     "query", "key", "value")]
            if not cands:
                kind = "rows"
            else:
                idx = _pick(rng, cands)
        name = case.names[idx]
        a = case.arrays[idx]
        if case.target == "layer":
            if name in ("x", "x_dst") and kind == "rows":
                pass
            elif kind != "rows":
                kind = "rows"
        case.mutation = f"input_{name}_{kind}"
        if kind == "rows":
            if a.ndim == 0 or (case.target == "agg_edge_to_edge" and name == "weights"):
                a = np.concatenate([a, a[:1]]) if a.ndim else a
            a = np.concatenate([a, np.ones((1,) + a.shape[1:])], axis=0)
            if case.target == "layer":
                # a layer may take any number of feature columns, but rows are fixed by the graph
                pass
        elif kind == "int_dtype":
            case.extra.setdefault("int_inputs", []).append(idx)
            case.grad = False  # jax.grad itself rejects integer inputs
        elif kind == "scalar":
            a = np.asarray(1.0)
        else:
            a = a[..., None] * np.ones((1,) * a.ndim + (2,))
        case.arrays[idx] = a
        _expect(case, (public, name))
        return
    case.mutation = f"input_{kind}"
    if kind == "typo":
        opt = _pick(rng, sorted(options))
        value, choices = options[opt]
        bad = typo(rng, value)
        if bad in choices:
            bad = value + "_"
        case.config = tuple((k, bad if k == opt else v) for k, v in case.config)
        case.mutation = f"input_{opt}_typo"
        _expect(case, (public,), did_you_mean=close_match(bad, choices))
        case.extra["typo_option"] = opt
    elif kind == "impl_typo":
        case.extra["impl_override"] = _pick(rng, ["XLA", "xl", "ffi_", "cuda", "jax"])
        impls = ["xla"] if case.target == "agg_edge_to_edge" else ["xla", "ffi"]
        _expect(case, (public,), did_you_mean=close_match(case.extra["impl_override"], impls))
    elif kind == "num_heads":
        case.config = tuple((k, _pick(rng, [0, -1, 1.5, True]) if k == "num_heads" else v) for k, v in case.config)
        _expect(case, (public, "num_heads"))
    elif kind == "not_a_graph":
        case.extra["not_a_graph"] = True
        _expect(case, (public,))


# -- case generation --------------------------------------------------------------------------------

def make_case(seed: int) -> Case:
    """The case of ``seed``. Its structure (target, options, sizes, dtypes, eager/jit, fwd/grad) is
    drawn from ``seed // REPEAT``, so REPEAT consecutive seeds share compiled functions; its data
    (edges, values, NaN/Inf, mutation) from ``seed``."""
    structure = seed // REPEAT
    rng = np.random.default_rng([0x19, structure])
    data = np.random.default_rng([0x19, seed, 1])
    names = list(TARGETS)
    name = _pick(rng, names, [TARGETS[n]["weight"] for n in names])
    layer = None
    if ONLY_TARGETS:  # JGO_FUZZ_TARGETS: the same draws, over the named targets only
        name = _pick(rng, ONLY_TARGETS)
    elif structure % 4 == 0:  # every 4th structure takes the next target or layer in turn: all are covered early
        rotation = [(n, None) for n in names if n != "layer"] + [("layer", n) for n in LAYERS]
        name, layer = rotation[(structure // 4) % len(rotation)]
    spec = TARGETS[name]
    case = Case(seed=seed, target=name)
    case.mode = "jit" if rng.random() < {"layer": 0.9, "dimenet_model": 1.0}.get(name, 0.75) else "eager"
    case.grad = bool(rng.random() < 0.4)
    case.x64 = bool(rng.random() < 0.25)
    if case.x64:
        case.dtype = _pick(rng, ["float64", "float32", "float64"])
        case.index_dtype = _pick(rng, ["int64", "int32"])
    else:
        case.dtype = _pick(rng, ["float32", "bfloat16", "float16"], [6, 2, 2])
    # a graph without self loops needs two nodes (one atom's self loop is a zero-length edge: NaN geometry)
    sizes = [s for s in SIZES if (not spec["square"] or s[0] == s[1]) and s[2] >= spec["min_edges"]
             and (not spec["no_loops"] or min(s[:2]) >= 2)]
    weights = [SIZE_WEIGHTS[SIZES.index(s)] for s in sizes]
    case.n_src, case.n_dst, n_edges = _pick(rng, sizes, weights)
    traced = case.mode == "jit" and not spec["concrete"] and rng.random() < 0.3
    subject_xla = rng.random() < 0.15 and name not in ("layer", "edge_vectors")
    transform = "none"
    if spec["graph"] and not spec["concrete"]:
        transform = _pick(rng, [t for t in TRANSFORMS if t != "self_loops" or case.n_src == case.n_dst],
                          [w for t, w in zip(TRANSFORMS, TRANSFORM_WEIGHTS) if t != "self_loops" or case.n_src == case.n_dst])
    kind = _pick(data, list(GRAPH_KINDS))
    case.src, case.dst = random_edges(data, case.n_src, case.n_dst, n_edges, kind)
    if spec["no_loops"]:  # DimeNet graphs have no self loops: move them
        loops = case.src == case.dst
        case.dst = np.where(loops, (case.dst + 1) % max(case.n_dst, 1), case.dst)
    if not spec["graph"]:
        case.build = "none"
    elif traced:
        case.build = "traced"
    # a padding mode (its own random stream): the case's graph padded, reordered, partitioned, converted or
    # sampled, against the reference on the graph without padding; such cases are valid and concrete
    padded = fuzz_padding.choose(structure, name, case.n_src == case.n_dst) if spec["graph"] else None
    if padded is not None:
        case.padding, case.build, case.extra["padding"] = padded["mode"], "edges", padded
        if padded["mode"] == "block":
            case.extra["block_seeds"] = fuzz_padding.block_seeds(data, case.n_dst)

    # about half the cases are invalid: which kind of mutation (drawn before the inputs are made)
    family = None
    if spec["mutable"] and data.random() < 0.45 and padded is None:
        kinds = ["input", "input"]
        if spec["graph"] and not spec["concrete"]:
            kinds += ["hand", "hand"]
            if len(case.src):
                kinds += ["edges"]
            kinds += ["edge_args"]
        family = _pick(data, kinds)
        if family != "input":
            transform = "none"  # the mutation is of the graph as built
    case.transform = transform

    case.config = ()
    if padded is not None:
        case.transform = "none"
        t = Gen(rng, data, case, fuzz_padding.sizes(padded, case.n_src, case.n_dst, len(case.src)))
    else:
        t = Gen(rng, data, case, transformed_sizes(transform, case.n_src, case.n_dst, len(case.src)))
    t.layer = layer
    case.config = spec["gen"](t)
    fuzz_padding.explicit_destinations(case)
    case.extra["names"] = tuple(case.names)
    rng = data  # everything below varies from seed to seed

    # valid-input adversarial values: NaN/Inf somewhere, or many ties
    r = rng.random()
    if case.arrays and r < 0.2:
        i = int(rng.integers(len(case.arrays)))
        a = case.arrays[i]
        if a.size:
            v = _pick(rng, [np.nan, np.inf, -np.inf])
            for _ in range(int(rng.integers(1, 3))):
                a.reshape(-1)[int(rng.integers(a.size))] = v
            case.special = f"{case.names[i]}:{v}"
    elif case.arrays and r < 0.3:
        i = int(rng.integers(len(case.arrays)))
        case.arrays[i] = np.round(case.arrays[i])
        case.special = f"{case.names[i]}:ties"

    # the subject: the kernels, or (on valid input) the reference in its own dtype
    case.impl = "xla" if subject_xla else None

    if family is not None:
        if family == "edges":
            mutate_edge_list(rng, case)
        elif family == "edge_args":
            mutate_edge_args(rng, case)
        elif family == "hand":
            mutate_hand_graph(rng, case)
        else:
            mutate_input(rng, case, t.options)
        case.impl = _pick(rng, [None, "xla"]) if name not in ("layer", "edge_vectors") else None
        if case.build == "hand" and case.impl == "xla" and case.mode == "jit":
            case.impl = None  # the reference cannot check traced graphs (documented)
    return case


# -- running one case (worker side) -----------------------------------------------------------------

_CACHE: dict = {}


def _jax():
    import jax
    import jax.numpy as jnp
    import jaxgraphops as jgo
    import jaxgraphops.reference  # noqa: F401
    return jax, jnp, jgo


def _materialise(case, gargs, jgo, jnp):
    """The Graph (or None) from what was passed across the jit boundary."""
    if case.build == "traced":
        src, dst = gargs
        g = jgo.Graph.from_edges(src, dst, case.extra.get("n_src_override", case.n_src), case.n_dst,
                                 index_dtype=case.extra.get("index_dtype_override", case.index_dtype))
        return apply_transform(jgo, g, case.transform)
    return gargs


def _build_graph_args(case, jgo, jnp):
    """What is passed as the graph: a Graph (built here, maybe raising), src/dst, or None."""
    if case.build == "none":
        return None
    src, dst = case.src, case.dst
    if case.extra.get("edge_dtype"):
        src = src.astype(case.extra["edge_dtype"])
    if case.extra.get("edge_rank2"):
        src = src[:, None]
    if case.build == "traced":
        return (jnp.asarray(src), jnp.asarray(dst))
    if case.build == "hand":
        return jgo.Graph(*(jnp.asarray(a) for a in case.hand), case.n_src, case.n_dst)
    g = jgo.Graph.from_edges(src, dst, case.extra.get("n_src_override", case.n_src), case.n_dst,
                             index_dtype=case.extra.get("index_dtype_override", case.index_dtype))
    return apply_transform(jgo, g, case.transform)


def _cotangent(jnp, o, dtype):
    """A fixed cotangent, computed on the host so that every implementation gets the same bits."""
    return jnp.asarray(np.cos(np.arange(o.size).reshape(o.shape) * 0.7 + 0.3), dtype)


def _function(case, impl, jax, jnp, jgo, mode):
    """forward or gradient function of (graph args, arrays, extra), jitted and cached under jit."""
    key = (case.target, repr(case.config), case.grad, impl, case.build, case.transform, case.x64, case.n_src, case.n_dst,
           case.extra.get("n_src_override"), case.extra.get("index_dtype_override"), case.index_dtype,
           bool(case.extra.get("not_a_graph")), mode)
    if mode == "jit" and key in _CACHE:
        return _CACHE[key]
    apply = APPLY[case.target]
    cfg = case.config

    def forward(gargs, arrays, extra):
        g = _materialise(case, gargs, jgo, jnp)
        if extra.get("not_a_graph") is not None:
            g = (g.src, g.dst) if g is not None else None
        return apply(jgo, g, arrays, extra, cfg, impl)

    fn = forward
    if case.grad:
        def fn(gargs, arrays, extra):
            def loss(arrays):
                out = forward(gargs, arrays, extra)
                total = 0.0
                for o in jax.tree_util.tree_leaves(out):
                    if jnp.issubdtype(o.dtype, jnp.floating):
                        wide = jnp.promote_types(o.dtype, jnp.float32)
                        total = total + jnp.sum(o.astype(wide) * _cotangent(jnp, o, wide))
                return total
            return jax.grad(loss)(arrays)
    if mode == "jit":
        static = ("names", "module", "not_a_graph", "typo_option")

        def split(gargs, arrays, dyn, st):
            return fn(gargs, arrays, {**dyn, **_unwrap_extra(dict(st))})

        jitted = jax.jit(split, static_argnums=(3,))

        def call(gargs, arrays, extra):
            dyn = {k: v for k, v in extra.items() if k not in static and not k.endswith("_override")
                   and k not in ("int_inputs", "edge_dtype", "edge_rank2", "unread_ok")}
            st = tuple((k, extra[k]) for k in static if k in extra and k != "module")
            if "module" in extra:
                # the equinox static part / flax module is hashable-by-identity and cached per config
                st = st + (("module", _Hashable(extra["module"])),)
            return jitted(gargs, arrays, dyn, st)

        _CACHE[key] = call
        return call
    return fn


class _Hashable:
    """Wraps a cached layer so it can be a static jit argument (hash by identity)."""

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Hashable) and other.obj is self.obj


def _unwrap_extra(extra):
    return {k: (v.obj if isinstance(v, _Hashable) else v) for k, v in extra.items()}


def _prepare(case, jax, jnp, jgo, dtype):
    """The inputs in ``dtype`` (the case's for the subject, a wider one for the oracle)."""
    arrays = []
    for i, a in enumerate(case.arrays):
        if i in case.extra.get("int_inputs", ()):
            arrays.append(jnp.asarray(np.nan_to_num(a), jnp.int32))
        else:
            arrays.append(jnp.asarray(a, case.dtype).astype(dtype))
    extra = dict(case.extra)
    if "graph_ids" in extra:
        extra["graph_ids"] = jnp.asarray(extra["graph_ids"])
    return arrays, extra


def _layer_params(case, jax, jnp, extra, arrays, dtype, graph=None):
    """Adds the layer's parameters (perturbed per case) as the last differentiable input (initialised on
    ``graph``, default the case's)."""
    shapes = {n: a.shape[-1] for n, a in zip(case.names, case.arrays) if a.ndim == 2}
    module = _layer_module(case.config, shapes, case.dtype)
    rng = np.random.default_rng([0x20, case.seed])
    if module[0] == "flax":
        # the parameters depend on the feature widths only: initialise once (jitted) per config
        key = ("init", repr(case.config), tuple(sorted(shapes.items())), case.n_src == case.n_dst)
        if key not in _CACHE:
            g = jax_graph_for_init(case) if graph is None else graph
            v = dict(zip(case.names, (jnp.zeros(a.shape, jnp.float32) for a in case.arrays)))
            layer = module[1]
            name = dict(case.config)["layer"]
            if name == "GNOBlock":
                args = (g, v["x"], v["dx"], v.get("f_dst"))
            elif name in ("GATConv", "GATv2Conv", "TransformerConv"):
                args = (g, _layer_inputs(v), v.get("edge_attr"))
            else:
                args = (g, _layer_inputs(v))
            _CACHE[key] = jax.jit(layer.init)(jax.random.key(0), *args)["params"]
        params = _CACHE[key]
    else:
        params = module[2]
    params = jax.tree_util.tree_map(
        lambda p: (jnp.asarray(np.asarray(p, np.float64) + 0.1 * rng.normal(size=p.shape), case.dtype)
                   .astype(dtype)), params)
    extra["module"] = module
    return arrays + [params]


def jax_graph_for_init(case):
    import jaxgraphops as jgo
    return apply_transform(jgo, jgo.Graph.from_edges(case.src, case.dst, case.n_src, case.n_dst), case.transform)


def _run(case, impl, dtype, mode):
    """Runs the subject (or the oracle); returns the list of output leaves as numpy arrays."""
    jax, jnp, jgo = _jax()
    arrays, extra = _prepare(case, jax, jnp, jgo, dtype)
    if case.target in ("agg_edge_to_edge", "dimenet_model"):
        g = _build_graph_args(case, jgo, jnp)
        extra["triplets"] = jgo.dimenet.triplets(g)
    if case.target == "dimenet_model":
        extra["z"] = jnp.asarray(extra["z"])
        arrays = _model_params(case, jax, jnp, extra, arrays, dtype, g)
    if case.target == "layer":
        arrays = _layer_params(case, jax, jnp, extra, arrays, dtype)
    if "not_a_graph" in extra:
        extra["not_a_graph"] = True
    impl = case.extra.get("impl_override", impl)
    fn = _function(case, impl, jax, jnp, jgo, mode)
    gargs = _build_graph_args(case, jgo, jnp)
    if mode == "jit":
        out = fn(gargs, arrays, extra)
    else:
        out = fn(gargs, arrays, extra)
    leaves = jax.tree_util.tree_leaves(out)
    return [np.asarray(jax.block_until_ready(o)) for o in leaves]


# the exceptions a user may get for bad input
def _clear_types():
    import jax
    return (ValueError, TypeError, jax.errors.JaxRuntimeError)


def classify_error(case, exc):
    msg = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, _clear_types()) and not isinstance(exc, (ZeroDivisionError,)):
        text = str(exc)
        if case.did_you_mean and "did you mean" not in text:
            return "unclear_error", "no 'did you mean' in: " + msg[:400]
        names = case.expect_names or (_public_name(case),)
        if any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", text) for n in names):
            return "clear_error", msg[:200]
        return "unclear_error", f"names none of {names}: " + msg[:400]
    return "unclear_error", "".join(traceback.format_exception_only(type(exc), exc))[-600:]


def compare(case, got, want):
    """None if the outputs agree (NaN/Inf at the same places, finite values to the dtype's tolerance)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, reference {len(want)}"
    for k, (a, b) in enumerate(zip(got, want)):
        if a.shape != b.shape:
            return f"output {k}: shape {a.shape}, reference {b.shape}"
        if a.dtype != b.dtype:  # the reference ran wider: round it like the subject
            b = np.asarray(b).astype(a.dtype)
        if not np.issubdtype(a.dtype, np.floating) and a.dtype.name not in HALF:
            if not np.array_equal(a, b):
                return f"output {k}: integer values differ"
            continue
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        nan_a, nan_b = np.isnan(a64), np.isnan(b64)
        if case.special and not case.special.endswith("ties") and (
                case.grad or (case.target == "layer" and case.dtype in HALF)):
            # gradients of non-finite inputs: each implementation has its own 0 * inf (a zero
            # cotangent times an infinite factor, or a factorised product); and a layer in half precision
            # computes its dense projections in it: one that cancels to 0 there (float32: 1e-3) meets an
            # infinite feature as 0 * inf = NaN where the float32 oracle has inf (seed 40409). Compare finite entries
            nan_a = nan_b = ~(np.isfinite(a64) & np.isfinite(b64))
            a64, b64 = np.where(nan_a, 0, a64), np.where(nan_b, 0, b64)
        if not np.array_equal(nan_a, nan_b):
            i = np.flatnonzero((nan_a != nan_b).reshape(-1))[0]
            return f"output {k}: NaN at different places (flat index {i}: {a64.reshape(-1)[i]} vs {b64.reshape(-1)[i]})"
        fin_a, fin_b = np.isfinite(a64), np.isfinite(b64)
        import jax.numpy as jnp
        big = 0.5 * float(jnp.finfo(a.dtype).max)
        inf_mismatch = (fin_a != fin_b) | (~fin_a & ~fin_b & ~nan_a & (a64 != b64))
        inf_mismatch &= ~((np.abs(np.where(fin_a, a64, 0)) > big) | (np.abs(np.where(fin_b, b64, 0)) > big))
        if inf_mismatch.any():
            i = np.flatnonzero(inf_mismatch.reshape(-1))[0]
            return f"output {k}: Inf at different places (flat index {i}: {a64.reshape(-1)[i]} vs {b64.reshape(-1)[i]})"
        both = fin_a & fin_b
        if both.any():
            rtol = RTOL[a.dtype.name]
            scale = max(1.0, float(np.max(np.abs(b64[both]))))
            err = np.abs(a64 - b64)[both]
            if np.max(err) > rtol * scale:
                i = int(np.argmax(err))
                return (f"output {k}: max error {np.max(err):.3g} > {rtol:g} x {scale:.3g} "
                        f"(got {a64[both][i]!r}, reference {b64[both][i]!r})")
    return None


def run_case(case: Case):
    """(outcome, detail) of one case; a failure explained by an open known defect is an xfail."""
    outcome, detail = _run_case(case)
    if outcome in FAILURES:
        for name, (fixed, applies, _) in KNOWN_DEFECTS.items():
            if not fixed and applies(case, detail):
                return "xfail", f"known defect {name}: {detail}"
    return outcome, detail


def _run_case(case: Case):
    if case.padding is not None:
        return fuzz_padding.run(case, sys.modules[__name__])
    jax, jnp, jgo = _jax()
    with jax.enable_x64(case.x64):
        try:
            got = _run(case, case.impl, case.dtype, case.mode)
            error = None
        except Exception as exc:  # noqa: BLE001 - every exception is classified
            got, error = None, exc
        if case.mutation is not None:
            if error is not None:
                outcome, detail = classify_error(case, error)
                if outcome == "unclear_error" and isinstance(_oracle(case, jax, jnp), str):
                    # the unmutated input is invalid too (e.g. gno_conv's kernel="matrix" with c_in = 0):
                    # an error about that fault, naming the op, is as clear
                    fault = dataclasses.replace(case, expect_names=(_public_name(case),), did_you_mean=False)
                    if classify_error(fault, error)[0] == "clear_error":
                        return "clear_error", "the unmutated input's fault: " + detail
                if outcome != "clear_error" and case.gate is not None:
                    return "xfail", f"known gap {case.gate}: {detail}"
                return outcome, detail
            if case.extra.get("unread_ok") and case.hand is not None:
                # under jit only the arrays a kernel reads are checked: fine if it equals the valid graph's answer
                want = _oracle(case, jax, jnp)
                if isinstance(want, str):
                    return "silent_difference", "accepted a corrupted graph: " + want
                diff = compare(case, got, want)
                if diff is None:
                    return "ok", "corrupted array not read"
                if case.gate is not None:
                    return "xfail", f"known gap {case.gate}: {diff}"
                return "silent_difference", "accepted a corrupted graph: " + diff
            if case.gate is not None:
                return "xfail", f"known gap {case.gate}: accepted"
            return "silent_difference", "accepted invalid input"
        want = _oracle(case, jax, jnp)
        if isinstance(want, str):  # the reference raised
            if error is not None:
                outcome, detail = classify_error(case, error)
                return outcome, "both raised; " + detail
            return "unclear_error", "reference raised: " + want
        if error is not None:
            outcome, detail = classify_error(case, error)
            return ("rejected_valid" if outcome == "clear_error" else outcome), detail
        diff = compare(case, got, want)
        return ("ok", "") if diff is None else ("silent_difference", diff)


def _oracle(case, jax, jnp):
    """The reference's outputs on the valid input (half precision computed in float32), or its error."""
    wide = "float32" if case.dtype in HALF else case.dtype
    ref = dataclasses.replace(case, hand=None, build="edges" if case.build in ("hand", "traced") else case.build,
                              mutation=None, extra={k: v for k, v in case.extra.items()
                                                    if k not in ("impl_override", "unread_ok")})
    try:
        return _run(ref, "xla", wide, "jit")
    except Exception as exc:  # noqa: BLE001
        return "".join(traceback.format_exception_only(type(exc), exc))[-600:]


# -- worker and driver ------------------------------------------------------------------------------

def worker_main():
    """Reads batches of seeds (JSON lists) on stdin; writes one JSON line per case start and result."""
    proto = PROTOCOL  # stdout, set aside when the module was imported; anything else written to it goes to stderr
    import warnings
    warnings.simplefilter("ignore")
    # the harness's self-test (tests/test_fuzz.py): "crash=3,hang=5" makes those seeds die or hang and
    # every other seed an instant "ok", without running anything
    selftest = dict(kv.split("=")[::-1] for kv in os.environ.get("JGO_FUZZ_SELFTEST", "").split(",") if kv)
    for line in sys.stdin:
        seeds = json.loads(line)
        for seed in seeds:
            proto.write(json.dumps({"start": seed}) + "\n")
            t0 = time.perf_counter()
            try:
                if os.environ.get("JGO_FUZZ_SELFTEST") is not None:
                    action = selftest.get(str(seed))
                    if action == "crash":
                        import signal
                        os.kill(os.getpid(), signal.SIGSEGV)
                    elif action == "hang":
                        time.sleep(3600)
                    outcome, detail, label = "ok", "", f"seed={seed} (self-test)"
                    proto.write(json.dumps({"seed": seed, "outcome": outcome, "detail": detail, "label": label,
                                            "mutation": None, "s": 0.0}) + "\n")
                    continue
                case = make_case(seed)
                outcome, detail = run_case(case)
                label = case.label()
            except Exception:  # noqa: BLE001 - a bug of the fuzzer itself
                outcome, detail, label = "fuzzer_error", traceback.format_exc()[-1500:], f"seed={seed}"
            proto.write(json.dumps({"seed": seed, "outcome": outcome, "detail": detail, "label": label,
                                    "mutation": _mutation_of(seed, label), "s": time.perf_counter() - t0}) + "\n")
        _bound_memory()
        proto.write(json.dumps({"batch_done": True}) + "\n")


WORKER_RSS_LIMIT = 2 << 30  # bytes: the compiled functions of a long run would otherwise fill the machine


def _bound_memory():
    """Drops the worker's compiled functions when its resident set passes ``WORKER_RSS_LIMIT`` (a long
    run's workers grew past 4 GiB each, and XLA's compiler then failed to allocate and crashed)."""
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # no /proc (not Linux): unbounded
        return
    if rss > WORKER_RSS_LIMIT:
        import gc

        import jax
        _CACHE.clear()
        jax.clear_caches()
        gc.collect()


def _mutation_of(seed, label):
    i = label.find("mutation=")
    return label[i + 9:].split()[0] if i >= 0 else None


class _Worker:
    def __init__(self, env):
        self.env = env
        self.proc = None
        self.lines = None
        self.stderr_path = None

    def start(self):
        import tempfile
        fd, self.stderr_path = tempfile.mkstemp(prefix="jgo_fuzz_worker_", suffix=".log")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=fd, env=self.env, text=True, bufsize=1,
                                     cwd=os.path.dirname(os.path.abspath(__file__)))
        os.close(fd)
        self.lines = queue.Queue()
        proc, lines = self.proc, self.lines

        def pump():
            for ln in proc.stdout:
                lines.put(ln)
            lines.put(None)
        threading.Thread(target=pump, daemon=True).start()

    def stderr_tail(self, n=1500):
        try:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.stderr_path:
            with contextlib.suppress(OSError):
                os.unlink(self.stderr_path)
        self.proc = None


def run_fuzz(n_cases: int, *, first_seed: int = 0, workers: int | None = None, timeout: float = CASE_TIMEOUT_S,
             progress=None, env: dict | None = None):
    """Runs seeds ``first_seed .. first_seed + n_cases - 1`` in worker subprocesses (``workers``, default
    the number of CPUs up to 2); returns ``(counts, failures, stats)``: the count of each outcome, the
    failures (seed, outcome, label, detail) and timings. Every 500 cases ``progress(done, counts,
    new_failures)`` is called with the failures since its last call."""
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    env = dict(os.environ if env is None else env)
    env.setdefault("JAX_PLATFORMS", "cpu")
    # the kernels under test are compiled C++; XLA's own code needs no optimisation here (xla_compile.py)
    env["XLA_FLAGS"] = cheap_compile_flags(env.get("XLA_FLAGS", ""))
    env.pop("JGO_FUZZ_CASES", None)
    batches = queue.Queue()
    seeds = list(range(first_seed, first_seed + n_cases))
    for i in range(0, len(seeds), BATCH):
        batches.put(seeds[i:i + BATCH])
    counts = collections.Counter()
    failures, by_target, lock = [], collections.Counter(), threading.Lock()
    stats = {"restarts": 0, "slowest": []}
    done, reported = [0], [0]

    def record(seed, outcome, detail, label, mutation=None, seconds=0.0):
        with lock:
            counts[outcome] += 1
            done[0] += 1
            if outcome in FAILURES or outcome == "fuzzer_error":
                failures.append({"seed": seed, "outcome": outcome, "label": label, "detail": detail})
            if outcome == "xfail":
                by_target[detail.split(":")[0] + (f" ({mutation})" if mutation else "")] += 1
            stats["slowest"] = sorted(stats["slowest"] + [(seconds, label)], reverse=True)[:5]
            if progress and done[0] % 500 == 0:
                progress(done[0], dict(counts), failures[reported[0]:])
                reported[0] = len(failures)

    def drive():
        w = _Worker(env)
        w.start()
        try:
            while True:
                try:
                    batch = batches.get_nowait()
                except queue.Empty:
                    return
                pending = list(batch)
                while pending:
                    if w.proc is None:
                        w.start()
                        with lock:
                            stats["restarts"] += 1
                    w.proc.stdin.write(json.dumps(pending) + "\n")
                    w.proc.stdin.flush()
                    current, t_start = None, time.monotonic()
                    while True:
                        try:
                            ln = w.lines.get(timeout=max(0.1, timeout - (time.monotonic() - t_start)))
                        except queue.Empty:
                            ln = "TIMEOUT"
                        if ln == "TIMEOUT" or ln is None:
                            seed = current if current is not None else pending[0]
                            if ln is None:
                                w.proc.wait()
                                rc = w.proc.returncode
                                record(seed, "crash", f"worker exited with {rc}; stderr: {w.stderr_tail()}",
                                       f"seed={seed} (replay: python tests/fuzz.py --replay {seed})")
                            else:
                                record(seed, "hang", f"no result after {timeout:.0f} s",
                                       f"seed={seed} (replay: python tests/fuzz.py --replay {seed})")
                            pending = pending[pending.index(seed) + 1:]
                            w.stop()
                            break
                        msg = json.loads(ln)
                        if "start" in msg:
                            current, t_start = msg["start"], time.monotonic()
                        elif "batch_done" in msg:
                            pending = []
                            break
                        else:
                            record(msg["seed"], msg["outcome"], msg["detail"], msg["label"], msg.get("mutation"),
                                   msg.get("s", 0.0))
                            current = None
        finally:
            w.stop()

    threads = [threading.Thread(target=drive) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats["xfail"] = dict(sorted(by_target.items()))
    return dict(counts), sorted(failures, key=lambda f: f["seed"]), stats


def format_counts(counts) -> str:
    keys = list(OUTCOMES) + sorted(k for k in counts if k not in OUTCOMES)
    return "  ".join(f"{k}={counts.get(k, 0)}" for k in keys)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=int(os.environ.get("JGO_FUZZ_CASES", QUICK_CASES)))
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--timeout", type=float, default=CASE_TIMEOUT_S, help="seconds per case before it is a hang")
    p.add_argument("--replay", type=int, default=None, help="run one seed in this process and print it")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main()
    if args.replay is not None:
        case = make_case(args.replay)
        print(case.label())
        print(run_case(case))
        return 0
    t0 = time.perf_counter()
    def progress(n, counts, new_failures):
        print(f"  {n} cases: {format_counts(counts)}", flush=True)
        for f in new_failures:
            print(f"    {f['outcome']}: {f['label']}\n        {f['detail'][:300]}", flush=True)

    counts, failures, stats = run_fuzz(args.cases, first_seed=args.seed, workers=args.workers, timeout=args.timeout,
                                       progress=progress)
    print(f"{args.cases} cases in {time.perf_counter() - t0:.0f} s: {format_counts(counts)}")
    print(f"worker restarts: {stats['restarts']}; xfail (known gaps and defects):")
    for reason, n in stats["xfail"].items():
        print(f"  {n:6d}  {reason}")
    for f in failures[:50]:
        print(f"{f['outcome']}: {f['label']}\n    {f['detail']}")
    return 1 if failures else 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
