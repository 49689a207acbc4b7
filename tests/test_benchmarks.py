"""The peer report's building blocks (benchmarks/): the synthetic graph, the same-work check, every
installed library's implementation of every case against jaxgraphops, and one end-to-end run that
writes the tables and the plots."""

import importlib.util

import numpy as np
import pytest

from benchmarks import report, workloads  # importable through conftest.py
from benchmarks.cases import cases
from benchmarks.runners import IMPLEMENTATIONS


def test_power_law_graph_is_simple_deterministic_and_heavy_tailed():
    src, dst = workloads.power_law_graph(5_000, 60_000, seed=1)
    assert src.dtype == dst.dtype == np.int32 and len(src) == len(dst) == 60_000
    assert 0 <= min(src.min(), dst.min()) and max(src.max(), dst.max()) < 5_000
    assert len(np.unique(src.astype(np.int64) * 5_000 + dst)) == 60_000  # no multi-edges
    in_degree = np.bincount(dst, minlength=5_000)
    assert in_degree.max() > 20 * in_degree.mean()  # hubs
    assert np.median(in_degree) < in_degree.mean()  # and a long tail of low degrees
    again = workloads.power_law_graph(5_000, 60_000, seed=1)
    np.testing.assert_array_equal(again[0], src)
    np.testing.assert_array_equal(again[1], dst)


def test_same_work_check_rejects_a_different_result():
    case = cases(0.01)[0]
    expected = np.ones((4, 3))
    report._check_same_work(case, "lib", expected + 1e-6, expected)
    with pytest.raises(AssertionError, match="lib disagrees with jaxgraphops on gspmm"):
        report._check_same_work(case, "lib", expected * 1.01, expected)
    with pytest.raises(AssertionError, match="lib disagrees"):
        report._check_same_work(case, "lib", expected[:2], expected)


def _installed(library):
    modules = {"jraph": "jraph", "e3nn-jax": "e3nn_jax", "cuEquivariance naive": "cuequivariance_jax",
               "PyG": "torch_geometric", "PyG CSR spmm": "torch_geometric", "DGL": "dgl",
               "neuraloperator": "neuralop", "Chemprop": "chemprop"}
    return library not in modules or importlib.util.find_spec(modules[library]) is not None


SMALL = cases(0.01)
if importlib.util.find_spec("torch") is not None:
    report._load_peers(gpu=False)


@pytest.mark.parametrize("case", SMALL, ids=[c.key for c in SMALL])
def test_every_installed_library_computes_the_same_op(case):
    """Each implementation's forward agrees with jaxgraphops' (and the XLA reference is always
    there), so the report compares the same work; gradients run for every timed pass."""
    impls = IMPLEMENTATIONS[case.key]
    assert {"jaxgraphops", "XLA reference"} <= set(impls)
    expected = impls["jaxgraphops"](case.data).output()
    for library, make in impls.items():
        if not _installed(library):
            continue
        runner = make(case.data)
        report._check_same_work(case, library, runner.output(), expected)
        assert set(runner.calls) | set(runner.untimed) == set(case.passes)
        for call in runner.calls.values():
            runner.sync(call())


@pytest.mark.exhaustive  # an end-to-end run of the tool, for CI
def test_report_writes_tables_and_plots(tmp_path):
    output = tmp_path / "BENCH.md"
    output.write_text("# Benchmarks\n\nbefore\n")
    args = ["--scale", "0.01", "--repeats", "1", "--only", "gspmm_sum", "--sweep-max-edges", "1e4",
            "--output", str(output), "--plot-dir", str(tmp_path / "plots")]
    assert report.main(args) == 0
    assert report.main(args) == 0  # the second run replaces the first one's section
    text = output.read_text()
    assert text.startswith("# Benchmarks\n\nbefore\n") and text.count("<!-- peer-report-cpu -->") == 1
    assert "| gspmm u_mul_e sum |" in text and "XLA reference" in text and "Scaling sweep" in text
    for name in ("speedups_cpu.png", "scaling_cpu.png", "report_cpu.json"):
        assert (tmp_path / "plots" / name).stat().st_size > 0
