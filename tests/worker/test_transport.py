"""The worker's one transport (``workers/transport.py``): the direct one and the gateway's
link implement every call of :class:`WorkerTransport` with the same signature, and the
direct one's joining, uploads and waiting for work behave as the runtime expects of either.
Against a real Redis and a file store."""

from __future__ import annotations

import inspect
import threading
import time

import pytest

from nova_queue import Settings, TaskSpec
from nova_queue.client import NovaClient
from nova_queue.errors import ObjectExistsError
from nova_queue.stores import open_store
from nova_queue.workers.link import GatewayLink
from nova_queue.workers.transport import DirectTransport, WorkerTransport, open_transport

CALLS = sorted(name for name, member in vars(WorkerTransport).items()
               if inspect.isfunction(member) and not name.startswith("_"))


def test_the_protocol_names_every_call_the_runtime_makes():
    assert CALLS == sorted([
        "hello", "register_worker", "deregister_worker", "event_mark", "wait_for_work",
        "claim", "renew", "complete", "complete_and_claim", "complete_batch", "fail",
        "note_loaded", "note_loading", "upload", "discard", "candidate", "verification"])


@pytest.mark.parametrize("transport", [DirectTransport, GatewayLink])
@pytest.mark.parametrize("call", CALLS)
def test_both_transports_implement_each_call_with_its_signature(transport, call):
    want = inspect.signature(getattr(WorkerTransport, call))
    got = inspect.signature(getattr(transport, call))
    assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
        (p.name, p.kind, p.default) for p in want.parameters.values()], (transport, call)


def test_open_transport_chooses_once_from_the_settings(redis_url, namespace, tmp_path):
    direct = open_transport(Settings(redis_url=redis_url, namespace=namespace))
    gateway = open_transport(Settings(gateway_url="https://gw.example", worker_token="t"))
    assert isinstance(direct, DirectTransport) and isinstance(gateway, GatewayLink)
    assert isinstance(direct, WorkerTransport) and isinstance(gateway, WorkerTransport)
    client = NovaClient.from_settings(Settings(redis_url=redis_url, namespace=namespace))
    given = open_transport(Settings(gateway_url="https://gw.example", worker_token="t"),
                           client=client)
    assert isinstance(given, DirectTransport) and given.client is client


@pytest.fixture
def direct(redis_url, namespace, tmp_path):
    settings = Settings(redis_url=redis_url, namespace=namespace, lease_ttl_s=7.0,
                        heartbeat_interval_s=1.5, store_url=(tmp_path / "store").as_uri())
    transport = DirectTransport(NovaClient.from_settings(settings), settings)
    yield transport
    transport.client.close()


def test_hello_checks_the_pool_and_opens_the_store(direct):
    hello = direct.hello(threading.Event())
    assert hello == {"lease_ttl_s": 7.0, "heartbeat_interval_s": 1.5}  # no worker id given
    assert direct.store is not None


def test_hello_returns_none_when_stopped_while_redis_is_away(tmp_path):
    settings = Settings(redis_url="redis://127.0.0.1:9/0", store_url=tmp_path.as_uri())
    stop = threading.Event()
    stop.set()
    assert DirectTransport(NovaClient.from_settings(settings), settings).hello(stop) is None


def test_an_upload_is_write_once_and_its_own_retry_succeeds(direct):
    direct.hello(threading.Event())
    meta = {"attempt-id": "a1", "worker-id": "w"}
    direct.upload("jobs/j/results/0/g1-a1.png", b"first", "image/png", meta)
    direct.upload("jobs/j/results/0/g1-a1.png", b"first", "image/png", meta)  # a lost reply
    with pytest.raises(ObjectExistsError):
        direct.upload("jobs/j/results/0/g1-a1.png", b"forged", "image/png",
                      {**meta, "attempt-id": "a2"})
    store = open_store(direct.settings.resolved_store_url)
    assert store.get("jobs/j/results/0/g1-a1.png").data == b"first"
    direct.discard("jobs/j/results/0/g1-a1.png")  # its commit was refused
    assert not store.exists("jobs/j/results/0/g1-a1.png")


def test_waiting_for_work_ends_when_a_job_arrives(direct):
    mark = direct.event_mark()
    started = time.monotonic()
    enqueued = []
    timer = threading.Timer(0.3, lambda: enqueued.append(
        direct.client.enqueue("synthetic", [TaskSpec("x")])))
    timer.start()
    try:
        direct.wait_for_work(mark, 20.0, threading.Event())
        assert time.monotonic() - started < 10  # woken, not the full 20 s
    finally:
        timer.join(10)  # the enqueue ends inside the test, never in the next one
    assert enqueued, "the enqueue that was to wake it did not happen"


def test_a_gateway_links_wait_only_sleeps_what_its_long_poll_left():
    link = GatewayLink(Settings(gateway_url="https://gw.example", worker_token="t"))
    assert link.event_mark() is None
    stop = threading.Event()
    started = time.monotonic()
    link.wait_for_work(None, 0.2, stop)
    assert 0.15 <= time.monotonic() - started < 5
    stop.set()
    link.wait_for_work(None, 30.0, stop)  # a stop ends it at once
    assert time.monotonic() - started < 10
