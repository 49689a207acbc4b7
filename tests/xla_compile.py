"""XLA's CPU compiler at its cheapest, for the test processes (``conftest.py``, the fuzzer's workers).

The tests compile tens of thousands of small XLA programs (the references, the compositions and the models
around the kernels; the kernels themselves are built C++): they check values, not XLA's speed. Three flags:
LLVM optimisation level 0; each program's code generated as one LLVM module, not split for parallel codegen
threads (a program of the tests is small, and two test processes hold the cores already); and on jaxlib 0.10
XLA's loop emitters instead of its fusion emitters (which jaxlib 0.11 made the only ones and whose flag it no
longer accepts). On 2 cores, jaxlib 0.10.2: a small elementwise program compiles in 7 ms instead of 19 (the
first and the third flag); tests/test_gat.py and tests/test_nn_attention.py (ci profile) ran in 36 s instead of
54 (the third flag), and took 73 CPU-s instead of 80 with the second (one process; 2026-11-30).
"""

from __future__ import annotations

import importlib.metadata


def _jaxlib_version() -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in importlib.metadata.version("jaxlib").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return (0, 0)


def cheap_compile_flags(flags: str) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) with the cheap-compile flags added, each unless ``flags`` names it
    already (a caller's own setting wins)."""
    cheap = ["--xla_backend_optimization_level=0", "--xla_cpu_parallel_codegen_split_count=1"]
    if _jaxlib_version() < (0, 11):
        cheap.append("--xla_cpu_use_fusion_emitters=false")
    added = [f for f in cheap if f.split("=")[0] not in flags]
    return " ".join([flags.strip(), *added]).strip()
