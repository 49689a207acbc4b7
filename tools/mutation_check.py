"""Mutation check of the emulated CUDA platform: plants small bugs in copies of the CUDA sources and
shows that the test suite, run through the emulated CUDA handlers, fails for every one.

Each mutant is applied to a copy of the repository (never to this checkout); the copy is built
once as an editable install with the emulated handlers (into the environment of ``--python``, whose
jaxgraphops it replaces: use an environment made for the check), so a mutant only recompiles the file it
touches. For each mutant the chosen test files run with ``JGO_KERNELS=cuda-emulation`` and stop
at the first failure; mutants that plant a race or an out-of-bounds access are also replayed under
ThreadSanitizer or AddressSanitizer (``tools/sanitize.sh``) when ``--cases`` names recorded calls. Prints (and with ``--markdown``
writes) the table of mutants and what caught each; exits 1 if any mutant survived.

    python tools/mutation_check.py --work /tmp/jgo-mutants [--only ID ...] [--markdown docs/mutation.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Mutant:
    id: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    sanitizer: str | None = None  # "tsan" or "asan": also replayed under it (--cases)


MP, GAT, V2, SIMPLE = "tests/test_gspmm.py", "tests/test_gat.py", "tests/test_gatv2.py", \
    "tests/test_mha_simple.py"
GNO, DIMENET, SDDMM = "tests/test_gno.py", "tests/test_dimenet.py", "tests/test_gsddmm_softmax.py"
ENGINE = "tests/test_chunk_walk.py"
WALK, FOLD = "ffi/cuda/walk_reduce.cuh", "const int64_t at = (slot - c.index + q) * a.F;"  # a split row's fold

MUTANTS = (
    Mutant("row-off-by-one", "engine: a row ends one edge early (off-by-one in a chunk's row bounds)",
           "ffi/cuda/chunk_walk.cuh", "const int end = Max(begin, ClampIndex(next, n_edges + 1));",
           "const int end = Max(begin, ClampIndex(next - 1, n_edges + 1));", (MP,)),
    Mutant("window-overlap", "engine: a window also walks a long row's chunk that lies in the next window (the chunk "
           "walked twice, its row folded before all of its chunks are in)", "ffi/cuda/chunk_walk.cuh",
           "if (c < count && start + (int64_t(c) << kChunkShift) < hi) {", "if (c < count) {", (ENGINE,)),
    Mutant("shuffle-mask", "GroupMask names lanes 0..g-1 for every group (a wrong shuffle mask)",
           "ffi/cuda/launch.cuh", "((1u << group) - 1u) << ((threadIdx.x % kWarp) / group * group)",
           "((1u << group) - 1u)", (GAT, V2)),
    Mutant("shuffle-steps", "GroupSum skips the last butterfly step (a partial lane reduction)",
           "ffi/cuda/launch.cuh", "offset > 0; offset /= 2", "offset > 1; offset /= 2", (GAT, V2)),
    Mutant("scatter-half", "GroupSumScatter: a lane keeps the half of its sums it sends (sddmm's dot sums one "
           "half twice)", "ffi/cuda/launch.cuh", "const T keep = upper ? v[i + half] : v[i];",
           "const T keep = upper ? v[i] : v[i + half];", (SDDMM,)),
    Mutant("dropped-syncthreads", "gno forward: the barrier between writing the hidden units and the outer product",
           "ffi/cuda/gno.cu", "      __syncthreads();\n      BlockOuter(A, xs, Cin, hs, P);",
           "      BlockOuter(A, xs, Cin, hs, P);", (GNO,)),
    Mutant("dropped-syncthreads-bwd", "gno backward: the barrier after writing Q_i, read by every thread",
           "ffi/cuda/gno.cu", "      __syncthreads();  // Qi is written; the previous edge's shared values are consumed\n",
           "", (GNO,)),
    Mutant("block-scratch-race", "gno forward: every block accumulates into the same scratch row (a race between blocks)",
           "ffi/cuda/gno.cu", "  T* A = work + blockIdx.x * Q;", "  T* A = work;", (GNO,), sanitizer="tsan"),
    Mutant("undersized-shared", "gno: the per-block vectors lose BlockContract's kBlock partial sums",
           "ffi/cuda/gno.cu", "return a.hidden + 2 * a.units() + features + kBlock;",
           "return a.hidden + 2 * a.units() + features;", (GNO,)),
    Mutant("no-shared-optin", "launches above 48 KiB of dynamic shared memory without raising the kernel's limit",
           "ffi/cuda/launch.cuh", "  if (shared_bytes > kDefaultSharedBytes)\n", "  if (false)\n", (GNO,)),
    Mutant("sum-identity", "GAT backward of wide heads: the per-destination sum of logit gradients starts at 1",
           "ffi/cuda/gat_backward.cu", "    T acc = T(0);\n    for (int64_t k = begin; k < end; ++k) {\n      const int64_t j = nbr[k], e = eid[k];\n      if (!InRange(j, a.n_src)",
           "    T acc = T(1);\n    for (int64_t k = begin; k < end; ++k) {\n      const int64_t j = nbr[k], e = eid[k];\n      if (!InRange(j, a.n_src)",
           (ENGINE,)),
    Mutant("swapped-view", "sddmm: the row and neighbour of an edge swapped (src/dst views swapped)",
           "ffi/cuda/sddmm.cu", "ps.Load(SourceRow(s.p_source, c.row, st[u].j, st[u].e), lf.ok, pv[u]);",
           "ps.Load(SourceRow(s.p_source, st[u].j, c.row, st[u].e), lf.ok, pv[u]);", (SDDMM,)),
    Mutant("half-format", "bfloat16 features read as float16 (a lost half-precision conversion)",
           "ffi/cuda/storage.cuh", "if (storage == ffi::DataType::BF16) return fn(__nv_bfloat16{}, t, i);",
           "if (storage == ffi::DataType::BF16) return fn(__half{}, t, i);", (SIMPLE,)),
    Mutant("unchecked-index", "engine: a staged neighbour id taken as in range (reads out of bounds on malformed "
           "graphs)", "ffi/cuda/chunk_walk.cuh", "    const bool fits = InBound(raw, p.nbr_bound);\n",
           "    const bool fits = true;\n", (MP,), sanitizer="asan"),
    Mutant("unmasked-index", "engine: an edge whose neighbour id was out of range (read as row 0) still counts",
           "ffi/cuda/chunk_walk.cuh", "    out.j = fits ? static_cast<int>(raw) : 0;\n    ok = ok && fits;\n",
           "    out.j = fits ? static_cast<int>(raw) : 0;\n", (MP,)),
    Mutant("combine-out-of-order", "engine: a split row's partials folded from its last chunk back (max/min: the "
           "later tie wins)", WALK, FOLD, FOLD.replace("+ q)", "+ (c.count - 1 - q))"), (ENGINE,)),
    Mutant("combine-in-arrival-order", "engine: the folding walker's own partial folded last (the order follows "
           "who arrives last)", WALK, FOLD, FOLD.replace("+ q)", "+ (q + c.index + 1) % c.count)"), (ENGINE,)),
    Mutant("dropped-partial", "engine: a split row's last chunk's partial is not folded", WALK,
           "for (int q = 0; q < c.count; ++q) {  // the row's partials",
           "for (int q = 0; q < c.count - 1; ++q) {  // the row's partials", (ENGINE,)),
    Mutant("counter-shared-by-tiles", "engine: the walkers of a split row's feature tiles arrive at one counter "
           "(a tile folded before its own chunks are in)", WALK, "SplitCounter(c, a.counter_count, lf.tile)",
           "SplitCounter(c, a.counter_count, 0)", (ENGINE,)),
    Mutant("hg-block-pass", "agg_hg_basis forward: an edge added to its type's block of the first pass whatever "
           "the pass (more than 8 type blocks)", "ffi/cuda/hg_basis.cu", "counts && t == b0 + b",
           "counts && t == b", (ENGINE,)),
    Mutant("hg-bwd-split", "agg_hg_basis backward: a split source row's result is its first chunk's partial",
           "ffi/cuda/hg_basis.cu", "__ldcg(values + (slot - c.index + q) * a.D + lf.f[v])",
           "__ldcg(values + (slot - c.index) * a.D + lf.f[v])", (ENGINE,)),
    Mutant("hg-dot-tiles", "agg_hg_basis backward: the feature tiles' parts of an edge's dots written to one slice",
           "ffi/cuda/hg_basis.cu", "dots[(int64_t(lf.tile) * a.n_edges + s[u].e) * a.K + b0 + b]",
           "dots[int64_t(s[u].e) * a.K + b0 + b]", (ENGINE,)),
    Mutant("stale-index-stage", "engine: a chunk's indices staged once, its later blocks of G edges reusing the "
           "first block's", "ffi/cuda/chunk_walk.cuh", "(p, kb + w.lane, kb + w.lane < hi, mine)",
           "(p, lo + w.lane, kb + w.lane < hi, mine)", (ENGINE,)),
    Mutant("softmax-split-state", "edge_softmax: a split row's folded sum leaves out the first chunk",
           "ffi/cuda/edge_softmax.cu", "        for (int q = 0; q < c.count; ++q) {\n          const T* state",
           "        for (int q = 1; q < c.count; ++q) {\n          const T* state", (ENGINE,)),
    Mutant("attend-split-merge", "attention forward: a split row's merge leaves out its first chunk's (acc, m, l)",
           "ffi/cuda/head_walk.cuh", "for (int p = 0; p < c.count && lf.ok[0]; ++p) {",
           "for (int p = 1; p < c.count && lf.ok[0]; ++p) {", (ENGINE,)),
    Mutant("attend-bucket-rescale", "attention forward: the accumulators not rescaled when a group of edges raises "
           "the max", "ffi/cuda/head_walk.cuh", "for (int v = 0; v < kV; ++v) acc[v] *= scale;",
           "for (int v = 0; v < kV; ++v) acc[v] *= T(1);", (ENGINE,)),
    Mutant("gat-head-lanes", "GAT forward: a lane's features read the scores of the wrong head",
           "ffi/cuda/gat.cu", "const int head = lf.ok[0] ? lf.f[0] / C : 0;",
           "const int head = lf.ok[0] ? lf.f[0] % a.H : 0;",
           (ENGINE,)),
    Mutant("head-sum", "attention on head tiles: a head's dot summed over half of its lanes (a butterfly step short)",
           "ffi/cuda/head_walk.cuh", "for (int offset = lanes / 2; offset > 0; offset /= 2)",
           "for (int offset = lanes / 2; offset > 1; offset /= 2)", (ENGINE,)),
    Mutant("head-tile-lanes", "attention on head tiles: heads dealt to lanes round-robin, so a head's butterfly "
           "sums lanes of other heads", "ffi/cuda/head_walk.cuh", "head = tile * a.heads + w.lane / a.lanes;",
           "head = tile * a.heads + w.lane % a.heads;", (ENGINE,)),
    Mutant("split-sums", "attention backward: a split row's sums leave out its first chunk",
           "ffi/cuda/head_walk.cuh", "for (int p = 0; p < c.count; ++p) {  // the row's chunks, in order",
           "for (int p = 1; p < c.count; ++p) {  // the row's chunks, in order", (ENGINE,)),
    Mutant("gat-bwd-split", "GAT backward: a split destination row's score gradient leaves out its first chunk",
           "ffi/cuda/gat_backward.cu", "for (int q = 0; q < c.count && live; ++q)", "for (int q = 1; q < c.count && live; ++q)",
           (ENGINE,)),
    Mutant("int32-view-wrap", "an int64 graph's int32 view: an id of 2^32 + j wraps onto j instead of -1",
           "ffi/cuda/int32_graph.cuh", "out[k] = InRange(id, kMaxIndex + 1) ? static_cast<int32_t>(id) : -1;",
           "out[k] = static_cast<int32_t>(id);", (GAT,)),
    Mutant("force-term", "DimeNet++ second order: the dgamma term of the e_out direction gradient dropped",
           "ffi/cuda/dimenet.cu", "gv[i] += dgamma * t.angle.gb[i] + gamma * t.angle.dgb[i];",
           "gv[i] += gamma * t.angle.dgb[i];", (DIMENET,)),
    Mutant("lse-every-lane", "online softmax: every lane of a group writes the row's log-sum-exp (a race)",
           "ffi/cuda/online_softmax.cuh", "if (c0 == 0 && lane == 0) *lse_rh = SoftmaxLse(m, l);",
           "if (c0 == 0) *lse_rh = SoftmaxLse(m, l) + T(lane);", (GAT, V2), sanitizer="tsan"),
)


def run(cmd, cwd, env=None, timeout=1800):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def copy_repository(work: Path) -> Path:
    """A copy of the tracked and untracked (not ignored) files of this checkout."""
    files = run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], ROOT).stdout.split()
    dst = work / "repo"
    if dst.exists():
        shutil.rmtree(dst)
    for f in files:
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    return dst


def build(repo: Path, python: str) -> None:
    env = dict(os.environ, JGO_CUDA_EMULATION="ON", CMAKE_BUILD_PARALLEL_LEVEL="2")
    out = run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-Ceditable.rebuild=true",
               f"-Cbuild-dir={repo / 'build' / 'mutants'}", "-e", "."], repo, env)
    if out.returncode != 0:
        sys.exit(f"building the copy failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")


def first_failure(output: str) -> str | None:
    m = re.search(r"^FAILED (\S+)", output, re.M) or re.search(r"^ERROR (\S+)", output, re.M)
    return m.group(1) if m else None


def check(m: Mutant, repo: Path, python: str, cases: Path | None) -> dict:
    path = repo / m.file
    original = path.read_text()
    if original.count(m.old) != 1:
        return {"mutant": m, "caught": None, "note": f"pattern found {original.count(m.old)} times"}
    path.write_text(original.replace(m.old, m.new))
    start = time.time()
    try:
        env = dict(os.environ, JGO_KERNELS="cuda-emulation")
        out = run([python, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", *m.tests], repo, env)
        text = out.stdout + out.stderr
        if "Error building" in text or "ninja: build stopped" in text:
            return {"mutant": m, "caught": None, "note": "did not compile", "seconds": time.time() - start}
        caught = first_failure(text) if out.returncode != 0 else None
        sanitizer = None
        if m.sanitizer and cases is not None:
            san = run(["bash", "tools/sanitize.sh", str(cases)], repo, dict(os.environ, SANITIZERS=m.sanitizer))
            sanitizer = f"{m.sanitizer}: " + ("report" if "Sanitizer" in san.stdout + san.stderr else "clean")
        return {"mutant": m, "caught": caught, "sanitizer": sanitizer, "seconds": time.time() - start,
                "note": "" if caught else text[-1500:]}
    finally:
        path.write_text(original)


def table(results) -> str:
    lines = ["| mutant | file | planted bug | caught by (first failing test) | sanitizer | s |",
             "|---|---|---|---|---|---|"]
    for r in results:
        m = r["mutant"]
        caught = f"`{r['caught']}`" if r["caught"] else f"**not caught** {r.get('note', '')[:80]}"
        lines.append(f"| {m.id} | `{m.file}` | {m.what} | {caught} | {r.get('sanitizer') or ''} | "
                     f"{r.get('seconds', 0):.0f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/jgo-mutants"))
    parser.add_argument("--python", default=sys.executable,
                        help="a Python with the test extra installed; its environment's jaxgraphops becomes the "
                             "copy (an editable install), so give it one made for this check")
    parser.add_argument("--only", nargs="*", help="mutant ids")
    parser.add_argument("--cases", type=Path, help="recorded FFI calls for the TSan replay of race mutants")
    parser.add_argument("--markdown", type=Path, help="write the table into this file")
    args = parser.parse_args()
    mutants = [m for m in MUTANTS if not args.only or m.id in args.only]
    args.work.mkdir(parents=True, exist_ok=True)
    repo = copy_repository(args.work)
    start = time.time()
    build(repo, args.python)
    print(f"built the copy in {time.time() - start:.0f} s", flush=True)
    results = []
    for m in mutants:
        r = check(m, repo, args.python, args.cases)
        results.append(r)
        print(f"{m.id}: {r['caught'] or 'NOT CAUGHT'} ({r.get('seconds', 0):.0f} s)", flush=True)
    text = table(results)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    survivors = [r["mutant"].id for r in results if not r["caught"] and "report" not in (r.get("sanitizer") or "")]
    print(f"{len(results) - len(survivors)} caught, {len(survivors)} survived" + (f": {survivors}" if survivors else ""))
    sys.exit(1 if survivors else 0)


if __name__ == "__main__":
    main()
