"""Card text in any script: the synthetic app draws a prompt with an installed font that
has its glyphs (Noto Sans CJK for Japanese, DejaVu for the rest) and falls back to
Pillow's default font when none is installed."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageDraw, ImageFont

from nova_queue.workers.apps import card as cards

JAPANESE = "富士山と桜、浮世絵風"  # from the bundled demo prompts
META = {"backend": "cpu", "worker": "w", "job": "j", "index": "0", "attempt": "1"}
SIZE = 256
NOTO_CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

needs_cjk = pytest.mark.skipif(not Path(NOTO_CJK).exists(),
                               reason="needs fonts-noto-cjk (apt-get install fonts-noto-cjk)")


def card(prompt: str) -> Image.Image:
    return Image.open(io.BytesIO(cards.render_card(prompt, META, SIZE))).convert("RGB")


def prompt_area(img: Image.Image) -> Image.Image:
    """The band under the accent bar where the first line of the prompt is drawn."""
    return img.crop((0, SIZE // 40 + 2, SIZE, SIZE // 40 + SIZE // 24 + SIZE // 20 + 8))


def ink(img: Image.Image) -> int:
    """Pixels darker than the card's light background (drawn text)."""
    return sum(img.convert("L").histogram()[:128])


def glyph(font, ch: str) -> bytes:
    im = Image.new("L", (48, 48))
    ImageDraw.Draw(im).text((4, 4), ch, font=font, fill=255)
    return im.tobytes()


@needs_cjk
def test_japanese_prompt_is_drawn_with_real_glyphs():
    assert cards.font_file_for(JAPANESE) == NOTO_CJK
    assert all(cards.has_glyph(NOTO_CJK, c) for c in JAPANESE)
    font = ImageFont.truetype(NOTO_CJK, 24)
    box = glyph(font, "\uffff")  # what a missing glyph looks like in this font
    assert all(glyph(font, c) != box for c in JAPANESE)
    # Pillow's default font has none of these: each one is the same "missing glyph" box,
    # which is what the cards showed before
    default = ImageFont.load_default(size=24)
    assert len({glyph(default, c) for c in JAPANESE} | {glyph(default, "\uffff")}) == 1
    # on the card: the prompt row differs from the same row drawn with missing glyphs
    drawn = prompt_area(card(JAPANESE))
    boxes = prompt_area(card("\uffff" * len(JAPANESE)))
    assert ink(drawn) > 50
    assert ImageChops.difference(drawn, boxes).getbbox() is not None


@pytest.mark.skipif(not Path(DEJAVU).exists(), reason="needs fonts-dejavu-core")
def test_latin_cyrillic_and_arabic_use_dejavu():
    for text in ("un café parisien", "Москва зимой", "مرحبا"):
        assert cards.font_file_for(text) == DEJAVU, text


def test_without_system_fonts_cards_use_pillows_default(monkeypatch, tmp_path):
    not_a_font = tmp_path / "broken.ttf"
    not_a_font.write_bytes(b"not a font")
    monkeypatch.setattr(cards, "FONT_FILES", (str(tmp_path / "missing.ttf"),
                                              str(not_a_font)))
    assert cards.installed_fonts() == ()
    assert cards.font_file_for(JAPANESE) is None
    font = cards._font(12, "a lighthouse at dusk")
    assert font is cards._default_font(12)
    img = card("a lighthouse at dusk")
    assert img.size == (SIZE, SIZE) and ink(prompt_area(img)) > 50
    assert card(JAPANESE).size == (SIZE, SIZE)  # drawn as boxes, but drawn


def test_prefers_the_font_missing_fewest_glyphs(tmp_path):
    if not (Path(DEJAVU).exists() and Path(NOTO_CJK).exists()):
        pytest.skip("needs both DejaVu and Noto Sans CJK")
    mixed = "Москва 東京 Москва"  # DejaVu lacks 2 characters, Noto CJK has them all
    assert cards.font_file_for(mixed, [DEJAVU, NOTO_CJK]) == NOTO_CJK
    arabic_and_kanji = "مرحبا مرحبا 東"  # neither has everything; DejaVu misses fewer
    assert cards.font_file_for(arabic_and_kanji, [NOTO_CJK, DEJAVU]) == DEJAVU
