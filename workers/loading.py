"""While a runner prepares a job: a model load is recorded and logged, never silent.

A runner's ``prepare`` may load a model for minutes (txt2img: a first download, a large
pipeline on a slow disk). Around it (:meth:`ModelLoads.preparing`):

- when the job's model (its spec's ``model_key``) is not the one this worker last
  recorded loading, it logs that it loads it and records the start (``note_loading``:
  ``enqueue --wait`` and the demo show "loading model on w1 (12 s)", the gallery's feed a
  ``model_loading`` event); a prepare that loaded nothing after all, or failed, takes the
  record back (a load it did is recorded by :meth:`ModelLoads.record`, ``note_loaded``);
- every :data:`PROGRESS_EVERY_S` while ``prepare`` runs, a log line says it still does, and
  for how long (:func:`still_running`, which the startup benchmark uses too).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator

import redis

from nova_queue.errors import NovaError
from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)

#: How often a long prepare says it is still at it.
PROGRESS_EVERY_S = 10.0


class _Ticker:
    """One daemon thread for every :func:`still_running` block of the process, started at
    the first: a block costs a dict entry, not a thread (a worker enters one per batch it
    prepares, hundreds a second for small tasks)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        #: token -> [app, what, started, next line due] (monotonic seconds)
        self._blocks: dict[int, list] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, app: str, what: str) -> int:
        now = time.monotonic()
        with self._cond:
            token = next(self._tokens)
            self._blocks[token] = [app, what, now, now + PROGRESS_EVERY_S]
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="nova-progress",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
            return token

    def remove(self, token: int) -> None:
        with self._cond:
            self._blocks.pop(token, None)  # the thread sleeps on until its next due time

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for block in self._blocks.values():
                    app, what, started, due = block
                    if due <= now:
                        log.info("%s: still %s (%.0f s)", app, what, now - started)
                        block[3] = now + PROGRESS_EVERY_S
                due = min((b[3] for b in self._blocks.values()), default=None)
                self._cond.wait(None if due is None else max(0.0, due - now))


_TICKER = _Ticker()


@contextlib.contextmanager
def still_running(app: str, what: str) -> Iterator[None]:
    """Log ``<app>: still <what> (N s)`` every :data:`PROGRESS_EVERY_S` while the block runs."""
    token = _TICKER.add(app, what)
    try:
        yield
    finally:
        _TICKER.remove(token)


class Preparing:
    """One prepare: whether its start was recorded (``noted``) and whether it loaded."""

    def __init__(self) -> None:
        self.noted = False
        self.loaded = False


class ModelLoads:
    """One executor's model loads (an app's, on one worker): see the module docstring."""

    def __init__(self, client: WorkerTransport, worker_id: str, app: str):
        self.client, self.worker_id, self.app = client, worker_id, app
        #: the model its runner holds, as far as this worker knows (None: none yet)
        self.warm: str | None = None

    def _note(self, model: str, start: bool) -> bool:
        """note_loading; a failure costs only the display (logged, not raised)."""
        try:
            self.client.note_loading(self.worker_id, self.app, model, start=start)
            return True
        except (redis.RedisError, NovaError) as exc:
            log.debug("could not record that loading %s %s: %s", model,
                      "started" if start else "stopped", exc)
            return False

    @contextlib.contextmanager
    def preparing(self, model: str, job_id: str) -> Iterator[Preparing]:
        """Around the runner's ``prepare`` for ``job_id``, whose model is ``model`` ('' for
        none); the caller sets ``.loaded`` to what prepare answered."""
        state = Preparing()
        loading = bool(model) and model != self.warm
        if loading:
            log.info("%s: loading model %s for job %s", self.app, model, job_id)
            state.noted = self._note(model, True)
        what = f"loading model {model}" if loading else "preparing"
        try:
            with still_running(self.app, f"{what} for job {job_id}"):
                yield state
            self.warm = model or self.warm  # prepared: the runner holds it
        finally:
            if state.noted and not state.loaded:  # no load to record: take the start back
                self._note(model, False)

    def record(self, model: str, load_s: float) -> None:
        """The runner loaded ``model`` in ``load_s``: the worker holds it warm now (claims
        prefer its jobs here; this also ends the loading record)."""
        if not model:
            return
        try:
            self.client.note_loaded(self.worker_id, self.app, model, load_s)
        except (redis.RedisError, NovaError) as exc:
            log.warning("could not record the load of %s (%s)", model, exc)
