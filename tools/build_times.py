"""Where a source build's time went, per translation unit: ninja's log of a build directory.

``python tools/build_times.py BUILD_DIR [--top N]`` prints the compile steps of the last build in
BUILD_DIR (e.g. the ``-Cbuild-dir`` of ``pip wheel``) by wall time, longest first, with their sum and the
build's span (on 2 cores about half the sum). Times are wall clock: on a busy machine they include waits
for a core. The same build directory's earlier steps, not rebuilt by the last build, keep their last time.

>>> log = "# ninja log v7\\n0\\t900\\t1\\tgno.cc.o\\tab\\n0\\t300\\t1\\tgat.cc.o\\tcd\\n5\\t2000\\t1\\tgno.cc.o\\tef\\n"
>>> [(s.output, s.seconds) for s in read_log(log)]
[('gno.cc.o', 1.995), ('gat.cc.o', 0.3)]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--top", type=int, default=10, help="steps to list (default 10)")
    args = parser.parse_args(argv)
    log = args.build_dir / ".ninja_log"
    if not log.is_file():
        parser.error(f"{log} not found: not a ninja build directory")
    steps = [s for s in read_log(log.read_text()) if s.output.endswith(".o")]
    if not steps:
        parser.error(f"{log} lists no compile step")
    span = max(s.start + s.seconds for s in steps) - min(s.start for s in steps)
    print(f"{len(steps)} compile steps, {sum(s.seconds for s in steps):.1f} s in all, {span:.1f} s from first to last:")
    for s in steps[:args.top]:
        print(f"{s.seconds:8.1f} s  {s.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
