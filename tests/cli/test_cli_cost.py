"""Prices, deadlines and budgets on the command line: ``worker --cost-per-hour``,
``tokens create --cost-per-hour``, the price in ``workers``; bad input refused with one
clear line and nothing written."""

from __future__ import annotations

import datetime
import json

import pytest
from novatests.cli import enqueue_ok, rejected, status_json, write

from nova_queue import TaskSpec, tokens
from nova_queue.errors import CODES, InputError
from nova_queue.jobspec import job_fields


def _priced_worker(nova, wid: str, price: float) -> None:
    nova.register_worker(wid, {"name": wid, "price": price}, ["synthetic"],
                         {"synthetic": {"bench_s": 0.01}})


def test_workers_show_their_price(invoke, nova):
    _priced_worker(nova, "h100", 4.0)
    _priced_worker(nova, "cpu", 0)
    res = invoke("workers", "--json")
    assert res.exit_code == 0, res.output
    assert {w["id"]: w["cost_per_hour"] for w in json.loads(res.output)} == {"h100": 4.0,
                                                                              "cpu": 0.0}
    res = invoke("workers")
    (line,) = [x for x in res.output.splitlines() if x.strip().startswith("h100")]
    assert "$4/h" in line


def test_a_forged_price_reads_as_free(nova):
    _priced_worker(nova, "w", 1.0)
    nova.redis.hset(nova.keys.worker("w"), "price", "-5")
    assert [w.cost_per_hour for w in nova.workers()] == [0.0]


def test_tokens_carry_the_operators_price(invoke, nova):
    res = invoke("tokens", "create", "rented", "--cost-per-hour", "2.50")
    assert res.exit_code == 0, res.output
    assert [t.cost_per_hour for t in tokens.list_tokens(nova)] == [2.5]
    assert "$2.5/h" in invoke("tokens", "list").output


@pytest.mark.parametrize("price", ["-1", "cheap", "nan", "inf", "1e9"])
def test_a_bad_price_is_one_clear_error(invoke, nova, price):
    res = invoke("tokens", "create", "bad", "--cost-per-hour", price)
    assert res.exit_code != 0
    assert "--cost-per-hour" in res.output and price in res.output
    assert "Traceback" not in res.output
    assert tokens.list_tokens(nova) == []
    res = invoke("worker", "--app", "synthetic", "--cost-per-hour", price)
    assert res.exit_code != 0 and "--cost-per-hour" in res.output
    assert nova.workers(include_gone=True) == []


# -- enqueue --deadline / --budget ------------------------------------------------------------

def test_enqueue_stores_the_deadline_and_budget(invoke, nova, tmp_path):
    path = write(tmp_path, b"a\nb\n")
    before = nova.server_time_ms()
    job = enqueue_ok(invoke, path, "--deadline", "30m", "--budget", "5.00")
    st = status_json(invoke, job)
    assert before + 30 * 60_000 <= st["deadline_ms"] <= nova.server_time_ms() + 30 * 60_000
    assert st["budget"] == 5.0 and st["cost_so_far"] == 0.0
    at = datetime.datetime.now().replace(microsecond=0) + datetime.timedelta(hours=2)
    job = enqueue_ok(invoke, path, "--deadline", at.isoformat())
    assert status_json(invoke, job)["deadline_ms"] == int(at.timestamp() * 1000)
    clock = (datetime.datetime.now() + datetime.timedelta(hours=1)).strftime("%H:%M")
    job = enqueue_ok(invoke, path, "--deadline", clock)
    ahead_ms = status_json(invoke, job)["deadline_ms"] - nova.server_time_ms()
    assert 0 < ahead_ms <= 3_600_000


def test_a_job_without_terms_has_none(invoke, nova, tmp_path):
    st = status_json(invoke, enqueue_ok(invoke, write(tmp_path, b"a\n")))
    assert (st["deadline_ms"], st["budget"]) == (None, None)


@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--deadline", "2001-01-01T00:00", "in the past"),
    ("--deadline", "tomorrowish", "expected a duration"),
    ("--deadline", "25:00", "expected a duration"),
    ("--deadline", "400d", "at most 365 days"),
    ("--budget", "-1", "from 0 to"),
    ("--budget", "lots", "expected a number of dollars"),
    ("--budget", "nan", "from 0 to"),
])
def test_bad_terms_are_one_clear_error_and_nothing_is_enqueued(invoke, nova, tmp_path, flag,
                                                               value, needle):
    line = rejected(invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic",
                           flag, value), flag, needle)
    assert value in line
    assert nova.jobs(10) == [] and nova.redis.keys(f"{nova.prefix}task:*") == []


def test_the_python_api_takes_the_same_terms(nova):
    job = nova.enqueue("synthetic", [TaskSpec("a")], deadline=datetime.timedelta(minutes=5),
                       budget="$2.50")
    st = nova.job(job, with_tasks=False)
    assert st.budget == 2.5 and st.deadline_ms - nova.server_time_ms() <= 300_000
    with pytest.raises(InputError, match="deadline .* in the past"):
        nova.enqueue("synthetic", [TaskSpec("a")], deadline=datetime.datetime(2001, 1, 1))
    with pytest.raises(InputError, match="budget"):
        nova.enqueue("synthetic", [TaskSpec("a")], budget=-3)
    assert [j.job_id for j in nova.jobs(10)] == [job]


def test_the_script_refuses_terms_forged_past_the_client(nova):
    fields = job_fields("synthetic", [TaskSpec("a")], "forged", params={}, priority=0,
                        max_attempts=3, name="")
    k = nova.keys
    keys = [k.job("forged"), k.jobs(), k.staging(), k.stage("forged"), k.pending("synthetic"),
            k.seq(), k.events(), k.apps(), k.meta()]
    for forged, needle in (({"deadline_ms": 1000}, "deadline_ms"),
                           ({"deadline_ms": "soon"}, "deadline_ms"),
                           ({"budget": -1}, "budget"), ({"budget": "x"}, "budget")):
        reply = nova.scripts.call("enqueue", keys, [nova.prefix, "forged", 1, 1,
                                                    json.dumps({**fields, **forged}), 0, 1000,
                                                    "a", "1.0"])
        assert reply[0] == CODES["BAD_INPUT"] and needle in reply[1], reply
    assert not nova.redis.exists(k.job("forged"))


# -- status: the deadline against the prediction, and the money -------------------------------

def test_status_shows_the_deadline_prediction_and_cost(invoke, nova, tmp_path):
    _priced_worker(nova, "cheap", 0.5)
    nova.redis.hset(nova.keys.worker("cheap"), mapping={"ema:synthetic": 0.1, "n:synthetic": 3})
    job = enqueue_ok(invoke, write(tmp_path, b"a\nb\nc\nd\n"), "--deadline", "1h",
                     "--budget", "2")
    before = nova.server_time_ms()
    st = status_json(invoke, job)
    after = nova.server_time_ms()
    # 4 tasks at 0.1 s per cost unit each on the one live worker, at $0.50 an hour: the
    # prediction is the status's clock (read between the two) plus that work
    work_s = sum(t["cost"] for t in st["tasks"]) * 0.1
    assert before - 1 <= st["predicted_finish_ms"] - int(work_s * 1000) <= after + 1
    assert st["on_time"] is True
    assert st["predicted_cost"] == pytest.approx(work_s * 0.5 / 3600, rel=1e-3)
    assert (st["cost_so_far"], st["budget"]) == (0.0, 2.0)
    assert "deadline" in st["placement"]
    text = invoke("status", job).output
    assert "predicted finish" in text and "on time" in text and "budget $2.00" in text
    nova.redis.hset(nova.keys.worker("cheap"), "ema:synthetic", 100)  # 1 s a task now
    late = enqueue_ok(invoke, write(tmp_path, b"a\n" * 50), "--deadline", "2s")
    st = status_json(invoke, late)
    assert st["on_time"] is False and "LATE" in invoke("status", late).output
