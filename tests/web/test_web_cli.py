"""``nova-queue web``: options and env vars, a clear error without Flask, and a real
server process that answers and stops on Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import click
from click.testing import CliRunner

from nova_queue.cli.base import cli
from nova_queue.cli.web import web

#: Runs the CLI with ``web`` registered, whether or not nova_queue/cli/__init__ does it yet.
LAUNCH = ("import sys\n"
          "{prelude}\n"
          "from nova_queue.cli import cli\n"
          "from nova_queue.cli.web import web\n"
          "cli.commands.setdefault('web', web)\n"
          "cli(prog_name='nova-queue')\n")


def group() -> click.Group:
    """The real ``nova-queue`` group, with ``web`` added to a copy of its commands."""
    # the real group's context settings too: click caches a command's help option (-h) the
    # first time it is built, so a group without them would break 'web -h' for later tests
    return click.Group(name="nova-queue", callback=cli.callback, params=cli.params,
                       commands={**cli.commands, "web": web},
                       context_settings=cli.context_settings)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NOVA_") and k != "REDIS_URL"}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


#: Ctrl-C as in a terminal. A test run started as a background job (``pytest &`` in a
#: script) ignores SIGINT and its children inherit that; Python then installs no
#: KeyboardInterrupt handler (as the shell intended), so install the one it would.
SIGINT_AS_IN_A_TERMINAL = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)"


def test_help_lists_options_and_env_vars():
    result = CliRunner().invoke(group(), ["web", "--help"])
    assert result.exit_code == 0
    for text in ("--host", "--port", "NOVA_WEB_HOST", "NOVA_WEB_PORT", "127.0.0.1", "8000"):
        assert text in result.output


def test_port_in_use_is_one_clear_line(redis_url, namespace, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"NOVA_WEB_PORT": str(port), "NOVA_WEB_HOST": "127.0.0.1",
               "NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace,
               "NOVA_STORE_URL": (tmp_path / "s").as_uri()}
        result = CliRunner().invoke(group(), ["web"], env=env)
    assert result.exit_code == 1
    assert f"error: cannot listen on 127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output


def test_without_flask_the_error_says_what_to_install():
    blocked = "sys.modules['flask'] = None  # as if Flask were not installed"
    code = LAUNCH.format(prelude=blocked)
    out = subprocess.run([sys.executable, "-c", code, "web", "--port", "0"],
                         capture_output=True, text=True, timeout=60, env=clean_env(),
                         check=False)
    assert out.returncode == 1, out.stderr
    assert "pip install 'nova-queue[web]'" in out.stderr
    assert "Traceback" not in out.stderr
    helped = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True,
                            text=True, timeout=60, env=clean_env(), check=False)
    assert helped.returncode == 0 and "web" in helped.stdout


def test_serves_until_interrupted(redis_url, namespace, tmp_path, nova):
    from novatests.web import enqueue

    job = enqueue(nova, ["from the cli test"])
    env = clean_env(NOVA_REDIS_URL=redis_url, NOVA_NAMESPACE=namespace,
                    NOVA_STORE_URL=(tmp_path / "store").as_uri(), NOVA_HOME=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH.format(prelude=SIGINT_AS_IN_A_TERMINAL), "web",
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        url = None
        seen = []
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                assert proc.poll() is None, "".join(seen)
                continue
            seen.append(line)
            m = re.search(r"nova-queue web on (http://127\.0\.0\.1:\d+/)", line)
            url = m.group(1) if m else None
        assert url, "".join(seen)
        assert "read-only" in "".join(seen)
        with urllib.request.urlopen(url + "api/jobs", timeout=10) as resp:
            assert [j["job_id"] for j in json.load(resp)] == [job]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_submitting_a_txt2img_job_never_imports_torch(redis_url, namespace, tmp_path, nova):
    code = (
        "import json, sys\n"
        "from nova_queue import Settings\n"
        "from nova_queue.web import create_app\n"
        f"s = Settings(redis_url={redis_url!r}, namespace={namespace!r},\n"
        f"             store_url={(tmp_path / 'store').as_uri()!r}, web_token='t')\n"
        "c = create_app({'TESTING': True, 'SECRET_KEY': 'x'}, settings=s).test_client()\n"
        "c.get('/')\n"
        "with c.session_transaction() as sess: csrf = sess['csrf']\n"
        "r = c.post('/', data={'app': 'txt2img', 'prompts': 'a cat', 'params': 'steps=2',\n"
        "                      'token': 't', 'csrf_token': csrf})\n"
        "heavy = [m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules]\n"
        "print(json.dumps({'status': r.status_code, 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=clean_env(), check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"status": 303, "heavy": []}
    [job] = nova.jobs()
    assert job.app == "txt2img" and job.params["steps"] == 2
