"""Job submission from the jobs page: prompts, app and params validated like the CLI does.

Prompts come from the text box or an uploaded file and go through
:func:`nova_queue.prompts.parse_prompts`; params are ``key=value`` lines checked by the
app's ``parse_params``; tasks come from its ``make_tasks``. Any error names its source and
line, and nothing is enqueued.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
from collections.abc import Mapping

from werkzeug.datastructures import FileStorage

from nova_queue.apps.registry import available_apps, load_app
from nova_queue.client import NovaClient
from nova_queue.errors import InputError
from nova_queue.limits import MAX_RUN_S
from nova_queue.placement import parse_requirements
from nova_queue.prompts import parse_prompts
from nova_queue.terms import parse_budget, parse_deadline

_PARAM_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
TEXT_SOURCE = "prompts box"
REQUIRES_SOURCE = "requirements"
PARAMS_SOURCE = "params"


@dataclasses.dataclass(frozen=True)
class SubmitForm:
    """What the form sent (kept to refill the form after an error)."""

    app: str = "synthetic"
    prompts: str = ""
    params: str = ""
    name: str = ""
    priority: str = "0"
    #: run-time limit per task in seconds; empty: derived from predictions
    timeout: str = ""
    #: requirements on the workers' labels, one per line (``backend=cuda,rocm``)
    requires: str = ""
    #: the job's terms (nova_queue/terms.py): when it should be done, what it may spend
    deadline: str = ""
    budget: str = ""

    @classmethod
    def from_form(cls, form: Mapping[str, str]) -> SubmitForm:
        return cls(app=form.get("app", "").strip(), prompts=form.get("prompts", ""),
                   params=form.get("params", ""), name=form.get("name", "").strip(),
                   priority=form.get("priority", "0").strip() or "0",
                   timeout=form.get("timeout", "").strip(),
                   requires=form.get("requires", ""),
                   deadline=form.get("deadline", "").strip(), budget=form.get("budget", "").strip())


def parse_param_lines(text: str, source: str = PARAMS_SOURCE) -> dict[str, str]:
    """``key=value`` lines (blank lines and ``#`` comments skipped) into a dict."""
    params: dict[str, str] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _PARAM_KEY_RE.match(key):
            raise InputError("expected key=value", source=source, line=number)
        if key in params:
            raise InputError(f"parameter {key!r} given twice", source=source, line=number)
        params[key] = value.strip()
    return params


def read_prompts(form: SubmitForm, upload: FileStorage | None) -> list[str]:
    """Prompts from the uploaded file or the text box (exactly one of them)."""
    has_file = upload is not None and bool(upload.filename)
    if has_file and form.prompts.strip():
        raise InputError("give prompts in the text box or as a file, not both")
    if has_file:
        assert upload is not None
        name = os.path.basename((upload.filename or "").replace("\\", "/")) or "upload"
        return parse_prompts(upload.read(), name)
    return parse_prompts(form.prompts.encode("utf-8", "surrogatepass"), TEXT_SOURCE)


def submit(client: NovaClient, form: SubmitForm, upload: FileStorage | None) -> str:
    """Validate everything, then enqueue the job; returns its id."""
    if form.app not in available_apps():
        raise InputError(f"unknown app {form.app!r}; available: {', '.join(available_apps())}")
    try:
        priority = int(form.priority)
    except ValueError:
        raise InputError("priority must be an integer from -1000 to 1000") from None
    timeout_s = parse_timeout(form.timeout)
    budget = parse_budget(form.budget, "budget") if form.budget else None
    deadline = (datetime.datetime.fromtimestamp(
        parse_deadline(form.deadline, client.server_time_ms(), "deadline") / 1000,
        datetime.timezone.utc) if form.deadline else None)
    prompts = read_prompts(form, upload)
    app = load_app(form.app)
    params = app.parse_params(parse_param_lines(form.params))
    tasks = app.make_tasks(prompts, params)
    requires = parse_requirement_lines(form.requires)
    return client.enqueue(form.app, tasks, params=params, priority=priority, name=form.name,
                          timeout_s=timeout_s, requires=requires,
                          owner=client.settings.web_owner, model=app.model_key(params),
                          deadline=deadline, budget=budget)


def parse_requirement_lines(text: str) -> list:
    """One requirement per line (blank lines and ``#`` comments skipped), each named by its
    line when it is wrong."""
    out = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            try:
                out += parse_requirements([line])
            except InputError as exc:
                raise InputError(exc.reason, source=REQUIRES_SOURCE, line=number) from None
    return out


def parse_timeout(text: str) -> float | None:
    """The form's run-time limit (seconds), or None when left empty."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.001 <= value <= MAX_RUN_S:  # also false for NaN
        raise InputError(f"timeout must be a number of seconds from 0.001 to {MAX_RUN_S}, "
                         "or empty")
    return value
