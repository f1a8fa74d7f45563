"""Measure how far apart txt2img results of one task land under different numerics, and how
far apart different tasks land: the evidence for ``MAX_PHASH_DISTANCE`` in
``nova_queue/apps/image_checks.py`` (docs/SECURITY.md, "Checking results").

Every image comes from the txt2img runner itself (its seeds, its PNG encoding) with the tiny
random-weight model (``nova-queue make-model``), on the CPU. Variants of the same task:
fp32 with every thread (the reference), fp32 on one thread, bf16 autocast, the weights
loaded in bfloat16, the classic attention processor instead of SDPA, and four tasks in one
batch instead of one. Different tasks: the same prompt with another seed, another prompt
with the same seed (reported only: the tiny model's text encoder is random, so another
prompt moves its noise images by a few levels, which no perceptual hash sees). It exits 1
unless the threshold lies above every same-task distance and below every other-seed one.
With ``--gpu`` the same tasks are also rendered on this machine's CUDA/ROCm device, in fp16
(what a GPU worker picks) and fp32, against the CPU's reference; MPS is not measured.

    python benchmarks/verify_threshold.py                 # 8 prompts x 3 seeds, 64x64
    python benchmarks/verify_threshold.py --size 128 --json out.json
    python benchmarks/verify_threshold.py --gpu           # also each task on the GPU
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nova_queue.apps.base import AppContext, TaskInput
from nova_queue.apps.image_checks import (
    MAX_PHASH_DISTANCE,
    image_problem,
    open_png,
    phash_distance,
)
from nova_queue.apps.registry import load_app

PROMPTS = ["a photograph of an astronaut riding a horse", "a red apple on a wooden table",
           "a lighthouse in a storm at night", "a bowl of ramen, studio lighting",
           "an oil painting of a fox in the snow", "a city skyline at sunset",
           "a close-up of a bee on a sunflower", "a vintage car on a desert road",
           "a watercolor of a mountain lake", "a robot reading a book in a library"]


def runner_for(model: Path, dtype: str, backend: str = "cpu") -> Any:
    """A txt2img runner set up with ``dtype`` on the CPU or (cuda/rocm) the first GPU."""
    from nova_queue.workers.apps.txt2img import Txt2ImgRunner

    device = "cpu" if backend == "cpu" else "cuda:0"
    runner = Txt2ImgRunner(load_app("txt2img"))
    runner.setup(AppContext(backend=backend, device=device, device_name=device,
                            worker_id="w", worker_name="measure",
                            options={"dtype": dtype, "model": str(model)}))
    return runner


def gpu_backend() -> str:
    """cuda or rocm, as this machine's torch sees its first GPU; SystemExit without one."""
    import torch

    if not torch.cuda.is_available():
        sys.exit("--gpu: torch sees no CUDA/ROCm device here")
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def render(runner: Any, params: dict[str, Any], tasks: list[tuple[str, int]],
           batch: int = 1) -> list[bytes]:
    """PNG bytes of (prompt, index) ``tasks``, ``batch`` at a time."""
    inputs = [TaskInput(task_id=f"j:{i}", job_id="j", index=index, input=prompt, cost=1.0,
                        params=params, attempt=1, lease_gen=1, attempt_id="a")
              for i, (prompt, index) in enumerate(tasks)]
    out: list[bytes] = []
    for start in range(0, len(inputs), batch):
        for result in runner.run_batch(inputs[start:start + batch]):
            if isinstance(result, BaseException):
                raise result
            out.append(result.data)
    return out


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@contextlib.contextmanager
def classic_attention(runner: Any) -> Iterator[None]:
    from diffusers.models.attention_processor import AttnProcessor, AttnProcessor2_0

    runner.pipe.unet.set_attn_processor(AttnProcessor())
    runner.pipe.vae.set_attn_processor(AttnProcessor())
    try:
        yield
    finally:
        runner.pipe.unet.set_attn_processor(AttnProcessor2_0())
        runner.pipe.vae.set_attn_processor(AttnProcessor2_0())


def variants(model: Path, params: dict[str, Any], tasks: list[tuple[str, int]],
             gpu: str | None = None) -> dict[str, list[bytes]]:
    """Each variant's PNGs of ``tasks`` (the reference first); on ``gpu`` (cuda/rocm) too."""
    import torch

    fp32, bf16 = runner_for(model, "float32"), runner_for(model, "bfloat16")
    for r in (fp32, bf16):
        r.prepare(params)
    made: dict[str, Callable[[], list[bytes]]] = {
        "fp32": lambda: render(fp32, params, tasks),
        "fp32, 1 thread": lambda: _with(threads(1), lambda: render(fp32, params, tasks)),
        "fp32, bf16 autocast": lambda: _with(torch.autocast("cpu", dtype=torch.bfloat16),
                                             lambda: render(fp32, params, tasks)),
        "bf16 weights": lambda: render(bf16, params, tasks),
        "fp32, classic attention": lambda: _with(classic_attention(fp32),
                                                 lambda: render(fp32, params, tasks)),
        "fp32, batch of 4": lambda: render(fp32, params, tasks, batch=4),
    }
    for dtype in ("float16", "float32") if gpu else ():
        made[f"{gpu} {dtype}"] = lambda dtype=dtype: _on_gpu(model, params, tasks, gpu, dtype)
    return {name: make() for name, make in made.items()}


def _on_gpu(model: Path, params: dict[str, Any], tasks: list[tuple[str, int]], backend: str,
            dtype: str) -> list[bytes]:
    runner = runner_for(model, dtype, backend)
    try:
        runner.prepare(params)
        return render(runner, params, tasks)
    finally:
        runner.teardown()


def _with(ctx: contextlib.AbstractContextManager, fn: Callable[[], list[bytes]]) -> list[bytes]:
    with ctx:
        return fn()


def spread(values: list[int]) -> dict[str, Any]:
    return {"n": len(values), "min": min(values), "max": max(values),
            "mean": round(sum(values) / len(values), 2)}


def mean_levels(a: bytes, b: bytes) -> float:
    """Mean absolute difference of two PNGs' pixels, in levels of 255."""
    from PIL import ImageChops, ImageStat

    diff = ImageChops.difference(open_png(a).convert("RGB"), open_png(b).convert("RGB"))
    return sum(ImageStat.Stat(diff).mean) / 3


def numerics(ref: list[bytes], pngs: list[bytes]) -> dict[str, Any]:
    """How a variant's PNGs differ from the reference's: bytes and pixels."""
    return {"identical_bytes": sum(a == b for a, b in zip(ref, pngs)),
            "mean_abs_levels": round(max(mean_levels(a, b) for a, b in zip(ref, pngs)), 3)}


def measure(n_prompts: int, n_seeds: int, size: int, steps: int, guidance: float = 0.0,
            gpu: str | None = None) -> dict[str, Any]:
    """Distances of every population, and the problems validate found (none expected)."""
    from nova_queue.workers.apps.txt2img_model import make_model

    with tempfile.TemporaryDirectory(prefix="nova-verify-") as tmp:
        model = make_model(Path(tmp) / "tiny")
        params = load_app("txt2img").parse_params(
            {"model": str(model), "width": size, "height": size, "steps": steps,
             "guidance": guidance})
        tasks = [(p, s) for p in PROMPTS[:n_prompts] for s in range(n_seeds)]
        started = time.perf_counter()
        images = variants(model, params, tasks, gpu)
    ref = images["fp32"]
    same = {name: [phash_distance(a, b) for a, b in zip(ref, pngs)]
            for name, pngs in images.items() if name != "fp32"}
    seeds = [phash_distance(ref[i], ref[j]) for i, j in itertools.combinations(range(len(tasks)), 2)
             if tasks[i][0] == tasks[j][0]]
    prompts = [phash_distance(ref[i], ref[j])
               for i, j in itertools.combinations(range(len(tasks)), 2)
               if tasks[i][1] == tasks[j][1]]
    problems = sorted({p for pngs in images.values() for png in pngs
                       if (p := image_problem(png, size, size))})
    same_all = [d for ds in same.values() for d in ds]
    return {
        "size": size, "steps": steps, "guidance": guidance, "prompts": n_prompts,
        "seeds": n_seeds,
        "seconds": round(time.perf_counter() - started, 1),
        "same_task": {name: {**spread(ds), **numerics(ref, images[name])}
                      for name, ds in same.items()},
        "different_prompt_mean_abs_levels": round(max(
            mean_levels(ref[i], ref[j]) for i, j in itertools.combinations(range(len(tasks)), 2)
            if tasks[i][1] == tasks[j][1]), 3),
        "same_task_all": spread(same_all),
        "different_seed": spread(seeds),
        # the tiny model's text encoder is random: another prompt moves its noise images by
        # a few levels, which no perceptual hash sees (reported, not judged)
        "different_prompt": spread(prompts),
        "threshold": MAX_PHASH_DISTANCE,
        "separates": max(same_all) <= MAX_PHASH_DISTANCE < min(seeds),
        "validate_problems": problems,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--guidance", type=float, default=0.0)
    parser.add_argument("--gpu", action="store_true",
                        help="also render each task on this machine's CUDA/ROCm device")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = measure(min(args.prompts, len(PROMPTS)), args.seeds, args.size, args.steps,
                     args.guidance, gpu_backend() if args.gpu else None)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0 if result["separates"] and not result["validate_problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
