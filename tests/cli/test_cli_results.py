"""``nova-queue results`` copies nothing on trust: a result key must be the one the task's own
lease writes, artifacts are taken by their known names only, and anything else planted under
``jobs/<job>/`` is skipped with a warning, never written over a result."""

from __future__ import annotations

import dataclasses

import pytest
from novatests.cli import enqueue_ok, error_line, ok, write

from nova_queue.models import Lease
from nova_queue.stores import ArtifactKeys, open_store, own_result_ext, result_key

WORKER = "node1-w1"


@pytest.fixture
def store(tmp_path):
    """The file store the ``invoke`` fixture's CLI uses."""
    return open_store((tmp_path / "store").as_uri())


def own_key(lease: Lease, ext: str = "png") -> str:
    return result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, ext)


def run_task(nova, store, app: str = "synthetic", *, key: str | None = None,
             data: bytes = b"\x89PNG real") -> Lease:
    """Claim one task and commit it; ``data`` goes under the lease's own key, or the task's
    ``result`` is then overwritten with ``key`` (what a forger with HSET can do)."""
    nova.register_worker(WORKER, {"name": "w"}, [app])
    [lease] = nova.claim(WORKER, app, 1).leases
    own = own_key(lease)
    if key is None:
        store.put(own, data, content_type="image/png")
    nova.complete(WORKER, lease, own, run_s=0.01, warm=False)
    if key is not None:
        # complete-11 refuses a foreign key, but a worker credential may HSET by hand
        nova.redis.hset(nova.keys.task(lease.task_id), "result", key)
    return lease


def test_own_results_and_known_artifacts_only(invoke, nova, store, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"cat\n"))
    lease = run_task(nova, store)
    keys = ArtifactKeys.for_job(job_id)
    store.put(keys.manifest, b'{"format": 1}', content_type="application/json")
    store.put(keys.zip, b"PK zip", content_type="application/zip")
    # planted beside them: an unknown "artifact", and one named like a result file
    store.put(f"jobs/{job_id}/summary.json", b"{}", content_type="application/json")
    store.put(f"jobs/{job_id}/00000.png", b"planted", content_type="image/png")
    store.put(f"jobs/{job_id}/results/00000-g9-orphan.png", b"orphan", content_type="image/png")
    out = tmp_path / "out"
    res = ok(invoke("results", job_id, "--out", str(out)))
    assert res.stdout == f"wrote 1 result(s) and 2 artifact(s) of job {job_id} to {out}\n"
    assert sorted(p.name for p in out.iterdir()) == [
        f"{lease.index:05d}.png", f"{job_id}.zip", "manifest.json"]
    assert (out / "00000.png").read_bytes() == b"\x89PNG real"
    warnings = res.stderr.strip().split("\n")
    assert warnings == [
        f"warning: skipped jobs/{job_id}/00000.png: not a result or a known artifact",
        f"warning: skipped jobs/{job_id}/summary.json: not a result or a known artifact"]


def test_a_result_key_of_another_job_is_not_downloaded(invoke, nova, store, tmp_path):
    other = enqueue_ok(invoke, write(tmp_path, b"secret\n", "other.txt"))
    other_lease = run_task(nova, store, data=b"other job's image")
    job_id = enqueue_ok(invoke, write(tmp_path, b"mine\n"))
    lease = run_task(nova, store, key=own_key(other_lease))  # points into the other job
    assert (lease.job_id, other_lease.job_id) == (job_id, other)
    out = tmp_path / "out"
    res = invoke("results", job_id, "--out", str(out))
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit)
    assert res.stdout.startswith("wrote 0 result(s)")
    warning, note, error = res.stderr.strip().split("\n")
    assert warning == "warning: task 0: its result key is not one its own lease writes; skipped"
    assert "post-worker" in note
    error_line(error, "1 committed result(s) not written", "1 with a foreign result key")
    assert list(out.iterdir()) == []


def test_note_says_artifacts_come_from_a_post_worker(invoke, nova, store, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"cat\n"))
    run_task(nova, store)
    res = ok(invoke("results", job_id, "--out", str(tmp_path / "out")))
    assert "wrote 1 result(s) and 0 artifact(s)" in res.stdout
    assert res.stderr == (f"note: no artifacts yet: a running 'nova-queue post-worker' builds "
                          f"manifest.json, contact-sheet.png and {job_id}.zip for finished jobs "
                          "(is one running?)\n")
    unfinished = enqueue_ok(invoke, write(tmp_path, b"a\nb\n"))
    res = ok(invoke("results", unfinished, "--out", str(tmp_path / "out2")))
    assert "wrote 0 result(s) and 0 artifact(s)" in res.stdout
    assert res.stderr.startswith("note: no artifacts yet: the job has not finished; a running "
                                 "'nova-queue post-worker' builds")


@pytest.mark.parametrize("forge", [
    pytest.param(lambda t: t.result.replace(t.job_id, "OTHERJOB"), id="other-job"),
    pytest.param(lambda t: t.result.replace("/00000-", "/00001-"), id="other-index"),
    pytest.param(lambda t: t.result.replace(f"-g{t.lease_gen}-", f"-g{t.lease_gen + 1}-"),
                 id="other-lease-gen"),
    pytest.param(lambda t: t.result.replace(t.attempt_id, "0" * 16), id="other-attempt"),
    pytest.param(lambda t: f"jobs/{t.job_id}/results/../../OTHERJOB/results/x.png",
                 id="dot-dot"),
    pytest.param(lambda t: f"jobs/{t.job_id}/manifest.json", id="an-artifact"),
    pytest.param(lambda t: t.result.rsplit(".", 1)[0], id="no-extension"),
    pytest.param(lambda t: t.result.rsplit(".", 1)[0] + ".p/ng", id="slash-in-extension"),
    pytest.param(lambda t: t.result.rsplit(".", 1)[0] + ".png\x1b", id="control-in-extension"),
    pytest.param(lambda t: "/" + t.result, id="absolute"),
])
def test_only_the_tasks_own_key_is_accepted(invoke, nova, store, tmp_path, forge):
    enqueue_ok(invoke, write(tmp_path, b"cat\ndog\n"))
    lease = run_task(nova, store)
    task = nova.task(lease.task_id)
    assert own_result_ext(task) == "png"
    assert own_result_ext(dataclasses.replace(task, result=forge(task))) is None
