"""Records the FFI calls of the peer report's cases, one directory per case and pass, for the traced replay.

Run by :mod:`benchmarks.gpu_model.trace` as a script in a fresh process, from outside the tree it models and
with that tree's root appended to the import path: its ``benchmarks`` package (the cases, as that commit had
them) and whichever jaxgraphops is installed (a development build of the same commit, with the emulated CUDA
handlers)::

    JGO_KERNELS=cuda-emulation JGO_FFI_RECORD=OUT/calls python record_cases.py ROOT OUT SCALE SOURCE ID...

SOURCE ``report`` takes the cases of ``benchmarks.cases`` (ids are the report's keys), ``model`` those of
``benchmarks.gpu_model.shapes``. For each case id and pass (forward, forward+backward) it runs the pass once
through the report's own runner (``benchmarks.runners``), moves the calls recorded meanwhile to
``OUT/KEY/PASS/`` and writes there the optimised HLO of the pass (``program.hlo``: the XLA work between the
custom calls) and ``case.json`` (the shape's description). Only the standard library, NumPy and JAX are
imported before ROOT's packages.
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

PASSES = ("forward", "forward+backward")


def main(argv):
    root, out, scale, source, ids = Path(argv[0]), Path(argv[1]), float(argv[2]), argv[3], argv[4:]
    sys.path.append(str(root))
    calls = Path(os.environ["JGO_FFI_RECORD"])
    if os.environ.get("JGO_KERNELS") != "cuda-emulation":
        sys.exit("record_cases: run with JGO_KERNELS=cuda-emulation")
    import jax

    from benchmarks import impl_jax, runners  # the modelled tree's

    if source == "report":  # the parts of benchmarks.cases that hold the ids
        from benchmarks import cases as report
        parts = {"pool": "_pool_cases", "hg_basis": "_relational_cases", "update_efeat": "_relational_cases",
                 "dmpnn": "_relational_cases"}
        needed = {next((f for k, f in parts.items() if i.startswith(k)), "_graph_cases") for i in ids}
        cases = {c.key: (c.key, impl_jax.JAXGRAPHOPS, c) for part in sorted(needed)
                 for c in getattr(report, part)(scale)}
    else:
        from benchmarks.gpu_model import shapes
        cases = {c.id: (c.key, c.library, c) for c in shapes.cases(scale, ids)}
    for key in ids:
        impl, library, case = cases[key]
        runner = runners.IMPLEMENTATIONS[impl][library](case.data)
        for pass_ in PASSES:
            target = out / key / pass_
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            started = time.perf_counter()
            jax.block_until_ready(runner.calls[pass_]())
            seconds = time.perf_counter() - started
            for f in sorted(calls.glob("*.jgocase")):
                shutil.move(str(f), target / f.name)
            (target / "program.hlo").write_text(_compiled(runner, pass_).as_text())
            (target / "case.json").write_text(json.dumps(
                {"key": key, "op": case.op, "shape": case.shape, "pass": pass_, "scale": scale,
                 "emulated_seconds": seconds}))
            print(f"{key} {pass_}: {len(list(target.glob('*.jgocase')))} calls, {seconds:.1f} s", flush=True)


def _compiled(runner, pass_):
    """The compiled executable behind ``runner.calls[pass_]`` (benchmarks.runners.jax_runner's ``compile_``)."""
    call = runner.calls[pass_]
    cells = dict(zip(call.__code__.co_freevars, (c.cell_contents for c in call.__closure__ or ())))
    if "compile_" not in cells:
        raise SystemExit("record_cases: benchmarks.runners.jax_runner no longer compiles through compile_")
    return cells["compile_"](pass_)


if __name__ == "__main__":
    main(sys.argv[1:])
