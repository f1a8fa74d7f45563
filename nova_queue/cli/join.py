"""What ``nova-queue tokens create NAME --gateway URL`` prints after the token: the commands
that join a machine to the pool through that gateway, ready to paste into a new
virtualenv.

The package comes from the gateway itself (``/v1/dist/``, its own release, whatever index
the machine uses), installed first without extras; then ``nova-queue setup-torch`` where
the token's apps need torch (so the extra's ``torch`` requirement is met by a build that
fits the machine, not by the multi-GB CUDA build an index offers by default); then the
extra, whose other dependencies come from the machine's own index; then the worker, its
token in the environment (a flag would show in the process list).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import requests

from nova_queue import __version__
from nova_queue.apps.registry import available_apps, load_app
from nova_queue.dist import wheel_name
from nova_queue.errors import NovaError

#: How long ``tokens create`` waits for the gateway to say which release it serves.
ASK_TIMEOUT_S = 10.0


def gateway_wheel(url: str, ca_bundle: str = "") -> tuple[str, str]:
    """(the wheel's file name, a note): the gateway's own wheel, or (when the gateway
    cannot be asked) this release's, with a note saying so."""
    try:
        resp = requests.get(url.rstrip("/") + "/v1/version", timeout=(5.0, ASK_TIMEOUT_S),
                            verify=ca_bundle or True)
        body = resp.json()
        version = str(body["nova"])
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        reason = type(exc).__name__ if isinstance(exc, requests.RequestException) else \
            "no release in its answer"
        return wheel_name(__version__), (
            f"could not ask {url} which release it serves ({reason}): these commands "
            f"assume nova-queue {__version__}, this command's release")
    return str(body.get("wheel") or wheel_name(version)), ""


def app_extras(apps: Sequence[str]) -> tuple[list[str], bool]:
    """(the extras the token's apps need on a worker, whether they need torch); a token for
    any app gets what every known app needs. An app not installed here needs nothing known."""
    extras: list[str] = []
    torch = False
    for name in apps or available_apps():
        try:
            spec = load_app(name)
        except NovaError:
            continue
        if spec.worker_extra and spec.worker_extra not in extras:
            extras.append(spec.worker_extra)
        torch = torch or spec.needs_torch
    return extras, torch


#: What precedes the commands.
HEADER = "Join a machine with it: in a new virtualenv there (Python >= 3.10), run"


def join_commands(url: str, token: str, apps: Sequence[str], wheel: str) -> list[str]:
    """The shell lines that join a machine (in a new virtualenv) with ``token``."""
    url = url.rstrip("/")
    wheel_url = f"{url}/v1/dist/{wheel}"
    extras, torch = app_extras(apps)
    lines = [f"python -m pip install {shlex.quote(f'nova-queue @ {wheel_url}')}"]
    if torch:
        lines.append("nova-queue setup-torch")
    if extras:
        package = f"nova-queue[{','.join(extras)}] @ {wheel_url}"
        lines.append(f"python -m pip install {shlex.quote(package)}")
    lines.append(f"export NOVA_WORKER_TOKEN={shlex.quote(token)}")
    worker = ["nova-queue", "worker", "--gateway", url]
    for app in apps:
        worker += ["--app", app]
    lines.append(shlex.join(worker))
    return lines
