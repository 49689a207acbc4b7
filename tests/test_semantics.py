"""The NaN, +-inf, overflow and empty-row semantics of every op: the table of ``docs/semantics.md`` as data,
and one test per cell of it.

Rows are input cases, columns the public ops. Every cell runs its op on a 5-node graph with the fused kernels
(``impl=None``, the CPU kernels or ``JGO_KERNELS=cuda-emulation``) and with the pure-JAX reference
(``impl="xla"``), jitted, in three edge orders (the special edge first, in the middle and last among its
destination's in-edges), and compares both with a NumPy oracle written here: float64 loops over the
definition of the op, never ``jaxgraphops.reference``. NaN and +-inf positions must be equal, finite values
close. The attention oracles compute the logits in float32, the precision the ops define for them (so a logit
that overflows float32 is -inf here too), and everything after them in float64. The cell's phrase is also
checked: its keyword (``nan``, ``+inf``, ``0``, ...) must hold for the oracle at the elements the case
perturbs. Cells marked ``grad`` check gradients too, against a NumPy gradient where one is written here (max/min,
edge_softmax), else kernel against reference, plus the exact zeros the phrase promises.

``test_docs_table_matches`` parses the markdown table in ``docs/semantics.md`` and requires it to be this one.

The graph: edges ``e0..e4`` = ``1->0, 2->0, 3->0, 0->1, 4->1``; node 0 receives e0, e1, e2, node 1 receives
e3, e4, nodes 2-4 receive nothing. The special values go on e1 (and e2) or on their sources, nodes 2 (and 3).
DimeNet's triplets of this graph are (e_in -> e_out) e4->e0, e1->e3, e2->e3; e1, e2, e4 have none.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from op_db import OPS as OP_DB

import jaxgraphops as jgo

INF, NAN = np.inf, np.nan
BIG = 3e38  # times 10 overflows float32: a finite input whose logit is +-inf
N = 5
SRC = np.array([1, 2, 3, 0, 4])
DST = np.array([0, 0, 0, 1, 1])
E = SRC.size
# base edge at each input position; e1 (the special edge) is in the middle, first and last among node 0's
# in-edges, and the first of the NaN edges e1, e2 changes
ORDERS = {"e1_middle": (0, 1, 2, 3, 4), "e1_first": (1, 3, 0, 4, 2), "e1_last": (4, 2, 0, 3, 1)}
H, C = 2, 2  # attention heads and channels per head
HEAD0 = slice(0, C)  # the columns of head 0 in a head-major [n, H*C] array


# ---------------------------------------------------------------------------------------------------------------
# The table


class Cell(NamedTuple):
    expect: str | None  # keyword checked on the oracle at the perturbed elements: nan, +inf, -inf, inf, 0, finite
    phrase: str  # the markdown cell
    grad: bool = False  # gradients checked too


CASES = {  # row key -> row label in the markdown table
    "nan_node": "NaN in a node feature",
    "nan_edge": "NaN in an edge feature or weight",
    "pinf": "+inf in a feature",
    "ninf": "−inf in a feature",
    "pinf_ninf": "+inf and −inf in one row",
    "inf_zero": "±inf times a 0 weight",
    "empty": "destination without in-edges",
    "ninf_logit": "a −inf logit",
    "all_ninf": "all logits of a row −inf",
    "pinf_logit": "a +inf logit",
    "nan_logit": "a NaN logit",
    "f16": "float16 whose float16 sum would overflow",
}

OPS = [column for op in OP_DB for column in (op.semantics if isinstance(op.semantics, tuple) else ())]

_AS_GSPMM = "as gspmm, per reduce"
_ATT_NAN = "NaN head row, NaN weights"
_F32 = "float32 sums, rounded once"
TABLE: dict[str, dict[str, Cell]] = {
    "nan_node": {
        "gspmm sum": Cell("nan", "NaN"),
        "gspmm mean": Cell("nan", "NaN"),
        "gspmm max": Cell("nan", "NaN (np.max); grad to 1st NaN edge", grad=True),
        "gspmm min": Cell("nan", "NaN (np.min); grad to 1st NaN edge", grad=True),
        "gsddmm": Cell("nan", "NaN on its edges"),
        "agg_simple": Cell("nan", _AS_GSPMM, grad=True),
        "agg_weighted": Cell("nan", _AS_GSPMM, grad=True),
        "agg_concat": Cell("nan", _AS_GSPMM + "; x_dst as is", grad=True),
        "pool": Cell("nan", _AS_GSPMM, grad=True),
        "mha_gat": Cell("nan", "NaN head row (NaN logit)"),
        "mha_gat_v2": Cell("nan", "NaN head row (NaN logit)"),
        "mha_simple": Cell("nan", "NaN in that channel (value)"),
        "gno_conv matrix": Cell("nan", "NaN row"),
        "gno_conv diagonal": Cell("nan", "NaN in that channel"),
        "agg_hg_basis": Cell("nan", "NaN in that channel of its blocks"),
        "update_efeat": Cell("nan", "NaN on its edges", grad=True),
    },
    "nan_edge": {
        "gspmm sum": Cell("nan", "NaN"),
        "gspmm mean": Cell("nan", "NaN"),
        "gspmm max": Cell("nan", "NaN; grad to 1st NaN edge", grad=True),
        "gspmm min": Cell("nan", "NaN; grad to 1st NaN edge", grad=True),
        "gsddmm": Cell("nan", "NaN on that edge"),
        "agg_simple": Cell("nan", _AS_GSPMM, grad=True),
        "agg_weighted": Cell("nan", "NaN row (NaN weight)", grad=True),
        "agg_concat": Cell("nan", "NaN row (NaN weight)", grad=True),
        "mha_gat": Cell("nan", "NaN head row (NaN logit)"),
        "mha_gat_v2": Cell("nan", "NaN head row (NaN logit)"),
        "mha_simple": Cell("nan", "NaN head row (NaN logit)"),
        "gno_conv matrix": Cell("nan", "NaN row (relu keeps NaN)", grad=True),
        "gno_conv diagonal": Cell("nan", "NaN row (relu keeps NaN)", grad=True),
        "update_efeat": Cell("nan", "NaN on that edge", grad=True),
        "agg_dmpnn": Cell("nan", "NaN in the messages out of its destination"),
        "dimenet agg_edge_to_edge": Cell("nan", "NaN rows of its triplets' e_out"),
    },
    "pinf": {
        "gspmm sum": Cell("+inf", "+inf"),
        "gspmm mean": Cell("+inf", "+inf"),
        "gspmm max": Cell("+inf", "+inf"),
        "gspmm min": Cell("finite", "the other edges' min"),
        "gsddmm": Cell("+inf", "+inf on its edges"),
        "agg_simple": Cell(None, _AS_GSPMM),
        "agg_weighted": Cell(None, _AS_GSPMM + " (u_mul_e)"),
        "agg_concat": Cell(None, _AS_GSPMM),
        "pool": Cell(None, _AS_GSPMM),
        "mha_gat": Cell("nan", "NaN head row (+inf logit)"),
        "mha_gat_v2": Cell("nan", "NaN head row (+inf logit)"),
        "mha_simple": Cell("+inf", "+inf in that channel (value)"),
        "gno_conv matrix": Cell("inf", "±inf (sign of κ)"),
        "gno_conv diagonal": Cell("inf", "±inf (sign of κ)"),
        "agg_hg_basis": Cell("inf", "±inf (sign of comp)"),
        "update_efeat": Cell("+inf", "+inf on its edges"),
        "agg_dmpnn": Cell("+inf", "+inf in those messages"),
        "dimenet agg_edge_to_edge": Cell("inf", "±inf in its e_out rows"),
    },
    "ninf": {
        "gspmm sum": Cell("-inf", "−inf"),
        "gspmm mean": Cell("-inf", "−inf"),
        "gspmm max": Cell("finite", "the other edges' max"),
        "gspmm min": Cell("-inf", "−inf"),
        "gsddmm": Cell("-inf", "−inf on its edges"),
        "agg_simple": Cell(None, _AS_GSPMM),
        "agg_weighted": Cell(None, _AS_GSPMM + " (u_mul_e)"),
        "agg_concat": Cell(None, _AS_GSPMM),
        "pool": Cell(None, _AS_GSPMM),
        "mha_gat": Cell("nan", "NaN in that channel (0 × −inf)"),
        "mha_gat_v2": Cell("nan", "NaN in that channel (0 × −inf)"),
        "mha_simple": Cell("-inf", "−inf in that channel (value)"),
        "gno_conv matrix": Cell("inf", "±inf (sign of κ)"),
        "gno_conv diagonal": Cell("inf", "±inf (sign of κ)"),
        "agg_hg_basis": Cell("inf", "±inf (sign of comp)"),
        "update_efeat": Cell("-inf", "−inf on its edges"),
        "agg_dmpnn": Cell("-inf", "−inf in those messages"),
        "dimenet agg_edge_to_edge": Cell("inf", "±inf in its e_out rows"),
    },
    "pinf_ninf": {
        "gspmm sum": Cell("nan", "NaN (inf − inf)"),
        "gspmm mean": Cell("nan", "NaN (inf − inf)"),
        "gspmm max": Cell("+inf", "+inf; grad to the +inf edge", grad=True),
        "gspmm min": Cell("-inf", "−inf; grad to the −inf edge", grad=True),
        "gsddmm": Cell("nan", "dot: NaN (inf − inf)"),
        "agg_simple": Cell(None, _AS_GSPMM),
        "agg_weighted": Cell(None, _AS_GSPMM + " (u_mul_e)"),
        "agg_concat": Cell(None, _AS_GSPMM),
        "pool": Cell(None, _AS_GSPMM),
        "mha_gat": Cell("nan", "NaN head row"),
        "mha_gat_v2": Cell("nan", "NaN head row"),
        "mha_simple": Cell("nan", "NaN in that channel (inf − inf)"),
        "gno_conv matrix": Cell(None, "±inf or NaN (IEEE)"),
        "gno_conv diagonal": Cell(None, "±inf or NaN (IEEE)"),
        "agg_hg_basis": Cell("nan", "NaN (inf − inf)"),
        "update_efeat": Cell("nan", "sum: NaN (inf − inf)"),
        "agg_dmpnn": Cell("nan", "NaN (inf − inf)"),
        "dimenet agg_edge_to_edge": Cell(None, "±inf or NaN (IEEE)"),
    },
    "inf_zero": {
        "gspmm sum": Cell("nan", "u_mul_e: NaN (0 × inf)"),
        "gspmm mean": Cell("nan", "u_mul_e: NaN (0 × inf)"),
        "gspmm max": Cell("nan", "u_mul_e: NaN (0 × inf)"),
        "gspmm min": Cell("nan", "u_mul_e: NaN (0 × inf)"),
        "gsddmm": Cell("nan", "NaN (0 × inf)"),
        "agg_weighted": Cell("nan", "NaN (0 × inf), every reduce"),
        "agg_concat": Cell("nan", "NaN (0 × inf), every reduce"),
        "gno_conv matrix": Cell("nan", "weighted: NaN (0 × inf)"),
        "gno_conv diagonal": Cell("nan", "weighted: NaN (0 × inf)"),
        "agg_hg_basis": Cell("nan", "comp 0: NaN (0 × inf)"),
    },
    "empty": {
        "gspmm sum": Cell("0", "0"),
        "gspmm mean": Cell("0", "0"),
        "gspmm max": Cell("0", "0"),
        "gspmm min": Cell("0", "0"),
        "agg_simple": Cell("0", "0"),
        "agg_weighted": Cell("0", "0; mean: 0 also where Σw = 0", grad=True),
        "agg_concat": Cell("0", "0, then x_dst; mean: 0 where Σw = 0", grad=True),
        "pool": Cell("0", "0 (graph without nodes)"),
        "mha_gat": Cell("0", "0, zero gradients", grad=True),
        "mha_gat_v2": Cell("0", "0, zero gradients", grad=True),
        "mha_simple": Cell("0", "0, zero gradients", grad=True),
        "gno_conv matrix": Cell("0", "0; weighted mean: 0 where Σw = 0", grad=True),
        "gno_conv diagonal": Cell("0", "0; weighted mean: 0 where Σw = 0", grad=True),
        "agg_hg_basis": Cell("0", "0, then x_dst", grad=True),
        "agg_dmpnn": Cell("0", "0 minus the reverse edge's row", grad=True),
        "dimenet agg_edge_to_edge": Cell("0", "0 (edge without triplets)"),
    },
    "ninf_logit": {
        "edge_softmax": Cell("0", "weight 0, row finite, zero grad", grad=True),
        "mha_gat": Cell("0", "weight 0, row finite, zero grad", grad=True),
        "mha_gat_v2": Cell("0", "weight 0, row finite, zero grad", grad=True),
        "mha_simple": Cell("0", "weight 0, row finite, zero grad", grad=True),
    },
    "all_ninf": {
        "edge_softmax": Cell("0", "weights 0, zero gradients", grad=True),
        "mha_gat": Cell("0", "0 (as no in-edges), zero gradients", grad=True),
        "mha_gat_v2": Cell("0", "0 (as no in-edges), zero gradients", grad=True),
        "mha_simple": Cell("0", "0 (as no in-edges), zero gradients", grad=True),
    },
    "pinf_logit": {
        "edge_softmax": Cell("nan", "NaN weights in the row"),
        "mha_gat": Cell("nan", _ATT_NAN),
        "mha_gat_v2": Cell("nan", _ATT_NAN),
        "mha_simple": Cell("nan", _ATT_NAN),
    },
    "nan_logit": {
        "edge_softmax": Cell("nan", "NaN weights in the row"),
        "mha_gat": Cell("nan", _ATT_NAN),
        "mha_gat_v2": Cell("nan", _ATT_NAN),
        "mha_simple": Cell("nan", _ATT_NAN),
    },
    "f16": {
        "gspmm sum": Cell("finite", _F32 + " (inf past 65504)"),
        "gspmm mean": Cell("finite", _F32),
        "gspmm max": Cell("finite", "exact"),
        "gspmm min": Cell("finite", "exact"),
        "gsddmm": Cell("finite", "float32 dot, rounded once"),
        "edge_softmax": Cell("finite", "float32 softmax"),
        "agg_simple": Cell("finite", _F32),
        "agg_weighted": Cell("finite", _F32),
        "agg_concat": Cell("finite", _F32),
        "pool": Cell("finite", _F32),
        "mha_gat": Cell("finite", "float32 logits and sums"),
        "mha_gat_v2": Cell("finite", "float32 logits and sums"),
        "mha_simple": Cell("finite", "float32 logits and sums"),
        "gno_conv matrix": Cell("finite", "float32 MLP and sums"),
        "gno_conv diagonal": Cell("finite", "float32 MLP and sums"),
        "agg_hg_basis": Cell("finite", _F32),
        "update_efeat": Cell("finite", "copies exact; sum: float32, rounded once"),
        "agg_dmpnn": Cell("finite", _F32),
        "dimenet agg_edge_to_edge": Cell("finite", "float32 throughout"),
    },
}

# Where the fused path (impl=None) still differs from the table (the reference and the oracle agree). Kn are in
# the C++ or CUDA kernels, Pn in the Python around them. docs/semantics.md describes each; the table's phrase
# carries the mark.
ISSUES = {
    "K3": "gno_conv kernels: an infinite f_src meets every hidden unit in the fused sum A_i = sum w f (x) [h, 1] "
          "(inf * 0 for a dead relu unit, inf - inf across V's signs): NaN where kappa_e @ f_j is +-inf",
    "K4": "dimenet CPU kernel: emb[e_in] * (W_b mid) is formed as sum_m W_b[:, m] (emb mid_m), so an infinite "
          "emb meets W_b mid's terms of both signs: NaN where the definition gives +-inf (n_mid > 1)",
    "P1": "mha_gat (ops/attention.py _head_scores): the scores <a_h, x_h> are one GEMM against a block-diagonal "
          "[H*C, H] matrix, so a NaN or inf in one head meets the other heads' zeros: every head of the row NaN",
}
ALL_ORDERS = tuple(ORDERS)
# the kernel platforms (jgo.kernel_platform()) each issue shows on; the CUDA kernels are checked on the emulated
# platform, and the real ones run the same sources
PLATFORMS = {"K3": ("cpu", "cuda-emulation", "cuda"), "K4": ("cpu",), "P1": ("cpu", "cuda-emulation", "cuda", "xla")}
# (case, op) -> (issues, the edge orders where the fused path's results differ from the oracle)
KNOWN: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    # P1 spreads a NaN or inf of head 0 to head 1's logit
    **{(case, "mha_gat"): (("P1",), ALL_ORDERS) for case in ("nan_node", "nan_edge", "pinf", "ninf", "pinf_ninf",
                                                                  "nan_logit")},
    **{(case, f"gno_conv {k}"): (("K3",), ALL_ORDERS) for case in ("pinf", "ninf") for k in ("matrix", "diagonal")},
    ("pinf_ninf", "gno_conv diagonal"): (("K3",), ALL_ORDERS),
    **{(case, "dimenet agg_edge_to_edge"): (("K4",), ALL_ORDERS) for case in ("pinf", "ninf", "pinf_ninf")},
}


def mark(issues):
    return " [" + ", ".join(issues) + "]"


for (_case, _op), (_issues, _) in KNOWN.items():  # the table's phrase carries the issue
    TABLE[_case][_op] = TABLE[_case][_op]._replace(phrase=TABLE[_case][_op].phrase + mark(_issues))


def cells():
    return [(case, op) for case in CASES for op in OPS if op in TABLE[case]]


# ---------------------------------------------------------------------------------------------------------------
# NumPy oracles (float64)


def _np_errstate():
    return np.errstate(all="ignore")


def reduce_rows(msgs, ids, n, reduce):
    """np.sum/mean/max/min of ``msgs [E, ...]`` over the rows ``ids``; 0 for a row without messages."""
    out = np.zeros((n,) + msgs.shape[1:])
    for i in range(n):
        m = msgs[ids == i]
        if len(m):
            out[i] = getattr(np, reduce)(m, axis=0)
    return out


def extreme_grads(msgs_parts, combine_grads, ids, n, reduce, coef):
    """Gradient of ``sum(coef * reduce_rows(msgs))`` for max/min: each row and element sends its coefficient to
    the first NaN edge if it has one, else to the first maximal (minimal) edge in input order (np.argmax's
    choice). ``combine_grads(k, f, c)`` adds ``c`` times the local derivatives of edge k, element f."""
    for i in range(n):
        edges = np.flatnonzero(ids == i)
        if edges.size:
            arg = (np.argmax if reduce == "max" else np.argmin)(msgs_parts[edges], axis=0)
            for f, k in np.ndenumerate(edges[arg]):
                combine_grads(k, f, coef[(i,) + f])


def softmax_np(z, dst, n):
    """scipy.special.softmax of ``z [E, H]`` over each destination's in-edges, except that a row whose logits are
    all -inf gets 0 (as a row without in-edges). A NaN or +inf logit makes its row NaN (max is NaN or
    inf - inf = NaN)."""
    out = np.zeros_like(z, dtype=np.float64)
    with _np_errstate():
        for i in range(n):
            sel = dst == i
            zi = z[sel].astype(np.float64)
            if zi.size:
                masked = np.all(np.isneginf(zi), axis=0)
                ez = np.exp(zi - np.where(masked, 0, zi.max(axis=0)))
                out[sel] = np.where(masked, 0, ez / ez.sum(axis=0))
    return out


def leaky_np(t, slope=0.2):
    return np.where(t > 0, t, slope * t)


def legendre_np(c):
    """``sqrt((2l+1)/4pi) P_l(c)``, l = 0..6 (Bonnet's recurrence)."""
    p = [np.ones_like(c), c]
    for l in range(1, 6):
        p.append(((2 * l + 1) * c * p[l] - l * p[l - 1]) / (l + 1))
    return np.array([math.sqrt((2 * l + 1) / (4 * math.pi)) * p[l] for l in range(7)])


# ---------------------------------------------------------------------------------------------------------------
# The ops: inputs per case (in base edge order), the call, the oracle, the elements a case is about


def _rng():
    return np.random.default_rng(0)


def _u(rng, *shape):
    return rng.uniform(0.5, 1.5, size=shape)


class Spec:
    """One column. ``edge_arrays`` are edge-valued (permuted with the edges); ``variants`` are run in every cell
    (``variants_for`` may restrict them); ``grad_args`` are differentiated in ``grad`` cells."""

    name = ""
    variants: tuple = (None,)
    edge_arrays: tuple = ()
    grad_args: tuple = ()

    def inputs(self, case):
        raise NotImplementedError

    def variants_for(self, case):
        return self.variants

    def call(self, g, extra, x, variant, impl):
        raise NotImplementedError

    def oracle(self, src, dst, x, variant):
        raise NotImplementedError

    def probe(self, case, outs, pos):
        raise NotImplementedError

    def probe_variant(self, case, outs, pos, variant):
        """The elements the case is about, for ``variant`` (``probe`` unless they depend on it)."""
        return self.probe(case, outs, pos)

    def extra(self, g):
        return None

    def grad_oracle(self, src, dst, x, variant, coefs):
        return None  # None: compare the kernels' gradients with the reference's

    def grad_zeros(self, case, variant, grads, pos):
        return []  # gradient entries the cell promises to be exactly 0


def _node_case(case, feat, nodes=(2, 3)):
    """The feature cases on a node-valued array ``feat`` (its column 0)."""
    a, b = nodes
    if case == "nan_node":
        feat[[a, b], 0] = NAN
    elif case == "pinf":
        feat[a, 0] = INF
    elif case == "ninf":
        feat[a, 0] = -INF
    elif case == "pinf_ninf":
        feat[a, 0], feat[b, 0] = INF, -INF
    elif case == "inf_zero":
        feat[a, 0] = INF


class Gspmm(Spec):
    variants = ("copy_u", "u_mul_e")
    edge_arrays = ("e",)

    def __init__(self, reduce):
        self.reduce = reduce
        self.name = f"gspmm {reduce}"
        self.grad_args = ("u", "e")

    def inputs(self, case):
        rng = _rng()
        x = {"u": rng.normal(size=(N, 2)), "e": _u(rng, E, 2)}
        _node_case(case, x["u"])
        if case == "nan_edge":
            x["e"][[1, 2], 0] = NAN
        elif case == "inf_zero":
            x["e"][1, 0] = 0
        elif case == "f16":  # node 0 receives 60000, 60000, -60000 and 60000s: a float16 running sum overflows
            x["u"][1:4, 0] = [60000, 60000, -60000]
            x["u"][:, 1] = 60000
            x["e"][:] = 1
        return x

    def variants_for(self, case):
        return ("u_mul_e",) if case in ("nan_edge", "inf_zero") else self.variants

    def call(self, g, extra, x, variant, impl):
        e = x["e"] if variant == "u_mul_e" else None
        return (jgo.gspmm(g, x["u"], e, op=variant, reduce=self.reduce, impl=impl),)

    def _msgs(self, src, x, variant):
        return x["u"][src] * (x["e"] if variant == "u_mul_e" else 1)

    def oracle(self, src, dst, x, variant):
        with _np_errstate():
            return (reduce_rows(self._msgs(src, x, variant), dst, N, self.reduce),)

    def probe(self, case, outs, pos):
        return outs[0][2] if case == "empty" else outs[0][0, 0]

    def grad_oracle(self, src, dst, x, variant, coefs):
        if self.reduce not in ("max", "min"):
            return None
        gu, ge = np.zeros_like(x["u"]), np.zeros_like(x["e"])
        mul = variant == "u_mul_e"

        def add(k, f, c):
            gu[(src[k],) + f] += c * (x["e"][(k,) + f] if mul else 1)
            if mul:
                ge[(k,) + f] += c * x["u"][(src[k],) + f]

        with _np_errstate():
            extreme_grads(self._msgs(src, x, variant), add, dst, N, self.reduce, coefs[0])
        return {"u": gu, "e": ge} if mul else {"u": gu}


class Gsddmm(Spec):
    name = "gsddmm"
    variants = ("u_dot_v", "u_mul_e")
    edge_arrays = ("e",)

    def inputs(self, case):
        rng = _rng()
        x = {"u": rng.normal(size=(N, 3)), "v": _u(rng, N, 3), "e": _u(rng, E, 3)}
        _node_case(case, x["u"])
        if case == "nan_edge":
            x["e"][[1, 2], 0] = NAN
        elif case == "pinf_ninf":  # both in one dot product
            x["u"][2, :2] = [INF, -INF]
        elif case == "inf_zero":
            x["v"][0, 0] = x["e"][1, 0] = 0
        elif case == "f16":
            x["u"][2] = [60000, 60000, -60000]
            x["v"][:] = x["e"][:] = 1
        return x

    def variants_for(self, case):
        return {"nan_edge": ("u_mul_e",), "pinf_ninf": ("u_dot_v",)}.get(case, self.variants)

    def call(self, g, extra, x, variant, impl):
        if variant == "u_dot_v":
            return (jgo.gsddmm(g, x["u"], x["v"], op="dot", impl=impl),)
        return (jgo.gsddmm(g, x["u"], x["e"], op="mul", lhs_target="u", rhs_target="e", impl=impl),)

    def oracle(self, src, dst, x, variant):
        with _np_errstate():
            if variant == "u_dot_v":
                return ((x["u"][src] * x["v"][dst]).sum(-1),)
            return (x["u"][src] * x["e"],)

    def probe(self, case, outs, pos):
        out = outs[0][pos[1]]
        return out if out.ndim == 0 else out[0]


class EdgeSoftmax(Spec):
    name = "edge_softmax"
    edge_arrays = ("z",)
    grad_args = ("z",)

    def inputs(self, case):
        x = {"z": _rng().normal(size=(E, 2))}
        z = x["z"]
        if case == "ninf_logit":
            z[1, 0] = -INF
        elif case == "all_ninf":
            z[[3, 4], 0] = -INF
        elif case == "pinf_logit":
            z[1, 0] = INF
        elif case == "nan_logit":
            z[1, 0] = NAN
        elif case == "f16":
            z[[0, 1, 2, 3, 4], 0] = [60000, -60000, 0, 60000, 60000]
        return x

    def call(self, g, extra, x, variant, impl):
        return (jgo.edge_softmax(g, x["z"], impl=impl),)

    def oracle(self, src, dst, x, variant):
        return (softmax_np(x["z"], dst, N),)

    def probe(self, case, outs, pos):
        if case == "all_ninf":
            return outs[0][[pos[3], pos[4]], 0]
        if case in ("pinf_logit", "nan_logit"):
            return outs[0][[pos[0], pos[1], pos[2]], 0]
        return outs[0][pos[1], 0] if case == "ninf_logit" else outs[0][pos[3], 0]

    def grad_oracle(self, src, dst, x, variant, coefs):
        # d sum(c alpha) / dz_k = alpha_k (c_k - sum over k's row of c alpha): 0 where alpha is 0
        alpha, c = softmax_np(x["z"], dst, N), coefs[0]
        row = reduce_rows(c * alpha, dst, N, "sum")
        return {"z": alpha * (c - row[dst])}

    def grad_zeros(self, case, variant, grads, pos):
        z = grads["z"]
        return [z[pos[1], 0]] if case == "ninf_logit" else [z[[pos[3], pos[4]], 0]]


class Agg(Spec):
    """agg_simple, agg_weighted, agg_concat and pool, each over the four reductions."""

    variants = ("sum", "mean", "max", "min")

    def __init__(self, name):
        self.name = name
        self.edge_arrays = {"agg_simple": ("ef",), "agg_weighted": ("w",), "agg_concat": ("ef", "w"),
                            "pool": ("x",)}[name]
        self.grad_args = {"agg_simple": ("x", "ef"), "agg_weighted": ("x", "w"), "agg_concat": ("x", "ef", "w"),
                          "pool": ("x",)}[name]

    def inputs(self, case):
        rng = _rng()
        if self.name == "pool":  # the members of graph g are the "edges" into g: x [E, 2], graph ids = DST
            x = {"x": rng.normal(size=(E, 2))}
            _node_case(case, x["x"], nodes=(1, 2))
            if case == "f16":
                x["x"][0:3, 0] = [60000, 60000, -60000]
                x["x"][:, 1] = 60000
            return x
        x = {"x": rng.normal(size=(N, 2)), "ef": rng.normal(size=(E, 2)), "w": _u(rng, E)}
        _node_case(case, x["x"])
        if case == "nan_edge":
            if self.name == "agg_simple":
                x["ef"][[1, 2], 0] = NAN
            elif self.name == "agg_weighted":
                x["w"][[1, 2]] = NAN
            else:
                x["w"][1], x["ef"][2, 0] = NAN, NAN
        elif case == "inf_zero":
            x["w"][1] = 0
        elif case == "empty":
            x["w"][[3, 4]] = [1.0, -1.0]  # node 1's weights sum to 0
        elif case == "f16":
            x["x"][1:4, 0] = [60000, 60000, -60000]
            x["x"][:, 1] = 60000
            x["ef"][0:3, 0] = [60000, 60000, -60000]
            x["ef"][:, 1] = 60000
            x["w"][:] = 1
        return x

    def call(self, g, extra, x, variant, impl):
        r = variant
        if self.name == "agg_simple":
            return (jgo.agg_simple(g, x["x"], x["ef"], reduce=r, impl=impl),)
        if self.name == "agg_weighted":
            return (jgo.agg_weighted(g, x["x"], x["w"], reduce=r, impl=impl),)
        if self.name == "agg_concat":
            return (jgo.agg_concat(g, x["x"], edge_feat=x["ef"], edge_weight=x["w"], reduce=r, impl=impl),)
        return (jgo.pool(x["x"], g.dst, N, reduce=r, impl=impl),)

    @staticmethod
    def weighted_np(src, dst, x, w, reduce):
        msgs = w[:, None] * x[src]
        if reduce != "mean":
            return reduce_rows(msgs, dst, N, reduce)
        total, wsum = reduce_rows(msgs, dst, N, "sum"), reduce_rows(w, dst, N, "sum")[:, None]
        return np.where(wsum == 0, 0, total / np.where(wsum == 0, 1, wsum))

    def oracle(self, src, dst, x, variant):
        r = variant
        with _np_errstate():
            if self.name == "pool":
                return (reduce_rows(x["x"], dst, N, r),)
            if self.name == "agg_simple":
                return (np.concatenate([reduce_rows(x["x"][src], dst, N, r), reduce_rows(x["ef"], dst, N, r)], 1),)
            agg = self.weighted_np(src, dst, x["x"], x["w"], r)
            if self.name == "agg_weighted":
                return (agg,)
            return (np.concatenate([agg, reduce_rows(x["ef"], dst, N, r), x["x"]], axis=1),)

    def probe(self, case, outs, pos):
        out = outs[0]
        if case == "empty":
            return out[2, :4]  # the aggregates (agg_concat appends x_dst)
        col = 2 if (case == "nan_edge" and self.name == "agg_simple") else 0
        return out[0, col]

    def grad_zeros(self, case, variant, grads, pos):
        # agg_weighted/agg_concat mean: node 1's weights sum to 0, so its edges get no gradient
        if self.name in ("agg_weighted", "agg_concat") and case == "empty" and variant == "mean":
            return [grads["w"][[pos[3], pos[4]]]]
        return []


class Attention(Spec):
    """mha_gat, mha_gat_v2 and mha_simple with H = 2 heads of C = 2 channels; outputs (out, alpha)."""

    def __init__(self, name):
        self.name = name
        self.edge_arrays = ("ef",)
        self.grad_args = {"mha_gat": ("xs", "xd", "ef"), "mha_gat_v2": ("xs", "xd", "ef"),
                          "mha_simple": ("q", "k", "v", "ef")}[name]

    def inputs(self, case):
        rng = _rng()
        simple = self.name == "mha_simple"
        if simple:
            x = {"q": _u(rng, N, H * C), "k": rng.normal(size=(N, H * C)), "v": rng.normal(size=(N, H * C))}
        else:
            x = {"xs": rng.normal(size=(N, H * C)), "xd": rng.normal(size=(N, H * C)),
                 "a": _u(rng, (3 if self.name == "mha_gat" else 1) * H * C)}
        x["ef"] = 0.5 * rng.normal(size=(E, H * C))
        _node_case(case, x["v"] if simple else x["xs"])
        a_edge = 2 * H * C if self.name == "mha_gat" else 0  # index of (head 0, channel 0) of a_edge (v2: of a)
        if case == "nan_edge":
            x["ef"][[1, 2], 0] = NAN
        elif case in ("ninf_logit", "pinf_logit"):  # a finite input whose logit overflows float32
            x["ef"][1, 0] = -BIG if case == "ninf_logit" else BIG
            if simple:
                x["q"][:, 0] = 10
            else:
                x["a"][a_edge] = 10
        elif case == "nan_logit":
            x["ef"][1, 0] = NAN
        elif case == "all_ninf":  # every logit of node 1, head 0 overflows to -inf
            if simple:
                x["ef"][[3, 4], 0] = -BIG
                x["q"][:, 0] = 10
            else:
                x["xd"][1, 0] = -BIG
                x["a"][H * C if self.name == "mha_gat" else 0] = 10
        elif case == "f16":  # logits beyond float16 (and running sums of 3 x 30000)
            if simple:
                x["q"][:], x["k"][:], x["v"][:] = 300, 300, 30000
            else:
                x["xs"][:], x["xd"][:], x["a"][:] = 30000, 30000, 1
            x["ef"][:] = 0
        return x

    def call(self, g, extra, x, variant, impl):
        kw = dict(num_heads=H, edge_feat=x["ef"], return_attention=True, impl=impl)
        if self.name == "mha_gat":
            return jgo.mha_gat(g, x["xs"], x["a"], x_dst=x["xd"], **kw)
        if self.name == "mha_gat_v2":
            return jgo.mha_gat_v2(g, x["xs"], x["xd"], x["a"], **kw)
        return jgo.mha_simple(g, x["q"], x["k"], x["v"], **kw)

    def oracle(self, src, dst, x, variant):
        f32 = {k: np.asarray(v, np.float32) for k, v in x.items()}  # the logits in float32
        heads = lambda v: v.reshape(v.shape[0], H, C)  # noqa: E731
        with _np_errstate():
            if self.name == "mha_gat":
                a = f32["a"].reshape(3, H, C)
                s = [(heads(f32[k]) * a[i]).sum(-1) for i, k in enumerate(("xs", "xd", "ef"))]
                z = leaky_np(s[0][src] + s[1][dst] + s[2])
                values = heads(x["xs"])[src]
            elif self.name == "mha_gat_v2":
                t = heads(f32["xs"])[src] + heads(f32["xd"])[dst] + heads(f32["ef"])
                z = (leaky_np(t) * f32["a"].reshape(H, C)).sum(-1)
                values = heads(x["xs"])[src]
            else:
                z = (heads(f32["q"])[dst] * (heads(f32["k"])[src] + heads(f32["ef"]))).sum(-1) * np.float32(C ** -0.5)
                values = heads(x["v"])[src] + heads(x["ef"])
            alpha = softmax_np(z.astype(np.float32), dst, N)
            out = reduce_rows(alpha[..., None] * values, dst, N, "sum")
        return out.reshape(N, H * C), alpha

    def probe(self, case, outs, pos):
        out, alpha = outs
        if case == "empty":
            return out[2]
        if case == "ninf_logit":
            return alpha[pos[1], 0]
        if case == "all_ninf":
            return np.concatenate([out[1, HEAD0], alpha[[pos[3], pos[4]], 0]])
        if case in ("pinf_logit", "nan_logit"):
            return np.concatenate([out[0, HEAD0], alpha[[pos[0], pos[1], pos[2]], 0]])
        if case == "f16":
            return out[0]
        if case in ("ninf", "pinf_ninf") or (self.name == "mha_simple" and case in ("nan_node", "pinf")):
            return out[0, 0]
        return out[0, HEAD0]

    def grad_zeros(self, case, variant, grads, pos):
        dst_arg = "q" if self.name == "mha_simple" else "xd"
        if case == "empty":  # nodes 2-4 receive nothing
            return [grads[dst_arg][2:]]
        if case == "ninf_logit":  # the masked edge's own inputs, head 0
            return [grads["ef"][pos[1], HEAD0]]
        # all_ninf: node 1, head 0: its destination features and its edges
        return [grads[dst_arg][1, HEAD0], grads["ef"][[pos[3], pos[4]], HEAD0]]


class Gno(Spec):
    variants = ("sum", "weighted_mean")
    edge_arrays = ("dx", "w")
    grad_args = ("f", "dx", "U", "b_u", "V", "b_v", "w")

    def __init__(self, kernel):
        self.kernel = kernel
        self.name = f"gno_conv {kernel}"

    def inputs(self, case):
        rng = _rng()
        p = 6 if self.kernel == "matrix" else 2  # c_out * c_in = 3 * 2, or c_in = 2
        x = {"f": rng.normal(size=(N, 2)), "dx": rng.normal(size=(E, 2)), "U": rng.normal(size=(4, 2)),
             "b_u": rng.normal(size=4), "V": rng.normal(size=(p, 4)), "b_v": rng.normal(size=p), "w": _u(rng, E)}
        _node_case(case, x["f"])
        if case == "nan_edge":
            x["dx"][1, 0], x["w"][2] = NAN, NAN
        elif case == "inf_zero":
            x["w"][1] = 0
        elif case == "empty":
            x["w"][[3, 4]] = [1.0, -1.0]
        elif case == "f16":  # U dx = 80000 overflows float16
            for k, v in dict(dx=40000, U=1, b_u=0, V=1e-4, b_v=0, f=1, w=1).items():
                x[k][:] = v
        return x

    def variants_for(self, case):
        return ("weighted_mean",) if case == "inf_zero" else self.variants

    def call(self, g, extra, x, variant, impl):
        w = x["w"] if variant == "weighted_mean" else None
        return (jgo.gno_conv(g, x["f"], x["dx"], x["U"], x["b_u"], x["V"], x["b_v"], kernel=self.kernel,
                             reduce="sum" if variant == "sum" else "mean", edge_weight=w, impl=impl),)

    def oracle(self, src, dst, x, variant):
        with _np_errstate():
            pre = (x["dx"][:, None, :] * x["U"][None]).sum(-1) + x["b_u"]
            hidden = np.where(pre < 0, 0, pre)  # relu, NaN stays NaN
            kappa = (hidden[:, None, :] * x["V"][None]).sum(-1) + x["b_v"]
            f = x["f"][src]
            msgs = kappa * f if self.kernel == "diagonal" else (kappa.reshape(E, 3, 2) * f[:, None, :]).sum(-1)
            if variant == "sum":
                return (reduce_rows(msgs, dst, N, "sum"),)
            return (Agg.weighted_np(np.arange(E), dst, msgs, x["w"], "mean"),)

    def probe(self, case, outs, pos):
        out = outs[0]
        if case == "empty":
            return out[2]
        if case == "f16" or (self.kernel == "matrix" and case != "nan_node"):
            return out[0]
        return out[0, 0]


class Dimenet(Spec):
    name = "dimenet agg_edge_to_edge"
    edge_arrays = ("vec", "sbf", "emb")

    def inputs(self, case):
        rng = _rng()
        pos = rng.normal(size=(N, 3))
        x = {"vec": pos[SRC] - pos[DST], "sbf": rng.normal(size=(E, 42)), "emb": rng.normal(size=(E, 4)),
             "weights": rng.normal(size=(46, 3))}
        emb = x["emb"]
        if case == "nan_edge":  # e1 is e_in of e1->e3 (column 0 of e3); e4 is e_in of e4->e0 (all of e0)
            emb[1, 0], x["vec"][4, 0] = NAN, NAN
        elif case == "pinf":
            emb[1, 0] = INF
        elif case == "ninf":
            emb[1, 0] = -INF
        elif case == "pinf_ninf":
            emb[1, 0], emb[2, 0] = INF, -INF
        elif case == "f16":  # W_a^T sbf ~ 1e6 overflows float16; W_b brings it back
            x["sbf"] = 1000 * _u(rng, E, 42)
            x["weights"][:42] = 100 * _u(rng, 42, 3)
            x["weights"][42:] = 1e-4 * _u(rng, 4, 3)
            x["emb"] = _u(rng, E, 4)
        return x

    def extra(self, g):
        return jgo.dimenet.triplets(g)

    def call(self, g, extra, x, variant, impl):
        return (jgo.dimenet.agg_edge_to_edge(x["vec"], x["sbf"], x["emb"], x["weights"], extra, impl=impl),)

    def oracle(self, src, dst, x, variant):
        out = np.zeros(x["emb"].shape)
        w_a, w_b = x["weights"][:42], x["weights"][42:]
        with _np_errstate():
            for b in range(E):  # e_out = j -> i
                for a in range(E):  # e_in = k -> j, k != i
                    if dst[a] == src[b] and src[a] != dst[b]:
                        va, vb = x["vec"][a], x["vec"][b]
                        cos = (va * vb).sum() / (np.sqrt((va * va).sum()) * np.sqrt((vb * vb).sum()))
                        sbf = (x["sbf"][a].reshape(7, 6) * legendre_np(cos)[:, None]).reshape(42)
                        out[b] += x["emb"][a] * (w_b @ (w_a.T @ sbf))
        return (out,)

    def probe(self, case, outs, pos):
        out = outs[0]
        if case == "empty":
            return out[[pos[1], pos[2], pos[4]]]
        if case == "nan_edge":
            return np.concatenate([out[pos[3], :1], out[pos[0]]])
        if case == "f16":
            return out[[pos[0], pos[3]]]
        return out[pos[3], 0]


D = 2  # the feature width of the relational columns


def _relation(src):
    """agg_hg_basis' edge types, a function of the edge (so they follow the edge orders): e1 and e2 (sources 2, 3)
    share relation 1, e0 (source 1) has relation 0 at node 0; node 1 receives one edge of each."""
    return (np.asarray(src) >= 2).astype(np.int32)


class HgBasis(Spec):
    """agg_hg_basis: ``comp`` (a basis decomposition, 2 relations x 2 bases, positive coefficients) and ``norm``
    (a block per relation, means per relation, own features appended)."""

    name = "agg_hg_basis"
    variants = ("comp", "norm")
    grad_args = ("x", "comp", "x_dst")

    def inputs(self, case):
        rng = _rng()
        x = {"x": rng.normal(size=(N, D)), "comp": _u(rng, 2, 2), "x_dst": rng.normal(size=(N, D))}
        _node_case(case, x["x"])
        if case == "inf_zero":
            x["comp"][1, 1] = 0  # relation 1 (e1's) has no part in basis 1
        elif case == "f16":  # node 0 receives 60000 (relation 0), 60000 and -60000 (relation 1)
            x["x"][1:4, 0] = [60000, 60000, -60000]
            x["comp"][:] = 1
        return x

    def variants_for(self, case):
        return ("comp",) if case == "inf_zero" else self.variants

    def extra(self, g):
        return jnp.asarray(_relation(g.src))

    def call(self, g, extra, x, variant, impl):
        if variant == "comp":
            return (jgo.agg_hg_basis(g, x["x"], extra, x["comp"], n_edge_types=2, impl=impl),)
        return (jgo.agg_hg_basis(g, x["x"], extra, n_edge_types=2, x_dst=x["x_dst"], concat_own=True,
                                 norm_by_dst_degree=True, impl=impl),)

    def oracle(self, src, dst, x, variant):
        r = _relation(src)
        with _np_errstate():
            if variant == "comp":  # basis b: sum_e comp[r_e, b] x[src_e]
                return (np.concatenate([reduce_rows(x["comp"][r, b][:, None] * x["x"][src], dst, N, "sum")
                                        for b in range(2)], axis=1),)
            blocks = [reduce_rows(x["x"][src[r == k]], dst[r == k], N, "mean") for k in range(2)]
            return (np.concatenate(blocks + [x["x_dst"]], axis=1),)

    def probe(self, case, outs, pos):
        # node 0, column 0 of the second block: relation 1 (e1, e2) or basis 1; the empty nodes' aggregates
        return outs[0][2:, :2 * D] if case == "empty" else outs[0][0, D]


class UpdateEfeat(Spec):
    """update_efeat: ``[e | x_src[src] | x_dst[dst]]`` and their sum."""

    name = "update_efeat"
    variants = ("concat", "sum")
    edge_arrays = ("ef",)
    grad_args = ("ef", "xs", "xd")

    def inputs(self, case):
        rng = _rng()
        x = {"ef": rng.normal(size=(E, D)), "xs": rng.normal(size=(N, D)), "xd": rng.normal(size=(N, D))}
        _node_case(case, x["xs"])
        if case == "nan_edge":
            x["ef"][[1, 2], 0] = NAN
        elif case == "pinf_ninf":  # e1 = 2 -> 0 meets +inf at its source and -inf at its destination
            x["xs"][3, 0], x["xd"][0, 0] = 0, -INF
        elif case == "f16":  # e1's three rows 60000, 60000, -60000: a float16 running sum overflows
            x["ef"][1, 0], x["xs"][2, 0], x["xd"][0, 0] = 60000, 60000, -60000
        return x

    def variants_for(self, case):
        return ("sum",) if case == "pinf_ninf" else self.variants

    def call(self, g, extra, x, variant, impl):
        return (jgo.update_efeat(g, x["ef"], x["xs"], x["xd"], mode=variant, impl=impl),)

    def oracle(self, src, dst, x, variant):
        rows = (x["ef"], x["xs"][src], x["xd"][dst])
        with _np_errstate():
            return (np.concatenate(rows, axis=1) if variant == "concat" else rows[0] + rows[1] + rows[2],)

    def probe_variant(self, case, outs, pos, variant):
        col = D if variant == "concat" and case in ("nan_node", "pinf", "ninf") else 0  # the source's column
        return outs[0][pos[1], col] if case != "f16" else outs[0][pos[1]]


def _reverse_ids(src, dst):
    """The reverse edge of each edge (the one with the endpoints swapped), -1 for none: e0 and e3 here."""
    pairs = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(src, dst))}
    return np.array([pairs.get((int(b), int(a)), -1) for a, b in zip(src, dst)])


class Dmpnn(Spec):
    """agg_dmpnn: ``m[e] = sum_{e' into src(e)} h[e'] - h[rev(e)]``, with and without the own row appended."""

    name = "agg_dmpnn"
    variants = ("plain", "concat_own")
    edge_arrays = ("h",)
    grad_args = ("h",)

    def inputs(self, case):
        rng = _rng()
        x = {"h": rng.normal(size=(E, D))}  # rows of edges: e1 and e2 go into node 0, whose out-edge is e3
        if case == "nan_edge":
            x["h"][[1, 2], 0] = NAN
        elif case in ("pinf", "ninf", "pinf_ninf"):
            _node_case(case, x["h"], nodes=(1, 2))
        elif case == "f16":  # node 0 receives 60000, 60000, -60000: e3's message overflows a float16 running sum
            x["h"][0:3, 0] = [60000, 60000, -60000]
        return x

    def extra(self, g):
        return jnp.asarray(_reverse_ids(g.src, g.dst))

    def call(self, g, extra, x, variant, impl):
        return (jgo.agg_dmpnn(g, x["h"], extra, concat_own=variant == "concat_own", impl=impl),)

    def oracle(self, src, dst, x, variant):
        h, rev = x["h"], _reverse_ids(src, dst)
        with _np_errstate():
            m = reduce_rows(h, dst, N, "sum")[src] - np.where((rev >= 0)[:, None], h[np.maximum(rev, 0)], 0)
        return (np.concatenate([m, h], axis=1) if variant == "concat_own" else m,)

    def probe(self, case, outs, pos):
        if case == "empty":  # e1, e2, e4 leave nodes without in-edges and have no reverse
            return outs[0][[pos[1], pos[2], pos[4]], :D]
        return outs[0][pos[3], 0] if case != "f16" else outs[0][pos[3]]  # e3 = 0 -> 1: node 0's in-edges


SPECS = {s.name: s for s in [Gspmm("sum"), Gspmm("mean"), Gspmm("max"), Gspmm("min"), Gsddmm(), EdgeSoftmax(),
                             Agg("agg_simple"), Agg("agg_weighted"), Agg("agg_concat"), Agg("pool"),
                             Attention("mha_gat"), Attention("mha_gat_v2"), Attention("mha_simple"), Gno("matrix"),
                             Gno("diagonal"), HgBasis(), UpdateEfeat(), Dmpnn(), Dimenet()]}


# ---------------------------------------------------------------------------------------------------------------
# Running a cell


@functools.lru_cache(maxsize=None)
def _forward(op, variant, impl):
    spec = SPECS[op]
    return jax.jit(lambda g, extra, x: tuple(spec.call(g, extra, x, variant, impl)))


@functools.lru_cache(maxsize=None)
def _gradient(op, variant, impl, names):
    spec = SPECS[op]

    def loss(diff, rest, g, extra, coefs):
        outs = spec.call(g, extra, {**rest, **diff}, variant, impl)
        return sum(jnp.sum(o.astype(jnp.float32) * c) for o, c in zip(outs, coefs))

    return jax.jit(jax.grad(loss))


def _coefs(outs):
    return tuple(np.linspace(0.5, 1.5, o.size, dtype=np.float32).reshape(o.shape) for o in outs)


def assert_same(got, want, rtol, atol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    for name, fn in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        np.testing.assert_array_equal(fn(got), fn(want), err_msg=f"{what}: {name} positions\ngot  {got}\nwant {want}")
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol,
                               err_msg=f"{what}\ngot  {got}\nwant {want}")


def check_expect(expect, values, what):
    v = np.asarray(values, np.float64).ravel()
    ok = {"nan": np.isnan, "+inf": np.isposinf, "-inf": np.isneginf, "inf": np.isinf, "0": lambda a: a == 0,
          "finite": np.isfinite}[expect](v)
    assert ok.all(), f"{what}: the oracle gives {v} where the table says {expect!r}"


def _setup(case, op, order):
    spec = SPECS[op]
    perm = np.array(ORDERS[order])
    pos = np.argsort(perm)  # input position of each base edge
    src, dst = SRC[perm], DST[perm]
    g = jgo.Graph.from_edges(src, dst, N, N)
    dtype = np.float16 if case == "f16" else np.float32
    base = spec.inputs(case)
    x = {k: (v[perm] if k in spec.edge_arrays else v).astype(dtype) for k, v in base.items()}
    exact = {k: v.astype(np.float64) for k, v in x.items()}  # the oracle sees the rounded inputs
    return spec, pos, src, dst, g, x, exact


def _kernel_outcome(case, op, order, failures):
    """The kernels must match the oracle, except in a KNOWN cell and order, where they must not (so a fix shows)."""
    issues, orders = KNOWN.get((case, op), ((), ()))
    issues = tuple(i for i in issues if jgo.kernel_platform() in PLATFORMS[i])
    if not issues or order not in orders:
        if failures:
            raise failures[0]
    elif not failures:
        pytest.fail(f"({case}, {op}) in {order}: the kernels now agree with the oracle; {', '.join(issues)} "
                    "may be fixed: update KNOWN, ISSUES and docs/semantics.md")


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("case,op", cells(), ids=[f"{c}-{o.replace(' ', '_')}" for c, o in cells()])
def test_cell(case, op, order):
    cell = TABLE[case][op]
    spec, pos, src, dst, g, x, exact = _setup(case, op, order)
    extra = spec.extra(g)
    rtol, atol = (1e-2, 1e-3) if case == "f16" else (1e-4, 1e-5)
    failures = []  # the kernels' mismatches
    for variant in spec.variants_for(case):
        want = spec.oracle(src, dst, exact, variant)
        if case == "f16":  # rounded once to the output precision (180000 is inf)
            with _np_errstate():
                want = tuple(w.astype(np.float16).astype(np.float64) for w in want)
        if cell.expect is not None:
            check_expect(cell.expect, spec.probe_variant(case, want, pos, variant), f"{case}/{op}/{variant}")
        for impl in ("xla", None):
            got = _forward(op, variant, impl)(g, extra, x)
            for k, (u, w) in enumerate(zip(got, want)):
                assert case != "f16" or u.dtype == np.float16, (case, op, u.dtype)
                what = f"{case}/{op}/{variant}/{order} impl={impl} output {k}"
                if impl is None:
                    try:
                        assert_same(u, w, rtol, atol, what)
                    except AssertionError as err:
                        failures.append(err)
                else:
                    assert_same(u, w, rtol, atol, what)
        if cell.grad:
            _check_gradients(case, op, order, spec, variant, pos, src, dst, g, extra, x, exact, want)
    _kernel_outcome(case, op, order, failures)


def _check_gradients(case, op, order, spec, variant, pos, src, dst, g, extra, x, exact, want):
    names = tuple(n for n in spec.grad_args if n in x and (n != "e" or variant == "u_mul_e")
                  and (n != "w" or variant != "sum"))
    coefs = _coefs(want)
    diff, rest = {n: x[n] for n in names}, {n: v for n, v in x.items() if n not in names}
    grads = {impl: _gradient(op, variant, impl, names)(diff, rest, g, extra, coefs) for impl in ("xla", None)}
    oracle = spec.grad_oracle(src, dst, exact, variant, coefs)
    for n in names:
        what = f"{case}/{op}/{variant}/{order} d/d{n}"
        if oracle is not None:
            assert_same(grads["xla"][n], oracle[n], 1e-4, 1e-5, what + " impl=xla")
            assert_same(grads[None][n], oracle[n], 1e-4, 1e-5, what + " impl=None")
        else:
            assert_same(grads[None][n], grads["xla"][n], 1e-4, 1e-5, what + " kernels vs reference")
    for impl in ("xla", None):
        for z in spec.grad_zeros(case, variant, {n: np.asarray(v) for n, v in grads[impl].items()}, pos):
            np.testing.assert_array_equal(z, 0, err_msg=f"{case}/{op}/{variant}/{order} impl={impl}: zero gradients")


# ---------------------------------------------------------------------------------------------------------------
# The table in the docs


DOC = Path(__file__).resolve().parent.parent / "docs" / "semantics.md"


def markdown_table() -> str:
    """The table as markdown (``python -c "import test_semantics as t; print(t.markdown_table())"`` in tests/)."""
    lines = ["| case | " + " | ".join(f"`{op}`" for op in OPS) + " |", "|---" * (len(OPS) + 1) + "|"]
    for case, label in CASES.items():
        row = [TABLE[case][op].phrase if op in TABLE[case] else "—" for op in OPS]
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def _parse_table(text):
    rows = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("|")]
    split = lambda ln: [c.strip() for c in ln.strip().strip("|").split("|")]  # noqa: E731
    header = [c.strip("`") for c in split(rows[0])]
    assert re.fullmatch(r"[|\-: ]+", rows[1]), rows[1]
    return header, [split(r) for r in rows[2:]]


def test_docs_table_matches():
    text = DOC.read_text()
    start = text.index("<!-- semantics-table -->")
    end = text.index("<!-- /semantics-table -->")
    header, rows = _parse_table(text[start:end])
    want_header, want_rows = _parse_table(markdown_table())
    assert header == want_header, "docs/semantics.md: the columns differ from TABLE in tests/test_semantics.py"
    assert len(rows) == len(want_rows)
    for got, want in zip(rows, want_rows):
        assert got == want, f"docs/semantics.md row {got[0]!r} differs from TABLE:\n{got}\n{want}"


def test_table_is_complete():
    """Every cell names a case its op's spec builds, and every op has a spec."""
    assert set(SPECS) == set(OPS)
    assert set(TABLE) == set(CASES)
    for case, row in TABLE.items():
        assert set(row) <= set(OPS), set(row) - set(OPS)
    assert set(PLATFORMS) == set(ISSUES)
    for (case, op), (issues, orders) in KNOWN.items():
        assert op in TABLE[case] and not TABLE[case][op].grad, (case, op)
        assert set(issues) <= set(ISSUES) and orders and set(orders) <= set(ORDERS)
