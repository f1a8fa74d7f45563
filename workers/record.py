"""What a worker registers: its record (identity, device, capability, benchmarks) and its
labels, what job requirements (``nova_queue.placement``) are checked against.

Automatic: ``backend`` (cuda, rocm, mps, cpu), ``device`` (its name), ``memory_gb`` (device
memory, GiB, one decimal; host RAM for a CPU worker), ``host``, ``fp16`` (1 where the app
runs in half precision: CUDA and ROCm), ``nova`` (nova-queue's version) and ``app.<name>``
(each app it serves, with its version). Custom labels (``--label key=value``, env
``NOVA_LABELS``) are added beside them; they may not replace an automatic one (a CPU worker
saying ``backend=cuda`` would take CUDA-only jobs), and the two together stay within
``MAX_LABELS``: either mistake stops the worker with one line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
from collections.abc import Mapping
from typing import Any

from nova_queue import __version__
from nova_queue.errors import InputError
from nova_queue.placement import AUTOMATIC_LABELS, MAX_LABELS
from nova_queue.workers.backend import BackendInfo, capability
from nova_queue.workers.node import Node

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:+/@-]+")


#: The labels a worker sets itself (besides ``app.<name>``); custom labels may not use them.
AUTOMATIC = AUTOMATIC_LABELS


def label_value(text: object) -> str:
    """``text`` as a label value: spaces and other separators become ``-``, at most 64."""
    return _UNSAFE.sub("-", str(text)).strip("-")[:64] or "unknown"


def check_custom_labels(custom: Mapping[str, str], automatic: int) -> None:
    """Refuse custom labels that would replace an automatic one, or that with ``automatic``
    automatic labels exceed ``MAX_LABELS`` (InputError naming the first problem)."""
    taken = sorted(k for k in custom if k in AUTOMATIC or k.startswith("app."))
    if taken:
        raise InputError(f"--label {taken[0]}: an automatic label, which the worker sets itself "
                         f"(automatic: {', '.join(AUTOMATIC)}, app.<name>); use another key")
    if automatic + len(custom) > MAX_LABELS:
        raise InputError(f"--label: {len(custom)} custom labels beside {automatic} automatic "
                         f"ones; at most {MAX_LABELS} in all")


def worker_labels(info: BackendInfo, apps: Mapping[str, str],
                  custom: Mapping[str, str]) -> dict[str, str]:
    """Automatic labels for a worker on ``info`` serving ``apps`` ({name: version}), then
    ``custom``."""
    labels = {"backend": info.backend, "device": label_value(info.device_name),
              "host": label_value(socket.gethostname()),
              "fp16": "1" if info.backend in ("cuda", "rocm") else "0",
              "nova": label_value(__version__)}
    if info.memory_total:
        labels["memory_gb"] = f"{info.memory_total / 2**30:.1f}"
    for name, version in list(apps.items())[:16]:
        labels[f"app.{name}"] = label_value(version or __version__)
    check_custom_labels(custom, len(labels))
    return {**labels, **custom}


def registry_fields(info: BackendInfo, node: Node, name: str, apps: Mapping[str, Any],
                    benchmarks: Mapping[str, Any], *, slowdown: float, gflops: float | None,
                    labels: Mapping[str, str], price: float = 0.0) -> dict[str, Any]:
    """The worker's registry record (register-6's fields): identity, device, capability
    with the startup benchmarks, labels and price (dollars per hour)."""
    cap = capability(info, node, list(apps), gflops=gflops)
    cap.update(slowdown=slowdown, nova_queue=__version__,
               benchmarks={a: dataclasses.asdict(b) for a, b in benchmarks.items()})
    versions = {a: getattr(app.spec, "version", "") for a, app in apps.items()}
    return {
        "name": name, "host": socket.gethostname(), "host_id": node.host_id,
        "node_id": node.node_id, "pid": os.getpid(), "backend": info.backend,
        "device": info.device_name, "memory_total": info.memory_total,
        "memory_free": info.memory_free, "gflops": gflops, "slowdown": slowdown,
        "capability": _json(cap), "labels": _json(worker_labels(info, versions, labels)),
        "price": price,
    }


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)
