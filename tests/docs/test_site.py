"""The docs site: it builds with ``mkdocs build --strict``, a broken link fails that
build, and its pages work in a real browser (headless Chromium): the landing page,
the API reference generated from the docstrings, and the search.

Needs the ``docs`` extra (MkDocs, Material, mkdocstrings, Selenium) and Chromium with
its driver (Debian: ``apt install chromium chromium-driver``); skipped without them.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("material")
pytest.importorskip("mkdocstrings")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = build(ROOT, out)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_site_builds_strict_with_every_page(site: Path):
    for page in ("index.html", "api/index.html", "reference/index.html",
                 "changelog/index.html", "benchmark-results/index.html",
                 "search/search_index.json"):
        assert (site / page).is_file(), page


def copy_docs(tmp_path: Path) -> Path:
    """What the docs site is built from, copied (no build outputs)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("README.md", "CHANGELOG.md", "mkdocs.yml"):
        shutil.copy(ROOT / name, copy / name)
    for folder in ("docs", "fastvec"):
        shutil.copytree(ROOT / folder, copy / folder,
                        ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for folder in ("benchmarks", "examples", "csrc"):
        (copy / folder).mkdir()
        for page in (ROOT / folder).glob("*.md"):
            shutil.copy(page, copy / folder / page.name)
    return copy


@pytest.mark.parametrize("link, named", [
    ("no-such-page.md", "no-such-page.md"),
    ("api.md#no-such-heading", "no-such-heading"),  # anchors are checked too
])
def test_a_broken_link_fails_the_strict_build(tmp_path: Path, link: str, named: str):
    copy = copy_docs(tmp_path)
    page = copy / "docs" / "async.md"
    page.write_text(page.read_text() + f"\nSee [what is not there]({link}).\n")
    result = build(copy, tmp_path / "site")
    assert result.returncode != 0
    assert named in result.stdout + result.stderr


def test_a_github_anchor_with_double_hyphens_reaches_the_sites_heading(tmp_path: Path):
    copy = copy_docs(tmp_path)  # ``### `step_async` / `step_wait` `` is #step_async--step_wait
    page = copy / "docs" / "async.md"
    page.write_text(page.read_text() + "\nSee [the split calls](api.md#step_async--step_wait).\n")
    result = build(copy, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr


# -- in a browser ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None  # type: ignore[assignment]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    webdriver = pytest.importorskip("selenium.webdriver")
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("needs chromium and chromedriver (apt install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    chrome = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=driver))
    chrome.set_page_load_timeout(60)
    yield chrome
    chrome.quit()


def wait_for(browser, condition, seconds: float = 20.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, seconds).until(condition)


def test_the_landing_page_loads(browser, served: str):
    from selenium.webdriver.common.by import By

    browser.get(served)
    assert "fastvec" in browser.title
    heading = browser.find_element(By.CSS_SELECTOR, "article h1")
    assert heading.text.strip() == "fastvec"
    assert "Switching to fastvec" in browser.find_element(By.TAG_NAME, "article").text
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "nav a")]
    assert any(h and h.rstrip("/").endswith("/api") for h in links)


def test_the_reference_shows_the_docstrings(browser, served: str):
    from selenium.webdriver.common.by import By

    browser.get(served + "reference/")
    text = browser.find_element(By.TAG_NAME, "article").text
    assert "SubprocVecEnv" in text and "max_concurrency" in text  # a parameter's doc
    assert "WorkerError" in text


def test_search_finds_a_page(browser, served: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(served)
    wait_for(browser, lambda b: b.find_element(By.CSS_SELECTOR, "label[for='__search']"))
    browser.find_element(By.CSS_SELECTOR, "label[for='__search']").click()
    box = wait_for(browser, lambda b: b.find_element(
        By.CSS_SELECTOR, "input[data-md-component='search-query']"))
    box.send_keys("autoreset")
    box.send_keys(Keys.SHIFT)  # some Material versions search on keyup
    results = wait_for(browser, lambda b: [r for r in b.find_elements(
        By.CSS_SELECTOR, ".md-search-result__item") if r.text.strip()] or None)
    assert any("utoreset" in r.text for r in results)
