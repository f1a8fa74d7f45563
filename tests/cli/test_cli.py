"""The ``nova-queue`` CLI through click's CliRunner: prompt-file rules, every command's
output shape, and one-line errors (no traceback, no leaked password, nothing enqueued).

Real subprocess runs of the same CLI (and a real worker) are in ``test_cli_process.py``.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from novatests.cli import (
    BAD_PROMPT_FILES,
    enqueue_ok,
    namespace_keys,
    nova_env,
    ok,
    prompts_of,
    rejected,
    runner_env,
    status_json,
    write,
)

from nova_queue import __version__
from nova_queue.cli import cli

UNREACHABLE = "redis://:s3cret@127.0.0.1:1/0"
TASK_FIELDS = {"index", "state", "prompt", "worker", "worker_id", "backend", "lease_gen",
               "attempts", "result"}
JOB_FIELDS = {"job_id", "app", "state", "total", "pending", "leased", "done", "failed",
              "cancelled", "tasks"}
WORKER_FIELDS = {"id", "name", "host", "backend", "device", "alive", "apps", "tasks_done",
                 "failures", "benchmark_s", "ema_s", "compile_s"}


# ---- prompt files: accepted -------------------------------------------------------------

@pytest.mark.parametrize("data, expected", [
    pytest.param("\ufeffcafé\nzwei\n".encode(), ["café", "zwei"], id="utf8-bom"),
    pytest.param(b"one\r\ntwo\r\n\r\nthree\r\n", ["one", "two", "three"], id="crlf"),
    pytest.param(b"  a cat \t\n\tdog\t\n", ["a cat", "dog"], id="trimmed"),
    pytest.param(b"# header\n\n   \n  # indented\nkeep # not a comment\n#\n\t\nlast",
                 ["keep # not a comment", "last"], id="blank-and-comments"),
    pytest.param("left\u2028right\nnext\u2029para\n".encode(),
                 ["left\u2028right", "next\u2029para"], id="unicode-separators-stay"),
    pytest.param("a\x85b\nc\rd\n".encode(), ["a\x85b", "c\rd"], id="nel-and-lone-cr-stay"),
    pytest.param(b"x" * 4000 + b"\n", ["x" * 4000], id="line-at-the-limit"),
])
def test_prompt_file_rules(invoke, tmp_path, data, expected):
    job_id = enqueue_ok(invoke, write(tmp_path, data))
    assert prompts_of(invoke, job_id) == expected


def test_dash_reads_stdin(invoke, nova):
    job_id = enqueue_ok(invoke, "-", input="\ufefffrom stdin\r\n# skip\nsecond\u2028line\n".encode())
    assert prompts_of(invoke, job_id) == ["from stdin", "second\u2028line"]
    assert nova.job(job_id).name == "stdin"


# ---- prompt files: rejected, with file and line, nothing enqueued -------------------------

REJECTIONS = [pytest.param(data, line, needle, id=name)
              for name, data, line, needle in BAD_PROMPT_FILES]


@pytest.mark.parametrize("data, line, needle", REJECTIONS)
def test_bad_prompt_file_rejected(invoke, r, namespace, tmp_path, data, line, needle):
    path = write(tmp_path, data)
    where = f"{path}:{line}: " if line else f"{path}: "
    msg = rejected(invoke("enqueue", str(path), "--app", "synthetic"), needle)
    assert msg.startswith(f"error: {where}"), msg
    assert namespace_keys(r, namespace) == []


@pytest.mark.parametrize("data, line, needle", REJECTIONS[:2])
def test_bad_stdin_rejected_naming_stdin(invoke, r, namespace, data, line, needle):
    msg = rejected(invoke("enqueue", "-", "--app", "synthetic", input=data), needle)
    assert msg.startswith(f"error: <stdin>:{line}: "), msg
    assert namespace_keys(r, namespace) == []


def test_missing_file_rejected(invoke, r, namespace, tmp_path):
    path = tmp_path / "nope.txt"
    msg = rejected(invoke("enqueue", str(path), "--app", "synthetic"), "no such file")
    assert msg.startswith(f"error: {path}: ")
    assert namespace_keys(r, namespace) == []


def test_directory_rejected(invoke, r, namespace, tmp_path):
    folder = tmp_path / "prompts.d"
    folder.mkdir()
    msg = rejected(invoke("enqueue", str(folder), "--app", "synthetic"), "directory")
    assert msg.startswith(f"error: {folder}: ")
    assert namespace_keys(r, namespace) == []


# ---- enqueue --------------------------------------------------------------------------------

def test_enqueue_prints_the_job_id(invoke, nova, tmp_path):
    path = write(tmp_path, b"cat\ndog\n")
    job_id = enqueue_ok(invoke, path)
    assert job_id and "\n" not in job_id
    job = nova.job(job_id)
    assert (job.app, job.total, job.pending, job.state, job.name) == (
        "synthetic", 2, 2, "queued", "prompts.txt")
    assert job.params["seconds"] == 0.01


def test_enqueue_json(invoke, nova, tmp_path):
    res = ok(invoke("enqueue", str(write(tmp_path, b"cat\n")), "--app", "synthetic", "--json"))
    out = json.loads(res.stdout)
    assert list(out) == ["job_id"]
    assert nova.job(out["job_id"]).total == 1


def test_enqueue_stores_max_attempts_priority_and_name(invoke, nova, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"cat\n"), "--max-attempts", "5",
                        "--priority", "7", "--name", "my batch")
    job = nova.job(job_id)
    assert (job.max_attempts, job.priority, job.name) == (5, 7, "my batch")


@pytest.mark.parametrize("param, needle", [
    ("colour=red", "colour"),  # unknown key
    ("seconds=soon", "seconds"),  # bad value
    ("seconds=-1", "seconds"),  # out of range
    ("size=1.5", "size"),
    ("seconds", "seconds"),  # missing '='
    ("=5", "=5"),  # missing key
])
def test_bad_param_rejected_nothing_enqueued(invoke, r, namespace, tmp_path, param, needle):
    path = write(tmp_path, b"cat\n")
    rejected(invoke("enqueue", str(path), "--app", "synthetic", "-p", param), needle)
    assert namespace_keys(r, namespace) == []


def test_repeated_param_rejected(invoke, r, namespace, tmp_path):
    path = write(tmp_path, b"cat\n")
    rejected(invoke("enqueue", str(path), "--app", "synthetic", "-p", "seconds=1",
                    "-p", "seconds=2"), "seconds", "twice")
    assert namespace_keys(r, namespace) == []


def test_unknown_app_rejected(invoke, r, namespace, tmp_path):
    path = write(tmp_path, b"cat\n")
    rejected(invoke("enqueue", str(path), "--app", "no-such-app"), "no-such-app", "synthetic")
    assert namespace_keys(r, namespace) == []


# ---- status, cancel, workers ------------------------------------------------------------------

def test_status_json_shape(invoke, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, "first\nsecond ✓\n".encode()))
    st = status_json(invoke, job_id)
    assert JOB_FIELDS <= set(st)
    assert (st["job_id"], st["app"], st["state"], st["total"], st["pending"]) == (
        job_id, "synthetic", "queued", 2, 2)
    assert (st["leased"], st["done"], st["failed"], st["cancelled"]) == (0, 0, 0, 0)
    assert [t["index"] for t in st["tasks"]] == [0, 1]
    for task, prompt in zip(st["tasks"], ["first", "second ✓"]):
        assert TASK_FIELDS <= set(task)
        assert (task["state"], task["prompt"], task["worker"], task["lease_gen"],
                task["attempts"], task["result"]) == ("pending", prompt, "", 0, 0, "")


def test_status_table(invoke, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"a red fox\n"))
    out = ok(invoke("status", job_id)).stdout
    assert job_id in out and "synthetic" in out and "a red fox" in out
    assert "1 tasks: 1 pending" in out


@pytest.mark.parametrize("command", [["status", "NOJOB"], ["status", "NOJOB", "--json"],
                                     ["cancel", "NOJOB"], ["results", "NOJOB", "--out", "OUT"]])
def test_unknown_job_one_line(invoke, command, tmp_path):
    out = tmp_path / "out"
    rejected(invoke(*[str(out) if a == "OUT" else a for a in command]), "unknown job NOJOB")
    assert not out.exists()


def test_cancel_then_status_shows_cancelled(invoke, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"a\nb\nc\n"))
    res = ok(invoke("cancel", job_id))
    assert job_id in res.stdout and "3 task(s) cancelled" in res.stdout
    st = status_json(invoke, job_id)
    assert (st["state"], st["cancelled"], st["pending"]) == ("cancelled", 3, 0)
    assert {t["state"] for t in st["tasks"]} == {"cancelled"}


def test_workers_json(invoke, nova):
    assert json.loads(ok(invoke("workers", "--json")).stdout) == []
    nova.register_worker(
        "node1-w1", {"name": "gpu-box", "host": "box.lan", "host_id": "h1", "node_id": "node1",
                     "pid": 4242, "backend": "cuda", "device": "RTX 4090"},
        ["synthetic"], {"synthetic": {"bench_s": 0.5, "load_s": 0.1, "cold_s": 2.5}})
    [w] = json.loads(ok(invoke("workers", "--json")).stdout)
    assert WORKER_FIELDS <= set(w)
    assert (w["id"], w["name"], w["host"], w["backend"], w["device"], w["alive"], w["apps"]) == (
        "node1-w1", "gpu-box", "box.lan", "cuda", "RTX 4090", True, ["synthetic"])
    assert (w["tasks_done"], w["failures"], w["benchmark_s"], w["compile_s"]) == (0, 0, 0.5, 2.5)
    table = ok(invoke("workers")).stdout
    assert "box.lan" in table and "gpu-box" in table and "RTX 4090" in table


def test_results_into_an_unusable_folder_one_line(invoke, nova, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"cat\n"))
    (tmp_path / "a-file").write_text("")
    rejected(invoke("results", job_id, "--out", str(tmp_path / "a-file" / "out")), "a-file")


@pytest.mark.parametrize("option", [["--max-attempts", "0"], ["--priority", "5000"],
                                    ["--app"]])
def test_usage_errors_no_traceback_nothing_enqueued(invoke, r, namespace, tmp_path, option):
    res = invoke("enqueue", str(write(tmp_path, b"cat\n")), *option)
    assert res.exit_code != 0 and isinstance(res.exception, SystemExit)
    assert "Traceback" not in res.output and "Error:" in res.stderr
    assert namespace_keys(r, namespace) == []


# ---- connection errors -------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["status", "JOB"], ["status", "JOB", "--json"], ["cancel", "JOB"], ["workers"],
    ["workers", "--json"], ["results", "JOB", "--out", "OUT"],
    ["enqueue", "FILE", "--app", "synthetic"]])
def test_unreachable_redis_one_line_no_password(invoke, tmp_path, command):
    paths = {"FILE": str(write(tmp_path, b"cat\n")), "OUT": str(tmp_path / "out")}
    command = [paths.get(a, a) for a in command]
    res = invoke("--redis", UNREACHABLE, *command)
    msg = rejected(res, "cannot reach Redis", "redis://:***@127.0.0.1:1/0")
    assert "s3cret" not in res.output and "s3cret" not in msg


def test_unreachable_redis_from_env_no_password(redis_url, namespace, tmp_path):
    env = runner_env(nova_env(UNREACHABLE, namespace, tmp_path))
    res = CliRunner().invoke(cli, ["status", "JOB"], env=env)
    rejected(res, "cannot reach Redis")
    assert "s3cret" not in res.output


@pytest.mark.parametrize("suffix, says", [
    ("/0?foo=bar", "unknown option 'foo' in the query"),
    ("/zero", "the path must be a database number (/0), not '/zero'"),
])
def test_mistyped_redis_url_one_line(invoke, redis_url, suffix, says):
    """Not a traceback at the first command, nor a silent database 0."""
    base = redis_url.rsplit("/", 1)[0].replace("redis://", "redis://:s3cret@", 1)
    res = invoke("workers", "--redis", base + suffix)
    rejected(res, "invalid Redis URL", says, "redis://:***@")
    assert "s3cret" not in res.output


def test_wrong_redis_credentials_one_line(invoke, redis_url):
    url = redis_url.replace("redis://", "redis://nobody:s3cret@", 1)  # no such ACL user
    res = invoke("--redis", url, "status", "JOB")
    rejected(res, "credentials")
    assert "s3cret" not in res.output


class _WebServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _BadRequest(socketserver.StreamRequestHandler):
    """Answers any request the way a web server answers bytes that are not HTTP."""

    def handle(self) -> None:
        self.rfile.readline()
        self.wfile.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")


@pytest.fixture
def web_server() -> Iterator[str]:
    """host:port of a TCP server speaking HTTP: what a mistyped ``--redis`` port often reaches."""
    server = _WebServer(("127.0.0.1", 0), _BadRequest)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_redis_url_pointing_at_a_non_redis_server(invoke, web_server):
    res = invoke("--redis", f"redis://:s3cret@{web_server}/0", "status", "JOB")
    rejected(res)
    assert "s3cret" not in res.output


def test_redis_url_with_port_out_of_range(invoke):
    res = invoke("--redis", "redis://:s3cret@127.0.0.1:99999/0", "status", "JOB")
    rejected(res, "invalid Redis URL")
    assert "s3cret" not in res.output


def test_bad_namespace_one_line(invoke):
    rejected(invoke("--namespace", "a:b", "status", "JOB"), "namespace")


#: Every command that reads a namespace, with what it needs to get that far.
NAMESPACED_COMMANDS = [["status", "JOB"], ["workers"], ["cancel", "JOB"],
                       ["results", "JOB", "--out", "out"], ["enqueue", "-", "--app", "synthetic"],
                       ["worker", "--app", "synthetic", "--burst"], ["web", "--port", "0"],
                       ["post-worker"], ["load-scripts"]]


@pytest.mark.parametrize("ns", ["*", "?", "[a-z]*", "d\\efault"])
@pytest.mark.parametrize("args", NAMESPACED_COMMANDS, ids=lambda a: a[0])
def test_glob_namespaces_are_refused_by_every_command(redis_url, namespace, tmp_path, r, ns,
                                                      args):
    """Issue 13: with the documented ACL rule ``~nova:{NAMESPACE}:*`` a worker of namespace
    ``*`` would read every namespace. Refused before any Redis call: as a flag before or
    after the command, and from NOVA_NAMESPACE."""
    runner, before = CliRunner(), r.dbsize()
    env = runner_env(nova_env(redis_url, namespace, tmp_path))
    for argv, environ in (([*args[:1], "--namespace", ns, *args[1:]], env),
                          (["--namespace", ns, *args], env),
                          (args, {**env, "NOVA_NAMESPACE": ns})):
        res = runner.invoke(cli, argv, env=environ, input=b"a cat\n")
        assert rejected(res, "invalid namespace").startswith(f"error: invalid namespace {ns!r}")
    assert r.dbsize() == before


def test_unsupported_store_url_one_line(invoke, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"cat\n"))
    rejected(invoke("--store", "ftp://host/x", "results", job_id, "--out", str(tmp_path / "o")),
             "ftp://host/x")


# ---- --version and --help everywhere -----------------------------------------------------------

def test_version(invoke):
    res = ok(invoke("--version"))
    assert res.stdout.strip() == f"nova-queue, version {__version__}"


def test_every_command_is_registered():
    assert {"enqueue", "status", "workers", "results", "cancel", "worker"} <= set(cli.commands)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_everywhere_without_redis(redis_url, namespace, tmp_path, flag):
    env = runner_env(nova_env(UNREACHABLE, namespace, tmp_path))
    runner = CliRunner()
    top = ok(runner.invoke(cli, [flag], env=env)).stdout
    assert "Usage:" in top
    for name in cli.commands:
        assert name in top
        out = ok(runner.invoke(cli, [name, flag], env=env)).stdout
        assert out.startswith("Usage: ") and f" {name} " in out.splitlines()[0], out
        assert "Options:" in out and "--help" in out
