"""The synthetic app: params, work scaled by slowdown, PNG cards, poison and OOM tasks."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import time

import pytest
from PIL import Image

from nova_queue.apps import AppContext, TaskInput, load_app
from nova_queue.apps.synthetic import SyntheticSpec
from nova_queue.errors import AppError, ConfigError, InputError
from nova_queue.workers.apps import load_worker_app
from nova_queue.workers.apps.synthetic import PoisonTaskError, SyntheticRunner


def make_app(slowdown: float = 1.0, worker: str = "worker-one") -> SyntheticRunner:
    app = SyntheticRunner(SyntheticSpec())
    app.setup(AppContext(backend="cpu", device="cpu", device_name="test cpu",
                         worker_id="abcd1234-0001", worker_name=worker, slowdown=slowdown))
    return app


def task(app: SyntheticRunner, prompt: str, index: int = 0, **raw: str) -> TaskInput:
    params = app.spec.parse_params(raw)
    return TaskInput(task_id=f"job1:{index}", job_id="job1", index=index, input=prompt,
                     cost=app.spec.make_tasks([prompt], params)[0].cost, params=params,
                     attempt=2, lease_gen=3, attempt_id="att-1")


def run(app: SyntheticRunner, prompt: str, **raw: str):
    [out] = app.run_batch([task(app, prompt, **raw)])
    return out


def test_registered_as_builtin():
    spec = load_app("synthetic")
    assert isinstance(spec, SyntheticSpec) and spec.name == "synthetic" and spec.description
    app = load_worker_app("synthetic")
    assert isinstance(app.runner, SyntheticRunner) and app.runner.spec is app.spec
    assert app.name == app.runner.name == "synthetic"


def test_params_defaults_and_parsing():
    app = SyntheticSpec()
    # the test-only params (crash_on, oom_on) are in a job's params only when set
    assert app.parse_params({}) == {"seconds": 0.2, "size": 256, "jitter": 0.0, "jitter_seed": 0}
    assert app.parse_params({"crash_on": "", "oom_on": None}) == app.parse_params({})
    parsed = app.parse_params({"seconds": "1.5", "size": "128", "crash_on": "boom"})
    assert parsed == {"seconds": 1.5, "size": 128, "crash_on": "boom", "jitter": 0.0,
                      "jitter_seed": 0}
    assert app.parse_params(parsed) == parsed  # idempotent: stored params parse again
    assert app.parse_params(json.loads(json.dumps(parsed))) == parsed


@pytest.mark.parametrize("raw, key", [
    ({"seconds": "-1"}, "seconds"), ({"seconds": "3601"}, "seconds"),
    ({"seconds": "nan"}, "seconds"), ({"seconds": "inf"}, "seconds"),
    ({"seconds": "soon"}, "seconds"), ({"size": "63"}, "size"), ({"size": "1025"}, "size"),
    ({"size": "1.5"}, "size"), ({"size": 200.5}, "size"), ({"colour": "red"}, "colour"),
    ({"crash_on": 5}, "crash_on"),
])
def test_bad_params_name_the_key(raw, key):
    with pytest.raises(InputError, match=repr(key)):
        SyntheticSpec().parse_params(raw)


def test_cost_is_reference_seconds():
    app = SyntheticSpec()
    specs = app.make_tasks(["a", "b"], app.parse_params({"seconds": "2.5"}))
    assert [(s.input, s.cost) for s in specs] == [("a", 2.5), ("b", 2.5)]
    assert app.make_tasks(["z"], app.parse_params({"seconds": "0"}))[0].cost == 0.001
    prompt, params = make_app().benchmark_task()
    assert app.make_tasks([prompt], params)[0].cost == pytest.approx(0.05)
    assert make_app().batch_size(params) == 1


def test_png_card_with_metadata():
    app = make_app()
    out = run(app, "a red fox in snow", seconds="0.01", size="128")
    assert (out.content_type, out.extension) == ("image/png", "png")
    img = Image.open(io.BytesIO(out.data))
    img.load()
    assert img.format == "PNG" and img.size == (128, 128)
    expected = {"prompt": "a red fox in snow", "backend": "cpu", "worker": "worker-one",
                "job": "job1", "task": "job1:0", "attempt": "2", "seconds": "0.01"}
    for key, value in expected.items():
        assert img.text[key] == value == out.metadata[key]
    assert int(out.metadata["hash_rounds"]) > 0 and len(out.metadata["digest"]) == 64
    assert float(out.metadata["compute_s"]) >= 0.01


def test_card_colour_comes_from_the_worker_name():
    one = Image.open(io.BytesIO(run(make_app(worker="alpha"), "x", seconds="0").data))
    two = Image.open(io.BytesIO(run(make_app(worker="beta"), "x", seconds="0").data))
    again = Image.open(io.BytesIO(run(make_app(worker="alpha"), "x", seconds="0").data))
    corner = (one.width - 2, one.height // 2)
    assert one.getpixel(corner) == again.getpixel(corner) != two.getpixel(corner)


def test_wall_time_follows_seconds_times_slowdown():
    """Correctness of the simulation (a worker F times slower takes F times longer)."""
    def timed(slowdown: float) -> float:
        app = make_app(slowdown)
        start = time.perf_counter()
        run(app, "timing", seconds="0.05", size="64")
        return time.perf_counter() - start

    fast = min(timed(1.0) for _ in range(3))  # best of 3: a preempted run is not the rule
    slow = timed(4.0)
    assert fast >= 0.05 and slow >= 0.2
    assert slow >= 3 * fast


def test_work_is_real_hashing():
    """The digest proves hash_rounds SHA-256 rounds were chained over the prompt."""
    out = run(make_app(), "proof of work", seconds="0.02")
    rounds = int(out.metadata["hash_rounds"])
    assert rounds > 1000
    h = hashlib.sha256(b"proof of work").digest()
    for _ in range(rounds):
        h = hashlib.sha256(h).digest()
    assert out.metadata["digest"] == h.hex()


def test_poison_task_fails_every_time():
    app = make_app()
    for _ in range(2):
        with pytest.raises(PoisonTaskError, match="poison") as info:
            run(app, "this one is POISON for sure", crash_on="POISON")
        assert app.classify_error(info.value) == "error"
    assert run(app, "harmless", seconds="0", crash_on="POISON").data


def test_oom_task_is_classified_oom():
    app = make_app()
    with pytest.raises(MemoryError) as info:
        run(app, "big BIG image", oom_on="BIG")
    assert app.classify_error(info.value) == "oom"
    assert app.classify_error(ValueError("x")) == "error"


@pytest.mark.parametrize("prompt", [
    "日本語のプロンプト 🚀 café naïve Ελληνικά العربية",
    "line\u2028separator\x0bvertical\x0cfeed\x85next",
    "lone surrogate \ud800 and NUL \x00 inside",
    "x" * 4000,
    "word " * 900,
])
def test_any_text_renders(prompt):
    out = run(make_app(), prompt, seconds="0")
    img = Image.open(io.BytesIO(out.data))
    img.load()
    assert img.size == (256, 256)
    assert img.text["prompt"] == out.metadata["prompt"]
    if "\x00" not in prompt and "\ud800" not in prompt:
        assert img.text["prompt"] == prompt  # exact, separators included


def test_run_before_setup_and_bad_slowdown():
    app = SyntheticRunner(SyntheticSpec())
    with pytest.raises(AppError, match="setup"):
        app.run_batch([task(app, "x")])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="slowdown"):
            make_app(slowdown=bad)


def test_the_spec_imports_neither_torch_nor_pillow_and_the_runner_no_torch():
    code = ("import sys; from nova_queue.apps import load_app; load_app('synthetic'); "
            "print('torch' in sys.modules, 'PIL' in sys.modules); "
            "from nova_queue.workers.apps import load_worker_app; load_worker_app('synthetic'); "
            "print('torch' in sys.modules, 'PIL' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "False", "True"]


def test_jitter_is_seeded_bounded_and_invisible_to_the_cost():
    from nova_queue.apps.synthetic import jittered_seconds

    app = SyntheticSpec()
    params = app.parse_params({"seconds": "0.1", "jitter": "0.2", "jitter_seed": "7"})
    durations = [jittered_seconds(0.1, 0.2, 7, i) for i in range(50)]
    assert durations == [jittered_seconds(0.1, 0.2, 7, i) for i in range(50)]
    assert all(0.08 <= d <= 0.12 for d in durations) and len(set(durations)) > 40
    assert durations != [jittered_seconds(0.1, 0.2, 8, i) for i in range(50)]
    assert jittered_seconds(0.1, 0.0, 7, 3) == 0.1
    assert {t.cost for t in app.make_tasks(["a", "b"], params)} == {0.1}
    with pytest.raises(InputError, match="jitter"):
        app.parse_params({"jitter": "1.5"})


def test_control_file_times_limits_a_failure_to_the_first_tasks(tmp_path):
    """``"times": N``: the control file's failure applies to the first N tasks started under
    it, then the worker is healthy; a new file counts again."""
    from nova_queue.workers.apps.synthetic import Control, SimulatedFailure

    path = tmp_path / "w.control.json"
    path.write_text(json.dumps({"fail": "all", "times": 2}))
    ctl = Control(str(path))
    for _ in range(2):
        with pytest.raises(SimulatedFailure):
            ctl.before_task()
    assert ctl.before_task() == 1.0  # the third task runs
    path.write_text(json.dumps({"slowdown": 5, "times": 1}))
    os_stat_bump(path)
    assert ctl.before_task() == 5.0
    assert ctl.before_task() == 1.0


def os_stat_bump(path):
    """Give ``path`` an mtime the Control has not seen (a rewrite within the filesystem's
    timestamp granularity keeps the old one)."""
    import os

    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
