"""The documentation runs: doctests of the public modules, and marked code blocks of the
README and of docs/.

A code block runs when the line just before its opening ```` ```python ```` fence
is ``<!-- run -->`` (invisible on GitHub), or ``<!-- run: needs pettingzoo, pygame
-->`` for a block that needs optional packages.  The marked blocks of one page
run in order in one namespace, as a script would (``__name__`` is
``"__main__"``), so a page can define an env in one block and use it in the
next; at the first block whose packages are not installed, the rest of the page
is skipped.  Unmarked blocks are illustrations and are not run.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
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
    "fastvec.tiling",
    "fastvec.make",
    "fastvec.vector.sync",
    "fastvec.vector.base",
    "fastvec.vector.split_calls",
    "fastvec.vector.env_calls",
    "fastvec.vector.arguments",
    "fastvec.vector.subproc",
    "fastvec.vector.async_batches",
]

# ``<!-- run -->`` (or ``<!-- run: needs a, b -->``), a ```python fence, the code, the fence.
RUN_BLOCK = re.compile(r"^<!-- run(?:: needs ([\w., ]+))? -->\n```python\n(.*?)^```$",
                       re.MULTILINE | re.DOTALL)
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
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


def run_blocks(page: Path) -> list[tuple[list[str], str]]:
    """The marked blocks of ``page``: (the packages each needs, its code)."""
    return [([name.strip() for name in needs.split(",") if name.strip()], textwrap.dedent(code))
            for needs, code in RUN_BLOCK.findall(page.read_text())]


def missing(packages: list[str]) -> list[str]:
    return [name for name in packages if importlib.util.find_spec(name) is None]


def test_pages_with_marked_blocks_are_found() -> None:
    """The marker convention has not silently stopped matching."""
    assert run_blocks(DOCS / "autoreset.md"), "no <!-- run --> blocks found in autoreset.md"
    assert any(needs for needs, _ in run_blocks(ROOT / "README.md")), "no needs markers"


@pytest.mark.subprocess  # some pages start worker processes: check for leaks afterwards
@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_marked_code_blocks_run(page: Path) -> None:
    namespace: dict = {"__name__": "__main__"}
    try:
        for number, (needs, code) in enumerate(run_blocks(page), start=1):
            if missing(needs):
                pytest.skip(f"{page.name}, run block {number} and after need "
                            f"{', '.join(missing(needs))}")
            try:
                exec(compile(code, f"{page.name}, block {number}", "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"{page.name}, run block {number} failed: {exc!r}\n{code}")
    finally:  # what a page left open (a failed block's envs) is closed, workers with it
        for value in namespace.values():
            if hasattr(value, "close") and hasattr(value, "num_envs"):
                value.close()


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    text = FENCE.sub("", page.read_text())
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
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
