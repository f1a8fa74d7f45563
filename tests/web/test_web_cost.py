"""Money and time in the gallery: each worker's price on the Workers page and in its API."""

from __future__ import annotations

from novatests.web import StandInWorker


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
