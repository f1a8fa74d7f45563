"""A finished job's artifacts, built from Redis and the result store: ``manifest.json``,
``contact-sheet.png`` and ``<job>.zip``, written beside the results under ``jobs/<job>/``.

Artifacts are derived data: a rebuild overwrites them, so building twice is harmless. One
pass reads every result once (a few at a time, in order) and feeds both the zip and the
contact sheet, so memory holds the sheet, a handful of results and nothing else; the zip
is written to a temporary file first. The sheet never exceeds :data:`MAX_SHEET_PX` on a
side: tiles shrink as jobs grow, and beyond :data:`MAX_TILES` the rest are left out and
counted in the footer.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import io
import json
import logging
import math
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from nova_queue.client import NovaClient
from nova_queue.errors import StoreError
from nova_queue.models import JobStatus, TaskInfo
from nova_queue.stores import MANIFEST_NAME, ArtifactKeys, ResultStore, own_result_ext

log = logging.getLogger(__name__)

MANIFEST_FORMAT = 1

#: Largest side of the contact sheet in pixels.
MAX_SHEET_PX = 4096
MAX_TILE_PX = 256
MIN_TILE_PX = 32
GAP_PX = 4
HEADER_PX = 24
FOOTER_PX = 20
#: Captions (index, worker, backend) are drawn under tiles at least this wide.
CAPTION_MIN_TILE_PX = 96
CAPTION_PX = 14
#: Most tiles a sheet shows: as many of the smallest tiles as fit in the sheet.
MAX_COLS = (MAX_SHEET_PX - GAP_PX) // (MIN_TILE_PX + GAP_PX)
MAX_ROWS = (MAX_SHEET_PX - HEADER_PX - FOOTER_PX - GAP_PX) // (MIN_TILE_PX + GAP_PX)
MAX_TILES = MAX_COLS * MAX_ROWS
#: Results fetched ahead of the one being written (S3 round trips overlap).
PREFETCH = 8

_BG, _TILE_BG, _TEXT, _DIM = (24, 24, 28), (48, 48, 54), (230, 230, 230), (150, 150, 150)
_PLACEHOLDER = {"failed": (120, 40, 40), "cancelled": (80, 80, 80), "missing": (110, 80, 30)}


@dataclasses.dataclass(frozen=True)
class SheetLayout:
    """Geometry of a contact sheet for ``total`` tasks."""

    total: int
    shown: int
    cols: int
    rows: int
    tile_px: int
    caption_px: int
    width: int
    height: int

    def tile_origin(self, i: int) -> tuple[int, int]:
        """Top-left pixel of tile ``i``."""
        row, col = divmod(i, self.cols)
        return (GAP_PX + col * (self.tile_px + GAP_PX),
                HEADER_PX + GAP_PX + row * (self.tile_px + self.caption_px + GAP_PX))


def sheet_layout(total: int) -> SheetLayout:
    """The grid for ``total`` tasks: near-square, tiles shrinking so the sheet stays bounded."""
    total = max(total, 1)
    shown = min(total, MAX_TILES)
    cols = min(MAX_COLS, max(1, math.ceil(math.sqrt(shown))))
    rows = math.ceil(shown / cols)  # <= MAX_ROWS, since shown <= MAX_TILES
    by_width = (MAX_SHEET_PX - GAP_PX) // cols - GAP_PX
    caption = CAPTION_PX if by_width >= CAPTION_MIN_TILE_PX else 0
    by_height = (MAX_SHEET_PX - HEADER_PX - FOOTER_PX - GAP_PX) // rows - GAP_PX - caption
    tile = max(MIN_TILE_PX, min(MAX_TILE_PX, by_width, by_height))
    if tile < CAPTION_MIN_TILE_PX:
        caption = 0
    width = GAP_PX + cols * (tile + GAP_PX)
    height = (HEADER_PX + GAP_PX + rows * (tile + caption + GAP_PX)
              + (FOOTER_PX if shown < total else 0))
    return SheetLayout(total, shown, cols, rows, tile, caption, width, height)


def zip_name(task: TaskInfo) -> str:
    """A result's file name in the zip (the name ``nova-queue results`` writes, too)."""
    return f"results/{task.index:05d}.{own_result_ext(task) or 'bin'}"


def task_manifest(task: TaskInfo, file: str | None,
                  worker_names: dict[str, str]) -> dict[str, Any]:
    """One task's manifest entry (a released task names the worker that ran it last)."""
    worker_id = task.worker_id or task.last_worker_id
    entry: dict[str, Any] = {
        "index": task.index, "id": task.task_id, "state": task.state, "prompt": task.input,
        "seed": task.meta.get("seed"), "cost": task.cost,
        "worker": task.worker_name or worker_names.get(worker_id, ""),
        "worker_id": worker_id, "backend": task.backend, "host": task.host,
        "device": task.meta.get("device"), "attempts": task.attempt_count,
        "lease_gen": task.lease_gen, "result": task.result or None, "file": file,
        "content_type": task.meta.get("content_type"),
        "timings": {"claimed_ms": task.claimed_ms, "finished_ms": task.finished_ms,
                    "run_s": task.run_s, "predicted_s": task.predicted_s, "warm": task.warm,
                    "cold_s": task.cold_s},
    }
    if task.state == "failed":
        entry.update(error=task.error, error_kind=task.error_kind)
    return entry


def manifest(namespace: str, job: JobStatus, keys: ArtifactKeys, files: dict[int, str],
             worker_names: dict[str, str]) -> dict[str, Any]:
    """The whole manifest: job fields, artifact keys and every task in index order."""
    return {"format": MANIFEST_FORMAT, "namespace": namespace,
            "job": job.to_json(with_tasks=False), "artifacts": keys.to_json(),
            "tasks": [task_manifest(t, files.get(t.index), worker_names) for t in job.tasks]}


def _last_worker_names(client: NovaClient, tasks: Sequence[TaskInfo]) -> dict[str, str]:
    """Names of the workers that last ran tasks released since (failed tasks keep only ids)."""
    ids = sorted({t.last_worker_id for t in tasks if not t.worker_id and t.last_worker_id})
    pipe = client.redis.pipeline(transaction=False)
    for wid in ids:
        pipe.hget(client.keys.worker(wid), "name")
    return {wid: name for wid, name in zip(ids, pipe.execute()) if name}


def build_artifacts(client: NovaClient, store: ResultStore, job_id: str) -> ArtifactKeys:
    """Build and upload (overwriting) a job's manifest, contact sheet and zip."""
    started = time.monotonic()
    job = client.job(job_id)
    keys = ArtifactKeys.for_job(job_id)
    layout = sheet_layout(len(job.tasks))
    sheet = _new_sheet(job, layout)
    names = _last_worker_names(client, job.tasks)
    files: dict[int, str] = {}
    with tempfile.TemporaryFile(prefix="nova-zip-") as tmp:
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
            for i, (task, data) in enumerate(_results(store, job.tasks)):
                if data is not None:
                    name = zip_name(task)
                    info = zipfile.ZipInfo(name, _zip_time(task.finished_ms or job.finished_ms))
                    # images are compressed already; deflating them costs CPU for nothing
                    info.compress_type = zipfile.ZIP_STORED
                    zf.writestr(info, data)
                    files[task.index] = name
                if i < layout.shown:
                    _draw_tile(sheet, layout, i, task, data, names)
            doc = manifest(client.settings.namespace, job, keys, files, names)
            body = json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8")
            info = zipfile.ZipInfo(MANIFEST_NAME, _zip_time(job.finished_ms))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, body)
        tmp.seek(0)
        zip_bytes = tmp.read()
    meta = {"job": job_id, "artifact": "manifest"}
    store.put(keys.manifest, body, "application/json", meta, overwrite=True)
    store.put(keys.contact_sheet, _png(sheet), "image/png", {**meta, "artifact": "contact-sheet"},
              overwrite=True)
    store.put(keys.zip, zip_bytes, "application/zip", {**meta, "artifact": "zip"},
              overwrite=True)
    log.info("built artifacts of job %s (%d tasks, %d results) in %.2f s", job_id,
             len(job.tasks), len(files), time.monotonic() - started)
    return keys


def _results(store: ResultStore, tasks: Sequence[TaskInfo]
             ) -> Iterator[tuple[TaskInfo, bytes | None]]:
    """Each task with its result bytes (None when it has none), in order, fetched ahead."""

    def fetch(task: TaskInfo) -> bytes | None:
        if task.state != "done" or not task.result:
            return None
        if own_result_ext(task) is None:  # the field is writable: it may point anywhere
            log.warning("result %s of task %s is not its own lease's key; left out",
                        task.result, task.task_id)
            return None
        try:
            return store.get(task.result).data
        except StoreError as exc:
            # a done task must have its object; say so loudly, but the other artifacts
            # are still worth building
            log.warning("result %s of task %s is unreadable: %s", task.result, task.task_id, exc)
            return None

    with concurrent.futures.ThreadPoolExecutor(PREFETCH, thread_name_prefix="nova-post") as pool:
        window: list[tuple[TaskInfo, concurrent.futures.Future[bytes | None]]] = []
        it = iter(tasks)
        for task in it:
            window.append((task, pool.submit(fetch, task)))
            if len(window) >= PREFETCH:
                break
        while window:
            task, fut = window.pop(0)
            nxt = next(it, None)
            if nxt is not None:
                window.append((nxt, pool.submit(fetch, nxt)))
            yield task, fut.result()


def _zip_time(ms: int | None) -> tuple[int, int, int, int, int, int]:
    # a fixed timestamp per entry keeps rebuilt zips byte-identical
    t = time.gmtime((ms or 315532800000) / 1000)
    return (max(t.tm_year, 1980), t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


@functools.lru_cache(maxsize=8)
def _font(px: int) -> Any:
    try:
        return ImageFont.load_default(size=px)  # FreeType font (Pillow >= 10.1)
    except (TypeError, ImportError, OSError):
        return ImageFont.load_default()


def _fit(text: str, font: Any, width: int) -> str:
    if not isinstance(font, ImageFont.FreeTypeFont):
        text = text.encode("latin-1", "replace").decode("latin-1")
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "…") > width:
        text = text[:-1]
    return text + "…" if isinstance(font, ImageFont.FreeTypeFont) else text


def _new_sheet(job: JobStatus, layout: SheetLayout) -> Image.Image:
    sheet = Image.new("RGB", (layout.width, layout.height), _BG)
    draw = ImageDraw.Draw(sheet)
    title = (f"job {job.job_id}  {job.name}  {job.app}  ·  {job.done} done  {job.failed} failed"
             f"  {job.cancelled} cancelled  of {job.total}")
    draw.text((GAP_PX + 2, 5), _fit(title, _font(12), layout.width - 2 * GAP_PX), fill=_TEXT,
              font=_font(12))
    if layout.shown < layout.total:
        draw.text((GAP_PX + 2, layout.height - FOOTER_PX + 3),
                  f"+{layout.total - layout.shown} more tasks not shown (see manifest.json)",
                  fill=_DIM, font=_font(11))
    return sheet


def _draw_tile(sheet: Image.Image, layout: SheetLayout, i: int, task: TaskInfo,
               data: bytes | None, worker_names: dict[str, str]) -> None:
    x, y = layout.tile_origin(i)
    size = layout.tile_px
    thumb = _thumbnail(data, size) if data is not None else None
    draw = ImageDraw.Draw(sheet)
    if thumb is not None:
        draw.rectangle((x, y, x + size - 1, y + size - 1), fill=_TILE_BG)
        sheet.paste(thumb, (x + (size - thumb.width) // 2, y + (size - thumb.height) // 2))
    else:
        if data is not None:
            label = zip_name(task).rsplit(".", 1)[-1]  # a result that is not an image
        elif task.state == "done":
            label = "missing"
        else:
            label = task.state
        draw.rectangle((x, y, x + size - 1, y + size - 1), fill=_PLACEHOLDER.get(label, _TILE_BG))
        if size >= 48:
            font = _font(max(9, min(16, size // 8)))
            text = _fit(label, font, size - 8)
            draw.text((x + (size - font.getlength(text)) // 2, y + size // 2 - 6), text,
                      fill=_TEXT, font=font)
    if layout.caption_px:
        worker = task.worker_name or worker_names.get(task.last_worker_id, "") or "-"
        caption = f"{task.index} {worker} {task.backend}".strip()
        draw.text((x + 1, y + size + 1), _fit(caption, _font(10), size - 2), fill=_DIM,
                  font=_font(10))


def _thumbnail(data: bytes, size: int) -> Image.Image | None:
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.draft("RGB", (size, size))  # JPEG: decode at reduced scale
            im.thumbnail((size, size))
            return im.convert("RGB")
    except Exception:  # noqa: BLE001 - not an image (or a broken one): a placeholder tile
        return None


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()
