"""txt2img's spec: text to image with SD-Turbo (or any diffusers text-to-image pipeline), one
PNG per prompt. Params, task costs and seeds are in :mod:`nova_queue.apps.txt2img_params`;
the worker runs tasks with :class:`nova_queue.workers.apps.txt2img.Txt2ImgRunner` (torch,
diffusers). Two results of one task are compared perceptually, and a result is checked on
the worker before it is stored (:mod:`nova_queue.apps.image_checks`). Importing this
module imports neither torch nor Pillow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nova_queue.apps.base import AppSpec
from nova_queue.apps.image_checks import same_image
from nova_queue.apps.txt2img_params import parse_params, task_cost
from nova_queue.jobspec import model_key_text
from nova_queue.models import TaskSpec


class Txt2ImgSpec(AppSpec):
    """SD-Turbo text-to-image through ``diffusers.AutoPipelineForText2Image``."""

    name = "txt2img"
    description = "Text to image with SD-Turbo (diffusers): one PNG per prompt."
    runner = "nova_queue.workers.apps.txt2img:Txt2ImgRunner"
    worker_extra = "txt2img"
    needs_torch = True

    def parse_params(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Validate params (strings, or already-parsed values) into a JSON-able dict."""
        return parse_params(raw)

    def make_tasks(self, prompts: Sequence[str], params: Mapping[str, Any]) -> list[TaskSpec]:
        """One task per prompt, costed ``width * height * steps / 512**2``."""
        cost = task_cost(params)
        return [TaskSpec(prompt, cost) for prompt in prompts]

    def model_key(self, params: Mapping[str, Any]) -> str:
        """The pipeline a job needs loaded: its ``model`` (a hub id or a folder)."""
        return model_key_text(str(params.get("model", "")))

    def same_result(self, a: bytes, b: bytes, *, params: Mapping[str, Any] | None = None
                    ) -> bool:
        """Whether two PNGs of one task show the same image: same size and mode, perceptual
        hashes close (backends never render bit-identical images;
        :func:`~nova_queue.apps.image_checks.same_image`, Pillow and imagehash)."""
        return same_image(a, b)
