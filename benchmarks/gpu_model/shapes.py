"""The shapes the GPU model predicts: the peer report's cases (``benchmarks.cases``) and the variants the
GPU issues name (a uniform random graph of 100,000 nodes and 1.6M edges, F = 64, bfloat16 features), each
an op on one input with the report's jaxgraphops runner (``benchmarks.impl_jax``) or one registered here.

``cases(scale)`` builds them with every graph ``scale`` times its size; ``DEFAULT`` names the cases
``python -m benchmarks.gpu_model`` models by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import cases as report_cases
from .. import workloads
from ..runners import implements, jax_runner

MODEL = "jaxgraphops (model case)"


@dataclass(frozen=True)
class ModelCase:
    """One modelled op and input: ``id`` names it, ``key`` its implementation (``runners.IMPLEMENTATIONS``)."""

    id: str
    key: str
    op: str
    shape: str
    data: dict = field(repr=False)
    library: str = "jaxgraphops"


def uniform_graph(n: int, e: int, seed: int = 0):
    """``(src, dst)`` int32: ``e`` edges with both ends uniform over ``n`` nodes (multi-edges kept: at 16 edges
    per node they are rare), in random order.

    >>> src, dst = uniform_graph(100, 1600)
    >>> len(src), int(np.bincount(dst, minlength=100).max()) < 60
    (1600, True)
    """
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, e).astype(np.int32), rng.integers(0, n, e).astype(np.int32)


@implements("copy_u_sum", MODEL)
def _copy_u_sum(d):
    import jaxgraphops as jgo
    return jax_runner(lambda g, x: jgo.gspmm(g, x, None, op="copy_u", reduce="sum"),
                      (jgo.Graph.from_edges(d["src"], d["dst"], d["n"], d["n"]), d["x"]), (1,))


_REPORT = {"gspmm_sum": "graph", "agg_mean": "graph", "agg_max": "graph", "gat": "graph", "gatv2": "graph",
           "transformer": "graph", "pool_sum": "pool", "pool_max": "pool", "hg_basis": "relational",
           "update_efeat": "relational", "dmpnn": "relational", "gspmm_sum_f64": "graph", "agg_max_f64": "graph",
           "gat_bf16": "graph", "copy_u_sum_uniform": "uniform", "gspmm_sum_uniform": "uniform"}


def cases(scale: float = 1.0, ids=None) -> list[ModelCase]:
    """The modelled cases at ``scale`` (those of ``ids`` only, when given: their inputs alone are built)."""
    wanted = set(_REPORT) if ids is None else set(ids)
    parts = {_REPORT[i] for i in wanted}
    builders = {"graph": report_cases._graph_cases, "pool": report_cases._pool_cases,
                "relational": report_cases._relational_cases}
    out = [ModelCase(c.key, c.key, c.op, c.shape, c.data)
           for part in ("graph", "pool", "relational") if part in parts for c in builders[part](scale)]
    by_key = {c.id: c for c in out}
    rng = np.random.default_rng(7)
    if "graph" in parts:  # F = 64 on the power-law graph; bfloat16 where the kernels store it (attention)
        import ml_dtypes
        g = by_key["gspmm_sum"].data
        x64 = np.ascontiguousarray(g["x"][:, :64])
        shape = by_key["gspmm_sum"].shape.replace("F=128", "F=64")
        gat = by_key["gat"]
        out += [ModelCase("gspmm_sum_f64", "gspmm_sum", "gspmm u_mul_e sum", shape, dict(g, x=x64)),
                ModelCase("agg_max_f64", "agg_max", "agg_simple max", shape, dict(by_key["agg_max"].data, x=x64)),
                ModelCase("gat_bf16", "gat", gat.op + " bf16", gat.shape + " bf16",
                          dict(gat.data, x=gat.data["x"].astype(ml_dtypes.bfloat16),
                               att=gat.data["att"].astype(ml_dtypes.bfloat16)))]
    if "uniform" in parts:  # the uniform graph of the first GPU run's Nsight profile
        n, e = int(100_000 * scale), int(1_600_000 * scale)
        src, dst = uniform_graph(n, e)
        x = rng.normal(size=(n, 128)).astype(np.float32)
        deg = np.maximum(np.bincount(dst, minlength=n), 1).astype(np.float32)
        uni = dict(src=src, dst=dst, n=n, x=x, w=(deg[src] * deg[dst]) ** -0.5)
        ushape = f"uniform N={n:,} E={e:,} F=128"
        out += [ModelCase("copy_u_sum_uniform", "copy_u_sum", "gspmm copy_u sum", ushape, uni, MODEL),
                ModelCase("gspmm_sum_uniform", "gspmm_sum", "gspmm u_mul_e sum", ushape, uni)]
    return [c for c in out if c.id in wanted]


# The default cases of ``python -m benchmarks.gpu_model`` (each forward and forward+backward): the report's
# rows and the variants above.
DEFAULT = ("gspmm_sum", "agg_mean", "agg_max", "gat", "gatv2", "transformer", "pool_sum", "pool_max", "hg_basis",
           "update_efeat", "dmpnn", "gspmm_sum_f64", "agg_max_f64", "copy_u_sum_uniform", "gspmm_sum_uniform",
           "gat_bf16")

# The shapes at full size (as the first GPU run's table names them), for the tables of a run traced smaller.
_PL = "power-law N=169,343 E=1,166,243"
FULL_SHAPES = {
    **dict.fromkeys(("gspmm_sum", "agg_mean", "agg_max"), f"{_PL} F=128"),
    **dict.fromkeys(("gat", "gatv2", "transformer"), f"{_PL} H=8 C=16"),
    **dict.fromkeys(("pool_sum", "pool_max"), "molecules graphs=4,096 N=78,141 F=128"),
    "hg_basis": f"{_PL} D=64 R=8 B=4", "update_efeat": "2-D mesh N=200,000 E=1,411,190 F=32+32+32",
    "dmpnn": "7,000 molecules E=252,000 bonds D=300", "gspmm_sum_f64": f"{_PL} F=64", "agg_max_f64": f"{_PL} F=64",
    **dict.fromkeys(("copy_u_sum_uniform", "gspmm_sum_uniform"), "uniform N=100,000 E=1,600,000 F=128"),
    "gat_bf16": f"{_PL} H=8 C=16 bf16",
}
