"""SASS cost cards: per kernel instantiation of ``ffi/cuda``, what its loops issue on sm_90.

A card holds the kernel's ptxas figures (registers, stack, theoretical H100 occupancy, as
``benchmarks.gpu_resources`` computes them), the statistics of every region of its SASS
(:mod:`.sass`: instructions, global load and store widths, shared and local memory, 64-bit divisions, the
loads in flight before one is consumed and the waits per pass) and its *gather loop*: the loop region with
the most global-load bytes per pass. For the model, :meth:`Card.issue` and :meth:`Card.waits` give, per source
line and kind of access (load, store, shared), the instructions, cycles and waits per traced warp-level access.

Engine kernels declare themselves to the check with a marker comment on a line of their own, at most
ten lines above the kernel's ``__global__`` line (above its ``template`` line, say), in a ``.cu`` file of
``ffi/cuda`` or in a ``.cuh`` header there::

    // gpu-model: engine mlp>=8
    template <typename T, typename I>
    __global__ void SpmmEngineKernel(...)

:func:`engine_failures` then fails every instantiation whose gather loop keeps fewer global loads in flight
than the declared floor, or, on its vector path, has no 128-bit global load (``LDG.E.128``). Every
instantiation is on the vector path unless the marker ends in ``vector-if COND``: ``kName``, a ``bool``
template parameter (the vector path where it is true), or ``kName>N``, an ``int`` one (where it exceeds N);
the other instantiations (a scalar tail for unaligned rows, say) are held to the MLP floor only.

>>> declarations("// gpu-model: engine mlp>=8\\ntemplate <typename T>\\n__global__ void K(const T* x) {}")
{'K': Engine(mlp=8, vector_if=None)}
>>> declarations("// gpu-model: engine mlp>=8 vector-if kV>1\\ntemplate <int kV>\\n__global__ void K() {}")
{'K': Engine(mlp=8, vector_if='kV>1')}
"""

from __future__ import annotations

import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import gpu_resources
from . import sass

MARKER = re.compile(r"^\s*//\s*gpu-model:\s*engine\s+mlp\s*>=\s*(\d+)(?:\s+vector-if\s+(\w+(?:>-?\d+)?))?\s*$")
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s*)?void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)")
KINDS = ("load", "store", "shared")


@dataclass(frozen=True)
class Engine:
    """An engine marker: the MLP floor, and where the 128-bit loads are due (None: every instantiation)."""

    mlp: int
    vector_if: str | None = None

    def vector(self, args: list[str], params: list[str]) -> bool:
        """Whether the instantiation with these template arguments (as :func:`gpu_resources.shorten` writes
        them; ``params`` the template's parameter declarations) is on the vector path."""
        if self.vector_if is None:
            return True
        name, _, bound = self.vector_if.partition(">")
        names = [p.split("=")[0].split()[-1] for p in params]  # "bool kX = false": kX
        if name not in names or len(args) != len(names):
            raise ValueError(f"vector-if {self.vector_if}: no template parameter {name} in {params}")
        arg = args[names.index(name)]
        if bound:
            return int(arg) > int(bound)
        if arg not in (name, "!" + name):
            raise ValueError(f"vector-if {self.vector_if}: {name} is not a bool template parameter ({arg})")
        return arg == name


def declarations(source: str) -> dict[str, Engine]:
    """``kernel -> Engine`` of the engine markers in a source file's text."""
    lines, found = source.splitlines(), {}
    for i, line in enumerate(lines):
        if m := MARKER.match(line):
            for j in range(i + 1, min(i + 11, len(lines))):
                if k := _GLOBAL.search(lines[j]):
                    found[k[1]] = Engine(int(m[1]), m[2])
                    break
            else:
                raise ValueError(f"line {i + 1}: an engine marker with no __global__ kernel in the 10 lines after it")
    return found


def _headers(ffi: Path) -> list[str]:
    return [p.read_text() for p in sorted((ffi / "cuda").glob("*.cuh"))]


def declares_engine(source: Path, ffi: Path) -> bool:
    """Whether a ``.cu`` file declares an engine kernel or names one declared in a header of ``ffi/cuda``."""
    text = source.read_text()
    names = {n for h in _headers(ffi) for n in declarations(h)}
    return bool(declarations(text)) or any(re.search(rf"\b{n}\b", text) for n in names)


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
    engine_vector: bool = True  # an engine kernel's instantiation on its vector path (128-bit loads due)
    region_of: dict[tuple[str, int, str], int] = field(default_factory=dict, repr=False)  # (file, line, kind)
    region_of_kind: dict[str, int] = field(default_factory=dict, repr=False)

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

    def region(self, file: str, line: int, kind: str) -> sass.RegionStats:
        """The region whose cost a traced access of this kind at this source line takes (:func:`_weights`):
        the line's steady-state region, else the kind's most frequent one, else the code in no loop."""
        key = (Path(file).name, line, kind)
        index = self.region_of.get(key, self.region_of_kind.get(kind, 0))
        return self.regions[index]

    def issue(self, file: str, line: int, kind: str) -> tuple[float, float]:
        """``(instructions, cycles)`` per warp-level access: its region's per memory instruction."""
        r = self.region(file, line, kind)
        memory = max(1, r.global_loads + r.global_stores + r.shared)
        return r.instructions / memory, r.cycles / memory

    def waits(self, latency) -> dict[tuple[str, int], float]:
        """Waits per load, per (file name, line): each wait of a region is charged to the slowest of the loads
        it waits out, ``latency((file name, line))`` deciding, and divided over that line's loads in it."""
        out: dict[tuple[str, int], float] = {}
        for (file, line, kind), index in self.region_of.items():
            if kind != "load":
                continue
            r = self.regions[index]
            full = next((w for w in r.lines if Path(w[0]).name == file and w[1] == line), None)
            if not full:
                continue
            charged = 0
            for group in r.wait_groups:
                names = [(Path(f).name, ln) for f, ln in group]
                if max(names, key=latency) == (file, line):
                    charged += 1
            out[(file, line)] = charged / r.lines[full]
        return out


def _weights(function: sass.Function, regions: list[sass.RegionStats]):
    """Per (file name, line, kind) of the memory instructions the trace sees: the index of the region that
    holds the most of that line's instructions (the steady state: a loop unrolled 4x holds a line's load 4
    times, its remainder once), and per kind its most frequent region.

    Where nvcc kept two copies of a loop, one for a special case of the kernel's arguments (a lane group of
    one, whose sums need no shuffles, so that its copy unrolls) and one for the rest, a line sits in both and
    only one runs: copies that cannot reach each other within a pass (:meth:`sass.Function.reaches`). The
    trace does not say which; the line takes the general copy, the one with the most code (its nested loops
    included) per instruction of that line, as a special case is the copy nvcc made cheaper."""
    best, per_kind, holders = {}, {}, {}
    for index, (region, stats) in enumerate(zip(function.regions(), regions)):
        counts = {}
        for ins in region.instructions:
            if kind := kind_of(ins):
                key = (Path(ins.file).name, ins.line, kind)
                counts[key] = counts.get(key, 0) + 1
        for key, n in counts.items():
            rank = (n, stats.loop is not None, stats.instructions)
            if key not in best or rank > best[key][0]:
                best[key] = (rank, index)
            if stats.loop:
                holders.setdefault(key, []).append((index, n))
            per_kind.setdefault(key[2], {}).setdefault(index, 0)
            per_kind[key[2]][index] += n
    chosen = {k: i for k, (_, i) in best.items()}
    for key, index in chosen.items():
        loop = regions[index].loop
        copies = [(i, n) for i, n in holders.get(key, []) if i == index or loop and _alternatives(
            function, loop, regions[i].loop)]
        if len(copies) > 1:
            chosen[key] = max(copies, key=lambda c: (len(function.span(*regions[c[0]].loop)) / c[1], -c[0]))[0]
    return chosen, {kind: max(by_region, key=by_region.get) for kind, by_region in per_kind.items()}


def _alternatives(function: sass.Function, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two loops are copies of which only one runs in a pass: neither reaches the other."""
    return not function.reaches(a, b[0]) and not function.reaches(b, a[0])


def build_cards(compiled: list[sass.Compiled], ffi: Path, block: int | None = None, engine: bool = False,
                jobs: int = 1) -> list[Card]:
    """The cards of every kernel in the compiled files (sm_90; ``engine``: of the engine kernels only), the files
    read in ``jobs`` processes."""
    block = block or gpu_resources.block_size(ffi)
    enums = gpu_resources.read_enums(sorted((ffi / "common" / "jgo").glob("*.h")) + [c.source for c in compiled])
    work = [(c, block, enums, _headers(ffi), engine) for c in compiled]
    if jobs > 1 and len(work) > 1:  # spawned: forking a process that runs JAX's threads may deadlock
        with ProcessPoolExecutor(min(jobs, len(work)), mp_context=multiprocessing.get_context("spawn")) as pool:
            per_file = list(pool.map(_file_cards, *zip(*work)))
    else:
        per_file = [_file_cards(*w) for w in work]
    return sorted((k for cards in per_file for k in cards), key=lambda k: (k.file, k.name))


def _file_cards(c: sass.Compiled, block: int, enums, headers: list[str], engine: bool) -> list[Card]:
    """The cards of one compiled file's kernels (only its engine kernels' with ``engine``)."""
    params, engines = {}, {}
    for text in [*headers, c.source.read_text()]:
        params.update(gpu_resources.read_template_params(text))
        engines.update(declarations(text))
    entries = {e.mangled: e for e in gpu_resources.parse_ptxas(c.ptxas) if e.arch == sass.ARCH}
    names = {}  # mangled -> (shortened name, demangled name, its template's declaration or None), of those to card
    for mangled, demangled in zip(entries, gpu_resources.demangle(list(entries)) if entries else []):
        name = gpu_resources.shorten(demangled, enums, params)
        declared = engines.get(name.split("<")[0])
        if declared is not None or not engine:
            names[mangled] = (name, demangled, declared)
    cards = []
    for f in sass.parse(sass.disassemble(c.cubin), keep=names.__contains__):  # kernels only, no subroutines
        e, (name, demangled, declared) = entries[f.mangled], names[f.mangled]
        occ = gpu_resources.occupancy(e.registers, block, e.shared + gpu_resources.dynamic_shared(name, block))
        regions = [sass.region_stats(r) for r in f.regions()]
        card = Card(c.source.name, name, gpu_resources.shorten(demangled), f.mangled, e.registers, e.stack,
                    e.spill_stores + e.spill_loads, e.shared, occ, regions, declared and declared.mlp,
                    not declared or declared.vector(template_args(name), params.get(name.split("<")[0], [])))
        card.region_of, card.region_of_kind = _weights(f, regions)
        cards.append(card)
    return cards


def engine_failures(cards: list[Card]) -> list[str]:
    """Engine kernels whose gather loop lost its 128-bit loads or keeps fewer loads in flight than declared."""
    bad = []
    for k in cards:
        if k.engine_floor is None:
            continue
        g = k.gather
        if k.engine_vector and (not g.loop or not g.load_bits.get(128)):
            bad.append(f"{k.file}: {k.name}: no 128-bit global load in its gather loop "
                       f"(loads per pass: {_widths(g.load_bits) or 'none'})")
        if g.mlp < k.engine_floor:
            bad.append(f"{k.file}: {k.name}: {g.mlp} global loads in flight in its gather loop, "
                       f"under the declared floor of {k.engine_floor}")
    return bad


def template_args(name: str) -> list[str]:
    """The template arguments of a shortened kernel name.

    >>> template_args("K<float, kAdd, !kVector, 4>")
    ['float', 'kAdd', '!kVector', '4']
    """
    return gpu_resources.split_top(name[name.index("<") + 1:-1]) if "<" in name else []


def _widths(bits: dict[int, int]) -> str:
    return " ".join(f"{n}x{b}" for b, n in sorted(bits.items(), reverse=True))


def _engine(k: Card) -> str:
    if k.engine_floor is None:
        return ""
    return f"mlp>={k.engine_floor}" + ("" if k.engine_vector else ", scalar path")


def card_row(k: Card) -> list[str]:
    g = k.gather
    per_elem = g.instructions / g.elements
    return [k.name, str(k.registers), f"{k.occupancy.fraction:.0%}", str(g.instructions), str(g.elements),
            f"{per_elem:.1f}", _widths(g.load_bits) or "-", _widths(g.store_bits) or "-", str(g.mlp), str(g.waits),
            str(k.div64), f"{k.local}/{k.stack}", _engine(k)]


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
                     _engine(ks[0]) + ("" if all(k.engine_vector for k in ks) else ", vector-if")])
    return rows


SUMMARY_HEADER = ["file", "kernel", "inst.", "instr/elem", "load bits", "MLP", "waits/pass", "div64",
                  "local ins", "min occ.", "engine"]
