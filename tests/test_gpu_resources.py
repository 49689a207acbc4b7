"""``python -m benchmarks.gpu_resources``: the occupancy arithmetic, ptxas's report parser, the kernel
names, the check and the BENCHMARKS.md section; one real compile where nvcc is installed."""

import doctest
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_resources as gr

# Real ptxas output (nvcc 13.0, -Xptxas -v): a kernel as built, one with a local array (stack) and
# constant banks, one forced to spill (__launch_bounds__(256, 4)), and one with static shared memory.
SOFTMAX = "_ZN3jgo51_GLOBAL__N__f2ad6f1b_18_message_passing_cu_ed37888817EdgeSoftmaxKernelIfiEEvPKT0_S4_PKT_PS5_lll"
DIMENET = ("_ZN3jgo43_GLOBAL__N__7cf69fde_10_dimenet_cu_ab26ff5616DimenetOutKernelIfiEEvNS_11DimenetArgsEPKT0_S5_"
           "NS_15DimenetOperandsIT_EENS_11DimenetPlanEPKS7_PS7_SC_")
GAT = ("_ZN3jgo45_GLOBAL__N__c0ee81c0_12_attention_cu_b5d54e9012GatFwdKernelIddiLb1EEEvNS_7GatArgsEPKT1_S5_S5_PKT_"
       "PKT0_SB_SB_PS6_PS9_i")
PTXAS = f"""\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '{SOFTMAX}' for 'sm_90'
ptxas info    : Function properties for {SOFTMAX}
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
ptxas info    : Compile time = 42.829 ms
ptxas info    : Compiling entry function '{DIMENET}' for 'sm_80'
ptxas info    : Function properties for {DIMENET}
    512 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, used 0 barriers, 512 bytes cumulative stack size, 552 bytes cmem[0]
ptxas info    : Compile time = 310.112 ms
ptxas info    : Compiling entry function '{GAT}' for 'sm_90'
ptxas info    : Function properties for {GAT}
    32 bytes stack frame, 64 bytes spill stores, 68 bytes spill loads
ptxas info    : Used 64 registers, used 0 barriers, 32 bytes cumulative stack size
ptxas info    : Compile time = 25.945 ms
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z10TileKernelIfEvPKT_PS0_' for 'sm_90'
ptxas info    : Function properties for _Z10TileKernelIfEvPKT_PS0_
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 14 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 3.773 ms
"""


@pytest.mark.parametrize("registers, fraction, limiter", [
    (32, 1.0, "threads"),  # 1024 registers a warp: 64 warps fit, the SM's maximum
    (40, 0.75, "registers"),  # 1280 a warp: 51 warps, 6 blocks of 8
    (64, 0.5, "registers"),  # 2048 a warp: 32 warps, 4 blocks
    (72, 0.375, "registers"),  # 2304 a warp: 28 warps, 3 blocks
    (128, 0.25, "registers"),  # 4096 a warp: 16 warps, 2 blocks
    (255, 0.125, "registers"),  # 8160 -> 8192 a warp: 8 warps, 1 block
    (256, 0.0, "registers"),  # over the per-thread maximum: no launch
])
def test_occupancy_by_registers(registers, fraction, limiter):
    occ = gr.occupancy(registers, 256)
    assert (occ.fraction, occ.limiter) == (fraction, limiter)
    assert occ.blocks == int(fraction * 8)


def test_occupancy_by_shared_memory_and_block_size():
    # 48 KiB + 1 KiB reserved a block: 233,472 // 50,176 = 4 blocks of 8 warps
    assert gr.occupancy(32, 256, shared=48 * 1024) == gr.Occupancy(0.5, 4, "shared memory")
    # 57,344 + 1,024 = 58,368 fits exactly 4 times; one byte more rounds up to 58,496 and fits 3 times
    assert gr.occupancy(32, 256, shared=57344).blocks == 4
    assert gr.occupancy(32, 256, shared=57345) == gr.Occupancy(0.375, 3, "shared memory")
    # the gno kernels' 1,928 bytes at hidden 64, features 32 do not bind
    assert gr.occupancy(32, 256, shared=1928).limiter == "threads"
    # 32-thread blocks run into the 32-blocks-per-SM limit at half the warps
    assert gr.occupancy(32, 32) == gr.Occupancy(0.5, 32, "blocks")
    assert gr.occupancy(32, 1024) == gr.Occupancy(1.0, 2, "threads")


def test_parse_ptxas():
    entries = gr.parse_ptxas(PTXAS)
    assert [(e.arch, e.registers, e.stack, e.spill_stores, e.spill_loads, e.shared) for e in entries] == [
        ("sm_90", 40, 0, 0, 0, 0), ("sm_80", 96, 512, 0, 0, 0), ("sm_90", 64, 32, 64, 68, 0),
        ("sm_90", 14, 0, 0, 0, 1024)]
    assert entries[3].mangled == "_Z10TileKernelIfEvPKT_PS0_"


def test_the_launcher_keeps_each_files_report_and_the_budget_reads_them(tmp_path):
    """tools/ptxas_reports.py runs the compiler with ``-Xptxas=-v`` appended, passes its output and status through
    and keeps the report of a ``.cu`` source; ``read_reports`` reads them back, naming the files without one."""
    fake = tmp_path / "nvcc"  # prints the report and the arguments it got, fails when told to
    fake.write_text(f"#!/bin/sh\ncat <<'END' >&2\n{PTXAS}END\necho \"args: $*\" >&2\n"
                    "case \"$*\" in *fail*) exit 3;; esac\n")
    fake.chmod(0o755)
    launcher = [sys.executable, str(gr.ROOT / "tools" / "ptxas_reports.py"), str(tmp_path / "reports"), str(fake)]
    done = subprocess.run([*launcher, "-c", "ffi/cuda/gat.cu", "-o", "gat.o"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0 and "Used 40 registers" in done.stderr
    report = (tmp_path / "reports" / "gat.ptxas").read_text()
    assert report.endswith("args: -c ffi/cuda/gat.cu -o gat.o -Xptxas=-v\n")
    assert gr.parse_ptxas(report) == gr.parse_ptxas(PTXAS)
    link = subprocess.run([*launcher, "-shared", "x.o", "fail"], capture_output=True, text=True, check=False)
    assert link.returncode == 3 and "-Xptxas" not in link.stderr  # no .cu: run as it is
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["gat.ptxas"]

    sources = [gr.FFI / "cuda" / "gat.cu", gr.FFI / "cuda" / "gno.cu"]
    with pytest.raises(SystemExit, match=r"no ptxas report in .* for gno\.cu"):
        gr.read_reports(sources, tmp_path / "reports")
    (tmp_path / "reports" / "gno.ptxas").write_text("")
    assert gr.read_reports(sources, tmp_path / "reports") == {sources[0]: report, sources[1]: ""}


def test_shorten_names_enums_and_bools():
    enums = {("Op", 1): "kCopyEdge", ("Mask", 2): "kByNbr"}
    params = {"SddmmKernel": ["typename T", "typename I", "Op op", "bool kDot", "Mask M"],
              "GatFwdKernel": ["typename S", "typename T", "typename I", "bool kEdge"]}
    sddmm = ("void jgo::(anonymous namespace)::SddmmKernel<double, long, (jgo::Op)1, false, (jgo::Mask)2>(jgo::Sddmm"
             "Args, long const*, long const*, long const*, double const*, double const*, long const*, double*, int)")
    assert gr.shorten(sddmm, enums, params) == "SddmmKernel<double, long, kCopyEdge, !kDot, kByNbr>"
    gat = "void jgo::(anonymous namespace)::GatFwdKernel<__half, float, int, true>(jgo::GatArgs, __half const*)"
    assert gr.shorten(gat, enums, params) == "GatFwdKernel<__half, float, int, kEdge>"
    assert gr.shorten("void jgo::Plain(float*)") == "Plain"


@pytest.mark.skipif(not (shutil.which("cu++filt") or shutil.which("c++filt")), reason="no cu++filt or c++filt")
def test_demangle():
    mangled = [e.mangled for e in gr.parse_ptxas(PTXAS)]
    names = gr.demangle(mangled)
    assert names[3] == "void TileKernel<float>(float const*, float*)"
    assert names[2].startswith("void jgo::(anonymous namespace)::GatFwdKernel<double, double, int, true>(")


def test_template_params_and_enums_of_the_sources():
    params = gr.read_template_params("template <typename T, bool kW>\n__global__ void __launch_bounds__(256, 4) "
                                     "K(const T* x) {}\ntemplate <typename T>\n__device__ T F(T x) { return x; }")
    assert params == {"K": ["typename T", "bool kW"]}
    enums = gr.read_enums(sorted((gr.FFI / "common" / "jgo").glob("*.h")))
    assert enums[("Reduce", 0)] == "kSum" and enums[("Op", 0)] == "kCopyNode"


def kernel(name, registers, spill=0, file="x.cu"):
    entry = gr.Entry("_Z1k", "sm_90", registers, 0, spill, spill, 0)
    occ = gr.occupancy(registers, 256)
    reason = gr.reason_for(file, name) if occ.fraction < gr.MIN_OCCUPANCY else None
    return gr.Kernel(file, name, {"sm_80": entry, "sm_90": entry}, 0, occ, reason)


def test_check_rejects_spills_and_unexplained_low_occupancy(monkeypatch):
    monkeypatch.setattr(gr, "REASONS", {"x.cu:Slow<double, *": "float64 accumulators"})
    ok, explained = kernel("Fast<float>", 40), kernel("Slow<double, int>", 80)
    assert explained.reason == "float64 accumulators"
    assert gr.failures([ok, explained]) == []
    assert gr.failures([kernel("Slow<float>", 80)]) == ["x.cu: Slow<float>: occupancy 37.5%"]
    assert gr.failures([kernel("Fast<float>", 40, spill=8)]) == ["x.cu: Fast<float>: spills"]
    text = gr.render([ok, explained], 256, "preamble", details=True)
    assert "1. `x.cu:Slow<double, *` (1): float64 accumulators" in text and "| reason 1 |" in text
    assert "<details><summary>x.cu (2 kernels)</summary>" in text


def test_write_section_replaces_or_appends(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\nintro\n")
    gr.write_section(path, "first\n")
    gr.write_section(path, "second\n")
    text = path.read_text()
    assert text == f"# Benchmarks\n\nintro\n\n{gr.BEGIN}\nsecond\n{gr.END}\n"


def test_docstring_examples():
    result = doctest.testmod(gr, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed: no real compile")
@pytest.mark.exhaustive  # an end-to-end run of the tool, for CI
def test_real_compile_of_one_file():
    """ffi/cuda/edge_list.cu, the smallest file of kernels, for sm_80 and sm_90 (CI's GPU-budget leg reads every
    file's report from the plugin's own build)."""
    source = gr.FFI / "cuda" / "edge_list.cu"
    kernels = gr.collect(gr.compile_all([source], jobs=1), gr.block_size())
    names = {k.name for k in kernels}
    assert len(names) == len(kernels) >= 2 and all(n.startswith("FirstBadIdKernel<") for n in names), names
    for k in kernels:
        assert set(k.by_arch) == set(gr.ARCHS) and all(e.registers > 0 for e in k.by_arch.values())
        assert 0 < k.occupancy.fraction <= 1


def test_the_budget_compiles_what_the_cuda_plugin_builds():
    """The sources, real architectures, optimisation and defines of cmake/cuda-plugin.cmake (a Release build:
    -O3 -DNDEBUG), so that the budget is the plugin's."""
    cmake = (gr.ROOT / "cmake" / "cuda-plugin.cmake").read_text()
    ptx, codes = re.search(r'set\(JGO_CUDA_GENCODE "arch=compute_(\d+),code=\[([^\]]+)\]"\)', cmake).groups()
    assert ptx == gr.PTX and sorted(c for c in codes.split(",") if c.startswith("sm_")) == sorted(gr.ARCHS)
    assert f"compute_{ptx}" in codes.split(",")  # the PTX that later GPUs compile
    assert "add_library(jgo_cuda_kernels OBJECT ${JGO_CUDA_SOURCES})" in cmake
    assert "file(GLOB JGO_CUDA_SOURCES RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} CONFIGURE_DEPENDS ffi/cuda/*.cu)" in (
        gr.ROOT / "CMakeLists.txt").read_text()
    defines = re.findall(r"target_compile_definitions\(jgo_cuda_kernels PRIVATE ([^)]*)\)", cmake)
    command = gr.nvcc_command(gr.FFI / "cuda" / "gat.cu", Path("gat.fatbin"), "include")
    assert [f"-D{d}" for d in " ".join(defines).split()] == [c for c in command if c.startswith("-DJGO")]
    assert {"-O3", "-DNDEBUG", "-std=c++17"} <= set(command)
    assert f"--generate-code=arch=compute_{ptx},code=[{','.join(gr.ARCHS)}]" in command
