"""Fixtures of the web tests: settings, the file store, the app, its test client and a live
server (helpers that are not fixtures: ``novatests.web``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from novatests.web import CHROMIUM, CHROMIUM_ARGS, WEB_TOKEN

from nova_queue import Settings
from nova_queue.stores import FileStore, ResultStore


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """Folder of the test's file store."""
    return tmp_path / "store"


@pytest.fixture
def web_settings(redis_url: str, namespace: str, store_root: Path) -> Settings:
    """Settings of the test's web app: its Redis namespace, a file store, a write token."""
    return Settings(redis_url=redis_url, namespace=namespace, store_url=store_root.as_uri(),
                    web_token=WEB_TOKEN)


@pytest.fixture
def store(web_settings: Settings) -> Iterator[ResultStore]:
    """The file store the app reads."""
    s = FileStore(Path(web_settings.store_url.removeprefix("file://")))
    yield s
    s.close()


@pytest.fixture
def app(web_settings: Settings):
    """The Flask app (testing mode, fixed secret)."""
    from nova_queue.web import create_app

    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret"},
                             settings=web_settings)
    yield application
    application.extensions["nova"].close()


@pytest.fixture
def client(app):
    """Flask's test client."""
    return app.test_client()


@pytest.fixture
def live_server(app) -> Iterator[str]:
    """The app on a real threaded werkzeug server on a free port; yields its base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="web-test-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium per module (Playwright gives it a fresh temporary profile);
    the tests that use it skip without Debian's chromium."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian chromium at /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                 headless=True)
    try:
        yield browser
    finally:
        browser.close()
        pw.stop()


@pytest.fixture
def browser_page(chromium):
    """A page in a fresh browser context; console errors and page errors collected."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda exc: page.errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: msg.type == "error" and page.errors.append(msg.text))
    page.on("dialog", lambda d: (page.errors.append(f"dialog: {d.message}"), d.dismiss()))
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def unlocked_page(browser_page, live_server):
    """``browser_page`` with its session unlocked by the header's form: the test gallery
    has a web token, so only an unlocked session gets live sockets (others poll)."""
    from novatests.web import WEB_TOKEN

    browser_page.goto(f"{live_server}/")
    browser_page.fill('form.unlock input[name="token"]', WEB_TOKEN)
    with browser_page.expect_navigation():
        browser_page.click("form.unlock button")
    return browser_page

