"""Every Lua script fed its worst-case arguments and forged fields returns quickly.

A caller may send any ARGV, and the worker role may write fields by hand (HSET, SADD, ZADD),
so no script may loop over a count, size or index it was given: each is bounded by the data
actually present and by a fixed cap per call (``lua/includes/common.lua``). Each attack here
runs on a private redis-server, measured by Redis itself: the number of commands the script
ran (``INFO commandstats``) and the CPU time the server spent on the call (``INFO cpu``).
Before the bounds, the first attack (a job's ``total`` forged to 10**12, then ``cancel``)
held Redis for days.
"""

from __future__ import annotations

import json
import os
import re
from importlib import resources

import pytest
import redis

from nova_queue import NovaClient, TaskSpec, limits
from nova_queue.claim_args import ClaimArgs
from nova_queue.errors import BAD_INPUT
from nova_queue.local import RedisServer
from nova_queue.scripts import script_sources

# long: one worst case per script, all measured by the same private Redis and meter;
# DEVELOPERS.md sends every new script's worst case here

#: Most Redis commands one script call may run in these attacks (the largest bounded paths:
#: 256 releases or worker removals of ~5-12 commands each; 2000 cancelled tasks of 2 each).
MAX_INNER_CALLS = 5000
#: Most milliseconds of CPU the Redis process may spend on one call (its own rusage, from
#: INFO cpu: what the script cost, not how long the machine kept it waiting, so a busy
#: 2-core machine does not fail it; the count above is the exact bound).
MAX_SCRIPT_MS = 80
BIG = 10**12
HUGE_SET = 50_000  # members of a forged held set / fleet / pending set / stage set


@pytest.fixture(scope="module")
def server(redis_server_bin):
    s = RedisServer(binary=redis_server_bin).start()
    yield s
    s.close()


@pytest.fixture
def nova(server, namespace):
    client = NovaClient.from_url(server.url, namespace=namespace)
    client.scripts.load(client.redis)  # EVALSHA from the first call: no NOSCRIPT round
    yield client
    client.close()


class Meter:
    """Redis's own count of commands and time spent in EVALSHA, around one call."""

    def __init__(self, r: redis.Redis):
        self.r = r

    def _stats(self) -> dict[str, dict[str, float]]:
        return self.r.info("commandstats")

    def _cpu_s(self) -> float:
        cpu = self.r.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    def __call__(self, fn):
        before = self._stats()
        cpu0 = self._cpu_s()
        result = fn()
        cpu1 = self._cpu_s()
        after = self._stats()

        def diff(name: str, field: str) -> float:
            return after.get(name, {}).get(field, 0) - before.get(name, {}).get(field, 0)

        inner = sum(diff(name, "calls") for name in after
                    if name not in ("cmdstat_evalsha", "cmdstat_info"))
        evals = diff("cmdstat_evalsha", "calls")
        assert evals == 1, f"expected one EVALSHA, Redis counted {evals}"
        return result, int(inner), (cpu1 - cpu0) * 1000


@pytest.fixture
def meter(nova):
    return Meter(nova.redis)


def call(nova, name, keys, args):
    """The script as an attacker runs it: straight EVALSHA, no client-side checks."""
    return nova.scripts.call(name, keys, args)


def assert_bounded(meter, fn, *, expect_bad: bool | None = None, timed: bool = True):
    """Run one attack call; Redis ran at most MAX_INNER_CALLS commands for it, in at most
    MAX_SCRIPT_MS of its CPU. ``timed=False`` for calls with tens of thousands of arguments: Redis
    builds the script's ARGV table before the script runs, in time proportional to what
    the caller sent, as for any command that long (such calls must run no command at all)."""
    result, inner, ms = meter(fn)
    if os.environ.get("NOVA_BOUNDS_DEBUG"):
        print(f"bounds: {inner} commands, {ms:.1f} ms")
    assert inner <= MAX_INNER_CALLS, f"the script ran {inner} commands"
    if timed:
        assert ms <= MAX_SCRIPT_MS, f"the script took {ms:.1f} ms of Redis's CPU"
    if expect_bad is not None:
        assert (result[0] == BAD_INPUT) is expect_bad, result
    return result, inner


def k(nova):
    return nova.keys


def seed_job(nova, n=3, app="synthetic"):
    return nova.enqueue(app, [TaskSpec(f"p{i}", 1.0) for i in range(n)])


def fill_set(r, key, n, prefix="x"):
    pipe = r.pipeline(transaction=False)
    for lo in range(0, n, 5000):
        pipe.sadd(key, *[f"{prefix}{i}" for i in range(lo, min(lo + 5000, n))])
    pipe.execute()


def fill_zset(r, key, n, member, score):
    pipe = r.pipeline(transaction=False)
    for lo in range(0, n, 5000):
        pipe.zadd(key, {member(i): score(i) for i in range(lo, min(lo + 5000, n))})
    pipe.execute()


def claim_keys(nova, wid, app="synthetic"):
    return nova.worker.claim_keys(wid, app)


def claim_args(nova, wid, k=1, app="synthetic", ids=None):
    ids = ids if ids is not None else [f"a{i}" for i in range(k)]
    claim = ClaimArgs(app, k, 10_000, 5_000, 100, 120_000, "10", ids)
    return [nova.prefix, wid, 1000, *claim.argv()]


# -- the limits are one definition ---------------------------------------------------------

def test_python_limits_equal_the_lua_limits():
    common = (resources.files("nova_queue.lua") / "includes" / "common.lua").read_text()
    lua = {}
    number = r"[0-9][0-9.e+-]*"
    for m in re.finditer(rf"^local ((?:MAX|MIN)_\w+(?:, (?:MAX|MIN)_\w+)*) = "
                         rf"({number}(?:, {number})*)", common, re.MULTILINE):
        names, values = m.group(1).split(", "), m.group(2).split(", ")
        lua.update(zip(names, (float(v) for v in values)))
    for name in ("MAX_CLAIM_K", "MAX_RENEW_LEASES", "MAX_APPS", "MAX_CHUNK", "MAX_VISIT",
                 "MAX_REAP", "MAX_JOB_TASKS", "MAX_ATTEMPTS", "MAX_TTL_MS", "MAX_EVENTS_MAXLEN",
                 "MAX_RUN_S", "MAX_INPUT_BYTES", "MAX_PARAMS_BYTES", "MAX_META_BYTES",
                 "MAX_INLINE_BYTES",
                 "MAX_TEXT_BYTES", "MIN_COST", "MAX_COST", "MAX_CANNOT_RUN", "MAX_REASON_BYTES",
                 "MAX_MARKS_BYTES", "MAX_PRICE", "MAX_BUDGET", "MAX_DEADLINE_MS"):
        assert lua[name] == getattr(limits, name), name


def test_every_script_is_attacked_below():
    attacked = {"cancel", "abort", "reap", "claim", "complete_claim", "complete_batch", "renew",
                "complete", "fail", "register", "deregister", "retry", "enqueue", "quarantine", "loaded",
                "loading", "expire", "purge", "repair"}
    assert set(script_sources()) == attacked


# -- cancel / abort / reap: counts and sizes from writable fields --------------------------

def test_cancel_with_a_forged_total_of_10_to_the_12(nova, meter):
    job = seed_job(nova, 3)
    nova.redis.hset(k(nova).job(job), "total", BIG)  # the worker role may HSET
    keys = [k(nova).job(job), k(nova).pending("synthetic"), k(nova).finished(), k(nova).events(),
            k(nova).meta()]
    res, _ = assert_bounded(meter, lambda: call(nova, "cancel", keys,
                                                [nova.prefix, job, 0, 2000, 1000]))
    assert res == [0, -1]
    assert nova.job(job, with_tasks=False).cancelled == 3
    assert nova.pending_count("synthetic") == 0 and len(nova.tasks(job)) == 3
    # a count of 10**12 is refused before anything is read
    assert_bounded(meter, lambda: call(nova, "cancel", keys, [nova.prefix, job, 0, BIG, 1000]),
                   expect_bad=True)


def test_cancel_of_a_huge_job_visits_a_chunk_per_call(nova, meter):
    job = nova.enqueue("synthetic", [TaskSpec("t", 1.0)] * 25_000)
    nova.redis.hset(k(nova).job(job), mapping={"total": BIG, "seq0": 0, "priority": 1000})
    nova.cancel(job)  # aimed at the wrong range by the forged fields: still terminates
    keys = [k(nova).job(job), k(nova).pending("synthetic"), k(nova).finished(), k(nova).events(),
            k(nova).meta()]
    nova.redis.hset(k(nova).job(job), mapping={"total": 25_000, "priority": 0,
                                                "seq0": int(nova.redis.get(k(nova).seq())) - 25_000})
    cursor, calls = "0", 0
    while cursor != "-1":
        (code, cursor), _ = assert_bounded(
            meter, lambda c=cursor: call(nova, "cancel", keys, [nova.prefix, job, c, 2000, 1000]))
        assert code == 0
        cursor, calls = str(cursor), calls + 1
    assert calls == 13 and nova.pending_count("synthetic") == 0


def test_abort_and_reap_with_a_forged_staged_count(nova, meter):
    keys = [k(nova).job("stuck"), k(nova).staging(), k(nova).stage("stuck"), k(nova).meta()]
    meta = json.dumps({"app": "synthetic", "params": "{}", "priority": 0, "max_attempts": 3,
                       "total": 5, "name": ""})
    enq = [k(nova).job("stuck"), k(nova).jobs(), k(nova).staging(), k(nova).stage("stuck"),
           k(nova).pending("synthetic"), k(nova).seq(), k(nova).events(), k(nova).apps(),
           k(nova).meta()]
    call(nova, "enqueue", enq, [nova.prefix, "stuck", 1, 0, meta, 0, 1000, "a", "1", "b", "1"])
    nova.redis.hset(k(nova).job("stuck"), "staged", BIG)
    assert_bounded(meter, lambda: call(nova, "abort", keys, [nova.prefix, "stuck", BIG]),
                   expect_bad=True)
    res, _ = assert_bounded(meter, lambda: call(nova, "abort", keys,
                                                [nova.prefix, "stuck", 2000]))
    assert res == [0, 0] and not nova.redis.exists(k(nova).job("stuck"))
    # reap's staging cleanup walks the same way
    call(nova, "enqueue", enq, [nova.prefix, "stuck", 1, 0, meta, 0, 1000, "a", "1", "b", "1"])
    nova.redis.hset(k(nova).job("stuck"), "staged", BIG)
    reap_keys = [k(nova).leases(), k(nova).alive(), k(nova).inflight(), k(nova).failed(),
                 k(nova).finished(), k(nova).meta(), k(nova).events(), k(nova).staging()]
    assert_bounded(meter, lambda: call(nova, "reap", reap_keys,
                                       [nova.prefix, 10_000, 5_000, 1000, BIG, 0]),
                   expect_bad=True)
    res, _ = assert_bounded(meter, lambda: call(nova, "reap", reap_keys,
                                                [nova.prefix, 10_000, 5_000, 1000, 256, 0]))
    assert res[0] == 0 and not nova.redis.exists(k(nova).job("stuck"))


def test_reap_with_thousands_of_lost_workers_and_huge_held_sets(nova, meter):
    r = nova.redis
    job = seed_job(nova, 3)
    nova.register_worker("victim", {"name": "v"}, ["synthetic"])
    nova.claim("victim", "synthetic")
    fill_set(r, k(nova).held("victim"), HUGE_SET, prefix=f"{job}:")  # forged held entries
    r.hset(k(nova).worker("victim"), "apps", ",".join(f"a{i}" for i in range(HUGE_SET)))
    fill_zset(r, k(nova).alive(), 5000, lambda i: f"ghost{i}", lambda i: 1)
    fill_zset(r, k(nova).leases(), HUGE_SET, lambda i: f"{job}:{i + 10}", lambda i: 1)
    r.zadd(k(nova).alive(), {"victim": 1})
    reap_keys = [k(nova).leases(), k(nova).alive(), k(nova).inflight(), k(nova).failed(),
                 k(nova).finished(), k(nova).meta(), k(nova).events(), k(nova).staging()]
    total_lost = 0
    for _ in range(30):  # each call is bounded; the backlog shrinks call by call
        res, _ = assert_bounded(meter, lambda: call(
            nova, "reap", reap_keys, [nova.prefix, 10_000, 5_000, 1000, 256, 3_600_000]))
        total_lost += res[1]
    assert total_lost == 5001 and r.zcard(k(nova).alive()) == 0


# -- the worker scripts ----------------------------------------------------------------------

def test_claim_with_huge_k_fleets_pending_sets_and_held_sets(nova, meter):
    r = nova.redis
    job = seed_job(nova, 300)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    keys = claim_keys(nova, "w")
    # k far past the cap, and k without as many attempt ids: refused before any read
    assert_bounded(meter, lambda: call(nova, "claim", keys, claim_args(nova, "w", k=BIG, ids=["a"])),
                   expect_bad=True)
    assert_bounded(meter, lambda: call(nova, "claim", keys, claim_args(nova, "w", k=limits.MAX_CLAIM_K + 1)),
                   expect_bad=True)
    big_argv = claim_args(nova, "w", k=1, ids=[f"id{i}" for i in range(20_000)])
    res, inner = assert_bounded(meter, lambda: call(nova, "claim", keys, big_argv),
                                expect_bad=True, timed=False)
    assert inner == 0
    # a fleet of forged members makes the policy take its slow path: it weighs 256 of them
    fill_zset(r, k(nova).app_fleet("synthetic"), HUGE_SET, lambda i: f"fake{i}", lambda i: 1e-6)
    r.hset(k(nova).worker("w"), mapping={"ema:synthetic": 1.0, "n:synthetic": 5})
    # forged pending members ahead of the real tasks, forged oom lists on the real ones
    fill_zset(r, k(nova).pending("synthetic"), HUGE_SET, lambda i: f"junk{i}", lambda i: -1)
    pipe = r.pipeline(transaction=False)
    for i in range(300):  # as large as a task input may be (64 KiB), but written by hand
        pipe.hset(k(nova).task(f"{job}:{i}"), mapping={"oom": "w," * 32_768, "input": "x" * 65_536})
    pipe.execute()
    res, _ = assert_bounded(meter, lambda: call(nova, "claim", keys,
                                                claim_args(nova, "w", k=limits.MAX_CLAIM_K)))
    assert res[0] == 2  # only junk within reach: dropped, nothing claimed this time
    r.delete(k(nova).pending("synthetic"))
    pipe = r.pipeline(transaction=False)
    for i in range(300):
        pipe.zadd(k(nova).pending("synthetic"), {f"{job}:{i}": i + 1})
    pipe.execute()
    res, _ = assert_bounded(meter, lambda: call(nova, "claim", keys, claim_args(
        nova, "w", k=limits.MAX_CLAIM_K, ids=[f"b{i}" for i in range(limits.MAX_CLAIM_K)])))
    assert res[0] in (0, 2)
    # the retried-claim path with a held set of forged members
    fill_set(r, k(nova).held("w"), HUGE_SET, prefix=f"{job}:")
    last = r.hget(k(nova).worker("w"), "last_claim") or "a0"
    assert_bounded(meter, lambda: call(nova, "claim", keys,
                                       claim_args(nova, "w", k=1, ids=[last])))


def test_claim_under_a_deadline_weighs_a_bounded_priced_fleet(nova, meter):
    """A job with a deadline and a budget (both forged past what enqueue allows, then sane):
    the policy reads the price of at most MAX_FLEET_VISIT other workers, every price forged."""
    r = nova.redis
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(300)],
                       deadline="1h", budget=1.0)
    now_ms = nova.server_time_ms()
    pipe = r.pipeline(transaction=False)
    for i in range(400):
        wid = f"v{i}"
        pipe.hset(k(nova).worker(wid), mapping={
            "id": wid, "claim_ms": now_ms, "n:synthetic": 5, "ema:synthetic": 1.0,
            "price": ("nan", "-1", "1e308", "x" * 1000)[i % 4]})
        pipe.zadd(k(nova).app_fleet("synthetic"), {wid: 1.0 + i / 1000})
    pipe.execute()
    nova.register_worker("w", {"name": "w", "price": 2.0}, ["synthetic"])
    r.hset(k(nova).worker("w"), mapping={"ema:synthetic": 1.0, "n:synthetic": 5})
    keys = claim_keys(nova, "w")
    for deadline, budget in (("1e300", "-5"), ("x", "inf"), (str(now_ms + 3_600_000), "1")):
        r.hset(k(nova).job(job), mapping={"deadline_ms": deadline, "budget": budget})
        args = claim_args(nova, "w", k=limits.MAX_CLAIM_K,
                          ids=[f"{deadline[:1]}{i}" for i in range(limits.MAX_CLAIM_K)])
        res, inner = assert_bounded(meter, lambda a=args: call(nova, "claim", keys, a))
        assert res[0] in (0, 2) and inner <= 3 * 256 + 200


def test_complete_claim_with_a_huge_argv(nova, meter):
    seed_job(nova, 2)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    [lease] = nova.claim("w", "synthetic").leases
    keys = [k(nova).task(lease.task_id), k(nova).job(lease.job_id),
            *nova.worker.commit_keys("w", "synthetic"), *[claim_keys(nova, "w")[i] for i in (0, 3, 4, 10)]]
    key = f"jobs/{lease.job_id}/results/{lease.index:05d}-g1-{lease.attempt_id}.png"
    commit = [nova.prefix, "w", lease.task_id, 1, lease.attempt_id, key, 0.1, 1, 0.3, 1000, "{}",
              3, 300_000, ""]
    argv = [*commit, "synthetic", 1, 10_000, 5_000, 100, 120_000, 10,
            *[f"i{i}" for i in range(20_000)]]
    _, inner = assert_bounded(meter, lambda: call(nova, "complete_claim", keys, argv),
                              expect_bad=True, timed=False)
    assert inner == 0
    assert nova.task(lease.task_id).state == "leased"  # the commit did not happen either
    argv = [*commit, "synthetic", BIG, 10_000, 5_000, 100, 120_000, 10, "i1"]
    assert_bounded(meter, lambda: call(nova, "complete_claim", keys, argv), expect_bad=True)
    assert nova.task(lease.task_id).state == "leased"


def test_complete_batch_with_a_huge_argv_or_count(nova, meter):
    seed_job(nova, 2)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    [lease] = nova.claim("w", "synthetic").leases
    keys = [k(nova).worker("w"), k(nova).held("w"), k(nova).leases(), k(nova).alive(),
            k(nova).inflight(), k(nova).failed(), k(nova).finished(), k(nova).events(),
            *nova.worker.next_claim_keys("synthetic")]
    key = f"jobs/{lease.job_id}/results/{lease.index:05d}-g1-{lease.attempt_id}.png"
    head = [nova.prefix, "w", 0.3, 1000, 3, 300_000]
    one = [lease.task_id, 1, lease.attempt_id, key, 0.1, 1, "{}", ""]
    for n in (BIG, limits.MAX_CLAIM_K + 1, 2, 0):  # past the cap, past what ARGV holds
        argv = [*head, n, *one]
        _, inner = assert_bounded(meter, lambda a=argv: call(nova, "complete_batch", keys, a),
                                  expect_bad=True)
        assert inner == 0
    many = [*head, limits.MAX_CLAIM_K, *(one * limits.MAX_CLAIM_K), "synthetic", 1, 10_000,
            5_000, 100, 120_000, 10]
    _, inner = assert_bounded(meter, lambda: call(nova, "complete_batch", keys,
                                                  [*many, *[f"i{i}" for i in range(20_000)]]),
                              expect_bad=True, timed=False)
    assert inner == 0
    assert nova.task(lease.task_id).state == "leased"  # nothing was committed
    # 64 commits of one task (the first holds, the others replay it) and a forged held set
    fill_set(nova.redis, k(nova).held("w"), HUGE_SET, prefix=f"{lease.job_id}:")
    res, _ = assert_bounded(meter, lambda: call(nova, "complete_batch", keys, [*many, "i1"]))
    assert res[0] == [0] + [1] * (limits.MAX_CLAIM_K - 1)
    assert nova.task(lease.task_id).state == "done"


def test_renew_with_huge_argv_and_forged_leases(nova, meter):
    seed_job(nova, 1)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    keys = [k(nova).worker("w"), k(nova).leases(), k(nova).alive(), k(nova).inflight(),
            k(nova).failed(), k(nova).finished(), k(nova).meta(), k(nova).events()]
    head = [nova.prefix, "w", 10_000, 5_000, 1000, 100]
    triples = [x for i in range(30_000) for x in (f"j:{i}", "1", "a")]
    res, inner = assert_bounded(meter, lambda: call(nova, "renew", keys, head + triples),
                                expect_bad=True, timed=False)
    assert inner == 0
    at_cap = triples[:3 * limits.MAX_RENEW_LEASES]
    res, _ = assert_bounded(meter, lambda: call(nova, "renew", keys, head + at_cap))
    assert res[0] == 0 and len(res[2]) == limits.MAX_RENEW_LEASES
    for bad in ([*head[:2], -5, *head[3:]], [*head[:5], BIG], [*head[:4], -1, head[5]]):
        assert_bounded(meter, lambda b=bad: call(nova, "renew", keys, b), expect_bad=True)


def test_complete_and_fail_with_forged_fields(nova, meter):
    r = nova.redis
    seed_job(nova, 2)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    r.hset(k(nova).worker("w"), mapping={"ema:synthetic": 1.0, "n:synthetic": 5})
    a, b = nova.claim("w", "synthetic", k=2, attempt_ids=["x1", "x2"]).leases
    r.hset(k(nova).task(a.task_id), "oom", "v," * 32_768)
    fill_set(r, k(nova).held("w"), HUGE_SET, prefix="zz:")
    fail_keys = [k(nova).task(a.task_id), k(nova).job(a.job_id), k(nova).worker("w"),
                 k(nova).held("w"), k(nova).pending("synthetic"), k(nova).leases(),
                 k(nova).inflight(), k(nova).failed(), k(nova).finished(), k(nova).events()]
    res, _ = assert_bounded(meter, lambda: call(nova, "fail", fail_keys, [
        nova.prefix, "w", a.task_id, a.lease_gen, a.attempt_id, "oom", "e" * 1_000_000, 1000,
        5, 2000, 300_000, 1]))
    assert res[0] == 0 and len(r.hget(k(nova).task(a.task_id), "error")) == limits.MAX_TEXT_BYTES
    assert len(r.hget(k(nova).task(a.task_id), "oom")) == 65_536  # past the cap: not grown
    r.hset(k(nova).worker("w"), mapping={"ema:synthetic": "nan", "tasks_done": "1e308"})
    key = f"jobs/{b.job_id}/results/{b.index:05d}-g{b.lease_gen}-{b.attempt_id}.png"
    keys = [k(nova).task(b.task_id), k(nova).job(b.job_id), *nova.worker.commit_keys("w", "synthetic")]
    res, _ = assert_bounded(meter, lambda: call(nova, "complete", keys, [
        nova.prefix, "w", b.task_id, b.lease_gen, b.attempt_id, key, 0.5, 1, 0.3, 1000, "{}",
        3, 300_000, ""]))
    assert res[0] == 0 and float(r.hget(k(nova).worker("w"), "ema:synthetic")) == 0.5


def test_register_with_huge_and_forged_json(nova, meter):
    keys = [k(nova).worker("w"), k(nova).workers(), k(nova).alive(), k(nova).events(),
            k(nova).meta(), k(nova).idents()]

    def register(fields, apps, bench="{}", ttl=10_000):
        return lambda: call(nova, "register", keys, [nova.prefix, "w", ttl, 1000, fields, apps, bench])

    many = json.dumps({f"f{i}": "x" for i in range(100_000)})
    for attack in (register(many, "synthetic"),                                # 1.4 MB of fields
                   register(json.dumps({f"f{i}": "x" for i in range(65)}), "synthetic"),
                   register(json.dumps({"state": "idle"}), "synthetic"),      # a script's field
                   register(json.dumps({"name": {"nested": [1, 2]}}), "synthetic"),
                   register("[" * 100_000, "synthetic"),                      # cjson nesting
                   register("{}", ",".join(f"app{i}" for i in range(100_000))),
                   register("{}", ",".join(f"app{i}" for i in range(65))),
                   register("{}", "bad app"),
                   register("{}", "synthetic", json.dumps({"synthetic": {"bench_s": -1}})),
                   register("{}", "synthetic", json.dumps({"synthetic": {"bench_s": 1e300}})),
                   register("{}", "synthetic", ttl=-1),
                   register("{}", "synthetic", ttl=BIG)):
        assert_bounded(meter, attack, expect_bad=True)
    assert not nova.redis.exists(k(nova).worker("w"))
    ok = register(json.dumps({"name": "w", "pid": "1"}), ",".join(f"a{i}" for i in range(64)),
                  json.dumps({f"a{i}": {"bench_s": 0.1} for i in range(64)}))
    res, _ = assert_bounded(meter, ok)
    assert res[0] == 0 and nova.redis.zcard(k(nova).app_fleet("a63")) == 1


def test_loading_and_loaded_with_huge_and_forged_input(nova, meter):
    """No loop in either: a forged name or warm field, or huge arguments, cost one call."""
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    nova.redis.hset(k(nova).worker("w"), mapping={"name": "n" * 1_000_000,
                                                  "warm:synthetic": "x" * 100_000})
    keys = [k(nova).worker("w"), k(nova).alive(), k(nova).events(), k(nova).meta()]

    def loading(model="m", action="start", wid="w", maxlen=1000):
        own = [k(nova).worker(wid), *keys[1:]]
        return lambda: call(nova, "loading", own,
                            [nova.prefix, wid, "synthetic", model, action, maxlen])

    for attack in (loading(model="m" * 1_000_000), loading(model="bad model"),
                   loading(action="x" * 100_000), loading(maxlen=BIG), loading(wid="w" * 200)):
        assert_bounded(meter, attack, expect_bad=True)
    assert not nova.redis.hexists(k(nova).worker("w"), "loading:synthetic")
    res, _ = assert_bounded(meter, loading())
    assert res[0] == 0 and nova.redis.hexists(k(nova).worker("w"), "loading:synthetic")
    entry = nova.redis.xrevrange(k(nova).events(), count=1)[0][1]
    assert entry["type"] == "model_loading" and len(entry["name"]) == 200  # cut, not copied
    res, _ = assert_bounded(meter, lambda: call(nova, "loaded", keys, [
        nova.prefix, "w", "synthetic", "m", 1.5, 0.3, 1000]))
    assert res[0] == 0 and not nova.redis.hexists(k(nova).worker("w"), "loading:synthetic")


def test_deregister_with_huge_held_set_and_apps_field(nova, meter):
    r = nova.redis
    job = seed_job(nova, 2)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    [lease] = nova.claim("w", "synthetic").leases
    fill_set(r, k(nova).held("w"), HUGE_SET, prefix=f"{job}:9")
    r.hset(k(nova).worker("w"), "apps", ",".join(f"a{i}" for i in range(HUGE_SET)))
    keys = [k(nova).worker("w"), k(nova).held("w"), k(nova).leases(), k(nova).alive(),
            k(nova).inflight(), k(nova).failed(), k(nova).finished(), k(nova).events(),
            k(nova).meta()]
    res, _ = assert_bounded(meter, lambda: call(nova, "deregister", keys, [nova.prefix, "w", 1000]))
    assert res[0] == 0
    assert_bounded(meter, lambda: call(nova, "deregister", keys, [nova.prefix, "w", -1]),
                   expect_bad=True)
    assert nova.task(lease.task_id).state in ("pending", "leased")  # released if it was sampled


def test_retry_and_enqueue_with_forged_and_huge_input(nova, meter):
    r = nova.redis
    job = seed_job(nova, 1)
    r.hset(k(nova).job(job), mapping={"priority": "nan", "seq0": "1e300"})
    r.hset(k(nova).task(f"{job}:0"), "state", "failed")
    keys = [k(nova).task(f"{job}:0"), k(nova).job(job), k(nova).pending("synthetic"),
            k(nova).failed(), k(nova).finished(), k(nova).events(), k(nova).meta()]
    res, _ = assert_bounded(meter, lambda: call(nova, "retry", keys, [nova.prefix, f"{job}:0", 1000]))
    assert res[0] == 0
    enq = [k(nova).job("big"), k(nova).jobs(), k(nova).staging(), k(nova).stage("big"),
           k(nova).pending("synthetic"), k(nova).seq(), k(nova).events(), k(nova).apps(),
           k(nova).meta()]
    meta = {"app": "synthetic", "params": "{}", "priority": 0, "max_attempts": 3, "total": 1}
    pairs = [x for i in range(20_000) for x in (f"t{i}", "1")]
    _, inner = assert_bounded(meter, lambda: call(
        nova, "enqueue", enq, [nova.prefix, "big", 1, 1, json.dumps(meta), 0, 1000, *pairs]),
        expect_bad=True, timed=False)
    assert inner == 0
    for bad_meta, tasks in (({**meta, "total": BIG}, ["a", "1"]),
                            ({**meta, "max_attempts": BIG}, ["a", "1"]),
                            ({**meta, "params": "x" * 70_000}, ["a", "1"]),
                            (meta, ["a", "1e300"]), (meta, ["a", "nan"])):
        assert_bounded(meter, lambda m=bad_meta, t=tasks: call(
            nova, "enqueue", enq, [nova.prefix, "big", 1, 1, json.dumps(m), 0, 1000, *t]),
            expect_bad=True)
    assert not r.exists(k(nova).job("big"))


def test_publish_of_a_huge_stage_set_moves_a_chunk_per_call(nova, meter):
    r = nova.redis
    # a queue longer than MAX_VISIT: neither the O(1) RENAME nor the queue joining the job
    seed_job(nova, limits.MAX_VISIT + 1)
    enq = [k(nova).job("big"), k(nova).jobs(), k(nova).staging(), k(nova).stage("big"),
           k(nova).pending("synthetic"), k(nova).seq(), k(nova).events(), k(nova).apps(),
           k(nova).meta()]
    meta = json.dumps({"app": "synthetic", "params": "{}", "priority": 0, "max_attempts": 3,
                       "total": 2})
    call(nova, "enqueue", enq, [nova.prefix, "big", 1, 0, meta, 0, 1000, "a", "1"])
    fill_zset(r, k(nova).stage("big"), HUGE_SET, lambda i: f"big:{i + 1}", lambda i: i + 10)
    res, _ = assert_bounded(meter, lambda: call(
        nova, "enqueue", enq, [nova.prefix, "big", 0, 1, "", 1, 1000, "b", "1"]))
    assert res[0] == 0 and res[2] == HUGE_SET + 1 - limits.MAX_VISIT
    # while it is published, claims skip its tasks
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    claimed = nova.claim("w", "synthetic", k=5).leases
    assert all(lease.job_id != "big" for lease in claimed)


def test_publish_of_a_huge_stage_set_onto_a_short_queue_is_one_call(nova, meter):
    r = nova.redis
    seed_job(nova, limits.MAX_VISIT)  # the longest queue that joins the stage set
    enq = [k(nova).job("big"), k(nova).jobs(), k(nova).staging(), k(nova).stage("big"),
           k(nova).pending("synthetic"), k(nova).seq(), k(nova).events(), k(nova).apps(),
           k(nova).meta()]
    meta = json.dumps({"app": "synthetic", "params": "{}", "priority": 0, "max_attempts": 3,
                       "total": HUGE_SET + 2})
    call(nova, "enqueue", enq, [nova.prefix, "big", 1, 0, meta, 0, 1000, "a", "1"])
    fill_zset(r, k(nova).stage("big"), HUGE_SET, lambda i: f"big:{i + 1}", lambda i: 1e16 + i)
    r.hset(k(nova).job("big"), "staged", HUGE_SET + 1)
    res, _ = assert_bounded(meter, lambda: call(
        nova, "enqueue", enq, [nova.prefix, "big", 0, 1, "", HUGE_SET + 1, 1000, "b", "1"]))
    assert res == [0, HUGE_SET + 2, 0]
    assert r.zcard(k(nova).pending("synthetic")) == limits.MAX_VISIT + HUGE_SET + 2
    assert not r.exists(k(nova).stage("big"))


# -- quarantine, blame and backups: lists and sets a worker can forge ------------------------

def test_quarantine_blame_and_refunds_with_forged_lists(nova, meter):
    """The worker role may HSET its own streak (100,000 task ids) and a task's failed_on
    (100,000 worker ids); quarantining, blaming and refunding stay bounded."""
    r = nova.redis
    job = seed_job(nova, 3)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    forged_tids = ",".join(f"{job}:{i % 3}" for i in range(100_000))
    forged_wids = ",".join(f"v{i}" for i in range(100_000))
    for i in range(100):  # workers the forged list names, each holding the task in its streak
        r.hset(k(nova).worker(f"v{i}"), mapping={"id": f"v{i}", "streak_tids": f"{job}:0"})
    r.hset(k(nova).worker("w"), mapping={"streak_tids": forged_tids, "apps": "synthetic," * 10_000})
    keys = [k(nova).worker("w"), k(nova).alive(), k(nova).failed(), k(nova).finished(),
            k(nova).events(), k(nova).meta()]
    res, _ = assert_bounded(meter, lambda: call(nova, "quarantine", keys, [
        nova.prefix, "w", "quarantine", "x" * 1_000_000, BIG, 1000]), expect_bad=True)
    res, _ = assert_bounded(meter, lambda: call(nova, "quarantine", keys, [
        nova.prefix, "w", "quarantine", "x" * 100_000, 60_000, 1000]), expect_bad=False)
    assert len(r.hget(k(nova).worker("w"), "quarantine_reason")) <= 520
    assert_bounded(meter, lambda: call(nova, "quarantine", keys, [
        nova.prefix, "w", "release", "", 60_000, 1000]), expect_bad=False)
    nova.register_worker("c", {"name": "c"}, ["synthetic"])
    [lease] = nova.claim("c", "synthetic").leases
    r.hset(k(nova).task(lease.task_id), "failed_on", forged_wids)
    key = f"jobs/{lease.job_id}/results/{lease.index:05d}-g{lease.lease_gen}-{lease.attempt_id}.png"
    ckeys = [k(nova).task(lease.task_id), k(nova).job(lease.job_id),
             *nova.worker.commit_keys("c", "synthetic")]
    res, _ = assert_bounded(meter, lambda: call(nova, "complete", ckeys, [
        nova.prefix, "c", lease.task_id, lease.lease_gen, lease.attempt_id, key, 0.5, 1, 0.3,
        1000, "{}", 1, 60_000, ""]), expect_bad=False)
    assert res[0] == 0
    # a forged failed_on makes left_to_others weigh at most MAX_LISTED ids per candidate
    r.hset(k(nova).task(f"{job}:1"), "failed_on", "c," + forged_wids)
    fill_set(r, k(nova).app_workers("synthetic"), HUGE_SET, prefix="v")
    assert_bounded(meter, lambda: call(nova, "claim", claim_keys(nova, "c"),
                                       claim_args(nova, "c", k=2)), expect_bad=False)


def test_the_backup_search_with_a_huge_lease_set(nova, meter):
    """Forged leases (50,000 members, many of real leased tasks long overdue): an idle
    worker's claim looks at MAX_BACKUP_SCAN of them at most."""
    r = nova.redis
    nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(300)])
    nova.register_worker("slow", {"name": "slow"}, ["synthetic"])
    r.hset(k(nova).worker("slow"), mapping={"ema:synthetic": 100.0, "n:synthetic": 1})
    leases = []
    for _ in range(5):
        leases += nova.claim("slow", "synthetic", k=64).leases
    assert len(leases) >= 256
    pipe = r.pipeline(transaction=False)
    for lease in leases:
        pipe.hset(k(nova).task(lease.task_id), "claimed_ms", 1)
    pipe.execute()
    fill_zset(r, k(nova).leases(), HUGE_SET, lambda i: f"forged{i}:0", lambda i: 10**15)
    nova.register_worker("idle", {"name": "idle"}, ["synthetic"])
    r.hset(k(nova).worker("idle"), mapping={"ema:synthetic": 0.01, "n:synthetic": 1})
    r.delete(k(nova).pending("synthetic"))
    res, inner = assert_bounded(meter, lambda: call(nova, "claim", claim_keys(nova, "idle"),
                                                    claim_args(nova, "idle")))
    assert res[0] == 0 and json.loads(res[2])[0]["backup"] is True
    assert inner < 3 * limits.MAX_CLAIM_K + 200


def forged_marks(n_bytes: int = limits.MAX_MARKS_BYTES) -> str:
    """A ``cannot_run`` field as costly to decode as the scripts allow: many small objects."""
    return ("[" + ",".join(['{"a":1}'] * (n_bytes // 8)) + "]")[:n_bytes - 1] + "]"


def test_claims_and_prepare_failures_with_forged_cannot_run_fields(nova, meter):
    """The worker role may HSET any worker's ``cannot_run``: a claim decodes its own field
    and at most MAX_MARKS_DECODED of the fleet's (the slow path weighs 256 workers, each
    with a forged field), and a prepare failure decodes its worker's once."""
    r = nova.redis
    assert len(forged_marks()) == limits.MAX_MARKS_BYTES
    job = seed_job(nova, 3)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    r.hset(k(nova).worker("w"), mapping={"ema:synthetic": 100.0, "n:synthetic": 5,
                                         "cannot_run": forged_marks()})
    r.zadd(k(nova).app_fleet("synthetic"), {"w": 100.0})
    pipe = r.pipeline(transaction=False)
    now_ms = nova.server_time_ms()
    for i in range(300):  # faster workers that claim: the tail is theirs, so the claim weighs
        pipe.hset(k(nova).worker(f"f{i}"), mapping={  # them all
            "id": f"f{i}", "cannot_run": forged_marks(), "claim_ms": now_ms, "n:synthetic": 5})
        pipe.zadd(k(nova).app_fleet("synthetic"), {f"f{i}": 1.0})
    pipe.execute()
    res, _ = assert_bounded(meter, lambda: call(nova, "claim", claim_keys(nova, "w"),
                                                claim_args(nova, "w")))
    assert res[0] == 2  # told to wait for the faster workers: nothing claimed
    r.delete(k(nova).app_fleet("synthetic"))
    [lease] = nova.claim("w", "synthetic").leases
    fail_keys = [k(nova).task(lease.task_id), k(nova).job(job), k(nova).worker("w"),
                 k(nova).held("w"), k(nova).pending("synthetic"), k(nova).leases(),
                 k(nova).inflight(), k(nova).failed(), k(nova).finished(), k(nova).events()]
    r.hset(k(nova).worker("w"), "cannot_run", forged_marks())
    res, _ = assert_bounded(meter, lambda: call(nova, "fail", fail_keys, [
        nova.prefix, "w", lease.task_id, lease.lease_gen, lease.attempt_id, "prepare",
        "\x1b" * 1_000_000, 1000, 5, 2000, 300_000, 1, 60_000]))
    assert res[0] == 0
    [mark] = json.loads(r.hget(k(nova).worker("w"), "cannot_run"))
    assert mark["reason"] == " " * limits.MAX_REASON_BYTES  # control characters as spaces


# -- the retention sweep and purge: forged indexes, huge jobs --------------------------------

def expire_call(nova, budget=2000, retention_s=0):
    keys = [k(nova).expiring(), k(nova).departed(), k(nova).expired(), k(nova).jobs(),
            k(nova).finished(), k(nova).failed(), k(nova).workers(), k(nova).alive(),
            k(nova).meta(), k(nova).events()]
    return lambda: call(nova, "expire", keys, [nova.prefix, budget, retention_s, 1000])


def test_expire_with_forged_indexes_and_a_huge_finished_job(nova, meter):
    r = nova.redis
    job = nova.enqueue("synthetic", [TaskSpec("t", 1.0)] * 25_000)
    nova.cancel(job)  # finished (cancelled): in the retention index
    r.hset(k(nova).job(job), mapping={"total": BIG, "purge_next": BIG})
    # junk a worker credential may ZADD: non-ids, jobs that do not exist, due long ago
    fill_zset(r, k(nova).expiring(), HUGE_SET, lambda i: f"junk {i}" if i % 2 else f"nojob{i}",
              lambda i: 1)
    fill_zset(r, k(nova).departed(), HUGE_SET, lambda i: f"w{i}", lambda i: 1)
    fill_zset(r, k(nova).expired(), limits.MAX_TOMBSTONES + HUGE_SET, lambda i: f"gone{i}",
              lambda i: 10**15)  # recent, but past the cap
    r.zadd(k(nova).expiring(), {job: 1})
    calls = 0
    while r.exists(k(nova).job(job)) or r.zcard(k(nova).expiring()):
        (code, *_), _ = assert_bounded(meter, expire_call(nova))
        assert code == 0
        calls += 1
        assert calls < 400
    assert not r.exists(k(nova).task(f"{job}:0")) and not r.exists(k(nova).task(f"{job}:24999"))
    while r.zcard(k(nova).departed()):
        assert_bounded(meter, expire_call(nova))
    assert r.zcard(k(nova).expired()) <= limits.MAX_TOMBSTONES + limits.MAX_VISIT
    for bad in ((BIG, 0), (0, 0), (10, -1), (10, BIG)):
        assert_bounded(meter, expire_call(nova, *bad), expect_bad=True)


def test_purge_of_a_huge_job_deletes_a_chunk_per_call(nova, meter):
    r = nova.redis
    job = nova.enqueue("synthetic", [TaskSpec("t", 1.0)] * 5_000)
    keys = [k(nova).job(job), k(nova).expiring(), k(nova).expired(), k(nova).jobs(),
            k(nova).finished(), k(nova).failed(), k(nova).meta(), k(nova).events()]
    res, _ = assert_bounded(meter, lambda: call(nova, "purge", keys,
                                                [nova.prefix, job, 2000, 1000]))
    assert res == [-11, "queued"]  # not finished: refused, nothing deleted
    nova.cancel(job)
    r.hset(k(nova).job(job), "total", BIG)
    left, calls = 1, 0
    while left:
        (code, n, left), _ = assert_bounded(meter, lambda: call(nova, "purge", keys,
                                                               [nova.prefix, job, 2000, 1000]))
        assert code == 0 and n <= 2000
        calls += 1
    assert calls == 3 and not r.exists(k(nova).job(job))
    assert_bounded(meter, lambda: call(nova, "purge", keys, [nova.prefix, job, BIG, 1000]),
                   expect_bad=True)


def test_repair_with_a_huge_job_and_lease_set(nova, meter):
    """doctor's repair script: a recount visits MAX_VISIT tasks per call, inflight is counted
    only over a lease set of at most MAX_VISIT members, forged ARGV is refused."""
    r = nova.redis
    job = nova.enqueue("synthetic", [TaskSpec("t", 1.0)] * 5_000)
    keys = [k(nova).leases(), k(nova).inflight(), k(nova).failed(), k(nova).finished(),
            k(nova).jobs(), k(nova).staging(), k(nova).expiring(), k(nova).departed(),
            k(nova).alive(), k(nova).workers(), k(nova).meta(), k(nova).events()]
    head = [nova.prefix, 1000, "fix"]
    r.hset(k(nova).job(job), mapping={"total": BIG, "pending": BIG})
    nxt, counts, calls = 0, [0] * 5, 0
    while nxt >= 0:
        res, _ = assert_bounded(meter, lambda n=nxt, c=counts: call(
            nova, "repair", keys, [*head, "recount", job, n, *c]), expect_bad=False)
        nxt, counts, calls = int(res[2]), res[3:8], calls + 1
    assert calls == 3 and r.hget(k(nova).job(job), "pending") == "5000"
    fill_zset(r, k(nova).leases(), limits.MAX_VISIT, lambda i: f"{job}:{i}", lambda i: 1)
    res, _ = assert_bounded(meter, lambda: call(nova, "repair", keys,
                                                [*head, "inflight", "synthetic"]))
    assert res[1] == ""  # those tasks are pending, not leased: inflight stays 0
    fill_zset(r, k(nova).leases(), HUGE_SET, lambda i: f"x{i}:0", lambda i: 1)
    res, _ = assert_bounded(meter, lambda: call(nova, "repair", keys,
                                                [*head, "inflight", "synthetic"]))
    assert res[1].startswith("not counted")
    for bad in (["recount", job, -1, 0, 0, 0, 0, 0], ["recount", job, 0, BIG, 0, 0, 0, 0],
                ["member", "held", "w", "x" * 100_000], ["nope", job], ["task", "no id"]):
        assert_bounded(meter, lambda b=bad: call(nova, "repair", keys, [*head, *b]),
                       expect_bad=True)
