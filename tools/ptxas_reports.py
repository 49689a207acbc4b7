#!/usr/bin/env python3
"""A CMake compiler launcher that keeps ptxas's report of every CUDA file a build compiles.

    CMAKE_CUDA_COMPILER_LAUNCHER="python;tools/ptxas_reports.py;DIR" pip wheel ./plugins/cuda13

runs each ``nvcc ... -c ffi/cuda/NAME.cu ...`` of the build with ``-Xptxas=-v`` appended (a report, no change
to the code generated), passes its output through and writes it to ``DIR/NAME.ptxas``.
``python -m benchmarks.gpu_resources --check --reports DIR`` then reads the budget from the plugin's own
build instead of compiling every file again (CI's GPU-budget leg). Commands without a ``.cu`` source run
unchanged. Exits with the compiler's status.
"""

import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.exit("usage: ptxas_reports.py DIR COMPILER [ARGS...]")
    out, command = Path(argv[0]), argv[1:]
    sources = [a for a in command[1:] if a.endswith(".cu")]
    if not sources:
        return subprocess.run(command, check=False).returncode
    done = subprocess.run([*command, "-Xptxas=-v"], capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{Path(sources[-1]).stem}.ptxas").write_text(done.stdout + done.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
