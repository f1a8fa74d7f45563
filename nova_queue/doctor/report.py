"""What the doctor says: each :class:`Finding` (a check's line, the keys involved, problem or
warning, the repair op that fixes it) and the :class:`Report` of one namespace, which the
CLI prints as text or JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

from nova_queue import protocol


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing wrong: which check, a line saying what, the keys involved, whether it is a
    problem (a guarantee is broken) or a warning, and the repair op that fixes it (None:
    --repair cannot)."""

    check: str
    message: str
    keys: tuple[str, ...] = ()
    severity: str = "problem"
    repair: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "message": self.message, "keys": list(self.keys),
                "severity": self.severity, "repairable": self.repair is not None}


@dataclasses.dataclass
class Report:
    """What the doctor found in one namespace (and, with --repair, what it did first)."""

    namespace: str
    findings: list[Finding] = dataclasses.field(default_factory=list)
    checked: dict[str, int] = dataclasses.field(default_factory=dict)
    repaired: list[str] = dataclasses.field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "problem"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity != "problem"]

    @property
    def ok(self) -> bool:
        """No problem (warnings do not break a guarantee)."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "ok": self.ok, "protocol": protocol.PROTOCOL,
                "checked": self.checked, "repaired": self.repaired,
                "problems": [f.to_json() for f in self.problems],
                "warnings": [f.to_json() for f in self.warnings]}
