"""The documentation runs: doctests of the public modules, and marked code blocks of the
README and of docs/.

A code block runs when the line just before its opening ```` ```python ```` fence
is ``<!-- run -->`` (invisible on GitHub), or ``<!-- run: needs pettingzoo, pygame
-->`` for a block that needs optional packages.  The marked blocks of one page
run in order in one namespace, as a script would (``__name__`` is
``"__main__"``), so a page can define an env in one block and use it in the
next; the README's blocks each run alone (a reader pastes one of them), so each
imports what it uses.  A block whose packages are not installed is skipped, and so is every later
block that needs packages (it may use what a skipped block defined); blocks that
need nothing still run, so they must not use what a block with needs defined.  A
page whose every block is skipped is a skipped test.  Unmarked blocks are
illustrations and are not run.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import textwrap
import types
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
    "fastvec.registration",
    "fastvec.vector.sync",
    "fastvec.vector.base",
    "fastvec.vector.split_calls",
    "fastvec.vector.env_calls",
    "fastvec.vector.arguments",
    "fastvec.vector.subproc",
    "fastvec.vector.async_batches",
    "fastvec.pool.restarts",
    "fastvec.selfplay.ratings",
    "fastvec.selfplay.evaluation",
    "fastvec.selfplay.players",
    "fastvec.selfplay.seats",
    "fastvec.integrations.rllib",  # imports Ray only when an env is registered
]

# ``<!-- run -->`` (or ``<!-- run: needs a, b -->``), a ```python fence, the code, the fence.
RUN_BLOCK = re.compile(r"^<!-- run(?:: needs ([\w., ]+))? -->\n```python\n(.*?)^```$",
                       re.MULTILINE | re.DOTALL)
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
ALONE = {ROOT / "README.md"}  # pages whose blocks each run in a fresh namespace
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
    blocks, skipped = run_blocks(page), []
    try:
        for number, (needs, code) in enumerate(blocks, start=1):
            if missing(needs) or (needs and skipped):
                skipped.append(f"block {number} ({', '.join(missing(needs)) or 'after a skip'})")
                continue
            if page in ALONE:
                close_vector_envs(namespace)
                namespace = {"__name__": "__main__"}
            try:
                exec(compile(code, f"{page.name}, block {number}", "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"{page.name}, run block {number} failed: {exc!r}\n{code}")
    finally:  # what a page left open (a failed block's envs) is closed, workers with it
        close_vector_envs(namespace)
    if blocks and len(skipped) == len(blocks):
        pytest.skip(f"{page.name}: every run block needs a package that is missing: "
                    f"{'; '.join(skipped)}")


def close_vector_envs(namespace: dict) -> None:
    """Close the vector envs a block left in ``namespace``."""
    for value in namespace.values():
        if isinstance(value, types.ModuleType):
            continue  # (a module's lazy attributes may raise ImportError)
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


# -- every python block runs, or is a signature checked against the code ----------------

# A block marked ``<!-- signature -->`` shows how a callable is called: its name and
# its parameters (with their defaults) must be the code's.  ``<!-- not run: why -->``
# is for what the tests cannot run (a multi-node Ray cluster); these are listed here.
SIGNATURE_BLOCK = re.compile(r"^<!-- signature -->\n```python\n(.*?)^```$",
                             re.MULTILINE | re.DOTALL)
NOT_RUN = {("distributed.md", "needs a Ray cluster of several nodes"): 2}


def python_blocks(page: Path) -> list[str]:
    """The marker line before each ```python block of ``page`` ('' when none)."""
    lines = page.read_text().split("\n")
    return [lines[i - 1] if i else "" for i, line in enumerate(lines) if line == "```python"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_python_block_runs_or_is_checked(page: Path) -> None:
    not_run: dict[str, int] = {}
    for marker in python_blocks(page):
        if marker.startswith("<!-- not run: "):
            why = marker[len("<!-- not run: "):-len(" -->")]
            not_run[why] = not_run.get(why, 0) + 1
            continue
        assert marker.startswith(("<!-- run", "<!-- signature -->")), \
            f"{page.name}: a python block that neither runs nor is checked ({marker!r})"
    assert not_run == {why: n for (name, why), n in NOT_RUN.items() if name == page.name}


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += char in "([{"
        depth -= char in ")]}"
        current += char
    return [p for p in [*parts, current.strip()] if p]


def _documented(block: str) -> tuple[str, list[tuple[str, str | None]]]:
    """``(callable name, [(parameter, default text or None), ...])`` of a signature block."""
    code = " ".join(line.split("#")[0].strip() for line in block.splitlines())
    match = re.search(r"([\w.]+)\((.*)\)\s*$", code)
    assert match, f"not a call: {block!r}"
    params = []
    for part in _split_top_level(match.group(2)):
        if part == "*":
            continue
        name, _, default = part.partition("=")
        params.append((name.strip().lstrip("*"), default.strip() or None))
    return match.group(1), params


def _resolve(name: str):
    from fastvec.integrations import sb3

    owner, _, attr = name.rpartition(".")
    if owner == "fastvec":
        obj = getattr(fastvec, attr)
        return obj.__init__ if isinstance(obj, type) else obj
    if owner.startswith("fastvec."):  # a module's attribute, or a class's method
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError as exc:
                if exc.name and not exc.name.startswith("fastvec"):  # an optional package
                    pytest.skip(f"{name} needs {exc.name}, which is not installed")
                continue
            for part in parts[cut:]:
                obj = getattr(obj, part)
            return obj
    if owner == "envs":  # a method of the vector envs (the async ones included)
        # close(**kwargs) passes its keywords to close_extras, which names them
        return getattr(fastvec.SubprocVecEnv, "close_extras" if attr == "close" else attr)
    return getattr(sb3, attr)


SIGNATURES = [(page, block) for page in PAGES
              for block in SIGNATURE_BLOCK.findall(page.read_text())]


@pytest.mark.parametrize("page, block", SIGNATURES,
                         ids=[f"{p.name}:{_documented(b)[0]}" for p, b in SIGNATURES])
def test_signature_blocks_are_the_codes(page: Path, block: str) -> None:
    import inspect

    from gymnasium.vector import AutoresetMode

    name, documented = _documented(block)
    actual = [p for p in inspect.signature(_resolve(name)).parameters.values()
              if p.name != "self"]
    if name == "envs.close":  # close_extras also takes Gymnasium's **kwargs, unused
        actual = [p for p in actual if p.kind is not p.VAR_KEYWORD]
    assert [n for n, _ in documented] == [p.name for p in actual], f"{page.name}: {name}"
    for (param, default), real in zip(documented, actual, strict=True):
        if default is not None:
            value = eval(default, {"AutoresetMode": AutoresetMode})  # noqa: S307 - our docs
            assert value == real.default, f"{page.name}: {name}({param}={default})"


# -- api.md and reference.md name every public name -------------------------------------

# The packages whose names the README promises in api.md (their ``__all__``, read from the
# source, so a package whose extra is not installed is checked too).
PUBLIC_PACKAGES = ["fastvec", "fastvec.atari", "fastvec.selfplay", "fastvec.openspiel"]
# Names that reference.md shows inside their module's ``:::`` block.
IN_MODULE_BLOCK = {("fastvec.selfplay", name): "fastvec.selfplay.ratings"
                   for name in ("elo_expected", "elo_update", "fit_elo")}


def _exported(package: str) -> list[str]:
    import ast

    tree = ast.parse((ROOT / package.replace(".", "/") / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__"
                                                for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{package} has no __all__")


def _code_words(page: Path) -> set[str]:
    """The words inside the code of ``page``: inline spans and fenced blocks."""
    text = page.read_text()
    code = FENCE.findall(text) + re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    return set(re.findall(r"\w+", " ".join(code)))


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_api_and_reference_pages_name_every_public_name(package: str) -> None:
    api = _code_words(DOCS / "api.md")
    reference = set(re.findall(r"^::: ([\w.]+)$", (DOCS / "reference.md").read_text(),
                               re.MULTILINE))
    for name in _exported(package):
        assert name in api, f"api.md has no entry for {package}.{name}"
        block = IN_MODULE_BLOCK.get((package, name), f"{package}.{name}")
        assert block in reference, f"reference.md has no '::: {block}' block"
