"""Every relative link of README.md and docs/*.md points at a file that exists, and every
``#anchor`` at a heading (or ``<a id>``) of its target, named the way GitHub names them;
the README stays short enough to read (STYLE.md item 14; the rest lives in docs/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
#: ``[text](target)`` and ``![alt](target)``, the text possibly wrapped over lines, an
#: optional ``"title"`` after the target.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def prose(text: str) -> str:
    """``text`` without fenced blocks and code spans: what renders as Markdown."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text lowercased, punctuation dropped
    (letters, digits, ``_``, ``-`` and spaces stay), spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file: its headings (a repeated one gets -1, -2, ...) and
    its ``<a id>`` / ``<a name>`` tags."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(text):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    """The targets of ``path``'s links that are not URLs (``http:``, ``mailto:``, ...)."""
    return [t for t in LINK.findall(prose(path.read_text(encoding="utf-8")))
            if not EXTERNAL.match(t)]


def broken(path: Path) -> list[str]:
    """What is wrong with each relative link of ``path``, if anything."""
    problems = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {_shown(dest)}")
    return problems


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


@pytest.mark.parametrize("path", DOCS, ids=[_shown(p) for p in DOCS])
def test_every_relative_link_resolves(path):
    assert broken(path) == []


def test_the_docs_link_to_one_another():
    """The README links to the docs index, and the index to every other doc."""
    assert "docs/README.md" in relative_links(ROOT / "README.md")
    linked = {t.partition("#")[0] for t in relative_links(ROOT / "docs" / "README.md")}
    for doc in (ROOT / "docs").glob("*.md"):
        if doc.name != "README.md":
            assert doc.name in linked, f"docs/README.md does not say where {doc.name} is"


def test_the_checker_finds_broken_links_and_anchors(tmp_path):
    (tmp_path / "b.md").write_text("# Title\n## The claim's rules, in order\n## Layout\n"
                                   "### Layout\n```sh\n# .env\n```\n<a id=\"here\"></a>\n")
    doc = tmp_path / "a.md"
    doc.write_text("[ok](b.md#the-claims-rules-in-order) [ok](b.md#layout-1) [ok](b.md#here)\n"
                   "[wrapped\ntext](b.md) ![img](b.md) [web](https://example.org/x#y)\n"
                   "`[code](missing.md)`\n```md\n[fenced](missing.md)\n```\n"
                   "[gone](missing.md) [no anchor](b.md#env) [self](#nothing)\n")
    assert broken(doc) == ["missing.md: no such file", "b.md#env: no heading #env in b.md",
                           "#nothing: no heading #nothing in a.md"]
    assert slug("1–2. Scheduling quality (nova-queue, FIFO pull, RQ, static split)") == \
        "12-scheduling-quality-nova-queue-fifo-pull-rq-static-split"
    assert slug("`nova-queue doctor`") == "nova-queue-doctor"


def test_the_readme_fits_on_a_few_screens():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/")
