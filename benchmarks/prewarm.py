"""Start a worker process now but let it join later: import the heavy modules (torch,
nova-queue's worker runtime), say so on ``GO_KEY:warm``, wait for a token on ``GO_KEY``,
then run the worker.

    python benchmarks/prewarm.py REDIS_URL GO_KEY nova <nova-queue CLI args...>
    python benchmarks/prewarm.py REDIS_URL GO_KEY pull <pull_worker.py args...>

The scheduling benchmark's late worker: its process start-up is done before t0, so it
joins about ``late_s`` after t0 plus its own self-test/benchmark, whatever the queue.
"""

from __future__ import annotations

import sys

import redis


def main() -> None:
    url, go_key, kind, *args = sys.argv[1:]
    import torch  # noqa: F401 - the import is the warm-up

    import nova_queue.workers.apps.synthetic  # the runner the late worker loads (Pillow)
    import nova_queue.workers.runtime  # noqa: F401

    r = redis.Redis.from_url(url)
    r.rpush(f"{go_key}:warm", "1")
    while r.blpop([go_key], timeout=1) is None:
        pass
    r.close()
    if kind == "nova":
        from nova_queue.cli import main as nova_main

        sys.argv = ["nova-queue", *args]
        nova_main()
    else:
        import pull_worker

        sys.argv = ["pull_worker.py", *args]
        pull_worker.main()


if __name__ == "__main__":
    main()
