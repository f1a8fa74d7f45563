"""What every part of :class:`~nova_queue.client.NovaClient` holds: one Redis connection, one
namespace's keys, the settings and the caller of its scripts. The parts (producer, reader,
worker, batch, fleet, retention) are objects the client composes; each gets these from the
client and the other parts it needs as arguments, never through the client."""

from __future__ import annotations

import redis

from nova_queue.client.caller import Caller
from nova_queue.keys import Keyspace
from nova_queue.settings import Settings


class Part:
    """The state the client's parts share (all of it read-only after construction)."""

    def __init__(self, client: redis.Redis, keys: Keyspace, settings: Settings,
                 caller: Caller):
        self.redis = client
        self.keys = keys
        self.prefix = keys.prefix
        self.settings = settings
        self.caller = caller
        #: the events stream's approximate MAXLEN, which every writing script takes
        self.maxlen = settings.events_maxlen

    def server_time_ms(self) -> int:
        """Redis's clock in ms (the only clock leases use)."""
        sec, usec = self.redis.time()
        return int(sec) * 1000 + int(usec) // 1000
