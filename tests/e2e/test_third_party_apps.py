"""Third-party apps installed as a real distribution (a dist-info folder with an
``entry_points.txt`` on the subprocesses' ``PYTHONPATH``), run end to end: the CLI and the
web's submit path use them as specs, a real ``nova-queue worker`` runs them.

* ``legacy-echo`` is written as ONE class subclassing ``nova_queue.apps.base.App``, the
  interface from before the spec/runner split: it must keep working unchanged.
* ``split-shout`` is an ``AppSpec`` whose ``runner = "module:Class"`` names an
  ``AppRunner``: the web and the CLI never import that module, the worker does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from novatests.cli import nova_env, process_env, run_cli

from nova_queue import NovaClient
from nova_queue.results import Results
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

LEGACY_APP = '''
"""A third-party app written against nova_queue.apps.base.App: spec and runner in one."""
from nova_queue.apps.base import App, TaskOutput
from nova_queue.errors import InputError
from nova_queue.models import TaskSpec


class LegacyEcho(App):
    name = "legacy-echo"
    description = "echoes each prompt with a suffix (one-class app)"

    def parse_params(self, raw):
        unknown = sorted(set(raw) - {"suffix"})
        if unknown:
            raise InputError(f"legacy-echo has no parameter {unknown[0]!r}")
        return {"suffix": str(raw.get("suffix", "!"))}

    def make_tasks(self, prompts, params):
        return [TaskSpec(p, 0.5) for p in prompts]

    def setup(self, ctx):
        self.worker = ctx.worker_name

    def run_batch(self, tasks):
        return [TaskOutput(f"{t.input}{t.params['suffix']} by {self.worker}".encode(),
                           "text/plain", "txt", {"app": self.name}) for t in tasks]

    def benchmark_task(self):
        return "benchmark", self.parse_params({})
'''

SPLIT_SPEC = '''
from nova_queue.apps.base import AppSpec
from nova_queue.models import TaskSpec


class ShoutSpec(AppSpec):
    name = "split-shout"
    description = "upper-cases each prompt (spec and runner apart)"
    runner = "splitapp_runner:ShoutRunner"

    def make_tasks(self, prompts, params):
        return [TaskSpec(p, 0.25) for p in prompts]
'''

SPLIT_RUNNER = '''
from nova_queue.apps.base import TaskOutput
from nova_queue.workers.apps import AppRunner


class ShoutRunner(AppRunner):
    def setup(self, ctx):
        self.ctx = ctx

    def run_batch(self, tasks):
        return [TaskOutput(t.input.upper().encode(), "text/plain", "txt") for t in tasks]

    def benchmark_task(self):
        return "benchmark", self.spec.parse_params({})
'''

ENTRY_POINTS = """\
[nova_queue.apps]
legacy-echo = legacyapp:LegacyEcho
split-shout = splitapp:ShoutSpec
"""

#: The web gallery's submit path, in a fresh interpreter with the distribution installed.
WEB_SUBMIT = textwrap.dedent('''
    import json, sys
    from nova_queue import NovaClient
    from nova_queue.web.views_jobs import available_apps
    from nova_queue.web.submit import SubmitForm, submit
    client = NovaClient.from_url(sys.argv[1], namespace=sys.argv[2])
    legacy = submit(client, SubmitForm(app="legacy-echo", prompts="from the web",
                                       params="suffix=?"), None)
    split = submit(client, SubmitForm(app="split-shout", prompts="quiet\\nwhisper"), None)
    print(json.dumps({"apps": available_apps(), "legacy": legacy, "split": split,
                      "runner_imported": "splitapp_runner" in sys.modules}))
''')


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder holding the apps' modules and their distribution's metadata."""
    folder = tmp_path / "site"
    dist = folder / "nova_thirdparty_apps-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nova-thirdparty-apps\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    for name, source in (("legacyapp", LEGACY_APP), ("splitapp", SPLIT_SPEC),
                         ("splitapp_runner", SPLIT_RUNNER)):
        (folder / f"{name}.py").write_text(source)
    return folder


def test_third_party_apps_through_entry_points_end_to_end(site, redis_url, namespace, tmp_path):
    env = nova_env(redis_url, namespace, tmp_path, PYTHONPATH=str(site))
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("alpha\nbeta\n")

    # the CLI uses the one-class app as a spec: its own params check, its costs
    bad = run_cli(["enqueue", str(prompts), "--app", "legacy-echo", "-p", "colour=red"], env)
    assert bad.returncode != 0 and "legacy-echo has no parameter 'colour'" in bad.stderr
    out = run_cli(["enqueue", str(prompts), "--app", "legacy-echo", "-p", "suffix=+",
                   "--json"], env)
    assert out.returncode == 0, out.stderr
    cli_job = json.loads(out.stdout)["job_id"]
    assert [t.cost for t in nova.tasks(cli_job)] == [0.5, 0.5]

    # the web's submit path: both apps listed, both used as specs, no runner imported
    web = subprocess.run([sys.executable, "-c", WEB_SUBMIT, redis_url, namespace],
                         env=process_env(env), capture_output=True, text=True, timeout=60,
                         check=False)
    assert web.returncode == 0, web.stderr
    seen = json.loads(web.stdout)
    assert {"legacy-echo", "split-shout", "synthetic"} <= set(seen["apps"])
    assert seen["runner_imported"] is False
    assert [t.cost for t in nova.tasks(seen["split"])] == [0.25, 0.25]

    # a real worker runs all three jobs: the App instance as its own runner, the spec's
    # runner class resolved from its "module:Class" string
    worker = run_cli(["worker", "--app", "legacy-echo", "--app", "split-shout", "--burst",
                      "--name", "w-third"], env, timeout_s=120)
    assert worker.returncode == 0, worker.stdout + worker.stderr
    store = open_store(env["NOVA_STORE_URL"])
    held = Results(nova.redis, nova.keys, store)

    def results(job: str) -> list[bytes]:
        st = nova.job(job)
        assert st.state == "done" and st.done == st.total, st
        return [held.get(t.result).data for t in st.tasks]

    assert results(cli_job) == [b"alpha+ by w-third", b"beta+ by w-third"]
    assert results(seen["legacy"]) == [b"from the web? by w-third"]
    assert results(seen["split"]) == [b"QUIET", b"WHISPER"]
    # return values this small were held in Redis by their commits: the store has none
    assert list(store.list("jobs/")) == []
    out = run_cli(["results", cli_job, "--out", str(tmp_path / "got")], env)
    assert out.returncode == 0, out.stderr
    assert sorted(p.read_bytes() for p in (tmp_path / "got").iterdir()) == [
        b"alpha+ by w-third", b"beta+ by w-third"]
    (w,) = nova.workers()
    assert sorted(w.apps) == ["legacy-echo", "split-shout"]
    # both startup benchmarks ran through the runner half
    assert "benchmark legacy-echo" in worker.stderr and "benchmark split-shout" in worker.stderr
    nova.close()
