"""Every link an operator can follow resolves: Markdown links in README.md and docs/, and the
`docs/….md#anchor` references the binary prints and the charts render (Events, `check`, alert
runbooks, values comments)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
REFERENCE = re.compile(r"docs/[\w/.-]+\.md(?:#[a-z0-9_-]+)?")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings, with its -1, -2 suffixes for repeats."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken(target: str, base: Path) -> str | None:
    path, _, anchor = target.partition("#")
    page = (base / path).resolve() if path else None
    if page is not None and not page.exists():
        return f"no file {path}"
    if anchor and page is not None and page.suffix == ".md" and anchor not in anchors(page):
        return f"no heading #{anchor} in {page.relative_to(REPO)}"
    return None


def test_every_link_in_the_docs_resolves():
    problems = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            if target.startswith("#"):
                target = page.name + target
            why = broken(target, page.parent)
            if why:
                problems.append(f"{page.relative_to(REPO)}: ({target}) {why}")
    assert not problems, "\n".join(problems)


def test_every_docs_reference_in_the_code_and_charts_resolves():
    problems = []
    sources = [p for d in ("src", "charts") for p in (REPO / d).rglob("*") if p.is_file()]
    for source in sources:
        try:
            text = source.read_text()
        except UnicodeDecodeError:
            continue
        for target in set(REFERENCE.findall(text)):
            why = broken(target, REPO)
            if why:
                problems.append(f"{source.relative_to(REPO)}: {target}: {why}")
    assert len(sources) > 20
    assert not problems, "\n".join(problems)
