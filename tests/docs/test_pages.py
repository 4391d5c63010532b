"""The operator-facing pages (README.md and docs/, without docs/dev/) stay readable: no table
cell over 40 words, on every page."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
OPERATOR_PAGES = [REPO / "README.md"] + sorted(p for p in DOCS.rglob("*.md") if DOCS / "dev" not in p.parents)


def cells(page: Path):
    fenced = False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            continue
        # A `|` inside backticks is not a column.
        line = re.sub(r"`[^`]*`", lambda m: m[0].replace("|", "/"), line)
        for cell in line.strip().strip("|").split("|"):
            yield n, cell


def test_no_table_cell_runs_past_40_words():
    long = [
        f"{page.relative_to(REPO)}:{n}: {len(cell.split())} words: {cell.strip()[:60]}…"
        for page in OPERATOR_PAGES
        for n, cell in cells(page)
        if len(cell.split()) > 40
    ]
    assert not long, "\n".join(long)
