"""SASS cost cards: per kernel instantiation of ``ffi/cuda``, what its loops issue on sm_90.

A card holds the kernel's ptxas figures (registers, stack, theoretical H100 occupancy, as
``benchmarks.gpu_resources`` computes them), the statistics of every region of its SASS
(:mod:`.sass`: instructions, global load and store widths, shared and local memory, 64-bit divisions, the
loads in flight before one is consumed and the waits per pass) and its *gather loop*: the loop region with
the most global-load bytes per pass. ``weights`` give the model, per source line and kind of access (load,
store, shared), the instructions issued and the load latencies waited for per traced warp-level access.

Engine kernels declare themselves to the check with a marker comment on a line of their own, at most
ten lines above the kernel's ``__global__`` line (above its ``template`` line, say)::

    // gpu-model: engine mlp>=8
    template <typename T, typename I>
    __global__ void SpmmEngineKernel(...)

:func:`engine_failures` then fails every instantiation whose gather loop has no 128-bit global load
(``LDG.E.128``) or keeps fewer global loads in flight than the declared floor.

>>> declarations("// gpu-model: engine mlp>=8\\ntemplate <typename T>\\n__global__ void K(const T* x) {}")
{'K': 8}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import gpu_resources
from . import sass

MARKER = re.compile(r"^\s*//\s*gpu-model:\s*engine\s+mlp\s*>=\s*(\d+)\s*$")
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s*)?void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)")
KINDS = ("load", "store", "shared")


def declarations(source: str) -> dict[str, int]:
    """``kernel -> MLP floor`` of the engine markers in a source file's text."""
    lines, found = source.splitlines(), {}
    for i, line in enumerate(lines):
        if m := MARKER.match(line):
            for j in range(i + 1, min(i + 11, len(lines))):
                if k := _GLOBAL.search(lines[j]):
                    found[k[1]] = int(m[1])
                    break
            else:
                raise ValueError(f"line {i + 1}: an engine marker with no __global__ kernel in the 10 lines after it")
    return found


def kind_of(ins: sass.Instruction) -> str | None:
    """``load``, ``store`` (global; atomics too) or ``shared`` for a memory instruction the trace sees."""
    if ins.base in sass.GLOBAL_LOADS:
        return "load"
    if ins.base in sass.GLOBAL_STORES:
        return "store"
    if ins.base in ("LDS", "STS", "ATOMS", "LDSM"):
        return "shared"
    return None


@dataclass
class Card:
    """The cost card of one kernel instantiation."""

    file: str
    name: str
    raw_name: str  # the name with enum and bool template arguments as the demangler gives them
    mangled: str
    registers: int
    stack: int
    spills: int
    static_shared: int  # bytes of static shared memory (ptxas)
    occupancy: gpu_resources.Occupancy
    regions: list[sass.RegionStats]
    engine_floor: int | None = None
    weights: dict[tuple[str, int, str], tuple[float, float]] = field(default_factory=dict, repr=False)
    mean_weight: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)

    @property
    def gather(self) -> sass.RegionStats:
        """The loop region with the most global-load bytes per pass (the whole rest when there is no loop)."""
        loops = [r for r in self.regions if r.loop and r.global_loads]
        return max(loops, key=lambda r: (r.load_bytes, r.instructions)) if loops else self.regions[0]

    @property
    def div64(self) -> int:
        return sum(r.div64 for r in self.regions)

    @property
    def local(self) -> int:
        return sum(r.local for r in self.regions)

    def weight(self, file: str, line: int, kind: str) -> tuple[float, float]:
        """``(instructions issued, load latencies waited)`` per warp-level access of this kind at this source
        line: the mean over the line's SASS instructions of that kind, else over the kernel's."""
        return self.weights.get((Path(file).name, line, kind)) or self.mean_weight.get(kind) or (1.0, 0.0)


def _weights(function: sass.Function):
    """Per SASS memory instruction: its region's instructions per memory instruction, and for a global load
    the waits of its region charged to its source line per load at that line; averaged per (file name, line,
    kind) and per kind."""
    per_line, per_kind = {}, {}
    for region in function.regions():
        stats = sass.region_stats(region)
        memory = [i for i in region.instructions if kind_of(i)]
        for ins in memory:
            kind = kind_of(ins)
            where = (ins.file, ins.line)
            chain = stats.line_waits.get(where, 0) / stats.lines[where] if kind == "load" else 0.0
            w = (stats.instructions / len(memory), chain)
            per_line.setdefault((Path(ins.file).name, ins.line, kind), []).append(w)
            per_kind.setdefault(kind, []).append(w)

    def mean(ws):
        return (sum(w[0] for w in ws) / len(ws), sum(w[1] for w in ws) / len(ws))
    return {k: mean(v) for k, v in per_line.items()}, {k: mean(v) for k, v in per_kind.items()}


def build_cards(compiled: list[sass.Compiled], ffi: Path, block: int | None = None) -> list[Card]:
    """The cards of every kernel in the compiled files (sm_90)."""
    block = block or gpu_resources.block_size(ffi)
    enums = gpu_resources.read_enums(sorted((ffi / "common" / "jgo").glob("*.h")) + [c.source for c in compiled])
    cards = []
    for c in compiled:
        text = c.source.read_text()
        params, engines = gpu_resources.read_template_params(text), declarations(text)
        functions = sass.parse(sass.disassemble(c.cubin))
        entries = {e.mangled: e for e in gpu_resources.parse_ptxas(c.ptxas) if e.arch == sass.ARCH}
        names = dict(zip(entries, gpu_resources.demangle(list(entries)))) if entries else {}
        for f in functions:
            if f.mangled not in entries:
                continue  # a device subroutine, not a kernel
            e = entries[f.mangled]
            name = gpu_resources.shorten(names[f.mangled], enums, params)
            raw = gpu_resources.shorten(names[f.mangled])
            occ = gpu_resources.occupancy(e.registers, block, e.shared + gpu_resources.dynamic_shared(name, block))
            card = Card(c.source.name, name, raw, f.mangled, e.registers, e.stack, e.spill_stores + e.spill_loads, e.shared, occ,
                        [sass.region_stats(r) for r in f.regions()], engines.get(name.split("<")[0]))
            card.weights, card.mean_weight = _weights(f)
            cards.append(card)
    return sorted(cards, key=lambda k: (k.file, k.name))


def engine_failures(cards: list[Card]) -> list[str]:
    """Engine kernels whose gather loop lost its 128-bit loads or keeps fewer loads in flight than declared."""
    bad = []
    for k in cards:
        if k.engine_floor is None:
            continue
        g = k.gather
        if not g.loop or not g.load_bits.get(128):
            bad.append(f"{k.file}: {k.name}: no 128-bit global load in its gather loop "
                       f"(loads per pass: {_widths(g.load_bits) or 'none'})")
        if g.mlp < k.engine_floor:
            bad.append(f"{k.file}: {k.name}: {g.mlp} global loads in flight in its gather loop, "
                       f"under the declared floor of {k.engine_floor}")
    return bad


def _widths(bits: dict[int, int]) -> str:
    return " ".join(f"{n}x{b}" for b, n in sorted(bits.items(), reverse=True))


def card_row(k: Card) -> list[str]:
    g = k.gather
    per_elem = g.instructions / g.elements
    return [k.name, str(k.registers), f"{k.occupancy.fraction:.0%}", str(g.instructions), str(g.elements),
            f"{per_elem:.1f}", _widths(g.load_bits) or "-", _widths(g.store_bits) or "-", str(g.mlp), str(g.waits),
            str(k.div64), f"{k.local}/{k.stack}", "" if k.engine_floor is None else f"mlp>={k.engine_floor}"]


CARD_HEADER = ["kernel", "regs", "occ.", "instr/pass", "elem/pass", "instr/elem", "loads/pass (n x bits)",
               "stores/pass", "MLP", "waits/pass", "div64", "local ins/stack B", "engine"]


def summary_rows(cards: list[Card]) -> list[list[str]]:
    """Per kernel template: instantiations, and the range over them of the gather loop's figures."""
    groups: dict[tuple[str, str], list[Card]] = {}
    for k in cards:
        groups.setdefault((k.file, k.name.split("<")[0]), []).append(k)

    def span(values):
        lo, hi = min(values), max(values)
        return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
    rows = []
    for (file, base), ks in groups.items():
        gs = [k.gather for k in ks]
        widths = sorted({b for g in gs for b in g.load_bits}, reverse=True)
        rows.append([file, base, str(len(ks)), span([round(g.instructions / g.elements, 1) for g in gs]),
                     "/".join(map(str, widths)) or "-", span([g.mlp for g in gs]), span([g.waits for g in gs]),
                     span([k.div64 for k in ks]), span([k.local for k in ks]),
                     f"{min(k.occupancy.fraction for k in ks):.0%}",
                     "" if ks[0].engine_floor is None else f"mlp>={ks[0].engine_floor}"])
    return rows


SUMMARY_HEADER = ["file", "kernel", "inst.", "instr/elem", "load bits", "MLP", "waits/pass", "div64",
                  "local ins", "min occ.", "engine"]
