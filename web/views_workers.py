"""Page: the fleet (``/workers``), workers grouped by host, with a warning for each app
that has pending tasks but no live worker to serve them."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from nova_queue.web.live import workers_view

bp = Blueprint("workers", __name__)


@bp.get("/workers")
def index() -> Any:
    """Workers by host; refreshed live by ``static/workers.js``."""
    view = workers_view()
    return render_template("workers.html", groups=view["groups"], warnings=view["warnings"])
