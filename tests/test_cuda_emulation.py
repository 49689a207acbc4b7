"""The emulated CUDA platform: the runtime's own tests (C++), the platform switch, which handlers serve
the CPU platform, and every op of the registry (``op_db.py``) with CUDA handlers on them against the pure-JAX
reference. The CUDA kernels are exercised in full by the whole suite run with ``JGO_KERNELS=cuda-emulation``."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from op_db import BY_NAME, results, results_in_child

import jaxgraphops as jgo
from jaxgraphops import _ext

ROOT = Path(__file__).resolve().parent.parent
EMULATION = ROOT / "ffi" / "cuda_emulation"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the emulated runtime's C++ tests")
def test_runtime(tmp_path):
    """Barriers, shuffles (against PTX's definition), ballots, shared memory, atomics, launch limits,
    half conversions and the misuse the runtime must report (ffi/cuda_emulation/tests/runtime_test.cc)."""
    exe = tmp_path / "runtime_test"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{EMULATION}", str(EMULATION / "tests" / "runtime_test.cc"),
                    str(EMULATION / "emulation.cc"), "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0 and "0 failed" in run.stdout, run.stdout + run.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the emulated runtime's C++ tests")
def test_thread_sanitizer_sees_kernel_races(tmp_path):
    """Under ThreadSanitizer the runtime's fibers are TSan fibers ordered only by what CUDA orders
    (launches, barriers): of the runtime tests' kernels exactly the two racy ones are reported,
    a missing __syncthreads and two blocks sharing one global slot."""
    exe = tmp_path / "runtime_test_tsan"
    build = subprocess.run(["g++", "-std=c++17", "-O1", "-g", "-fsanitize=thread", f"-I{EMULATION}", "-c",
                            str(EMULATION / "tests" / "runtime_test.cc"), "-o", str(tmp_path / "t.o")],
                           capture_output=True, text=True)
    if build.returncode != 0 and "tsan" in build.stderr.lower():
        pytest.skip(f"no ThreadSanitizer runtime: {build.stderr[-200:]}")
    assert build.returncode == 0, build.stderr
    subprocess.run(["g++", "-std=c++17", "-O1", "-g", "-DJGO_EMULATION_TSAN", f"-I{EMULATION}", "-c",
                    str(EMULATION / "emulation.cc"), "-o", str(tmp_path / "e.o")], check=True)
    subprocess.run(["g++", "-fsanitize=thread", str(tmp_path / "t.o"), str(tmp_path / "e.o"), "-o", str(exe)],
                   check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=dict(os.environ, TSAN_OPTIONS="exitcode=0"))
    assert "0 failed" in run.stdout, run.stdout
    racy = sorted(set(re.findall(r"WARNING: ThreadSanitizer: data race.*?\n.*?\n\s+#0 (\w+)", run.stderr, re.S)))
    assert racy == ["RotateNoBarrier", "SharedScratchRace"], run.stderr[-3000:]


def test_kernel_platform_follows_the_environment():
    want = "cuda-emulation" if os.environ.get("JGO_KERNELS", "").strip().lower() == "cuda-emulation" else "cpu"
    assert jgo.kernel_platform() == want


def test_unknown_kernel_choice_is_an_import_error(tmp_path):
    env = dict(os.environ, JGO_KERNELS="gpu")
    run = subprocess.run([sys.executable, "-c", "import jaxgraphops"], cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert run.returncode != 0 and "JGO_KERNELS='gpu' is not one of auto, cpu, cuda, cuda-emulation" in run.stderr


@pytest.mark.skipif(not _ext.with_cuda_emulation, reason="a build without the emulated CUDA handlers "
                    "(JGO_CUDA_EMULATION=ON builds them)")
def test_a_program_from_jaxs_compilation_cache_calls_the_emulated_handlers(tmp_path):
    """A program compiled with the CPU handlers and read back from JAX's persistent compilation cache calls the
    handlers registered under its targets' names when it runs: the emulated ones with
    JGO_KERNELS=cuda-emulation (CI's emulated run shares one cache with the CPU run before it)."""
    script = ("import jax, numpy as np, jaxgraphops as jgo\n"
              "g = jgo.Graph.from_edges(np.array([0, 1, 2, 3, 0]), np.array([1, 2, 3, 0, 2]))\n"
              "print(jax.jit(lambda x: jgo.gspmm(g, x, reduce='max'))(np.arange(8.0).reshape(4, 2)).sum())\n")
    cache, record = tmp_path / "cache", tmp_path / "calls"
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    env.pop("JGO_FFI_RECORD", None)
    runs = []
    for kernels, extra in (("cpu", {}), ("cuda-emulation", {"JGO_FFI_RECORD": str(record)})):
        run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=dict(env, JGO_KERNELS=kernels, **extra),
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]
        runs.append((run.stdout.strip().splitlines()[-1], sorted(p.name for p in cache.iterdir())))
    assert runs[0] == runs[1] == ("28.0", runs[0][1]) and runs[0][1]  # same answer, nothing compiled again
    assert [p.name for p in record.iterdir() if p.name.startswith("jgo_spmm")]  # the emulated handler ran


def _emulated_child(path):
    """In the ``JGO_KERNELS=cuda-emulation`` process: the registry's cases on the emulated CUDA handlers."""
    import jax

    jax.config.update("jax_enable_x64", True)
    assert jgo.kernel_platform() == "cuda-emulation", jgo.kernel_platform()
    np.savez(path, **results(None))


@pytest.mark.skipif(not _ext.with_cuda_emulation,
                    reason="this build has no emulated CUDA handlers (install with JGO_CUDA_EMULATION=ON)")
def test_every_op_on_the_emulated_cuda_handlers(tmp_path, x64):
    """Every case of every op with CUDA handlers (``OpInfo.cuda``), forward and first-order gradients in float64,
    run by the emulated CUDA handlers in a child process, equals the pure-JAX reference (``impl="xla"``)."""
    got = results_in_child(tmp_path, "cuda-emulation", "test_cuda_emulation._emulated_child")
    want = results("xla")
    assert sorted(got) == sorted(want)
    checked = set()
    for key, w in want.items():
        op = key.split("/")[0]
        if BY_NAME[op].cuda:
            np.testing.assert_allclose(got[key], w, rtol=1e-9, atol=1e-9, err_msg=key)
            checked.add(op)
    assert checked == {op.name for op in BY_NAME.values() if op.cuda and op.cases is not None}
