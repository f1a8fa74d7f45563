"""Every ``nova-queue …`` command line the docs show parses with the real CLI.

Collected from README.md, docs/*.md and the two compose files: shell code blocks (``bash``,
``sh``, ``console``, ``shell``) and inline code spans. An unknown option or command fails;
placeholders (URL, FILE, JOB, DIR, ...) are fine as values, a placeholder in the command's
place (``nova-queue COMMAND --help``) stands for every command, and a mention without its
required arguments (``nova-queue make-model``) is a mention, not a usage error. The services
of the compose files (alone and merged) are parsed by tests/project/test_compose.py with the
same ``check_cli``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from novatests.cli import check_cli

from nova_queue.cli import cli

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
           ROOT / "docker-compose.yml", ROOT / "docker-compose.many-machines.yml"]
SHELL_FENCES = {"bash", "sh", "console", "shell"}
MENTION = re.compile(r"(?:^|[\s;&|(])nova-queue(?:\s|$)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")
#: Values tried in place of a placeholder given to a typed option (``--max-tasks N``).
SAMPLES = ("1", "1.0")


def shell_words(line: str) -> list[list[str]]:
    """The ``nova-queue`` commands in one shell line, each cut at a shell operator."""
    if not MENTION.search(line):
        return []
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    found = []
    for i, word in enumerate(words):
        if word == "nova-queue":
            rest = words[i:]
            cut = next((j for j, w in enumerate(rest) if w and set(w) <= set("<>|&;()")),
                       len(rest))
            found.append(rest[:cut])
    return found


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of shell fence lines (continuations joined) and inline spans."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    pending, start = "", 0
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        if raw.lstrip().startswith("```"):
            fence = None if fence is not None else raw.strip().strip("`").strip()
            continue
        if fence in SHELL_FENCES:
            if not pending:
                start = number
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            out.append((start, pending + raw))
            pending = ""
        elif fence is None:
            out += [(number, span) for span in re.findall(r"`([^`]+)`", raw)]
    return out


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every ``nova-queue`` command line in the docs."""
    found = []
    for path in SOURCES:
        for number, text in code_lines(path):
            for argv in shell_words(text):
                found.append((f"{path.relative_to(ROOT)}:{number}", argv))
    return found


DOCUMENTED = documented_commands()


def parse_documented(argv: list[str]) -> None:
    """Parse like ``check_cli``, allowing placeholders and mentions without arguments."""
    argv = list(argv)
    for _ in range(len(argv)):
        try:
            check_cli(argv)
            return
        except click.exceptions.Exit as exc:  # --help, --version: parsed, then exited
            assert exc.exit_code == 0
            return
        except click.MissingParameter:
            return  # a mention of a command, not a full command line
        except click.BadParameter as exc:
            argv = _with_sample(argv, exc)
    raise AssertionError(f"{argv}: still not parsed")


def _with_sample(argv: list[str], exc: click.BadParameter) -> list[str]:
    """``argv`` with the placeholder value ``exc`` complains about replaced by a sample."""
    param = exc.param
    for i, word in enumerate(argv[:-1]):
        if param is not None and word in param.opts and PLACEHOLDER.match(argv[i + 1]):
            for sample in SAMPLES:
                try:
                    param.type.convert(sample, param, exc.ctx)
                except click.BadParameter:
                    continue
                return [*argv[: i + 1], sample, *argv[i + 2:]]
    raise exc  # not a placeholder: a real mistake in the docs


def expand(argv: list[str]) -> list[list[str]]:
    """A placeholder in the command's place stands for every registered command."""
    for i, word in enumerate(argv[1:], start=1):
        if word.startswith("-"):
            continue
        if word in cli.commands or not PLACEHOLDER.match(word):
            return [argv]
        return [[*argv[:i], name, *argv[i + 1:]] for name in sorted(cli.commands)]
    return [argv]


def test_the_docs_show_the_headline_commands():
    shown = {" ".join(argv) for _, argv in DOCUMENTED}
    assert "nova-queue worker --redis URL" in shown  # the README's pitch
    assert any(a[:3] == ["nova-queue", "enqueue", "prompts.txt"] and "--redis" in a
               for _, a in DOCUMENTED)
    assert len(DOCUMENTED) >= 15, DOCUMENTED


@pytest.mark.parametrize("where, argv", [pytest.param(w, a, id=f"{w} {' '.join(a[1:3])}")
                                         for w, a in DOCUMENTED])
def test_documented_command_parses(where, argv):
    if len(argv) == 1:
        return  # the program's name in prose
    for variant in expand(argv):
        try:
            parse_documented(variant)
        except click.UsageError as exc:
            pytest.fail(f"{where}: `{' '.join(variant)}`: {exc.format_message()}")


@pytest.mark.parametrize("argv, needle", [
    (["nova-queue", "worker", "--no-such-flag"], "--no-such-flag"),
    (["nova-queue", "enqueue", "prompts.txt", "--redis"], "--redis"),
    (["nova-queue", "status", "JOB", "extra"], "extra"),
    (["nova-queue", "--max-tasks", "N", "worker"], "--max-tasks"),
])
def test_mistakes_in_docs_would_fail(argv, needle):
    with pytest.raises(click.UsageError, match=re.escape(needle)):
        parse_documented(argv)


def test_unknown_command_in_docs_would_fail():
    with pytest.raises(pytest.fail.Exception, match="no-such-command"):
        parse_documented(["nova-queue", "no-such-command", "--redis", "URL"])


def test_collector_reads_shell_lines_and_spans(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("Run `nova-queue status JOB` or `pip install nova-queue[web]`.\n"
                   "```sh\nexport A=1 && nova-queue worker \\\n  --backend cpu # note\n"
                   "cat p.txt | nova-queue enqueue - --app synthetic > out.txt\n```\n"
                   "```\n nova-queue enqueue ─┐ a diagram\n```\n")
    found = [argv for _, text in code_lines(doc) for argv in shell_words(text)]
    assert found == [["nova-queue", "status", "JOB"],
                     ["nova-queue", "worker", "--backend", "cpu"],
                     ["nova-queue", "enqueue", "-", "--app", "synthetic"]]


def test_placeholders_are_values_and_commands():
    parse_documented(["nova-queue", "worker", "--max-tasks", "N", "--redis", "URL"])
    assert [v[1] for v in expand(["nova-queue", "COMMAND", "--help"])] == sorted(cli.commands)


# ---- --require with a comparison, quoted ---------------------------------------------------

#: ``--require`` (or ``--require=``) followed by an unquoted word with ``<`` or ``>``: pasted
#: into a shell, ``memory_gb>=12`` runs with ``--require memory_gb`` and writes a file ``=12``.
UNQUOTED_REQUIRE = re.compile(r"--require(?:=|\s+)(?!['\"])[^\s'\"`]*[<>]")


def require_texts() -> list[tuple[str, str]]:
    """(where, text) of every doc source, line breaks joined (a code span may wrap), and of
    every command's ``--help``."""
    from click.testing import CliRunner

    out = [(str(path.relative_to(ROOT)), " ".join(path.read_text().split()))
           for path in SOURCES]
    for name in sorted(cli.commands):
        res = CliRunner().invoke(cli, [name, "--help"], terminal_width=100)
        out.append((f"nova-queue {name} --help", " ".join(res.output.split())))
    return out


def test_every_documented_require_with_a_comparison_is_quoted():
    found = [(where, m.group(0)) for where, text in require_texts()
             for m in UNQUOTED_REQUIRE.finditer(text)]
    assert found == [], f"quote these (--require 'memory_gb>=12'): {found}"
    helped = dict(require_texts())["nova-queue enqueue --help"]
    assert "--require 'memory_gb>=12'" in helped  # the help shows the quoted form


def test_the_require_check_finds_unquoted_comparisons():
    for bad in ("--require memory_gb>=12", "--require=memory_gb<=8", "--require  vram>16"):
        assert UNQUOTED_REQUIRE.search(bad), bad
    for good in ("--require 'memory_gb>=12'", '--require "memory_gb<=8"',
                 "--require backend=cuda,rocm", "--require REQ (key>=n)"):
        assert not UNQUOTED_REQUIRE.search(good), good
