"""The documentation runs: doctests of the public modules, and marked code blocks in docs/.

A code block in ``docs/*.md`` runs when the line just before its opening
```` ```python ```` fence is ``<!-- run -->`` (invisible on GitHub).  The marked
blocks of one page run in order in one namespace, as a script would (``__name__``
is ``"__main__"``), so a page can define an env in one block and use it in the
next.  Unmarked blocks are illustrations and are not run.
"""

from __future__ import annotations

import doctest
import importlib
import re
import textwrap
from pathlib import Path

import pytest

import fastvec

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

MODULES = [
    "fastvec",
    "fastvec.errors",
    "fastvec.sync_env",
    "fastvec._base",
    "fastvec.tiling",
    "fastvec.make",
    "fastvec.subproc_env",
    "fastvec._async",
]

# ``<!-- run -->``, then a ```python fence, the code, and the closing fence.
RUN_BLOCK = re.compile(r"^<!-- run -->\n```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("name", MODULES)
def test_doctests_of_module_pass(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctests of {name} failed"


@pytest.mark.parametrize("name", fastvec.__all__)
def test_every_public_name_has_a_docstring(name: str) -> None:
    obj = getattr(fastvec, name)
    assert (obj.__doc__ or "").strip(), f"fastvec.{name} has no docstring"


def run_blocks(page: Path) -> list[str]:
    return [textwrap.dedent(code) for code in RUN_BLOCK.findall(page.read_text())]


def test_pages_with_marked_blocks_are_found() -> None:
    """The marker convention has not silently stopped matching."""
    assert run_blocks(DOCS / "autoreset.md"), "no <!-- run --> blocks found in autoreset.md"


@pytest.mark.subprocess  # some pages start worker processes: check for leaks afterwards
@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda page: page.name)
def test_marked_code_blocks_in_docs_run(page: Path) -> None:
    namespace: dict = {"__name__": "__main__"}
    for number, code in enumerate(run_blocks(page), start=1):
        try:
            exec(compile(code, f"{page.name}, block {number}", "exec"), namespace)
        except Exception as exc:
            pytest.fail(f"{page.name}, run block {number} failed: {exc!r}\n{code}")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    text = FENCE.sub("", page.read_text())
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted(DOCS.glob("*.md"))],
                         ids=lambda page: page.name)
def test_relative_links_point_to_files_and_headings_that_exist(page: Path) -> None:
    text = FENCE.sub("", page.read_text())
    for target in LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name} links to missing {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{page.name}: no heading #{anchor} in {path}"
