"""Scenario 13: bad input fuzzing with Hypothesis. Prompt files, ``-p`` pairs and app params
may only ever fail with InputError (a clear message, nothing enqueued); the web submission
endpoint answers 303 (created) or a 4xx page, never a 500, and enqueues nothing when it
refuses."""

from __future__ import annotations

import io
import json
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from novatests.chaos.history import Verdict

from nova_queue.apps.registry import available_apps, load_app
from nova_queue.cli.options import parse_pairs
from nova_queue.errors import InputError
from nova_queue.prompts import parse_prompts, read_prompts

FUZZ = settings(max_examples=250, deadline=None, derandomize=True)

# text with the characters prompt parsing must get right: line ends and separators of every
# kind, BOMs, NUL, surrogates, '#', whitespace
TRICKY = st.sampled_from(["\n", "\r\n", "\r", "\u2028", "\u2029", "\u0085", "\v", "\f", "\x00",
                          "\ufeff", "#", " ", "\t", "\ud800", "é", "🙂", "<script>"])


def tricky_text(max_parts: int) -> st.SearchStrategy[str]:
    """Strings mixing random text with the tricky fragments."""
    return st.lists(st.one_of(st.text(max_size=8), TRICKY), max_size=max_parts).map("".join)


LINES = st.lists(tricky_text(8), max_size=12)


def _encode(lines: list[str], sep: str, codec: str) -> bytes:
    text = sep.join(lines)
    if codec == "latin-1":
        return text.encode(codec, "replace")
    return text.encode(codec, "surrogatepass")


PROMPT_BYTES = st.one_of(
    st.binary(max_size=600),
    st.builds(_encode, LINES, st.sampled_from(["\n", "\r\n", "\r"]),
              st.sampled_from(["utf-8", "utf-16", "utf-8-sig", "latin-1"])),
)


def _parse(data: bytes) -> list[str] | None:
    try:
        return parse_prompts(data, "fuzz.txt", max_line_chars=60, max_prompts=8)
    except InputError as exc:
        assert str(exc).startswith("fuzz.txt"), exc  # names the source
        return None


@pytest.fixture
def examples(chaos_report):
    """A list each example appends to; its length is recorded as runs of scenario 13."""
    seen: list = []
    started = time.monotonic()
    yield seen
    assert seen, "no example ran"
    chaos_report.add(13, Verdict(tasks=sum(1 for x in seen if x == "enqueued")),
                     time.monotonic() - started, runs=len(seen))


def test_prompt_files_parse_or_raise_input_error(examples):
    @FUZZ
    @given(PROMPT_BYTES)
    def prop(data):
        examples.append(data)
        prompts = _parse(data)
        if prompts is None:
            return
        assert 1 <= len(prompts) <= 8
        for p in prompts:
            assert p and p == p.strip() and not p.startswith("#") and len(p) <= 60
            assert "\n" not in p and "\x00" not in p
        assert read_prompts("-", stdin=io.BytesIO(data), max_line_chars=60,
                            max_prompts=8) == prompts

    prop()


KEYS = st.one_of(st.sampled_from(["seconds", "size", "crash_on", "oom_on", "model", "width",
                                  "height", "steps", "guidance", "seed", "batch", "compile",
                                  "attention_slicing"]), st.text(max_size=12))
VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                   st.text(max_size=20), st.sampled_from(["nan", "inf", "-1", "1e999", "0x10",
                                                          "512", "auto", " 8 ", "true"]),
                   st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                         st.integers(),
                                                                         max_size=2))


def test_app_params_parse_or_raise_input_error(examples):
    """Parsed params are JSON without NaN/inf, and parsing them again changes nothing (the
    worker re-parses the params it reads back from Redis)."""

    @FUZZ
    @given(app_name=st.sampled_from(available_apps()),
           raw=st.dictionaries(KEYS, VALUES, max_size=4))
    def prop(app_name, raw):
        examples.append(raw)
        app = load_app(app_name)
        try:
            params = app.parse_params(raw)
        except InputError as exc:
            assert str(exc)
            return
        text = json.dumps(params, allow_nan=False)
        assert app.parse_params(json.loads(text)) == params
        for value in params.values():
            assert not (isinstance(value, float) and not math.isfinite(value))

    prop()


def test_cli_pairs_parse_or_raise_input_error(examples):
    @FUZZ
    @given(st.lists(tricky_text(5), max_size=5))
    def prop(values):
        examples.append(values)
        try:
            pairs = parse_pairs(values, "-p")
        except InputError as exc:
            assert "-p" in str(exc)
            return
        assert len(pairs) == len(values) and all(k == k.strip() and k for k in pairs)

    prop()


# ---- the web API -----------------------------------------------------------------------------

WEB_TOKEN = "fuzz-web-token"


@pytest.fixture
def web_app(redis_url, namespace, tmp_path):
    """The gallery app with a write token (skips if nova_queue.web has no create_app)."""
    try:
        from nova_queue.web import create_app
    except ImportError as exc:  # the web app is written in parallel (nova_queue.web)
        pytest.skip(f"nova_queue.web.create_app is not importable: {exc}")
    from nova_queue import NovaClient, Settings

    s = Settings(redis_url=redis_url, namespace=namespace, web_token=WEB_TOKEN,
                 store_url=(tmp_path / "store").as_uri())
    app = create_app({"TESTING": True, "SECRET_KEY": "fuzz"}, settings=s)
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    yield app, nova
    app.extensions["nova"].close()
    nova.close()


def mostly(usual: st.SearchStrategy, other: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` three times in four, else ``other``: valid forms are common enough that the
    fuzz reaches enqueue, not only the refusals."""
    return st.integers(0, 3).flatmap(lambda i: other if i == 3 else usual)


FORM_TEXT = tricky_text(10).map(lambda t: t.encode("utf-8", "replace").decode("utf-8"))


def test_web_submission_never_500s_and_refusals_enqueue_nothing(web_app, examples):
    app, nova = web_app

    @settings(max_examples=80, deadline=None, derandomize=True)
    @given(form=st.fixed_dictionaries({
        "app": mostly(st.just("synthetic"), st.one_of(st.just("txt2img"), FORM_TEXT)),
        "prompts": mostly(st.lists(st.text(min_size=1, max_size=20), min_size=1,
                                   max_size=4).map("\n".join), FORM_TEXT),
        "params": mostly(st.sampled_from(["", "seconds=0", "seconds=0\nsize=64"]), FORM_TEXT),
        "token": mostly(st.just(WEB_TOKEN), FORM_TEXT)}, optional={
        "name": FORM_TEXT, "priority": st.one_of(st.integers(-5000, 5000).map(str), FORM_TEXT)}),
        upload=mostly(st.none(), PROMPT_BYTES), csrf_ok=mostly(st.just(True), st.just(False)))
    def prop(form, upload, csrf_ok):
        with app.test_client() as client:
            with client.session_transaction() as sess:
                sess["csrf"] = "fuzz-csrf"
            data = {**form, "csrf_token": "fuzz-csrf" if csrf_ok else "wrong"}
            if upload is not None:
                data["prompts_file"] = (io.BytesIO(upload), "fuzz.txt")
            before = nova.redis.zcard(nova.keys.jobs())
            resp = client.post("/", data=data, content_type="multipart/form-data")
            after = nova.redis.zcard(nova.keys.jobs())
        assert resp.status_code in (303, 400, 403), resp.status_code
        assert after - before == (1 if resp.status_code == 303 else 0)
        examples.append("enqueued" if resp.status_code == 303 else resp.status_code)

    prop()


def test_web_api_lookups_never_500(web_app, examples):
    app, _ = web_app

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(path=st.one_of(st.text(max_size=30), st.sampled_from(
        ["../../etc/passwd", "%2e%2e%2f", "x:0", "nova:{x}:job", "\x00", "a" * 300])))
    def prop(path):
        examples.append(path)
        with app.test_client() as client:
            for url in (f"/api/jobs/{path}", f"/jobs/{path}"):
                try:
                    status = client.get(url).status_code
                except UnicodeError:  # werkzeug refuses to build such a URL: nothing sent
                    continue
                assert status < 500, (url, status)

    prop()


def test_web_fuzz_setup_can_submit(web_app):
    """The fuzzed form reaches enqueue when it is valid (so the fuzz covers both paths)."""
    app, nova = web_app
    with app.test_client() as client:
        with client.session_transaction() as sess:
            sess["csrf"] = "fuzz-csrf"
        resp = client.post("/", data={"app": "synthetic", "prompts": "one\ntwo",
                                      "params": "seconds=0", "token": WEB_TOKEN,
                                      "csrf_token": "fuzz-csrf"})
    assert resp.status_code == 303
    assert nova.redis.zcard(nova.keys.jobs()) == 1
