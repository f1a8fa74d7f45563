"""docker-compose.yml and the Dockerfiles under workers/, validated statically (no Docker
engine here): ``docker-compose config`` accepts the file, every ``nova-queue`` command they run
parses with the real CLI, and the deployment settings the README promises are in place.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from cli_helpers import check_cli

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILES = {kind: ROOT / "workers" / f"Dockerfile.{kind}" for kind in ("cpu", "cuda", "rocm")}
NOVA_SERVICES = {"web", "worker-cpu", "post-worker", "worker-cuda", "worker-rocm"}
COMPOSE_ENV = {"NOVA_REDIS_PASSWORD": "test-redis-pw", "AWS_ACCESS_KEY_ID": "nova-test",
               "AWS_SECRET_ACCESS_KEY": "test-secret-123"}


def find_compose() -> str | None:
    return shutil.which("docker-compose") or (
        "/usr/bin/docker-compose" if os.path.exists("/usr/bin/docker-compose") else None)


needs_compose = pytest.mark.skipif(
    find_compose() is None,
    reason="docker-compose not installed (Debian package docker-compose; .ci/run installs it)")


def compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run docker-compose on the repo's file with a clean, test-controlled environment."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NOVA_", "AWS_", "COMPOSE_", "DOCKER_"))}
    return subprocess.run([find_compose(), "-f", str(COMPOSE_FILE), *args],
                          env={**base, **(env if env is not None else COMPOSE_ENV)},
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    """The compose file as written (variables unresolved, YAML anchors merged)."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return spec["services"]


# ---- Dockerfiles -----------------------------------------------------------------------

def dockerfile(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


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
    assert {".git", ".venv*"} <= ignored
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
    assert sub.info_name == {"web": "web", "post-worker": "post-worker"}.get(name, "worker")
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
    assert pairs["--requirepass"].startswith("${NOVA_REDIS_PASSWORD:?")
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


@needs_compose
def test_docker_compose_refuses_to_run_without_a_redis_password():
    env = {k: v for k, v in COMPOSE_ENV.items() if k != "NOVA_REDIS_PASSWORD"}
    proc = compose("config", env=env)
    assert proc.returncode != 0
    assert "NOVA_REDIS_PASSWORD" in proc.stderr
