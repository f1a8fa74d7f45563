"""One commit writer: a batch of commits (complete_batch-12) and the same commits made one by
one (complete-11) answer the same and leave the same state and events, across the cases a
commit meets: stale (released, superseded lease_gen or attempt), a cancelled job, a backup
attempt running beside it, a replay, an unknown task, earlier failures to blame, a
quarantined worker, cold runs, and a worker that is not trusted (with no agreement yet, each
of its results is held for verification: docs/SECURITY.md). Two namespaces are set up alike;
what differs by time alone (``*_ms`` fields, timed scores, decayed usage, a loser's run time)
is left out."""

from __future__ import annotations

import dataclasses
import uuid

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from novatests.leases import join, rkey
from novatests.seed import set_speed

from nova_queue import NovaClient, TaskSpec
from nova_queue.client import BatchCommit
from nova_queue.errors import NovaError

CASES = ["plain", "cold", "released", "new_gen", "new_attempt", "replay", "unknown", "blamed"]
#: Time-valued sets: their members count, their scores do not.
TIMED = {"leases", "alive", "finished", "failed", "expiring", "departed", "jobs", "workers",
         "verify:synthetic", "unverified:w1"}


@dataclasses.dataclass(frozen=True)
class Scenario:
    cases: list[str]  # one per task of the two jobs, in claim order
    split: int  # tasks of job ja; the rest are jb's
    backup: int | None  # the task a second worker backs up (before the commits)
    cancel_jb: bool
    quarantined: bool
    untrusted: bool = False


@st.composite
def scenarios(draw) -> Scenario:
    cases = draw(st.lists(st.sampled_from(CASES), min_size=1, max_size=6))
    split = draw(st.integers(1, len(cases)))
    backup = draw(st.none() | st.integers(0, len(cases) - 1))
    return Scenario(cases, split, backup, draw(st.booleans()), draw(st.booleans()),
                    draw(st.booleans()))


def setup(client: NovaClient, sc: Scenario) -> list[tuple]:
    """Jobs ja and jb, worker w1 holding all their tasks, and the scenario's changes; returns
    the commits to make, in order: (lease, result key, run_s, warm)."""
    leases = claim_all(client, sc)
    if sc.untrusted:  # a verifier is live: w1's results are held for it
        client.register_worker("v1", {"name": "v1", "verifier": "1"}, ["synthetic"])
    if sc.backup is not None:
        back_up(client, leases[sc.backup])
    change_tasks(client, sc, leases)
    if sc.cancel_jb and len(sc.cases) > sc.split:
        client.cancel("jb")
    if sc.quarantined:
        client.set_quarantine("w1", True, reason="test")
    return commits_for(sc, leases)


def claim_all(client: NovaClient, sc: Scenario) -> list:
    n = len(sc.cases)
    client.enqueue("synthetic", [TaskSpec(f"a{i}", 1.0) for i in range(sc.split)], job_id="ja")
    if n > sc.split:
        client.enqueue("synthetic", [TaskSpec(f"b{i}", 2.0) for i in range(n - sc.split)],
                       job_id="jb")
    join(client, "w1", **({"trust": "new"} if sc.untrusted else {}))
    set_speed(client, "w1", "synthetic", 0.01)
    leases = client.claim("w1", "synthetic", n, attempt_ids=[f"at{i}" for i in range(n)]).leases
    assert len(leases) == n
    return leases


def back_up(client: NovaClient, lease) -> None:
    """The task is long overdue: an idle, slower worker backs it up."""
    client.redis.hset(client.keys.task(lease.task_id), "claimed_ms", 1)
    join(client, "w2")
    set_speed(client, "w2", "synthetic", 10.0)
    [b] = client.claim("w2", "synthetic", attempt_ids=["bk"]).leases
    assert b.backup and b.task_id == lease.task_id


def change_tasks(client: NovaClient, sc: Scenario, leases: list) -> None:
    for lease, case in zip(leases, sc.cases, strict=True):
        if case == "blamed":  # w3 failed it before, in its current streak
            client.register_worker("w3", {"name": "w3"}, ["synthetic"])
            client.redis.hset(client.keys.task(lease.task_id), "failed_on", "w3")
            client.redis.hset(client.keys.worker("w3"), mapping={
                "fail_streak": 1, "streak_tids": lease.task_id})
        elif case == "released":  # its lease ran out and was reaped: pending again
            client.redis.zadd(client.keys.leases(), {lease.task_id: 1})
            client.redis.hset(client.keys.task(lease.task_id), "deadline_ms", 1)
    if "released" in sc.cases:
        client.reap()


def commits_for(sc: Scenario, leases: list) -> list[tuple]:
    commits = []
    for lease, case in zip(leases, sc.cases, strict=True):
        if case == "new_gen":
            lease = dataclasses.replace(lease, lease_gen=lease.lease_gen + 1)
        elif case == "new_attempt":
            lease = dataclasses.replace(lease, attempt_id=lease.attempt_id + "x")
        elif case == "unknown":
            lease = dataclasses.replace(lease, task_id=f"{lease.job_id}:99", index=99)
        commits.append((lease, rkey(lease), 0.25 + 0.5 * lease.index, case != "cold"))
        if case == "replay":
            commits.append(commits[-1])
    return commits


def answer(result) -> str:
    if isinstance(result, NovaError):
        return type(result).__name__
    return "replayed" if result.replayed else f"ok finished={result.job_finished}"


def one_by_one(client: NovaClient, commits: list[tuple]) -> list[str]:
    out = []
    for lease, key, run_s, warm in commits:
        try:
            out.append(answer(client.complete("w1", lease, key, run_s=run_s, warm=warm)))
        except NovaError as exc:
            out.append(answer(exc))
    return out


def batched(client: NovaClient, commits: list[tuple]) -> list[str]:
    res = client.complete_batch("w1", [BatchCommit(*c) for c in commits])
    return [answer(r) for r in res.results]


def timeless(fields: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in fields.items() if not k.endswith("_ms") and k != "loser_run_s"}


def state(client: NovaClient) -> dict:
    """Every key of the namespace but the event stream, without what time alone decides."""
    r, out = client.redis, {}
    for key in r.scan_iter(match=client.prefix + "*", count=1000):
        name, kind = key[len(client.prefix):], r.type(key)
        if kind == "hash":
            value = timeless(r.hgetall(key))
            out[name] = {k: v for k, v in value.items()
                         if name != "usage" or not k.startswith("f:")}  # decayed by time
        elif kind == "zset":
            members = r.zrange(key, 0, -1, withscores=True)
            out[name] = sorted(m for m, _ in members) if name in TIMED else members
        elif kind == "set":
            out[name] = sorted(r.smembers(key))
        elif kind == "string":
            out[name] = r.get(key)
    return out


def events(client: NovaClient) -> list:
    return [(e.type, timeless(e.fields)) for e in client.events(count=100_000)]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(sc=scenarios())
def test_a_batch_answers_and_writes_as_single_commits_do(redis_url, sc):
    seen = []
    for commit_all in (one_by_one, batched):
        client = NovaClient.from_url(redis_url, namespace=f"eq-{uuid.uuid4().hex[:10]}")
        try:
            answers = commit_all(client, setup(client, sc))
            seen.append((answers, state(client), events(client)))
        finally:
            for key in client.redis.scan_iter(match=client.prefix + "*", count=1000):
                client.redis.delete(key)
            client.close()
    (answers, st_one, ev_one), (b_answers, st_batch, ev_batch) = seen
    assert b_answers == answers
    assert st_batch == st_one
    assert ev_batch == ev_one
