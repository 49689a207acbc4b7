"""Where a source build's time went, per translation unit: ninja's log of a build directory, and the CPU time
of each compile where the build recorded it.

``python tools/build_times.py BUILD_DIR [--top N]`` prints the compile steps of the last build in
BUILD_DIR (e.g. the ``-Cbuild-dir`` of ``pip wheel``) by wall time, longest first, with their sum and the
build's span (on 2 cores about half the sum). Wall times include waits for a core on a busy machine; CPU
times (the compiler's user + system time) do not, and are the figure to compare between builds. They are
recorded by this script as a compiler launcher, which runs each compile and appends its CPU time to
``BUILD_DIR/cpu_times.tsv``::

    CMAKE_CXX_COMPILER_LAUNCHER="python;tools/build_times.py;--record;BUILD_DIR/cpu_times.tsv" \\
        pip wheel -v --no-deps -Cbuild-dir=BUILD_DIR .

The same build directory's earlier steps, not rebuilt by the last build, keep their last time.

>>> log = "# ninja log v7\\n0\\t900\\t1\\tgno.cc.o\\tab\\n0\\t300\\t1\\tgat.cc.o\\tcd\\n5\\t2000\\t1\\tgno.cc.o\\tef\\n"
>>> [(s.output, s.seconds) for s in read_log(log)]
[('gno.cc.o', 1.995), ('gat.cc.o', 0.3)]
>>> read_cpu_times("/b/gno.cc.o\\t12.5\\n/b/gat.cc.o\\t3.0\\n/b/gno.cc.o\\t11.0\\n")
{'/b/gno.cc.o': 11.0, '/b/gat.cc.o': 3.0}
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

CPU_LOG = "cpu_times.tsv"


class Step(NamedTuple):
    output: str
    start: float  # seconds since the build started
    seconds: float


def read_log(text: str) -> list[Step]:
    """The last entry of each output in a ``.ninja_log`` (format v5 to v7), longest first."""
    last: dict[str, Step] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        start, end, _, output = line.split("\t")[:4]
        last[output] = Step(output, int(start) / 1000, (int(end) - int(start)) / 1000)
    return sorted(last.values(), key=lambda s: -s.seconds)


def read_cpu_times(text: str) -> dict[str, float]:
    """The last recorded CPU seconds of each output in a ``cpu_times.tsv`` (``OUTPUT<TAB>SECONDS`` lines)."""
    times: dict[str, float] = {}
    for line in text.splitlines():
        if line.strip():
            output, seconds = line.rsplit("\t", 1)
            times[output] = float(seconds)
    return times


def record(log: Path, command: list[str]) -> int:
    """Runs ``command`` (a compile whose output follows ``-o``), appends its output's path and the compiler's user +
    system CPU seconds (its children's included) to ``log``, and returns its exit status."""
    child = subprocess.Popen(command)
    _, status, usage = os.wait4(child.pid, 0)
    if "-o" in command[:-1]:
        output = os.path.abspath(command[command.index("-o") + 1])
        with open(log, "a") as f:  # one short line per write: appends from parallel compiles do not interleave
            f.write(f"{output}\t{usage.ru_utime + usage.ru_stime:.2f}\n")
    return os.waitstatus_to_exitcode(status)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--record"]:
        if len(argv) < 3:
            sys.exit("usage: build_times.py --record LOG COMPILER [ARGS...]")
        return record(Path(argv[1]), argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--top", type=int, default=10, help="steps to list (default 10)")
    parser.add_argument("--cpu-log", type=Path, help=f"the recorded CPU times (default: BUILD_DIR/{CPU_LOG})")
    args = parser.parse_args(argv)
    log = args.build_dir / ".ninja_log"
    if not log.is_file():
        parser.error(f"{log} not found: not a ninja build directory")
    steps = [s for s in read_log(log.read_text()) if s.output.endswith((".o", ".gch"))]  # objects, precompiled headers
    if not steps:
        parser.error(f"{log} lists no compile step")
    cpu_log = args.cpu_log or args.build_dir / CPU_LOG
    cpu = read_cpu_times(cpu_log.read_text()) if cpu_log.is_file() else {}
    cpu = {o: cpu.get(os.path.abspath(args.build_dir / o)) for o in (s.output for s in steps)}
    span = max(s.start + s.seconds for s in steps) - min(s.start for s in steps)
    summary = f"{len(steps)} compile steps, {sum(s.seconds for s in steps):.1f} s in all, {span:.1f} s from first to last"
    if any(v is not None for v in cpu.values()):
        print(f"{summary}; CPU time {sum(v or 0 for v in cpu.values()):.1f} s ({CPU_LOG}):")
        steps.sort(key=lambda s: -(cpu[s.output] or 0))
        for s in steps[:args.top]:
            seconds = cpu[s.output]
            print(f"{s.seconds:8.1f} s  {'' if seconds is None else f'{seconds:7.1f} s CPU'}  {s.output}")
    else:
        print(f"{summary}:")
        for s in steps[:args.top]:
            print(f"{s.seconds:8.1f} s  {s.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
