"""The txt2img runner's tests share these: a CPU worker's context on the tiny local model, a
fresh runner, a job's params and its task inputs (torch is imported by the runner, not here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nova_queue.apps import AppContext, TaskInput
from nova_queue.apps.txt2img import Txt2ImgSpec
from nova_queue.apps.txt2img_params import parse_params

CPU = AppContext(backend="cpu", device="cpu", device_name="test CPU", worker_id="w-1",
                 worker_name="worker-1")


def cpu(model_dir: Path, **options: str) -> AppContext:
    """The CPU context of a worker started with ``-o model=<model_dir>`` (an allowed root)
    and ``options``."""
    return dataclasses.replace(CPU, options={"model": str(model_dir), **options})


def runner():
    """A fresh txt2img runner, as a worker makes it."""
    from nova_queue.workers.apps.txt2img import Txt2ImgRunner

    return Txt2ImgRunner(Txt2ImgSpec())


def job_params(model_dir: Path, **overrides: object) -> dict:
    """A 64×64 job's parsed params on the model in ``model_dir``."""
    return parse_params({"model": str(model_dir), "width": "64", "height": "64", **overrides})


def make_inputs(params: dict, prompts: list[str], job: str = "job-a") -> list[TaskInput]:
    """One task input per prompt of ``job``."""
    return [TaskInput(task_id=f"{job}:{i}", job_id=job, index=i, input=p, cost=1.0,
                      params=params, attempt=1, lease_gen=1, attempt_id=f"att-{i}")
            for i, p in enumerate(prompts)]
