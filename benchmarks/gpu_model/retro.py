"""The retro-diction: the model against the first GPU run (BENCHMARKS.md, H100, code at edecaa7).

:func:`edecaa7_tree` checks that commit out beside this one (``git worktree add``) and builds it once with the
emulated CUDA handlers in a virtual environment of its own; its report cases (``benchmarks.cases`` as they
were) are recorded and traced there, and its kernels are compiled and traced from its ``ffi/`` against this
checkout's emulated runtime and tracer. :func:`fit` sets the fitted parameters on the rows of ``FIT_ROWS``
only (least squares of the log ratio); :func:`compare` sets every row's model beside its measurement.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np

from . import model
from .pipeline import ROOT, Tree

COMMIT = "edecaa7"
MEASURED = ROOT / "benchmarks" / "plots" / "report_gpu.json"  # the first GPU run's raw records
KEYS = ("gspmm_sum", "agg_mean", "agg_max", "gat", "gatv2", "transformer", "pool_sum", "pool_max", "hg_basis",
        "update_efeat", "dmpnn")
# The rows the fitted parameters come from (model.Params.FITTED), one per regime: a hub row whose chain is
# gathers (gspmm u_mul_e: the unloaded latency), a hub row whose chain is arithmetic (GAT: the cycles), a row
# without hubs on a fully loaded GPU (update_efeat: the loaded latency). Named before the fit; agg_mean's
# forward, named first, was replaced by GAT's after an unfitted run showed that it and gspmm's constrain the
# same latency and leave the cycles free.
FIT_ROWS = (("gspmm_sum", "forward"), ("gat", "forward"), ("update_efeat", "forward"))
POWER_LAW = ("gspmm_sum", "agg_mean", "agg_max", "gat", "gatv2", "transformer", "hg_basis")


def measured(library: str = "jaxgraphops") -> dict[tuple[str, str], float]:
    """``(key, pass) -> ms`` of a library in the first GPU run."""
    records = json.loads(MEASURED.read_text())["results"]
    return {(r["key"], r["pass"]): r["ms"] for r in records if r["library"] == library}


def edecaa7_tree(base: Path = Path("/tmp") / COMMIT, cache: Path = ROOT / "build" / "gpu_model", log=print) -> Tree:
    """The commit's worktree at ``base`` with a virtual environment holding its development build."""
    if not (base / "ffi").is_dir():
        log(f"git worktree add {base} {COMMIT}")
        subprocess.run(["git", "worktree", "add", str(base), COMMIT], cwd=ROOT, check=True, capture_output=True)
    python = base / ".venv" / "bin" / "python"
    if not python.is_file() or subprocess.run([str(python), "-c", "import jaxgraphops._ext as e; "
                                                "assert e.with_cuda_emulation"], cwd="/", capture_output=True
                                               ).returncode:
        log(f"building {COMMIT} with the emulated CUDA handlers in {base / '.venv'} (several minutes)")
        subprocess.run(["python3", "-m", "venv", str(base / ".venv")], check=True)
        pip = [str(base / ".venv" / "bin" / "pip"), "install", "-q"]
        subprocess.run([*pip, "scikit-build-core", "nanobind", "jax==0.10.2", "jaxlib==0.10.2", "ninja", "scipy"],
                       check=True)
        env = dict(os.environ, JGO_CUDA_EMULATION="ON", CMAKE_BUILD_PARALLEL_LEVEL="2")
        subprocess.run([*pip, "--no-build-isolation", f"-Cbuild-dir={base / 'build'}", str(base)], env=env,
                       check=True)
    return Tree(COMMIT, base, str(python), "report", cache / COMMIT)


# The first GPU run's Nsight profile (BENCHMARKS.md): gspmm copy_u sum over a uniform graph of 100,000 nodes and
# 1.6M edges at F = 128 ran one kernel of 0.33 ms. Not one of the 22 rows: a check of the bulk, without hubs.
NSIGHT = ("copy_u_sum_uniform", "forward", 0.33)


def uniform_tree(tree: Tree) -> Tree:
    """The commit's kernels and jaxgraphops on this checkout's uniform-graph case (:mod:`.shapes`)."""
    return Tree(f"{tree.name}-uniform", ROOT, tree.python, "model", tree.cache, tree.ffi)  # its cubins, its driver


def log_errors(times: dict, rows, truth: dict) -> np.ndarray:
    return np.array([math.log(times[r] / truth[r]) for r in rows])


def fit(evaluate, start: model.Params, rows=FIT_ROWS, truth=None) -> model.Params:
    """The fitted parameters minimising the squared log error on ``rows``; ``evaluate(params, rows)`` gives
    the modelled ms per row. The loaded latency is kept at or above the unloaded one (searched as the unloaded
    latency times 1 + a non-negative excess)."""
    from scipy.optimize import minimize

    truth = truth or measured()

    def params(x):
        unloaded, excess, factor = np.exp(x)
        return model.with_params(start, (unloaded, unloaded * (1 + excess), factor))

    def loss(x):
        return float(np.sum(log_errors(evaluate(params(x), rows), rows, truth) ** 2))

    x0 = np.log([start.lat_unloaded_ns, max(start.lat_loaded_ns / start.lat_unloaded_ns - 1, 0.05),
                 start.cycle_factor])  # model.Params says where the committed fit started
    best = minimize(loss, x0, method="Nelder-Mead", options=dict(xatol=1e-3, fatol=1e-8, maxiter=400))
    return params(best.x)


# Pairs of rows measured closer than this are ties, which the model may order either way. The first GPU run
# recorded medians of 5 timed runs and no spread (report_gpu.json holds one median per row), with the GPU's
# clocks left as they were: a latency-bound kernel's time moves with the SM clock, between the sustained
# 1.755 GHz the model assumes under load and the H100's boost of 1.98 GHz, 1.13x apart; rounded up to 1.15.
TIE = 1.15


def rank_check(times: dict, truth: dict, keys=POWER_LAW) -> tuple[float, list[tuple]]:
    """Kendall's tau between modelled and measured times over the power-law rows, and the pairs ordered
    differently (with their measured ratio)."""
    rows = [(k, p) for k in keys for p in ("forward", "forward+backward") if (k, p) in truth and (k, p) in times]
    concordant = discordant = 0
    wrong = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            s = np.sign(times[a] - times[b]) * np.sign(truth[a] - truth[b])
            concordant += s > 0
            discordant += s < 0
            if s < 0:
                wrong.append((a, b, max(truth[a], truth[b]) / min(truth[a], truth[b])))
    return (concordant - discordant) / max(1, concordant + discordant), wrong


def order_summary(times: dict, truth: dict, keys=POWER_LAW, tie: float = TIE) -> str:
    """The power-law rows' order in a sentence: tau, every pair ordered differently, which of them are ties
    (measured within ``tie`` of each other) and whether every other pair is ordered as measured.

    >>> truth = {("gat", "forward"): 10.0, ("gatv2", "forward"): 10.5, ("hg_basis", "forward"): 20.0}
    >>> print(order_summary({("gat", "forward"): 11.0, ("gatv2", "forward"): 10.0, ("hg_basis", "forward"): 9.0},
    ...                     truth))  # doctest: +NORMALIZE_WHITESPACE
    the power-law rows' order (3 rows, 3 pairs): Kendall tau -1.00, 3 pair(s) ordered differently, 1 of them a tie
    (measured within 1.15x, the first GPU run's unrecorded spread: retro.TIE): gat forward / gatv2 forward
    (1.05x apart measured, a tie); gat forward / hg_basis forward (2.00x apart measured); gatv2 forward /
    hg_basis forward (1.90x apart measured). **Not rank-ordered: 2 pair(s) measured more than 1.15x apart are
    ordered differently**
    """
    tau, wrong = rank_check(times, truth, keys)
    n = sum((k, p) in truth and (k, p) in times for k in keys for p in ("forward", "forward+backward"))
    ties = [w for w in wrong if w[2] < tie]
    pairs = "; ".join(f"{a[0]} {a[1]} / {b[0]} {b[1]} ({r:.2f}x apart measured{', a tie' if r < tie else ''})"
                      for a, b, r in wrong)
    verdict = (f"**Rank-ordered: every pair measured more than {tie:g}x apart is ordered as measured**"
               if len(ties) == len(wrong) else
               f"**Not rank-ordered: {len(wrong) - len(ties)} pair(s) measured more than {tie:g}x apart are "
               f"ordered differently**")
    return (f"the power-law rows' order ({n} rows, {n * (n - 1) // 2} pairs): Kendall tau {tau:.2f}, "
            f"{len(wrong)} pair(s) ordered differently, {len(ties)} of them {'a tie' if len(ties) == 1 else 'ties'} "
            f"(measured within {tie:g}x, the first GPU run's unrecorded spread: retro.TIE)"
            + (f": {pairs}" if wrong else "") + f". {verdict}")
