"""``nova-queue gateway``: the worker protocol over HTTP for machines you do not control.

``create_app()`` builds the Flask app (``gunicorn 'nova_queue.web.gateway:create_app()'``
works); ``nova-queue gateway`` serves it with :func:`serve` on waitress when it is
installed (``nova-queue[gateway]``), else on werkzeug's threaded server, as ``nova-queue
web`` does (both from ``nova_queue/serving.py``; the gateway never imports the web layer).
See ``app.py`` for what it holds and ``routes.py`` for the calls.
"""

from nova_queue.web.gateway.app import create_app, serve

__all__ = ["create_app", "serve"]
