"""The Workers page fits a 1280 px window in a real Chromium: no horizontal scroll on the
page and none inside a worker's card (its speed table used to run out of the card), as
the server renders it and as its script re-renders it live."""

from __future__ import annotations

import json

import pytest
from novatests.web import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium at /usr/bin/chromium "
                       "(apt-get install chromium); CI installs it"),
]

#: What overflows, if anything: the page's width beyond the window, and each card whose
#: content is wider than the card.
OVERFLOW_JS = """() => ({
  page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  cards: Array.from(document.querySelectorAll('.worker'))
    .filter(w => w.scrollWidth > w.clientWidth)
    .map(w => [w.querySelector('strong').textContent, w.scrollWidth, w.clientWidth]),
  shown: document.querySelectorAll('.worker').length,
})"""
LABELS = {"gpu": "rtx-4090-laptop", "site": "alice-home-office", "owner": "alice",
          "zone": "eu-west-amsterdam"}


def register(nova, i: int) -> str:
    """A gateway worker as a real one registers: two apps with their speeds, labels, a
    token, a warm model."""
    wid = f"alice-gaming-pc.{i:012x}"
    nova.register_worker(
        wid, {"name": f"alice-gaming-pc-{i}", "backend": "cuda", "host": "alice-pc.home.arpa",
              "host_id": "host-1", "device": "cuda:0",
              "device_name": "NVIDIA GeForce RTX 4090 Laptop GPU",
              "memory_total": 17171480576, "memory_free": 16000000000,
              "labels": json.dumps(LABELS), "token": "alice-gaming-pc"},
        ["txt2img", "synthetic"],
        {"txt2img": {"bench_s": 0.12345, "load_s": 71.2, "cold_s": 3.4},
         "synthetic": {"bench_s": 1.01, "load_s": None, "cold_s": 0.2}})
    nova.note_loaded(wid, "txt2img", "stabilityai/sd-turbo", 71.2)
    return wid


def test_the_workers_page_fits_1280_px(nova, live_server, browser_page):
    page = browser_page
    assert page.viewport_size["width"] == 1280
    for i in range(3):
        register(nova, i)
    nova.set_quarantine("alice-gaming-pc.000000000002", True,
                        reason="by an admin: " + "its last error was long " * 8)
    page.goto(live_server + "/workers")
    page.wait_for_selector(".worker")
    rendered = page.evaluate(OVERFLOW_JS)
    assert rendered == {"page": 0, "cards": [], "shown": 3}, rendered
    register(nova, 3)  # a worker_joined event: the page's script renders every card again
    page.wait_for_function("() => document.querySelectorAll('.worker').length === 4",
                           timeout=15_000)
    live = page.evaluate(OVERFLOW_JS)
    assert live == {"page": 0, "cards": [], "shown": 4}, live
    assert page.errors == []
