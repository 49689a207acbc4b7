"""The neighbour-sampling benchmark (benchmarks/sampling.py): every installed sampler does the same work
(the first batch's hop into the seeds has sum(min(in-degree, 10)) edges, a NumPy count), a sampler that
does other work stops the run, the suite's kernel and pure-JAX sampler agree exactly, and the table."""

import importlib.util

import jax
import numpy as np
import pytest

from benchmarks import sampling  # importable through conftest.py


def test_every_installed_sampler_runs_and_does_the_same_work():
    records, missing = sampling.run(0.01, repeats=1, log=lambda *_: None)
    ran = {r["library"] for r in records}
    assert "jaxgraphops" in ran
    for library, module in (("DGL", "dgl"), ("PyG", "torch_geometric")):
        if importlib.util.find_spec(module) is None:
            assert library in missing
    assert ran | set(missing) == set(sampling.LIBRARIES)
    for r in records:
        assert r["seeds_per_s"] > 0 and r["ms_per_batch"] > 0
        assert np.isclose(r["seeds_per_s"] * r["ms_per_batch"] / 1e3, sampling.BATCH)


def test_a_sampler_that_samples_other_edges_stops_the_run(monkeypatch):
    def too_few(src, dst, n, seeds):
        run, hop1_edges = sampling._jax_sampler(src, dst, n, seeds)
        return run, lambda: hop1_edges() - 1

    monkeypatch.setattr(sampling, "SAMPLERS", {"jaxgraphops": too_few})
    with pytest.raises(AssertionError, match="jaxgraphops sampled .* edges into the first batch's seeds"):
        sampling.run(0.01, repeats=1, log=lambda *_: None)


def test_suite_kernel_and_reference_draw_the_same_blocks():
    (name, _, pass_, kernel, reference, operands), = sampling.cases(0.01)
    assert (name, pass_) == ("sample_blocks", "sampling")
    ours, ref = kernel(*operands), reference(*operands)
    assert [b.graph.n_src for b in ours] == [1024 * 11 * 26, 1024 * 11]
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_table_lists_speedups_and_the_libraries_that_did_not_run():
    records = [{"library": "jaxgraphops", "seeds_per_s": 40_000.0, "ms_per_batch": 25.6},
               {"library": "DGL", "seeds_per_s": 10_000.0, "ms_per_batch": 102.4}]
    text = sampling.table(records, {"PyG": "needs pyg-lib"})
    assert "| jaxgraphops | 40,000 | 25.60 | — |" in text
    assert "| DGL | 10,000 | 102.40 | **4.00x** |" in text
    assert "| PyG | unavailable: needs pyg-lib | — | — |" in text
