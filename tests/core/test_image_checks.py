"""Result checks (issue 31): what an image result must be (``image_problem``, used by the
runners' ``validate``), when two results of one task agree (``AppSpec.same_result``: bytes
by default, perceptually for txt2img, by answer for synthetic cards)."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image

from nova_queue.apps.base import AppSpec
from nova_queue.apps.image_checks import MAX_PHASH_DISTANCE, image_problem, phash_distance
from nova_queue.apps.synthetic import SyntheticSpec, task_answer
from nova_queue.apps.txt2img import Txt2ImgSpec
from nova_queue.errors import InvalidOutput


def png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def noise(seed: int, size: int = 64) -> Image.Image:
    rng = random.Random(seed)
    return Image.frombytes("RGB", (size, size), bytes(rng.randrange(256)
                                                      for _ in range(size * size * 3)))


def test_default_comparison_is_identical_bytes_and_apps_are_comparable():
    spec = AppSpec()
    assert spec.comparable
    assert spec.same_result(b"abc", b"abc") and not spec.same_result(b"abc", b"abd")


def test_black_constant_and_undecodable_images_are_rejected():
    assert image_problem(png(Image.new("RGB", (64, 64)))) == "all-black image"
    assert image_problem(png(Image.new("RGB", (64, 64), (3, 4, 2)))) == "all-black image"
    assert image_problem(png(Image.new("RGB", (64, 64), (128, 40, 7)))) == \
        "constant image (every pixel #802807)"
    assert image_problem(b"\x89PNG not really").startswith("not a decodable image")
    assert image_problem(png(noise(1)), 64, 96) == "image is 64x64, the task asked for 64x96"


def test_a_noisy_or_dark_but_varied_image_passes():
    assert image_problem(png(noise(1)), 64, 64) is None
    dark = Image.new("RGB", (64, 64), (2, 2, 2))
    dark.putpixel((5, 5), (40, 30, 20))  # one lit pixel: a night sky, not a failure
    assert image_problem(png(dark)) is None


def test_txt2img_compares_perceptually():
    pytest.importorskip("imagehash")
    spec = Txt2ImgSpec()
    a = noise(7)
    nudged = Image.eval(a, lambda v: min(255, v + 1))  # every pixel one level brighter
    assert spec.same_result(png(a), png(a)) and spec.same_result(png(a), png(nudged))
    assert phash_distance(png(a), png(nudged)) <= MAX_PHASH_DISTANCE
    assert not spec.same_result(png(a), png(noise(8)))  # another image
    assert not spec.same_result(png(a), png(a.convert("L").convert("RGB").convert("RGBA")))
    assert not spec.same_result(png(a), png(a.resize((32, 32))))  # size must match
    assert not spec.same_result(png(a), b"not an image")


def test_synthetic_cards_agree_by_answer_and_size():
    spec = SyntheticSpec()

    def card(prompt: str, colour: tuple[int, int, int], size: int = 64) -> bytes:
        from PIL.PngImagePlugin import PngInfo

        info = PngInfo()
        info.add_text("answer", task_answer(prompt))
        buf = io.BytesIO()
        Image.new("RGB", (size, size), colour).save(buf, format="PNG", pnginfo=info)
        return buf.getvalue()

    assert spec.same_result(card("a", (1, 2, 3)), card("a", (200, 2, 3)))  # other worker
    assert not spec.same_result(card("a", (1, 2, 3)), card("b", (1, 2, 3)))
    assert not spec.same_result(card("a", (1, 2, 3)), card("a", (1, 2, 3), 96))
    assert not spec.same_result(b"x", b"y")


def test_invalid_output_names_its_reason():
    err = InvalidOutput("all-black image")
    assert str(err) == "invalid output: all-black image" and err.reason == "all-black image"
