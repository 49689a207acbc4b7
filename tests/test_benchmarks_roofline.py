"""The roofline benchmark (benchmarks/roofline.py): its graph families have the properties it names,
its byte counts match a hand-computed table, its table's arithmetic matches hand-computed cells, and
one run at a tiny scale through ``python -m benchmarks.report --only roofline`` measures every row
(each op checked against its reference inside the run) and writes its section."""

import json

import numpy as np
import pytest

import jaxgraphops as jgo
from benchmarks import report, roofline  # importable through conftest.py


def _bandwidth(g):
    return int(np.abs(np.asarray(g.src, np.int64) - np.asarray(g.dst)).max())


def test_power_law_sources_have_hubs_at_full_scale():
    src, dst = roofline.power_law_sources(200_000, 2_000_000, np.random.default_rng(0))
    out_degree = np.bincount(src, minlength=200_000)
    assert out_degree.max() >= 1000 * out_degree.mean()  # the ">= 1000x the mean"
    assert np.bincount(dst, minlength=200_000).max() < 40  # destinations uniform: no hubs (Poisson(10))


def test_families_at_a_small_scale():
    fams = roofline.families(0.01)
    assert [f.name for f in fams] == ["uniform", "power-law sources", "2-D mesh, shuffled", "2-D mesh, RCM"]
    assert [f.reorderable for f in fams] == [True, True, True, False]
    n = 2000
    for f in fams:
        assert f.graph.n_src == f.graph.n_dst == n
    assert fams[0].graph.n_edges == fams[1].graph.n_edges == 10 * n
    mesh, rcm = fams[2].graph, fams[3].graph
    assert mesh.n_edges == rcm.n_edges and 6 * n <= mesh.n_edges <= 12 * n
    assert _bandwidth(mesh) > 0.8 * n and _bandwidth(rcm) < _bandwidth(mesh) / 10
    # the RCM family is the same graph relabelled: same sorted degree sequence
    np.testing.assert_array_equal(np.sort(np.asarray(mesh.in_degrees())), np.sort(np.asarray(rcm.in_degrees())))


def test_byte_counts_match_a_hand_computed_table():
    g = jgo.Graph.from_edges(np.array([0, 0, 1, 2]), np.array([1, 2, 2, 2]))  # 3 nodes, 4 edges, dst 0 empty
    stats = roofline.graph_stats(g)
    assert stats == {"n_src": 3, "n_dst": 3, "E": 4, "distinct_src": 3, "distinct_dst": 2}
    ops = {(op.name, op.width): op for op in roofline.ops()}
    # offsets 4*4 + neighbour ids 4*4 (+ edge ids 4*4 with edge arrays); rows of 64 float32 = 256 bytes
    expected = {
        ("gspmm copy_u sum", 64): (32 + 3 * 256 + 3 * 256, 32 + 4 * 256 + 3 * 256),
        ("agg_simple sum", 64): (32 + 3 * 256 + 3 * 256, 32 + 4 * 256 + 3 * 256),
        ("gspmm u_mul_e sum", 64): (48 + 16 + 3 * 256 + 3 * 256, 48 + 16 + 4 * 256 + 3 * 256),
        ("gspmm copy_u sum", 128): (32 + 3 * 512 + 3 * 512, 32 + 4 * 512 + 3 * 512),
        ("gsddmm dot(u, v)", 64): (48 + 16 + (3 + 2) * 256, 48 + 16 + (4 + 3) * 256),
        ("edge_softmax", 8): (32 + 2 * 4 * 8 * 4, 32 + 2 * 4 * 8 * 4),
    }
    for key, want in expected.items():
        assert ops[key].nbytes(stats) == want, key
    assert roofline.POOL.nbytes(stats) == (3 * (4 + 256) + 256, 3 * (4 + 256) + 256)  # ids, x, one graph's row


def test_table_cells_are_hand_computed():
    row = {"family": "fam", "op": "gspmm copy_u sum", "width": 64, "compulsory_bytes": 4_000_000,
           "no_reuse_bytes": 8_000_000, "ms": 2.0, "touched_ms": 1.5, "aliased": True, "copy_gbps": 8.0,
           "reference_ms": 6.0, "reordered_ms": {"rcm": 1.0}}
    text = roofline.table([row, dict(row, aliased=False, reordered_ms={})])
    lines = text.splitlines()
    assert lines[0].startswith("| family | op | F | compulsory / no-reuse MB | ms |")
    assert lines[2] == "| fam | gspmm copy_u sum | 64 | 4 / 8 | 2.00 | 2.0 / 4.0 | 25% / 50% | 25% | 6.00 (3.0x) | 1.00 | — |"
    assert "n/a (not aliased)" in lines[3] and lines[3].endswith("| — | — |")


def test_copy_moves_the_data():
    copy = roofline.Copy(1 << 16)
    try:
        copy.src[:] = np.arange(1 << 16, dtype=np.float32)
        copy()
        np.testing.assert_array_equal(copy.dst, copy.src)
        assert copy.nbytes == 2 * 4 << 16
    finally:
        copy.close()


@pytest.mark.exhaustive  # an end-to-end run of the tool, for CI
def test_report_runs_the_roofline_and_writes_its_section(tmp_path):
    output = tmp_path / "BENCH.md"
    output.write_text("# Benchmarks\n")
    args = ["--scale", "0.005", "--repeats", "1", "--only", "roofline", "--sweep-max-edges", "0",
            "--output", str(output), "--plot-dir", str(tmp_path / "plots")]
    assert report.main(args) == 0
    rows = json.loads((tmp_path / "plots" / "report_cpu.json").read_text())["roofline"]
    families = ["uniform", "power-law sources", "2-D mesh, shuffled", "2-D mesh, RCM"]
    per_family = [(op.name, op.width) for op in roofline.ops()]
    assert [(r["family"], r["op"], r["width"]) for r in rows] == (
        [(f, *o) for f in families for o in per_family] + [("any (sorted graph ids)", "pool sum", 64)])
    for r in rows:
        assert r["ms"] > 0 and r["touched_ms"] > 0 and r["reference_ms"] > 0 and r["copy_gbps"] > 0
        assert r["aliased"], r  # the touched variant really wrote into the donated buffer
        assert 0 < r["compulsory_bytes"] <= r["no_reuse_bytes"]
        reordered = r["family"] in families[:3]
        assert set(r["reordered_ms"]) == ({"rcm", "degree"} if reordered else set())
    text = output.read_text()
    assert text.count("<!-- roofline-cpu -->") == 1 and text.count("<!-- /roofline-cpu -->") == 1
    assert "## Roofline (CPU)" in text and "python -m benchmarks.report --scale 0.005" in text
    assert "| 2-D mesh, RCM | agg_simple sum | 128 |" in text
    roofline.write_section(output, "## Roofline (CPU), again\n")  # a second write replaces the section
    text = output.read_text()
    assert text.count("<!-- roofline-cpu -->") == 1 and "again" in text and "| 2-D mesh, RCM |" not in text
