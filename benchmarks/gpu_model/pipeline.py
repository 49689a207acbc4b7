"""From a source tree to modelled times: cards, traced replay, model; every step cached under ``build/gpu_model``.

A :class:`Tree` is this checkout or another commit's worktree (the retro-diction's edecaa7) with the Python
that imports its jaxgraphops (a development build with the emulated CUDA handlers). Its cubins are keyed by
their sources (:mod:`.sass`), its recordings and traces by a hash of its ``ffi/``, ``jaxgraphops/`` and
benchmark cases, so that changing a kernel re-traces and nothing else does.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import cards as cards_module
from . import model, sass, trace

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Tree:
    """A source tree to model: ``root`` (ffi/, jaxgraphops/, benchmarks/), ``python`` importing its build,
    ``source`` of its cases (``model``: this checkout's shapes, ``report``: its own ``benchmarks.cases``);
    ``kernels``, when given, the ffi/ whose kernels run (the one ``python``'s build holds)."""

    name: str
    root: Path
    python: str
    source: str
    cache: Path
    kernels: Path | None = None  # another tree's ffi/ to trace (default: root's)

    @property
    def ffi(self) -> Path:
        return self.kernels or self.root / "ffi"

    def key(self) -> str:
        """A hash of what its recordings depend on: its ffi/, jaxgraphops/ and cases (for ``model``, this
        checkout's shapes too)."""
        shapes = [ROOT / "benchmarks" / "gpu_model" / "shapes.py"] if self.source == "model" else []
        return _digest([*self.ffi.rglob("*"), *(self.root / "jaxgraphops").rglob("*.py"),
                        self.root / "benchmarks" / "cases.py", self.root / "benchmarks" / "workloads.py", *shapes])


def tracer_key() -> str:
    """A hash of the tracer (the runtime, its hooks and the driver): a new one traces again."""
    emulation = ROOT / "ffi" / "cuda_emulation"
    return _digest([emulation / "trace.cc", emulation / "emulation.cc", emulation / "jgo_emulation" / "trace.h",
                    ROOT / "tools" / "gpu_trace" / "trace_replay.cc"])


def _digest(paths) -> str:
    h = hashlib.sha256()
    for p in sorted(p for p in paths if p.is_file()):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def current_tree(cache: Path = ROOT / "build" / "gpu_model") -> Tree:
    return Tree("current", ROOT, sys.executable, "model", cache / "current")


def cards_of(tree: Tree, jobs: int = 2, log=print, engine: bool = False, files=None, prebuilt: Path | None = None):
    """``{(file, Card.raw_name): Card}``: the tree's cost cards, cached beside its cubins (``engine``: only those
    of the kernels with an engine marker, compiling only the files that hold one; ``files``: only those of
    these ``ffi/cuda`` file names; ``prebuilt``: the plugin build's cubins in that directory,
    :func:`sass.prebuilt_sources`, instead of compiling)."""
    if engine:
        def select(source):
            return cards_module.declares_engine(source, tree.ffi)
    else:
        def select(source):
            return files is None or source.name in files
    if prebuilt is None:
        compiled = sass.compile_sources(tree.ffi, tree.cache / "cubins", jobs, log=log, select=select)
    else:
        compiled = sass.prebuilt_sources(tree.ffi, prebuilt, select)
    (tree.cache / "cubins").mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256()
    for c in compiled:
        key.update(c.source.name.encode() + hashlib.sha256(c.cubin.read_bytes()).digest())
    for module in (cards_module, sass):
        key.update(Path(module.__file__).read_bytes())
    key.update(b"engine kernels only" if engine else b"")
    cached = tree.cache / "cubins" / f"cards-{key.hexdigest()[:12]}.pickle"
    if cached.is_file():
        return pickle.loads(cached.read_bytes())
    cards = {(c.file, c.raw_name): c for c in cards_module.build_cards(compiled, tree.ffi, engine=engine, jobs=jobs)}
    cached.write_bytes(pickle.dumps(cards))
    return cards


def trace_sms(scale: float) -> dict[float, int]:
    """``{trace scale: SMs}``: a trace at a fraction of the shape simulates that fraction of the L2 and of the SMs
    (``JGO_EMU_SMS``), so that what the kernels size by the device (the engine's windows) comes out as at full
    size; below full size the half-size trace gets exactly half the SMs of the other, so that both size their
    windows alike (the extrapolation compares the same launches)."""
    if scale >= 1:
        return {scale: round(model.H100.sms * scale)}
    half = max(1, round(model.H100.sms * scale / 2))
    return {scale: 2 * half, scale / 2: half}


def traced_passes(tree: Tree, ids: list[str], scale: float, jobs: int = 2, log=print):
    """``{(case id, pass): (launches, hlo, case.json, half, half_hlo)}`` of the tree's cases traced at ``scale``
    (recorded, replayed); below full size, ``half`` and ``half_hlo`` are the pass traced at ``scale / 2`` (for
    the extrapolation), else None."""
    binary = trace.build_replay(tree.cache / "trace_replay", tree.ffi, jobs, log)
    scales = [scale] if scale >= 1 else [scale, scale / 2]
    work = []
    for s in scales:
        base = tree.cache / f"runs-{tree.key()}" / f"scale-{s:g}"
        trace.record(base / "calls", ids, s, tree.source, tree.root, tree.python, jobs, log)
        work += [(s, base, case_id, pass_) for case_id in ids for pass_ in trace.PASSES]

    sms = trace_sms(scale)

    def replayed(item):
        s, base, case_id, pass_ = item
        calls = base / "calls" / case_id / pass_
        traced = trace.replay(binary, calls, base / f"traces-{tracer_key()}-{sms[s]}sms" / case_id / pass_,
                              tuple(m * s for m in trace.L2_MB), sms[s])
        return (trace.read_launches(traced, binary), (calls / "program.hlo").read_text(),
                json.loads((calls / "case.json").read_text()))

    with ThreadPoolExecutor(jobs) as pool:  # each replay is a process of its own
        runs = {(s, c, p): r for (s, _, c, p), r in zip(work, pool.map(replayed, work))}
    return {(c, p): (*runs[(scale, c, p)], *(runs[(scales[-1], c, p)][:2] if len(scales) > 1 else (None, None)))
            for (s, c, p) in runs if s == scale}


def trace_seconds(tree: Tree, ids: list[str], scale: float) -> tuple[float, float]:
    """``(recording, replaying)`` seconds the cached traces of these cases took (both scales below full size):
    the passes' runs under JAX (not the processes' start) and the traced replays."""
    recorded = replayed = 0.0
    for s in [scale] if scale >= 1 else [scale, scale / 2]:
        base = tree.cache / f"runs-{tree.key()}" / f"scale-{s:g}"
        for case_id in ids:
            for pass_ in trace.PASSES:
                case = base / "calls" / case_id / pass_ / "case.json"
                done = base / f"traces-{tracer_key()}-{trace_sms(scale)[s]}sms" / case_id / pass_ / "done"
                recorded += json.loads(case.read_text())["emulated_seconds"] if case.is_file() else 0.0
                replayed += float(done.read_text()) if done.is_file() else 0.0
    return recorded, replayed


def kernel_files(traced, cuda: Path) -> set[str]:
    """The ``ffi/cuda`` file names (in the directory ``cuda``) that compile the kernels the traced passes launch
    (at both scales): a kernel defined in a header (the engine's ``walk_reduce.cuh``) by every ``.cu`` file that
    includes it, directly or through other headers."""
    files = {launch.kernel_file for launches, _, _, half, _ in traced.values()
             for launch in [*launches, *(half or [])] if launch.name != "cudaMemsetAsync"}
    includes = {p.name: {Path(i).name for i in re.findall(r'#include "([^"]+)"', p.read_text())}  # "cuda/x.cuh"
                for p in cuda.glob("*.cu*")}
    while True:
        more = {name for name, inc in includes.items() if inc & files} - files
        if not more:
            return files
        files |= more


def model_passes(traced, cards, gpu: model.Gpu, params: model.Params, scale: float):
    """``{(case id, pass): PassTime}``."""
    return {k: model.pass_time(launches, cards, hlo, gpu, params, scale, half, half_hlo)
            for k, (launches, hlo, _, half, half_hlo) in traced.items()}
