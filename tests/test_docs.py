"""The README and docs/ stay short, linked and true to the CLI and the Makefile.

The README is for users: it must stay under 300 lines, with the detail in docs/. Links
between the pages are checked down to the heading they point at, so moving a section
breaks a test rather than a reader's click. The commands the README lists must exist in
`opendla --help`, and the `make` targets it names in the Makefile.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"

#: pages other parts of the project write; a link to one is allowed while it is missing
PAGES_WRITTEN_ELSEWHERE = {DOCS / "architecture.md", DOCS / "rtl_timing_notes.md"}

README_MAX_LINES = 300

_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def markdown_pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def relative_links(page: Path) -> list[str]:
    """Link targets of a page that stay inside the repository (no scheme, no mailto)."""
    targets = _LINK.findall(prose(page.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {heading_anchor(h) for h in _HEADING.findall(text)}


def test_heading_anchor_follows_github():
    # hand-worked from GitHub's rule: backticks and punctuation go, spaces become '-'
    assert heading_anchor("Accuracy on real models") == "accuracy-on-real-models"
    assert heading_anchor("opendla `trace run`") == "opendla-trace-run"
    assert heading_anchor("2026-11-29, late: 100 MHz") == "2026-11-29-late-100-mhz"
    assert heading_anchor("Set-up (fresh Debian machine, as root)") == \
        "set-up-fresh-debian-machine-as-root"


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < README_MAX_LINES, (
        f"README.md has {lines} lines; keep it under {README_MAX_LINES} and move detail "
        f"into docs/")


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path):
    broken = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if dest in PAGES_WRITTEN_ELSEWHERE and not dest.exists():
            continue
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(REPO)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in "
                          f"{dest.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)} has broken links:\n" + "\n".join(broken)


def readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text,
                      re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def readme_table_commands() -> list[list[str]]:
    """The first cell of each row of the README's commands table, as words after 'opendla'."""
    rows = re.findall(r"^\|\s*`opendla ([^`]+)`", readme_section("Commands"), re.MULTILINE)
    return [row.split() for row in rows]


def listed_subcommands(*words: str) -> set[str]:
    """The subcommands `opendla WORDS... --help` lists under its positional arguments."""
    code = "import sys; from opendla.cli import main; sys.exit(main())"
    result = subprocess.run([sys.executable, "-c", code, *words, "--help"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr
    section = result.stdout.split("positional arguments:", 1)[1].split("\n\n", 1)[0]
    # each subcommand is a line indented by exactly four spaces: "    run       play ..."
    return {m.group(1) for m in re.finditer(r"^ {4}(\S+)", section, re.MULTILINE)}


def test_readme_commands_exist_in_the_cli():
    commands = readme_table_commands()
    assert len(commands) >= 5, f"the README's commands table lists only {commands}"
    top = listed_subcommands()
    missing = [" ".join(c) for c in commands if c[0] not in top]
    for command in commands:
        if len(command) > 1 and command[0] in top:
            if command[1] not in listed_subcommands(command[0]):
                missing.append(" ".join(command))
    assert not missing, (f"README's commands table names {missing}, which `opendla --help` "
                         f"does not list (it lists {sorted(top)})")


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.MULTILINE))


def test_readme_make_targets_exist():
    named = set(re.findall(r"`make ([a-z][\w-]*)", README.read_text(encoding="utf-8")))
    assert {"demo", "test"} <= named, "the README must give `make demo` and `make test`"
    missing = named - makefile_targets()
    assert not missing, f"README names make targets the Makefile lacks: {sorted(missing)}"
