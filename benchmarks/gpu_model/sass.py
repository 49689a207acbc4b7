"""SASS of the CUDA kernels for sm_90, without a GPU: compiled once per source state and cached, disassembled
with ``nvdisasm`` (the ``nvidia-cuda-nvdisasm`` wheel) or ``cuobjdump``, parsed into functions, instructions
(opcode, operands, source line) and loops.

A loop is the address range of a backward branch (``BRA`` to a label before it). The instructions of a
function fall into regions (:meth:`Function.regions`: each loop's body less its nested loops, and the code in
no loop); per region, :func:`region_stats` counts what one pass issues and simulates two passes of a loop to
find how many global loads are in flight before the first is consumed (``mlp``) and how many
times a pass waits for a load (``waits``: a load's latency is paid once per wait, all loads issued before
the consumed one being taken as returned).

>>> text = '''//--------------------- .text._Z1kPKfPf --------------------------
... _Z1kPKfPf:
... .L_x_0:
... 	//## File "/r/k.cu", line 4
...         /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
...         /*0010*/                   LDG.E.128 R8, desc[UR4][R2.64+0x10] ;
...         /*0020*/                   FADD R12, R4, R8 ;
...         /*0030*/              @P0 BRA `(.L_x_0) ;
...         /*0040*/                   EXIT ;'''
>>> (f,) = parse(text)
>>> rest, loop = f.regions()
>>> s = region_stats(loop)
>>> s.loop, s.instructions, s.global_loads, s.load_bits, s.mlp, s.waits
((0, 48), 4, 2, {128: 2}, 2, 1)
"""

from __future__ import annotations

import bisect
import hashlib
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .. import gpu_resources

ARCH = "sm_90"

# ---------------------------------------------------------------------------------------------------------
# Compiling (cached)


def nvcc_command(source: Path, cubin: Path, ffi: Path, nvcc: str = "nvcc") -> list[str]:
    """The plugin's device compile of ``source`` for sm_90 only, as a cubin with line information
    (``-lineinfo`` changes no generated instruction) and ptxas's report."""
    flags = gpu_resources.nvcc_command(source, cubin, str(gpu_resources.XLA_FFI), ffi, nvcc)
    codes = [f for f in flags if f.startswith("--generate-code")]
    flags = [f for f in flags if f not in codes and f != "-fatbin"]
    return [flags[0], "-cubin", f"--generate-code=arch=compute_{gpu_resources.PTX},code={ARCH}", "-lineinfo",
            *flags[1:]]


def source_key(ffi: Path, source: Path, nvcc: str = "nvcc") -> str:
    """A hash of ``source``, every header under ``ffi`` (the ``.h``/``.cuh`` files a kernel can include), the
    flags and the compiler version: the cache key of its cubin."""
    h = hashlib.sha256()
    h.update(" ".join(nvcc_command(Path(source.name), Path("out"), Path("ffi"), "nvcc")).encode())
    h.update(gpu_resources.nvcc_version(nvcc).encode())
    for path in [source, *sorted(p for p in ffi.rglob("*") if p.suffix in (".h", ".cuh"))]:
        h.update(str(path.relative_to(ffi)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Compiled:
    """One source file's cubin and ptxas report."""

    source: Path
    cubin: Path
    ptxas: str


def compile_sources(ffi: Path, cache: Path, jobs: int = 2, nvcc: str = "nvcc", log=print,
                    select=lambda source: True) -> list[Compiled]:
    """Every ``ffi/cuda/*.cu`` (those ``select`` keeps) compiled for sm_90 into ``cache`` (reused while the
    sources, headers, flags and compiler are unchanged), at most ``jobs`` compilers at once."""
    sources = [s for s in sorted((ffi / "cuda").glob("*.cu")) if select(s)]
    cache.mkdir(parents=True, exist_ok=True)

    def build(source):
        stem = cache / f"{source.stem}-{source_key(ffi, source, nvcc)}"
        cubin, report = stem.with_suffix(".cubin"), stem.with_suffix(".ptxas")
        if not (cubin.is_file() and report.is_file()):
            log(f"nvcc: {source.name} for {ARCH}")
            cmd = nvcc_command(source, cubin.with_suffix(".tmp"), ffi, nvcc)
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"gpu_model: {' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
            report.write_text(done.stdout + done.stderr)
            cubin.with_suffix(".tmp").rename(cubin)
        return Compiled(source, cubin, report.read_text())

    ordered = sorted(sources, key=lambda p: -p.stat().st_size)
    with ThreadPoolExecutor(jobs) as pool:
        done = dict(zip(ordered, pool.map(build, ordered)))
    return [done[s] for s in sources]


def prebuilt_sources(ffi: Path, directory: Path, select=lambda source: True) -> list[Compiled]:
    """Every ``ffi/cuda/*.cu`` (those ``select`` keeps) as the plugin's build compiled it: the sm_90 cubin and
    ptxas's report that ``tools/ptxas_reports.py`` kept in ``directory`` (``NAME.sm_90.cubin``,
    ``NAME.ptxas``). The plugin's flags without ``-lineinfo``: the same instructions, no source lines."""
    sources = [s for s in sorted((ffi / "cuda").glob("*.cu")) if select(s)]
    files = {s: (directory / f"{s.stem}.{ARCH}.cubin", directory / f"{s.stem}.ptxas") for s in sources}
    if missing := [s.name for s, pair in files.items() if not all(p.is_file() for p in pair)]:
        raise SystemExit(f"gpu_model: no {ARCH} cubin or ptxas report in {directory} for {', '.join(missing)} "
                         "(build the plugin with tools/ptxas_reports.py as its CUDA compiler launcher)")
    return [Compiled(s, cubin, report.read_text()) for s, (cubin, report) in files.items()]


def disassembler() -> list[str]:
    """``nvdisasm`` with line information (PATH, or the nvidia-cuda-nvdisasm wheel), else ``cuobjdump``."""
    candidates = [shutil.which("nvdisasm")]
    for base in map(Path, sys.path):
        candidates += [str(p) for p in base.glob("nvidia/cu*/bin/nvdisasm")]
    for c in candidates:
        if c and Path(c).is_file():
            return [c, "-c", "-gi"]
    if tool := shutil.which("cuobjdump"):
        return [tool, "-sass"]
    raise SystemExit("gpu_model: no nvdisasm or cuobjdump: pip install nvidia-cuda-nvdisasm")


def disassemble(cubin: Path) -> str:
    """The SASS text of a cubin (cached beside it while the cubin is older)."""
    out = cubin.with_suffix(".sass")
    if not out.is_file() or out.stat().st_mtime < cubin.stat().st_mtime:
        done = subprocess.run([*disassembler(), str(cubin)], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"gpu_model: disassembling {cubin} failed:\n{done.stderr}")
        out.write_text(done.stdout)
    return out.read_text()


# ---------------------------------------------------------------------------------------------------------
# Parsing

_FUNCTION = re.compile(r"^//-+ \.text\.(\S+) -+|^\s+Function : (\S+)")  # nvdisasm's, cuobjdump's
_LINE = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
_LABEL = re.compile(r"^(\.L_x_\d+):$")
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_REG = re.compile(r"\bR(\d+)(\.64)?\b")
_TARGET = re.compile(r"`\(([^)]+)\)|\b(0x[0-9a-f]+)\b")  # a label (nvdisasm), an address (cuobjdump)


_FACTS: dict[tuple[str, ...], tuple] = {}  # (predicate, opcode, *operands) -> Instruction._facts


@dataclass
class Instruction:
    address: int
    predicate: str
    opcode: str  # with modifiers, e.g. LDG.E.128.CONSTANT
    operands: list[str]
    file: str
    line: int

    @cached_property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    # What the analyses ask of an instruction many times over (every pass of every region), computed once per
    # instruction text: the many instantiations of one template repeat most of theirs (_FACTS).
    @cached_property
    def _facts(self) -> tuple[frozenset[int], frozenset[int], tuple[frozenset[int], frozenset[int]]]:
        key = (self.predicate, self.opcode, *self.operands)
        facts = _FACTS.get(key)
        if facts is None:
            p_read, p_written = predicates(self)
            facts = _FACTS[key] = (frozenset(read(self)), frozenset(written(self)),
                                   (frozenset(p_read), frozenset(p_written)))
        return facts

    @property
    def reads(self) -> frozenset[int]:
        return self._facts[0]

    @property
    def writes(self) -> frozenset[int]:
        return self._facts[1]

    @property
    def predicate_regs(self) -> tuple[frozenset[int], frozenset[int]]:
        return self._facts[2]

    def target(self) -> str | None:
        m = _TARGET.search(" ".join(self.operands))
        return (m[1] or m[2]) if m else None


@dataclass
class Region:
    """A loop body less its nested loops (``loop``: its address range), or the code in no loop (None)."""

    loop: tuple[int, int] | None
    instructions: list[Instruction]


@dataclass
class Function:
    mangled: str
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # label -> address

    def branch_target(self, ins: Instruction) -> int | None:
        """The address a branch (``BRA``, ``BRX``, ``JMP``) goes to, when it names one."""
        if ins.base not in ("BRA", "BRX", "JMP") or not (t := ins.target()):
            return None
        return self.labels.get(t, int(t, 16) if t.startswith("0x") else None)

    def loops(self) -> list[tuple[int, int]]:
        """``(first, last)`` address ranges of the backward branches' loops, innermost first (a branch to
        itself, the trap after the last EXIT, is none)."""
        found = set()
        for ins in self.instructions:
            to = self.branch_target(ins)
            if to is not None and to < ins.address:
                found.add((to, ins.address))
        return sorted(found, key=lambda r: (r[1] - r[0], r[0]))

    def reaches(self, loop: tuple[int, int], target: int) -> bool:
        """Whether control in ``loop`` (an address range) gets to ``target`` along forward edges only (the
        next instruction, unless an unpredicated branch, EXIT or RET comes first; a branch's target when it
        lies ahead): within one pass of every loop around both. Of two copies of a loop that nvcc made, the
        one run after the other (an unrolled loop's remainder) is reached from it; the copy of a special case,
        run instead of the other, is not.

        >>> ins = lambda a, op, *o, p="": Instruction(a, p, op, list(o), "", 0)
        >>> f = Function("k", [ins(0, "BRA", "`(.L_x_1)", p="@P0"), ins(16, "NOP"),
        ...                    ins(32, "BRA", "`(.L_x_0)", p="@P1"), ins(48, "BRA", "`(.L_x_2)"), ins(64, "NOP"),
        ...                    ins(80, "BRA", "`(.L_x_1)", p="@P1"), ins(96, "EXIT")],
        ...              {".L_x_0": 16, ".L_x_1": 64, ".L_x_2": 96})
        >>> f.loops(), f.reaches((16, 32), 64), f.reaches((64, 80), 16)  # two copies, one or the other
        ([(16, 32), (64, 80)], False, False)
        """
        position = self.position
        todo = [k for k, ins in enumerate(self.instructions) if loop[0] <= ins.address <= loop[1]]
        seen: set[int] = set()
        while todo:
            k = todo.pop()
            ins = self.instructions[k]
            if ins.address == target:
                return True
            if k in seen or ins.address > target:
                continue
            seen.add(k)
            to = self.branch_target(ins)
            if to is not None and to > ins.address and to in position:
                todo.append(position[to])
            ends = ins.base in ("BRA", "BRX", "JMP", "EXIT", "RET") and not ins.predicate
            if k + 1 < len(self.instructions) and not ends:
                todo.append(k + 1)
        return False

    @cached_property
    def position(self) -> dict[int, int]:
        """Address -> index in ``instructions``."""
        return {ins.address: k for k, ins in enumerate(self.instructions)}

    def regions(self) -> list[Region]:
        """The function cut into regions that each run as one: the code in no loop (``loop`` None), then every
        loop's body less the loops nested in it, outer loops first. Every instruction is in exactly one."""
        loops, owner = self.loops(), {}
        for loop in reversed(loops):  # outermost first: inner loops take their instructions over
            for ins in self.span(*loop):
                owner[ins.address] = loop
        regions = {loop: Region(loop, []) for loop in loops}
        rest = Region(None, [])
        for ins in self.instructions:
            (regions[owner[ins.address]] if ins.address in owner else rest).instructions.append(ins)
        return [rest, *(regions[loop] for loop in sorted(loops, key=lambda r: (r[0], -r[1])))]

    def span(self, first: int, last: int) -> list[Instruction]:
        """The instructions at addresses ``first`` to ``last`` (inclusive; the list is in address order)."""
        addresses = self.addresses
        return self.instructions[bisect.bisect_left(addresses, first):bisect.bisect_right(addresses, last)]

    @cached_property
    def addresses(self) -> list[int]:
        return [ins.address for ins in self.instructions]


def parse(text: str, keep=lambda mangled: True) -> list[Function]:
    """The functions of nvdisasm's (or cuobjdump's) SASS text (those whose mangled name ``keep`` accepts; the
    others' instructions are not parsed). An instruction's source line is the innermost of the ``//## File``
    lines before it (nvdisasm -gi prints the inlining chain innermost first)."""
    functions, current, where, chain = [], None, ("", 0), []
    for raw in text.splitlines():
        if m := _FUNCTION.match(raw):
            current = Function(m[1] or m[2])
            if keep(current.mangled):
                functions.append(current)
            else:
                current = None
            where, chain = ("", 0), []
        elif current is None:
            continue
        elif m := _LINE.match(raw):
            chain.append((m[1], int(m[2])))
        elif m := _INSTR.match(raw):
            if chain:
                where, chain = chain[0], []
            body = m[2].strip()
            predicate = ""
            if body.startswith("@"):
                predicate, _, body = body.partition(" ")
            opcode, _, rest = body.strip().partition(" ")
            operands = [o.strip() for o in _split_operands(rest)] if rest.strip() else []
            current.instructions.append(Instruction(int(m[1], 16), predicate, opcode, operands, *where))
        elif m := _LABEL.match(raw.strip()):  # a label names the instruction that follows it
            current.labels[m[1]] = _next_address(current)
    return functions


def _next_address(f: Function) -> int:
    return f.instructions[-1].address + 16 if f.instructions else 0


def _split_operands(rest: str) -> list[str]:
    if not ("[" in rest or "{" in rest or "(" in rest):
        return rest.split(",")
    parts, depth, start = [], 0, 0
    for i, c in enumerate(rest):
        depth += {"[": 1, "{": 1, "(": 1, "]": -1, "}": -1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(rest[start:i])
            start = i + 1
    return parts + [rest[start:]]


# ---------------------------------------------------------------------------------------------------------
# What an instruction does to memory and registers

_NO_DEST = {"STG", "STS", "STL", "ST", "RED", "BRA", "BRX", "JMP", "EXIT", "RET", "CALL", "BSSY", "BSYNC", "BAR",
            "WARPSYNC", "NOP", "MEMBAR", "FENCE", "ERRBAR", "CCTL", "DEPBAR", "YIELD", "STSM"}
_PAIR_OPS = re.compile(r"^(D[A-Z]+|F2F\.F64|I2F\.F64|F2I.*F64|.*\.64$)")
GLOBAL_LOADS = ("LDG",)
GLOBAL_STORES = ("STG", "RED", "ATOMG", "ATOM")


def access_bits(ins: Instruction) -> int:
    """The bits one lane moves in a load or store: .128/.64, .U8/.S8 (8), .U16/.S16 (16), else 32."""
    mods = ins.opcode.split(".")[1:]
    for m, bits in (("128", 128), ("64", 64), ("U16", 16), ("S16", 16), ("U8", 8), ("S8", 8)):
        if m in mods:
            return bits
    return 32


def registers(operand: str, pair: bool = False) -> set[int]:
    """The general registers an operand names (``R4.64`` and, for 64-bit operations, ``R4``: R4 and R5)."""
    regs = set()
    for m in _REG.finditer(operand):
        r = int(m[1])
        regs.add(r)
        if m[2] or pair:
            regs.add(r + 1)
    return regs


def _destinations(ins: Instruction) -> int:
    """How many leading operands an instruction writes: none (a store, a branch), two for a shuffle (its
    predicate, then its register: ``SHFL.BFLY PT, R22, R25, R18, R7``), else one."""
    return 0 if ins.base in _NO_DEST else 2 if ins.base == "SHFL" else 1


def written(ins: Instruction) -> set[int]:
    """Registers an instruction writes (its destination register, unless it has none).

    >>> written(Instruction(0, "", "SHFL.BFLY", ["PT", "R22", "R25", "R18", "R7"], "", 0))
    {22}
    """
    n = _destinations(ins)
    if not n or len(ins.operands) < n or ins.operands[n - 1].startswith(("P", "UP", "!P", "PT")):
        return set()
    dest = ins.operands[n - 1]
    if ins.base in ("LDG", "LDS", "LDL", "LD", "LDC", "ATOMG", "ATOM", "ATOMS", "LDSM"):
        first = re.findall(r"\bR(\d+)", dest)[:1]
        return {int(m) + k for m in first for k in range(max(1, access_bits(ins) // 32))}
    wide = "WIDE" in ins.opcode or bool(_PAIR_OPS.match(ins.opcode))
    return registers(dest, wide)


def read(ins: Instruction) -> set[int]:
    """Registers an instruction reads (every operand but the written ones)."""
    ops = ins.operands[_destinations(ins):] if written(ins) else ins.operands
    pair = bool(_PAIR_OPS.match(ins.opcode))
    regs = set()
    for o in ops:
        regs |= registers(o, pair and not o.startswith("["))
    return regs - {255}  # RZ is R255 in some dumps


def is_div64(ins: Instruction) -> bool:
    """A call of CUDA's 64-bit integer division or remainder subroutine."""
    return ins.base == "CALL" and bool(re.search(r"(div|rem)_[su]64", " ".join(ins.operands)))


# ---------------------------------------------------------------------------------------------------------
# Loop statistics


@dataclass
class RegionStats:
    """What one pass over a region issues (static counts) and its memory-level parallelism."""

    loop: tuple[int, int] | None
    instructions: int
    global_loads: int
    global_stores: int
    load_bits: dict[int, int]  # bits per lane -> global loads of that width
    store_bits: dict[int, int]
    shared: int  # LDS/STS/ATOMS
    local: int  # LDL/STL
    div64: int  # calls of the 64-bit division subroutine
    mlp: int  # most global loads in flight when one is first consumed
    waits: int  # waits for global loads per pass
    lines: dict[tuple[str, int], int]  # source line -> global loads at it
    line_waits: dict[tuple[str, int], int]  # source line -> the waits per pass for its loads
    cycles: float = 0.0  # one warp's cycles per pass, global load latencies left out (pass_cycles)
    wait_groups: list = field(default_factory=list)  # per wait of a pass: the lines of the loads it waits out

    @property
    def load_bytes(self) -> int:
        """Bytes a lane loads per pass."""
        return sum(bits // 8 * n for bits, n in self.load_bits.items())

    @property
    def elements(self) -> int:
        """Elements (edges, features) per pass: the most global loads at one source line (the unrolling)."""
        return max(self.lines.values(), default=1)


def region_stats(region: Region) -> RegionStats:
    body = region.instructions
    load_bits, store_bits, lines = {}, {}, {}
    counts = dict(loads=0, stores=0, shared=0, local=0, div64=0)
    for ins in body:
        b = ins.base
        if b in GLOBAL_LOADS:
            counts["loads"] += 1
            load_bits[access_bits(ins)] = load_bits.get(access_bits(ins), 0) + 1
            lines[(ins.file, ins.line)] = lines.get((ins.file, ins.line), 0) + 1
        elif b in GLOBAL_STORES:
            counts["stores"] += 1
            store_bits[access_bits(ins)] = store_bits.get(access_bits(ins), 0) + 1
        elif b in ("LDS", "STS", "ATOMS", "LDSM"):
            counts["shared"] += 1
        elif b in ("LDL", "STL"):
            counts["local"] += 1
        counts["div64"] += is_div64(ins)
    passes = 2 if region.loop else 1
    mlp, waits, line_waits, groups = memory_parallelism(body, passes)
    return RegionStats(region.loop, len(body), counts["loads"], counts["stores"], load_bits, store_bits,
                       counts["shared"], counts["local"], counts["div64"], mlp, waits, lines, line_waits,
                       pass_cycles(body, passes), groups)


def memory_parallelism(body: list[Instruction], passes: int = 2):
    """``(mlp, waits, waits per line, wait groups)`` of a region: the most global loads in flight when one is
    first needed, the waits for loads in the last pass, the source line of the load each wait is for, and per
    wait the lines of the loads it waits out. A loop body runs twice in a row, so that loads issued late in
    one pass and consumed in the next count.

    A load is in flight from its issue until an instruction reads or overwrites one of its registers. That
    instruction waits if the load was issued since the last wait; the loads issued since then are in flight
    together and are all taken as returned after the wait (it lasts as long as the slowest of them), so that
    loads issued together cost one wait, not one each.

    >>> ldg = lambda d, a: Instruction(0, "", "LDG.E", [f"R{d}", f"desc[UR4][R{a}.64]"], "k.cu", d)
    >>> use = lambda *r: Instruction(0, "", "FADD", ["R90", *[f"R{x}" for x in r]], "k.cu", 0)
    >>> memory_parallelism([ldg(10, 2), ldg(11, 4), use(10), use(11)], passes=1)  # issued together
    (2, 1, {('k.cu', 10): 1}, [(('k.cu', 10), ('k.cu', 11))])
    >>> memory_parallelism([ldg(10, 2), use(10), ldg(11, 10), use(11)], passes=1)[:3]  # a dependent chain
    (1, 2, {('k.cu', 10): 1, ('k.cu', 11): 1})
    """
    pending: list[tuple[Instruction, set[int], int]] = []  # (load, registers, waits before its issue)
    mlp = waits = 0
    per_line: dict[tuple[str, int], int] = {}
    groups: list[tuple[tuple[str, int], ...]] = []
    for rep in range(passes):
        for ins in body:
            touched = ins.reads | ins.writes
            hit = [(load, since) for load, regs, since in pending if regs & touched]
            if hit:
                mlp = max(mlp, len(pending))
                fresh = [load for load, since in hit if since == waits]
                if fresh:
                    if rep == passes - 1:
                        line = (fresh[-1].file, fresh[-1].line)
                        per_line[line] = per_line.get(line, 0) + 1
                        groups.append(tuple(sorted({(q.file, q.line) for q, _, since in pending if since == waits})))
                    waits += 1
                    pending = []
                else:
                    pending = [q for q in pending if not q[1] & touched]
            if ins.base in GLOBAL_LOADS:
                pending.append((ins, ins.writes, waits))
    return mlp or sum(i.base in GLOBAL_LOADS for i in body), sum(per_line.values()), per_line, groups


# Dependent-issue latencies (cycles) on sm_90, from published Hopper microbenchmarks (rounded): what a
# consumer of the result waits. A global load's result counts 1 here: its latency is the model's waits.
LATENCY = {"MUFU": 18, "SHFL": 24, "LDS": 30, "LDSM": 30, "ATOMS": 30, "LDL": 30, "S2R": 20, "LDC": 8,
           "BAR": 20, "DADD": 8, "DMUL": 8, "DFMA": 8, "DSETP": 8, "F2F": 12, "I2F": 12, "F2I": 12, "FRND": 12,
           "POPC": 8, "FLO": 8, "BREV": 8, "VOTE": 8, "REDUX": 10, "LDG": 1}
DEFAULT_LATENCY = 4
DIV64_CYCLES = 70  # a call of the 64-bit division subroutine, run to its end


_PRED = re.compile(r"^!?(U?P)(\d)$")


def predicates(ins: Instruction) -> tuple[set[int], set[int]]:
    """``(read, written)`` predicate registers (P0-P6 as 0-6, UP0-UP6 as 10-16; PT is none): a comparison or a
    predicate logic op (``ISETP``, ``FSETP``, ``PLOP3``, ...) writes its first two operands; a guard ``@P0``
    and every other predicate operand are read.

    >>> predicates(Instruction(0, "@!P1", "PLOP3.LUT", ["P0", "PT", "P2", "P0", "PT", "0xa8", "0x0"], "", 0))
    ({0, 1, 2}, {0})
    """
    read, written = set(), set()
    if ins.predicate and (n := _predicate_number(ins.predicate.lstrip("@"))) is not None:
        read.add(n)
    writes = 2 if "SETP" in ins.opcode or ins.base in ("PLOP3", "UPLOP3") else 0
    for k, o in enumerate(ins.operands):
        if "P" in o and (n := _predicate_number(o)) is not None:
            (written if k < writes else read).add(n)
    return read, written


def _predicate_number(token: str) -> int | None:
    m = _PRED.match(token.strip())
    return (10 if m[1] == "UP" else 0) + int(m[2]) if m else None


def pass_cycles(body: list[Instruction], passes: int = 2) -> float:
    """One warp's cycles per pass over a region: instructions issue in order, one a cycle, each when the
    registers and predicates it reads are ready (``LATENCY`` after their producer issued); a loop body runs
    twice and its second pass counts, so that a dependence from one pass to the next is paid.

    >>> ins = lambda op, d, *s: Instruction(0, "", op, [f"R{d}", *[f"R{x}" for x in s]], "", 0)
    >>> pass_cycles([ins("FADD", 1, 2), ins("FADD", 3, 4), ins("FADD", 5, 6)], passes=1)  # independent
    3.0
    >>> pass_cycles([ins("MUFU.EX2", 1, 2), ins("FADD", 3, 1)], passes=1)  # waits 18 for the exponential
    19.0
    >>> setp = Instruction(0, "", "ISETP.GE.AND", ["P0", "PT", "R1", "R2", "PT"], "", 0)
    >>> pass_cycles([setp, Instruction(0, "@P0", "BRA", ["`(.L_x_0)"], "", 0)], passes=1)  # the guard waits
    5.0
    """
    ready: dict[int, float] = {}
    t, ends = 0.0, []
    for _ in range(passes):
        for ins in body:
            p_read, p_written = ins.predicate_regs
            start = max([t + 1, *(ready.get(r, 0.0) for r in ins.reads),
                         *(ready.get(1000 + q, 0.0) for q in p_read)])
            latency = DIV64_CYCLES if is_div64(ins) else LATENCY.get(ins.base, DEFAULT_LATENCY)
            for r in ins.writes:
                ready[r] = start + latency
            for q in p_written:
                ready[1000 + q] = start + latency
            t = start
        ends.append(t)
    return ends[-1] - (ends[-2] if len(ends) > 1 else 0.0)
