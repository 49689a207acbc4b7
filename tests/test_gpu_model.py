"""``python -m benchmarks.gpu_model``: SASS parsing and memory-level parallelism, the cost cards' engine check,
the XLA-work parser, the model's arithmetic, the fit, and (where the tools are installed) the check on a
compiled fixture and a small traced run against NumPy's count of the same accesses."""

import doctest
import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from benchmarks import gpu_resources
from benchmarks.gpu_model import cards, model, retro, sass, trace, xla_ops

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "gpu_model_fixture"


def sass_text(body: str, name: str = "_Z1kPKfPf") -> str:
    """A function of nvdisasm output around ``body`` (instructions one per line, labels allowed)."""
    lines = [f"//--------------------- .text.{name} --------------------------", f"{name}:"]
    address = 0
    for line in textwrap.dedent(body).strip().splitlines():
        if line.startswith(".L_x") or line.startswith("\t//##"):
            lines.append(line)
        else:
            lines.append(f"        /*{address:04x}*/                   {line} ;")
            address += 16
    return "\n".join(lines)


def test_parse_takes_the_innermost_line_of_an_inlining_chain():
    text = sass_text('''
        LDC R1, c[0x0][0x28]
        \t//## File "/r/math.h", line 36 inlined at "/r/k.cu", line 83
        \t//## File "/r/k.cu", line 83
        LDG.E R4, desc[UR4][R2.64]
        @!P0 BRA `(.L_x_0)
    ''')
    (f,) = sass.parse(text)
    assert [(i.opcode, Path(i.file).name, i.line) for i in f.instructions] == [
        ("LDC", "", 0), ("LDG.E", "math.h", 36), ("BRA", "math.h", 36)]
    assert f.instructions[2].predicate == "@!P0" and f.instructions[2].target() == ".L_x_0"


def test_parse_reads_cuobjdump_too():
    """cuobjdump -sass: a "Function :" header, encodings after each instruction, branches to addresses."""
    text = "\n".join(["\t\tFunction : _Z1kPKfPf",
                      "        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;   /* 0x0000000402047981 */",
                      "        /*0010*/                   FADD R8, R4, R5 ;                  /* 0x0000000504087221 */",
                      "        /*0020*/              @P0 BRA 0x0 ;                           /* 0x000000fc00b80947 */",
                      "        /*0030*/                   EXIT ;"])
    (f,) = sass.parse(text)
    assert f.mangled == "_Z1kPKfPf" and f.loops() == [(0, 32)]
    assert sass.region_stats(f.regions()[1]).load_bits == {128: 1}


def test_regions_split_nested_loops_and_count_widths():
    (f,) = sass.parse(sass_text('''
        .L_x_1:
        LDG.E R4, desc[UR4][R2.64]
        .L_x_2:
        LDG.E.128 R8, desc[UR4][R6.64]
        LDG.E.64 R12, desc[UR4][R6.64+0x10]
        FADD R20, R8, R12
        @P0 BRA `(.L_x_2)
        STG.E desc[UR4][R2.64], R20
        CALL.REL.NOINC `($__internal_0_$__cuda_sm20_div_s64)
        @P1 BRA `(.L_x_1)
        EXIT
        .L_x_3:
        BRA `(.L_x_3)
    '''))
    rest, outer, inner = f.regions()
    assert (outer.loop, inner.loop) == ((0, 112), (16, 64))  # the trap after EXIT is no loop
    stats = sass.region_stats(inner)
    assert (stats.instructions, stats.load_bits, stats.load_bytes, stats.mlp, stats.waits) == (4, {128: 1, 64: 1},
                                                                                                24, 2, 1)
    outer_stats = sass.region_stats(outer)
    assert (outer_stats.instructions, outer_stats.global_loads, outer_stats.global_stores, outer_stats.div64) == (
        4, 1, 1, 1)
    assert [i.opcode for i in rest.instructions] == ["EXIT", "BRA"]


@pytest.mark.parametrize("body, mlp, waits", [
    # eight independent loads, then their uses: one wait, eight in flight
    ("\n".join([f"LDG.E.128 R{8 + 4 * k}, desc[UR4][R2.64+0x{16 * k:x}]" for k in range(8)]
               + [f"FADD R80, R{8 + 4 * k}, R80" for k in range(8)]), 8, 1),
    # an index load, then the gather it addresses: two waits, one in flight
    ("LDG.E R4, desc[UR4][R2.64]\nIMAD.WIDE R6, R4, 0x4, R10\nLDG.E R8, desc[UR4][R6.64]\nFADD R20, R8, R20", 1, 2),
    # a load issued at the end of a pass and used at the start of the next: still one wait a pass
    ("FADD R20, R8, R20\nLDG.E R8, desc[UR4][R2.64]", 1, 1),
    # overwriting an in-flight load's register waits for it too
    ("LDG.E R8, desc[UR4][R2.64]\nMOV R8, R9\nLDG.E R10, desc[UR4][R8.64]\nFADD R20, R10, R20", 1, 2),
])
def test_memory_parallelism_of_a_loop(body, mlp, waits):
    (f,) = sass.parse(sass_text(".L_x_0:\n" + body + "\n@P0 BRA `(.L_x_0)"))
    (_, loop) = f.regions()
    stats = sass.region_stats(loop)
    assert (stats.mlp, stats.waits) == (mlp, waits)
    assert sum(stats.line_waits.values()) == waits


def test_registers_read_and_written():
    i = sass.Instruction(0, "", "LDG.E.128", ["R4", "desc[UR4][R2.64+0x10]"], "", 0)
    assert sass.written(i) == {4, 5, 6, 7} and sass.read(i) == {2, 3}
    d = sass.Instruction(0, "", "DADD", ["R4", "R6", "R8"], "", 0)
    assert sass.written(d) == {4, 5} and sass.read(d) == {6, 7, 8, 9}
    st = sass.Instruction(0, "", "STG.E.64", ["desc[UR4][R2.64]", "R10"], "", 0)
    assert sass.written(st) == set() and sass.read(st) == {2, 3, 10, 11}
    assert sass.access_bits(sass.Instruction(0, "", "LDG.E.U16.CONSTANT", [], "", 0)) == 16
    shfl = sass.Instruction(0, "", "SHFL.BFLY", ["PT", "R22", "R25", "R18", "R7"], "", 0)  # a predicate, then R22
    assert sass.written(shfl) == {22} and sass.read(shfl) == {25, 18, 7}
    chain = [shfl, sass.Instruction(0, "", "FADD", ["R25", "R22", "R25"], "", 0)]
    assert sass.pass_cycles(chain, passes=1) == 1 + sass.LATENCY["SHFL"]  # the add waits for the shuffle


@pytest.mark.parametrize("between, general", [("BRA `(.L_x_3)", True), ("NOP", False)])
def test_a_line_in_two_copies_of_a_loop(between, general):
    """nvcc's copy of a loop for a special case (a lane group of one: no shuffles, unrolled 4x), run instead of
    the general copy (one load a pass and a shuffle loop): the line takes the general copy. A remainder loop,
    run after the unrolled one (``between`` falls through to it), leaves the line to the unrolled copy."""
    (f,) = sass.parse(sass_text(f'''
        @P0 BRA `(.L_x_2)
        .L_x_1:
        \t//## File "/r/k.cu", line 7
        LDG.E R4, desc[UR4][R2.64]
        LDG.E R5, desc[UR4][R2.64+0x4]
        LDG.E R6, desc[UR4][R2.64+0x8]
        LDG.E R7, desc[UR4][R2.64+0xc]
        FADD R20, R4, R5
        @P1 BRA `(.L_x_1)
        {between}
        .L_x_2:
        LDG.E R4, desc[UR4][R2.64]
        .L_x_4:
        SHFL.BFLY PT, R8, R4, 0x1, 0x1f
        FADD R4, R8, R4
        @P2 BRA `(.L_x_4)
        @P1 BRA `(.L_x_2)
        .L_x_3:
        EXIT
    '''))
    regions = f.regions()
    chosen, _ = cards._weights(f, [sass.region_stats(r) for r in regions])
    assert regions[chosen[("k.cu", 7, "load")]].loop == ((128, 192) if general else (16, 96))


def test_engine_markers():
    source = "// gpu-model: engine mlp>=8\ntemplate <typename T>\n__global__ void __launch_bounds__(256) K(T* x)\n"
    assert cards.declarations(source) == {"K": cards.Engine(8)}
    vector_if = "// gpu-model: engine mlp>=8 vector-if kVector\ntemplate <bool kVector>\n__global__ void K()"
    assert cards.declarations(vector_if) == {"K": cards.Engine(8, "kVector")}
    params = ["typename T", "bool kVector", "int kV = 1"]
    assert cards.Engine(8, "kVector").vector(["float", "kVector", "4"], params)
    assert not cards.Engine(8, "kVector").vector(["float", "!kVector", "4"], params)
    assert cards.Engine(8, "kV>1").vector(["float", "!kVector", "4"], params)
    assert not cards.Engine(8, "kV>1").vector(["float", "kVector", "1"], params)
    assert cards.Engine(8).vector([], [])
    with pytest.raises(ValueError, match="no template parameter kWide"):
        cards.Engine(8, "kWide").vector(["float", "kVector", "4"], params)
    with pytest.raises(ValueError, match="kV is not a bool template parameter"):
        cards.Engine(8, "kV").vector(["float", "kVector", "4"], params)
    assert cards.declarations("// gpu-model engine\n__global__ void K()") == {}
    with pytest.raises(ValueError, match="line 1: an engine marker with no __global__ kernel"):
        cards.declarations("// gpu-model: engine mlp>=4\n" + "int x;\n" * 11 + "__global__ void K()")


def card(name, regions, floor=None):
    return cards.Card("k.cu", name, name, "_Z1k", 40, 0, 0, 0, gpu_resources.occupancy(40, 256), regions, floor)


def region(loop, load_bits, mlp, instructions=20, cycles=40.0, groups=()):
    loads = sum(load_bits.values())
    return sass.RegionStats(loop, instructions, loads, 0, load_bits, {}, 0, 0, 0, mlp, len(groups),
                            {("/src/k.cu", 3): loads}, {}, cycles, list(groups))


def test_engine_check_wants_128_bit_gathers_and_the_declared_parallelism():
    good = card("Wide", [region(None, {}, 0), region((0, 64), {128: 8, 32: 8}, 8)], floor=8)
    shallow = card("Shallow", [region(None, {}, 0), region((0, 64), {128: 8}, 4)], floor=8)
    scalar = card("Scalar", [region(None, {}, 0), region((0, 64), {32: 16}, 16)], floor=8)
    loopless = card("Loopless", [region(None, {128: 4}, 4)], floor=2)
    undeclared = card("Plain", [region((0, 64), {32: 4}, 1)])
    tail = card("Tail", [region(None, {}, 0), region((0, 64), {32: 16}, 8)], floor=8)
    tail.engine_vector = False  # a vector-if kernel's scalar path: the MLP floor only
    assert cards.engine_failures([good, undeclared, tail]) == []
    assert cards.engine_failures([shallow, scalar, loopless]) == [
        "k.cu: Shallow: 4 global loads in flight in its gather loop, under the declared floor of 8",
        "k.cu: Scalar: no 128-bit global load in its gather loop (loads per pass: 16x32)",
        "k.cu: Loopless: no 128-bit global load in its gather loop (loads per pass: 4x128)"]


HLO = """HloModule m, is_scheduled=true
%body (p: (s32[], f32[64])) -> (s32[], f32[64]) {
  %p = (s32[], f32[64]{0}) parameter(0)
  %x = f32[64]{0} get-tuple-element(%p), index=1
  %f = f32[64]{0} fusion(%x), kind=kLoop, calls=%fused
  ROOT %t = (s32[], f32[64]{0}) tuple(%i, %f)
}
%cond (p: (s32[], f32[64])) -> pred[] {
  %p = (s32[], f32[64]{0}) parameter(0)
  ROOT %c = pred[] compare(%a, %b), direction=LT
}
ENTRY %main (a: f32[1000,16], i: s32[1000]) -> f32[16] {
  %a = f32[1000,16]{1,0} parameter(0)
  %i = s32[1000]{0} parameter(1)
  %k = f32[1000,16]{1,0} custom-call(%a, /*index=1*/%i), custom_call_target="jgo_spmm"
  %d = f32[1000]{0} custom-call(%a, %a), custom_call_target="jgo_rows_dot"
  %s = f32[16]{0} reduce(%k, %z), dimensions={0}, to_apply=%add
  %w = (s32[], f32[64]{0}) while(%t0), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"12"}}
  ROOT %r = f32[16]{0} fusion(%s, %i), kind=kLoop, calls=%f2
}
"""


def test_xla_work_of_a_program():
    ops = {o.name: o for o in xla_ops.operations(HLO)}
    assert "k" not in ops  # the kernel is traced, not counted here
    assert ops["d"].bytes == 4000 + 2 * 64000  # a CPU-only target: XLA's own ops on a GPU
    assert (ops["s"].bytes, ops["s"].count) == (64 + 64000, 1)  # result + the kernel's output (%z: unknown, 0)
    assert (ops["r"].bytes, ops["w"].count, ops["f"].count, ops["c"].count) == (64 + 64 + 4000, 12, 12, 12)
    assert ops["f"].bytes == 512
    ms = model.xla_time(list(ops.values()), model.H100, model.Params(launch_us=3, while_iteration_us=20))
    expected = (132000 + 64064 + 4128 + 12 * 512 + 12 * 1) / 2265e6 + 3e-3 * (3 + 24) + 12 * 20e-3
    assert ms == pytest.approx(expected)


def test_while_loops_grow_with_the_size_as_between_the_two_traces():
    """A binary search over the rows: 13 iterations traced at scale 0.1, 12 at 0.05, so 13 + log2(10) at full
    size."""
    p = model.Params(launch_us=0, while_iteration_us=20)
    pt = model.pass_time([], {}, HLO.replace('"n":"12"', '"n":"13"'), model.H100, p, 0.1, [], HLO)
    (loop,) = [o for o in pt.xla if o.opcode == "while iteration"]
    assert loop.count == round(13 + math.log2(10))


def test_host_targets_are_those_of_targets_h():
    text = (ROOT / "ffi" / "targets.h").read_text()
    block = text[text.index("#define JGO_HOST_TARGETS"):]
    assert tuple(re.findall(r"X\((jgo_\w+),", block)) == xla_ops.HOST_TARGETS


def test_makespan():
    def constant(busy):
        return 1.0
    assert model.makespan(np.ones(4), 2, constant) == 2.0
    assert model.makespan(np.array([3.0, 1, 1, 1]), 2, constant) == 3.0
    assert model.makespan(np.array([]), 4, constant) == 0.0
    # two slots, slowed by 1 + the busy fraction: the first two blocks take 2 together, the third alone
    # (half the slots busy) 1.5
    assert model.makespan(np.ones(3), 2, lambda busy: 1 + busy) == pytest.approx(3.5)


def synthetic_launch(l1_hits=0, dram_read=0.0):
    """Two blocks of one warp: block 0's warp runs 10 loads at site 0, block 1's 30."""
    site = trace.Site(0, "k.cu", 3, False, False, 4, 40, 1280, 5120, 160, l1_hits, np.array([dram_read] * 2),
                      np.zeros(2))
    return trace.Launch(0, "x.jgocase", "jgo_x", "void K(float*)", "k.cu", (2, 1, 1), (32, 1, 1), 0, (25.0, 50.0),
                        [site], np.array([0, 1], np.uint32), np.array([0, 1, 2], np.uint32),
                        np.array([0, 0], np.uint32), np.array([10, 30], np.uint32), np.array([10, 30], np.uint32))


def test_launch_terms_by_hand():
    # two loads of k.cu:3 a pass of 12 instructions, 24 cycles, one wait: 6 instructions, 12 cycles, half a
    # wait a load
    k = card("K", [region(None, {}, 0), region((0, 64), {32: 2}, 2, 12, 24.0, [(("/src/k.cu", 3),)])])
    k.region_of = {("k.cu", 3, "load"): 1}
    p = model.Params(lat_unloaded_ns=400, lat_loaded_ns=800, cycle_factor=1, l2_cycles=300, l1_cycles=30,
                     launch_us=3)
    gpu = model.Gpu("test", dram_gbps=1000, l2_gbps=4000, sms=1, clock_ghz=1.0)
    lt = model.launch_time(synthetic_launch(), k, gpu, p)
    # block 1: 30 loads x (0.5 waits x 300 ns (L2 hits) + 12 cycles of 1 ns) = 4860 ns; block 0: 1620 ns.
    # Blocks of 32 threads: 32 slots on the one SM; both run at once, unloaded.
    assert lt.critical_path_ms == pytest.approx(4.86e-3)
    assert lt.terms["latency"] == pytest.approx(4.86e-3)
    assert lt.terms["l2"] == pytest.approx(160 * 32 / 4000e6)
    assert lt.terms["issue"] == pytest.approx(40 * 6 / 4 / 1e9 * 1e3)
    assert lt.terms["dram"] == 0 and lt.ms == pytest.approx(4.86e-3 + 3e-3)
    # every load a DRAM read: 0.5 waits x 400 ns each
    lt = model.launch_time(synthetic_launch(dram_read=40), k, gpu, p)
    assert lt.critical_path_ms == pytest.approx(30 * (0.5 * 400 + 12) * 1e-6)
    assert lt.terms["dram"] == pytest.approx(40 * 32 / 1000e6) and lt.dram_bytes == 40 * 32
    # L1 hits: 30 ns
    lt = model.launch_time(synthetic_launch(l1_hits=40), k, gpu, p)
    assert lt.critical_path_ms == pytest.approx(30 * (0.5 * 30 + 12) * 1e-6)


def test_extrapolation_follows_the_two_traces():
    base = model.LaunchTime("n", "k", {"latency": 2.0, "dram": 0.1, "l2": 0.1, "issue": 0.1}, 0.0, 0, 0, 0, 0, 0,
                            critical_path_ms=2.0, instructions=0, bulk_ms=0.5)
    capped = model.LaunchTime(**{**base.__dict__, "critical_path_ms": 2.0, "bulk_ms": 0.25})
    full = base.extrapolated(capped, 0.1)  # the longest block did not grow: the bulk does, 10x
    assert (full.critical_path_ms, full.bulk_ms) == pytest.approx((2.0, 5.0))
    assert full.terms["latency"] == pytest.approx(2.0 * 5.0 / 2.0)
    growing = model.LaunchTime(**{**base.__dict__, "critical_path_ms": 1.0, "bulk_ms": 0.25})
    assert base.extrapolated(growing, 0.1).critical_path_ms == pytest.approx(20.0)


def test_fit_recovers_parameters_and_rank_check():
    truth_params = model.Params(lat_unloaded_ns=420, lat_loaded_ns=900, cycle_factor=3)
    rows = (("a", "forward"), ("b", "forward"), ("c", "forward"))

    def evaluate(p, rs):  # three rows, each weighting the parameters differently
        f = p.cycle_factor
        values = {("a", "forward"): p.lat_unloaded_ns * 10 + f, ("b", "forward"): p.lat_loaded_ns + f * 50,
                  ("c", "forward"): p.lat_unloaded_ns + p.lat_loaded_ns * f}
        return {r: values[r] for r in rs}
    truth = evaluate(truth_params, rows)
    fitted = retro.fit(evaluate, model.Params(), rows, truth)
    for name in model.Params.FITTED:
        assert getattr(fitted, name) == pytest.approx(getattr(truth_params, name), rel=2e-2)
    times = {("gspmm_sum", "forward"): 1.0, ("agg_max", "forward"): 3.0, ("gat", "forward"): 2.0}
    measured = {("gspmm_sum", "forward"): 1.0, ("agg_max", "forward"): 2.0, ("gat", "forward"): 3.0}
    tau, wrong = retro.rank_check(times, measured)
    assert tau == pytest.approx(1 / 3) and wrong == [(("agg_max", "forward"), ("gat", "forward"), 1.5)]
    assert retro.order_summary(times, measured).endswith(
        "**Not rank-ordered: 1 pair(s) measured more than 1.15x apart are ordered differently**")
    measured[("gat", "forward")] = 2.2  # 1.1x from agg_max's: a tie, which the model may order either way
    summary = retro.order_summary(times, measured)
    assert "1 pair(s) ordered differently, 1 of them a tie" in summary and "(1.10x apart measured, a tie)" in summary
    assert summary.endswith("**Rank-ordered: every pair measured more than 1.15x apart is ordered as measured**")


def test_docstring_examples():
    for module in (sass, cards, xla_ops, retro):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def _nvdisasm():
    try:
        return sass.disassembler()
    except SystemExit:
        return None


@pytest.mark.skipif(shutil.which("nvcc") is None or _nvdisasm() is None,
                    reason="needs nvcc and nvdisasm (pip install nvidia-cuda-nvdisasm)")
@pytest.mark.exhaustive  # the card tool end to end, for CI
def test_engine_check_on_compiled_kernels(tmp_path):
    """The fixture's 128-bit gather passes its declared floor; the 32-bit gather fails; a template's scalar
    path (``vector-if kVector``) is held to its MLP floor only; the kernel with no marker is not checked, and
    ``--engine`` builds no card for it (one nvcc, ~5 s)."""
    compiled = sass.compile_sources(FIXTURE, tmp_path, jobs=1, log=lambda *a: None)
    found = {k.name: k for k in cards.build_cards(compiled, FIXTURE, block=256)}
    assert sorted(found) == ["GatherRows128", "GatherRowsEither<!kVector>", "GatherRowsEither<kVector>",
                             "GatherRowsScalar", "ScaleRows"]
    engines = cards.build_cards(compiled, FIXTURE, block=256, engine=True)
    assert [k.name for k in engines] == sorted(set(found) - {"ScaleRows"})
    in_processes = cards.build_cards(compiled * 2, FIXTURE, block=256, engine=True, jobs=2)  # a file per process
    assert [(k.name, k.registers, k.gather) for k in in_processes] == [
        (k.name, k.registers, k.gather) for k in engines for _ in range(2)]
    wide, scalar = found["GatherRows128"], found["GatherRowsScalar"]
    assert wide.gather.load_bits.get(128) == 8 and wide.gather.mlp >= 4
    assert set(scalar.gather.load_bits) == {32}
    assert cards.engine_failures(list(found.values())) == [
        f"engine.cu: GatherRowsScalar: no 128-bit global load in its gather loop (loads per pass: "
        f"{scalar.gather.load_bits[32]}x32)"]
    either, tail = found["GatherRowsEither<kVector>"], found["GatherRowsEither<!kVector>"]
    assert either.engine_vector and either.gather.load_bits.get(128) == 8
    assert not tail.engine_vector and set(tail.gather.load_bits) == {32}
    gather_line = next(i for i, line in enumerate((FIXTURE / "cuda" / "engine.cu").read_text().splitlines(), 1)
                       if line.endswith("// the gather"))
    assert wide.waits(lambda line: 1.0)[("engine.cu", gather_line)] > 0  # its waits are charged to the gather


@pytest.mark.skipif(shutil.which("nvcc") is None or _nvdisasm() is None,
                    reason="needs nvcc and nvdisasm (pip install nvidia-cuda-nvdisasm)")
@pytest.mark.exhaustive  # CI's reuse of the plugin's build, end to end
def test_cards_from_the_plugin_builds_object(tmp_path):
    """tools/ptxas_reports.py, as the plugin build's launcher, keeps each cubin of the object it compiles (``nvcc
    -c``, sm_80 and sm_90); the cards of the kept sm_90 cubin have the instructions, load widths and loads in
    flight of the ``-cubin -lineinfo`` compile's, without source lines (two nvcc, ~10 s)."""
    source, reports = FIXTURE / "cuda" / "engine.cu", tmp_path / "reports"
    flags = gpu_resources.nvcc_command(source, tmp_path / "engine.o", str(gpu_resources.XLA_FFI), FIXTURE)
    compile_object = ["-c" if f == "-fatbin" else f for f in flags if f not in ("-Xptxas", "-v")]
    launcher = [sys.executable, str(ROOT / "tools" / "ptxas_reports.py"), str(reports)]
    subprocess.run([*launcher, *compile_object], check=True, capture_output=True)
    assert sorted(p.name for p in reports.iterdir()) == ["engine.ptxas", "engine.sm_80.cubin", "engine.sm_90.cubin"]
    kept = {k.name: k for k in cards.build_cards(sass.prebuilt_sources(FIXTURE, reports), FIXTURE, block=256)}
    compiled = sass.compile_sources(FIXTURE, tmp_path / "cubins", jobs=1, log=lambda *a: None)
    own = {k.name: k for k in cards.build_cards(compiled, FIXTURE, block=256)}
    assert sorted(kept) == sorted(own)

    def figures(k):
        return k.registers, k.gather.instructions, k.gather.load_bits, k.gather.mlp, k.engine_vector
    assert {n: figures(k) for n, k in kept.items()} == {n: figures(k) for n, k in own.items()}
    assert {f for f, _, _ in kept["GatherRows128"].region_of} == {""}  # no source lines
    assert "engine.cu" in {f for f, _, _ in own["GatherRows128"].region_of}
    with pytest.raises(SystemExit, match=r"no sm_90 cubin or ptxas report in .* for engine\.cu"):
        sass.prebuilt_sources(FIXTURE, tmp_path)
    # A compressed image is no cubin: the launcher says so and keeps the build going (the plugin says -no-compress)
    squeezed = subprocess.run([*launcher[:2], str(tmp_path / "squeezed"), *compile_object, "-Xfatbin=-compress-all"],
                              capture_output=True, text=True)
    assert squeezed.returncode == 0, squeezed.stderr
    assert "the sm_90 image is compressed" in squeezed.stderr
    assert sorted(p.name for p in (tmp_path / "squeezed").iterdir()) == ["engine.ptxas"]


def _has_emulation() -> bool:
    code = "import jaxgraphops._ext as e; assert e.with_cuda_emulation"
    return subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True).returncode == 0


RECORD = """
import numpy as np, jax.numpy as jnp, jaxgraphops as jgo
rng = np.random.default_rng(0)
n, e = 300, 2000
src, dst = rng.integers(0, n, e).astype(np.int32), rng.integers(0, n, e).astype(np.int32)
dst[:400] = 7  # one row over 256 edges: the heavy launch too
g = jgo.Graph.from_edges(src, dst, n, n)
np.save("src.npy", src); np.save("dst.npy", dst)
jgo.gspmm(g, jnp.asarray(rng.normal(size=(n, 128)).astype(np.float32)), None, op="copy_u", reduce="sum")
"""


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("g++") is None or shutil.which("addr2line") is None,
                    reason="needs make, g++ and addr2line")
@pytest.mark.skipif(not _has_emulation(), reason="needs a build with the emulated CUDA handlers (JGO_CUDA_EMULATION)")
@pytest.mark.exhaustive  # the tracer end to end: its build (message_passing.cu alone) takes a minute or two
def test_small_traced_run_against_numpy(tmp_path):
    """copy_u sum over 128 features on the row-walk engine: one ReduceKernel launch (the 400-edge row split into
    chunks and folded in it; besides it one launch the trace leaves unnamed, '??', a single 8-sector store);
    each edge's source row is gathered by 32 lanes with 128-bit loads, which the emulated runtime issues as 4
    component loads of 16 sectors each; with an L2 larger than the data every sector touched is read from DRAM
    once: the unique sectors of the rows gathered, counted by NumPy."""
    env = dict(os.environ, JGO_KERNELS="cuda-emulation", JGO_FFI_RECORD=str(tmp_path / "calls"))
    subprocess.run([sys.executable, "-c", RECORD], cwd=tmp_path, env=env, check=True)
    build = tmp_path / "build"
    subprocess.run(["make", "-s", "-f", "tools/gpu_trace.mk", "-j2", f"BUILD={build}", "ONLY=message_passing"],
                   cwd=ROOT, check=True)
    (call,) = sorted((tmp_path / "calls").glob("jgo_spmm.*.jgocase"))
    out = tmp_path / "trace"
    out.mkdir()
    subprocess.run([str(build / "trace_replay"), str(out), "--l2-mb", "0.0001,64", str(call)], check=True,
                   capture_output=True)
    (out / "cases.json").write_text(json.dumps([call.name]))
    launches = trace.read_launches(out, build / "trace_replay")
    assert [l.kernel.split("<")[0].split("::")[-1] for l in launches] == ["??", "ReduceKernel"]
    src, dst = np.load(tmp_path / "src.npy"), np.load(tmp_path / "dst.npy")
    runtime = (ROOT / "ffi" / "cuda_emulation" / "cuda_runtime.h").read_text().splitlines()
    ldg = next(i for i, line in enumerate(runtime, 1) if "__ldg(const T* p)" in line)  # the gathers' loads
    gathers = [s for s in launches[1].sites if (s.file, s.line, s.kind) == ("cuda_runtime.h", ldg, "load")]
    assert gathers and all(s.sectors == 16 * s.execs and s.lanes == 32 * s.execs for s in gathers)
    assert sum(s.execs for s in gathers) == 4 * len(src)  # F = 128: one 128-bit load a lane, 4 components
    rows = np.unique(src)
    x_sectors = 128 * 4 // 32 * len(rows)
    assert sum(s.dram_read[1] for s in gathers) == x_sectors
    assert sum(s.dram_read[0] for s in gathers) == sum(s.sectors for s in gathers)  # a one-line L2 misses all
    assert launches[1].blocks >= 1 and (dst == 7).sum() > 256


def test_a_kernel_defined_in_a_header_has_the_cards_of_the_files_that_include_it(tmp_path):
    """The engine's kernels are templates in headers (walk_reduce.cuh): the traced launch names the header, the
    cards the ``.cu`` files that compile it; the default run selects those files and takes the first one's card
    (the default run on the engine raised 'no cost card for ReduceKernel<...> in walk_reduce.cuh', twice: the
    second time because the sources include the headers by their path under ffi, ``"cuda/walk_reduce.cuh"``)."""
    from types import SimpleNamespace

    from benchmarks.gpu_model import model, pipeline

    for name, text in {"a.cu": '#include "cuda/walk.cuh"\n', "walk.cuh": '#include "cuda/chunk.cuh"\n', "chunk.cuh": "",
                       "b.cu": '#include "other.cuh"\n', "other.cuh": ""}.items():
        (tmp_path / name).write_text(text)
    launch = SimpleNamespace(kernel_file="chunk.cuh", name="jgo_spmm", kernel="K<float>")
    traced = {("case", "forward"): ([launch], None, None, None, None)}
    assert pipeline.kernel_files(traced, tmp_path) == {"chunk.cuh", "walk.cuh", "a.cu"}
    raw = gpu_resources.shorten("K<float>")
    assert model.card_for(launch, {("z.cu", raw): "z", ("a.cu", raw): "a"}) == "a"
    with pytest.raises(KeyError, match="no cost card for"):
        model.card_for(SimpleNamespace(kernel_file="b.cu", kernel="K<float>"), {("a.cu", raw): "a"})
