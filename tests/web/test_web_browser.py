"""A real headless Chromium watches a job's gallery fill live, without a reload.

Needs Debian's ``/usr/bin/chromium`` (``playwright install`` cannot download browsers
here); skipped without it. The screenshot of the hostile-prompt job goes to
``test-artifacts/gallery.png`` (the README's ``docs/gallery.png`` is a demo job, made by
``scripts/gallery_screenshot.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from novatests.web import CHROMIUM, StandInWorker, enqueue

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
XSS_PROMPT = ('<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
              '<b onmouseover="window.__xss=3">bold?</b>')
BIDI_PROMPT = "invoice \u202egnp.exe"
PROMPTS = ["a lighthouse at dusk, oil painting", "a red fox in fresh snow",
           "isometric city block at night, neon", "a bowl of ramen, studio light",
           XSS_PROMPT, BIDI_PROMPT]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium at /usr/bin/chromium "
                       "(apt-get install chromium); CI installs it"),
]

LOADED_JS = ("() => Array.from(document.querySelectorAll('#grid img'))"
             ".filter(i => i.complete && i.naturalWidth > 0).length")


def real_worker_available() -> bool:
    """Whether ``nova-queue worker`` exists (nova_queue/cli/run.py defines ``worker``)."""
    run = REPO / "nova_queue" / "cli" / "run.py"
    return run.exists() and bool(re.search(r"^def worker\(", run.read_text(), re.MULTILINE))


def start_worker(web_settings, nova, store, tmp_path):
    """The real worker process when it exists, else an in-process stand-in (a thread)."""
    if real_worker_available():
        env = {**os.environ, "NOVA_HOME": str(tmp_path / "worker-home"), "PYTHONUNBUFFERED": "1"}
        env.pop("NOVA_WEB_TOKEN", None)
        return subprocess.Popen(
            [sys.executable, "-m", "nova_queue", "--redis", web_settings.redis_url,
             "--store", web_settings.store_url, "--namespace", web_settings.namespace,
             "worker", "--app", "synthetic", "--burst"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Stand-in used only while nova_queue/cli/run.py has no worker command.
    w = StandInWorker(nova, store, "standin-cpu", name="standin-cpu", backend="cpu")
    thread = threading.Thread(target=w.run_all, daemon=True)
    thread.start()
    return thread


def stop_worker(handle) -> None:
    """Wait for the burst worker to exit (it must exit 0); join the stand-in thread."""
    if isinstance(handle, subprocess.Popen):
        try:
            out, _ = handle.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            handle.kill()
            out, _ = handle.communicate(timeout=5)
        assert handle.returncode == 0, out.decode(errors="replace")[-3000:]
    else:
        handle.join(30)


def save_screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def test_gallery_fills_live_with_backend_tags_and_runs_no_user_script(
        unlocked_page, live_server, web_settings, nova, store, tmp_path):
    page = unlocked_page
    job = enqueue(nova, PROMPTS, params={"seconds": 0.05, "size": 192},
                  name="Gallery demo <i>not italic</i>")  # markup in the name stays text
    page.goto(f"{live_server}/jobs/{job}")
    page.wait_for_function("() => document.getElementById('live-status').dataset.state"
                           " === 'live'", timeout=10_000)
    page.evaluate("() => { window.__marker = 1; }")
    assert page.evaluate(LOADED_JS) == 0
    assert page.locator("#grid .placeholder").count() == len(PROMPTS)

    handle = start_worker(web_settings, nova, store, tmp_path)
    try:
        page.wait_for_function(f"() => ({LOADED_JS})() === {len(PROMPTS)}", timeout=45_000)
        page.wait_for_function("() => document.querySelector('#job [data-f=percent_text]')"
                               ".textContent === '100 %'", timeout=10_000)
    finally:
        stop_worker(handle)

    assert page.evaluate("() => window.__marker") == 1  # same document: no reload
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1
    badges = page.locator("#grid .badge.backend").all_text_contents()
    assert badges == ["CPU"] * len(PROMPTS)
    assert all(w for w in page.locator('#grid [data-f="worker"]').all_text_contents())
    # hostile prompt: shown as its raw text, nothing injected, nothing ran
    assert page.locator("#task-4 .prompt").text_content() == XSS_PROMPT
    assert page.evaluate("() => window.__xss") is None
    assert page.evaluate("() => document.querySelectorAll('img[src=\"x\"], #grid script,"
                         " #grid b').length") == 0
    assert page.locator("#task-5 .prompt").text_content() == "invoice \u27eaU+202E\u27ebgnp.exe"
    assert page.locator("h1").first.text_content() == "Gallery demo <i>not italic</i>"
    story = " ".join(page.locator("#timeline .ev-text").all_text_contents())
    assert story.count("completed by") == len(PROMPTS)
    assert page.errors == []  # no CSP violations, no script errors

    save_screenshot(page, "gallery.png")


def test_a_locked_session_polls_without_trying_a_socket(browser_page, live_server, nova,
                                                        store):
    """A gallery with a web token opens live sockets only for unlocked sessions: a locked
    page polls from the start, and still fills live."""
    page = browser_page
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    job = enqueue(nova, ["one", "two"], params={"seconds": 0.0, "size": 64})
    page.goto(f"{live_server}/jobs/{job}")
    page.wait_for_function("() => document.getElementById('live-status').dataset.state"
                           " === 'polling'", timeout=10_000)
    StandInWorker(nova, store, "locked-worker", name="locked-worker").run_all()
    page.wait_for_function(f"() => ({LOADED_JS})() === 2", timeout=20_000)
    assert sockets == [] and page.errors == []


def test_polling_fallback_fills_the_grid_without_websockets(browser_page, live_server, nova,
                                                             store):
    page = browser_page
    page.add_init_script("delete window.WebSocket;")
    job = enqueue(nova, ["one", "two", "three"], params={"seconds": 0.0, "size": 64})
    page.goto(f"{live_server}/jobs/{job}")
    page.wait_for_function("() => document.getElementById('live-status').dataset.state"
                           " === 'polling'", timeout=10_000)
    page.evaluate("() => { window.__marker = 1; }")
    StandInWorker(nova, store, "poll-worker", name="poll-worker", backend="mps").run_all()
    page.wait_for_function(f"() => ({LOADED_JS})() === 3", timeout=20_000)
    assert page.evaluate("() => window.__marker") == 1
    assert page.locator("#grid .badge.backend").all_text_contents() == ["Metal"] * 3
    assert page.errors == []


def test_jobs_and_workers_pages_update_live(unlocked_page, live_server, nova, store):
    page = unlocked_page
    page.goto(f"{live_server}/")
    page.wait_for_function("() => document.getElementById('live-status').dataset.state"
                           " === 'live'", timeout=10_000)
    page.evaluate("() => { window.__marker = 1; }")
    job = enqueue(nova, ["x"], name="<b>new</b> \u202ejob")
    row = page.locator(f'#jobs tr[data-job="{job}"]')
    row.wait_for(timeout=10_000)
    assert row.locator('[data-f="title"]').text_content() == "<b>new</b> \u27eaU+202E\u27ebjob"
    assert row.locator('[data-f="link"]').get_attribute("href") == f"/jobs/{job}"
    assert page.evaluate("() => window.__marker") == 1

    page.goto(f"{live_server}/workers")
    page.evaluate("() => { window.__marker = 2; }")
    StandInWorker(nova, store, "w-late", name="late-joiner", backend="rocm", host="far-host")
    page.locator("#fleet", has_text="late-joiner").wait_for(timeout=10_000)
    assert "far-host" in page.locator("#fleet").text_content()
    assert page.locator("#fleet .badge.backend").all_text_contents() == ["ROCm"]
    assert page.evaluate("() => window.__marker") == 2
    assert page.errors == []


def test_the_workers_page_shows_a_new_cannot_run_mark_live(unlocked_page, live_server, nova,
                                                           store):
    from novatests.seed import set_speed

    page = unlocked_page
    job = enqueue(nova, ["x"])
    StandInWorker(nova, store, "w-np", name="no-prep")
    page.goto(f"{live_server}/workers")
    page.locator("#fleet", has_text="no-prep").wait_for(timeout=10_000)
    page.evaluate("() => { window.__marker = 3; }")
    set_speed(nova, "w-np", "synthetic", 1.0)
    [lease] = nova.claim("w-np", "synthetic").leases
    assert lease.job_id == job
    nova.fail("w-np", lease, "prepare", XSS_PROMPT)
    line = page.locator("#fleet .cannot-run")
    line.wait_for(timeout=10_000)
    assert line.text_content().startswith(f"cannot run synthetic: {XSS_PROMPT} (marked ")
    assert page.evaluate("() => window.__marker") == 3 and page.evaluate("() => window.__xss") \
        is None
    assert page.errors == []


def test_gallery_says_live_when_no_worker_serves_the_app(unlocked_page, live_server, nova):
    from nova_queue import TaskSpec

    page = unlocked_page
    job = nova.enqueue("txt2img", [TaskSpec("a castle"), TaskSpec("a moat")])
    page.goto(f"{live_server}/jobs/{job}")
    note = page.locator('#job [data-f="workers_text"]')
    assert note.is_visible()
    assert note.text_content().startswith("No live worker serves app 'txt2img'")
    page.wait_for_function("() => document.getElementById('live-status').dataset.state"
                           " === 'live'", timeout=10_000)
    page.evaluate("() => { window.__marker = 1; }")
    nova.register_worker("w-gpu", {"name": "gpu", "backend": "cuda"}, ("txt2img",))
    note.wait_for(state="hidden", timeout=10_000)
    nova.deregister_worker("w-gpu")
    note.wait_for(state="visible", timeout=10_000)
    assert "Tasks wait until one joins" in note.text_content()
    assert page.evaluate("() => window.__marker") == 1  # no reload
    assert page.errors == []  # no CSP violations


def test_unlocking_on_a_crafted_404_page_stays_on_this_site(browser_page, live_server):
    from novatests.web import WEB_TOKEN

    page = browser_page
    # the link a phisher sends: a 404 whose path, once the browser drops the tab, would
    # have made the unlock form redirect to //evil.example/phish
    resp = page.goto(f"{live_server}/%09/evil.example/phish")
    assert resp is not None and resp.status == 404
    assert page.locator('form.unlock input[name="next"]').get_attribute("value") == "/"
    page.fill('form.unlock input[name="token"]', WEB_TOKEN)
    with page.expect_navigation():
        page.click("form.unlock button")
    assert page.url == f"{live_server}/"
    assert page.locator("header form button", has_text="Lock").is_visible()
    # a hand-made form posting the hostile next directly is sent home as well
    with page.expect_navigation():
        page.evaluate("""(target) => {
            const f = document.querySelector('header form');
            f.querySelector('input[name="next"]').value = target;
            f.submit();
        }""", "/\t/evil.example/phish")
    assert page.url == f"{live_server}/"
    assert page.locator("form.unlock button").is_visible()  # that was the Lock form
    # the console reports the 404 page itself; nothing else
    assert [e for e in page.errors if "status of 404" not in e] == []


def test_the_timeline_draws_each_attempt_live(unlocked_page, live_server, nova, store):
    """One lane per worker, one bar per attempt: a slow attempt backed up by another worker
    shows as lost on one lane and won on the other, and the card says so; the page updates
    while it is open."""
    from novatests.seed import set_speed

    page = unlocked_page
    job = enqueue(nova, ["first", "second"], params={"seconds": 0.0, "size": 64})
    slow = StandInWorker(nova, store, "slow-w", name="slow-worker")
    set_speed(nova, "slow-w", "synthetic", 0.5)
    [primary] = slow.claim()
    page.goto(f"{live_server}/jobs/{job}")
    page.wait_for_function("() => document.querySelectorAll('#lanes .bar.running').length === 1",
                           timeout=10_000)
    assert page.locator("#lanes .lane-name").all_text_contents() == ["slow-worker (CPU)"]
    # the slow attempt is overdue; an idle faster worker backs it up and wins
    nova.redis.hset(nova.keys.task(primary.task_id), "claimed_ms",
                    nova.server_time_ms() - 10_000)
    fast = StandInWorker(nova, store, "fast-w", name="fast-worker")
    set_speed(nova, "fast-w", "synthetic", 0.1)
    leases = fast.claim()
    assert [x.backup for x in leases] == [False]  # the second task first: its own work
    fast.finish(leases[0])
    [backup] = fast.claim()
    assert backup.backup and backup.task_id == primary.task_id
    fast.finish(backup)
    page.wait_for_function("() => document.querySelector('#lanes .bar.backup-won') !== null",
                           timeout=15_000)
    lanes = dict(zip(page.locator("#lanes .lane-name").all_text_contents(),
                     page.locator("#lanes .lane-track").all()))
    assert set(lanes) == {"slow-worker (CPU)", "fast-worker (CPU)"}
    assert lanes["slow-worker (CPU)"].locator(".bar.backup-lost").count() == 1
    fast_bars = lanes["fast-worker (CPU)"].locator(".bar")
    assert fast_bars.count() == 2 and lanes["fast-worker (CPU)"].locator(
        ".bar.backup-won").count() == 1
    label = lanes["fast-worker (CPU)"].locator(".bar.backup-won").get_attribute("title")
    assert label.startswith(f"task {primary.index} · gen {backup.lease_gen} · backup")
    page.wait_for_function(f"() => document.querySelector('#task-{primary.index} "
                           "[data-f=backup_text]').textContent === 'backup won'",
                           timeout=10_000)
    assert page.errors == []
    save_screenshot(page, "timeline.png")


def test_the_owners_page_shows_a_hostile_owner_as_text(browser_page, live_server, nova):
    """A hand-written owner name with markup renders as text in a real browser: no script
    runs, no element is made of it, and the fair-share order holds."""
    enqueue(nova, ["a"], owner="alice")
    nova.redis.hset(nova.keys.shares(), XSS_PROMPT, "2")
    page = browser_page
    page.goto(f"{live_server}/owners")
    cells = page.locator("table.owners tbody tr td:first-child").all_inner_texts()
    assert cells == [XSS_PROMPT, "alice"]  # neither has usage: by name ('<' before 'a')
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("table.owners img, table.owners script, table.owners b").count() == 0
    assert page.errors == []


RED, AMBER = "rgb(217, 45, 32)", "rgb(247, 144, 9)"  # --bad, --warn of style.css
PILL_JS = "(sel) => { const n = document.querySelector(sel); return [n.textContent, " \
          "getComputedStyle(n).color]; }"


def test_a_failed_job_turns_red_and_one_with_failed_tasks_amber_live(unlocked_page, live_server,
                                                                     nova, store):
    """The badge and the bar follow the live feed as a job ends: red 'failed' when every task
    failed, amber 'done · 1 failed' when one did; never the green of a full success."""
    page = unlocked_page
    doomed = enqueue(nova, ["a", "b"], max_attempts=1, name="doomed")
    mixed = enqueue(nova, ["c", "d"], max_attempts=1, name="mixed")
    w = StandInWorker(nova, store, "w1", name="cpu-one")
    page.goto(f"{live_server}/jobs/{doomed}")
    page.wait_for_function("() => document.getElementById('live-status').dataset.state"
                           " === 'live'", timeout=10_000)
    for _ in range(2):  # the older job's tasks come first
        [lease] = w.claim()
        nova.fail("w1", lease, "error", "boom")
    page.wait_for_function("() => document.querySelector('#job [data-f=state_text]')"
                           ".textContent === 'failed'", timeout=10_000)
    assert page.evaluate(PILL_JS, "#job .pill.state") == ["failed", RED]
    assert page.evaluate("() => getComputedStyle(document.querySelector('#job progress'))"
                         ".accentColor") == RED

    page.goto(f"{live_server}/")
    page.wait_for_function("() => document.getElementById('live-status').dataset.state"
                           " === 'live'", timeout=10_000)
    [lease] = w.claim()
    w.finish(lease)
    [lease] = w.claim()
    nova.fail("w1", lease, "error", "boom")
    row = f'#jobs tr[data-job="{mixed}"] .pill.state'
    page.wait_for_function(f"() => document.querySelector('{row}').textContent === "
                           "'done · 1 failed'", timeout=10_000)
    assert page.evaluate(PILL_JS, row) == ["done · 1 failed", AMBER]
    assert page.evaluate(PILL_JS, f'#jobs tr[data-job="{doomed}"] .pill.state') == [
        "failed", RED]
    assert page.errors == []
