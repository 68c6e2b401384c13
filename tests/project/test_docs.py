"""The README stays a five-minute read, and every link between it and docs/ leads somewhere."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.fast  # reads files only

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (lower case, punctuation dropped, spaces to -)."""
    heads = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S),
                       flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_the_readme_is_short_and_links_every_docs_page() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    linked = set(LINK.findall(text))
    for page in (ROOT / "docs").glob("*.md"):
        assert f"docs/{page.name}" in linked, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # an outside address
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(dest), f"{page.name}: no heading for #{anchor} in {dest.name}"
