"""A claim's arguments: the one layout every claiming script reads (``claim-12`` after its
prefix, worker id and events MAXLEN, ``complete_claim-15`` after its commit,
``complete_batch-12`` after its commits), built here and read there by one include,
``lua/includes/claim_argv.lua``, in the same order (``tests/core/test_lua_argv.py`` checks)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class ClaimArgs:
    """What a worker asks for when it claims: ``k`` tasks of ``app`` (one attempt id each,
    ``attempt_ids``: k to 64 of them), leased for ``ttl_ms``, with the scripts' grace gap
    (``gap_ms``), at most ``reap_limit`` lost workers and expired leases reaped on the way,
    and a run-time limit of at least ``timeout_floor_ms`` or ``timeout_factor`` times the
    predicted finish for a job without its own."""

    app: str
    k: int
    ttl_ms: int
    gap_ms: int
    reap_limit: int
    timeout_floor_ms: int
    timeout_factor: str  # a float as repr() writes it: the script parses it exactly
    attempt_ids: Sequence[str]

    def for_every_id(self) -> ClaimArgs:
        """This claim for as many tasks as it has attempt ids (what a commit's next claim asks
        for: a retry's ids decide, not ``k``)."""
        return ClaimArgs(self.app, len(self.attempt_ids), self.ttl_ms, self.gap_ms,
                         self.reap_limit, self.timeout_floor_ms, self.timeout_factor,
                         self.attempt_ids)

    def argv(self) -> list[str | int]:
        """The arguments in claim_argv.lua's order: the fields, then the attempt ids."""
        return [self.app, self.k, self.ttl_ms, self.gap_ms, self.reap_limit,
                self.timeout_floor_ms, self.timeout_factor, *self.attempt_ids]
