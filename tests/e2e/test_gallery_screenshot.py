"""``scripts/gallery_screenshot.py`` makes the README picture from a real demo run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gallery_screenshot.py"

pytestmark = [
    pytest.mark.slow, pytest.mark.browser,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(),
                       reason="needs Debian chromium at /usr/bin/chromium"),
]


def test_screenshot_of_a_demo_run_with_a_recovered_task(tmp_path):
    out = tmp_path / "gallery.png"
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--prompts", "16"],
                         check=False, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert re.search(r"task \d+ recovered after a worker was lost", run.stdout)
    with Image.open(out) as img:
        assert img.format == "PNG" and img.width == 1280 and img.height >= 900
        colours = img.convert("RGB").resize((64, 64)).getcolors(64 * 64)
        assert colours is not None and len(colours) > 20  # cards, not a blank page


def test_bad_arguments_are_one_clear_line(tmp_path):
    out = tmp_path / "gallery.png"
    run = subprocess.run([sys.executable, str(SCRIPT), "--chromium", str(tmp_path / "nope"),
                          "--out", str(out)],
                         check=False, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "no Chromium at" in run.stderr
    assert not out.exists()
