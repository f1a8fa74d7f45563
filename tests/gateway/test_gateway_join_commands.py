"""What ``tokens create NAME --gateway URL`` prints after the token: the commands that join
a machine, for the token's apps and the gateway's own release; without a URL, how to get
them; a URL that is not one is refused before any token is made."""

from __future__ import annotations

import shlex

from click.testing import CliRunner
from novatests.cli import nova_env, runner_env

from nova_queue import __version__, tokens
from nova_queue.cli import cli
from nova_queue.dist import wheel_name
from nova_queue.local import free_port


def create(redis_url, namespace, tmp_path, *args, env=None):
    return CliRunner().invoke(cli, ["tokens", "create", *args],
                              env=runner_env(nova_env(redis_url, namespace, tmp_path,
                                                      **(env or {}))))


def indented(stdout: str) -> list[str]:
    return [line.strip() for line in stdout.splitlines() if line.startswith("  ")]


def test_the_join_commands_for_a_torch_app(redis_url, namespace, tmp_path, live_gateway, admin):
    res = create(redis_url, namespace, tmp_path, "pc", "--app", "txt2img", "--gateway",
                 live_gateway)
    assert res.exit_code == 0, res.output
    token = res.stdout.splitlines()[0]
    wheel = f"{live_gateway}/v1/dist/{wheel_name(__version__)}"
    assert indented(res.stdout) == [
        f"python -m pip install 'nova-queue @ {wheel}'",
        "nova-queue setup-torch",  # before the extra, so it does not pull another torch
        f"python -m pip install 'nova-queue[txt2img] @ {wheel}'",
        f"export NOVA_WORKER_TOKEN={token}",
        f"nova-queue worker --gateway {live_gateway} --app txt2img"]
    assert "pc" in {t.name for t in tokens.list_tokens(admin)} and "note:" not in res.stderr


def test_a_token_for_any_app_gets_what_every_app_needs(redis_url, namespace, tmp_path,
                                                      live_gateway):
    res = create(redis_url, namespace, tmp_path, "any", env={"NOVA_GATEWAY_URL": live_gateway})
    lines = indented(res.stdout)
    assert "nova-queue setup-torch" in lines and any("[txt2img]" in x for x in lines)
    assert lines[-1] == f"nova-queue worker --gateway {live_gateway}"  # its default apps
    # a torch-free app: no torch, no extra
    res = create(redis_url, namespace, tmp_path, "cpu-only", "--app", "synthetic",
                 "--gateway", live_gateway)
    assert [shlex.split(x)[0] for x in indented(res.stdout)] == ["python", "export",
                                                                  "nova-queue"]


def test_an_unreachable_gateway_is_said_and_this_release_assumed(redis_url, namespace, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    res = create(redis_url, namespace, tmp_path, "far", "--app", "synthetic", "--gateway", url)
    assert res.exit_code == 0, res.output
    assert f"could not ask {url} which release it serves" in res.stderr
    assert indented(res.stdout)[0].endswith(f"/v1/dist/{wheel_name(__version__)}'")


def test_without_a_gateway_it_says_how_to_get_the_commands(redis_url, namespace, tmp_path):
    res = create(redis_url, namespace, tmp_path, "plain")
    assert res.exit_code == 0 and res.stdout.strip().count("\n") == 0  # the token alone
    assert "add --gateway URL" in res.stderr and "NOVA_GATEWAY_URL" in res.stderr


def test_a_bad_gateway_url_is_refused_before_the_token_is_made(redis_url, namespace, tmp_path,
                                                             admin):
    res = create(redis_url, namespace, tmp_path, "bad", "--gateway", "gpu.example.org")
    assert res.exit_code == 1 and res.stdout == ""
    assert "must start with https://" in res.stderr
    assert tokens.list_tokens(admin) == []  # nothing half-made
