"""The gateway serves its own release to joining machines (``/v1/dist/``, no token): the
wheel of exactly its version, a PEP 503 index of it that pip installs from, and
``/v1/version``; a wheel installed from a gateway can serve the same wheel in turn."""

from __future__ import annotations

import hashlib
import io
import os
import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nova_queue import __version__, protocol
from nova_queue.dist import WheelCache, make_wheel, wheel_name


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory) -> Path:
    """A cache folder holding this checkout's wheel, made once for the module."""
    folder = tmp_path_factory.mktemp("dist")
    make_wheel(folder)
    return folder


@pytest.fixture
def dist_gw(gw_app, wheel_dir):
    """The gateway app's test client, its wheel made (from the module's cache)."""
    gw_app.extensions["nova_wheel"] = cache = WheelCache(wheel_dir)
    assert cache.wait(120) is not None, cache.error
    return gw_app.test_client()


def test_version_and_wheel_need_no_token(dist_gw):
    version = dist_gw.get("/v1/version").get_json()
    assert version == {"service": "nova-queue-gateway", "nova": __version__, "protocol": protocol.PROTOCOL,
                       "wheel": wheel_name(__version__)}
    resp = dist_gw.get(f"/v1/dist/{wheel_name(__version__)}")  # no Authorization header
    assert resp.status_code == 200
    wheel = zipfile.ZipFile(io.BytesIO(resp.data))
    names = wheel.namelist()
    assert "nova_queue/lua/claim-12.lua" in names and "nova_queue/workers/runtime.py" in names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert f"Version: {__version__}" in wheel.read(meta).decode()
    page = dist_gw.get("/v1/dist/").get_data(as_text=True)
    assert f'href="{wheel_name(__version__)}"' in page and 'href="simple/"' in page


def test_the_simple_index_names_the_wheel_with_its_hash(dist_gw):
    root = dist_gw.get("/v1/dist/simple/").get_data(as_text=True)
    assert '<a href="nova-queue/">nova-queue</a>' in root
    for name in ("nova-queue", "nova_queue", "Nova.Queue"):  # PEP 503 normalises names
        assert dist_gw.get(f"/v1/dist/simple/{name}/").status_code == 200
    page = dist_gw.get("/v1/dist/simple/nova-queue/").get_data(as_text=True)
    m = re.search(r'href="\.\./\.\./([^"#]+)#sha256=([0-9a-f]{64})" '
                  r'data-requires-python="&gt;=3.10"', page)
    assert m and m.group(1) == wheel_name(__version__), page
    data = dist_gw.get(f"/v1/dist/{m.group(1)}").data
    assert hashlib.sha256(data).hexdigest() == m.group(2)
    assert dist_gw.get("/v1/dist/simple/requests/").status_code == 404


def test_another_release_is_not_served_and_the_answer_names_this_one(dist_gw):
    resp = dist_gw.get("/v1/dist/nova_queue-0.0.1-py3-none-any.whl")
    assert resp.status_code == 404
    assert wheel_name(__version__) in resp.get_json()["error"]


def test_while_the_wheel_is_made_the_answer_is_503_with_retry_after(gw_app, tmp_path):
    gw_app.extensions["nova_wheel"] = cache = WheelCache(tmp_path / "empty-cache")
    client = gw_app.test_client()
    resp = client.get(f"/v1/dist/{wheel_name(__version__)}")  # starts making it
    if resp.status_code == 503:  # (a fast machine may have it made already)
        assert resp.headers["Retry-After"] == "5" and "making its wheel" in resp.get_json()["error"]
    assert cache.wait(300) is not None, cache.error
    assert client.get(f"/v1/dist/{wheel_name(__version__)}").status_code == 200
    assert list((tmp_path / "empty-cache").iterdir())  # built into the cache folder


def test_a_wheel_that_cannot_be_made_says_why(gw_app, tmp_path):
    cache = WheelCache(tmp_path / "c")
    cache.error = "could not build the wheel of the checkout /x: no setuptools"
    gw_app.extensions["nova_wheel"] = cache
    resp = gw_app.test_client().get("/v1/dist/simple/nova-queue/")
    assert resp.status_code == 503 and "no setuptools" in resp.get_json()["error"]


@pytest.mark.slow
def test_pip_installs_from_the_gateways_index(live_dist_gateway, tmp_path):
    url, _ = live_dist_gateway
    target = tmp_path / "target"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--target",
         str(target), "--index-url", f"{url}/v1/dist/simple", f"nova-queue=={__version__}"],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": "",
             "PIP_CONFIG_FILE": os.devnull})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / "nova_queue" / "lua" / "claim-12.lua").is_file()
    assert (target / f"nova_queue-{__version__}.dist-info").is_dir()


@pytest.fixture
def live_dist_gateway(live_gateway, gw_app, wheel_dir):
    """The live gateway, its wheel made; (URL, wheel path)."""
    gw_app.extensions["nova_wheel"] = cache = WheelCache(wheel_dir)
    assert cache.wait(120) is not None, cache.error
    return live_gateway, cache.path


@pytest.mark.slow
def test_an_install_from_the_gateway_serves_the_same_wheel(wheel_dir, tmp_path):
    """Installed from the wheel (not a checkout), nova-queue repacks its installed files:
    the same files, byte for byte; a file changed after the install is refused."""
    original = next(wheel_dir.glob("*/*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(original)],
                   check=True, timeout=300, capture_output=True)
    # its dependencies from this environment, after its own site-packages
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    own = Path(subprocess.run([str(py), "-c", purelib], capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip())
    (own / "zz_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    code = ("import sys; from pathlib import Path; from nova_queue.dist import find_source, "
            "make_wheel; s = find_source(); print(s.kind); print(make_wheel(Path(sys.argv[1])))")
    res = subprocess.run([str(py), "-c", code, str(tmp_path / "again")], capture_output=True,
                         text=True, timeout=120, check=False, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    kind, path = res.stdout.split()
    assert kind == "installed"
    a, b = zipfile.ZipFile(original), zipfile.ZipFile(path)
    assert sorted(a.namelist()) == sorted(b.namelist())
    assert all(a.read(n) == b.read(n) for n in a.namelist() if not n.endswith("/RECORD"))
    # a changed file: refused, not served
    with open(own / "nova_queue" / "data" / "prompts.txt", "a", encoding="utf-8") as f:
        f.write("a prompt added after the install\n")
    res = subprocess.run([str(py), "-c", code, str(tmp_path / "changed")],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert res.returncode != 0 and "nova_queue/data/prompts.txt differs from what was " \
        "installed" in res.stderr


@pytest.mark.slow
def test_gateways_sharing_a_cache_make_the_wheel_once(tmp_path):
    """Three processes at once (gateways starting together, sharing NOVA_HOME): one wheel in
    one folder, the same for all, and no staging folder left, a killed maker's included."""
    cache = tmp_path / "cache"
    (cache / ".building-killed").mkdir(parents=True)  # left by a process killed mid-build
    code = "import sys; from nova_queue.dist import make_wheel; print(make_wheel(sys.argv[1]))"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(cache)], stdout=subprocess.PIPE,
                              text=True, cwd=tmp_path) for _ in range(3)]
    paths = {p.communicate(timeout=600)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1 and Path(paths.pop()).is_file()
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".lock")) == [
        next(p.name for p in cache.iterdir() if p.is_dir())]  # one folder, nothing else
