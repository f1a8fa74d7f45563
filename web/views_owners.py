"""Page: the owners (``/owners``): who uses the pool, their shares and recent usage, and
what each has queued (fair share: the least usage per share is served first)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from nova_queue import shares
from nova_queue.web.extensions import nova
from nova_queue.web.text import fmt_seconds

bp = Blueprint("owners", __name__)


@bp.get("/owners")
def index() -> Any:
    """Owners, least usage per share first."""
    found = shares.owners(nova.client)
    active = sum(o.share for o in found if o.queued_apps) or 1.0
    rows = [{**o.to_json(), "usage_text": fmt_seconds(o.usage_s),
             "entitled_text": f"{100 * o.share / active:.0f} %" if o.queued_apps else "idle",
             "queued_text": ", ".join(o.queued_apps) or "–"} for o in found]
    return render_template("owners.html", owners=rows,
                           half_life=fmt_seconds(shares.half_life_s(nova.client)))
