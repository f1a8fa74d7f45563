"""The worker's link to a gateway: TLS verified against a private CA, errors turned back
into the direct worker's (401, unreachable), and a real worker over a slow link (round
trips over 1 s)."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
import redis
from novatests.gateway import DelayProxy, gateway_worker
from novatests.serving import served
from novatests.tls import make_certs, server_context

from nova_queue import Settings, TaskSpec, errors, tokens
from nova_queue.keys import result_key
from nova_queue.local import free_port
from nova_queue.serving import serve_until_interrupted, stop, werkzeug_server
from nova_queue.workers.link import GatewayLink, GatewayUnreachable


def link(url: str, token: str, **extra) -> GatewayLink:
    return GatewayLink(Settings(gateway_url=url, worker_token=token, **extra))


def test_the_link_checks_tls_against_the_ca_it_is_given(gw_app, make_token, tmp_path):
    certs = make_certs(tmp_path)
    token = make_token("tls")
    with served(werkzeug_server(gw_app, ssl_context=server_context(certs))) as port:
        url = f"https://127.0.0.1:{port}"
        hello = link(url, token, gateway_ca_bundle=str(certs["ca.crt"])).hello(threading.Event())
        assert hello is not None and hello["worker_id"].startswith("tls.")
        with pytest.raises(errors.ConfigError, match="TLS check"):
            link(url, token).hello(threading.Event())  # the system CAs do not know it


def test_link_errors_mean_what_they_mean_to_a_direct_worker(live_gateway, make_token):
    with pytest.raises(errors.TokenError, match="unknown or revoked"):
        link(live_gateway, "wrong").hello(threading.Event())
    dead = link(f"http://127.0.0.1:{free_port()}", "t")
    started = time.monotonic()
    with pytest.raises(GatewayUnreachable) as info:
        dead.renew("w", [])
    assert isinstance(info.value, redis.ConnectionError)  # the runtime's retry paths apply
    assert time.monotonic() - started < 10
    with pytest.raises(errors.ConfigError, match="NOVA_WORKER_TOKEN"):
        link(live_gateway, "")
    with pytest.raises(errors.ConfigError, match="https://"):
        link("ftp://x", "t")


@pytest.mark.slow
def test_a_worker_over_a_slow_link(gw_settings, admin, tmp_path, namespace):
    """Round trips of 1.2 s (0.6 s each way): heartbeats every 2 s and 10 s leases hold,
    the job finishes with no lease lost."""
    from nova_queue.web.gateway import create_app

    settings = dataclasses.replace(gw_settings, lease_ttl_s=10.0, heartbeat_interval_s=2.0)
    app = create_app(settings=settings)
    server = werkzeug_server(app)
    thread = threading.Thread(target=serve_until_interrupted,
                              args=(server, None, app.extensions["nova_gateway"].close),
                              daemon=True)
    thread.start()
    proxy = DelayProxy(server.port, 0.6)
    token = tokens.create(admin, "far")
    job = admin.enqueue("synthetic", [TaskSpec(f"far {i}", 0.5) for i in range(2)],
                        params={"seconds": 0.5, "size": 64})
    w = gateway_worker(proxy.url, token, namespace, tmp_path / "far", "--app", "synthetic",
                       "--no-benchmark", "--burst", name="far")
    try:
        assert w.wait(180) == 0, w.output()
        st = admin.job(job)
        assert st.state == "done" and all(t.lease_gen == 1 for t in st.tasks), w.output()
        assert not any(e.type == "requeued" for e in admin.events(count=1000))
    finally:
        w.close()
        proxy.close()
        stop(server)
        thread.join(10)


def _joined(url: str, token: str) -> tuple[GatewayLink, str]:
    one = link(url, token)
    hello = one.hello(threading.Event())
    assert hello is not None
    one.register_worker(hello["worker_id"], {"name": hello["worker_id"]}, ["synthetic"])
    return one, hello["worker_id"]


def test_a_gateway_worker_fetches_the_result_it_verifies(live_gateway, admin, make_token):
    """Over real HTTP: a new token's result (a large one, through the store) is held; a
    vouched token's worker claims its verification and reads exactly those bytes, and
    nothing for a slot the task does not have."""
    maker, maker_id = _joined(live_gateway, make_token("maker", trust="new"))
    checker, checker_id = _joined(live_gateway, make_token("checker"))
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    [lease] = maker.claim(maker_id, "synthetic").leases
    data = bytes(range(256)) * 64  # 16 KiB: the store's, not inline
    key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")
    maker.upload(key, data, "image/png", {})
    assert maker.complete(maker_id, lease, key, run_s=0.1, warm=True).job_finished is False
    [check] = checker.claim(checker_id, "synthetic").leases
    assert check.verify == {"cand": key}
    assert checker.candidate(check, "cand") == data
    with pytest.raises(errors.ObjectNotFoundError, match="no result cand2"):
        checker.candidate(check, "cand2")
    with pytest.raises(errors.ObjectNotFoundError, match="not this worker's lease"):
        maker.candidate(check, "cand")
