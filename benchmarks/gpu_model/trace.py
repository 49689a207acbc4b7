"""The traced emulated run: record a case's FFI calls under JAX, replay them with the memory trace on, read
back per launch what its warp-level memory instructions touched.

Three steps, each cached under a build directory:

1. :func:`build_replay`: ``make -f tools/gpu_trace.mk`` builds ``trace_replay`` from a tree's
   ``ffi/cuda/*.cu`` (instrumented) and this tree's emulated runtime and tracer
   (``ffi/cuda_emulation/trace.cc``: no kernel line changes).
2. :func:`record`: ``record_cases.py`` runs each case's passes once on the emulated CUDA handlers
   (``JGO_KERNELS=cuda-emulation``) with the recorder on (``JGO_FFI_RECORD``), keeping the calls and the
   optimised HLO of each pass.
3. :func:`replay`: ``trace_replay`` runs a pass's calls in program order; :func:`read_launches` reads each
   launch's record (:class:`Launch`) and names its kernel and call sites (file, line) with ``addr2line``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
L2_MB = (20.0, 25.0, 30.0, 40.0, 50.0)  # the LRU sizes every trace simulates at once
PASSES = ("forward", "forward+backward")


def build_replay(build: Path, kernel_ffi: Path = ROOT / "ffi", jobs: int = 2, log=print) -> Path:
    """``trace_replay`` of ``kernel_ffi``'s kernels, built (incrementally) in ``build``."""
    started = time.perf_counter()
    cmd = ["make", "-s", "-f", "tools/gpu_trace.mk", f"-j{jobs}", f"KERNEL_FFI={kernel_ffi}", f"BUILD={build}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"gpu_model: {' '.join(cmd)} failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
    seconds = time.perf_counter() - started
    if seconds > 5:
        log(f"built {build / 'trace_replay'} in {seconds:.0f} s")
    return build / "trace_replay"


def record(out: Path, keys: list[str], scale: float, source: str = "model", root: Path = ROOT,
           python: str = sys.executable, jobs: int = 1, log=print) -> None:
    """The calls of every case ``key`` at ``scale``, recorded by ``python`` (a jaxgraphops with the emulated
    handlers) into ``out/KEY/PASS``, one process per case (the recorder keeps at most four calls alike per
    process), ``jobs`` at once; ``source`` picks the cases: ``model`` (:mod:`.shapes`) or ``report``
    (``benchmarks.cases`` of ``root``, the report's at that commit). Cases already recorded are kept."""
    todo = [k for k in keys if not all((out / k / p / "case.json").is_file() for p in PASSES)]
    if not todo:
        return
    log(f"recording {', '.join(todo)} at scale {scale:g} ({source} cases of {root})")
    script = Path(__file__).with_name("record_cases.py")

    def one(key):
        calls = out / f"calls-{key}"
        calls.mkdir(parents=True, exist_ok=True)
        for stale in calls.glob("*.jgocase"):
            stale.unlink()
        env = dict(os.environ, JGO_KERNELS="cuda-emulation", JGO_FFI_RECORD=str(calls), PYTHONUNBUFFERED="1",
                   JGO_FFI_RECORD_LIMIT="100000", JGO_FFI_RECORD_MAX_MB="100000")
        return subprocess.run([python, str(script), str(root), str(out), f"{scale!r}", source, key], cwd=out,
                              env=env, capture_output=True, text=True)

    with ThreadPoolExecutor(jobs) as pool:
        done = list(pool.map(one, todo))
    for d in done:
        for line in d.stdout.splitlines():
            log(f"  {line}")
    failed = [f"{d.stdout[-2000:]}{d.stderr[-5000:]}" for d in done if d.returncode]
    if failed:
        raise SystemExit("gpu_model: recording failed:\n" + "\n".join(failed))


def program_order(pass_dir: Path) -> list[Path]:
    """The recorded calls of a pass in the order its program makes them: the n-th file of a target is the
    n-th custom call to that target in the optimised HLO's schedule."""
    files: dict[str, list[Path]] = {}
    for f in sorted(pass_dir.glob("*.jgocase")):
        files.setdefault(f.name.split(".")[0], []).append(f)
    order = []
    for target in re.findall(r'custom_call_target="(jgo_\w+)"', (pass_dir / "program.hlo").read_text()):
        if files.get(target):
            order.append(files[target].pop(0))
    order += [f for fs in files.values() for f in fs]  # calls the schedule does not show (none expected)
    return order


def replay(binary: Path, pass_dir: Path, out: Path, l2_mb=L2_MB, sms: int = 132) -> Path:
    """Runs the pass's calls through ``trace_replay`` into ``out`` (skipped when already there), on an emulated
    device of ``sms`` multiprocessors (``JGO_EMU_SMS``: the engine sizes its windows by them)."""
    done_file = out / "done"
    if done_file.is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("launch-*"):
        stale.unlink()
    cases = program_order(pass_dir)
    started = time.perf_counter()
    cmd = [str(binary), str(out), "--l2-mb", ",".join(f"{m:g}" for m in l2_mb), *map(str, cases)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, JGO_EMU_SMS=str(sms)))
    if done.returncode:
        raise SystemExit(f"gpu_model: {' '.join(cmd[:4])} ... failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    (out / "cases.json").write_text(json.dumps([c.name for c in cases]))
    done_file.write_text(f"{time.perf_counter() - started:.1f}\n")
    return out


@dataclass
class Site:
    """One traced call site (a load or store of the kernel source) in one launch."""

    id: int
    file: str
    line: int
    write: bool
    shared: bool
    lane_bytes: int
    execs: int  # warp-level instructions
    lanes: int  # active lanes over them
    bytes: int  # bytes the lanes asked for
    sectors: int  # distinct 32-byte sectors per instruction, summed
    l1_hits: int  # loads whose lines the warp had touched among its last 32 lines
    dram_read: np.ndarray  # sectors read from DRAM, per L2 size
    dram_write: np.ndarray  # sectors written back, per L2 size

    @property
    def kind(self) -> str:
        return "shared" if self.shared else "store" if self.write else "load"


@dataclass
class Launch:
    """One kernel launch of a traced pass."""

    case: int
    call: str  # the recorded call's file name
    name: str  # the handler's name (jgo_spmm)
    kernel: str  # the kernel's C++ name (demangled)
    kernel_file: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    l2_mb: tuple[float, ...]
    sites: list[Site]
    block_ids: np.ndarray  # [B]
    offsets: np.ndarray  # [B + 1] into site_ids/total/busiest
    site_ids: np.ndarray
    total: np.ndarray  # warp-level instructions of a block at a site, over its warps
    busiest: np.ndarray  # those of the block's busiest warp

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def _addr2line(binary: Path, addresses: list[int], functions: bool = False) -> list[tuple[str, str, int]]:
    """``(function, file, line)`` per address of ``binary`` (innermost inlined location)."""
    if not addresses:
        return []
    cmd = ["addr2line", "-e", str(binary), "-C"] + (["-f"] if functions else [])
    out = subprocess.run(cmd, input="\n".join(hex(a) for a in addresses) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    step = 2 if functions else 1
    result = []
    for i in range(len(addresses)):
        where = out[i * step + step - 1]
        file, _, line = where.rpartition(":")
        line = re.match(r"\d+", line)
        result.append((out[i * step] if functions else "", file, int(line[0]) if line else 0))
    return result


def read_launches(trace_dir: Path, binary: Path) -> list[Launch]:
    """The launches of a replayed pass, in order, with their kernels and sites named."""
    metas = [json.loads(p.read_text()) for p in sorted(trace_dir.glob("launch-*.json"))]
    calls = json.loads((trace_dir / "cases.json").read_text())
    pcs = sorted({s["pc_offset"] - 1 for m in metas for s in m["sites"]})  # within the call instruction
    where = dict(zip(pcs, _addr2line(binary, pcs)))
    kernels = sorted({m["kernel_offset"] for m in metas})
    names = dict(zip(kernels, _addr2line(binary, kernels, functions=True)))
    launches = []
    for path, m in zip(sorted(trace_dir.glob("launch-*.json")), metas):
        raw = np.fromfile(path.with_suffix(".bin"), dtype=np.uint32)
        b, n = m["blocks"], m["entries"]
        parts = np.split(raw, np.cumsum([b, b + 1, n, n]))
        sites = [Site(s["id"], Path(where[s["pc_offset"] - 1][1]).name, where[s["pc_offset"] - 1][2], s["write"],
                      s["shared"], s["lane_bytes"], s["execs"], s["lanes"], s["bytes"], s["sectors"], s["l1_hits"],
                      np.array(s["dram_read"], float), np.array(s["dram_write"], float)) for s in m["sites"]]
        function, file, _ = names[m["kernel_offset"]]
        launches.append(Launch(m["case"], calls[m["case"]], m["name"], function, Path(file).name, tuple(m["grid"]),
                               tuple(m["block"]), m["shared_bytes"], tuple(m["l2_mb"]), sites, *parts))
    return launches
