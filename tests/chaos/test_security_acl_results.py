"""Results held in Redis (nova_queue/results.py) under the documented ACL roles: nothing
past what the roles grant (docs/SECURITY.md; the roles' own tests: test_security_acl.py)."""

from __future__ import annotations

import pytest
import redis
from novatests.chaos.acl import acl_server, load_scripts
from novatests.chaos.fleet import chaos_client

from nova_queue import TaskSpec
from nova_queue.keys import result_key
from nova_queue.results import Results
from nova_queue.stores import open_store


@pytest.fixture
def acl_redis(private_redis, namespace):
    yield from acl_server(private_redis, namespace)


def test_a_small_result_is_held_by_the_worker_role_and_read_by_the_gallery_role(
        acl_redis, namespace, tmp_path):
    """The worker's commit writes it with the commands its scripts already call; the
    gallery reads it with HGET and HMGET, and may not write it."""
    _, urls, admin = acl_redis
    load_scripts(admin)
    admin.enqueue("synthetic", [TaskSpec("small", 1.0)])
    worker = chaos_client(urls["nova-worker"], namespace)
    gallery = chaos_client(urls["nova-gallery"], namespace)
    try:
        worker.register_worker("w-inline", {"name": "w-inline"}, ["synthetic"])
        [lease] = worker.claim("w-inline", "synthetic").leases
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "txt")
        worker.complete("w-inline", lease, key, run_s=0.1, warm=True,
                        meta={"content_type": "text/plain"}, inline=b"\x00small\xff")
        obj = Results(gallery.redis, gallery.keys, open_store(tmp_path.as_uri())).get(key)
        assert (obj.data, obj.content_type) == (b"\x00small\xff", "text/plain")
        with pytest.raises(redis.exceptions.NoPermissionError):
            gallery.redis.hset(admin.keys.inline(lease.task_id), "data", "forged")
    finally:
        worker.close()
        gallery.close()
