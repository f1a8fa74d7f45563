"""Prices, deadlines and budgets on the command line: ``worker --cost-per-hour``,
``tokens create --cost-per-hour``, the price in ``workers``; bad input refused with one
clear line and nothing written."""

from __future__ import annotations

import json

import pytest

from nova_queue import tokens


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
