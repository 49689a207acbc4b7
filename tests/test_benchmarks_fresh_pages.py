"""The fresh-pages benchmark (benchmarks/fresh_pages.py): its table's ratios match hand-computed cells, each
child process gets exactly the allocator setting it measures (and the default child none), a preload
that did not load is an error, and a tiny run through ``python -m benchmarks.fresh_pages`` measures
every row under every setting and writes its section; the benchmarks name a non-default malloc."""

import json
import subprocess
import sys

import pytest

from benchmarks import _timing, fresh_pages, roofline  # importable through conftest.py

TCMALLOC_SO = "/opt/lib/libtcmalloc_minimal.so.4"


def _child_output(ms: float, peak_mb: float, mapped=("libc.so.6",)) -> str:
    return json.dumps({"ms": dict.fromkeys(fresh_pages.ROWS, ms), "peak_mb": peak_mb, "mapped": list(mapped)}) + "\n"


def test_table_cells_are_hand_computed():
    result = {name: {**dict.fromkeys(fresh_pages.ROWS, ms), fresh_pages.PEAK: peak}
              for name, ms, peak in (("default", 10.0, 700), (fresh_pages.HUGE_PAGES, 4.0, 710),
                                     (fresh_pages.TCMALLOC, 5.0, 980))}
    result["default"]["gspmm copy_u sum forward: reference"] = 30.0  # kernel 10 ms: 3x by default
    result[fresh_pages.HUGE_PAGES]["gspmm copy_u sum forward: reference"] = 20.0  # kernel 4 ms: 5x
    text = fresh_pages.table(result)
    assert "| measurement | default | `glibc.malloc.hugetlb=1` | `tcmalloc` |" in text
    assert "| XLA elementwise 2 * x: fresh output (ms) | 10.0 | 4.0 (2.50x) | 5.0 (2.00x) |" in text
    assert "| gspmm copy_u sum forward: reference (ms) | 30.0 | 20.0 (1.50x) | 5.0 (6.00x) |" in text
    assert "| peak resident memory (MB) | 700 | 710 | 980 |" in text
    assert "| gspmm copy_u sum forward | 3.00x | 5.00x | 1.00x |" in text
    assert "| update_efeat concat forward+backward | 1.00x | 1.00x | 1.00x |" in text


def test_each_child_gets_only_its_own_setting(monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.check=0")  # a caller's own settings do not leak in
    monkeypatch.setenv("LD_PRELOAD", "/somewhere/libother.so")
    seen = {}

    def fake_run(cmd, env, **kwargs):
        seen[env.get("GLIBC_TUNABLES"), env.get("LD_PRELOAD")] = cmd
        mapped = ["libc.so.6"] + (["libtcmalloc_minimal.so.4.5.10"] if env.get("LD_PRELOAD") else [])
        return subprocess.CompletedProcess(cmd, 0, stdout=_child_output(1.0, 800.0, mapped))

    monkeypatch.setattr(fresh_pages.subprocess, "run", fake_run)
    result = fresh_pages.run(scale=0.01, rounds=1, repeats=1, tcmalloc=TCMALLOC_SO, log=lambda _: None)
    assert set(seen) == {(None, None), ("glibc.malloc.hugetlb=1", None), (None, TCMALLOC_SO)}
    assert all(cmd[:3] == [sys.executable, "-c", fresh_pages.CHILD] and "--child" in cmd for cmd in seen.values())
    expected = {**dict.fromkeys(fresh_pages.ROWS, 1.0), fresh_pages.PEAK: 800.0}
    assert result == {name: expected for name in ("default", fresh_pages.HUGE_PAGES, fresh_pages.TCMALLOC)}

    seen.clear()  # without tcmalloc's library its setting is left out
    assert list(fresh_pages.run(scale=0.01, rounds=1, repeats=1, tcmalloc=None, log=lambda _: None)) == [
        "default", fresh_pages.HUGE_PAGES]


def test_a_preload_that_did_not_load_is_an_error(monkeypatch):
    monkeypatch.setattr(fresh_pages.subprocess, "run",
                        lambda cmd, env, **kwargs: subprocess.CompletedProcess(cmd, 0, stdout=_child_output(1.0, 1.0)))
    with pytest.raises(RuntimeError, match="LD_PRELOAD=/opt/lib/libtcmalloc_minimal.so.4 was not loaded"):
        fresh_pages.run(scale=0.01, rounds=1, repeats=1, tcmalloc=TCMALLOC_SO, log=lambda _: None)


def test_the_allocator_is_named(monkeypatch):
    assert any(lib.startswith("libc.so") for lib in _timing.mapped_libraries())  # this process's own maps
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setattr(_timing, "mapped_libraries", lambda: ["libc.so.6", "libm.so.6"])
    assert _timing.allocator() == "" and "malloc" not in _timing.machine()
    assert _timing.section_name() == ("cpu", "CPU")
    monkeypatch.setenv("GLIBC_TUNABLES", fresh_pages.HUGE_PAGES)
    assert _timing.allocator() == "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"
    assert _timing.section_name() == ("cpu-glibc-tunables", "CPU, glibc-tunables")
    monkeypatch.setattr(_timing, "mapped_libraries", lambda: ["libc.so.6", "libtcmalloc_minimal.so.4.5.10"])
    assert _timing.allocator() == "tcmalloc" and _timing.machine().endswith("; malloc: tcmalloc")
    assert _timing.section_name() == ("cpu-tcmalloc", "CPU, tcmalloc")
    assert "tcmalloc preloaded" in roofline._pages_note()


@pytest.mark.exhaustive  # an end-to-end run of the tool (a child process per setting), for CI
def test_a_tiny_run_writes_its_section(tmp_path):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n")
    assert fresh_pages.main(["--scale", "0.002", "--rounds", "1", "--repeats", "1", "--output", str(output)]) == 0
    text = output.read_text()
    assert "## Fresh output pages (CPU)" in text and "<!-- /fresh-pages-cpu -->" in text
    assert all(f"| {row} (ms) |" in text for row in fresh_pages.ROWS)
    assert ("| `tcmalloc` |" in text) != ("tcmalloc not measured" in text)
