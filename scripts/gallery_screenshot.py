"""Regenerate ``docs/gallery.png``, the README's picture of the gallery, from a real demo run.

Runs what ``nova-queue demo --kill-one`` runs: a private Redis, the gallery, the
post-worker and three workers at 1x / 2x / 4x simulated speed on the 64 bundled prompts;
a quarter of the way in one busy worker is killed (``kill -9``) and its task comes back
to the queue when the lease expires. When the job is done, headless Chromium (Playwright
with Debian's ``/usr/bin/chromium``) photographs the job page from its header down to the
row of the recovered task (the card that says "attempt 2").

    python scripts/gallery_screenshot.py                 # writes docs/gallery.png
    python scripts/gallery_screenshot.py --out /tmp/g.png --prompts 16

Exits 1 with a one-line message when the run does not go as described (no worker lost,
no task recovered, the job not done), so a bad picture is never written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nova_queue.cli.demo_pool import Demo, DemoOptions
from nova_queue.local import wait_for

REPO = Path(__file__).resolve().parent.parent
VIEWPORT = {"width": 1280, "height": 900}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: Every card image in the viewport has loaded (they load lazily).
IMAGES_IN_VIEW_JS = ("() => Array.from(document.querySelectorAll('#grid img'))"
                     ".filter(i => i.getBoundingClientRect().top < window.innerHeight)"
                     ".every(i => i.complete && i.naturalWidth > 0)")


def run_demo(prompts: int, workers: int) -> tuple[Demo, str, int]:
    """A finished demo job with one worker killed; returns (demo, job id, recovered task)."""
    demo = Demo(DemoOptions(workers=workers, prompts=prompts, port=0, open_browser=False,
                            kill_one=True, exit_when_done=True, timeout_s=600),
                echo=lambda line: print(line, file=sys.stderr))
    demo.start()
    job = demo.enqueue()
    if not demo.follow():
        raise SystemExit(f"error: demo job {job} did not finish cleanly; logs in {demo.data}")
    # the killed worker's task was backed up by an idle worker (and so the job may finish
    # before its lease expires), or requeued when its lease expired: either way it shows
    recovered = [t.index for t in demo.client.job(job).tasks
                 if t.attempt_count >= 2 or t.won_by_backup]
    try:  # its heartbeat runs out one lease TTL after the kill at most
        wait_for(lambda: any(e.type == "worker_lost" for e in demo.client.recent_events(1000)),
                 timeout_s=demo.client.settings.lease_ttl_s + 5, message="the worker lost")
    except TimeoutError:
        recovered = []
    if not recovered:
        raise SystemExit("error: no worker was lost or no task recovered (the kill came too "
                         "late?); run again")
    return demo, job, recovered[0]


def screenshot(url: str, task_index: int, out: Path, chromium: str, token: str) -> None:
    """The job page from the top down to the row of ``task_index``, as a PNG, in a session
    unlocked with the demo's ``token`` (only such a session gets live updates over a
    WebSocket from a gallery with a token)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url)
            page.fill('form.unlock input[name="token"]', token)
            with page.expect_navigation():  # back to the job page, unlocked
                page.click("form.unlock button")
            card = page.locator(f"#task-{task_index}").bounding_box()
            if card is None:
                raise SystemExit(f"error: task {task_index} is not on the gallery page")
            height = max(VIEWPORT["height"], int(card["y"] + card["height"] + 8))
            page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
            page.wait_for_function(IMAGES_IN_VIEW_JS, timeout=30_000)
            page.wait_for_function("() => document.getElementById('live-status')"
                                   ".dataset.state === 'live'", timeout=15_000)
            page.evaluate("() => document.fonts.ready")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    """Run the demo, photograph its gallery, stop everything."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "gallery.png")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--prompts", type=int, default=64, choices=range(8, 65),
                        metavar="8..64")
    parser.add_argument("--workers", type=int, default=3, choices=range(2, 9),
                        metavar="2..8")
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        parser.error(f"no Chromium at {args.chromium} (apt-get install chromium)")
    demo, job, recovered = run_demo(args.prompts, args.workers)
    try:
        screenshot(demo.gallery_url(), recovered, args.out, args.chromium, demo.token)
    finally:
        demo.stop()
    print(f"wrote {args.out} (job {job}, task {recovered} recovered after a worker was lost)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
