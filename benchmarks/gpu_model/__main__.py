"""``python -m benchmarks.gpu_model``: the GPU time of the CUDA kernels without a GPU.

- default: models the cases of :data:`.shapes.DEFAULT` (forward and forward+backward) on this checkout's
  kernels, traced at ``--scale`` (0.1 by default, extrapolated to full size), for an H100 and an H200: every
  term, the binding one, the terms within 1.5x of it, sectors per request, DRAM and L2 bytes, the critical
  path, the floor of the GPU note's section 4 and the XLA time measured on the H100;
- ``--cards``: the SASS cost cards of every kernel instantiation (``--check``: exit 1 when an engine kernel
  lost its 128-bit loads or its declared memory-level parallelism; ``--engine``: the engine kernels' cards
  alone, compiling only the files that declare one; ``--cubins DIR``: no compile, the plugin build's cubins
  that ``tools/ptxas_reports.py`` kept in DIR, which CI reads);
- ``--retro``: the first GPU run's 22 rows modelled on the code they measured (edecaa7, built beside this
  checkout), modelled vs measured (``--fit``: fit the parameters on :data:`.retro.FIT_ROWS` first).

``--markdown FILE`` writes the section of what ran into FILE (BENCHMARKS.md). Needs nvcc and nvdisasm
(``pip install nvidia-cuda-nvdisasm``), g++, make and a development build (``JGO_CUDA_EMULATION=ON``).
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import subprocess
import sys
import time
from pathlib import Path

from .. import tables
from . import cards as cards_module
from . import model, pipeline, render, retro, shapes

SECTIONS = {"cards": "gpu-model-cards", "model": "gpu-model-preregistered", "retro": "gpu-model-retro",
            "extrapolation": "gpu-model-extrapolation"}


def _write(path: str, tag: str, body: str) -> None:
    tables.replace_section(Path(path), f"<!-- {tag} -->", f"<!-- /{tag} -->", body + "\n")


def _commit(*paths: str) -> str:
    """The checkout's commit, or the last one that changed ``paths``."""
    cmd = (["git", "log", "-1", "--format=%h", "HEAD", "--", *paths] if paths
           else ["git", "rev-parse", "--short", "HEAD"])
    return subprocess.run(cmd, cwd=pipeline.ROOT, capture_output=True, text=True).stdout.strip() or "?"


def _traced(tree, ids, scale) -> str:
    recorded, replayed = pipeline.trace_seconds(tree, ids, scale)
    return (f"the traces, cached under build/gpu_model, took {recorded:.0f} s of emulated passes and {replayed:.0f} s "
            f"of traced replays")


def _params_line(p: model.Params) -> str:
    return (f"DRAM latency {p.lat_unloaded_ns:.0f} ns unloaded, {p.lat_loaded_ns:.0f} ns loaded; the cards' warp "
            f"cycles x {p.cycle_factor:.2f}; L1/L2 hits {p.l1_cycles:g}/{p.l2_cycles:g} cycles; effective L2 "
            f"{p.l2_mb:g} MB; {p.launch_us:g} us a launch; "
            f"{p.while_iteration_us:g} us a while-loop iteration")


def run_cards(args, command) -> int:
    started = time.perf_counter()
    tree = pipeline.current_tree(Path(args.build))
    prebuilt = Path(args.cubins) if args.cubins else None
    cards = sorted(pipeline.cards_of(tree, args.jobs, engine=args.engine, prebuilt=prebuilt).values(),
                   key=lambda k: (k.file, k.name))
    if args.engine and not cards:
        print("gpu_model: no engine kernel is declared in ffi/cuda (`// gpu-model: engine mlp>=N`): nothing to check")
        return 0
    stamp = datetime.date.today().isoformat()
    preamble = (f"## SASS cost cards (sm_90), {stamp}, commit {_commit()}\n\nCommand: `{command}`; {len(cards)} "
                f"kernel instantiations of `ffi/cuda` "
                + (f"as the plugin's build compiled them for sm_90 (`{args.cubins}`, no line information) "
                   if prebuilt else "compiled by nvcc for sm_90 (the plugin's flags, `-lineinfo`) ") +
                f"and read with nvdisasm ({time.perf_counter() - started:.0f} s).")
    body = render.cards_section(cards, preamble)
    print(body if args.all else body.split("<details>")[0])
    if args.markdown:
        _write(args.markdown, SECTIONS["cards"], body)
    bad = cards_module.engine_failures(cards)
    for line in bad:
        print(f"FAIL {line}")
    return 1 if args.check and bad else 0


def run_model(args, command) -> int:
    started = time.perf_counter()
    tree = pipeline.current_tree(Path(args.build))
    ids = args.cases or list(shapes.DEFAULT)
    traced = pipeline.traced_passes(tree, ids, args.scale, args.jobs)
    cards = pipeline.cards_of(tree, args.jobs, files=pipeline.kernel_files(traced, tree.ffi / "cuda"))  # launched
    params = model.Params()
    h100 = pipeline.model_passes(traced, cards, model.H100, params, args.scale)
    h200 = pipeline.model_passes(traced, cards, model.H200, params, args.scale)
    names = {k[0]: (case["op"], shapes.FULL_SHAPES.get(k[0], case["shape"])) for k, (_, _, case, *_) in traced.items()}
    xla = retro.measured("XLA reference")
    rows = render.model_rows(names, h100, h200, {k: v for k, v in xla.items() if k[0] in names})
    seconds = time.perf_counter() - started
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = (f"## Modelled GPU times of main (pre-registered), {stamp}, commit {_commit()} (kernels as last changed "
            f"in {_commit('ffi/cuda', 'ffi/common')})\n\n"
            f"Command: `{command}` ({seconds:.0f} s; {_traced(tree, ids, args.scale)}); traced at scale {args.scale:g} "
            f"of each shape and extrapolated "
            f"(docs/performance.md, \"The GPU's time without a GPU\"). Parameters: {_params_line(params)}. "
            f"Times in ms; the terms are H100's, summed over the pass's launches; `binding`: the term that takes "
            f"the most of the pass; "
            f"`within 1.5x`: terms within 1.5x of the binding one in the pass's longest launch.\n\n"
            + render.table(render.MODEL_HEADER, rows, set(range(3, 11)) | set(range(13, 19))))
    print(body)
    if args.markdown:
        _write(args.markdown, SECTIONS["model"], body)
    return 0


def run_retro(args, command) -> int:
    started = time.perf_counter()
    tree = retro.edecaa7_tree(cache=Path(args.build))
    keys = [k for k in retro.KEYS if not args.cases or k in args.cases]
    if args.fit and not {k for k, _ in retro.FIT_ROWS} <= set(keys):
        raise SystemExit(f"gpu_model: --fit needs the cases of {retro.FIT_ROWS}")
    cards = pipeline.cards_of(tree, args.jobs)
    traced = pipeline.traced_passes(tree, keys, args.scale, args.jobs)
    truth = retro.measured()
    params = model.Params()

    def evaluate(p, rows):
        return {r: model.pass_time(traced[r][0], cards, traced[r][1], model.H100, p, args.scale, *traced[r][3:]).ms
                for r in rows}

    if args.fit:
        params = retro.fit(evaluate, params)
        print(f"fitted on {retro.FIT_ROWS}: {_params_line(params)}")
    h100 = pipeline.model_passes(traced, cards, model.H100, params, args.scale)
    times = {k: pt.ms for k, pt in h100.items()}
    rows, within = [], 0
    for key in [(k, p) for k in keys for p in ("forward", "forward+backward")]:
        s = render.pass_summary(h100[key])
        ratio = times[key] / truth[key]
        within += 0.5 <= ratio <= 2
        op, shape = traced[key][2]["op"], shapes.FULL_SHAPES.get(key[0], traced[key][2]["shape"])
        fitted = " (fit)" if key in retro.FIT_ROWS else ""
        t = s["totals"]
        rows.append([op, shape, key[1] + fitted, f"{truth[key]:.2f}", f"**{times[key]:.2f}**", f"{ratio:.2f}",
                     *(render.ms(t[k]) for k in (*model.TERMS, "launch", "xla")), s["binding"],
                     ", ".join(s["close"])])
    uniform = retro.uniform_tree(tree)
    case, pass_, kernel_ms = retro.NSIGHT
    u = pipeline.traced_passes(uniform, [case], args.scale, args.jobs)
    nsight = pipeline.model_passes(u, pipeline.cards_of(uniform, args.jobs), model.H100, params, args.scale)
    kernels = sum(lt.ms for lt in nsight[(case, pass_)].launches)
    seconds = time.perf_counter() - started
    stamp = datetime.date.today().isoformat()
    body = (f"## Retro-diction of the first GPU run (H100, code at {retro.COMMIT}), {stamp}\n\n"
            f"Command: `{command}` ({seconds:.0f} s; {_traced(tree, keys, args.scale)}), traced at scale "
            f"{args.scale:g}. Parameters, fitted on "
            f"{', '.join(f'{k} {p}' for k, p in retro.FIT_ROWS)}: {_params_line(params)}. **Within 2x of the "
            f"measured time on {within} of {len(rows)} rows**; {retro.order_summary(times, truth)}.\n\n"
            + render.table(["op", "shape", "pass", "measured ms", "modelled ms", "modelled/measured", *model.TERMS,
                            "launches", "xla", "binding", "within 1.5x"], rows, set(range(3, 12)))
            + f"\nBeyond the 22 rows, the run's Nsight profile: gspmm copy_u sum over a uniform graph "
              f"({shapes.FULL_SHAPES[case]}) ran one kernel of {kernel_ms} ms; modelled (its kernels, same "
              f"parameters): **{kernels:.2f} ms** ({kernels / kernel_ms:.2f}x).\n")
    print(body)
    if args.markdown:
        _write(args.markdown, SECTIONS["retro"], body)
    return 0


def run_extrapolation(args, command) -> int:
    """The ``--cases`` rows of the retro-diction traced at full size and at ``--scale`` (extrapolated)."""
    started = time.perf_counter()
    tree = retro.edecaa7_tree(cache=Path(args.build))
    keys = [k for k in retro.KEYS if k in (args.cases or [])]
    if not keys or args.scale >= 1:
        raise SystemExit("gpu_model: --extrapolation-check needs --cases of the retro-diction and --scale < 1")
    cards = pipeline.cards_of(tree, args.jobs)
    params, truth = model.Params(), retro.measured()
    full = pipeline.model_passes(pipeline.traced_passes(tree, keys, 1.0, args.jobs), cards, model.H100, params, 1.0)
    small = pipeline.model_passes(pipeline.traced_passes(tree, keys, args.scale, args.jobs), cards, model.H100,
                                  params, args.scale)
    rows = [[k, p, f"{truth[(k, p)]:.2f}", f"{full[(k, p)].ms:.2f}", f"{small[(k, p)].ms:.2f}",
             f"{small[(k, p)].ms / full[(k, p)].ms:.2f}"] for k in keys for p in ("forward", "forward+backward")]
    body = (f"### The extrapolation, checked at full size ({datetime.date.today().isoformat()})\n\n"
            f"Command: `{command}` ({time.perf_counter() - started:.0f} s; {_traced(tree, keys, 1.0)} at full size): "
            f"rows of the retro-diction traced at full "
            f"size and at scale {args.scale:g} (with {args.scale / 2:g}), extrapolated, same parameters.\n\n"
            + render.table(["case", "pass", "measured ms", "traced at full size", f"from scale {args.scale:g}",
                            "extrapolated/full"], rows))
    print(body)
    if args.markdown:
        _write(args.markdown, SECTIONS["extrapolation"], body)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cards", action="store_true", help="the SASS cost cards")
    parser.add_argument("--all", action="store_true", help="with --cards: every instantiation, not the summary")
    parser.add_argument("--check", action="store_true", help="with --cards: exit 1 on an engine kernel's failure")
    parser.add_argument("--engine", action="store_true",
                        help="with --cards: the engine kernels only, compiling only their files (CI's check)")
    parser.add_argument("--cubins", metavar="DIR",
                        help="with --cards: the sm_90 cubins and ptxas reports the plugin's build kept in DIR "
                             "(tools/ptxas_reports.py as its CUDA compiler launcher) instead of compiling (CI)")
    parser.add_argument("--retro", action="store_true", help="the first GPU run's rows on the code at edecaa7")
    parser.add_argument("--fit", action="store_true", help="with --retro: fit the parameters on FIT_ROWS first")
    parser.add_argument("--extrapolation-check", action="store_true",
                        help="the --cases rows of the retro-diction traced at full size and at --scale")
    parser.add_argument("--cases", nargs="+", metavar="ID", help=f"case ids (default: {' '.join(shapes.DEFAULT)})")
    parser.add_argument("--scale", type=float, default=0.1, help="trace at this fraction of each shape (0.1)")
    parser.add_argument("--markdown", metavar="FILE", help="write the section into FILE (BENCHMARKS.md)")
    parser.add_argument("--jobs", type=int, default=2, help="compilers run at once (2)")
    parser.add_argument("--build", default=str(pipeline.ROOT / "build" / "gpu_model"), metavar="DIR",
                        help="where the cubins, recordings and traces are cached (build/gpu_model)")
    args = parser.parse_args(argv)
    if args.cubins and not args.cards:
        parser.error("--cubins goes with --cards")
    if args.engine and (args.markdown or not args.cards):
        parser.error("--engine goes with --cards, without --markdown (the section holds every kernel)")
    command = shlex.join(["python", "-m", "benchmarks.gpu_model", *(sys.argv[1:] if argv is None else argv)])
    if args.cards:
        return run_cards(args, command)
    if args.extrapolation_check:
        return run_extrapolation(args, command)
    return run_retro(args, command) if args.retro else run_model(args, command)


if __name__ == "__main__":
    raise SystemExit(main())
