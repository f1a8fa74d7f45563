"""Helpers for CLI tests: environments, time-bounded subprocesses, one-line error checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import click
import pytest
import redis
from click.testing import Result

from nova_queue.cli import cli

#: Prompt files the CLI must reject: (id, file bytes, line it names or None, text in the message).
BAD_PROMPT_FILES: list[tuple[str, bytes, int | None, str]] = [
    ("nul-byte", b"ok\nfine\nbad\x00line\n", 3, "NUL"),
    ("invalid-utf8", b"ok\n\xc3\xa9 fine\nbroken \xff here\n", 3, "UTF-8"),
    ("truncated-utf8", b"a\nb\n\xe6\x97", 3, "UTF-8"),
    ("line-over-limit", b"short\n" + b"y" * 4001 + b"\n", 2, "4000"),
    ("utf16", "hi\nthere\n".encode("utf-16"), 1, "UTF-16"),
    ("no-prompts", b"# only comments\n\n   \n\t# and blanks\n", None, "no prompts"),
    ("empty-file", b"", None, "no prompts"),
]

#: Variables the CLI reads; tests set their own and clear any the caller's shell had.
_CLEARED_PREFIXES = ("NOVA_",)
_CLEARED_NAMES = ("REDIS_URL",)


def nova_env(redis_url: str, namespace: str, home: Path, **extra: str) -> dict[str, str]:
    """The ``NOVA_*`` variables of one test: its Redis, namespace, home and file store."""
    return {
        "NOVA_REDIS_URL": redis_url,
        "NOVA_NAMESPACE": namespace,
        "NOVA_HOME": str(home),
        "NOVA_STORE_URL": (home / "store").as_uri(),
        **extra,
    }


def runner_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """``env`` for ``CliRunner.invoke``, unsetting any other CLI variable of the outer shell."""
    out: dict[str, str | None] = {
        k: None for k in os.environ
        if k.startswith(_CLEARED_PREFIXES) or k in _CLEARED_NAMES
    }
    out.update(env)
    return out


def process_env(env: Mapping[str, str]) -> dict[str, str]:
    """A full environment for a subprocess: the caller's, minus CLI variables, plus ``env``."""
    out = {k: v for k, v in os.environ.items()
           if not (k.startswith(_CLEARED_PREFIXES) or k in _CLEARED_NAMES)}
    out["PYTHONUNBUFFERED"] = "1"
    out.update(env)
    return out


def nova_command(*args: str) -> list[str]:
    """``python -m nova_queue ARGS`` with this interpreter."""
    return [sys.executable, "-m", "nova_queue", *args]


def run_cli(args: Sequence[str], env: Mapping[str, str], *, stdin: bytes | None = None,
            timeout_s: float = 30.0, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``nova-queue ARGS`` to completion (killed after ``timeout_s``); bytes in, text out."""
    proc = subprocess.run(
        nova_command(*args), env=process_env(env), input=stdin if stdin is not None else b"",
        capture_output=True, timeout=timeout_s, cwd=cwd, check=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


@contextmanager
def background(args: Sequence[str], env: Mapping[str, str], *, log_path: Path,
               cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    """``nova-queue ARGS`` running in the background; stdout piped, stderr to ``log_path``.

    Always ends the process on the way out (SIGTERM, then SIGKILL).
    """
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(nova_command(*args), env=process_env(env), cwd=cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=log_file)
        try:
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End ``proc`` if it still runs: SIGTERM, then SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


def error_line(stderr: str, *needles: str) -> str:
    """The one line of ``stderr``: ``error: ...`` containing every needle, no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip("\n").split("\n")
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    line = lines[0]
    assert line.startswith("error: "), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def namespace_keys(r: redis.Redis, namespace: str) -> list[str]:
    """Every key of ``namespace`` (``nova:{ns}:*``)."""
    return sorted(r.scan_iter(match=f"nova:{{{namespace}}}:*", count=1000))


def check_cli(argv: list[str]) -> click.Context:
    """Parse ``argv`` (starting with ``nova-queue``) exactly as the CLI would; UsageError if not.

    Returns the subcommand's context (its parsed ``params``). Nothing runs.
    """
    assert argv and argv[0] == "nova-queue", f"not a nova-queue command: {argv}"
    ctx = cli.make_context("nova-queue", list(argv[1:]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # protected_args in Click 8.2
        remaining = [*getattr(ctx, "protected_args", []), *ctx.args]
    assert remaining, f"{argv} names no subcommand"
    if cli.get_command(ctx, remaining[0]) is None:
        pytest.fail(f"`nova-queue {remaining[0]}` is not a registered command yet (used by "
                    f"{' '.join(argv)}); register it in nova_queue/cli/__init__.py")
    name, sub, rest = cli.resolve_command(ctx, remaining)
    return sub.make_context(name, rest, parent=ctx)


# ---- CliRunner results (the ``invoke`` fixture of tests/cli/conftest.py) -------------------------

def ok(result: Result) -> Result:
    """Assert the command succeeded (showing its output and traceback if not)."""
    assert result.exit_code == 0, (result.output, result.exc_info)
    return result


def rejected(result: Result, *needles: str) -> str:
    """Assert a user error: exit 1 via SystemExit, nothing on stdout, one ``error:`` line."""
    assert result.exit_code == 1, (result.output, result.exc_info)
    assert isinstance(result.exception, SystemExit), result.exc_info  # not a crash
    assert result.stdout == ""
    return error_line(result.stderr, *needles)


def write(folder: Path, data: bytes, name: str = "prompts.txt") -> Path:
    """``data`` as the file ``folder/name``."""
    path = folder / name
    path.write_bytes(data)
    return path


def enqueue_ok(invoke, path: Path | str, *extra: str, input: bytes | None = None) -> str:
    """Enqueue with the synthetic app; the printed job id."""
    res = ok(invoke("enqueue", str(path), "--app", "synthetic", "-p", "seconds=0.01", *extra,
                    input=input))
    return res.stdout.strip()


def status_json(invoke, job_id: str) -> dict:
    """``status JOB --json``, parsed."""
    return json.loads(ok(invoke("status", job_id, "--json")).stdout)


def prompts_of(invoke, job_id: str) -> list[str]:
    """The prompts of a job, in task order."""
    return [t["prompt"] for t in sorted(status_json(invoke, job_id)["tasks"],
                                        key=lambda t: t["index"])]
