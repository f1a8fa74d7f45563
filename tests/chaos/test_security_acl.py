"""The Redis ACL roles of docs/SECURITY.md, applied verbatim to a real Redis: each role can do
its job with the real client and worker, and is refused what it should not do."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
import redis
from novatests.chaos.fleet import Fleet, chaos_client, no_tracebacks
from novatests.chaos.history import check

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.scripts import script_sources

DOC = Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md"
PASSWORDS = {"nova-admin": "admin-pw-1", "nova-worker": "worker-pw-2",
             "nova-gallery": "gallery-pw-3"}
WORKER_SCRIPTS = ("claim", "renew", "complete", "complete_claim", "fail", "register",
                  "deregister")
Denied = redis.exceptions.NoPermissionError


def documented_acl(ns: str) -> dict[str, list[str]]:
    """``{user: rules}`` from the ```acl block of docs/SECURITY.md, for namespace ``ns``."""
    block = re.search(r"```acl\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL).group(1)
    users = {}
    for line in block.splitlines():
        words = line.split()
        if words[:1] == ["user"]:
            users[words[1]] = [f">{PASSWORDS[words[1]]}" if w.startswith(">")
                               else w.replace("NAMESPACE", ns) for w in words[2:]]
    return users


def test_worker_role_grants_every_command_the_worker_scripts_call():
    rules = documented_acl("x")["nova-worker"]
    granted = {r[1:].lower() for r in rules if r.startswith("+")}
    called = set()
    for name in WORKER_SCRIPTS:
        called |= {c.lower() for c in re.findall(r"redis\.call\('([A-Za-z]+)'",
                                                 script_sources()[name][1])}
    assert called <= granted, sorted(called - granted)
    assert not granted & {"eval", "script", "script|load", "function", "@all", "@scripting"}


@pytest.fixture
def acl_redis(private_redis, namespace):
    """A Redis with the documented users; returns (server, {user: url}, admin client)."""
    server = private_redis()
    root = redis.Redis(port=server.port, decode_responses=True)
    for user, rules in documented_acl(namespace).items():
        root.execute_command("ACL", "SETUSER", user, "reset", *rules)
    urls = {u: f"redis://{u}:{pw}@127.0.0.1:{server.port}/0" for u, pw in PASSWORDS.items()}
    admin = chaos_client(urls["nova-admin"], namespace)
    yield server, urls, admin
    admin.close()
    root.close()


def load_scripts(admin) -> None:
    """The documented admin step (``nova-queue load-scripts`` as the admin user), so
    workers can EVALSHA the scripts."""
    from click.testing import CliRunner

    from nova_queue.cli import cli

    out = CliRunner().invoke(cli, ["--redis", admin.settings.redis_url, "--namespace",
                                   admin.settings.namespace, "load-scripts"])
    assert out.exit_code == 0, out.output
    assert f"loaded {len(script_sources())} scripts" in out.output
    assert PASSWORDS["nova-admin"] not in out.output


def _refused(client: redis.Redis, *command) -> None:
    with pytest.raises(Denied):
        client.execute_command(*command)


@pytest.mark.slow
def test_roles_do_their_jobs_and_nothing_else(acl_redis, namespace, tmp_path):
    _, urls, admin = acl_redis
    load_scripts(admin)
    job = admin.enqueue("synthetic", [TaskSpec(f"acl {i}", 0.05) for i in range(6)],
                        params={"seconds": 0.05, "size": 64})
    poison = admin.enqueue("synthetic", [TaskSpec("POISON", 0.05)],
                           params={"seconds": 0.05, "size": 64, "crash_on": "POISON"},
                           max_attempts=1)
    fleet = Fleet(urls["nova-worker"], namespace, (tmp_path / "store").as_uri(),
                  tmp_path / "homes")
    try:
        w = fleet.start("restricted", "--no-benchmark")
        wait_for(lambda: admin.job(job, with_tasks=False).finished
                 and admin.job(poison, with_tasks=False).finished, timeout_s=60,
                 message=f"jobs to finish as nova-worker\n{fleet.logs()}")
        assert check(admin, [job], expect="done").ok

        # the worker user: only EVALSHA of loaded scripts on its namespace's keys
        wr = redis.Redis.from_url(urls["nova-worker"], decode_responses=True)
        for command in (("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"),
                        ("SCAN", "0"), ("INFO",), ("EVAL", "return 1", "0"),
                        ("SCRIPT", "LOAD", "return 1"), ("SCRIPT", "FLUSH"),
                        ("GET", "unrelated-key"), ("HSET", "nova:{other}:x", "a", "1"),
                        ("MULTI",)):
            _refused(wr, *command)
        other = chaos_client(urls["nova-worker"], "other-namespace")
        with pytest.raises(Denied):
            other.register_worker("intruder", {"name": "intruder"}, ["synthetic"])

        # the gallery user: every read the gallery does, no write, no script
        gallery = chaos_client(urls["nova-gallery"], namespace)
        assert gallery.job(job).done == 6 and gallery.tasks(job)[0].state == "done"
        assert {j.job_id for j in gallery.jobs()} == {poison, job}
        assert [w.name for w in gallery.workers()] == ["restricted"]
        assert gallery.events(count=5) and gallery.recent_events(5, job_id=job)
        assert gallery.events(after=gallery.last_event_id(), block_ms=20) == []
        assert [t.task_id for t in gallery.failed_tasks()] == [f"{poison}:0"]
        assert gallery.pending_count("synthetic") == 0 and gallery.apps() == ["synthetic"]
        assert gallery.server_time_ms() > 0
        with pytest.raises(Denied):
            gallery.cancel(job)
        with pytest.raises(Denied):
            gallery.enqueue("synthetic", [TaskSpec("no", 1.0)])
        gr = gallery.redis
        for command in (("HSET", admin.keys.job(job), "state", "x"), ("DEL", admin.keys.jobs()),
                        ("KEYS", "*"), ("SCAN", "0"), ("RANDOMKEY",), ("EVAL", "return 1", "0"),
                        ("GET", "unrelated-key"), ("FLUSHALL",)):
            _refused(gr, *command)
        _gallery_pages(urls["nova-gallery"], namespace, job)

        # the admin user: enqueue (above), retry, cancel, script loading; nothing dangerous
        admin.retry(f"{poison}:0")
        assert admin.task(f"{poison}:0").state == "pending"
        wait_for(lambda: admin.job(poison, with_tasks=False).finished, timeout_s=30,
                 message="the retried task to fail again")
        late = admin.enqueue("synthetic", [TaskSpec("late", 60.0)], params={"seconds": 60})
        admin.cancel(late)
        assert admin.job(late, with_tasks=False).state == "cancelled"
        for command in (("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"),
                        ("GET", "unrelated-key"), ("ACL", "LIST"), ("REPLICAOF", "NO", "ONE")):
            _refused(admin.redis, *command)

        # scripts lost (restart, failover, SCRIPT FLUSH): workers wait for the admin
        admin.redis.script_flush()
        after = admin.enqueue("synthetic", [TaskSpec("after flush", 0.05)],
                              params={"seconds": 0.05, "size": 64})
        wait_for(lambda: "script|load" in w.output(), timeout_s=30,
                 message="the worker to report that it may not load scripts")
        assert w.proc.poll() is None
        load_scripts(admin)
        wait_for(lambda: admin.job(after, with_tasks=False).finished, timeout_s=60,
                 message="the worker to resume once the admin reloaded the scripts")
        w.signal(signal.SIGTERM)
        assert w.wait(30) == 0
        no_tracebacks([w])
    finally:
        fleet.close()


def _gallery_pages(url: str, namespace: str, job: str) -> None:
    """The read-only gallery (no web token) serves its pages with the gallery user."""
    try:
        from nova_queue.web import create_app
    except ImportError:
        return  # the web app is optional here; tests/test_web_*.py cover it
    from nova_queue import Settings

    app = create_app({"TESTING": True, "SECRET_KEY": "acl"},
                     settings=Settings(redis_url=url, namespace=namespace))
    try:
        with app.test_client() as client:
            for path in ("/", f"/jobs/{job}", f"/api/jobs/{job}", "/api/workers"):
                assert client.get(path).status_code == 200, path
    finally:
        app.extensions["nova"].close()
