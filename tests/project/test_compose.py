"""docker-compose.yml and the Dockerfiles under workers/, validated statically (no Docker
engine here): ``docker-compose config`` accepts the file, with no .env on a fresh clone and
then publishing nothing beyond 127.0.0.1; docker-compose.many-machines.yml, which opens Redis
and the store to other machines, refuses to resolve without real secrets; every
``nova-queue`` command they run (each file alone and merged) parses with the real CLI, and the deployment settings the
README promises are in place.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from novatests.cli import check_cli
from novatests.docker import dockerfile

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
#: the override that opens Redis and the store to workers on other machines
MANY_MACHINES = ROOT / "docker-compose.many-machines.yml"
DOCKERFILES = {kind: ROOT / "workers" / f"Dockerfile.{kind}" for kind in ("cpu", "cuda", "rocm")}
NOVA_SERVICES = {"web", "gateway", "worker-cpu", "post-worker", "worker-cuda", "worker-rocm"}
COMPOSE_ENV = {"NOVA_REDIS_PASSWORD": "test-redis-pw", "AWS_ACCESS_KEY_ID": "nova-test",
               "AWS_SECRET_ACCESS_KEY": "test-secret-123"}
SECRETS = tuple(COMPOSE_ENV)


def find_compose() -> str | None:
    return shutil.which("docker-compose") or (
        "/usr/bin/docker-compose" if os.path.exists("/usr/bin/docker-compose") else None)


needs_compose = pytest.mark.skipif(
    find_compose() is None,
    reason="docker-compose not installed (Debian package docker-compose; .ci/run installs it)")


def compose(*args: str, env: dict[str, str] | None = None,
            files: tuple[Path, ...] = (COMPOSE_FILE,)) -> subprocess.CompletedProcess:
    """Run docker-compose on the repo's file(s) with a clean, test-controlled environment
    (an empty env file: a developer's .env next to the file must not leak in)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NOVA_", "AWS_", "COMPOSE_", "DOCKER_"))}
    file_args = [a for f in files for a in ("-f", str(f))]
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.env"
        empty.write_text("")
        return subprocess.run([find_compose(), "--env-file", str(empty), *file_args, *args],
                              env={**base, **(env if env is not None else COMPOSE_ENV)},
                              capture_output=True, text=True, timeout=60, cwd=ROOT,
                              check=False)


def published(service: dict[str, Any]) -> list[tuple[str, int]]:
    """(host address, host port) of each published port of a resolved service; compose v1
    prints ``IP:PORT:TARGET/tcp``, v2 the long form."""
    out = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append((port.get("host_ip", "0.0.0.0"), int(port["published"])))
        else:
            parts = str(port).split("/")[0].split(":")
            assert len(parts) == 3, f"{port}: publish on an explicit address"
            out.append((parts[0], int(parts[1])))
    return out


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    """The compose file as written (variables unresolved, YAML anchors merged)."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return spec["services"]


# ---- Dockerfiles -----------------------------------------------------------------------

def exec_form(path: Path, instruction: str) -> list[str]:
    """The JSON array of the last ENTRYPOINT or CMD; fails if it is shell form."""
    values = [rest for word, rest in dockerfile(path) if word == instruction]
    assert values, f"{path.name} has no {instruction}"
    parsed = json.loads(values[-1])  # shell form is not JSON
    assert isinstance(parsed, list) and all(isinstance(x, str) for x in parsed)
    return parsed


def base_image(path: Path) -> str:
    """The FROM image, with ARG defaults substituted."""
    args: dict[str, str] = {}
    for word, rest in dockerfile(path):
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name] = value
        if word == "FROM":
            return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest.split()[0])
    raise AssertionError(f"{path.name} has no FROM")


def assert_pinned(image: str) -> None:
    name, _, tag = image.rpartition(":")
    assert name and "/" not in tag and tag not in ("", "latest"), f"{image} is not pinned"


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_dockerfile_conventions(kind):
    path = DOCKERFILES[kind]
    steps = dockerfile(path)
    base = base_image(path)
    assert_pinned(base)
    assert {"cpu": "python:3.11-slim", "cuda": "cuda", "rocm": "rocm/pytorch"}[kind] in base
    assert exec_form(path, "ENTRYPOINT") == ["nova-queue"]
    assert exec_form(path, "CMD")[:3] == ["worker", "--backend", kind]
    users = [rest for word, rest in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image must run as a non-root user"
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert re.search(r"pip install \"?\.\[[a-z0-9,]*txt2img[a-z0-9,]*s3", runs), runs
    if kind == "cpu":
        assert "download.pytorch.org/whl/cpu" in runs
        assert "web" in re.search(r"\.\[([a-z0-9,]+)\]", runs).group(1)  # web + post-worker


def test_dockerignore_keeps_what_the_build_needs():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv*", ".env"} <= ignored  # .env holds the compose secrets
    assert not {"pyproject.toml", "README.md", "nova_queue", "web", "workers"} & ignored


# ---- every nova-queue command parses with the real CLI ---------------------------------

def service_argv(service: dict[str, Any]) -> list[str]:
    """Entrypoint + command of a nova service, falling back to its Dockerfile's."""
    path = ROOT / service["build"]["dockerfile"]
    entrypoint = service.get("entrypoint") or exec_form(path, "ENTRYPOINT")
    command = service.get("command") or exec_form(path, "CMD")
    assert isinstance(entrypoint, list) and isinstance(command, list), "use exec form"
    return [*entrypoint, *command]


@pytest.mark.parametrize("name", sorted(NOVA_SERVICES))
def test_compose_commands_use_flags_the_cli_accepts(services, name):
    argv = service_argv(services[name])
    sub = check_cli(argv)
    assert sub.info_name == {"web": "web", "post-worker": "post-worker",
                             "gateway": "gateway"}.get(name, "worker")
    if name == "web":
        assert sub.params["host"] == "0.0.0.0" and sub.params["port"] == 8000


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_dockerfile_commands_use_flags_the_cli_accepts(kind):
    path = DOCKERFILES[kind]
    sub = check_cli([*exec_form(path, "ENTRYPOINT"), *exec_form(path, "CMD")])
    assert sub.params["backend"] == kind


def test_check_cli_rejects_unknown_flags():
    with pytest.raises(click.UsageError):
        check_cli(["nova-queue", "worker", "--no-such-flag"])
    with pytest.raises(click.UsageError):
        check_cli(["nova-queue", "post-worker", "--bogus"])


# ---- deployment settings ---------------------------------------------------------------

def test_redis_is_durable_and_password_protected(spec, services):
    redis_svc = services["redis"]
    cmd = redis_svc["command"]
    assert isinstance(cmd, list) and cmd[0] == "redis-server"
    pairs = dict(zip(cmd[1::2], cmd[2::2]))
    assert pairs["--appendonly"] == "yes" and pairs["--appendfsync"] == "everysec"
    assert pairs["--maxmemory-policy"] == "noeviction"
    assert pairs["--requirepass"].startswith("${NOVA_REDIS_PASSWORD:-local-only")
    # the healthcheck authenticates through the environment, not an argument
    assert redis_svc["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert redis_svc["environment"]["REDISCLI_AUTH"].startswith("${NOVA_REDIS_PASSWORD")
    assert_pinned(redis_svc["image"])
    assert "redis-data:/data" in redis_svc["volumes"] and "redis-data" in spec["volumes"]


def test_minio_is_pinned_healthy_and_initialised(services):
    minio, init = services["minio"], services["minio-init"]
    assert re.fullmatch(r"minio/minio:RELEASE\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ", minio["image"])
    assert re.fullmatch(r"minio/mc:RELEASE\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ", init["image"])
    assert minio["healthcheck"]["test"][0] == "CMD"
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"
    assert "mc mb --ignore-existing nova/nova" in " ".join(init["entrypoint"])


def test_nova_services_share_redis_and_store(services):
    for name in NOVA_SERVICES:
        svc = services[name]
        env = svc["environment"]
        assert env["NOVA_REDIS_URL"].startswith("redis://:${NOVA_REDIS_PASSWORD")
        assert env["NOVA_REDIS_URL"].endswith("@redis:6379/0")
        assert "s3://nova/results" in env["NOVA_STORE_URL"]
        assert "http://minio:9000" in env["AWS_ENDPOINT_URL"]
        assert env["AWS_ACCESS_KEY_ID"].startswith("${AWS_ACCESS_KEY_ID")
        assert env["AWS_SECRET_ACCESS_KEY"].startswith("${AWS_SECRET_ACCESS_KEY")
        assert svc["depends_on"]["redis"]["condition"] == "service_healthy"
        assert svc["depends_on"]["minio-init"]["condition"] == "service_completed_successfully"


def test_gpu_workers_sit_behind_profiles(services):
    assert {n for n, s in services.items() if s.get("profiles")} == {"worker-cuda", "worker-rocm"}
    cuda, rocm = services["worker-cuda"], services["worker-rocm"]
    assert cuda["profiles"] == ["cuda"] and rocm["profiles"] == ["rocm"]
    device = cuda["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert cuda["build"]["dockerfile"] == "workers/Dockerfile.cuda"
    assert rocm["build"]["dockerfile"] == "workers/Dockerfile.rocm"
    assert {"/dev/kfd", "/dev/dri"} <= set(rocm["devices"])
    assert "video" in rocm["group_add"] and any("render" in g for g in rocm["group_add"])


def test_exec_form_and_pinned_images_everywhere(services):
    for name, svc in services.items():
        for key in ("command", "entrypoint"):
            if key in svc:
                assert isinstance(svc[key], list), f"{name}.{key} must be exec form"
        if "healthcheck" in svc:
            assert svc["healthcheck"]["test"][0] == "CMD", f"{name} healthcheck: exec form"
        assert_pinned(svc["image"])
    assert {"redis", "minio", "web"} <= {n for n, s in services.items() if "healthcheck" in s}


# ---- docker-compose itself -------------------------------------------------------------

@needs_compose
def test_docker_compose_config_accepts_the_file():
    proc = compose("--profile", "cuda", "--profile", "rocm", "config")
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)
    assert set(resolved["services"]) == {"redis", "minio", "minio-init"} | NOVA_SERVICES
    assert resolved["services"]["web"]["environment"]["NOVA_REDIS_URL"] == (
        "redis://:test-redis-pw@redis:6379/0")
    assert resolved["services"]["redis"]["command"][-1] == "test-redis-pw"
    # and the default profile starts the same core services
    plain = compose("config", "--services")
    assert plain.returncode == 0, plain.stderr
    assert {"redis", "minio", "minio-init", "web", "worker-cpu", "post-worker"} <= set(
        plain.stdout.split())


def test_bare_file_publishes_only_the_gallery_on_localhost(services):
    """Redis and MinIO are reachable only inside the compose network: their default,
    local-only credentials protect nothing another machine can reach."""
    for name in ("redis", "minio", "minio-init", "worker-cpu", "post-worker"):
        assert "ports" not in services[name], f"{name} must publish no port by default"
    assert services["web"]["ports"] == ["${NOVA_WEB_BIND:-127.0.0.1}:${NOVA_WEB_PORT:-8000}:8000"]


def test_many_machines_override_requires_every_secret(services):
    spec = yaml.safe_load(MANY_MACHINES.read_text())
    assert set(spec["services"]) <= set(services)  # it only opens services of the bare file
    redis_svc, minio = spec["services"]["redis"], spec["services"]["minio"]
    assert redis_svc["environment"]["REDISCLI_AUTH"].startswith("${NOVA_REDIS_PASSWORD:?")
    assert minio["environment"]["MINIO_ROOT_USER"].startswith("${AWS_ACCESS_KEY_ID:?")
    assert minio["environment"]["MINIO_ROOT_PASSWORD"].startswith("${AWS_SECRET_ACCESS_KEY:?")
    assert redis_svc["ports"] == ["${NOVA_REDIS_BIND:-0.0.0.0}:${NOVA_REDIS_PORT:-6379}:6379"]
    assert "127.0.0.1:${NOVA_MINIO_CONSOLE_PORT:-9001}:9001" in minio["ports"]


@needs_compose
def test_bare_compose_needs_no_env_and_publishes_nothing_beyond_localhost():
    """``docker compose up`` on a fresh clone: no .env, no variables set."""
    proc = compose("--profile", "cuda", "--profile", "rocm", "config", env={})
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)["services"]
    ports = {name: published(svc) for name, svc in resolved.items()}
    assert ports.pop("web") == [("127.0.0.1", 8000)]
    assert ports.pop("gateway") == [("127.0.0.1", 8700)]  # behind a local TLS proxy
    assert all(not p for p in ports.values()), ports  # Redis and MinIO stay inside
    # the services agree on the local-only credentials
    password = resolved["redis"]["environment"]["REDISCLI_AUTH"]
    assert password and resolved["redis"]["command"][-1] == password
    for name in NOVA_SERVICES:
        env = resolved[name]["environment"]
        assert env["NOVA_REDIS_URL"] == f"redis://:{password}@redis:6379/0"
        assert env["AWS_ACCESS_KEY_ID"] == resolved["minio"]["environment"]["MINIO_ROOT_USER"]
        assert env["AWS_SECRET_ACCESS_KEY"] == (
            resolved["minio"]["environment"]["MINIO_ROOT_PASSWORD"])
    assert len(resolved["minio"]["environment"]["MINIO_ROOT_PASSWORD"]) >= 8  # MinIO's minimum
    for name in NOVA_SERVICES:  # what docker compose would run parses with the real CLI
        check_cli(service_argv(resolved[name]))


@needs_compose
@pytest.mark.parametrize("missing", SECRETS)
def test_many_machines_refuses_to_start_without_each_secret(missing):
    env = {k: v for k, v in COMPOSE_ENV.items() if k != missing}
    proc = compose("config", env=env, files=(COMPOSE_FILE, MANY_MACHINES))
    assert proc.returncode != 0
    assert f"set {missing}" in proc.stderr  # the message names what to set
    # an empty value is as missing as an unset one
    proc = compose("config", env={**env, missing: ""}, files=(COMPOSE_FILE, MANY_MACHINES))
    assert proc.returncode != 0 and f"set {missing}" in proc.stderr


@needs_compose
def test_many_machines_opens_redis_and_the_store_with_the_real_secrets():
    proc = compose("config", files=(COMPOSE_FILE, MANY_MACHINES))
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)["services"]
    assert published(resolved["redis"]) == [("0.0.0.0", 6379)]
    assert sorted(published(resolved["minio"])) == [("0.0.0.0", 9000), ("127.0.0.1", 9001)]
    assert published(resolved["web"]) == [("127.0.0.1", 8000)]  # the gallery stays local
    for name in NOVA_SERVICES & set(resolved):  # the merged commands still parse
        check_cli(service_argv(resolved[name]))
    assert resolved["redis"]["command"][-1] == "test-redis-pw"
    assert resolved["redis"]["environment"]["REDISCLI_AUTH"] == "test-redis-pw"
    assert resolved["minio"]["environment"]["MINIO_ROOT_PASSWORD"] == "test-secret-123"
    for name in NOVA_SERVICES & set(resolved):
        env = resolved[name]["environment"]
        assert env["NOVA_REDIS_URL"] == "redis://:test-redis-pw@redis:6379/0"
        assert env["AWS_SECRET_ACCESS_KEY"] == "test-secret-123"
    # a VPN address instead of every interface
    vpn = compose("config", env={**COMPOSE_ENV, "NOVA_REDIS_BIND": "100.64.0.1",
                                 "NOVA_MINIO_BIND": "100.64.0.1"},
                  files=(COMPOSE_FILE, MANY_MACHINES))
    assert vpn.returncode == 0, vpn.stderr
    vpn_services = yaml.safe_load(vpn.stdout)["services"]
    assert published(vpn_services["redis"]) == [("100.64.0.1", 6379)]
    assert ("100.64.0.1", 9000) in published(vpn_services["minio"])


@needs_compose
def test_many_machines_through_compose_file_in_dot_env(tmp_path):
    """The README's recipe: COMPOSE_FILE and the secrets in .env, then a plain
    ``docker compose`` in that folder opens Redis and the store; without the secrets
    it refuses."""
    for f in (COMPOSE_FILE, MANY_MACHINES):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "workers").mkdir()  # the build context the file names
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NOVA_", "AWS_", "COMPOSE_", "DOCKER_"))}
    line = f"COMPOSE_FILE={COMPOSE_FILE.name}:{MANY_MACHINES.name}\n"

    def config(dotenv: str) -> subprocess.CompletedProcess:
        (tmp_path / ".env").write_text(dotenv)
        return subprocess.run([find_compose(), "config"], env=base, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=False)

    refused = config(line)
    assert refused.returncode != 0 and "set NOVA_REDIS_PASSWORD" in refused.stderr
    opened = config(line + "".join(f"{k}={v}\n" for k, v in COMPOSE_ENV.items()))
    assert opened.returncode == 0, opened.stderr
    resolved = yaml.safe_load(opened.stdout)["services"]
    assert published(resolved["redis"]) == [("0.0.0.0", 6379)]
    assert resolved["redis"]["command"][-1] == "test-redis-pw"
