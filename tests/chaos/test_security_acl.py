"""The Redis ACL roles of docs/SECURITY.md, applied verbatim to a real Redis: each role can do
its job with the real client and worker, and is refused what it should not do."""

from __future__ import annotations

import re
import signal

import pytest
import redis
from novatests.chaos.acl import PASSWORDS, acl_server, documented_acl, load_scripts
from novatests.chaos.fleet import Fleet, chaos_client, no_tracebacks
from novatests.chaos.history import check

from nova_queue import Settings, TaskSpec
from nova_queue.errors import ConfigError, InputError
from nova_queue.local import wait_for
from nova_queue.scripts import script_sources

WORKER_SCRIPTS = ("claim", "renew", "complete", "complete_claim", "complete_batch", "fail",
                  "register", "deregister")
#: What the worker runtime sends itself: its scripts, and the idle wait on the event stream
#: (client.events with block_ms: XREAD; client.last_event_id: XREVRANGE).
WORKER_DIRECT = {"evalsha", "xread", "xrevrange", "ping"}
#: Every command the gallery (web/) and NovaClient's read methods send: job/task/worker
#: hashes (HGETALL, HGET; HMGET: the fields of live workers that say who can run a job),
#: sets (SMEMBERS, SCARD), sorted sets (ZREVRANGE, ZRANGE, ZRANGEBYSCORE, ZMSCORE, ZCARD),
#: the event stream (XRANGE, XREVRANGE, XREAD, XLEN), TIME.
GALLERY_READS = {"ping", "time", "hget", "hmget", "hgetall", "scard", "smembers", "zcard",
                 "zmscore", "zrange", "zrangebyscore", "zrevrange", "xlen", "xrange", "xread",
                 "xrevrange"}
Denied = redis.exceptions.NoPermissionError


def granted(user: str) -> set[str]:
    """The commands a documented role grants (``+cmd`` rules)."""
    return {r[1:].lower() for r in documented_acl("x")[user] if r.startswith("+")}


def test_worker_role_grants_exactly_what_the_worker_and_its_scripts_send():
    called = set()
    for name in WORKER_SCRIPTS:
        called |= {c.lower() for c in re.findall(r"redis\.call\('([A-Za-z]+)'",
                                                 script_sources()[name][1])}
    assert granted("nova-worker") == called | WORKER_DIRECT, \
        sorted(granted("nova-worker") ^ (called | WORKER_DIRECT))
    assert not granted("nova-worker") & {"eval", "script", "function", "@all", "@scripting",
                                        "set", "del", "unlink", "expire", "rename", "incrby"}


def test_gallery_role_grants_exactly_what_the_gallery_reads():
    assert granted("nova-gallery") == GALLERY_READS


@pytest.fixture
def acl_redis(private_redis, namespace):
    """A Redis with the documented users; returns (server, {user: url}, admin client)."""
    yield from acl_server(private_redis, namespace)


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
        _worker_role_is_confined(urls["nova-worker"])
        _gallery_role_reads_only(urls["nova-gallery"], namespace, admin, job, poison)
        _admin_role_administers(admin, poison)
        _workers_wait_for_the_admin_after_scripts_are_lost(admin, w)
    finally:
        fleet.close()


def _worker_role_is_confined(url: str) -> None:
    """The worker user: only EVALSHA of loaded scripts on its namespace's keys."""
    wr = redis.Redis.from_url(url, decode_responses=True)
    for command in (("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"),
                    ("SCAN", "0"), ("INFO",), ("EVAL", "return 1", "0"),
                    ("SCRIPT", "LOAD", "return 1"), ("SCRIPT", "FLUSH"),
                    ("GET", "unrelated-key"), ("HSET", "nova:{other}:x", "a", "1"),
                    ("MULTI",)):
        _refused(wr, *command)
    other = chaos_client(url, "other-namespace")
    with pytest.raises(Denied):
        other.register_worker("intruder", {"name": "intruder"}, ["synthetic"])


def _gallery_role_reads_only(url: str, namespace: str, admin, job: str, poison: str) -> None:
    """The gallery user: every read the gallery does, no write, no script."""
    gallery = chaos_client(url, namespace)
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
    _gallery_pages(url, namespace, job)


def _admin_role_administers(admin, poison: str) -> None:
    """The admin user: enqueue (above), retry, cancel, script loading; nothing dangerous."""
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


def _workers_wait_for_the_admin_after_scripts_are_lost(admin, w) -> None:
    """Scripts lost (restart, failover, SCRIPT FLUSH): workers wait for the admin."""
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


def _gallery_pages(url: str, namespace: str, job: str) -> None:
    """The read-only gallery (no web token) serves its pages with the gallery user."""
    try:
        from nova_queue.web import create_app
    except ImportError:
        return  # the web app is optional here; tests/web/ covers it
    from nova_queue import Settings

    app = create_app({"TESTING": True, "SECRET_KEY": "acl"},
                     settings=Settings(redis_url=url, namespace=namespace))
    try:
        with app.test_client() as client:
            for path in ("/", f"/jobs/{job}", f"/api/jobs/{job}", "/api/workers"):
                assert client.get(path).status_code == 200, path
    finally:
        app.extensions["nova"].close()


# -- each role may run exactly its documented commands, as Redis itself answers --------------

def allowed_commands(root: redis.Redis, user: str, key: str) -> set[str]:
    """Every command (``name`` or ``container|sub``) Redis lets ``user`` run on ``key``:
    ``ACL DRYRUN`` over all the server's commands, each with as many arguments as its arity
    needs, every one of them ``key``. Commands every client may send before it authenticates
    (AUTH, HELLO, QUIT, RESET: flag ``no_auth``) are left out."""
    out = set()
    for name, info in root.command().items():
        if "no_auth" in info["flags"]:
            continue
        subs = [(sub[0], sub[1]) for sub in info.get("subcommands") or []]
        for full, arity in subs or [(name, info["arity"])]:
            words = full.split("|")
            args = [key] * max(abs(arity) - len(words), 0)
            try:
                if root.execute_command("ACL", "DRYRUN", user, *words, *args) == "OK":
                    out.add(full)
            except redis.ResponseError:
                pass  # a command DRYRUN cannot check (it names no user-runnable form)
    return out


def test_roles_may_run_exactly_their_documented_commands(acl_redis, namespace):
    server, _, _ = acl_redis
    root = redis.Redis(port=server.port, decode_responses=True)
    if tuple(int(x) for x in root.info("server")["redis_version"].split(".")[:2]) < (7, 0):
        pytest.skip("ACL DRYRUN needs Redis 7.0")
    key = f"nova:{{{namespace}}}:job:x"
    assert allowed_commands(root, "nova-worker", key) == granted("nova-worker")
    assert allowed_commands(root, "nova-gallery", key) == granted("nova-gallery")
    admin = allowed_commands(root, "nova-admin", key)
    assert {"eval", "evalsha", "script|load", "hset", "del", "unlink", "rename"} <= admin
    assert not admin & {"flushall", "config|get", "keys", "debug", "acl|list", "shutdown"}
    other = f"nova:{{{namespace}x}}:job:x"  # another namespace: nothing that takes a key
    for user in ("nova-worker", "nova-gallery", "nova-admin"):
        assert root.execute_command("ACL", "DRYRUN", user, "hget", other, "f") != "OK"
    root.close()


#: Commands whose cost the caller picks, whatever the data holds: a negative count returns
#: that many members with repeats (``SRANDMEMBER key -50000000``: 5.9 s and a 350 MB reply on
#: a set of three members, every other client waiting), a far offset allocates up to 512 MB
#: (SETRANGE, SETBIT, BITFIELD), a payload or a sort the caller builds. No role may run one.
#: (Blocking commands such as WAIT or XREAD BLOCK hold only their own connection.)
COST_BY_ARGUMENT = {"srandmember", "zrandmember", "hrandfield", "setrange", "setbit",
                    "bitfield", "sort", "sort_ro", "debug", "restore", "restore-asking",
                    "pfdebug"}


def test_no_role_may_run_a_command_whose_cost_an_argument_picks(acl_redis, namespace):
    server, _, _ = acl_redis
    root = redis.Redis(port=server.port, decode_responses=True)
    if tuple(int(x) for x in root.info("server")["redis_version"].split(".")[:2]) < (7, 0):
        pytest.skip("ACL DRYRUN needs Redis 7.0")
    key = f"nova:{{{namespace}}}:app:synthetic:workers"
    for user in ("nova-worker", "nova-gallery", "nova-admin"):
        allowed = allowed_commands(root, user, key)
        assert not allowed & COST_BY_ARGUMENT, (user, sorted(allowed & COST_BY_ARGUMENT))
    root.close()


def test_a_worker_credential_cannot_stall_redis_with_a_negative_count(acl_redis, namespace):
    """The probe's attack, by hand with the worker login: refused at once; the scripts read
    a bounded part of a set instead (SSCAN ... COUNT)."""
    _, urls, admin = acl_redis
    load_scripts(admin)
    admin.register_worker("w", {"name": "w"}, ["synthetic"])
    wr = redis.Redis.from_url(urls["nova-worker"], decode_responses=True)
    try:
        _refused(wr, "SRANDMEMBER", admin.keys.app_workers("synthetic"), "-50000000")
        assert wr.sscan(admin.keys.app_workers("synthetic"), 0, count=64)[1] == ["w"]
    finally:
        wr.close()


def test_the_gallery_role_serves_every_read_and_nothing_else(acl_redis, namespace):
    _, urls, admin = acl_redis
    load_scripts(admin)
    job = admin.enqueue("synthetic", [TaskSpec(f"g {i}", 0.05) for i in range(3)])
    admin.register_worker("w", {"name": "w"}, ["synthetic"])
    gallery = chaos_client(urls["nova-gallery"], namespace)
    try:
        assert gallery.job(job).total == 3 and len(gallery.tasks(job)) == 3
        assert gallery.task(f"{job}:0").state == "pending"
        assert [j.job_id for j in gallery.jobs()] == [job] and gallery.failed_tasks() == []
        assert [w.name for w in gallery.workers()] == ["w"]
        assert gallery.eligible_workers("synthetic") == ["w"]
        assert gallery.live_apps() == {"synthetic": 1} and gallery.apps() == ["synthetic"]
        assert gallery.pending_count("synthetic") == 3 and gallery.server_time_ms() > 0
        assert gallery.events(count=5) and gallery.recent_events(5, job_id=job)
        assert gallery.events(after=gallery.last_event_id(), block_ms=20) == []
        _gallery_pages(urls["nova-gallery"], namespace, job)
        key = admin.keys.job(job)
        for command in (("DBSIZE",), ("DUMP", key), ("LOLWUT",), ("TYPE", key),
                        ("OBJECT", "ENCODING", key), ("MEMORY", "USAGE", key), ("EXISTS", key),
                        ("HSET", key, "state", "x"), ("EVALSHA", "0" * 40, "0"),
                        ("SCAN", "0"), ("KEYS", "*"), ("RANDOMKEY",)):
            _refused(gallery.redis, *command)
    finally:
        gallery.close()


# -- what a stolen worker credential can and cannot do -------------------------------------

def test_a_worker_credential_cannot_freeze_redis_with_forged_counts(acl_redis, namespace):
    """Issue 13: HSET a job's total to 10**12, then EVALSHA cancel: the loop ran for weeks,
    every namespace got BUSY. Now each call is bounded by the job's pending tasks."""
    server, urls, admin = acl_redis
    load_scripts(admin)
    job = admin.enqueue("synthetic", [TaskSpec(f"f {i}", 0.05) for i in range(5)])
    worker = chaos_client(urls["nova-worker"], namespace)
    root = redis.Redis(port=server.port, decode_responses=True)
    k = worker.keys
    try:
        worker.redis.hset(k.job(job), "total", 10**12)  # the worker role may HSET
        keys = [k.job(job), k.pending("synthetic"), k.finished(), k.events(), k.meta()]
        with pytest.raises(InputError, match="count"):
            worker.caller.run("cancel", keys, [worker.prefix, job, 0, 10**12, 1000])
        root.config_resetstat()
        assert worker.caller.run("cancel", keys, [worker.prefix, job, 0, 2000, 1000]) == [0, -1]
        stats = root.info("commandstats")
        inner = sum(v["calls"] for name, v in stats.items()
                    if name not in ("cmdstat_evalsha", "cmdstat_config", "cmdstat_info"))
        assert stats["cmdstat_evalsha"]["calls"] == 1 and inner < 100
        assert stats["cmdstat_evalsha"]["usec"] < 50_000
        assert admin.job(job, with_tasks=False).cancelled == 5
        # and the worker cannot create jobs at all (enqueue needs INCRBY): nothing written
        before = sorted(root.scan_iter(match=admin.prefix + "*"))
        with pytest.raises(redis.ResponseError, match="can't run this command"):
            worker.enqueue("synthetic", [TaskSpec("injected", 1.0)])
        assert sorted(root.scan_iter(match=admin.prefix + "*")) == before
    finally:
        worker.close()
        root.close()


def test_what_the_worker_role_can_still_do_by_hand(acl_redis, namespace, private_redis):
    _, urls, admin = acl_redis
    wr = redis.Redis.from_url(urls["nova-worker"], decode_responses=True)
    job_key = admin.keys.job("j")
    for command in (("SET", admin.keys.meta(), "x"), ("DEL", admin.keys.pending("synthetic")),
                    ("UNLINK", job_key), ("EXPIRE", job_key, "1"),
                    ("RENAME", job_key, admin.keys.job("k")), ("INCRBY", admin.keys.seq(), "1"),
                    ("HGETALL", job_key), ("SUBSCRIBE", "x"), ("PUBLISH", "x", "y")):
        _refused(wr, *command)
    # what it can: any hash field of its namespace, values as large as the server allows
    assert wr.hset(job_key, "total", 10**12) == 1
    assert wr.hset(job_key, "blob", "x" * 8 * 2**20) == 1  # 8 MB: fine with the defaults
    wr.close()
    # with proto-max-bulk-len 1mb (docs/SECURITY.md) the server refuses a 2 MB value
    capped = private_redis("--proto-max-bulk-len", "1mb")
    root = redis.Redis(port=capped.port, decode_responses=True)
    for user, rules in documented_acl(namespace).items():
        root.execute_command("ACL", "SETUSER", user, "reset", *rules)
    wr = redis.Redis(port=capped.port, username="nova-worker",
                     password=PASSWORDS["nova-worker"], decode_responses=True)
    with pytest.raises(redis.RedisError):  # "invalid bulk length", or the connection dropped
        wr.hset(job_key, "blob", "x" * 2 * 2**20)
    assert root.hget(job_key, "blob") is None
    wr.close()
    root.close()


def test_a_glob_namespace_would_open_every_namespace_and_is_refused(acl_redis):
    server, _, _ = acl_redis
    root = redis.Redis(port=server.port, decode_responses=True)
    if tuple(int(x) for x in root.info("server")["redis_version"].split(".")[:2]) < (7, 0):
        pytest.skip("ACL DRYRUN needs Redis 7.0")
    # the documented rule with namespace "*" matches every namespace's keys...
    root.execute_command("ACL", "SETUSER", "glob-worker", "reset",
                         *documented_acl("*")["nova-worker"][1:], ">pw")
    assert root.execute_command("ACL", "DRYRUN", "glob-worker", "hget",
                                "nova:{someone-else}:job:1", "state") == "OK"
    root.close()
    # ...so nova-queue refuses such a namespace wherever one is read
    for ns in ("*", "?", "[a-z]*", "d\\efault"):
        with pytest.raises(ConfigError, match="invalid namespace"):
            Settings(namespace=ns)
        with pytest.raises(ConfigError, match="invalid namespace"):
            chaos_client(f"redis://127.0.0.1:{server.port}/0", ns)

