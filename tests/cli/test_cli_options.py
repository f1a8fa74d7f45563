"""The shared options (``--redis``, ``--store``, ``--namespace``, ``--log-level``,
``--debug``) work before and after the command name, with the same environment fallbacks;
after the command wins over before it, and either wins over the environment."""

from __future__ import annotations

import signal

import pytest
from click.testing import CliRunner
from novatests.cli import (
    background,
    enqueue_ok,
    error_line,
    nova_env,
    ok,
    rejected,
    run_cli,
    runner_env,
    write,
)

from nova_queue.cli import cli
from nova_queue.errors import JobNotFoundError
from nova_queue.local import wait_for

UNREACHABLE = "redis://:s3cret@127.0.0.1:1/0"
SHARED = {"--redis", "--store", "--namespace", "--log-level", "--debug"}
LOCAL_COMMANDS = {"demo", "make-model", "setup-torch"}  # no Redis: only the logging options


def options_of(name: str) -> set[str]:
    return {opt for p in cli.commands[name].params for opt in p.opts}


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_takes_the_shared_options(name):
    expected = {"--log-level", "--debug"} if name in LOCAL_COMMANDS else SHARED
    assert SHARED & options_of(name) == expected
    assert SHARED <= {opt for p in cli.params for opt in p.opts}


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_help_lists_them(redis_url, namespace, tmp_path, name):
    env = runner_env(nova_env(UNREACHABLE, namespace, tmp_path))
    out = ok(CliRunner().invoke(cli, [name, "--help"], env=env)).stdout
    for option in SHARED & options_of(name):
        assert f"  {option} " in out, (option, out)
    if name not in LOCAL_COMMANDS:
        assert "Env NOVA_REDIS_URL, then REDIS_URL" in " ".join(out.split())


@pytest.mark.parametrize("name", sorted(LOCAL_COMMANDS))
@pytest.mark.parametrize("option, value", [
    ("--redis", UNREACHABLE), ("--store", "file:///tmp/x"), ("--namespace", "other")])
def test_local_commands_refuse_unused_options_on_either_side(invoke, tmp_path, name, option,
                                                            value):
    """demo, make-model and setup-torch use no shared Redis or store: an option for one is
    refused before the command name as after it, never silently ignored."""
    # arguments the command itself would refuse at once, should the option be ignored
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "taken").write_text("")
    args = {"make-model": [name, str(tmp_path / "model")], "demo": [name, "--app", "txt2img"],
            "setup-torch": [name, "--dry-run", "--torch-version", "bad"]}[name]
    before = invoke(option, value, *args)
    assert before.exit_code == 2 and before.stdout == "", before.output
    assert (f"{option} does not apply to 'cli {name}': it uses no shared Redis, "  # CliRunner's
            "store or namespace") in before.stderr                              # program name
    after = invoke(*args, option, value)
    assert after.exit_code == 2 and f"No such option '{option}'" in after.stderr
    ok(invoke("--log-level", "WARNING", name, "--help"))  # the logging ones are fine


@pytest.mark.parametrize("command", [
    ["status", "JOB"], ["workers"], ["cancel", "JOB"], ["load-scripts"],
    ["results", "JOB", "--out", "OUT"], ["enqueue", "FILE", "--app", "synthetic"]])
def test_redis_after_the_command_is_used(invoke, tmp_path, command):
    paths = {"FILE": str(write(tmp_path, b"cat\n")), "OUT": str(tmp_path / "out")}
    res = invoke(*[paths.get(a, a) for a in command], "--redis", UNREACHABLE)
    rejected(res, "cannot reach Redis", "redis://:***@127.0.0.1:1/0")


def test_after_the_command_wins_over_before_it(invoke, redis_url):
    rejected(invoke("--redis", redis_url, "workers", "--redis", UNREACHABLE), "cannot reach")
    assert ok(invoke("--redis", UNREACHABLE, "workers", "--redis", redis_url)).stdout == (
        "no workers\n")


def test_before_the_command_wins_over_the_environment(redis_url, namespace, tmp_path):
    runner = CliRunner()
    env = runner_env(nova_env(UNREACHABLE, namespace, tmp_path))
    assert ok(runner.invoke(cli, ["--redis", redis_url, "workers"], env=env)).stdout == (
        "no workers\n")
    rejected(runner.invoke(cli, ["workers"], env=env), "cannot reach")  # the env's, unreachable
    env_redis = runner_env({**nova_env(redis_url, namespace, tmp_path), "REDIS_URL": "x"})
    assert ok(runner.invoke(cli, ["workers"], env=env_redis)).stdout == "no workers\n"


def test_namespace_after_the_command(invoke, nova, r, namespace, tmp_path):
    other = f"{namespace}-b"
    job_id = enqueue_ok(invoke, write(tmp_path, b"cat\n"), "--namespace", other)
    assert r.exists(f"nova:{{{other}}}:job:{job_id}")
    with pytest.raises(JobNotFoundError):
        nova.job(job_id)  # not in this test's own namespace
    assert ok(invoke("status", job_id, "--namespace", other)).exit_code == 0
    rejected(invoke("status", job_id), f"unknown job {job_id}")
    rejected(invoke("status", job_id, "--namespace", "a:b"), "namespace")


def test_store_after_the_command(invoke, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"cat\n"))
    rejected(invoke("results", job_id, "--out", str(tmp_path / "o"), "--store", "ftp://host/x"),
             "ftp://host/x")


def test_debug_after_the_command_shows_the_exception(invoke):
    res = invoke("status", "NOJOB", "--debug")
    assert isinstance(res.exception, JobNotFoundError)  # raised, not turned into one line
    rejected(invoke("status", "NOJOB"), "unknown job NOJOB")


def test_log_level_after_the_command_in_a_real_process(redis_url, namespace, tmp_path):
    env = nova_env(redis_url, namespace, tmp_path)
    path = write(tmp_path, b"cat\n")
    quiet = run_cli(["enqueue", str(path), "--app", "synthetic"], env)
    loud = run_cli(["enqueue", str(path), "--app", "synthetic", "--log-level", "DEBUG"], env)
    assert quiet.returncode == loud.returncode == 0, (quiet.stderr, loud.stderr)
    assert "enqueued job" not in quiet.stderr
    assert (f"DEBUG nova_queue.client.producer: enqueued job {loud.stdout.strip()}: "
            "1 synthetic tasks") in loud.stderr
    before = run_cli(["--log-level", "DEBUG", "enqueue", str(path), "--app", "synthetic",
                      "--log-level", "WARNING"], env)
    assert before.returncode == 0 and "enqueued job" not in before.stderr


@pytest.mark.slow
def test_debug_logs_are_nova_queues_not_pillows_chunk_by_chunk(redis_url, namespace,
                                                               tmp_path):
    """A worker checks each result (Pillow decodes it); --log-level DEBUG shows the worker's
    own lines, not a line per PNG chunk from Pillow for every task."""
    env = nova_env(redis_url, namespace, tmp_path)
    path = write(tmp_path, b"cat\ndog\n")
    assert run_cli(["enqueue", str(path), "--app", "synthetic", "-p", "seconds=0.01",
                    "-p", "size=64"], env).returncode == 0
    worker = run_cli(["--log-level", "DEBUG", "worker", "--app", "synthetic", "--burst",
                      "--no-benchmark"], env, timeout_s=120)
    assert worker.returncode == 0, worker.stderr[-2000:]
    assert "DEBUG nova_queue." in worker.stderr
    assert "PIL." not in worker.stderr, worker.stderr[-2000:]


@pytest.mark.parametrize("args", [
    ["enqueue", "prompts.txt", "--redis", "URL", "--wait"],
    ["workers", "--redis", "URL"],
])
def test_the_readme_headline_commands_in_a_real_process(redis_url, namespace, tmp_path, args):
    """The README's lines, with its URL placeholder replaced by a URL that does not answer."""
    write(tmp_path, b"cat\n")
    env = nova_env(redis_url, namespace, tmp_path)
    res = run_cli([UNREACHABLE if a == "URL" else a for a in args], env, cwd=tmp_path)
    assert res.returncode == 1 and "No such option" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    error_line(lines[-1], "cannot reach Redis at redis://:***@127.0.0.1:1/0")


def test_the_readme_worker_line_in_a_real_process(redis_url, namespace, tmp_path):
    """``nova-queue worker --redis URL``: the worker waits for that Redis (it may start
    first), saying so with the password hidden, and SIGTERM ends the wait with exit 0."""
    env = nova_env(redis_url, namespace, tmp_path)
    log_path = tmp_path / "worker.log"
    args = ["worker", "--redis", UNREACHABLE, "--app", "synthetic", "--no-benchmark"]
    with background(args, env, log_path=log_path, cwd=tmp_path) as proc:
        wait_for(lambda: "waiting for Redis at redis://:***@127.0.0.1:1/0" in
                 log_path.read_text(errors="replace"), timeout_s=60, message="waiting line")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    log = log_path.read_text(errors="replace")
    assert "No such option" not in log and "s3cret" not in log, log
