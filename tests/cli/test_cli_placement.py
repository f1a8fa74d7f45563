"""The CLI's placement surfaces: ``enqueue --require / --owner`` (and ``NOVA_OWNER``),
``owners list|set|half-life``, ``status`` counting only the workers that meet a job,
``workers --json`` showing labels, warm models and model loads, and ``worker --label`` /
``NOVA_LABELS`` with the automatic labels of a real worker process."""

from __future__ import annotations

import getpass
import json
import socket

import pytest
from click.testing import CliRunner
from novatests.cli import (
    background,
    enqueue_ok,
    nova_env,
    ok,
    rejected,
    runner_env,
    status_json,
    write,
)

from nova_queue import NovaClient, shares
from nova_queue.cli import cli
from nova_queue.local import wait_for


@pytest.fixture
def nova_cli(redis_url, namespace):
    client = NovaClient.from_url(redis_url, namespace=namespace)
    yield client
    client.close()


def join(client, wid, labels, app="synthetic"):
    client.register_worker(wid, {"name": wid, "labels": json.dumps(labels)}, [app])


def job_keys(client) -> list[str]:
    return [k for k in client.redis.keys(f"{client.prefix}*")
            if k.startswith((f"{client.prefix}job:", f"{client.prefix}task:"))]


# -- enqueue --require / --owner ---------------------------------------------------------------

def test_enqueue_require_stores_the_rule_and_status_counts_who_meets_it(invoke, nova_cli,
                                                                        tmp_path):
    join(nova_cli, "cpu", {"backend": "cpu", "memory_gb": "64"})
    join(nova_cli, "gpu", {"backend": "cuda", "memory_gb": "24"})
    res = ok(invoke("enqueue", str(write(tmp_path, b"a\nb\n")), "--app", "synthetic",
                    "--require", "backend=cuda,rocm", "--require", "memory_gb>=12"))
    job = res.stdout.strip()
    assert "warning" not in res.stderr  # the gpu worker meets it
    assert [tuple(r) for r in nova_cli.job(job, with_tasks=False).requires] == [
        ("backend", "in", ("cuda", "rocm")), ("memory_gb", ">=", ("12",))]
    assert status_json(invoke, job)["eligible_workers"] == 1
    plain = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    assert status_json(invoke, plain)["eligible_workers"] == 2
    # each rule is met by one worker, both by none: the warning says so
    res = ok(invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic",
                    "--require", "memory_gb>=32", "--require", "backend=cuda"))
    assert ("fits: no single live worker meets all requirements memory_gb>=32 backend=cuda"
            in res.stderr)
    # nobody meets memory_gb>=128: a warning naming it, the job is queued all the same
    res = ok(invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic",
                    "--require", "memory_gb>=128"))
    job = res.stdout.strip()
    assert ("warning: no live worker of app 'synthetic' fits: requirement memory_gb>=128 is met "
            "by no live worker (live workers have memory_gb: 24, 64)") in res.stderr
    assert nova_cli.job(job, with_tasks=False).state == "queued"
    text = ok(invoke("status", job)).stdout
    assert status_json(invoke, job)["eligible_workers"] == 0
    assert "warning:" in text and "memory_gb>=128" in text


@pytest.mark.parametrize("bad, needle", [
    ("backend", "--require"), ("memory_gb>=lots", "memory_gb"), ("Key=1", "Key"),
    ("x=a b", "x=a b"), ("x=" + "v," * 20, "values"),
])
def test_enqueue_refuses_a_bad_requirement_and_writes_nothing(invoke, nova_cli, tmp_path, bad,
                                                               needle):
    res = invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic", "--require", bad)
    assert needle in rejected(res)
    assert job_keys(nova_cli) == []


def test_enqueue_owner_from_the_flag_the_environment_or_the_login(redis_url, namespace,
                                                                    nova_cli, tmp_path):
    runner = CliRunner()
    prompts = str(write(tmp_path, b"a\n"))

    def enqueue(*extra, **env):
        res = runner.invoke(cli, ["enqueue", prompts, "--app", "synthetic", *extra],
                            env=runner_env(nova_env(redis_url, namespace, tmp_path, **env)))
        return res

    job = ok(enqueue("--owner", "alice@lab")).stdout.strip()
    assert nova_cli.job(job, with_tasks=False).owner == "alice@lab"
    job = ok(enqueue(NOVA_OWNER="bob")).stdout.strip()
    assert nova_cli.job(job, with_tasks=False).owner == "bob"
    job = ok(enqueue("--owner", "carol", NOVA_OWNER="bob")).stdout.strip()
    assert nova_cli.job(job, with_tasks=False).owner == "carol"  # the flag wins
    job = ok(enqueue()).stdout.strip()
    assert nova_cli.job(job, with_tasks=False).owner == getpass.getuser()
    before = job_keys(nova_cli)
    for bad in ({"args": ("--owner", "bad owner")}, {"env": {"NOVA_OWNER": "<script>"}},
                {"args": ("--owner", "x" * 129)}):
        res = enqueue(*bad.get("args", ()), **bad.get("env", {}))
        line = rejected(res, "owner")
        assert "1 to 128 of A-Z a-z 0-9" in line
        assert job_keys(nova_cli) == before  # nothing enqueued


# -- owners ------------------------------------------------------------------------------------

def test_owners_list_set_and_half_life(invoke, nova_cli, tmp_path):
    assert ok(invoke("owners")).stdout.startswith("no owners yet")
    enqueue_ok(invoke, write(tmp_path, b"a\n"), "--owner", "alice")
    enqueue_ok(invoke, write(tmp_path, b"a\n"), "--owner", "bob")
    assert ok(invoke("owners", "set", "alice", "--share", "3")).stdout == "alice: share 3\n"
    assert json.loads(ok(invoke("owners", "list", "--json")).stdout) == [
        {"owner": "alice", "share": 3.0, "usage_s": 0.0, "queued_apps": ["synthetic"]},
        {"owner": "bob", "share": 1.0, "usage_s": 0.0, "queued_apps": ["synthetic"]}]
    text = ok(invoke("owners", "list")).stdout
    assert "75 % now" in text and "25 % now" in text and "usage halves every 3600 s" in text
    assert ok(invoke("owners", "set", "alice")).stdout == "alice: share 1\n"  # back to 1
    assert nova_cli.redis.hget(nova_cli.keys.shares(), "alice") is None
    assert ok(invoke("owners", "half-life", "600")).stdout == "usage halves every 600 s\n"
    assert shares.half_life_s(nova_cli) == 600
    assert "usage halves every 600 s" in ok(invoke("owners")).stdout


@pytest.mark.parametrize("args, code, needle", [
    (("set",), 1, "owners set needs an OWNER"),
    (("set", "bad owner", "--share", "2"), 1, "owner 'bad owner'"),
    (("set", "alice", "--share", "0"), 2, "--share"),
    (("set", "alice", "--share", "lots"), 2, "--share"),
    (("half-life",), 1, "owners half-life needs a number of seconds"),
    (("half-life", "soon"), 1, "owners half-life needs a number of seconds"),
    (("half-life", "0.5"), 1, "the half-life must be from 1 s to 365 days"),
    (("half-life", "nan"), 1, "the half-life must be from 1 s to 365 days"),
    (("rename",), 2, "'rename' is not one of"),
])
def test_owners_refuses_bad_input_and_changes_nothing(invoke, nova_cli, args, code, needle):
    res = invoke("owners", *args)
    assert res.exit_code == code and needle in res.stderr, (res.exit_code, res.output)
    assert nova_cli.redis.exists(nova_cli.keys.shares(), nova_cli.keys.usage()) == 0


def test_owners_text_shows_a_forged_owner_name_inert(invoke, nova_cli):
    nova_cli.redis.hset(nova_cli.keys.shares(), "evil\x1b[2J\nname", "2")
    text = ok(invoke("owners")).stdout
    assert "\x1b" not in text and "evil" in text


# -- workers: labels, warm models, model loads --------------------------------------------------

def test_workers_json_shows_labels_warm_models_and_model_loads(invoke, nova_cli):
    join(nova_cli, "w1", {"backend": "cuda", "gpu": "4090"}, app="txt2img")
    nova_cli.redis.hset(nova_cli.keys.worker("w1"),
                        mapping={"warm:txt2img": "model-a", "model_loads": "3"})
    [w] = json.loads(ok(invoke("workers", "--json")).stdout)
    assert w["labels"] == {"backend": "cuda", "gpu": "4090"}
    assert w["warm"] == {"txt2img": "model-a"} and w["model_loads"] == 3


def test_a_real_worker_reports_automatic_and_custom_labels(redis_url, namespace, nova_cli,
                                                           tmp_path):
    """``--label`` on one worker, ``NOVA_LABELS`` (comma-separated) on another; both carry
    the automatic labels too; a bad label stops the worker with one line."""
    base = nova_env(redis_url, namespace, tmp_path)
    args = ["worker", "--app", "synthetic", "--no-benchmark", "--backend", "cpu"]
    with background([*args, "--name", "flagged", "--label", "gpu=4090", "--label", "site=lab"],
                    base, log_path=tmp_path / "a.log"), \
         background([*args, "--name", "env"], {**base, "NOVA_LABELS": "site=home,rack=2"},
                    log_path=tmp_path / "b.log"):
        wait_for(lambda: len(nova_cli.eligible_workers("synthetic")) == 2, 120, 0.1,
                 "two workers")
        labels = {w.name: w.labels for w in nova_cli.workers()}
    assert labels["flagged"]["gpu"] == "4090" and labels["flagged"]["site"] == "lab"
    assert labels["env"]["site"] == "home" and labels["env"]["rack"] == "2"
    for found in labels.values():
        assert found["backend"] == "cpu" and found["fp16"] == "0"
        assert found["host"] == socket.gethostname().replace(" ", "-")[:64]
        assert "app.synthetic" in found and found["device"]
    bad = CliRunner().invoke(cli, [*args, "--label", "gpu 4090"],
                             env=runner_env(base))
    assert bad.exit_code != 0 and "key=value" in bad.output


@pytest.mark.parametrize("label, says", [
    ("backend=cuda", "--label backend: an automatic label"),    # a CPU worker taking CUDA jobs
    ("app.txt2img=9", "--label app.txt2img: an automatic label"),
    (",".join(f"k{i}=v" for i in range(30)), "30 custom labels beside"),  # over the cap with them
])
def test_custom_labels_may_not_replace_or_crowd_out_automatic_ones(redis_url, namespace,
                                                                   nova_cli, tmp_path, label,
                                                                   says):
    base = nova_env(redis_url, namespace, tmp_path)
    res = CliRunner().invoke(cli, ["worker", "--app", "synthetic", "--no-benchmark",
                                   "--backend", "cpu", "--label", label], env=runner_env(base))
    assert res.exit_code != 0 and says in res.output, res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    assert nova_cli.workers() == []  # refused before it registered
