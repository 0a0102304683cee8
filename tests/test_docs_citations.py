"""Code and docs cite only documents inside the repository, and every section they cite exists.

Citations take the form ``docs/format.md#tile-order`` (further sections of the same page as
``, #tile-geometry``) in code, and relative Markdown links in docs. Anchors are slugged like
GitHub's: lower case, punctuation dropped, spaces to hyphens, headings inside fenced code
blocks ignored, repeated headings numbered ``-1``, ``-2``, ...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("jnrrd", "docs", "tests", "examples", "benchmarks")
SUFFIXES = {".py", ".md", ".txt", ".rst", ".toml", ".cfg"}

# Built from pieces so that this file does not cite what it forbids.
_OUTSIDE = re.compile("|".join([
    r"\bCONVEN" + r"TIONS\b",                   # the project conventions
    r"\b[Dd]ig" + r"est\W+(?:§|\d|D\d)",        # the engineering digest's sections
    r"\bformat dig" + r"est\b", r"jnrrd-dig" + r"est",
    r"\.\./sha" + r"red\b", r"/work/sha" + r"red\b", r"\bsha" + r"red/spec\b",
]))
# docs/format.md#tile-order, benchmarks/README.md#method, then ", #more" of the same page
_CODE_CITATION = re.compile(r"\b((?:docs|benchmarks|examples)/[\w./-]+\.md)#([\w-]+)"
                            r"((?:,\s*(?:#:?\s*)?#[\w-]+)*)")
# [text](format.md#tile-order), [text](#tile-order), [text](../docs/format.md#tile-order)
_MD_LINK = re.compile(r"\]\(([^)\s#]*\.md|)#([^)\s]+)\)")


def _files() -> list[Path]:
    out = list(ROOT.glob("*.md"))
    for top in SCANNED:
        for p in (ROOT / top).rglob("*"):
            if (p.suffix in SUFFIXES and p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)):
                out.append(p)
    return sorted(out)


FILES = _files()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


_ANCHORS: dict[Path, set[str]] = {}


def anchors(doc: Path) -> set[str]:
    """Every anchor of a Markdown page (headings outside fenced code)."""
    if doc not in _ANCHORS:
        found: set[str] = set()
        seen: dict[str, int] = {}
        fence = None
        for line in doc.read_text(encoding="utf-8").splitlines():
            m = re.match(r"^\s*(`{3,}|~{3,})", line)
            if m:
                fence = m.group(1)[0] if fence is None else (None if m.group(1)[0] == fence
                                                             else fence)
                continue
            h = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if h:
                base = slug(h.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        _ANCHORS[doc] = found
    return _ANCHORS[doc]


def test_slug_like_github() -> None:
    assert slug("Where the header ends") == "where-the-header-ends"
    assert slug("Levels (pyramids)") == "levels-pyramids"
    assert slug("Sparse tiles, statistics, checksums") == "sparse-tiles-statistics-checksums"
    assert slug("`conditional` (read alias: `optional`)") == "conditional-read-alias-optional"
    assert slug("Codecs (`jnrrd.codecs`)") == "codecs-jnrrdcodecs"


def test_files_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"docs/format.md", "jnrrd/api.py", "README.md"} <= names


def test_no_citation_of_outside_documents() -> None:
    me = Path(__file__).resolve()
    found = []
    for path in FILES:
        if path == me:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in _OUTSIDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}")
    assert not found, "cite documents inside the repository (docs/format.md#...):\n" + \
        "\n".join(found)


def test_code_citations_resolve() -> None:
    broken = []
    count = 0
    for path in FILES:
        if path.suffix == ".md":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in _CODE_CITATION.finditer(text):
            doc = ROOT / m.group(1)
            names = [m.group(2)] + re.findall(r"#([\w-]+)", m.group(3))
            for name in names:
                count += 1
                if not doc.is_file() or name not in anchors(doc):
                    line = text.count("\n", 0, m.start()) + 1
                    broken.append(f"{path.relative_to(ROOT)}:{line}: {m.group(1)}#{name}")
    assert count > 100  # the scan sees the citations at all
    assert not broken, "citations of sections that do not exist:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", [p for p in FILES if p.suffix == ".md"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_markdown_section_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M)  # code blocks
    broken = []
    for m in _MD_LINK.finditer(text):
        target = (page.parent / m.group(1)).resolve() if m.group(1) else page
        if "://" in m.group(1) or not target.is_relative_to(ROOT):
            continue
        if not target.is_file() or m.group(2) not in anchors(target):
            broken.append(f"{m.group(1) or '(this page)'}#{m.group(2)}")
    assert not broken, f"{page.relative_to(ROOT)}: links to missing sections: {broken}"
