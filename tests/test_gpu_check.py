"""The prepared GPU check, ``tools/gpu_check.sh`` (issue 31 item 6), dry-run on the CPU: every step's plumbing at
small scale (``DRY_RUN=1``: the CPU kernels, graphs at 1% of their size), with fakes for ``nvidia-smi``, ``ncu``
and the probe binary; the output folder's files (at most 8, no folders), the per-step limits, the results kept
by a step cut by its limit; and the probe program compiled for sm_90."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_check.sh"
OUTPUTS = {"summary.txt", "results.jsonl", "failures.txt", "ncu.csv", "logs.tar.gz"}
# nvidia-smi options that change the GPU (clocks, power, MIG, persistence, compute mode, ECC, reset)
FORBIDDEN = re.compile(r"^-(lgc|rgc|lmc|rmc|ac|rac|pl|pm|mig|c|e|r)$|^--(lock|reset|applications|power-limit|"
                       r"persistence|compute-mode|multi-instance|ecc|gpu-reset)")


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def fakes(tmp_path):
    """A folder for PATH with a fake ``nvidia-smi`` and ``ncu`` (each logs its arguments to calls.jsonl; ncu writes
    a small CSV to its --log-file and then runs the profiled program), and a fake probe binary printing two
    probe objects (then sleeping FAKE_PROBE_SLEEP seconds, to be cut by the step's limit)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.jsonl"
    _executable(bin_dir / "nvidia-smi", textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        open({str(log)!r}, "a").write(json.dumps(["nvidia-smi", *sys.argv[1:]]) + "\\n")
        print("fake nvidia-smi: NVIDIA H200 (dry run)")
        """))
    _executable(bin_dir / "ncu", textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, sys
        args = sys.argv[1:]
        open({str(log)!r}, "a").write(json.dumps(["ncu", *args]) + "\\n")
        flags = {{"--csv"}}
        i = 0
        while i < len(args) and args[i].startswith("--"):
            i += 1 if args[i] in flags else 2
        options = dict(zip(args[:i:2], args[1:i:2]))
        with open(args[args.index("--log-file") + 1], "w") as f:
            f.write('"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\\n')
            f.write('"0","fake_kernel","SpeedOfLight","Duration","ns","1,000"\\n')
        os.execvp(args[i], args[i:])
        """))
    probes = _executable(tmp_path / "gpu_probes", textwrap.dedent("""\
        #!/usr/bin/env bash
        [[ ${1:-} == --help ]] && exit 0
        echo '{"probe": "copy", "method": "kernel", "bytes": 1024, "ms": 0.001, "gbps": 2.0}'
        echo '{"probe": "hub", "edges": 13012, "mlp": 1, "ns_per_edge": 500}'
        [[ ${1:-} == --ncu ]] || sleep "${FAKE_PROBE_SLEEP:-0}"
        """))
    return bin_dir, probes, log


def _run(out, fakes, tmp_path, **env):
    bin_dir, probes, _ = fakes
    full = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "DRY_RUN": "1",
            "WORK": str(tmp_path / "work"), "PROBES": str(probes), "PYTHON": sys.executable, **env}
    for name in [n for n in full if n.startswith("PYTEST_") or n == "JGO_TEST_FAILURES"]:
        del full[name]  # an outer pytest-xdist worker's: the inner pytest is a controller of its own
    return subprocess.run(["bash", str(SCRIPT), str(out)], env=full, capture_output=True, text=True, timeout=600)


def _records(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _check_outputs(out):
    files = list(out.iterdir())
    assert len(files) <= 8 and all(f.is_file() for f in files), files
    assert {f.name for f in files} <= OUTPUTS, files


def test_a_step_cut_by_its_limit_keeps_what_it_measured(tmp_path, fakes):
    """The probe step (a fake binary that prints two objects, then hangs) is stopped at its 3 s limit: its two
    objects stay in results.jsonl, followed by the step's record saying it timed out; the run goes on with ncu,
    which profiles the probes with --clock-control none and the four sections, its CSV rows named by case."""
    out = tmp_path / "out"
    run = _run(out, fakes, tmp_path, PART="2", STEPS="probes ncu", LIMIT_PROBES="3", LIMIT_NCU="20",
               FAKE_PROBE_SLEEP="60", NCU_CASES_OVERRIDE=" ")
    assert run.returncode == 1, run.stdout + run.stderr  # a step timed out
    records = _records(out)
    probes = [r for r in records if "probe" in r]
    assert [p["probe"] for p in probes[:2]] == ["copy", "hub"]
    step = {r["step"]: r for r in records if "rc" in r}
    assert step["probes"]["timed_out"] and step["probes"]["rc"] == 124 and step["probes"]["seconds"] < 15
    assert step["ncu"]["rc"] == 0
    summary = (out / "summary.txt").read_text()
    assert re.search(r"probes\s+TIMED OUT \(exit 124\)\s+\d+ s of 3 s", summary), summary
    calls = [json.loads(line) for line in fakes[2].read_text().splitlines()]
    [ncu] = [c for c in calls if c[0] == "ncu"]
    assert ncu[ncu.index("--clock-control") + 1] == "none"
    sections = [ncu[i + 1] for i, a in enumerate(ncu) if a == "--section"]
    assert sections == ["SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "WarpStateStats"]
    assert ncu[ncu.index("--kernel-name") + 1].startswith("regex:probe_") and ncu[-1] == "--ncu"
    rows = (out / "ncu.csv").read_text().splitlines()
    assert rows[0].startswith('"case","ID"') and rows[1].startswith('"probes","0","fake_kernel"'), rows
    _check_outputs(out)


@pytest.mark.exhaustive  # end to end: a minute on a quiet 2-core machine
def test_dry_run_of_every_step(tmp_path, fakes):
    """The whole check on the CPU at 1% scale: the install of a (fake, dependency-free) wheel with pip --no-index
    --no-deps --target; the devices record; a test file with a planted failure, whose report lands in
    failures.txt and whose counts in results.jsonl; the timing step's records (jaxgraphops' CPU kernels against
    the XLA composition, bit for bit over repeated runs; cuSPARSE recorded as unavailable); the probes; ncu on a
    timing case through --ncu-case; no nvidia-smi call that changes the GPU; at most 8 files."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _fake_wheel(wheels)
    tests = tmp_path / "planted"
    tests.mkdir()
    # the repository's test hooks (JGO_TEST_FAILURES among them) for a test folder outside it
    (tests / "conftest.py").write_text(
        "import runpy\n"
        f"globals().update({{k: v for k, v in runpy.run_path({str(ROOT / 'tests' / 'conftest.py')!r}).items() "
        "if k.startswith('pytest_')})\n")
    (tests / "test_planted.py").write_text(
        "def test_passes():\n    assert 1 + 1 == 2\n\n"
        "def test_fails_on_purpose():\n    assert 1 + 1 == 3, 'planted failure'\n")
    out = tmp_path / "out"
    run = _run(out, fakes, tmp_path, WHEELS=str(wheels), TESTS_OPS="tests/test_graph.py -k from_edges",
               TESTS_REST=str(tests / "test_planted.py"), NCU_CASES_OVERRIDE="spmm/uniform/copy_u/F64:xla",
               TIMING_ARGS="--only spmm/uniform/copy_u/F64 report/pool_sum --repeats 2 --determinism 3")
    text = run.stdout + run.stderr
    assert run.returncode == 1, text  # the planted failure
    records = _records(out)
    step = {r["step"]: r for r in records if "rc" in r}
    assert list(step) == ["install", "devices", "tests-ops", "tests-rest", "timing", "probes", "ncu"], text
    assert {name: r["rc"] for name, r in step.items() if r["rc"]} == {"tests-rest": 1}, text
    assert all(r["seconds"] <= r["limit"] for r in step.values())

    assert (tmp_path / "work" / "site" / "jgo_dry_wheel" / "__init__.py").exists()
    [env] = [r["env"] for r in records if r.get("step") == "devices" and "env" in r]
    assert env["backend"] == "cpu" and env["versions"]["jax"] and env["differs_from_checkout"] == []

    counts = {r["step"]: r for r in records if "passed" in r}
    assert counts["tests-ops"]["passed"] >= 1 and counts["tests-ops"]["failed"] == 0
    assert (counts["tests-rest"]["passed"], counts["tests-rest"]["failed"]) == (1, 1)
    failures = (out / "failures.txt").read_text()
    assert "test_planted.py::test_fails_on_purpose (call)" in failures and "planted failure" in failures

    timing = [r for r in records if r.get("step") == "timing" and "case" in r]
    by = {(r["case"], r["impl"], r["pass"]): r for r in timing}
    mine = by[("spmm/uniform/copy_u/F64", "jaxgraphops", "forward")]
    assert mine["distinct_outputs"] == 1 and mine["determinism_runs"] == 3 and mine["ms"] > 0
    assert mine["rel_diff"] < 1e-5  # the CPU kernel against the XLA composition
    assert "error" in by[("spmm/uniform/copy_u/F64", "cusparse-alg3", "forward")]  # no GPU, no CuPy here
    assert {p for (c, i, p) in by if c == "report/pool_sum" and i == "jaxgraphops"} == {"forward", "forward+backward"}
    assert [r["probe"] for r in records if "probe" in r] == ["copy", "hub"]

    calls = [json.loads(line) for line in fakes[2].read_text().splitlines()]
    smi = [c[1:] for c in calls if c[0] == "nvidia-smi"]
    assert smi and not [a for c in smi for a in c if FORBIDDEN.search(a)], smi
    ncu_runs = [c for c in calls if c[0] == "ncu"]
    assert [c[c.index("--ncu-case") + 1] for c in ncu_runs if "--ncu-case" in c] == ["spmm/uniform/copy_u/F64"]
    assert all(c[c.index("--clock-control") + 1] == "none" for c in ncu_runs)
    assert "profiled one forward of xla on spmm/uniform/copy_u/F64" in text
    _check_outputs(out)
    assert OUTPUTS <= {f.name for f in out.iterdir()}


def _fake_wheel(folder: Path) -> None:
    """A minimal pure-Python wheel (``jgo_dry_wheel``) for the install step's pip --no-index --no-deps --target."""
    import zipfile

    name = "jgo_dry_wheel-0.0.1"
    files = {"jgo_dry_wheel/__init__.py": "",
             f"{name}.dist-info/METADATA": "Metadata-Version: 2.1\nName: jgo-dry-wheel\nVersion: 0.0.1\n",
             f"{name}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                        "Tag: py3-none-any\n"}
    files[f"{name}.dist-info/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{name}.dist-info/RECORD"])
    with zipfile.ZipFile(folder / f"{name}-py3-none-any.whl", "w") as z:
        for path, text in files.items():
            z.writestr(path, text)


def test_budget_table_matches_the_limits():
    """The header's budget table is the script's: every step's limit per PART; each PART ends inside the
    timeout_s of its run call (the limits, 5 s per step to end a timed-out one, 15 s of the script's own), and
    the calls, a 2-minute start and a minute of transfers fit the 15-minute lease with a minute to spare."""
    text = SCRIPT.read_text()
    tables = {part: {step: int(s) for step, s in re.findall(r"\[([a-z-]+)\]=(\d+)", body)}
              for part, body in re.findall(r"declare -A BUDGET_(\w+)=\(([^)]*)\)", text)}
    header = {step: cells.split()[:3] for step, cells in
              re.findall(r"^#   (install|devices|tests-ops|tests-rest|timing|probes|ncu) +(.*)$", text, re.M)}
    [one_call] = map(int, re.findall(r"^#   timeout_s: (\d+)$", text, re.M))
    two_calls = dict(re.findall(r"^#   PART=(\d) .*\(timeout_s (\d+)\)$", text, re.M))
    timeouts = {"all": one_call, **{part: int(s) for part, s in two_calls.items()}}
    for column, part in enumerate(("all", "1", "2")):
        documented = {step: int(cells[column]) for step, cells in header.items() if cells[column] != "-"}
        assert documented == tables[part], (part, documented, tables[part])
        assert sum(tables[part].values()) + 5 * len(tables[part]) + 15 <= timeouts[part], part
    assert 120 + one_call + 60 <= 900 - 60 and 120 + timeouts["1"] + timeouts["2"] + 60 <= 900 - 60


def test_unknown_part_or_step_is_refused(tmp_path):
    for env, message in (({"PART": "3"}, "PART must be all, 1 or 2"),
                         ({"PART": "1", "STEPS": "timing"}, "timing is not a step of PART=1")):
        run = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out")], env={**os.environ, **env},
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and message in run.stderr


def test_the_two_test_steps_split_the_suite():
    """``--list-tests``: the op families' files and the rest are disjoint, both non-empty, and with the files
    that need no GPU (the script's NOT_ON_GPU) they are every test file. (The pattern once spanned two lines, so
    grep failed, the rest's list came back empty and pytest ran the whole suite in that step: the first H200
    run, 2026-11-30.)"""
    run = subprocess.run(["bash", str(SCRIPT), "--list-tests"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and not run.stderr, run.stderr
    lines = run.stdout.split()
    ops, rest = lines[1:lines.index("tests-rest")], lines[lines.index("tests-rest") + 1:]
    assert lines[0] == "tests-ops" and ops and rest and not set(ops) & set(rest)
    assert "tests/test_gspmm.py" in ops and "tests/test_nn_layers.py" in rest
    skipped = {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py")} - set(ops) - set(rest)
    assert "tests/test_packaging.py" in skipped and "tests/test_cuda_emulation.py" in skipped
    assert all(re.match(r"tests/test_(packaging|docs_|docstrings|import_direction|examples_|benchmarks|gpu_|"
                        r"versions|cuda_emulation)", f) for f in skipped), skipped


def test_distinct_outputs_counts_bitwise_differences():
    """benchmarks.gpu_check's determinism count: equal bits are one output; one ulp, another dtype, another shape
    or a NaN payload are another (a NaN equals no NaN by value, but the same NaN bits are the same output)."""
    from benchmarks import gpu_check

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    ulp = a.copy()
    ulp[1, 2] = np.nextafter(ulp[1, 2], np.float32(np.inf))
    nan = a.copy()
    nan[0, 0] = np.nan
    other_nan = nan.view(np.uint32).copy()
    other_nan[0, 0] += 1  # another quiet NaN
    for outputs, want in (([a, a.copy()], 1), ([(a, a), (a.copy(), a.copy())], 1), ([a, ulp, a], 2),
                          ([a, a.astype(np.float64)], 2), ([a, a.reshape(3, 2)], 2), ([nan, nan.copy()], 1),
                          ([nan, other_nan.view(np.float32)], 2)):
        results = iter(outputs)
        assert gpu_check.distinct_outputs(lambda: next(results), lambda r: r, len(outputs)) == want, outputs


@pytest.mark.exhaustive
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is not installed")
def test_probe_program_compiles_for_sm90(tmp_path):
    """tools/gpu_probes.cu compiles for sm_90 with the CUDA runtime linked statically, without spills (what
    --prepare builds and the GPU machine runs)."""
    build = subprocess.run(["nvcc", "-O3", "-std=c++17", "-gencode", "arch=compute_90,code=sm_90", "-cudart",
                            "static", "-Xptxas", "-v", "-o", str(tmp_path / "gpu_probes"),
                            str(ROOT / "tools" / "gpu_probes.cu")], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    assert re.findall(r"(\d+) bytes spill stores", build.stderr) and not [
        s for s in re.findall(r"(\d+) bytes spill stores", build.stderr) if s != "0"]
    run = subprocess.run([str(tmp_path / "gpu_probes"), "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "usage" in run.stdout
