"""The protocol version: what the data of a namespace and the scripts that change it mean.

Every client loads its own copy of the Lua scripts, so clients of several releases run side
by side on one namespace. They may, as long as they agree on the data: a release that
changes what a key or field means, or how the scripts use them, raises :data:`PROTOCOL`;
releases of one protocol coexist. The namespace records the version in ``meta``'s field
``protocol`` (the first script that finds it missing writes its own); every script compares
it with its own, folded in at load as ``PROTOCOL.VERSION`` (``nova_queue/scripts.py``), and
answers the error reply ``PROTOCOL_MISMATCH <namespace's> <script's>`` before it writes
anything (:class:`~nova_queue.errors.ProtocolMismatchError` in Python). Readers that run no
script (the gallery, ``status``) compare with :func:`check`.

Versions: 1 was round 1; 2 was round 2 (it changed the argument layouts of several scripts;
releases before protocol checks, up to 0.1.0 without this module, speak 2 but do not check
it); 3 is this release: a job whose every task failed ends ``failed`` (2 knew ``done`` and
``cancelled`` only: its retention sweep, retry, purge, waits and post-worker would mishandle
one), a task's ``failed_on`` lists worker identities, the event stream holds packed
entries (``claimed_many``, ``completed_many``) that readers of 2 do not unpack, and a
small result may be held in Redis (``inline:<task>``) rather than the store, which readers
of 2 would not find.

A version is raised once per release, not once per change: a change made while the next
release is unreleased ships under the version it already raised. 3 is such a version (no
release speaks it yet: ``__version__`` is still 0.1.0, which spoke 2), raised after the
packed entries landed and naming them, so they (and the inline results) need no 4. Readers
of 2 and of 4 refuse a namespace of 3 before reading its stream
(``tests/e2e/test_version_skew.py``).
"""

from __future__ import annotations

import redis

from nova_queue.errors import ProtocolMismatchError
from nova_queue.keys import Keyspace

#: This release's protocol version.
PROTOCOL = 3
#: Lua's ``PROTOCOL.<NAME>`` (folded in at load).
CONSTANTS: dict[str, int] = {"VERSION": PROTOCOL}
#: meta's field holding the namespace's version.
FIELD = "protocol"


def recorded(client: redis.Redis, keys: Keyspace) -> str | None:
    """The namespace's recorded protocol version, as stored (None: not recorded yet)."""
    value = client.hget(keys.meta(), FIELD)
    return value.decode() if isinstance(value, bytes) else value


def check(client: redis.Redis, keys: Keyspace) -> None:
    """Raise ProtocolMismatchError if the namespace records another protocol than
    :data:`PROTOCOL` (a namespace that records none is fine: the first script records it)."""
    value = recorded(client, keys)
    if value is not None and _number(value) != PROTOCOL:
        raise ProtocolMismatchError(keys.namespace, value, PROTOCOL)


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None
