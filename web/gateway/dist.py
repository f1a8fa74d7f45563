"""What a machine needs before it has a token: the gateway's release and its wheel.

No token is needed for these (they hold no secret: the package's own code):

- ``GET /v1/version``: ``{"service": "nova-queue-gateway", "nova": version, "protocol": N,
  "wheel": file name or null}``; ``tokens create --gateway`` asks it which wheel the join
  commands install, and a worker asks it over plain HTTP to tell a scheme mismatch
  (``workers/scheme.py``);
- ``GET /v1/dist/<wheel>``: the wheel of exactly this release (``nova_queue/dist.py``
  makes it), to ``pip install 'nova-queue[extra] @ URL'``: the wheel from the gateway,
  the extra's dependencies from the machine's own index;
- ``GET /v1/dist/simple/``: a PEP 503 index of that one file, for ``pip install
  --index-url URL/v1/dist/simple --no-deps nova-queue==VERSION``; ``GET /v1/dist/``: a
  page naming both.

While the wheel is still being made (a checkout's build takes seconds) they answer 503
with ``Retry-After``, which pip retries.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, send_file
from markupsafe import escape

from nova_queue import __version__, protocol
from nova_queue.dist import DIST_NAME, WheelCache

bp = Blueprint("dist", __name__, url_prefix="/v1")
#: What ``/v1/version`` calls this service (a worker's scheme check looks for it).
SERVICE = "nova-queue-gateway"
#: Seconds a client is asked to wait while the wheel is made.
RETRY_AFTER_S = 5


def _cache() -> WheelCache:
    return current_app.extensions["nova_wheel"]


def _unavailable() -> Any:
    cache = _cache()
    if cache.error:
        message = f"the gateway cannot serve its wheel: {cache.error}"
    else:
        cache.start()
        message = "the gateway is making its wheel; retry in a few seconds"
    resp = jsonify({"error": message, "kind": "unavailable"})
    resp.headers["Retry-After"] = str(RETRY_AFTER_S)
    return resp, 503


def _html(title: str, body: str) -> Any:
    page = (f"<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" "
            f"content=\"1.0\"><title>{escape(title)}</title></head>\n<body>\n{body}\n"
            "</body></html>\n")
    return page, 200, {"Content-Type": "text/html; charset=utf-8"}


@bp.get("/version")
def version() -> Any:
    """This gateway's release, protocol and wheel (null until it is made: ``serve`` makes it
    at start, an app served otherwise at the first ``/v1/dist/`` request)."""
    cache = _cache()
    return jsonify({"service": SERVICE, "nova": __version__, "protocol": protocol.PROTOCOL,
                    "wheel": cache.path.name if cache.path else None})


@bp.get("/dist/")
def dist_page() -> Any:
    """A page naming the wheel and the index."""
    cache = _cache()
    if cache.path is None:
        return _unavailable()
    name = escape(cache.path.name)
    return _html(f"nova-queue {__version__}",
                 f"<h1>nova-queue {escape(__version__)}</h1>\n"
                 f"<p>The wheel of this pool's release: <a href=\"{name}\">{name}</a></p>\n"
                 "<p>A PEP 503 index of it: <a href=\"simple/\">simple/</a></p>")


@bp.get("/dist/simple/")
def simple_root() -> Any:
    """PEP 503: the one project."""
    return _html("Simple index", f"<a href=\"{DIST_NAME}/\">{DIST_NAME}</a>")


@bp.get("/dist/simple/<project>/")
def simple_project(project: str) -> Any:
    """PEP 503: the one file of the project, with its hash and Requires-Python."""
    if project.lower().replace("_", "-").replace(".", "-") != DIST_NAME:
        return jsonify({"error": f"no project {project!r} here", "kind": "not_found"}), 404
    cache = _cache()
    if cache.path is None:
        return _unavailable()
    name = escape(cache.path.name)
    requires = (f" data-requires-python=\"{escape(cache.requires_python)}\""
                if cache.requires_python else "")
    return _html(f"Links for {DIST_NAME}",
                 f"<a href=\"../../{name}#sha256={cache.sha256}\"{requires}>{name}</a>")


@bp.get("/dist/<filename>")
def wheel(filename: str) -> Any:
    """The wheel itself."""
    cache = _cache()
    if cache.path is None:
        return _unavailable()
    if filename != cache.path.name:
        return jsonify({"error": f"this gateway serves {cache.path.name}, not {filename}",
                        "kind": "not_found"}), 404
    return send_file(cache.path, mimetype="application/octet-stream", as_attachment=True,
                     download_name=cache.path.name, max_age=3600)
