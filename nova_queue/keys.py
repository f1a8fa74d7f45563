"""The Redis keyspace. This docstring is the schema; ``tests/core/test_keys.py`` pins it.

Every key of a namespace starts with ``nova:{<ns>}:`` — the braces are a Redis Cluster
hash tag, so all keys of one namespace live in one slot and every script runs on a
cluster. Scripts build keys for ids they discover (task ids, worker ids, app names)
from that same prefix; all other keys arrive in ``KEYS``.

Names that become parts of keys use short safe alphabets, so no name can be a Redis ACL
glob (``*``, ``?``, ``[``, ``\\``) or carry control characters: namespaces
:data:`NAMESPACE_RE`, apps :data:`APP_NAME_RE`, job ids :data:`JOB_ID_RE`, worker ids and
attempt ids :data:`WORKER_ID_RE` / :data:`ATTEMPT_ID_RE`. The Lua scripts check the same
patterns (``lua/includes/common.lua``).

Times are Redis ``TIME`` in milliseconds (``*_ms``); durations are seconds (``*_s``).
Writers: E enqueue, C claim, R renew, K complete, F fail, P reap, X cancel,
G register, D deregister, T retry, A abort, Q quarantine, L loaded and loading (complete_claim and
complete_batch write as K, then as C), Y the retention sweep (expire) and purge, O doctor's repairs, U an admin
through the client (shares, the usage half-life), and B the web gallery (its own unlock
state, nothing else), N ``nova-queue tokens`` and H the gateway. Readers: W worker runtime, U CLI/API, B web gallery, M metrics,
Q post-processing, H the gateway.

======================================  =======  ===  =================  ========
key                                     type     TTL  written by         read by
======================================  =======  ===  =================  ========
nova:{ns}:job:<job>                     hash     -    E C K F P X T Y O  C U B Q
nova:{ns}:task:<job>:<index>            hash     -    E C R K F P X T A  U B Q
nova:{ns}:inline:<job>:<index>          hash     -    K Y                U B Q W
nova:{ns}:verify:<app>                  zset     -    K C F P            C
nova:{ns}:trust:<ident>                 hash     -    G K                U B
nova:{ns}:unverified:<ident>            zset     -    K                  K
nova:{ns}:jobs                          zset     -    E Y O              U B
nova:{ns}:staging                       zset     -    E A P O            P
nova:{ns}:stage:<job>                   zset     -    E A                E
nova:{ns}:pending:<app>                 zset     -    E C F P X T O      C B M
nova:{ns}:leases                        zset     -    C R K F P O        P M
nova:{ns}:inflight                      hash     -    C K F P O          C M
nova:{ns}:seq                           string   -    E                  E
nova:{ns}:apps                          set      -    E                  B M
nova:{ns}:failed                        zset     -    F P T Y O          B
nova:{ns}:finished                      zset     -    K F P X T Y O      Q
nova:{ns}:expiring                      zset     -    K F P X C O Y      Y
nova:{ns}:expired                       zset     -    Y                  U B
nova:{ns}:workers                       zset     -    G P Y O            U B M
nova:{ns}:departed                      zset     -    P D Y O            Y
nova:{ns}:idents                        hash     -    G Y                C K F P G
nova:{ns}:alive                         zset     -    G R P D            C P
nova:{ns}:worker:<wid>                  hash     -    G C R K F P D Y    C U B M
nova:{ns}:held:<wid>                    set      -    C K F P D Y O      C P D
nova:{ns}:app:<app>:workers             set      -    G P D              B
nova:{ns}:app:<app>:fleet               zset     -    G K P D            C
nova:{ns}:app:<app>:warm                hash     -    C P L              C
nova:{ns}:app:<app>:owners              set      -    E C F P T Y        C U B
nova:{ns}:app:<app>:owner:<owner>       zset     -    E C F P T Y        C U
nova:{ns}:usage                         hash     -    K U                C U B
nova:{ns}:shares                        hash     -    U                  C U B
nova:{ns}:meta                          hash     -    all scripts        all scripts U B
nova:{ns}:events                        stream   -    all writers        B U Q
nova:{ns}:web:session:<digest>          string   TTL  B                  B
nova:{ns}:web:fails:<client>            string   TTL  B                  B
nova:{ns}:tokens                        hash     -    N                  N U
nova:{ns}:token:<digest>                hash     -    N H                H U
nova:{ns}:gw:rate:<digest>:<window>     string   TTL  H                  H
======================================  =======  ===  =================  ========

Fields and members:

- ``job:<job>``: ``id app params`` (JSON object) ``priority max_attempts name created_ms
  started_ms finished_ms state`` (staging | queued | running | done: every task ended, a
  task or more done, ``failed`` counts the others | failed: every task ended, not one done |
  cancelled | expired: being deleted) ``total staged pending leased done failed cancelled``
  (task counts) ``seq0``
  ``timeout_s`` (run-time limit per task; '' derives it) ``requires`` (JSON list of
  ``[key, op, values]``, :mod:`nova_queue.placement`) ``owner`` ``model`` (what its tasks
  need warm) ``retention_s`` (how long it stays once finished) ``purge_next`` (the lowest
  task index not yet deleted, while it expires) ``verifying`` (tasks whose result awaits
  verification); its terms (:mod:`nova_queue.terms`, written at enqueue, '' for none)
  ``deadline_ms`` (epoch ms) ``budget`` (dollars), and what it cost: ``spent`` (dollars
  predicted at each claim by a priced worker: what a budget caps) ``cost`` (dollars of its
  committed runs) ``behind_ms`` (when a claim first found its deadline out of the live
  pool's reach) ``held_ms`` (when a claim first held it back for its budget).
- ``task:<job>:<index>``: written at enqueue ``state`` (pending | leased | verifying | done |
  failed | cancelled) ``input cost``; at claim ``lease_gen attempt_id attempt_count worker
  worker_name backend host deadline_ms claimed_ms predicted_s run_deadline_ms``; a backup
  attempt the same names prefixed ``b_`` (``b_worker b_lease_gen b_attempt_id ...``) and
  ``backups gen_top``; at commit ``result finished_ms run_s warm cold_s meta
  won_by_backup``; ``charged`` (the predicted time fair share charged its owner at claim);
  on failure ``error error_kind last_worker oom`` (comma-separated worker
  ids that ran out of memory on it) ``oom_memory oom_batch`` (the largest device memory and
  the smallest batch it did so with) ``failed_on`` (the identities, :func:`ident_of`, of the
  workers it failed or timed out on) ``free_backs`` (times it was handed back without using
  an attempt: a shutdown, an infra failure, a preparation failure).
  A result awaiting verification (docs/SECURITY.md): ``cand`` (its result key) ``cand_wid
  cand_name cand_backend cand_host cand_owner`` (who made it) ``cand_run_s cand_ms cand_meta
  cand_gen cand_attempt`` (its run, when, its provenance and lease), the same prefixed
  ``cand2`` for a second opinion that disagreed (``cand2 cand2_wid cand2_name cand2_backend
  cand2_host cand2_owner cand2_run_s cand2_ms cand2_meta cand2_gen cand2_attempt``),
  ``v_since_ms`` (since when it
  waits) ``v_need`` (trusted: only a trusted worker may verify it) ``v_tries`` (verifier
  attempts that ended without a commit); a verified result ``verified_by verified_by_name``
  (the worker that agreed).
  A task id is ``<job>:<index>``.
- ``inline:<job>:<index>``: ``data``, the task's committed result itself when it was small
  enough to be held in Redis (``NOVA_INLINE_RESULT_BYTES``; :mod:`nova_queue.results`), written by
  the commit that holds the lease, deleted with the task; ``cand`` and ``cand2``, results
  awaiting verification (moved to ``data`` when one stands).
- ``verify:<app>``: task ids whose result awaits verification, scored by since when (ms);
  a claim of a worker that verifies (``verifier`` 1) takes them first.
- ``trust:<ident>``: an identity's record of verification, kept across its worker ids:
  ``level`` (new | earned: TRUST_AFTER agreements in a row) ``streak`` (agreements in a
  row) ``verified mismatches`` ``last_verified_ms last_mismatch_ms mismatch_reason
  trusted_ms``. ``unverified:<ident>``: the task ids of its results that stand unverified
  (not sampled), scored by when they were committed, its latest 1024: a mismatch re-runs
  them.
- ``pending:<app>``: task ids scored ``(1000 - priority) * 2**42 + seq`` — priority first,
  then FIFO, where ``seq = seq0 + index + 1`` (``seq0``: the job's block of the ``seq``
  counter); a requeued task gets the same score back and returns to its old place.
- ``leases``: leased task ids scored by lease deadline (ms). Reaping sweeps it.
- ``inflight``: app -> number of leased tasks (``claim`` tells EMPTY from WAIT with it).
- ``jobs`` / ``staging`` / ``finished`` / ``failed``: ids scored by created / created /
  finished / failed time. ``finished`` is the post-processing outbox: done and failed jobs
  (a cancelled one is not post-processed); a retry takes a job out of it.
- ``expiring``: every finished (done, failed or cancelled) job id scored by when its
  retention ends
  (``finished_ms + 1000 * retention_s``); the sweep deletes the job, its tasks and index
  entries then. ``expired``: ids of jobs so deleted (or purged), scored by when (ms; a
  purge adds 0.5, ``PURGED_MARK``): at most 100,000, kept for as long again as the
  retention (a minute at least), so readers can say "expired" or "purged" rather than
  "unknown".
- ``departed``: workers that left or were lost, scored by when; the sweep deletes their
  ``worker:`` and ``held:`` keys and ``workers`` entry one retention later (unless they joined
  again).
- ``workers``: every registered worker id scored by join time; ``alive``: live worker ids
  scored by heartbeat expiry (ms), swept to find lost workers.
- ``worker:<wid>``: ``id name host host_id node_id pid backend device memory_total
  memory_free apps`` (comma list) ``capability`` (JSON) ``gflops joined_ms last_seen_ms
  state`` (idle | busy | lost | stopped) ``left_ms`` (when it left or was lost)
  ``busy_until_ms tasks_done failures oom claims``
  ``claim_ms`` (its last claim, WAIT answers included: others' claims count on a worker only
  while it claims, or runs what it claimed) ``last_claim`` (the first attempt id of the last
  claim that leased it tasks: a retried claim sends it again and gets those leases back)
  and per app ``bench:<app>`` (startup benchmark, s per cost unit) ``ema:<app>`` (moving
  average of warm runs, s per cost unit) ``n:<app>`` (warm samples) ``cold:<app>``
  (first-run compile/warm-up s) ``load:<app>`` (load s) ``done:<app>`` ``warm:<app>`` (the
  model it holds or is loading) ``loading:<app>`` (when its load of that model started,
  while it runs); ``labels`` (JSON object) ``model_loads last_done_ms``;
  its failure streak ``fail_streak fast_streak streak_since_ms streak_tids blamed
  last_error``; a quarantine ``quarantined quarantine_reason quarantined_ms
  quarantine_until_ms cooldown_ms probe_tid``; its free hand-backs ``free_n`` in the window
  that began at ``free_since_ms``; ``cannot_run`` (JSON list of at most 16
  ``{app, model, reason, since_ms, until_ms}``: the apps and models it could not prepare,
  written by fail kind ``prepare``, read by claim; :mod:`nova_queue.cannot_run`);
  ``protocol`` (the protocol version of the release that registered it; none: a release
  before protocol checks); ``trust`` (none: trusted, the operator vouches for it; new or
  earned: its results are sampled for verification, its identity's ``trust:`` record)
  ``verifier`` (1: it re-runs others' results to verify them) ``verifies`` (verifications it
  holds: its commits look for candidates while it holds one) ``owner`` (a gateway token's
  owner; none: its identity is its owner) ``price`` (dollars per hour of
  its time: ``worker --cost-per-hour``, a gateway worker's token's; :mod:`nova_queue.terms`).
- ``idents``: identity -> its latest worker id. A worker id is ``<identity>.<instance>``
  (:func:`ident_of`): a gateway worker's identity is its token's name, a direct worker's its
  node and name (``workers/node.py``). A new worker id of an identity takes over the previous
  one's quarantine, failure streak and free hand-backs at register (blame follows the
  identity, not the process); the retention sweep drops the entry with the worker it names.
- ``held:<wid>``: task ids the worker leases. (A worker's heartbeat is its score in
  ``alive``; there is no separate heartbeat key, so the worker role needs no ``SET``.)
- ``app:<app>:workers``: live workers serving the app; ``app:<app>:fleet``: those with a
  speed estimate, scored by it (s per cost unit).
- ``app:<app>:warm``: model -> how many live workers hold it warm (or are loading it).
- ``app:<app>:owners``: owners with jobs of the app that may have pending tasks;
  ``app:<app>:owner:<owner>``: those jobs, scored by their first task's pending score
  (priority, then FIFO). A claim under fair share drops a job whose tasks are all taken, a
  requeue puts it back, and the retention sweep or a purge drops it for good (with one owner
  no claim drops it).
- ``usage``: ``f:<owner>`` (recent worker-seconds, forward-decayed in the log domain:
  lua/includes/note_usage.lua) ``half_life_s`` ``phase`` (keeps the decay continuous when the
  half-life changes); ``shares``: owner -> share (weight; 1 when unset).
- ``meta``: ``protocol`` (the namespace's protocol version, :mod:`nova_queue.protocol`; the
  first script to find it missing writes its own, every script checks it), ``last_tick_ms``
  (last script run) and ``grace_until_ms`` (no reaping before; set after Redis was
  unreachable, so lease holders get one renewal window); ``noverify:<app>`` (since when no
  live worker could verify the app's results, until a verifier registers for the app; or
  ``nocompare``: a vouched worker said the app's results cannot be compared: its untrusted
  results are only validated): results of the app are not held for verification.
- ``events``: ``XADD`` with ``MAXLEN ~``; fields ``type`` and that type's fields, both
  from the one table of event types, :data:`nova_queue.events.EVENT_TYPES` (name, fields,
  meaning); the claimed or completed events of several tasks of one call are one entry,
  :data:`nova_queue.events.PACKED_TYPES` (``claimed_many``, ``completed_many``), which
  :func:`nova_queue.events.unpack` turns back into per-task events.
- ``web:session:<digest>``: a gallery session with write access; ``<digest>`` is the
  SHA-256 (hex) of the random nonce in the session cookie, the value an HMAC of the web
  token under the gallery's secret (a changed token no longer matches); TTL: the unlock
  lifetime. ``web:fails:<client>``: unlock attempts of one client address (IPv6: its /64)
  in the current window, TTL: the window (``web/auth.py``).
- ``tokens``: gateway worker token name -> the SHA-256 (hex) of the token, ``<digest>``;
  ``token:<digest>``: ``name apps`` (comma list; empty: any) ``labels`` (JSON object the
  worker's labels are pinned to) ``created_ms last_used_ms`` ``worker`` (the worker id the
  gateway gave the token's current process) ``registered`` (the apps that process
  registered) ``trust`` ``cost_per_hour`` (its worker's price, dollars per hour). The token
  itself is never stored (``nova_queue/tokens.py``).
- ``gw:rate:<digest>:<window>``: the token's requests in one fixed rate-limit window
  (``<window>``: Redis seconds // the window length), TTL: twice the window.
"""

from __future__ import annotations

import dataclasses
import re

from nova_queue.errors import ConfigError

PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
#: Namespaces become the hash tag of every key (``nova:{<ns>}:``) and the pattern of the
#: documented ACL rules (``~nova:{<ns>}:*``): no glob characters, no controls, short.
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
#: App names become parts of keys (``pending:<app>``) and are checked against this.
APP_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
#: Job ids (``job:<job>``, ``task:<job>:<index>``, result keys).
JOB_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
#: Worker ids (``worker:<wid>``, ``held:<wid>``).
WORKER_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")
#: Attempt ids: a fresh random token per lease, part of the result key.
ATTEMPT_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
#: A result key's extension.
RESULT_EXT_RE = re.compile(r"^[A-Za-z0-9]{1,16}\Z")


def ident_of(worker_id: str) -> str:
    """The identity a worker id belongs to (Lua's ``ident_of``): what precedes its last
    ``.`` — a gateway worker's token name, a direct worker's node — or the id itself."""
    head, dot, tail = worker_id.rpartition(".")
    return head if dot and head and tail else worker_id


def check_namespace(namespace: object) -> str:
    """Return ``namespace`` if it matches :data:`NAMESPACE_RE`, else raise ConfigError."""
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        shown = repr(namespace) if len(repr(namespace)) <= 80 else repr(namespace)[:77] + "..."
        raise ConfigError(f"invalid namespace {shown}: use 1 to 64 letters, digits, '_', '.' "
                         "or '-'")
    return namespace


def result_key(job_id: str, index: int, lease_gen: int, attempt_id: str, ext: str) -> str:
    """The result-store key of one lease's result (the format ``complete`` enforces)."""
    return f"jobs/{job_id}/results/{index:05d}-g{lease_gen}-{attempt_id}.{ext}"


@dataclasses.dataclass(frozen=True)
class Keyspace:
    """Builds every key of one namespace."""

    namespace: str = "default"

    def __post_init__(self) -> None:
        check_namespace(self.namespace)

    @property
    def prefix(self) -> str:
        return f"nova:{{{self.namespace}}}:"

    def _k(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    # jobs and tasks
    def job(self, job_id: str) -> str:
        return self._k("job", job_id)

    def task(self, task_id: str) -> str:
        return self._k("task", task_id)

    def inline(self, task_id: str) -> str:
        """A task's result when it is held in Redis (small results) instead of the store."""
        return self._k("inline", task_id)

    def jobs(self) -> str:
        return self._k("jobs")

    def staging(self) -> str:
        return self._k("staging")

    def stage(self, job_id: str) -> str:
        return self._k("stage", job_id)

    def pending(self, app: str) -> str:
        return self._k("pending", app)

    def leases(self) -> str:
        return self._k("leases")

    def inflight(self) -> str:
        return self._k("inflight")

    def seq(self) -> str:
        return self._k("seq")

    def apps(self) -> str:
        return self._k("apps")

    def failed(self) -> str:
        return self._k("failed")

    def finished(self) -> str:
        return self._k("finished")

    def expiring(self) -> str:
        return self._k("expiring")

    def expired(self) -> str:
        return self._k("expired")

    # workers
    def workers(self) -> str:
        return self._k("workers")

    def alive(self) -> str:
        return self._k("alive")

    def departed(self) -> str:
        return self._k("departed")

    def idents(self) -> str:
        return self._k("idents")

    def verify(self, app: str) -> str:
        """Task ids whose result awaits verification, of one app."""
        return self._k("verify", app)

    def trust(self, ident: str) -> str:
        """An identity's verification record."""
        return self._k("trust", ident)

    def unverified(self, ident: str) -> str:
        """The tasks of an identity's results that stand unverified."""
        return self._k("unverified", ident)

    def worker(self, worker_id: str) -> str:
        return self._k("worker", worker_id)

    def held(self, worker_id: str) -> str:
        return self._k("held", worker_id)

    def app_workers(self, app: str) -> str:
        return self._k("app", app, "workers")

    def app_fleet(self, app: str) -> str:
        return self._k("app", app, "fleet")

    def app_warm(self, app: str) -> str:
        return self._k("app", app, "warm")

    def app_owners(self, app: str) -> str:
        return self._k("app", app, "owners")

    def app_owner_queue(self, app: str, owner: str) -> str:
        return self._k("app", app, "owner", owner)

    def usage(self) -> str:
        return self._k("usage")

    def shares(self) -> str:
        return self._k("shares")

    # namespace-wide
    def meta(self) -> str:
        return self._k("meta")

    def events(self) -> str:
        return self._k("events")

    # the web gallery's own state
    def web_session(self, digest: str) -> str:
        return self._k("web", "session", digest)

    def web_unlock_fails(self, client: str) -> str:
        return self._k("web", "fails", client)

    # gateway worker tokens (nova_queue/tokens.py, web/gateway)
    def tokens(self) -> str:
        return self._k("tokens")

    def token(self, digest: str) -> str:
        return self._k("token", digest)

    def gateway_rate(self, digest: str, window: int) -> str:
        return self._k("gw", "rate", digest, str(int(window)))


def task_id(job_id: str, index: int) -> str:
    """The id of task ``index`` of ``job_id``."""
    return f"{job_id}:{index}"


def split_task_id(tid: str) -> tuple[str, int]:
    """``"<job>:<index>"`` -> ``(job, index)``."""
    job, _, index = tid.rpartition(":")
    return job, int(index)
