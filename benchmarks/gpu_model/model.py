"""The GPU time of a traced pass: every launch from its trace and its kernel's cost card, plus the XLA work
between the kernels, for an H100 or an H200.

Per launch, five terms (ms), each printed:

- ``latency``: the blocks' makespan. A block's duration is that of its busiest warp: the load latencies it
  waits for plus its instructions' dependent-issue cycles (the card's, per memory instruction, times
  ``cycle_factor``). Per
  traced warp-level load, the card gives the waits charged to its source line (the SASS's memory-level
  parallelism); a wait lasts an L1 hit's latency, an L2 hit's or a DRAM read's in the proportions the trace
  found for that load (its L1 hits, its sectors the LRU L2 missed). Blocks start in order on the free slots
  of all SMs (the ptxas occupancy at the launch's shared memory); the DRAM latency grows linearly from
  ``lat_unloaded_ns`` on an idle GPU to ``lat_loaded_ns`` when every slot is busy, slowing every running
  block alike.
- ``dram``: bytes read from and written to DRAM (the trace's LRU L2 at ``l2_mb`` effective megabytes) over the
  DRAM bandwidth.
- ``l2``: the 32-byte sectors the warp-level instructions touch, over the L2-to-SM bandwidth.
- ``issue``: all warp instructions over the SMs' issue rate (4 a cycle each).
- ``launch``: a fixed cost per launch.

A launch takes ``max(latency, dram, l2, issue) + launch``; a memset, its bytes at the DRAM bandwidth. The
XLA work (:mod:`.xla_ops`): its bytes at the DRAM bandwidth plus a launch each, ``while_iteration_us`` per
while-loop iteration. Global parameters only; none is per kernel.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace

import numpy as np

from .. import gpu_resources
from . import xla_ops
from .cards import Card
from .trace import Launch

TERMS = ("latency", "dram", "l2", "issue")


@dataclass(frozen=True)
class Gpu:
    """What the model takes from a GPU's data sheet or a measurement (bandwidths in GB/s)."""

    name: str
    dram_gbps: float
    l2_gbps: float
    sms: int = 132
    clock_ghz: float = 1.755  # sustained SM clock under load (H100/H200 SXM: 1.98 GHz at most)
    issue_per_sm_cycle: float = 4.0  # warp instructions: four schedulers a SM


# DRAM: the copy bandwidth measured in the first GPU run (2,265 GB/s, y = 2x over 512 MiB; 68% of the 3.35 TB/s
# of HBM3); the H200 at the same fraction of its 4.8 TB/s. L2 to SMs: ~7 TB/s (published 5.5-10 TB/s).
H100 = Gpu("H100 SXM", dram_gbps=2265.0, l2_gbps=7000.0)
H200 = Gpu("H200 SXM", dram_gbps=2265.0 * 4.8 / 3.35, l2_gbps=7000.0)


@dataclass(frozen=True)
class Params:
    """The model's global parameters."""

    # Fitted (``python -m benchmarks.gpu_model --retro --fit``, traced at scale 0.1, 2026-11-29) on the rows of
    # retro.FIT_ROWS only; the search started from 500 ns, 1,000 ns and 1.
    lat_unloaded_ns: float = 171.0  # a load from DRAM on an idle GPU
    lat_loaded_ns: float = 262.0  # ... when every block slot is busy
    cycle_factor: float = 6.14  # scales the cards' dependent-issue cycles of a warp (sass.pass_cycles)
    l1_cycles: float = 35.0  # an L1 hit (published H100 microbenchmarks: 33-40 cycles)
    l2_cycles: float = 300.0  # an L2 hit (260 near, ~400 in the far partition)
    l2_mb: float = 28.0  # the L2 a gather sees (of 50 MB on an H100: ~25-30)
    launch_us: float = 3.0  # a kernel launch, back to back in a stream
    while_iteration_us: float = 20.0  # an XLA while loop's iteration on a GPU (its condition read by the host)

    FITTED = ("lat_unloaded_ns", "lat_loaded_ns", "cycle_factor")


@dataclass
class LaunchTime:
    """The modelled time of one launch (ms per term) and what it moved."""

    name: str
    kernel: str
    terms: dict[str, float]
    launch_ms: float
    dram_bytes: float
    l2_bytes: float
    requested_bytes: float
    load_sectors: float
    load_requests: float
    critical_path_ms: float  # the longest block at the unloaded latency
    instructions: float
    blocks: int = 0
    slots: int = 0
    bulk_ms: float = 0.0  # the blocks' work over the slots at the loaded latency
    setup_bulk_ms: float = 0.0  # ... of it, the call sites a warp runs at most once (as traced)
    setup_issue_ms: float = 0.0  # the issue term's part of those sites, as traced (not scaled)

    def extrapolated(self, half: LaunchTime | None, scale: float, max_blocks: int = 1 << 16) -> LaunchTime:
        """This launch (traced at ``scale``) at full size, from the same launch traced at ``scale / 2``.

        The grid grows as it grew between the two traces, up to ``max_blocks`` (launch.cuh's ``kMaxBlocks``:
        beyond, grid-stride loops give each warp more rows). A warp's setup (the call sites in no loop of the
        kernel) grows with the grid, the rest of the work with the size. The latency term scales as the longest
        block and the bulk of the blocks do between the two traces, each as a power of the size (exponents
        within [0, 1.2]; without the half-size launch, 0.83 and 1: a power-law graph's longest row and its
        edges)."""
        def exponent(now, before, default):
            return default if not before or before <= 0 or now <= 0 else min(1.2, max(0.0, math.log2(now / before)))
        blocks = min(max_blocks, self.blocks * (1 / scale) ** exponent(self.blocks, half and half.blocks, 1.0))
        grid = blocks / max(1, self.blocks)
        work, setup = self.bulk_ms - self.setup_bulk_ms, self.setup_bulk_ms
        before = half and half.bulk_ms - half.setup_bulk_ms
        bulk = work * (1 / scale) ** exponent(work, before, 1.0) + setup * grid
        tail = self.critical_path_ms * (1 / scale) ** exponent(self.critical_path_ms, half and half.critical_path_ms,
                                                                0.83)
        traced = max(self.critical_path_ms, self.bulk_ms)
        latency = self.terms["latency"] * max(tail, bulk) / traced if traced > 0 else 0.0
        issue = self.terms["issue"] - self.setup_issue_ms / scale + self.setup_issue_ms * grid
        return replace(self, terms=dict(self.terms, latency=latency, issue=issue), critical_path_ms=tail,
                       bulk_ms=bulk, blocks=round(blocks))

    @property
    def ms(self) -> float:
        return max(self.terms.values()) + self.launch_ms

    @property
    def binding(self) -> str:
        return max(self.terms, key=self.terms.get)

    def close(self, ratio: float = 1.5) -> list[str]:
        """The terms within ``ratio`` of the binding one (itself excluded)."""
        top = max(self.terms.values())
        return [t for t, v in self.terms.items() if t != self.binding and v > 0 and top / v <= ratio]


def interpolate_dram(site_values: np.ndarray, sizes, l2_mb: float) -> float:
    """A per-L2-size value at ``l2_mb`` (linear between the simulated sizes, clamped at the ends)."""
    return float(np.interp(l2_mb, sizes, site_values))


def card_for(launch: Launch, cards: dict[tuple[str, str], Card]) -> Card:
    """The card of the launch's kernel: ``cards`` is keyed by (file, ``Card.raw_name``), the host compiler's
    demangled name of the kernel shortened alike. A kernel defined in a header (the engine's) has its cards under
    the ``.cu`` files that compile it, one build of the same template each: the first by file name."""
    key = (launch.kernel_file, gpu_resources.shorten(launch.kernel))
    if key in cards:
        return cards[key]
    compiled = sorted(file for file, raw in cards if raw == key[1])
    if not compiled or not launch.kernel_file.endswith(".cuh"):
        raise KeyError(f"gpu_model: no cost card for {key[1]} in {key[0]} (traced as {launch.kernel})")
    return cards[(compiled[0], key[1])]


def makespan(durations: np.ndarray, slots: int, slowdown) -> float:
    """Time to run blocks of unloaded ``durations`` in order on ``slots`` slots, every running block slowed by
    ``slowdown(busy fraction)`` (a virtual clock advancing at 1 / slowdown)."""
    if len(durations) == 0:
        return 0.0
    slots = max(1, slots)
    virtual = real = 0.0
    running: list[float] = []  # virtual finish times
    for d in durations:
        if len(running) == slots:
            finish = heapq.heappop(running)
            real += (finish - virtual) * slowdown(1.0)
            virtual = finish
        heapq.heappush(running, virtual + float(d))
    while running:
        busy = len(running) / slots
        finish = heapq.heappop(running)
        real += (finish - virtual) * slowdown(busy)
        virtual = finish
    return real


def launch_time(launch: Launch, card: Card | None, gpu: Gpu, p: Params, trace_scale: float = 1.0) -> LaunchTime:
    """The modelled time of one traced launch (a memset when ``card`` is None). ``trace_scale``: the trace ran
    on inputs this fraction of the modelled size, its L2 models that fraction of their size: the byte and
    instruction totals are divided by it."""
    l2_sizes = np.array(launch.l2_mb) / trace_scale
    dram = sum(interpolate_dram(s.dram_read + s.dram_write, l2_sizes, p.l2_mb) for s in launch.sites if not s.shared)
    dram *= 32 / trace_scale
    l2 = 32 * sum(s.sectors for s in launch.sites if not s.shared) / trace_scale
    requested = sum(s.bytes for s in launch.sites if not s.shared) / trace_scale
    loads = [s for s in launch.sites if s.kind == "load"]
    load_sectors, load_requests = sum(s.sectors for s in loads), sum(s.execs for s in loads)
    terms = dict.fromkeys(TERMS, 0.0)
    terms["dram"] = dram / gpu.dram_gbps / 1e6
    if card is None:  # a memset
        return LaunchTime(launch.name, "memset", terms, p.launch_us / 1e3, dram, l2, requested, 0, 0, 0.0, 0.0)
    clock_ns = 1 / gpu.clock_ghz
    n = max(s.id for s in launch.sites) + 1
    issue_w, cycles_w, fixed_w, dram_w = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)  # per access
    levels = {}  # per load site: (fraction of L1 hits, of DRAM reads); the rest hits the L2
    for s in loads:
        if s.execs:
            l1 = s.l1_hits / s.execs
            misses = interpolate_dram(s.dram_read, l2_sizes, p.l2_mb)
            levels[s.id] = (l1, min(1.0, misses / max(1.0, s.execs - s.l1_hits)) * (1 - l1))

    def unloaded_ns(l1, from_dram):
        return (l1 * p.l1_cycles + (1 - l1 - from_dram) * p.l2_cycles) * clock_ns + from_dram * p.lat_unloaded_ns
    slowest: dict[tuple[str, int], float] = {}
    for s in loads:
        if s.id in levels:
            slowest[(s.file, s.line)] = max(slowest.get((s.file, s.line), 0.0), unloaded_ns(*levels[s.id]))
    chains = card.waits(lambda line: slowest.get(line, 0.0))
    for s in launch.sites:
        issue_w[s.id], cycles_w[s.id] = card.issue(s.file, s.line, s.kind)
        if s.kind == "load" and s.id in levels:  # a wait lasts an L1 hit, an L2 hit or a DRAM read
            chain, (l1, from_dram) = chains.get((s.file, s.line), 0.0), levels[s.id]
            fixed_w[s.id] = chain * (l1 * p.l1_cycles + (1 - l1 - from_dram) * p.l2_cycles) * clock_ns
            dram_w[s.id] = chain * from_dram
    block_of = np.repeat(np.arange(len(launch.block_ids)), np.diff(launch.offsets.astype(np.int64)))

    def per_block(weights):
        return np.bincount(block_of, weights[launch.site_ids] * launch.busiest, len(launch.block_ids))
    instructions = float(np.sum(issue_w[launch.site_ids] * launch.total)) / trace_scale
    fixed = (per_block(fixed_w) + per_block(cycles_w) * p.cycle_factor * clock_ns) / 1e6  # ms
    dram_waits = per_block(dram_w)
    durations = fixed + dram_waits * p.lat_unloaded_ns / 1e6  # unloaded
    loaded = fixed + dram_waits * p.lat_loaded_ns / 1e6
    setup_w = np.zeros(n)  # 1 for the sites in no loop of the kernel: a warp's setup
    for s in launch.sites:
        setup_w[s.id] = card.region(s.file, s.line, s.kind).loop is None
    setup_durations = (per_block(fixed_w * setup_w) + per_block(cycles_w * setup_w) * p.cycle_factor * clock_ns
                       + per_block(dram_w * setup_w) * p.lat_unloaded_ns) / 1e6
    setup_instructions = float(np.sum((issue_w * setup_w)[launch.site_ids] * launch.total))
    occ = gpu_resources.occupancy(card.registers, launch.threads_per_block,
                                  card.static_shared + launch.shared_bytes)
    slots = max(1, occ.blocks) * gpu.sms
    ratio = float(np.sum(loaded) / np.sum(durations)) if np.sum(durations) > 0 else 1.0

    def slowdown(busy):
        return 1 + (ratio - 1) * busy

    order = np.argsort(launch.block_ids, kind="stable")
    terms["latency"] = makespan(durations[order], slots, slowdown)
    terms["l2"] = l2 / gpu.l2_gbps / 1e6
    terms["issue"] = instructions / (gpu.issue_per_sm_cycle * gpu.sms * gpu.clock_ghz * 1e9) * 1e3
    issue_rate = gpu.issue_per_sm_cycle * gpu.sms * gpu.clock_ghz * 1e9 / 1e3  # per ms
    return LaunchTime(launch.name, card.name, terms, p.launch_us / 1e3, dram, l2, requested, load_sectors,
                      load_requests, float(durations.max(initial=0.0)), instructions, launch.blocks, slots,
                      float(np.sum(durations)) / slots * slowdown(1.0),
                      float(np.sum(setup_durations)) / slots * slowdown(1.0), setup_instructions / issue_rate)


@dataclass
class PassTime:
    """A pass: its launches, memsets and XLA work."""

    launches: list[LaunchTime]
    xla: list[xla_ops.Operation] = field(default_factory=list)
    xla_ms: float = 0.0

    @property
    def kernel_ms(self) -> float:
        return sum(t.ms for t in self.launches)

    @property
    def ms(self) -> float:
        return self.kernel_ms + self.xla_ms

    def totals(self) -> dict[str, float]:
        """Each term summed over the launches (ms), and the XLA work."""
        out = {t: sum(lt.terms[t] for lt in self.launches) for t in TERMS}
        out["launch"] = sum(lt.launch_ms for lt in self.launches)
        out["xla"] = self.xla_ms
        return out


def xla_time(ops: list[xla_ops.Operation], gpu: Gpu, p: Params, trace_scale: float = 1.0) -> float:
    """The XLA work's time (ms): bytes at the DRAM bandwidth, a launch per op, while-loop iterations."""
    ms = 0.0
    for op in ops:
        if op.opcode == "while iteration":
            ms += op.count * p.while_iteration_us / 1e3
        else:
            ms += op.count * (op.bytes / trace_scale / gpu.dram_gbps / 1e6 + p.launch_us / 1e3)
    return ms


def pass_time(launches: list[Launch], cards, hlo: str, gpu: Gpu, p: Params, trace_scale: float = 1.0,
              half: list[Launch] | None = None, half_hlo: str | None = None) -> PassTime:
    """The pass's modelled time; traced at ``trace_scale`` < 1, it is extrapolated to full size with the same
    pass traced at half that scale (``half``, ``half_hlo``): its launches (:meth:`LaunchTime.extrapolated`) and
    its XLA while loops, whose trip counts grow by as much per halving as between the two traces (a binary
    search's, as the log of the size)."""
    def model_all(ls, scale):
        return [launch_time(l, None if l.name == "cudaMemsetAsync" else card_for(l, cards), gpu, p, scale)
                for l in ls]
    times = model_all(launches, trace_scale)
    ops = xla_ops.operations(hlo)
    if trace_scale != 1.0:
        before: dict[tuple[str, str], list[LaunchTime]] = {}
        for lt in model_all(half or [], trace_scale / 2):
            before.setdefault((lt.name, lt.kernel), []).append(lt)
        times = [lt.extrapolated((before.get((lt.name, lt.kernel)) or [None]).pop(0), trace_scale) for lt in times]
        counts = {o.name: o.count for o in xla_ops.operations(half_hlo or "") if o.opcode == "while iteration"}
        halvings = math.log2(1 / trace_scale)
        ops = [replace(o, count=round(o.count + max(0, o.count - counts.get(o.name, o.count)) * halvings))
               if o.opcode == "while iteration" else o for o in ops]
    return PassTime(times, ops, xla_time(ops, gpu, p, trace_scale))


def with_params(p: Params, values) -> Params:
    return replace(p, **dict(zip(Params.FITTED, values)))
