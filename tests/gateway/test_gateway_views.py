"""What the pool's owner sees of gateway workers: the token in the CLI's ``workers`` and the
gallery's Workers page, ``tokens list`` after use, and no doctor orphans for token keys."""

from __future__ import annotations

from click.testing import CliRunner
from novatests.gateway import join

from nova_queue import doctor, tokens
from nova_queue.cli import cli


def test_workers_show_their_token(gw, admin, make_token, gw_settings):
    token = make_token("lab-pc")
    wid = join(gw, token)
    env = {"NOVA_REDIS_URL": gw_settings.redis_url, "NOVA_NAMESPACE": gw_settings.namespace}
    res = CliRunner().invoke(cli, ["workers"], env=env)
    assert res.exit_code == 0 and "token lab-pc" in res.output, res.output
    res = CliRunner().invoke(cli, ["workers", "--json"], env=env)
    assert '"token": "lab-pc"' in res.output

    from nova_queue.web import create_app

    web = create_app({"TESTING": True}, settings=gw_settings)
    page = web.test_client().get("/workers", headers={"Host": "localhost"})
    assert page.status_code == 200 and "lab-pc" in page.get_data(as_text=True)
    (t,) = tokens.list_tokens(admin)
    assert t.worker == wid and t.last_used_ms and t.registered == ("synthetic",)


def test_token_and_rate_keys_are_no_orphans(gw, admin, make_token):
    token = make_token("doc")
    join(gw, token)
    assert any(":gw:rate:" in k for k in admin.redis.scan_iter(match=admin.keys.prefix + "*"))
    report = doctor.diagnose(admin)
    orphans = [f.message for f in report.findings if f.check == "orphans"]
    assert not orphans, orphans
    admin.redis.set(admin.keys.prefix + "token:not-a-digest", "x")  # a stray key still shows
    orphans = [f.message for f in doctor.diagnose(admin).findings if f.check == "orphans"]
    assert any("token:not-a-digest" in m for m in orphans), orphans
