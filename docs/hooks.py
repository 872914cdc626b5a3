"""MkDocs hooks: the project's other Markdown files as pages of the docs site.

The README is the landing page, and the changelog and the READMEs of
``benchmarks/``, ``examples/`` and ``csrc/`` join ``docs/*.md``.  Links between these
files are written for the repository (``../README.md``, ``docs/api.md``); they are
rewritten to the pages that hold those files, so that the site's strict build checks
them like any other link.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
# repository path -> site page, for the files that are not in docs/
PAGES = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "benchmarks/README.md": "benchmark-results.md",
    "benchmarks/HISTORY.md": "benchmark-history.md",  # dated runs from development
    "examples/README.md": "examples.md",
    "csrc/README.md": "kernels.md",
}
SOURCE = {page: path for path, page in PAGES.items()}  # site page -> repository path
# A link to a Markdown file or an image: ](path) or ](path#anchor)
LINK = re.compile(r"\]\(([^)#\s]+\.(?:md|png|svg|jpe?g|gif))(#[^)\s]*)?\)")
# A link to a heading on the same page: ](#anchor)
SAME_PAGE = re.compile(r"\]\((#[^)\s]+)\)")


def on_files(files, config):
    """Add the Markdown files outside ``docs/`` as pages."""
    for path, page in PAGES.items():
        files.append(File.generated(config, page, content=(ROOT / path).read_text()))
    return files


def site_anchor(anchor: str) -> str:
    """GitHub's anchor of a heading as the site's: GitHub keeps every hyphen it makes of
    spaces and punctuation (``### `a` / `b` `` is ``#a--b``), Python-Markdown's slugs
    fold a run of them into one (``#a-b``)."""
    return re.sub(r"-{2,}", "-", anchor)


def on_page_markdown(markdown, page, config, files):
    """Rewrite the repository's links between Markdown files (and to images under
    docs/) to the site's pages and files, and their anchors to the site's."""
    source = SOURCE.get(page.file.src_uri, "docs/" + page.file.src_uri)

    def rewrite(match: re.Match) -> str:
        target, anchor = match.group(1), match.group(2) or ""
        if "://" in target:
            return match.group(0)
        path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
        if path in PAGES:
            path = PAGES[path]
        elif path.startswith("docs/"):
            path = path[len("docs/"):]
        else:
            return match.group(0)  # left as it is: the strict build reports it
        return f"]({path}{site_anchor(anchor)})"

    markdown = LINK.sub(rewrite, markdown)
    return SAME_PAGE.sub(lambda match: f"]({site_anchor(match.group(1))})", markdown)
