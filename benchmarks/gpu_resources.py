"""``python -m benchmarks.gpu_resources``: the static GPU budget of every CUDA kernel, without a GPU.

Compiles each ``ffi/cuda/*.cu`` to device code for sm_80 and sm_90 (``nvcc -fatbin -Xptxas -v``, the
files in parallel) as the CUDA plugin's build does (cmake/cuda-plugin.cmake: the same sources,
optimisation, defines and real architectures; tests/test_gpu_resources.py keeps them in step), reads
ptxas's report and prints, per kernel instantiation: registers, stack frame, spill stores/loads,
static and dynamic shared memory, and the theoretical occupancy on an H100 at the launch configuration
(``kBlock`` threads per block, from ``ffi/cuda/launch.cuh``).

``--check`` exits 1 when a kernel spills, or runs below 50% occupancy without a reason in
``REASONS``; ``--markdown FILE`` writes the table into FILE between ``BEGIN`` and ``END``;
``--ffi DIR`` measures a modified copy of ffi/ instead; ``--reports DIR`` reads the reports that the plugin's
own build kept (``tools/ptxas_reports.py`` as its CUDA compiler launcher: CI) instead of compiling again.
From the repository root (needs nvcc; about a minute on 2 cores)::

    python -m benchmarks.gpu_resources --check --markdown BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import math
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .tables import replace_section

ROOT = Path(__file__).resolve().parent.parent
FFI = ROOT / "ffi"
XLA_FFI = ROOT / "third_party" / "xla_ffi"  # the XLA FFI headers every build compiles against
ARCHS = ("sm_80", "sm_90")
PTX = "80"  # the virtual architecture of the PTX every image is made from (cmake/cuda-plugin.cmake)
BEGIN, END = "<!-- gpu-resources:begin -->", "<!-- gpu-resources:end -->"
MIN_OCCUPANCY = 0.5

# The gno kernels' dynamic shared memory is sizeof(T) * (hidden + 2 (hidden + 1) + features + kBlock)
# bytes (SharedBytes in ffi/cuda/gno.cu); their occupancy is given at this shape.
GNO_SHAPE = {"hidden": 64, "features": 32}
GNO_KERNEL = re.compile(r"Gno(Fwd|BwdSrc|BwdDst)Kernel<(\w+)")
ELEMENT_BYTES = {"float": 4, "double": 8, "__half": 2, "__nv_bfloat16": 2}

# Why a kernel runs below MIN_OCCUPANCY (fnmatch patterns on "file.cu:name" or "name"; the first match counts).
# Every one is register-bound: none uses static shared memory, and 256-thread blocks leave 8 per SM otherwise.
REASONS = {
    "*Reduce*Kernel<*": "the chunked row-walk engine (ffi/cuda/chunk_walk.cuh): each walker holds kInFlight = 8 "
    "gathered rows in registers (a 128-bit load per lane each), the staged indices and the accumulators, and folds "
    "split rows' partials: 78-222 registers (float64 and the strided path the most; __launch_bounds__(kBlock, 1), "
    "so no spills). Its latency hiding is loads in flight per warp (8 before the first is used) rather than warps "
    "per SM: 8-24 warps keep 64-192 gathers in flight per SM",
    "edge_softmax.cu:*Softmax*Kernel<*": "the engine's lanes over edges: kInFlight = 8 edges' logits per lane "
    "(kV heads each, 128-bit), the running (max, sum) of kV heads and the butterfly merge: 70-122 registers",
    "sddmm.cu:SddmmKernel<*": "the engine: kInFlight = 8 (4 with two gathered operands) edges' rows per "
    "lane in registers before the first is used, the walked row's operand and the mask rows: 80-255 registers",
    "dmpnn.cu:Dmpnn*Kernel<*": "the engine: the node's sum in registers while kInFlight edges' reverse rows and rev "
    "entries (and their validity) are loaded before any store, the own block beside them: 86-194 registers",
    "hg_basis.cu:Hg*Kernel<*": "the engine: a pass's 8 output blocks (forward) or 2 edges' 8 G blocks each "
    "(backward) in registers, kV per lane each, beside the gathered rows and the staged indices: 93-253 registers",
    "gat.cu:GatFwdKernel<*": "the engine: kInFlight = 8 edges' gathered rows (128-bit per lane) and scores in "
    "registers before the first is used, the staged indices, the head's running (max, sum) and the accumulators: "
    "89-168 registers (the Philox dropout mask and float64 the most)",
    "gat_backward.cu:GatBwd*EngineKernel<*": "the engine: the row's own operand (G_i or x_j) and kInFlight = 8 edges' "
    "gathered rows and scores (the destination's s_dst, lse and delta in the reverse walk) in registers before the "
    "first is used, and the sums: 90-207 registers",
    "gatv2.cu:*EngineKernel<*": "the engine on head tiles (ffi/cuda/head_walk.cuh): 4-8 edges' gathered rows "
    "(128-bit per lane; x_src, or x_dst and G, and edge_feat) in registers before the first is used, the row's own "
    "operands and the lane's attention weights, the head's running (max, sum) or the gradient sums: 75-246 "
    "registers (half features with edge_feat and the Philox dropout mask the most)",
    "mha_simple.cu:*EngineKernel<*": "the engine on head tiles (ffi/cuda/head_walk.cuh): 4 edges' key and value (or "
    "query and G) rows and edge_feat rows (128-bit per lane) in registers before the first is used, the row's own "
    "operands, the head's running (max, sum) or the gradient sums: 72-255 registers (half features with edge_feat "
    "the most)",
    "update_efeat.cu:Efeat*Kernel<*": "kInFlight edges (4 when summing parts) x every part's 128-bit row loaded "
    "before the first store: 56-135 registers",
    "message_passing.cu:PoolBwdKernel<*": "kInFlight rows of ct in registers before the stores: 64-80 registers",
    "attention*.cu:*FwdKernel<double, *": "float64 online softmax: the kVec=4 accumulators, the softmax state and "
    "the float64 exp take 2 registers per value (78-86 on sm_90, 56-64 on sm_80); float32/half run at >= 50%",
    "mha_simple.cu:BwdSrcKernel<double, *, kEdge>": "float64 with edge features: 2 x kVec float64 "
    "accumulators (grad_k, grad_v) and the edge-feature row: 69 registers on sm_90 (62 on sm_80)",
    "gatv2.cu:BwdDstKernel<double, *": "float64: 2 x kVec float64 accumulators (grad_xd, grad_a) besides "
    "the per-edge logit and dot over C: 72-80 registers",
    "gatv2.cu:Bwd*Kernel<*, kEdge>": "edge features: a third row per edge, the pre-activation recomputed "
    "per element (and grad_ef written by BwdDst): 70-72 registers",
    "gatv2.cu:Bwd*Kernel<*, kDrop, !kEdge>": "attention dropout: the Philox-4x32-10 mask computed per edge beside "
    "the logit, the dot over C and the kVec accumulators: 65-72 registers on sm_90; the kernels without dropout "
    "are unchanged",
    "dimenet.cu:Dimenet*Kernel<*": "one thread per edge holds a whole triplet (directions, 7 spherical harmonics "
    "and their derivatives, angle gradients): 72-255 registers; the stack frame is its n_mid scratch, not spills",
}


@dataclass(frozen=True)
class Sm:
    """Per-SM limits of one GPU generation (defaults: H100, compute capability 9.0)."""

    registers: int = 65536
    warps: int = 64
    blocks: int = 32
    shared: int = 228 * 1024
    shared_reserved: int = 1024  # by the system, per block
    shared_unit: int = 128  # shared memory is allocated per block in units of this many bytes
    register_unit: int = 256  # registers are allocated per warp in units of this many
    max_registers: int = 255  # per thread
    warp_size: int = 32


H100 = Sm()


class Occupancy(NamedTuple):
    fraction: float  # resident warps / the SM's maximum
    blocks: int  # resident blocks per SM
    limiter: str  # what bounds the blocks: "threads", "blocks", "registers" or "shared memory"


def occupancy(registers: int, threads: int, shared: int = 0, sm: Sm = H100) -> Occupancy:
    """Theoretical occupancy of a kernel using ``registers`` per thread and ``shared`` bytes of shared
    memory (static + dynamic) per block of ``threads`` threads, as CUDA's occupancy calculator has it.

    Resident blocks per SM are bounded by the SM's warps, its block slots, its register file (a
    warp's registers rounded up to ``register_unit``) and its shared memory (a block's bytes plus the
    reserved 1 KB, rounded up to ``shared_unit``); assumes the full shared-memory carveout.

    >>> occupancy(64, 256)
    Occupancy(fraction=0.5, blocks=4, limiter='registers')
    >>> occupancy(32, 256, shared=48 * 1024).limiter
    'shared memory'
    """
    warps = math.ceil(threads / sm.warp_size)
    per_warp = math.ceil(registers * sm.warp_size / sm.register_unit) * sm.register_unit
    per_block = math.ceil((shared + sm.shared_reserved) / sm.shared_unit) * sm.shared_unit
    limits = {"threads": sm.warps // warps, "blocks": sm.blocks,
              "registers": sm.registers // per_warp // warps if registers <= sm.max_registers else 0,
              "shared memory": sm.shared // per_block}
    limiter = min(limits, key=limits.get)  # the first of equals: "threads" when nothing else binds
    return Occupancy(limits[limiter] * warps / sm.warps, limits[limiter], limiter)


class Entry(NamedTuple):
    """ptxas's figures for one kernel on one architecture (bytes, except ``registers``)."""

    mangled: str
    arch: str
    registers: int
    stack: int
    spill_stores: int
    spill_loads: int
    shared: int


_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\d+a?)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> list[Entry]:
    """The kernels (entry functions) in ptxas's verbose output (``-Xptxas -v``).

    >>> parse_ptxas('''ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
    ... ptxas info    : Function properties for _Z1kPf
    ...     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
    ... ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]''')
    [Entry(mangled='_Z1kPf', arch='sm_90', registers=40, stack=8, spill_stores=4, spill_loads=4, shared=1024)]
    """
    entries, current = [], None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = {"mangled": m[1], "arch": m[2], "stack": 0, "spill_stores": 0, "spill_loads": 0}
        elif current is None:
            continue
        elif m := _FRAME.search(line):
            current.update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif m := _USED.search(line):
            smem = _SMEM.search(line)
            entries.append(Entry(registers=int(m[1]), shared=int(smem[1]) if smem else 0, **current))
            current = None
    return entries


def demangle(names: list[str]) -> list[str]:
    """C++ names of mangled symbols, through cu++filt or c++filt (one process for all)."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None:
        raise SystemExit("gpu_resources: neither cu++filt nor c++filt is on PATH")
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True).stdout
    return out.splitlines()[:len(names)]


def read_enums(paths) -> dict[tuple[str, int], str]:
    """``(enum name, value) -> enumerator`` for the C++ enums in ``paths``, to name template arguments.

    >>> p = Path(tempfile.mkdtemp()) / "e.h"; _ = p.write_text("enum class Op : int { kCopy = 0, kAdd };")
    >>> read_enums([p])
    {('Op', 0): 'kCopy', ('Op', 1): 'kAdd'}
    """
    enums = {}
    for path in paths:
        for name, body in re.findall(r"enum\s+(?:class\s+)?(\w+)\s*(?::\s*[\w:]+\s*)?\{([^}]*)\}", path.read_text()):
            value = -1
            for item, explicit in re.findall(r"(\w+)\s*(?:=\s*(-?\d+))?", body):
                value = int(explicit) if explicit else value + 1
                enums[(name, value)] = item
    return enums


def read_template_params(source: str) -> dict[str, list[str]]:
    """``kernel -> template parameter declarations`` of the ``__global__`` templates in ``source``.

    >>> read_template_params("template <typename T, bool kEdge>\\n__global__ void K(T* x) {}")
    {'K': ['typename T', 'bool kEdge']}
    """
    bounds = r"(?:__launch_bounds__\([^)]*\)\s*)?"
    found = re.findall(rf"template\s*<([^<>]*)>\s*__global__\s+{bounds}void\s+{bounds}(\w+)", source)
    return {name: [p.strip() for p in params.split(",")] for params, name in found}


def split_top(args: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(args):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
    return parts + [args[start:].strip()]


def shorten(demangled: str, enums=None, params=None) -> str:
    """A readable kernel name: no return type, namespaces or parameter list; enum template arguments
    by name (from ``read_enums``), ``bool`` ones as ``kName`` / ``!kName`` (from ``read_template_params``).

    >>> shorten("void jgo::(anonymous namespace)::K<float, (jgo::Op)1, true, false>(float*)",
    ...         {("Op", 1): "kAdd"}, {"K": ["typename T", "Op op", "bool kEdge", "bool kByPosition = false"]})
    'K<float, kAdd, kEdge, !kByPosition>'
    """
    text = re.sub(r"^void ", "", demangled).replace("(anonymous namespace)::", "")
    name = re.match(r"(?:\w+::)*(\w+)", text)
    rest = text[name.end():]
    if not rest.startswith("<"):
        return name[1]
    depth = 0
    for end, c in enumerate(rest):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if depth == 0:
            break
    declared = (params or {}).get(name[1], [])
    args = []
    for i, arg in enumerate(split_top(rest[1:end])):
        if m := re.fullmatch(r"\((?:\w+::)*(\w+)\)(-?\d+)", arg):
            arg = (enums or {}).get((m[1], int(m[2])), arg)
        elif arg in ("true", "false") and i < len(declared) and declared[i].startswith("bool "):
            arg = ("" if arg == "true" else "!") + declared[i].split("=")[0].split()[-1]
        args.append(arg)
    return f"{name[1]}<{', '.join(args)}>"


def block_size(ffi: Path = FFI) -> int:
    """Threads per block of every launch: ``kBlock`` in ffi/cuda/launch.cuh."""
    return int(re.search(r"constexpr\s+int\s+kBlock\s*=\s*(\d+)", (ffi / "cuda" / "launch.cuh").read_text())[1])


def dynamic_shared(name: str, block: int) -> int:
    """Dynamic shared memory of a kernel launch (bytes): the gno kernels' at ``GNO_SHAPE``, else 0.

    >>> dynamic_shared("GnoFwdKernel<float, int, kWeight, !kDiag>", 256)  # 4 * (64 + 130 + 32 + 256)
    1928
    """
    m = GNO_KERNEL.match(name)
    if not m:
        return 0
    hidden, features = GNO_SHAPE["hidden"], GNO_SHAPE["features"]
    return ELEMENT_BYTES[m[2]] * (hidden + 2 * (hidden + 1) + features + block)


def nvcc_command(source: Path, output: Path, include: str, ffi: Path = FFI, nvcc: str = "nvcc") -> list[str]:
    """Device code only, for ``ARCHS`` from the plugin's one PTX (``PTX``), with ptxas's verbose report; otherwise
    the plugin's flags (a Release build)."""
    codes = [f"--generate-code=arch=compute_{PTX},code=[{','.join(ARCHS)}]"]
    return [nvcc, "-fatbin", *codes, "-std=c++17", "-O3", "-DNDEBUG", "-Xptxas", "-v", f"-I{ffi}",
            f"-I{ffi / 'common'}", "-isystem", include, "-DJGO_WITH_CUDA", str(source), "-o", str(output)]


def compile_all(sources: list[Path], jobs: int = 2, ffi: Path = FFI, nvcc: str = "nvcc") -> dict[Path, str]:
    """ptxas's report per source file, at most ``jobs`` compilers at once (largest files first)."""
    include = str(XLA_FFI)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool:
        def run(source):
            cmd = nvcc_command(source, Path(tmp) / f"{source.stem}.fatbin", include, ffi, nvcc)
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"gpu_resources: {shlex.join(cmd)} failed:\n{done.stdout}{done.stderr}")
            return done.stdout + done.stderr

        ordered = sorted(sources, key=lambda p: -p.stat().st_size)
        return dict(zip(ordered, pool.map(run, ordered)))


def read_reports(sources: list[Path], directory: Path) -> dict[Path, str]:
    """ptxas's report per source file from ``directory``, as ``tools/ptxas_reports.py`` kept them during the
    plugin's build (``NAME.ptxas`` for ``ffi/cuda/NAME.cu``); every source must have one."""
    missing = [s.name for s in sources if not (directory / f"{s.stem}.ptxas").is_file()]
    if missing:
        raise SystemExit(f"gpu_resources: no ptxas report in {directory} for {', '.join(missing)} "
                         "(build the plugin with tools/ptxas_reports.py as its CUDA compiler launcher)")
    return {s: (directory / f"{s.stem}.ptxas").read_text() for s in sources}


@dataclass
class Kernel:
    """One kernel instantiation: ptxas's figures per architecture and its H100 occupancy."""

    file: str
    name: str
    by_arch: dict[str, Entry]
    dynamic: int
    occupancy: Occupancy
    reason: str | None

    def spills(self) -> bool:
        return any(e.spill_stores or e.spill_loads for e in self.by_arch.values())


def reason_for(file: str, name: str) -> str | None:
    """The justification in ``REASONS`` whose pattern matches ``name`` or ``file:name``."""
    return next((why for pat, why in REASONS.items()
                 if fnmatch.fnmatchcase(f"{file}:{name}", pat) or fnmatch.fnmatchcase(name, pat)), None)


def collect(reports: dict[Path, str], block: int, ffi: Path = FFI) -> list[Kernel]:
    """Kernels of every report, by file and name, with the H100 occupancy from the sm_90 figures."""
    headers = sorted((ffi / "cuda").glob("*.cuh"))  # kernels templated there (the engine's) are compiled in many files
    enums = read_enums(sorted((ffi / "common" / "jgo").glob("*.h")) + headers + sorted(reports))
    shared_params = read_template_params("".join(h.read_text() for h in headers))
    kernels = []
    for source, text in sorted(reports.items()):
        entries = parse_ptxas(text)
        params = {**shared_params, **read_template_params(source.read_text())}
        names = dict(zip([e.mangled for e in entries], demangle([e.mangled for e in entries])))
        grouped: dict[str, dict[str, Entry]] = {}
        for e in entries:
            grouped.setdefault(shorten(names[e.mangled], enums, params), {})[e.arch] = e
        for name, by_arch in sorted(grouped.items()):
            h100, dynamic = by_arch["sm_90"], dynamic_shared(name, block)
            occ = occupancy(h100.registers, block, h100.shared + dynamic)
            reason = reason_for(source.name, name) if occ.fraction < MIN_OCCUPANCY else None
            kernels.append(Kernel(source.name, name, by_arch, dynamic, occ, reason))
    return kernels


def _pair(values, sep="/") -> str:
    values = [str(v) for v in values]
    return values[0] if len(set(values)) == 1 else sep.join(values)


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    def line(cells):
        return "| " + " | ".join(c.rjust(w) if i in right else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    rule = "|" + "|".join("-" * (w + 1) + (":" if i in right else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *map(line, rows)]) + "\n"


def _note(k: Kernel) -> str:
    notes = ["SPILLS"] if k.spills() else []
    if k.occupancy.fraction < MIN_OCCUPANCY:
        notes.append(f"reason {list(REASONS.values()).index(k.reason) + 1}" if k.reason else "NO REASON")
    return ", ".join(notes)


def kernel_table(kernels: list[Kernel]) -> str:
    """One row per instantiation; figures that differ between the architectures read ``sm_80/sm_90``
    (spills: ``sm_80, sm_90``)."""
    header = ["kernel", "regs", "stack B", "spill st/ld B", "smem B", "dyn smem B", "H100 occ.", "limit", "note"]
    rows = []
    for k in kernels:
        es = [k.by_arch[a] for a in ARCHS]
        rows.append([k.name, _pair(e.registers for e in es), _pair(e.stack for e in es),
                     _pair((f"{e.spill_stores}/{e.spill_loads}" for e in es), ", "), _pair(e.shared for e in es),
                     str(k.dynamic), f"{k.occupancy.fraction:.1%}", k.occupancy.limiter,
                     _note(k)])
    return _table(header, rows, right={1, 2, 4, 5, 6})


def summary_table(kernels: list[Kernel]) -> str:
    """One row per kernel template: instantiations, register range, lowest occupancy, spills."""
    groups: dict[tuple[str, str], list[Kernel]] = {}
    for k in kernels:
        groups.setdefault((k.file, k.name.split("<")[0]), []).append(k)
    rows = []
    for (file, base), ks in groups.items():
        regs = [e.registers for k in ks for e in k.by_arch.values()]
        low = min(k.occupancy.fraction for k in ks)
        rows.append([file, base, str(len(ks)), f"{min(regs)}-{max(regs)}" if min(regs) < max(regs) else str(regs[0]),
                     f"{low:.1%}", str(sum(k.spills() for k in ks)), str(sum(k.occupancy.fraction < MIN_OCCUPANCY
                                                                          for k in ks))])
    header = ["file", "kernel", "instantiations", "regs (sm_80, sm_90)", "min H100 occ.", "spilling", "< 50%"]
    return _table(header, rows, right={2, 3, 4, 5, 6})


def failures(kernels: list[Kernel]) -> list[str]:
    """What ``--check`` rejects: spills, and occupancy below MIN_OCCUPANCY without a reason."""
    return [f"{k.file}: {k.name}: " + ("spills" if k.spills() else f"occupancy {k.occupancy.fraction:.1%}")
            for k in kernels if k.spills() or (k.occupancy.fraction < MIN_OCCUPANCY and not k.reason)]


def render(kernels: list[Kernel], block: int, preamble: str, details: bool) -> str:
    """The report: a preamble, the summary, the reasons, then a table per file (folded when ``details``)."""
    shape = ", ".join(f"{k}={v}" for k, v in GNO_SHAPE.items())
    text = (f"{preamble}\n\nptxas's figures per kernel instantiation (`-Xptxas -v`); a value that differs between "
            f"sm_80 and sm_90 reads `sm_80/sm_90` (spill stores/loads: `sm_80, sm_90`). Occupancy: theoretical, on "
            f"H100 (sm_90 registers), at {block} threads per block (`kBlock`), with the full shared-memory carveout; "
            f"the gno kernels' dynamic shared memory is taken at {shape}. `limit`: what bounds the resident blocks "
            f"per SM.\n\n"
            f"{summary_table(kernels)}\n")
    text += "Below 50% occupancy, and why (`REASONS`, cited in the tables' notes; kernels matched):\n\n"
    for i, (pattern, why) in enumerate(REASONS.items(), 1):
        text += f"{i}. `{pattern}` ({sum(k.reason == why for k in kernels)}): {why}\n"
    text += "\n"
    for file in sorted({k.file for k in kernels}):
        ks = [k for k in kernels if k.file == file]
        table = kernel_table(ks)
        text += (f"<details><summary>{file} ({len(ks)} kernels)</summary>\n\n{table}\n</details>\n\n" if details
                 else f"{file} ({len(ks)} kernels)\n\n{table}\n")
    return text.rstrip() + "\n"


def write_section(path: Path, body: str) -> None:
    """Replaces the text between ``BEGIN`` and ``END`` in ``path`` (appends it the first time)."""
    replace_section(path, BEGIN, END, body)


def nvcc_version(nvcc: str = "nvcc") -> str:
    """E.g. ``release 13.0, V13.0.88``."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"release .*", out)[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_resources", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 on spills or unexplained occupancy < 50%%")
    parser.add_argument("--markdown", metavar="FILE", help="write the table into FILE (e.g. BENCHMARKS.md)")
    parser.add_argument("--jobs", type=int, default=2, help="compilers run at once (default 2)")
    parser.add_argument("--nvcc", default="nvcc", help="the nvcc to use (default: nvcc on PATH)")
    parser.add_argument("--ffi", type=Path, default=FFI, help="the sources: a copy of ffi/ to try changes on")
    parser.add_argument("--reports", type=Path, metavar="DIR",
                        help="read ptxas's reports kept by the plugin's build (tools/ptxas_reports.py), "
                             "not compiling")
    args = parser.parse_args(argv)

    sources = sorted((args.ffi / "cuda").glob("*.cu"))
    if args.reports:
        reports = read_reports(sources, args.reports)
        timing = f"read the plugin build's ptxas reports of {len(sources)} files from {args.reports}"
    else:
        started = time.perf_counter()
        reports = compile_all(sources, args.jobs, args.ffi, args.nvcc)
        timing = (f"compiled {len(sources)} files for {', '.join(ARCHS)} in {time.perf_counter() - started:.1f} s "
                  f"({args.jobs} jobs)")
    block = block_size(args.ffi)
    kernels = collect(reports, block, args.ffi)
    command = shlex.join(["python", "-m", "benchmarks.gpu_resources", *(sys.argv[1:] if argv is None else argv)])
    print(render(kernels, block, f"{len(kernels)} kernels; {timing}; nvcc {nvcc_version(args.nvcc)}", False))
    if args.markdown:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        preamble = (f"## GPU resource budget (static, ptxas), {stamp}\n\nCommand: `{command}`;"
                    f" nvcc {nvcc_version(args.nvcc)}; {timing}.")
        write_section(Path(args.markdown), render(kernels, block, preamble, True))
    bad = failures(kernels)
    for line in bad:
        print(f"FAIL {line}")
    print(timing)
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
