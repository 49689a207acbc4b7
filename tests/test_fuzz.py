"""The fuzzer of the public API (tests/fuzz.py, issue 19): the quick profile in CI, the long one on demand.

    pytest tests/test_fuzz.py                          # fuzz.SMOKE_CASES cases (fuzz.QUICK_CASES in CI's profile)
    JGO_FUZZ_CASES=50000 pytest tests/test_fuzz.py     # long
    python tests/fuzz.py --cases 50000                 # the same, without pytest
    python tests/fuzz.py --replay SEED                 # one case, in this process

Every case must end ``ok`` (the reference's answer), ``clear_error`` (a clear exception on invalid input) or
``xfail`` (a known gap or kernel defect, each behind a flag in fuzz.py); never a crash, a hang, a silent
difference, an unclear error or a rejected valid input.
"""

import os
import sys
import time

import fuzz
import numpy as np
import pytest
from conftest import PROFILE


def test_fuzz_profile(capsys):
    default = fuzz.SMOKE_CASES if PROFILE == "quick" else fuzz.QUICK_CASES
    n = int(os.environ.get("JGO_FUZZ_CASES", default))
    t0 = time.perf_counter()
    counts, failures, stats = fuzz.run_fuzz(n)
    seconds = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\nfuzz: {n} cases in {seconds:.0f} s: {fuzz.format_counts(counts)}")
        for reason, k in stats["xfail"].items():
            print(f"  xfail {k:6d}  {reason}")
    assert sum(counts.values()) == n
    report = "\n".join(f"{f['outcome']}: {f['label']}\n    {f['detail']}" for f in failures[:20])
    assert not failures, f"{len(failures)} failing cases ({fuzz.format_counts(counts)}):\n{report}"
    for outcome in fuzz.FAILURES:
        assert counts.get(outcome, 0) == 0


def test_harness_reports_a_crash_and_a_hang_by_seed():
    """A worker that dies is a crash of the case it was running, one that stops answering a hang; both are
    restarted and the other cases of the batch still run."""
    env = dict(os.environ, JGO_FUZZ_SELFTEST="crash=3,hang=9,crash=30")
    counts, failures, stats = fuzz.run_fuzz(40, workers=2, timeout=5, env=env)
    assert counts == {"ok": 37, "crash": 2, "hang": 1}
    assert [(f["seed"], f["outcome"]) for f in failures] == [(3, "crash"), (9, "hang"), (30, "crash")]
    assert "--replay 3" in failures[0]["label"] and "exited with -11" in failures[0]["detail"]
    assert stats["restarts"] == 3


def test_cases_are_a_function_of_their_seed():
    for seed in (0, 17, 1234):
        a, b = fuzz.make_case(seed), fuzz.make_case(seed)
        assert a.label() == b.label()
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a.arrays, b.arrays))
    # REPEAT consecutive seeds share their structure (and compiled functions), not their data
    group = [fuzz.make_case(s) for s in range(fuzz.REPEAT)]
    assert len({(c.target, repr(c.config), c.n_src, c.n_dst, c.dtype) for c in group
                if c.mutation is None or not c.mutation.startswith("input_")}) <= 1
    assert fuzz.BATCH % fuzz.REPEAT == 0


def test_the_quick_profile_covers_the_api():
    """The first QUICK_CASES seeds reach every target and layer, both modes and directions, every dtype,
    invalid edge lists under jit and hand-built graphs."""
    cases = [fuzz.make_case(s) for s in range(fuzz.QUICK_CASES)]
    assert {c.target for c in cases} == set(fuzz.TARGETS)
    assert {dict(c.config)["layer"] for c in cases if c.target == "layer"} == set(fuzz.LAYERS)
    assert {(c.mode, c.grad) for c in cases} == {("eager", False), ("eager", True), ("jit", False), ("jit", True)}
    assert {c.dtype for c in cases} == {"float32", "float64", "bfloat16", "float16"}
    assert {c.index_dtype for c in cases} == {"int32", "int64"}
    mutations = {c.mutation for c in cases if c.mutation}
    assert set(fuzz.TRACED_EDGE_MUTATIONS) <= mutations
    assert any(m.startswith("hand_") for m in mutations) and any(m.startswith("input_") for m in mutations)
    assert any(c.special and "nan" in c.special for c in cases)
    assert sum(c.mutation is None for c in cases) > 0.4 * len(cases)
    # every padding mode (tests/fuzz_padding.py), blocks through several ops, layers on padded graphs
    padded = [c for c in cases if c.padding]
    assert {c.padding for c in padded} == set(fuzz.fuzz_padding.MODES)
    assert len({c.target for c in padded if c.padding == "block"}) >= 4
    assert {c.target for c in padded} >= {"gspmm", "gsddmm", "edge_softmax", "layer"}
    assert all(c.mutation is None and c.build == "edges" for c in padded)


def test_traced_edge_list_mutations_expect_the_run_time_check():
    """Bad ids in a traced edge list must raise naming Graph.from_edges (jgo_check_edges), never be gated."""
    cases = [c for c in map(fuzz.make_case, range(2000)) if c.mutation in fuzz.TRACED_EDGE_MUTATIONS]
    assert {c.mutation for c in cases} == set(fuzz.TRACED_EDGE_MUTATIONS)
    assert all(c.gate is None for c in cases)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
