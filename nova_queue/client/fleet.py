"""The fleet as an admin and the gallery see it: the registered workers, who can run an app
now (live, serving it, labels that meet its requirements, no ``cannot_run`` mark for its
model), and an admin's quarantine of a worker. A part of
:class:`~nova_queue.client.NovaClient`; reads are plain pipelined commands, the quarantine
one Lua script."""

from __future__ import annotations

from collections.abc import Sequence

from nova_queue import errors
from nova_queue.cannot_run import Runners, split_runners
from nova_queue.client.part import Part
from nova_queue.client.worker import check_worker_id
from nova_queue.keys import ident_of
from nova_queue.limits import MAX_COOLDOWN_S
from nova_queue.placement import Requirement, labels_from_json, meets, unmet
from nova_queue.worker_info import WorkerInfo


class Fleet(Part):
    """The workers of the namespace: who they are, who can run what, quarantine."""

    def workers(self, *, include_gone: bool = True, limit: int = 1000) -> list[WorkerInfo]:
        """Registered workers, live ones first."""
        ids = self.redis.zrevrange(self.keys.workers(), 0, limit - 1)
        alive_scores = dict(self.redis.zrange(self.keys.alive(), 0, -1, withscores=True))
        now_ms = self.server_time_ms()
        pipe = self.redis.pipeline(transaction=False)
        for wid in ids:
            pipe.hgetall(self.keys.worker(wid))
            pipe.smembers(self.keys.held(wid))
            pipe.hgetall(self.keys.trust(ident_of(wid)))
        res = pipe.execute()
        out = []
        for i, wid in enumerate(ids):
            h, held, record = res[3 * i], res[3 * i + 1], res[3 * i + 2]
            if not h:
                continue
            alive = wid in alive_scores
            if not alive and not include_gone:
                continue
            out.append(WorkerInfo.from_hash(h, alive=alive, current=sorted(held), now_ms=now_ms,
                                            record=record))
        out.sort(key=lambda w: (not w.alive, w.host_id, w.name))
        return out

    def eligible_workers(self, app: str, requires: Sequence[Requirement] = (),
                         model: str | None = None) -> list[str]:
        """Ids of the live workers (heartbeat not expired) that serve ``app`` and whose
        labels meet ``requires``, sorted; with ``model`` ('' for a job without one), only
        those without a live ``cannot_run`` mark for it (:meth:`who_can_run`).

        What a job of ``app`` can run on right now; an empty list means its tasks wait
        until such a worker joins."""
        if model is not None:
            return self.who_can_run(app, requires, model).eligible
        live = self._live_app_workers(app)
        if not requires:
            return sorted(live)
        return sorted(w for w, labels in self.worker_labels(live).items() if meets(labels, requires))

    def who_can_run(self, app: str, requires: Sequence[Requirement] = (),
                    model: str = "") -> Runners:
        """The live workers of ``app`` whose labels meet ``requires``: those that can run a
        job of ``model`` now, and those that cannot prepare it (a live ``cannot_run`` mark:
        who and why; :mod:`nova_queue.cannot_run`)."""
        live = self._live_app_workers(app)
        pipe = self.redis.pipeline(transaction=False)
        for wid in live:
            pipe.hmget(self.keys.worker(wid), "labels", "cannot_run", "name")
        rows = {wid: tuple(row) for wid, row in zip(live, pipe.execute())} if live else {}
        return split_runners(app, model, requires, rows, self.server_time_ms())

    def _live_app_workers(self, app: str) -> list[str]:
        members = sorted(self.redis.smembers(self.keys.app_workers(app)))
        if not members:
            return []
        now_ms = self.server_time_ms()
        scores = self.redis.zmscore(self.keys.alive(), members)
        return [wid for wid, s in zip(members, scores) if s is not None and s >= now_ms]

    def worker_labels(self, worker_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """``{worker id: its labels}`` (placement.py): what requirements are checked against."""
        pipe = self.redis.pipeline(transaction=False)
        for wid in worker_ids:
            pipe.hget(self.keys.worker(wid), "labels")
        return {wid: labels_from_json(raw) for wid, raw in zip(worker_ids, pipe.execute())}

    def unmet_requirement(self, app: str, requires: Sequence[Requirement]) -> str:
        """Why no live worker of ``app`` meets ``requires`` (placement.unmet)."""
        return unmet(list(self.worker_labels(self._live_app_workers(app)).values()), requires)

    def live_apps(self) -> dict[str, int]:
        """``{app: live workers serving it}`` over every live worker (for "who could run
        this" hints)."""
        now_ms = self.server_time_ms()
        live = self.redis.zrangebyscore(self.keys.alive(), now_ms, "+inf")
        if not live:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for wid in live:
            pipe.hget(self.keys.worker(wid), "apps")
        out: dict[str, int] = {}
        for apps in pipe.execute():
            for a in (apps or "").split(","):
                if a:
                    out[a] = out.get(a, 0) + 1
        return dict(sorted(out.items()))

    def set_quarantine(self, worker_id: str, quarantined: bool, *, reason: str = "",
                       cooldown_s: float | None = None) -> str:
        """An admin's call: quarantine a worker by hand (its claims are refused; it probes
        with one task after ``cooldown_s``) or let a quarantined one back at once. Returns
        ``quarantined``, ``released`` or ``unchanged``; raises WorkerLostError for an
        unknown worker id."""
        check_worker_id(worker_id)
        cooldown = self.settings.quarantine_cooldown_s if cooldown_s is None else cooldown_s
        if not 0.001 <= cooldown <= MAX_COOLDOWN_S:
            raise errors.InputError(f"cool-down must be from 0.001 to {MAX_COOLDOWN_S} s")
        k = self.keys
        code, state = self.caller.run(
            "quarantine", [k.worker(worker_id), k.alive(), k.failed(), k.finished(), k.events(),
                           k.meta()],
            [self.prefix, worker_id, "quarantine" if quarantined else "release",
             reason[:500], int(cooldown * 1000), self.maxlen])
        errors.raise_for_code(int(code), detail=str(state))
        return str(state)
