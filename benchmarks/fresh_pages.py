"""``python -m benchmarks.fresh_pages``: what the fresh pages of XLA's output buffers cost on the CPU, and
the allocator settings that remove it.

XLA's CPU runtime allocates every output and scratch buffer with ``malloc``; glibc serves a large one
with a new ``mmap``, whose 4 KiB pages fault in (and are zeroed) one by one on first touch, and
returns it to the system when freed, so every call of a jitted function pays again. The kernels of this
library advise their own outputs to use 2 MiB transparent huge pages (``ffi/cpu/fresh_pages.h``), but
the buffers XLA's own ops write (a loss's cotangent, a slice, the reference's gathers) stay on 4 KiB
pages. Two settings of the process, measured against glibc's default:

- glibc's tunable ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (glibc 2.35 and later; it takes effect where
  ``/sys/kernel/mm/transparent_hugepage/enabled`` is ``madvise`` or ``always``): ``malloc`` advises huge
  pages for every mapping, so a fresh buffer faults 2 MiB at a time (and is still zeroed);
- tcmalloc (gperftools' ``libtcmalloc_minimal.so.4``, Debian/Ubuntu package ``libtcmalloc-minimal4``)
  through ``LD_PRELOAD``: it keeps freed memory for the next allocation, so a jitted function's buffers
  are pages already written by the previous call (peak memory is the price, measured here too).

Both are read when the process starts, so each setting runs in its own child process; the children of
the settings alternate, ``--rounds`` times each, and a cell is the median over the rounds of each child's
median of ``--repeats`` runs. Measured per setting:

- an XLA elementwise op (``2 * x``, ``x`` of 256 MiB) writing a fresh output, and the same op writing
  into a donated buffer already written (*touched*): the difference is the fault cost;
- gspmm copy_u sum (N = 200,000, E = 2,000,000 uniform, F = 64) forward, and forward+backward (value
  and gradient of ``sum(out ** 2)``), kernels and the pure-JAX reference (``impl="xla"``);
- update_efeat concat on a 2-D mesh (N = 200,000, 32 features per part) forward+backward, kernels and
  reference;
- the child's peak resident memory (``ru_maxrss``), its largest over the rounds.
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import tables
from ._timing import machine, mapped_libraries, median_ms

ROOT = Path(__file__).resolve().parent.parent
HUGE_PAGES = "glibc.malloc.hugetlb=1"
TCMALLOC = "tcmalloc"
ELEMENTWISE_BYTES = 256 << 20
N_NODES, DEGREE, WIDTH = 200_000, 10, 64
ROWS = ("XLA elementwise 2 * x: fresh output", "XLA elementwise 2 * x: touched output",
        "gspmm copy_u sum forward: kernel", "gspmm copy_u sum forward: reference",
        "gspmm copy_u sum forward+backward: kernel", "gspmm copy_u sum forward+backward: reference",
        "update_efeat concat forward+backward: kernel", "update_efeat concat forward+backward: reference")
PEAK = "peak resident memory (MB)"
OPS = ("gspmm copy_u sum forward", "gspmm copy_u sum forward+backward", "update_efeat concat forward+backward")


def _elementwise_bytes(scale: float) -> int:
    return max(1 << 20, int(ELEMENTWISE_BYTES * scale))


def measure(scale: float, repeats: int) -> dict:
    """One setting's medians (ms), by row name; runs in the child process that has the setting."""
    import jax
    import jax.numpy as jnp

    import jaxgraphops as jgo

    from .workloads import mesh_graph

    def ready(fn, *args):
        return lambda: jax.block_until_ready(fn(*args))

    def loss_and_grads(op, argnums):
        return jax.jit(jax.value_and_grad(lambda *a: jnp.sum(op(*a) ** 2), argnums))

    out = {}
    x = jnp.ones(_elementwise_bytes(scale) // 4, jnp.float32)
    double = jax.jit(lambda x: 2 * x)
    into = jax.jit(lambda buf, x: 2 * x, donate_argnums=0, keep_unused=True)
    buf = [jax.block_until_ready(double(x))]
    pointer = buf[0].unsafe_buffer_pointer()
    buf[0] = jax.block_until_ready(into(buf[0], x))
    if buf[0].unsafe_buffer_pointer() != pointer:
        raise RuntimeError("fresh_pages: XLA did not write the donated buffer in place; the touched row would be fresh")

    def touched():
        buf[0] = jax.block_until_ready(into(buf[0], x))

    out[ROWS[0]] = median_ms(ready(double, x), repeats=repeats, warmup=1)
    out[ROWS[1]] = median_ms(touched, repeats=repeats, warmup=1)

    rng = np.random.default_rng(0)
    n = max(int(N_NODES * scale), 100)
    g = jgo.Graph.from_edges(rng.integers(0, n, DEGREE * n, dtype=np.int32),
                             rng.integers(0, n, DEGREE * n, dtype=np.int32), n, n)
    h = jnp.asarray(rng.normal(size=(n, WIDTH)).astype(np.float32))
    for impl, row in ((None, 2), ("xla", 3)):
        spmm = lambda g, h, impl=impl: jgo.gspmm(g, h, reduce="sum", impl=impl)  # noqa: E731
        out[ROWS[row]] = median_ms(ready(jax.jit(spmm), g, h), repeats=repeats, warmup=1)
        out[ROWS[row + 2]] = median_ms(ready(loss_and_grads(spmm, 1), g, h), repeats=repeats, warmup=1)

    src, dst = mesh_graph(n)
    mesh = jgo.Graph.from_edges(src, dst, n, n)
    e = jnp.asarray(rng.normal(size=(len(src), 32)).astype(np.float32))
    xm = jnp.asarray(rng.normal(size=(n, 32)).astype(np.float32))
    for impl, row in ((None, 6), ("xla", 7)):
        efeat = lambda g, e, x, impl=impl: jgo.update_efeat(g, e, x, x, impl=impl)  # noqa: E731
        out[ROWS[row]] = median_ms(ready(loss_and_grads(efeat, (1, 2)), mesh, e, xm), repeats=repeats, warmup=1)
    return out


def settings(tcmalloc: str | None) -> dict:
    """``{name: environment variables}`` of each measured setting: glibc's default, its huge-page tunable,
    and tcmalloc preloaded where its library is given (None: left out)."""
    out = {"default": {}, HUGE_PAGES: {"GLIBC_TUNABLES": HUGE_PAGES}}
    if tcmalloc:
        out[TCMALLOC] = {"LD_PRELOAD": tcmalloc}
    return out


# A child runs outside the repository with its root appended to the import path: the installed
# jaxgraphops comes first (started in the root, Python would import the source tree, which has no
# compiled extension in a wheel install).
CHILD = (f"import sys; sys.path.append({str(ROOT)!r}); from benchmarks.fresh_pages import main; "
         "raise SystemExit(main(sys.argv[1:]))")


def _child(name: str, variables: dict, scale: float, repeats: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LD_PRELOAD")}
    env.update(variables)
    cmd = [sys.executable, "-c", CHILD, "--child", "--scale", str(scale), "--repeats", str(repeats)]
    done = subprocess.run(cmd, cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"fresh_pages child ({name}) failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    preload = variables.get("LD_PRELOAD")
    if preload and not any(lib.startswith(Path(preload).name.split(".so")[0]) for lib in result["mapped"]):
        raise RuntimeError(f"fresh_pages child ({name}): LD_PRELOAD={preload} was not loaded")
    return result


def run(scale: float = 1.0, rounds: int = 3, repeats: int = 7, tcmalloc: str | None = None, log=print) -> dict:
    """``{setting: {row: median ms, PEAK: MB}}``, the children of the settings alternating ``rounds`` times."""
    measured = settings(tcmalloc)
    runs = {s: [] for s in measured}
    for r in range(rounds):
        for name, variables in measured.items():
            runs[name].append(_child(name, variables, scale, repeats))
            log(f"round {r + 1}/{rounds} {name}: " + ", ".join(f"{runs[name][-1]['ms'][row]:.1f}" for row in ROWS))
    return {s: {**{row: float(np.median([m["ms"][row] for m in runs[s]])) for row in ROWS},
                PEAK: max(m["peak_mb"] for m in runs[s])} for s in measured}


def transparent_huge_pages() -> str:
    """The kernel's THP mode (the bracketed word of ``/sys/kernel/mm/transparent_hugepage/enabled``)."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
        return text[text.index("[") + 1:text.index("]")]
    except (OSError, ValueError):
        return "unknown"


def table(result: dict) -> str:
    """Markdown: one row per measurement, a column per setting (ms, and default / setting); the peak
    memory; then the kernels' speed-up over the reference under each setting."""
    names = list(result)
    default = result["default"]
    head = " | ".join(f"`{n}`" if n != "default" else n for n in names)
    lines = [f"| measurement | {head} |", "|---|" + "---:|" * len(names)]
    for row in ROWS:
        cells = [f"{default[row]:.1f}"] + [f"{result[n][row]:.1f} ({default[row] / result[n][row]:.2f}x)" for n in names[1:]]
        lines.append(f"| {row} (ms) | " + " | ".join(cells) + " |")
    lines.append(f"| {PEAK} | " + " | ".join(f"{result[n][PEAK]:.0f}" for n in names) + " |")
    lines += ["", f"| kernel speed-up over the reference | {head} |", "|---|" + "---:|" * len(names)]
    for op in OPS:
        lines.append(f"| {op} | " + " | ".join(f"{result[n][f'{op}: reference'] / result[n][f'{op}: kernel']:.2f}x"
                                              for n in names) + " |")
    return "\n".join(lines) + "\n"


def render(result: dict, command: str, seconds: float, rounds: int, repeats: int, scale: float) -> str:
    """The section: machine, command, method, then ``table(result)``."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    default = result["default"]
    fault = 1 - default[ROWS[1]] / default[ROWS[0]]
    absent = "" if TCMALLOC in result else (" tcmalloc not measured: `libtcmalloc_minimal` not found (Debian/Ubuntu: "
                                            "`apt install libtcmalloc-minimal4`, or `--tcmalloc PATH`).")
    return (f"## Fresh output pages (CPU), {stamp}\n\n{machine()}; transparent huge pages "
            f"`{transparent_huge_pages()}`. Command: `{command}` ({seconds:.0f} s). Each setting in its own "
            f"process, {rounds} per setting, alternating; medians of {repeats} runs in each "
            f"(`benchmarks/fresh_pages.py`). `x` of the elementwise op: {_elementwise_bytes(scale) >> 20} MiB; "
            f"by default, faulting in its fresh output is {100 * fault:.0f}% of the op's time. In parentheses: "
            f"the default's time over the setting's.{absent}\n\n" + table(result))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fresh_pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the sizes (default 1)")
    parser.add_argument("--rounds", type=int, default=3, help="child processes per setting")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per measurement in a child")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"), help="markdown file to update ('' to skip)")
    parser.add_argument("--tcmalloc", default=ctypes.util.find_library("tcmalloc_minimal"),
                        help="tcmalloc's library to preload (default: libtcmalloc_minimal where installed; '' to skip)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        ms = measure(args.scale, args.repeats)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"ms": ms, "peak_mb": peak_mb, "mapped": mapped_libraries()}))
        return 0
    started = time.perf_counter()
    result = run(args.scale, args.rounds, args.repeats, args.tcmalloc or None)
    command = shlex.join(["python", "-m", "benchmarks.fresh_pages", *(argv if argv is not None else sys.argv[1:])])
    body = render(result, command, time.perf_counter() - started, args.rounds, args.repeats, args.scale)
    print(body)
    if args.output:
        tables.replace_section(Path(args.output), "<!-- fresh-pages-cpu -->", "<!-- /fresh-pages-cpu -->", body + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
