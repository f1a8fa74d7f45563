"""Write access in the gallery: server-side unlock sessions, the unlock rate limit, cookie
flags, and the ``next`` redirect of the unlock and lock forms (no open redirect)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re

import pytest
from novatests.web import WEB_TOKEN, csrf_of

from nova_queue import Settings
from nova_queue.local import wait_for
from nova_queue.web import auth
from nova_queue.web.security import safe_next_path

#: ``next`` values that must never leave the site (or break the response).
ATTACKS = [
    "/\t/evil.example/phish",  # browsers drop the tab: //evil.example/phish
    "/\n/evil.example", "/\r/evil.example", "/\r\nX-Injected: 1", "/x\r\nSet-Cookie: a=b",
    "//evil.example", "///evil.example", "//evil.example/%2e%2e", "/\\evil.example",
    "/\\/evil.example", "\\\\evil.example", "https://evil.example/", "http:/evil.example",
    "javascript:alert(1)", "data:text/html,x", "evil.example", "./x", " /x", "/x y",
    "/\u3000/evil.example", "/\u00a0/evil.example", "/\u202e/x", "/\u200b/evil.example",
    "/\x00/x", "/\x7f/x", "/\x0b/evil.example", "/\u2028/evil.example", "",
    "/" + "a" * 5000,
]
SAFE = ["/", "/workers", "/jobs/01abc", "/jobs/01abc?start=500", "/events?job=x#top",
        "/%2F%2Fevil.example", "/jobs/caf\u00e9", "/a:b"]


def unlock(client, token: str = WEB_TOKEN, **kw):
    return client.post("/auth", data={"token": token, "csrf_token": csrf_of(client), **kw})


def unlocked(client) -> bool:
    return ">Lock</button>" in client.get("/").get_data(as_text=True)


def session_of(app, client) -> dict:
    cookie = client.get_cookie("session")
    return dict(app.session_interface.get_signing_serializer(app).loads(cookie.value))


# ---- A: next ------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ATTACKS)
def test_next_paths_that_leave_the_site_go_home(target):
    assert safe_next_path(target) == "/"


@pytest.mark.parametrize("target", SAFE)
def test_next_paths_on_the_site_are_kept(target):
    assert safe_next_path(target) == target


def test_unlock_and_lock_never_redirect_off_site_nor_fail(client):
    csrf = csrf_of(client)
    for target in ATTACKS:
        resp = client.post("/auth/lock", data={"csrf_token": csrf, "next": target})
        assert resp.status_code == 303 and resp.headers["Location"] == "/", repr(target)
        assert "X-Injected" not in resp.headers and "a=b" not in str(resp.headers)
    for target in ("/\t/evil.example/phish", "/\r\nX-Injected: 1", "//evil.example"):
        resp = unlock(client, next=target)
        assert resp.status_code == 303 and resp.headers["Location"] == "/", repr(target)
    resp = client.post("/auth/lock", data={"csrf_token": csrf, "next": "/jobs/x?start=500"})
    assert resp.headers["Location"] == "/jobs/x?start=500"


def test_crafted_404_page_carries_no_hostile_next(client):
    resp = client.get("/%09/evil.example/phish")
    assert resp.status_code == 404
    nexts = re.findall(r'name="next" value="([^"]*)"', resp.get_data(as_text=True))
    assert nexts == ["/"]
    assert re.findall(r'name="next" value="([^"]*)"',
                      client.get("/workers").get_data(as_text=True)) == ["/workers"]


# ---- B: server-side sessions --------------------------------------------------------------

def test_the_cookie_holds_a_random_nonce_that_says_nothing_about_the_token(app, client, nova):
    assert unlock(client).status_code == 303 and unlocked(client)
    first = session_of(app, client)["write"]
    fixed_mark = hmac.new(WEB_TOKEN.encode(), b"nova-queue web write access",
                          hashlib.sha256).hexdigest()
    assert WEB_TOKEN not in first and first != fixed_mark and len(first) >= 40
    key = nova.keys.web_session(hashlib.sha256(first.encode()).hexdigest())
    assert 0 < nova.redis.ttl(key) <= auth.UNLOCK_TTL_S
    assert WEB_TOKEN not in nova.redis.get(key)  # an HMAC under the app's secret
    other = app.test_client()
    unlock(other)
    assert session_of(app, other)["write"] != first  # per unlock, not per token
    # the server decides: without its Redis record the same cookie is locked
    nova.redis.delete(key)
    assert not unlocked(client)


def test_lock_ends_every_copy_of_the_cookie(app, client):
    unlock(client)
    thief = app.test_client()
    thief.set_cookie("session", client.get_cookie("session").value)
    assert unlocked(thief)
    client.post("/auth/lock", data={"csrf_token": csrf_of(client)})
    assert not unlocked(client) and not unlocked(thief)


def test_a_new_token_locks_every_session(app, client, web_settings):
    from nova_queue.web import create_app

    unlock(client)
    cookie = client.get_cookie("session").value
    rotated = create_app({"TESTING": True, "SECRET_KEY": "test-secret"},
                         settings=Settings(**{**web_settings.__dict__,
                                              "web_token": "a-brand-new-token"}))
    c = rotated.test_client()
    c.set_cookie("session", cookie)
    assert not unlocked(c)
    resp = c.post("/", data={"app": "synthetic", "prompts": "x", "csrf_token": csrf_of(c)})
    assert resp.status_code == 403
    rotated.extensions["nova"].close()


def test_a_replica_with_the_same_secret_shares_sessions(app, client, web_settings):
    from nova_queue.web import create_app

    unlock(client)
    replica = create_app({"TESTING": True, "SECRET_KEY": "test-secret"}, settings=web_settings)
    c = replica.test_client()
    c.set_cookie("session", client.get_cookie("session").value)
    assert unlocked(c)
    replica.extensions["nova"].close()


# ---- B: rate limit ------------------------------------------------------------------------

def fails_key(nova, client_addr: str = "127.0.0.1") -> str:
    return nova.keys.web_unlock_fails(client_addr)


def test_wrong_tokens_are_rate_limited_per_address(app, client, nova, web_settings):
    from nova_queue.web import create_app

    csrf = csrf_of(client)
    codes = [client.post("/auth", data={"token": f"guess-{i}", "csrf_token": csrf}).status_code
             for i in range(300)]
    assert codes[:auth.MAX_ATTEMPTS] == [403] * auth.MAX_ATTEMPTS
    assert set(codes[auth.MAX_ATTEMPTS:]) == {429}  # only 10 of 300 guesses were compared
    resp = unlock(client)  # even the right token: the address is blocked, not the guess
    assert resp.status_code == 429
    retry_after = int(resp.headers["Retry-After"])
    assert 1 <= retry_after <= auth.ATTEMPT_WINDOW_S
    assert f"try again in {retry_after} s" in resp.get_data(as_text=True)
    assert not unlocked(client)
    # the POST that submits a job with a token is limited the same way; nothing enqueued
    resp = client.post("/", data={"app": "synthetic", "prompts": "x", "token": WEB_TOKEN,
                                  "csrf_token": csrf})
    assert resp.status_code == 429 and "Retry-After" in resp.headers and nova.jobs() == []
    # another web replica sees the same count (it lives in Redis) ...
    replica = create_app({"TESTING": True, "SECRET_KEY": "test-secret"}, settings=web_settings)
    assert unlock(replica.test_client()).status_code == 429
    replica.extensions["nova"].close()
    # ... while another address is not affected
    other = app.test_client()
    other.environ_base["REMOTE_ADDR"] = "192.0.2.7"
    assert unlock(other).status_code == 303 and unlocked(other)
    # when the window ends (seeded: the key expires now), the right token works again
    nova.redis.pexpire(fails_key(nova), 1)
    wait_for(lambda: not nova.redis.exists(fails_key(nova)), message="window end")
    assert unlock(client).status_code == 303 and unlocked(client)


def test_a_correct_token_clears_the_count(client, nova):
    csrf = csrf_of(client)
    for i in range(auth.MAX_ATTEMPTS - 1):
        client.post("/auth", data={"token": f"typo-{i}", "csrf_token": csrf})
    assert int(nova.redis.get(fails_key(nova))) == auth.MAX_ATTEMPTS - 1
    assert unlock(client).status_code == 303
    assert not nova.redis.exists(fails_key(nova))


def test_no_token_no_count(client, nova):
    csrf = csrf_of(client)
    for _ in range(3):
        assert client.post("/auth", data={"csrf_token": csrf}).status_code == 403
        assert client.post("/auth", data={"token": "x"}).status_code == 400  # no CSRF
    assert not nova.redis.exists(fails_key(nova))


@pytest.mark.parametrize("addr, expected", [
    ("203.0.113.9", "203.0.113.9"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:1:2:3", "2001:db8:1:2::/64"),
    ("::ffff:198.51.100.4", "198.51.100.4"),
])
def test_client_address_groups_ipv6_by_64(app, addr, expected):
    with app.test_request_context("/", environ_base={"REMOTE_ADDR": addr}):
        assert auth.client_address() == expected


def test_proxy_hops_take_the_address_and_https_from_the_proxy(web_settings, nova):
    from nova_queue.web import create_app

    direct = create_app({"TESTING": True, "SECRET_KEY": "s"}, settings=web_settings)
    c = direct.test_client()
    csrf = csrf_of(c)
    for i in range(auth.MAX_ATTEMPTS + 1):  # a spoofed X-Forwarded-For changes nothing
        resp = c.post("/auth", data={"token": "bad", "csrf_token": csrf},
                      headers={"X-Forwarded-For": f"198.51.100.{i}"})
    assert resp.status_code == 429
    direct.extensions["nova"].close()

    proxied = create_app({"TESTING": True, "SECRET_KEY": "s"},
                         settings=Settings(**{**web_settings.__dict__, "web_proxy_hops": 1}))
    c = proxied.test_client()
    headers = {"X-Forwarded-For": "198.51.100.77", "X-Forwarded-Proto": "https"}
    c.get("/", headers=headers)
    cookie = c.get_cookie("session")
    assert cookie is not None and cookie.secure  # HTTPS at the proxy: a Secure cookie
    token = session_of(proxied, c)["csrf"]
    resp = c.post("/auth", data={"token": "bad", "csrf_token": token}, headers=headers)
    assert resp.status_code == 403
    assert int(nova.redis.get(fails_key(nova, "198.51.100.77"))) == 1
    proxied.extensions["nova"].close()


def test_a_proxy_without_proxy_hops_is_warned_about_once(web_settings, caplog):
    """Behind a proxy with NOVA_WEB_PROXY_HOPS unset, every client shares the proxy's
    address (one client can use up the unlock attempts for all): the first request that
    carries a proxy's header logs one warning naming the setting."""
    from nova_queue.web import create_app

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING and "NOVA_WEB_PROXY_HOPS" in r.getMessage()]

    caplog.set_level(logging.INFO)
    direct = create_app({"TESTING": True, "SECRET_KEY": "s"}, settings=web_settings)
    c = direct.test_client()
    assert c.get("/").status_code == 200 and warnings() == []  # no proxy: nothing to say
    for hop in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):
        assert c.get("/", headers={"X-Forwarded-For": hop}).status_code == 200
    [warning] = warnings()
    assert "X-Forwarded-For" in warning and "NOVA_WEB_PROXY_HOPS is 0" in warning
    direct.extensions["nova"].close()
    caplog.clear()
    proxied = create_app({"TESTING": True, "SECRET_KEY": "s"},
                         settings=Settings(**{**web_settings.__dict__, "web_proxy_hops": 1}))
    proxied.test_client().get("/", headers={"X-Forwarded-For": "198.51.100.9"})
    assert warnings() == []  # configured: the address comes from the header
    proxied.extensions["nova"].close()


def test_cookie_is_secure_over_https_and_samesite_always(client):
    client.get("/")
    plain = client.get_cookie("session")
    assert plain.http_only and plain.same_site == "Lax" and not plain.secure
    https = client.application.test_client()
    https.get("/", base_url="https://localhost")
    cookie = https.get_cookie("session")
    assert cookie.secure and cookie.http_only and cookie.same_site == "Lax"
