"""The README's quickstart lines, as a user copies them: ``python tools/readme_quickstart.py N`` prints line N
(1: install and run the demo, 2: install and run the tests) of the first ``bash`` block under the README's
``## Quickstart`` heading. CI runs what this prints, so the README's commands are the ones tested.

>>> text = "# x\\n## Quickstart\\n\\nFrom a clone:\\n\\n```bash\\na && b\\nc && d\\n```\\n## Next\\n"
>>> quickstart_lines(text)
['a && b', 'c && d']
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart_lines(text: str) -> list[str]:
    """The non-empty lines of the first ``bash`` code block of the ``## Quickstart`` section."""
    section = re.search(r"^## Quickstart\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    block = section and re.search(r"^```bash\n(.*?)^```", section.group(1), re.MULTILINE | re.DOTALL)
    if not block:
        raise ValueError("README.md: no ```bash block under '## Quickstart'")
    return [line for line in block.group(1).splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    lines = quickstart_lines(README.read_text())
    if len(argv) != 1 or not argv[0].isdigit() or not 1 <= int(argv[0]) <= len(lines):
        sys.exit(f"usage: readme_quickstart.py N, N in 1..{len(lines)}")
    print(lines[int(argv[0]) - 1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
