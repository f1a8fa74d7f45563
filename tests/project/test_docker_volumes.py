"""A fresh named volume is writable by the worker: docker fills a new named volume with what
the image holds at its mount path, owner included, and makes a path the image lacks as
root. So every folder a compose service mounts a named volume on must exist in its image,
owned by the user the image runs as (checked statically: there is no Docker engine here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from novatests.docker import dockerfile as dockerfile_steps
from novatests.docker import final_user, owned_folders

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def built_mounts() -> list[tuple[str, Path, str, str]]:
    """(service, its Dockerfile, mount path, volume) of every named volume mounted in a
    service whose image this repository builds."""
    out = []
    named = set(COMPOSE.get("volumes") or {})
    for name, service in COMPOSE["services"].items():
        build = service.get("build")
        if not isinstance(build, dict):
            continue  # a third-party image (redis, minio)
        for volume in service.get("volumes") or []:
            source, _, target = str(volume).partition(":")
            if source in named:
                out.append((name, ROOT / build["dockerfile"], target.split(":")[0], source))
    return out


MOUNTS = built_mounts()


def test_the_gpu_workers_keep_their_model_cache_on_a_volume():
    mounted = {(service, target) for service, _, target, _ in MOUNTS}
    assert {("worker-cuda", "/data/hf"), ("worker-rocm", "/data/hf")} <= mounted
    for service, dockerfile, _, _ in MOUNTS:
        if service in ("worker-cuda", "worker-rocm"):
            env = [w for word, rest in dockerfile_steps(dockerfile) if word == "ENV"
                   for w in rest.split()]
            assert "HF_HOME=/data/hf" in env, (service, env)  # the cache is on the volume


@pytest.mark.parametrize("service, dockerfile, target, volume",
                         [pytest.param(*m, id=f"{m[0]}:{m[2]}") for m in MOUNTS])
def test_a_named_volume_mounts_on_a_folder_the_worker_owns(service, dockerfile, target,
                                                           volume):
    user = final_user(dockerfile)
    owners = owned_folders(dockerfile)
    assert owners.get(target) == user, (
        f"{service} mounts the volume {volume} on {target}, which {dockerfile.name} does not "
        f"create owned by {user} (folders it gives an owner: {owners}): a fresh volume would "
        "be root's and the worker could not write its model cache")


def test_the_parser_reads_the_forms_used():
    """owned_folders understands install -d and chown, and a plain mkdir is root's."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Dockerfile"
        path.write_text("FROM x\nRUN mkdir -p /a && install -d -o nova -g nova /b /c \\\n"
                        " && chown -R app:app /d\nUSER nova\n")
        assert owned_folders(path) == {"/b": "nova", "/c": "nova", "/d": "app"}
        assert final_user(path) == "nova"
