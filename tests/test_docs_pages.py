"""The documentation's pages: their code runs, their figures exist, every example has a tutorial (no Sphinx needed).

The Python blocks of the getting-started page and the user guide run here, page by page in a fresh
namespace, so a page cannot drift from the library; the docstrings' examples run in
``tests/test_docstrings.py``. ``sphinx-build -W`` (CI) checks the rest of the site.
"""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
ROOT = DOCS.parent
CODE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = sorted(str(p.relative_to(DOCS)) for p in [DOCS / "index.md", DOCS / "getting_started.md",
                                                    *(DOCS / "guide").glob("*.md")]
               if CODE.search(p.read_text()))  # the pages with Python blocks


@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page):
    text = (DOCS / page).read_text()
    blocks = CODE.findall(text)
    code = "\n".join(blocks)
    for framework in ("flax", "equinox"):  # the layers' frameworks are optional extras
        if framework in code:
            pytest.importorskip(framework, reason=f"{page} uses {framework}")
    namespace = {"__name__": f"docs_{Path(page).stem}"}
    for block in blocks:
        exec(compile(block, f"docs/{page}", "exec"), namespace)  # noqa: S102 (the page's own example)


def test_every_example_has_a_tutorial_page():
    """Each ``examples/*.py`` has ``docs/examples/<name>.md`` with its source included, in the examples' toctree."""
    index = (DOCS / "examples" / "index.md").read_text()
    problems = []
    for script in sorted((ROOT / "examples").glob("*.py")):
        page = DOCS / "examples" / f"{script.stem}.md"
        if not page.exists():
            problems.append(f"{script.name}: no {page.relative_to(ROOT)}")
            continue
        if f"../../examples/{script.name}" not in page.read_text():
            problems.append(f"{page.name} does not include examples/{script.name}")
        if not re.search(rf"^{re.escape(script.stem)}$", index, re.MULTILINE):
            problems.append(f"{page.name} is not in docs/examples/index.md's toctree")
    assert not problems, problems


def test_figures_and_includes_exist():
    """Every image and included file a page names exists."""
    pattern = re.compile(r"```\{(?:image|figure|literalinclude|include)\}\s+(\S+)|!\[[^\]]*\]\(([^)\s]+)\)")
    missing = []
    for page in DOCS.rglob("*.md"):
        if "_build" in page.parts:
            continue
        for match in pattern.finditer(page.read_text()):
            target = match.group(1) or match.group(2)
            if target.startswith(("http://", "https://")):
                continue
            path = DOCS / target.lstrip("/") if target.startswith("/") else page.parent / target
            if not path.exists():
                missing.append(f"{page.relative_to(DOCS)}: {target}")
    assert not missing, missing


def test_every_example_page_quotes_the_run_ci_checks():
    """Each example's page marks the run CI makes of it and the output lines it quotes from that run
    (tests/example_pages.py); tests/test_examples_run.py and tests/test_examples_qm9.py compare them with what
    the example prints, so a quoted figure cannot drift."""
    from example_pages import ci_run

    pages = sorted(p for p in (DOCS / "examples").glob("*.md") if p.stem != "index")
    assert {p.stem for p in pages} == {p.stem for p in (ROOT / "examples").glob("*.py")}
    for page in pages:
        args, lines = ci_run(page.read_text())
        assert lines, f"{page}: its ci-run block quotes no line"
        assert not {"--plot", "--out"} & set(args), f"{page}: the test chooses where figures go, not the page"
