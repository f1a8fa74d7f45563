"""Running one of this release's Lua commands: the one way every part of the client, and the
doctor, calls a script (``caller.run("claim", keys, args)``).

A script's answers that are the same for every command become exceptions here: a namespace
of another protocol version (the script's error reply) is a ProtocolMismatchError, and
``{BAD_INPUT, message}``, which every script answers before it writes anything, is an
InputError. Every other status code is the calling part's to read (``errors.raise_for_code``).
"""

from __future__ import annotations

from typing import Any

import redis

from nova_queue import errors
from nova_queue.scripts import Scripts


class Caller:
    """Runs the registered commands of ``scripts`` for the namespace ``namespace``."""

    def __init__(self, scripts: Scripts, namespace: str):
        self.scripts = scripts
        self.namespace = namespace

    def run(self, name: str, keys: list[str], args: list[Any]) -> list[Any]:
        """Run command ``name`` with its ``keys`` and ``args``; its reply, unless that is
        BAD_INPUT (InputError) or a protocol mismatch (ProtocolMismatchError)."""
        try:
            res = self.scripts.call(name, keys, args)
        except redis.ResponseError as exc:
            raise self._refusal(exc) from None
        return self.answer(name, res)

    def answer(self, name: str, res: Any) -> list[Any]:
        """``run``'s reading of a reply to ``name`` that came another way (a pipelined
        call's, read off the connection)."""
        if isinstance(res, redis.ResponseError):
            raise self._refusal(res)
        if res and res[0] == errors.BAD_INPUT:  # every script answers {-9, message}
            raise errors.InputError(f"{name}: {res[1] if len(res) > 1 else 'invalid input'}")
        return res

    def _refusal(self, exc: redis.ResponseError) -> Exception:
        """A script's error reply: ProtocolMismatchError when it refused the namespace's
        protocol, else the error itself."""
        return errors.protocol_error(exc, self.namespace) or exc
