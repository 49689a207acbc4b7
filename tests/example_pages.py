"""The figures that the example pages (docs/examples/NAME.md) quote from the run CI makes of each example.

A page marks that run with ``<!-- ci-run: ARGS -->`` (the example's arguments, maybe none) followed by a
``text`` block of the lines it quotes from the run's output. The tests of the examples run the example with
those arguments (:func:`ci_args`) and :func:`check_quoted_figures` compares every quoted line with the line of
the output of the same shape (its text with the numbers masked; in order): the same numbers, within 5%
(counts exactly, error magnitudes such as 3.0e-08 within a factor of 10, or both at most 1e-6). Times, rates and speed-ups (a
number followed by ms, s, min, x or a unit per second; lines about seconds, time or throughput) are not
compared. So a page cannot drift from what its example prints.

>>> page = "x\\n<!-- ci-run: --quick -->\\n```text\\ntest MAE   48.3 meV (mean 145.0)\\nsteps  3\\n```\\n"
>>> ci_run(page)
(['--quick'], ['test MAE   48.3 meV (mean 145.0)', 'steps  3'])
>>> compare_lines(["test MAE   48.3 meV (mean 145.0)"], "data: 12 s\\ntest MAE   49.0 meV (mean 145.0)\\n")
[]
>>> compare_lines(["| 1 | 0.0805 | 7.5e-09 |", "max diff 3.0e-08"], "| 1 | 0.0805 | 0.0e+00 |\\nmax diff 3.0e-05\\n")
["'max diff 3.0e-08': printed ['3.0e-05']"]
>>> compare_lines(["step 0.139 ms (reference 0.13 ms, 1.7x), 200 steps"], "step 0.07 ms (reference 0.1 ms, 3x), 200 steps")
[]
>>> compare_lines(["| 1 | 0.0805 |", "| 2 | 0.0539 |"], "| epoch | loss |\\n| 1 | 0.0805 |\\n| 2 | 0.0600 |\\n")
["'| 2 | 0.0539 |': printed ['2', '0.0600']"]
>>> compare_lines(["steps  3"], "steps  4\\n")
["'steps  3': printed ['4']"]
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

PAGES = Path(__file__).resolve().parent.parent / "docs" / "examples"
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
TIMED_LINE = re.compile(r"\b(?:seconds|time|throughput)\b")  # a line of times: its numbers are not compared
TIMING = re.compile(r"\s*(?:ms|s|min|x|[a-z]*/s)\b")  # after a number: a time or a speed-up, not compared
RELATIVE_TOLERANCE = 0.05


def ci_run(text: str) -> tuple[list[str], list[str]]:
    """(the example's arguments, the quoted output lines) of the page text's ``ci-run`` marker."""
    found = re.search(r"<!-- ci-run:(.*?)-->\s*```text\n(.*?)```", text, re.DOTALL)
    if not found:
        raise ValueError("no '<!-- ci-run: ARGS -->' followed by a ```text block")
    return shlex.split(found.group(1)), [line for line in found.group(2).splitlines() if line.strip()]


def ci_args(example: str) -> list[str]:
    """The arguments with which CI runs ``examples/EXAMPLE.py``, from its page."""
    return ci_run((PAGES / f"{example}.md").read_text())[0]


def _shape_and_numbers(line: str) -> tuple[str, list[str]]:
    """The line with its numbers masked (its shape: a label, a table row's cells) and its compared numbers."""
    shape = " ".join(NUMBER.sub("#", line).split())
    if TIMED_LINE.search(shape):
        return shape, []
    return shape, [m.group().replace(",", "") for m in NUMBER.finditer(line) if not TIMING.match(line, m.end())]


def _close(quoted: str, printed: str) -> bool:
    q, p = float(quoted), float(printed)
    if "e" in quoted:  # an error magnitude (3.0e-08): the same order, or both rounding noise (0 and 7.5e-09)
        return max(abs(p), abs(q)) <= 1e-6 or (q != 0 and 0.1 <= abs(p / q) <= 10)
    if q == int(q) and abs(q) < 1000 and "." not in quoted:  # counts (compilations, steps): exactly
        return q == p
    return abs(p - q) <= RELATIVE_TOLERANCE * abs(q)


def compare_lines(quoted: list[str], output: str) -> list[str]:
    """The quoted lines that the output does not bear out. Each quoted line is matched, in order, with the next
    printed line of the same shape (its text with the numbers masked), whose numbers must then agree."""
    printed = [_shape_and_numbers(line) for line in output.splitlines() if line.strip()]
    problems, at = [], 0
    for line in quoted:
        shape, want = _shape_and_numbers(line)
        match = next((i for i in range(at, len(printed)) if printed[i][0] == shape), None)
        if match is None:
            problems.append(f"{line.strip()!r}: no such line printed (after the lines matched before it)")
            continue
        got, at = printed[match][1], match + 1
        if len(got) != len(want) or not all(_close(w, g) for w, g in zip(want, got)):
            problems.append(f"{line.strip()!r}: printed {got}")
    return problems


def check_quoted_figures(example: str, output: str) -> None:
    """Fails naming every line of ``docs/examples/EXAMPLE.md``'s CI run that the output does not bear out."""
    page = PAGES / f"{example}.md"
    problems = compare_lines(ci_run(page.read_text())[1], output)
    assert not problems, (f"{page} quotes figures its CI run no longer prints (rerun "
                          f"`python examples/{example}.py {shlex.join(ci_args(example))}` and update the page):\n"
                          + "\n".join(problems))
