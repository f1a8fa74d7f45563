"""The Redis ACL roles of docs/SECURITY.md, read from the document and applied to a private
redis-server: what the ACL tests (tests/chaos/test_security_acl*.py) share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

from nova_queue.scripts import script_sources
from novatests.chaos.fleet import chaos_client

DOC = Path(__file__).resolve().parents[4] / "docs" / "SECURITY.md"
PASSWORDS = {"nova-admin": "admin-pw-1", "nova-worker": "worker-pw-2",
             "nova-gallery": "gallery-pw-3"}


def documented_acl(ns: str) -> dict[str, list[str]]:
    """``{user: rules}`` from the ```acl block of docs/SECURITY.md, for namespace ``ns``."""
    block = re.search(r"```acl\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL).group(1)
    users = {}
    for line in block.splitlines():
        words = line.split()
        if words[:1] == ["user"]:
            users[words[1]] = [f">{PASSWORDS[words[1]]}" if w.startswith(">")
                               else w.replace("NAMESPACE", ns) for w in words[2:]]
    return users


def acl_server(private_redis: Callable[..., Any], namespace: str) -> Iterator[tuple]:
    """A private Redis with the documented users (a fixture's body): yields (server,
    {user: url}, an admin NovaClient)."""
    server = private_redis()
    root = redis.Redis(port=server.port, decode_responses=True)
    for user, rules in documented_acl(namespace).items():
        root.execute_command("ACL", "SETUSER", user, "reset", *rules)
    urls = {u: f"redis://{u}:{pw}@127.0.0.1:{server.port}/0" for u, pw in PASSWORDS.items()}
    admin = chaos_client(urls["nova-admin"], namespace)
    try:
        yield server, urls, admin
    finally:
        admin.close()
        root.close()


def load_scripts(admin) -> None:
    """The documented admin step (``nova-queue load-scripts`` as the admin user), so
    workers can EVALSHA the scripts."""
    from click.testing import CliRunner

    from nova_queue.cli import cli

    out = CliRunner().invoke(cli, ["--redis", admin.settings.redis_url, "--namespace",
                                   admin.settings.namespace, "load-scripts"])
    assert out.exit_code == 0, out.output
    assert f"loaded {len(script_sources())} scripts" in out.output
    assert PASSWORDS["nova-admin"] not in out.output
