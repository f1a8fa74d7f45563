"""Result-store contract, run on the file store and on S3 (a real SeaweedFS server)."""

from __future__ import annotations

import os
import threading
import traceback
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from novatests.s3 import ACCESS_KEY, SECRET_KEY, SeaweedS3, pick_ports

from nova_queue.errors import ConfigError, ObjectExistsError, ObjectNotFoundError, StoreError
from nova_queue.stores import (
    FileStore,
    ResultStore,
    S3Store,
    artifact_key,
    open_store,
    result_key,
)
from nova_queue.stores.s3 import is_unsupported_condition

pytestmark = pytest.mark.timeout(60)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PROMPT = ' a cat 🐱 sitting on the moon 月の猫 고양이 — 100% "real"\nsecond line '


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """Each store kind, empty."""
    if request.param == "file":
        s: ResultStore = FileStore(tmp_path / "store")
    else:
        s = S3Store(request.getfixturevalue("s3_store_url"))
    yield s
    s.close()


def race(n: int, fn) -> list:
    """Run ``fn(i)`` in ``n`` threads released together; return results or exceptions."""
    barrier = threading.Barrier(n)
    out: list = [None] * n

    def run(i: int) -> None:
        barrier.wait(timeout=10)
        try:
            out[i] = fn(i)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a writer hung"
    return out


# -- the contract, on every store ----------------------------------------------------------


def test_round_trip_keeps_bytes_content_type_and_unicode_metadata(store):
    key = result_key("job1", 7, 2, "att9", "png")
    store.put(key, PNG, "image/png", {"Prompt": PROMPT, "seed": "42", "lease-gen": "2"})
    obj = store.get(key)
    assert (obj.key, obj.data, obj.content_type) == (key, PNG, "image/png")
    assert dict(obj.metadata) == {"prompt": PROMPT, "seed": "42", "lease-gen": "2"}
    info = store.head(key)
    assert (info.key, info.size, info.content_type) == (key, len(PNG), "image/png")
    assert dict(info.metadata) == dict(obj.metadata)
    store.put("plain", b"", "text/plain")
    assert store.get("plain").data == b"" and dict(store.get("plain").metadata) == {}


def test_put_is_write_once_unless_overwrite(store):
    store.put("jobs/j/manifest.json", b"v1", "application/json", {"version": "1"})
    with pytest.raises(ObjectExistsError, match="manifest.json"):
        store.put("jobs/j/manifest.json", b"v2", "text/plain", {"version": "2"})
    obj = store.get("jobs/j/manifest.json")
    assert (obj.data, obj.content_type, dict(obj.metadata)) == (
        b"v1", "application/json", {"version": "1"})
    store.put("jobs/j/manifest.json", b"v3", "text/plain", {"version": "3"}, overwrite=True)
    obj = store.get("jobs/j/manifest.json")
    assert (obj.data, obj.content_type, dict(obj.metadata)) == (
        b"v3", "text/plain", {"version": "3"})


def test_absent_keys_and_idempotent_delete(store):
    assert store.head("jobs/none/x.png") is None
    assert store.exists("jobs/none/x.png") is False
    with pytest.raises(ObjectNotFoundError, match="jobs/none/x.png"):
        store.get("jobs/none/x.png")
    store.delete("jobs/none/x.png")  # absent: no error
    store.put("jobs/a/x.png", b"x", "image/png")
    assert store.exists("jobs/a/x.png")
    store.delete("jobs/a/x.png")
    store.delete("jobs/a/x.png")
    assert not store.exists("jobs/a/x.png")
    with pytest.raises(ObjectNotFoundError):
        store.get("jobs/a/x.png")
    store.put("jobs/a/x.png", b"again", "image/png")  # a deleted key can be written again
    assert store.get("jobs/a/x.png").data == b"again"


def test_list_by_prefix_is_sorted_and_shows_only_objects(store):
    keys = ["jobs/b/results/00001-g1-x.png", "jobs/a/results/00010-g1-x.png",
            "jobs/a/manifest.json", "jobs/a/results/00002-g3-y.png", "jobs/ab/z.zip", "top"]
    for k in keys:
        store.put(k, k.encode(), "application/octet-stream", {"k": "v"})
    assert list(store.list()) == sorted(keys)
    assert list(store.list("jobs/a/")) == [
        "jobs/a/manifest.json", "jobs/a/results/00002-g3-y.png",
        "jobs/a/results/00010-g1-x.png"]
    assert list(store.list("jobs/a")) == sorted(k for k in keys if k.startswith("jobs/a"))
    assert list(store.list("jobs/a/results/0001")) == ["jobs/a/results/00010-g1-x.png"]
    assert list(store.list("nothing/")) == []
    store.delete("jobs/a/manifest.json")
    assert "jobs/a/manifest.json" not in list(store.list("jobs/"))


@pytest.mark.parametrize("key", ["../x", "/abs", "a/../b", "a\\b", "", "a//b", ".hidden",
                                 "a/./b", "a/", "sp ace", "x" * 600])
def test_invalid_keys_are_rejected_by_every_operation(store, key):
    calls = [lambda: store.put(key, b"x", "text/plain"), lambda: store.get(key),
             lambda: store.head(key), lambda: store.exists(key), lambda: store.delete(key),
             lambda: store.presign(key)]
    for call in calls:
        with pytest.raises(StoreError, match="invalid object key") as err:
            call()
        assert err.type is StoreError  # not ObjectNotFoundError: nothing was looked up
    assert list(store.list()) == []


def test_invalid_metadata_is_rejected_before_writing(store):
    for bad in ({"bad key": "v"}, {"under_score": "v"}, {"n": 1}, {"a": "v", "A": "w"},
                {"big": "🐱" * 200}):
        with pytest.raises(StoreError):
            store.put("k", b"x", "text/plain", bad)
    assert not store.exists("k")
    store.put("k", b"x", "text/plain", {"fits": "x" * 1500})
    assert store.get("k").metadata["fits"] == "x" * 1500


def test_concurrent_write_once_has_exactly_one_winner(store):
    # SeaweedFS queues racing conditional puts behind a lock it retries each second, so
    # one S3 round already takes seconds; the file store is cheap to race more often.
    for round_ in range(5 if isinstance(store, FileStore) else 1):
        key = f"jobs/race/results/{round_:05d}-g1-a.png"
        out = race(8, lambda i, key=key: store.put(key, f"writer {i}".encode(), "text/plain",
                                                  {"writer": str(i)}))
        winners = [i for i, r in enumerate(out) if r is None]
        losers = [r for r in out if r is not None]
        assert len(winners) == 1, out
        assert all(isinstance(r, ObjectExistsError) for r in losers), losers
        obj = store.get(key)
        # The winner's bytes and the winner's metadata: a loser never replaces either.
        assert obj.data == f"writer {winners[0]}".encode()
        assert dict(obj.metadata) == {"writer": str(winners[0])}


# -- key layout and dispatch ---------------------------------------------------------------


def test_result_and_artifact_key_layout():
    assert result_key("j1", 3, 2, "a1b2", "png") == "jobs/j1/results/00003-g2-a1b2.png"
    assert result_key("j1", 123456, 10, "x", ".webp") == "jobs/j1/results/123456-g10-x.webp"
    assert artifact_key("j1", "manifest.json") == "jobs/j1/manifest.json"
    assert artifact_key("j1", "j1.zip") == "jobs/j1/j1.zip"
    # One key per lease: a stale lease's result can never land on a newer lease's key.
    assert result_key("j", 0, 1, "a", "png") != result_key("j", 0, 2, "a", "png")
    for bad in [lambda: result_key("a/b", 0, 1, "x", "png"),
                lambda: result_key("..", 0, 1, "x", "png"),
                lambda: result_key("j", -1, 1, "x", "png"),
                lambda: result_key("j", 0, 1, "x/y", "png"),
                lambda: result_key("j", 0, True, "x", "png"),
                lambda: artifact_key("j", "../etc"), lambda: artifact_key("j", "a/b"),
                lambda: artifact_key("j", "")]:
        with pytest.raises(StoreError):
            bad()


def test_open_store_dispatches_file_urls(tmp_path):
    store = open_store((tmp_path / "r").as_uri())
    assert isinstance(store, FileStore) and store.url == (tmp_path / "r").as_uri()
    assert (tmp_path / "r").is_dir()
    assert store.presign("a") is None
    assert open_store(f"file://localhost{tmp_path}/q").url == (tmp_path / "q").as_uri()


@pytest.mark.parametrize("url", ["redis://user:hunter2@host:6379/0", "ftp://u:hunter2@h/x",
                                 "file://relative/dir", "/abs/path", "s3://UPPER/x",
                                 "s3://u:hunter2@bucket/x", "s3://bucket/x?secret=hunter2",
                                 "s3://bucket/x?endpoint=http://ak:hunter2@127.0.0.1:1",
                                 "s3://bucket/../x", "s3://bucket/x?endpoint=ftp://h"])
def test_open_store_rejects_bad_urls_without_leaking_credentials(url):
    with pytest.raises(ConfigError) as err:
        open_store(url)
    text = "".join(traceback.format_exception(err.value))
    assert "hunter2" not in text
    assert "URL" in str(err.value)


def test_file_store_never_leaves_its_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    store = FileStore(tmp_path / "root")
    os.symlink(outside, tmp_path / "root" / "link")
    with pytest.raises(StoreError, match="outside"):
        store.put("link/x", b"x", "text/plain")
    assert list(outside.iterdir()) == []
    with pytest.raises(ConfigError, match="absolute"):
        FileStore("relative/dir")


def test_file_store_hides_sidecars_temp_files_and_foreign_files(tmp_path):
    store = FileStore(tmp_path)
    store.put("jobs/j/a.png", b"a", "image/png", {"p": "v"})
    (tmp_path / "jobs" / "j" / ".a.png.1234.tmp").write_bytes(b"crash leftover")
    (tmp_path / "jobs" / "j" / "bad name.txt").write_bytes(b"dropped in by hand")
    internal = {p.name for p in (tmp_path / "jobs" / "j").iterdir()}
    assert ".a.png.meta.json" in internal and ".a.png.1234.tmp" in internal
    assert (tmp_path / ".lock").exists()
    assert list(store.list()) == ["jobs/j/a.png"]
    (tmp_path / "jobs" / "j" / "raw.bin").write_bytes(b"no sidecar")
    obj = store.get("jobs/j/raw.bin")
    assert (obj.data, obj.content_type, dict(obj.metadata)) == (
        b"no sidecar", "application/octet-stream", {})


# -- S3 only -------------------------------------------------------------------------------


@pytest.mark.s3
def test_s3_creates_its_bucket_even_when_openers_race(s3_server: SeaweedS3):
    bucket = f"t-create-{uuid.uuid4().hex[:12]}"
    client = s3_server.client()
    with pytest.raises(client.exceptions.ClientError):
        client.head_bucket(Bucket=bucket)
    url = f"s3://{bucket}/p?endpoint={s3_server.endpoint}"
    stores = race(4, lambda i: open_store(url))
    assert all(isinstance(s, S3Store) for s in stores), stores
    client.head_bucket(Bucket=bucket)
    stores[0].put("k", b"v", "text/plain")
    assert stores[3].get("k").data == b"v"
    head = client.head_object(Bucket=bucket, Key="p/k")  # stored under the URL's prefix
    assert head["ContentLength"] == 1
    assert stores[0].url == url and "secret" not in stores[0].url.lower()
    for s in stores:
        s.close()
    client.close()


@pytest.mark.s3
def test_s3_list_ignores_objects_outside_the_prefix(s3_server, s3_store_url):
    store = open_store(s3_store_url)
    client = s3_server.client()
    client.put_object(Bucket=store.bucket, Key="elsewhere/x", Body=b"x")
    client.put_object(Bucket=store.bucket, Key="resultsX/y", Body=b"y")
    client.put_object(Bucket=store.bucket, Key="results/bad key", Body=b"z")
    store.put("a", b"a", "text/plain")
    assert list(store.list()) == ["a"]
    client.close()
    store.close()


@pytest.mark.s3
def test_s3_presigned_url_downloads_over_http(s3_server, s3_store_url):
    store = open_store(s3_store_url, public_endpoint=s3_server.endpoint)
    store.put("jobs/j/results/00000-g1-a.png", PNG, "image/png")
    url = store.presign("jobs/j/results/00000-g1-a.png", expires_s=120)
    assert url.startswith(s3_server.endpoint + "/") and "X-Amz-Signature=" in url
    assert SECRET_KEY not in url
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.read() == PNG
        assert resp.headers["Content-Type"] == "image/png"
    # The server checks signatures: the same URL unsigned is refused.
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url.split("?")[0], timeout=10)
    assert err.value.code == 403
    assert open_store(s3_store_url).presign("jobs/j/results/00000-g1-a.png") is None
    store.close()


@pytest.mark.s3
def test_s3_write_once_without_conditional_writes(s3_store_url):
    store = S3Store(s3_store_url, conditional_writes=False)
    store.put("k", b"1", "text/plain")
    with pytest.raises(ObjectExistsError):
        store.put("k", b"2", "text/plain")
    store.put("k", b"3", "text/plain", overwrite=True)
    assert store.get("k").data == b"3"
    store.close()


def test_unsupported_conditional_writes_are_recognised():
    from botocore.exceptions import ClientError

    def error(code: str, status: int) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "m"},
                            "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")

    assert is_unsupported_condition(error("NotImplemented", 501))
    assert is_unsupported_condition(error("", 501))
    assert is_unsupported_condition(error("InvalidArgument", 400))
    assert not is_unsupported_condition(error("PreconditionFailed", 412))
    assert not is_unsupported_condition(error("AccessDenied", 403))


@pytest.mark.s3
def test_s3_errors_never_contain_the_secret(s3_server, s3_store_url, monkeypatch):
    wrong = "wrong-secret-Zq8XyW3"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    with pytest.raises(StoreError) as err:
        open_store(s3_store_url)
    text = "".join(traceback.format_exception(err.value))
    assert "403" in str(err.value) or "Signature" in str(err.value)
    assert wrong not in text and SECRET_KEY not in text

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    dead = f"s3://bucket-x/p?endpoint=http://127.0.0.1:{pick_ports(1)[0]}"
    with pytest.raises(StoreError) as err:
        S3Store(dead, connect_timeout_s=1, read_timeout_s=1)
    text = "".join(traceback.format_exception(err.value))
    assert "127.0.0.1" in str(err.value) and SECRET_KEY not in text and ACCESS_KEY not in text


@pytest.mark.s3
@pytest.mark.slow
def test_s3_server_restarts_with_its_data_and_errors_while_down(s3_server, s3_store_url):
    store = S3Store(s3_store_url, connect_timeout_s=1, read_timeout_s=2)
    store.put("before", b"kept", "text/plain", {"p": PROMPT})
    endpoint = s3_server.endpoint
    s3_server.stop()
    try:
        with pytest.raises(StoreError) as err:
            store.put("during", b"x", "text/plain")
        assert err.type is StoreError and "during" in str(err.value)
        with pytest.raises(StoreError):
            store.get("before")
    finally:
        s3_server.start()
    assert s3_server.endpoint == endpoint
    obj = store.get("before")
    assert (obj.data, obj.metadata["p"]) == (b"kept", PROMPT)
    store.put("after", b"y", "text/plain")
    assert list(store.list()) == ["after", "before"]
    store.close()
