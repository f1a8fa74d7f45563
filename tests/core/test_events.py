"""One table of event types (nova_queue/events.py): every type a script emits is in it with
exactly the fields the script writes, the gallery's presenter has a line for each, and a
real run that produces every type writes exactly those fields."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from novatests.seed import departed_long_ago, expire_worker

from nova_queue import TaskSpec, doctor
from nova_queue.errors import JobCancelledError
from nova_queue.events import EVENT_TYPES, PACKED_TYPES
from nova_queue.keys import result_key
from nova_queue.models import Event
from nova_queue.web import present

FOLDER = resources.files("nova_queue.lua")
SOURCES = {name: (FOLDER / name).read_text()
           for name in sorted(e.name for e in FOLDER.iterdir() if e.name.endswith(".lua"))}
SOURCES.update({f"includes/{e.name}": e.read_text()
                for e in sorted((FOLDER / "includes").iterdir(), key=lambda e: e.name)
                if e.name.endswith(".lua")})

_STRING_OR_COMMENT = re.compile(
    r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")|--\[\[.*?\]\]|--[^\n]*""", re.DOTALL)


def without_comments(lua: str) -> str:
    return _STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", lua)


def split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets and string literals."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            i += 2 if ch == "\\" else 1
            quote = "" if ch == quote else quote
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i].strip())
            start = i = i + len(sep)
            continue
        i += 1
    parts.append(text[start:].strip())
    return parts


def emit_calls(lua: str) -> list[tuple[list[str], list[str]]]:
    """Each ``emit(ctx, type, name, value, ...)`` call: (its possible types, its field names).
    The type is a string literal or ``cond and 'a' or cond and 'b' or 'c'``; every field
    name is a string literal. Anything else fails: the table could not be checked."""
    code, out = without_comments(lua), []
    for m in re.finditer(r"(?<!function )\bemit\(", code):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        args = split_top(code[m.end():i - 1], ",")
        types = []
        for alternative in split_top(args[1], " or "):
            t = re.fullmatch(r"(?:.+\s+and\s+)?'([a-z_]+)'", alternative, re.DOTALL)
            assert t, f"emit type is not a literal choice: {args[1]}"
            types.append(t.group(1))
        names = args[2::2]
        assert len(args) % 2 == 0 and all(re.fullmatch(r"'[a-z_]+'", n) for n in names), args
        out.append((types, [n.strip("'") for n in names]))
    return out


def test_the_scanner_reads_literal_and_chosen_types():
    lua = ("-- emit(ctx, 'commented', 'x', 1)\nlocal function emit(ctx, etype, ...) end\n"
           "emit(ctx, 'a', 'job', f(x, y), 'n', { 1, 2 })\n"
           "emit(ctx, s == 'p' and 'b' or s == 'q' and 'c' or 'd', 'k', 'v, w')\n")
    assert emit_calls(lua) == [(["a"], ["job", "n"]), (["b", "c", "d"], ["k"])]
    with pytest.raises(AssertionError):
        emit_calls("emit(ctx, etype, 'job', 1)")


def test_every_emitted_type_is_in_the_table_with_the_fields_it_writes():
    emitted = set()
    for name, lua in SOURCES.items():
        for types, fields in emit_calls(lua):
            for etype in types:
                if etype in PACKED_TYPES:
                    p = PACKED_TYPES[etype]
                    assert tuple(fields) == p.shared + p.lists, f"{name}: {etype} fields"
                else:
                    assert etype in EVENT_TYPES, f"{name} emits {etype}, which events.py lacks"
                    assert tuple(fields) == EVENT_TYPES[etype].fields, f"{name}: {etype} fields"
                emitted.add(etype)
    assert emitted == set(EVENT_TYPES) | set(PACKED_TYPES), "a type that no script emits"


def test_a_packed_type_stands_for_exactly_the_fields_of_its_type():
    for name, p in PACKED_TYPES.items():
        assert p.name == name and p.of in EVENT_TYPES and "task" in p.lists
        assert sorted(p.shared + p.lists) == sorted(EVENT_TYPES[p.of].fields)
        assert not set(p.shared) & set(p.lists)


def test_the_table_is_well_formed():
    for name, etype in EVENT_TYPES.items():
        assert etype.name == name and etype.meaning and len(set(etype.fields)) == len(etype.fields)


# -- the presenter ---------------------------------------------------------------------------

def test_the_presenter_has_a_line_for_every_type():
    assert set(present.EVENT_TEXTS) == set(EVENT_TYPES)


@pytest.mark.parametrize("etype", sorted(EVENT_TYPES))
def test_the_presenter_renders_each_type_from_its_fields(etype):
    fields = {name: "7" for name in EVENT_TYPES[etype].fields}
    text = present.event_text(Event("1-0", etype, 1, fields), {})
    fallback = f"{etype} " + " ".join(f"{k}=7" for k in sorted(fields))
    assert text != fallback.strip() and "=" not in text
    assert "None" not in text and "?" not in text, text  # every field it reads is there


def test_the_presenter_lines_for_cancelled_and_unknown_types():
    e = Event("1-0", "cancelled", 1, {"job": "J", "task": "3", "worker": "w1", "kind": "expired",
                                      "attempt": "1", "lease_gen": "2", "error": "lease expired"})
    assert present.event_text(e, {"w1": "gpu-a"}) == (
        "task 3 cancelled with its job; its lease on gpu-a ended (expired)")
    new = Event("1-0", "from_a_newer_version", 1, {"b": "2", "a": "1"})
    assert present.event_text(new, {}) == "from_a_newer_version a=1 b=2"


# -- a real run: every type, exactly its fields ----------------------------------------------

def commit(nova, wid, lease):
    key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")
    return nova.complete(wid, lease, key, run_s=0.1, warm=True)


def backups(nova):
    """backup_started, attempt_ended, backup_won and backup_lost, on tasks whose first
    attempt is long overdue."""
    nova.enqueue("synthetic", [TaskSpec(f"b{i}", 1.0) for i in range(3)])
    for wid in ("w3", "w4"):
        nova.register_worker(wid, {"name": wid}, ["synthetic"])
        nova.redis.hset(nova.keys.worker(wid), mapping={"ema:synthetic": 0.1, "n:synthetic": 1})
    firsts = nova.claim("w3", "synthetic", k=3).leases
    for lease in firsts:
        nova.redis.hset(nova.keys.task(lease.task_id), "claimed_ms", 1)
    backup = [nova.claim("w4", "synthetic").leases[0] for _ in firsts]
    assert all(b.backup for b in backup)
    commit(nova, "w4", backup[0])  # backup_won
    commit(nova, "w3", firsts[1])  # backup_lost
    nova.fail("w3", firsts[2], "error", "boom")  # attempt_ended


def verification(nova):
    """verifying, verify_started, verified, trusted, mismatch and invalidated: a new worker's
    results checked by a trusted verifier (its streak set to 0 before a commit, so that the
    commit is checked, and one short of earning trust before the verdict), one of them then
    standing unverified."""
    nova.register_worker("v1", {"name": "v1", "verifier": "1"}, ["synthetic"])
    nova.register_worker("tok.a", {"name": "tok", "trust": "new"}, ["synthetic"])
    nova.redis.hset(nova.keys.worker("tok.a"), mapping={"ema:synthetic": 0.1, "n:synthetic": 1})
    trust = nova.keys.trust("tok")

    def check(verdict):
        [lease] = nova.claim("v1", "synthetic").leases  # verify_started
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")
        nova.complete("v1", lease, key, run_s=0.1, warm=True,
                      meta={"verify": {"cand": verdict}})

    for i in range(2):
        nova.enqueue("synthetic", [TaskSpec(f"v{i}", 1.0)])
        nova.redis.hset(trust, mapping={"level": "new", "streak": 0})  # checked for sure
        nova.redis.hset(nova.keys.worker("tok.a"), "trust", "new")
        [lease] = nova.claim("tok.a", "synthetic").leases
        commit(nova, "tok.a", lease)  # verifying
        nova.redis.hset(trust, "streak", 19)
        check("agree")  # verified, then trusted
    nova.redis.zadd(nova.keys.unverified("tok"), {lease.task_id: 0})  # as if it stood
    nova.redis.hdel(nova.keys.task(lease.task_id), "verified_by")  # unverified
    nova.redis.hset(trust, mapping={"level": "new", "streak": 0})
    nova.redis.hset(nova.keys.worker("tok.a"), "trust", "new")
    nova.enqueue("synthetic", [TaskSpec("v2", 1.0)])
    [lease] = nova.claim("tok.a", "synthetic").leases
    commit(nova, "tok.a", lease)  # verifying
    check("mismatch")  # mismatch, invalidated
    # the verifier leaves: a held result stands once it waited VERIFY_ORPHAN_MS
    nova.set_quarantine("tok.a", False)
    nova.redis.hset(trust, mapping={"level": "new", "streak": 0})
    nova.enqueue("synthetic", [TaskSpec("v3", 1.0)])
    [lease] = nova.claim("tok.a", "synthetic").leases
    commit(nova, "tok.a", lease)  # verifying
    nova.deregister_worker("v1")
    nova.redis.zadd(nova.keys.verify("synthetic"), {lease.task_id: 0})  # waited long
    for _ in range(20):  # the orphan is settled by a claim that finds nothing of its own
        res = nova.claim("tok.a", "synthetic")  # unverified (and completed), once idle
        if not res.leases:
            break
        for other in res.leases:  # no verifier is live: not held
            commit(nova, "tok.a", other)
    assert nova.task(lease.task_id).state == "done"


def terms(nova):
    """deadline_behind (a job no live worker finishes in time) and budget_held (a priced
    worker whose tasks would pass a job's budget)."""
    nova.register_worker("t1", {"name": "t1", "price": 100}, ["priced"])
    nova.redis.hset(nova.keys.worker("t1"), mapping={"ema:priced": 10, "n:priced": 1})
    nova.enqueue("priced", [TaskSpec("late", 1.0)], deadline="1s")
    assert len(nova.claim("t1", "priced").leases) == 1  # behind: as fast as it can
    nova.enqueue("priced", [TaskSpec("dear", 1.0)], budget=0.01)
    assert nova.claim("t1", "priced").leases == []  # held
    nova.deregister_worker("t1")


def test_a_run_writes_every_type_with_exactly_its_fields(nova):
    nova.register_worker("w1", {"name": "one"}, ["synthetic"])
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(3)], max_attempts=2)
    [first] = nova.claim("w1", "synthetic").leases
    commit(nova, "w1", first)  # claimed, completed
    [second] = nova.claim("w1", "synthetic").leases
    nova.fail("w1", second, "error", "boom")  # requeued
    [again] = nova.claim("w1", "synthetic").leases
    assert again.task_id == second.task_id
    nova.fail("w1", again, "error", "boom")  # failed: out of attempts
    nova.retry(again.task_id)  # retried
    [held] = nova.claim("w1", "synthetic").leases
    nova.cancel(job)  # job_cancelled
    with pytest.raises(JobCancelledError):
        commit(nova, "w1", held)  # cancelled, stale_rejected, job_finished
    nova.register_worker("w2", {"name": "two"}, ["synthetic"])
    nova.deregister_worker("w2")  # worker_left
    expire_worker(nova, "w1")
    assert nova.reap()["workers_lost"] == 1  # worker_lost
    nova.redis.hset(nova.keys.meta(), "last_tick_ms", nova.server_time_ms() - 60_000)
    nova.reap()  # grace
    backups(nova)
    verification(nova)
    terms(nova)
    nova.set_quarantine("w3", True, reason="test")  # worker_quarantined
    nova.set_quarantine("w3", False)  # worker_released
    nova.note_loading("w3", "synthetic", "model-a")  # model_loading
    nova.note_loaded("w3", "synthetic", "model-a", 1.5)  # model_loaded
    assert nova.purge(job) == 3  # job_expired
    departed_long_ago(nova, "w2")
    assert nova.expire()["workers"] == 1  # worker_forgotten
    nova.redis.hset(nova.keys.inflight(), "synthetic", 99)
    assert doctor.run(nova, fix=True).repaired  # repaired

    events = nova.events(count=10_000)
    assert {e.type for e in events} == set(EVENT_TYPES)
    for e in events:
        assert tuple(e.fields) == EVENT_TYPES[e.type].fields, e
