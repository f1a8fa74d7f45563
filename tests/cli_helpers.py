"""Helpers for CLI tests: environments, time-bounded subprocesses, one-line error checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis

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
