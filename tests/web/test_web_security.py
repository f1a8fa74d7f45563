"""Security of the web app: headers, read-only mode, write token, CSRF, upload limits,
prompt validation on submission, the requeue action and WebSocket Origin rules."""

from __future__ import annotations

import io
import re

import pytest
from novatests.web import WEB_TOKEN, StandInWorker, csrf_of, enqueue

from nova_queue import Settings
from nova_queue.web.security import origin_allowed


def post_job(client, *, token: str | None = WEB_TOKEN, csrf: str | None = "auto", **fields):
    data = {"app": "synthetic", "prompts": "a cat\nb dog\n", "params": "seconds=0\nsize=64",
            "name": "from the web", "priority": "0", **fields}
    if csrf == "auto":
        csrf = csrf_of(client)
    if csrf is not None:
        data["csrf_token"] = csrf
    if token is not None:
        data["token"] = token
    return client.post("/", data=data, content_type="multipart/form-data")


def test_security_headers_on_pages_and_api(client):
    for path in ("/", "/workers", "/api/jobs", "/metrics", "/nope"):
        h = client.get(path).headers
        csp = h["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp, path
        assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
        assert h["X-Frame-Options"] == "DENY"
        assert h["X-Content-Type-Options"] == "nosniff"
        assert h["Referrer-Policy"] == "same-origin"
    assert client.get("/").headers["Cache-Control"] == "no-store"


def test_session_cookie_is_httponly_and_samesite(client):
    csrf_of(client)
    cookie = client.get_cookie("session")
    assert cookie is not None and cookie.http_only and cookie.same_site == "Lax"


def test_without_token_the_gallery_is_read_only(redis_url, namespace, tmp_path, nova):
    from nova_queue.web import create_app

    settings = Settings(redis_url=redis_url, namespace=namespace,
                        store_url=(tmp_path / "s").as_uri())
    ro = create_app({"TESTING": True, "SECRET_KEY": "x"}, settings=settings)
    c = ro.test_client()
    html = c.get("/").get_data(as_text=True)
    assert "read-only" in html and "NOVA_WEB_TOKEN" in html
    assert re.search(r"<fieldset\s+disabled", html)
    resp = post_job(c, token="anything")
    assert resp.status_code == 403 and "read-only" in resp.get_data(as_text=True)
    assert nova.jobs() == []
    ro.extensions["nova"].close()


def test_submission_needs_csrf_and_token(client, nova):
    assert post_job(client, csrf=None).status_code == 400
    assert post_job(client, csrf="forged").status_code == 400
    resp = post_job(client, token=None)
    assert resp.status_code == 403 and "needs the web token" in resp.get_data(as_text=True)
    assert post_job(client, token="wrong-token").status_code == 403
    assert nova.jobs() == []
    resp = post_job(client)
    assert resp.status_code == 303
    job_id = resp.headers["Location"].rsplit("/", 1)[-1]
    job = nova.job(job_id)
    assert [t.input for t in job.tasks] == ["a cat", "b dog"] and job.name == "from the web"
    assert job.params == {"seconds": 0.0, "size": 64, "jitter": 0.0, "jitter_seed": 0}
    # the session is now unlocked: no token needed, CSRF still is
    assert post_job(client, token=None).status_code == 303
    assert post_job(client, token=None, csrf=None).status_code == 400
    assert len(nova.jobs()) == 2


def test_unlock_and_lock(client):
    csrf = csrf_of(client)
    assert client.post("/auth", data={"token": "bad", "csrf_token": csrf}).status_code == 403
    assert client.post("/auth", data={"token": WEB_TOKEN}).status_code == 400  # no CSRF
    resp = client.post("/auth", data={"token": WEB_TOKEN, "csrf_token": csrf,
                                      "next": "//evil.example/x"})
    assert resp.status_code == 303 and resp.headers["Location"] == "/"
    assert ">Lock</button>" in client.get("/").get_data(as_text=True)
    assert client.post("/auth/lock", data={}).status_code == 400
    assert client.post("/auth/lock", data={"csrf_token": csrf, "next": "/workers"}) \
        .headers["Location"] == "/workers"
    assert ">Unlock</button>" in client.get("/").get_data(as_text=True)


def test_file_upload_submission(client, nova):
    data = {"app": "synthetic", "prompts": "", "params": "", "csrf_token": csrf_of(client),
            "token": WEB_TOKEN,
            "prompts_file": (io.BytesIO(b"\xef\xbb\xbfone\r\n# comment\n\ntwo\n"), "p.txt")}
    resp = client.post("/", data=data, content_type="multipart/form-data")
    assert resp.status_code == 303
    [job] = nova.jobs()
    assert [t.input for t in nova.job(job.job_id).tasks] == ["one", "two"]


@pytest.mark.parametrize("fields, expected", [
    ({"prompts": "ok\n\xe2\x80\xae fine\n" + "x" * 4001}, "prompts box:3: prompt is 4001"),
    ({"prompts": "# only a comment\n"}, "no prompts found"),
    ({"params": "seconds=0\nno equals sign"}, "params:2: expected key=value"),
    ({"params": "colour=red"}, "unknown parameter &#39;colour&#39;"),
    ({"params": "seconds=-1"}, "seconds"),
    ({"app": "nosuchapp"}, "unknown app"),
    ({"priority": "5000"}, "priority must be"),
])
def test_bad_submissions_show_the_error_and_enqueue_nothing(client, nova, fields, expected):
    resp = post_job(client, **fields)
    html = resp.get_data(as_text=True)
    assert resp.status_code == 400 and expected in html
    assert nova.jobs() == []


def test_bad_prompt_file_names_file_and_line(client, nova):
    data = {"app": "synthetic", "prompts": "", "params": "", "csrf_token": csrf_of(client),
            "token": WEB_TOKEN,
            "prompts_file": (io.BytesIO(b"fine\nbroken \xff here\n"), "../../my prompts.txt")}
    resp = client.post("/", data=data, content_type="multipart/form-data")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 400 and "my prompts.txt:2: invalid UTF-8" in html
    assert "../" not in html.split('id="submit-error"')[1].split("</p>")[0]
    data2 = {**data, "prompts": "also text",
             "prompts_file": (io.BytesIO(b"x\n"), "p.txt")}
    resp = client.post("/", data=data2, content_type="multipart/form-data")
    assert resp.status_code == 400 and "not both" in resp.get_data(as_text=True)
    assert nova.jobs() == []


def test_upload_over_the_limit_is_413_with_a_clear_message(client, nova):
    big = io.BytesIO(b"prompt\n" * (2 * 1024 * 1024 // 7 + 10))
    data = {"app": "synthetic", "csrf_token": csrf_of(client), "token": WEB_TOKEN,
            "prompts_file": (big, "big.txt")}
    resp = client.post("/", data=data, content_type="multipart/form-data")
    assert resp.status_code == 413
    assert "too large: the limit is 2.0 MiB" in resp.get_data(as_text=True)
    assert nova.jobs() == []


def test_requeue_failed_task_needs_token_and_csrf(client, nova, store):
    enqueue(nova, ["boom"], max_attempts=1)
    w = StandInWorker(nova, store, "w1")
    [lease] = w.claim()
    nova.fail("w1", lease, "error", "kaput")
    tid = lease.task_id
    csrf = csrf_of(client)
    assert client.post("/failed/retry", data={"task": tid, "token": WEB_TOKEN}).status_code == 400
    assert client.post("/failed/retry", data={"task": tid, "csrf_token": csrf}).status_code == 403
    assert nova.task(tid).state == "failed"
    resp = client.post("/failed/retry", data={"task": tid, "csrf_token": csrf,
                                              "token": WEB_TOKEN})
    assert resp.status_code == 303 and nova.task(tid).state == "pending"
    page = client.get("/failed").get_data(as_text=True)
    assert f"Task {tid} is back in the queue." in page
    resp = client.post("/failed/retry", data={"task": tid, "csrf_token": csrf},
                       follow_redirects=True)
    assert f"Cannot requeue {tid}" in resp.get_data(as_text=True)
    resp = client.post("/failed/retry", data={"task": "../x", "csrf_token": csrf},
                       follow_redirects=True)
    assert "not a task id" in resp.get_data(as_text=True)


@pytest.mark.parametrize("origin, host, allowed, ok", [
    (None, "h:8000", (), True),
    ("http://h:8000", "h:8000", (), True),
    ("https://h:8000", "h:8000", (), True),
    ("http://evil.example", "h:8000", (), False),
    ("http://h:8001", "h:8000", (), False),
    ("null", "h:8000", (), False),
    ("http://h:8000.evil.example", "h:8000", (), False),
    ("https://gallery.example", "internal:8000", ("https://gallery.example/",), True),
])
def test_origin_rules(origin, host, allowed, ok):
    assert origin_allowed(origin, host, allowed) is ok


def test_trusted_hosts_refuse_other_host_headers(web_settings):
    from nova_queue.web import create_app

    app = create_app({"TESTING": True, "SECRET_KEY": "x", "TRUSTED_HOSTS": ["gallery.example"]},
                     settings=web_settings)
    c = app.test_client()
    assert c.get("/api/jobs", headers={"Host": "gallery.example"}).status_code == 200
    resp = c.get("/", headers={"Host": "rebound.evil.example"})
    assert resp.status_code == 400 and b"untrusted host" in resp.data
    assert "ws://" not in resp.headers["Content-Security-Policy"]
    app.extensions["nova"].close()


@pytest.mark.parametrize("ns", ["*", "?", "[a-z]*", "d\\efault"])
def test_a_glob_namespace_is_refused_by_the_web_app(monkeypatch, ns):
    """Issue 13: the gallery reads its namespace from NOVA_NAMESPACE (create_app() under
    gunicorn); a glob would make the documented ACL rule match every namespace."""
    from nova_queue.errors import ConfigError
    from nova_queue.web import create_app

    monkeypatch.setenv("NOVA_NAMESPACE", ns)
    with pytest.raises(ConfigError, match="invalid namespace"):
        create_app()


def multipart(fields: dict[str, bytes], boundary: str = "nova-test-boundary") -> tuple[bytes, str]:
    """A raw multipart body (the bytes exactly as given: no re-encoding)."""
    parts = [b"--" + boundary.encode() + b'\r\nContent-Disposition: form-data; name="'
             + name.encode() + b'"\r\n\r\n' + value + b"\r\n" for name, value in fields.items()]
    body = b"".join(parts) + b"--" + boundary.encode() + b"--\r\n"
    return body, f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize("field, raw, expected", [
    ("prompts", b"fine\nbroken \xff here\n", "prompts box:2: invalid UTF-8 (byte 0xff at offset 12)"),
    ("params", b"seconds=0\nsize=\xc3(", "params:2: invalid UTF-8 (byte 0xc3 at offset 15)"),
    ("name", b"caf\xe9", "form field &#39;name&#39;:1: invalid UTF-8 (byte 0xe9"),
])
def test_invalid_utf8_in_a_multipart_form_is_refused_by_field(client, nova, field, raw,
                                                               expected):
    fields = {"app": b"synthetic", "prompts": b"ok", "params": b"", "name": b"",
              "priority": b"0", "csrf_token": csrf_of(client).encode(),
              "token": WEB_TOKEN.encode(), field: raw}
    body, content_type = multipart(fields)
    resp = client.post("/", data=body, content_type=content_type)
    html = resp.get_data(as_text=True)
    assert resp.status_code == 400 and expected in html, html[-800:]
    assert "\ufffd" not in html
    assert nova.jobs() == []


def test_invalid_utf8_in_an_urlencoded_form_is_refused_by_field(client, nova):
    csrf = csrf_of(client)
    for body, expected in (
            (b"prompts=a%0Ab%FFc", "prompts box:2: invalid UTF-8 (byte 0xff at offset 3)"),
            (b"prompts=ok&name=\xff\xfe", "form field &#39;name&#39;:1: invalid UTF-8")):
        resp = client.post("/", data=body + f"&app=synthetic&token={WEB_TOKEN}"
                           f"&csrf_token={csrf}".encode(),
                           content_type="application/x-www-form-urlencoded")
        html = resp.get_data(as_text=True)
        assert resp.status_code == 400 and expected in html, html[-800:]
        assert "%FF" not in html
    assert nova.jobs() == []
    # a literal "%FF" typed by someone (sent as %25FF) is text, and is accepted
    resp = client.post("/", data=f"app=synthetic&prompts=100%25FF+sure&params=seconds%3D0"
                       f"&token={WEB_TOKEN}&csrf_token={csrf}".encode(),
                       content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 303
    [job] = nova.jobs()
    assert [t.input for t in nova.job(job.job_id).tasks] == ["100%FF sure"]


def test_invalid_utf8_in_other_forms_is_refused_too(client, nova):
    body = f"task=j%FF:1&csrf_token={csrf_of(client)}".encode()
    resp = client.post("/failed/retry", data=body,
                       content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 400
    assert "form field &#39;task&#39;:1: invalid UTF-8" in resp.get_data(as_text=True)
    resp = client.post("/api/jobs", data=b"x=%FF",
                       content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 400
    assert resp.get_json() == {"error": "form field 'x':1: invalid UTF-8 (byte 0xff at offset "
                                        "0); send the form as UTF-8 text"}
