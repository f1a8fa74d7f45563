"""``nova-queue web``: the gallery and live dashboard (needs the ``web`` extra)."""

from __future__ import annotations

import click

from nova_queue.cli.base import Context, fail, handle_errors, pass_ctx, shared_options

INSTALL_HINT = "the web app needs Flask: pip install 'nova-queue[web]'"
_WEB_DEPENDENCIES = ("flask", "flask_sock", "simple_websocket", "prometheus_client", "werkzeug")


@click.command()
@click.option("--host", envvar="NOVA_WEB_HOST", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 for every interface). Env NOVA_WEB_HOST.")
@click.option("--port", envvar="NOVA_WEB_PORT", default=8000, show_default=True,
              type=click.IntRange(0, 65535), help="TCP port (0: any free one). Env NOVA_WEB_PORT.")
@shared_options()
@pass_ctx
@handle_errors
def web(ctx: Context, host: str, port: int) -> None:
    """Serve the web gallery, live dashboard, JSON API and /metrics.

    Submissions need NOVA_WEB_TOKEN (read-only without it); several replicas must share
    NOVA_WEB_SECRET.
    """
    try:
        from nova_queue.web.app import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in _WEB_DEPENDENCIES:
            fail(f"{INSTALL_HINT} ({exc.name} is missing)")
        raise
    settings = ctx.settings
    shown = f"[{host}]" if ":" in host else host

    def ready(bound_port: int) -> None:
        mode = "" if settings.web_token else ", read-only: set NOVA_WEB_TOKEN to allow submissions"
        click.echo(f"nova-queue web on http://{shown}:{bound_port}/ (namespace "
                   f"{settings.namespace}{mode}); Ctrl-C to stop", err=True)

    try:
        serve(settings, host, port, on_ready=ready)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        pass
