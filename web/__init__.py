"""The web gallery and live dashboard (Flask + flask-sock).

``create_app()`` builds the app (``gunicorn 'nova_queue.web:create_app()'`` works);
``nova-queue web`` serves it with :func:`serve`. See ``app.py`` for configuration.
"""

from nova_queue.web.app import create_app, make_web_server, serve

__all__ = ["create_app", "make_web_server", "serve"]
