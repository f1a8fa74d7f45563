"""Money and time in the gallery: each worker's price on the Workers page and in its API."""

from __future__ import annotations

import pytest
from novatests.seed import set_speed
from novatests.web import WEB_TOKEN, StandInWorker, csrf_of, unsafe_markup

from nova_queue import TaskSpec


def test_the_workers_page_shows_each_price(client, nova, store):
    StandInWorker(nova, store, "rented", name="rented", price=2.5)
    StandInWorker(nova, store, "mine", name="mine")
    page = client.get("/workers").get_data(as_text=True)
    assert "$2.50 / hour" in page and "free ($0)" in page
    api = {w["name"]: w for w in client.get("/api/workers").get_json()}
    assert (api["rented"]["cost_per_hour"], api["mine"]["cost_per_hour"]) == (2.5, 0.0)
    live = {w["name"]: w for g in client.get("/api/live/workers").get_json()["groups"]
            for w in g["workers"]}
    assert live["rented"]["price_text"] == "$2.50 / hour"


def post_job(client, **fields):
    data = {"app": "synthetic", "prompts": "a\nb", "csrf_token": csrf_of(client),
            "token": WEB_TOKEN, **fields}
    return client.post("/", data=data)


def test_the_form_takes_a_deadline_and_a_budget(client, nova):
    resp = post_job(client, deadline="45m", budget="3.25")
    assert resp.status_code == 303, resp.get_data(as_text=True)[:500]
    st = nova.job(resp.headers["Location"].rsplit("/", 1)[-1], with_tasks=False)
    assert st.budget == 3.25 and 0 < st.deadline_ms - nova.server_time_ms() <= 45 * 60_000


@pytest.mark.parametrize("fields, needle", [
    ({"deadline": "2001-01-01T00:00"}, "in the past"),
    ({"deadline": "<b>soon</b>"}, "deadline &#39;&lt;b&gt;soon&lt;/b&gt;&#39;"),
    ({"budget": "-2"}, "budget &#39;-2&#39;"),
])
def test_the_form_refuses_bad_terms_and_enqueues_nothing(client, nova, fields, needle):
    resp = post_job(client, **fields)
    html = resp.get_data(as_text=True)
    assert resp.status_code == 400 and needle in html, html[:2000]
    assert unsafe_markup(html) == []
    assert nova.redis.keys(f"{nova.prefix}job:*") == []


def test_the_job_page_shows_the_deadline_the_cost_and_who_ran_it(client, nova, store):
    dear = StandInWorker(nova, store, "dear", name="rented-h100", price=3600.0)
    set_speed(nova, "dear", "synthetic", 1.0)
    job = nova.enqueue("synthetic", [TaskSpec(f"<i>p{i}</i>") for i in range(3)],
                       deadline="1h", budget=50)
    for lease in dear.claim(k=2):
        dear.finish(lease, run_s=0.01)  # 10 cents of a dollar a second
    page = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert "deadline in" in page and "on time" in page
    assert "cost so far $0.02," in page and "of a $50.00 budget" in page
    assert "rented-h100 (2 at $3600.00/h)" in page
    assert unsafe_markup(page) == []
    plain = nova.enqueue("synthetic", [TaskSpec("x")])
    assert "cost so far" not in client.get(f"/jobs/{plain}").get_data(as_text=True)


def test_metrics_export_the_deadline_slack_and_the_workers_needed(client, nova):
    nova.register_worker("dear", {"name": "dear", "price": 4.0, "backend": "cuda"}, ["synthetic"])
    set_speed(nova, "dear", "synthetic", 10.0)
    # 40 tasks of 10 s, due in 205 s: it does 19 (194.75 s in hand), two more do the rest
    nova.enqueue("synthetic", [TaskSpec(f"t{i}") for i in range(40)], deadline="205s")
    nova.enqueue("synthetic", [TaskSpec("easy")], deadline="1h")
    text = client.get("/metrics").get_data(as_text=True)
    slack = [line for line in text.splitlines()
             if line.startswith('novaqueue_deadline_slack_seconds{app="synthetic"}')]
    assert len(slack) == 1 and float(slack[0].split()[-1]) < 0  # the least slack: late
    assert 'novaqueue_workers_needed{app="synthetic",class="cuda/10s/$4h"} 2.0' in text
