"""Mixed releases on one namespace, each run as real processes from its own code:

- the previous release (this repository at PREVIOUS, before protocol versions and
  retention, extracted with ``git archive``) checks no protocol, so nothing stops it on a
  namespace of this release (it speaks protocol 2: docs/DEPLOY.md says to move such a pool
  to a new namespace, and the doctor names its live workers). On jobs that touch nothing
  protocol 3 changed (every task done) an old worker and a new one still run jobs enqueued
  by either CLI, and ``doctor --repair`` adds what the old release does not write
  (retention entries, departed workers);
- a next release (this code with protocol 4) and this one refuse each other: worker, CLI
  and gallery each stop with one line naming both versions and what to upgrade;
- the event stream's packed entries (``claimed_many``, ``completed_many``), which protocol 3
  introduced: this release reads them as one event per task, and a gallery or CLI of
  protocol 2 (this code with protocol 2, standing for a protocol-2 release that checks) or
  of protocol 4 answers 503 or one line naming both versions instead of listing them.

A release's tree is laid out as it installs (``nova_queue/`` with ``workers/`` and ``web/``
inside) and imported through ``sys.path``, ahead of this checkout's editable install.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from novatests.chaos.history import check
from novatests.cli import nova_env, process_env, run_cli, write
from novatests.leases import join, rkey
from novatests.seed import set_speed

from nova_queue import NovaClient, TaskSpec, doctor
from nova_queue.client.batch import BatchCommit
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: The last commit before protocol versions and retention (main when this was written).
PREVIOUS = "9d009920c0d3c9de0fef4899ad30235233a6622f"
SHIM = ("import sys; sys.path.insert(0, {root!r}); import nova_queue; "
        "assert nova_queue.__file__.startswith({root!r}), nova_queue.__file__; "
        "from nova_queue.cli import main; sys.argv = ['nova-queue', *sys.argv[1:]]; main()")


def _as_installed(dest: Path) -> Path:
    """Move ``workers/`` and ``web/`` into ``nova_queue/``, as the wheel installs them."""
    for sub in ("workers", "web"):
        shutil.move(str(dest / sub), str(dest / "nova_queue" / sub))
    return dest


@pytest.fixture(scope="module")
def previous(tmp_path_factory) -> Path:
    """The previous release's code, from git."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout")
    dest = tmp_path_factory.mktemp("previous")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", PREVIOUS, "nova_queue",
                              "workers", "web"], capture_output=True, check=False, timeout=60)
    if archive.returncode != 0:
        pytest.skip(f"commit {PREVIOUS[:10]} is not in this checkout")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True, timeout=60)
    assert not (dest / "nova_queue" / "protocol.py").exists()  # before protocol versions
    return _as_installed(dest)


def _speaking(dest: Path, version: int) -> Path:
    """This code, as a release of protocol ``version`` would ship it, in ``dest``."""
    ignore = shutil.ignore_patterns("__pycache__")
    for sub in ("nova_queue", "workers", "web"):
        shutil.copytree(ROOT / sub, dest / sub, ignore=ignore)
    module = dest / "nova_queue" / "protocol.py"
    text = module.read_text()
    assert "\nPROTOCOL = 3\n" in text
    module.write_text(text.replace("\nPROTOCOL = 3\n", f"\nPROTOCOL = {version}\n"))
    return _as_installed(dest)


@pytest.fixture(scope="module")
def next_release(tmp_path_factory) -> Path:
    """This code as a release of protocol 4 would ship it."""
    return _speaking(tmp_path_factory.mktemp("next"), 4)


@pytest.fixture(scope="module")
def protocol_2(tmp_path_factory) -> Path:
    """This code as a release of protocol 2 that checks it (the last protocol-2 code, the
    commit before protocol 3, already wrote packed entries: no release of it did)."""
    return _speaking(tmp_path_factory.mktemp("protocol2"), 2)


def release(root: Path, args: list[str], env: dict[str, str],
            timeout_s: float = 120) -> subprocess.CompletedProcess:
    """``nova-queue ARGS`` of the release at ``root``, to completion."""
    return subprocess.run([sys.executable, "-c", SHIM.format(root=str(root)), *args],
                          env=process_env(env), capture_output=True, text=True,
                          timeout=timeout_s, check=False)


GALLERY = """
import json, sys
sys.path.insert(0, {root!r})
import nova_queue
assert nova_queue.__file__.startswith({root!r}), nova_queue.__file__
from nova_queue.settings import Settings
from nova_queue.web import create_app
app = create_app({{"TESTING": True}}, settings=Settings(redis_url={url!r}, namespace={ns!r}))
pages = {{}}
for path in ("/", "/api/events", "/events"):
    resp = app.test_client().get(path)
    pages[path] = [resp.status_code, resp.get_data(as_text=True)]
print(json.dumps(pages))
"""


def gallery_pages(root: Path, redis_url: str, namespace: str) -> dict[str, list]:
    """The gallery of the release at ``root``: [status, body] of its pages and events API."""
    code = GALLERY.format(root=str(root), url=redis_url, ns=namespace)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


WORK = ["--app", "synthetic", "--no-benchmark"]


def test_the_previous_release_and_this_one_share_a_pool(previous, redis_url, namespace,
                                                        tmp_path):
    env = nova_env(redis_url, namespace, tmp_path)
    prompts = write(tmp_path, b"one\ntwo\nthree\n")
    params = ["--app", "synthetic", "-p", "seconds=0.05"]
    new_job = run_cli(["enqueue", str(prompts), *params], env).stdout.strip()
    old = release(previous, ["enqueue", str(prompts), *params], env)
    assert old.returncode == 0, old.stderr
    old_job = old.stdout.strip()
    ran = release(previous, ["worker", *WORK, "--name", "old", "--max-tasks", "3"], env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    ran = run_cli(["worker", *WORK, "--name", "new", "--burst"], env, timeout_s=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    try:
        for job in (new_job, old_job):
            st = nova.job(job)
            assert (st.state, st.done) == ("done", 3), st
        workers = {w.name: w for w in nova.workers()}
        assert workers["old"].tasks_done == 3 and workers["new"].tasks_done == 3
        assert nova.redis.hget(nova.keys.meta(), "protocol") == "3"
        verdict = check(nova, [new_job, old_job], store=open_store(env["NOVA_STORE_URL"]),
                        expect="done")
        assert verdict.ok, verdict.summary()
        # what the previous release does not write, the doctor adds
        before = doctor.diagnose(nova)
        assert any("missing from its indexes" in f.message for f in before.problems)
        after = doctor.run(nova, fix=True)
        assert after.ok, [f.message for f in after.problems]
        for job in (new_job, old_job):
            assert nova.redis.zscore(nova.keys.expiring(), job) is not None
        assert nova.redis.zscore(nova.keys.departed(), workers["old"].worker_id) is not None
    finally:
        nova.close()


def test_releases_of_another_protocol_refuse_in_one_line(next_release, redis_url, namespace,
                                                         tmp_path):
    env = nova_env(redis_url, namespace, tmp_path)
    prompts = write(tmp_path, b"one\n")
    job = run_cli(["enqueue", str(prompts), "--app", "synthetic"], env).stdout.strip()
    # a worker and a CLI of protocol 4 on this release's namespace
    older_ns = (f"error: namespace '{namespace}' speaks protocol 3 but this nova-queue ")
    for args in (["status", job], ["worker", *WORK, "--burst"]):
        res = release(next_release, ["--log-level", "ERROR", *args], env)
        assert res.returncode == 1 and last_line(res.stderr).startswith(older_ns), res.stderr
        assert last_line(res.stderr).endswith(
            "speaks protocol 4: run a release that speaks protocol 3 here, or move the whole "
            "pool to a new namespace (docs/DEPLOY.md, Upgrades)")
    # a namespace a protocol-4 release made: this release's worker, CLI and gallery refuse
    env = nova_env(redis_url, namespace + "-4", tmp_path)
    made = release(next_release, ["enqueue", str(prompts), "--app", "synthetic"], env)
    assert made.returncode == 0, made.stderr
    newer = "speaks protocol 4 but this nova-queue "
    upgrade = "speaks protocol 3: upgrade nova-queue here to a release that speaks protocol 4"
    for args in (["status", made.stdout.strip()], ["worker", *WORK, "--burst"]):
        res = run_cli(["--log-level", "ERROR", *args], env, timeout_s=60)
        line = last_line(res.stderr)
        assert res.returncode == 1 and newer in line and line.endswith(upgrade), res.stderr
    from nova_queue.settings import Settings
    from nova_queue.web import create_app

    app = create_app({"TESTING": True}, settings=Settings(redis_url=redis_url,
                                                          namespace=namespace + "-4"))
    page = app.test_client().get("/")
    assert page.status_code == 503 and upgrade in page.get_data(as_text=True)


def test_readers_of_another_protocol_refuse_a_stream_of_packed_entries(
        protocol_2, next_release, redis_url, namespace, tmp_path):
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    try:
        job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(4)])
        join(nova, "w1")
        set_speed(nova, "w1", "synthetic", 0.01)
        leases = nova.claim("w1", "synthetic", 4).leases
        nova.complete_batch("w1", [BatchCommit(x, rkey(x), 0.1, True) for x in leases])
        raw = [f["type"] for _, f in nova.redis.xrange(nova.keys.events(), "-", "+")]
        assert raw == ["enqueued", "worker_joined", "claimed_many", "completed_many",
                       "job_finished"]
        # this release: one event per task
        types = [e.type for e in nova.events(count=1000)]
        assert types.count("claimed") == 4 and types.count("completed") == 4
    finally:
        nova.close()
    env = nova_env(redis_url, namespace, tmp_path)
    answers = {
        protocol_2: "speaks protocol 2: upgrade nova-queue here to a release that speaks "
                    "protocol 3",
        next_release: "speaks protocol 4: run a release that speaks protocol 3 here, or move "
                      "the whole pool to a new namespace (docs/DEPLOY.md, Upgrades)",
    }
    for root, answer in answers.items():
        for path, (status, body) in gallery_pages(root, redis_url, namespace).items():
            assert status == 503 and answer in body, (root.name, path, status, body[:300])
            assert "claimed" not in body and "completed" not in body, path  # nothing listed
        res = release(root, ["--log-level", "ERROR", "status", job], env)
        line = last_line(res.stderr)
        assert res.returncode == 1 and "speaks protocol 3 but this nova-queue" in line, res.stderr
        assert line.endswith(answer)
