"""Strict form decoding: a form field that is not valid UTF-8 is refused, by name.

werkzeug decodes form fields leniently: invalid UTF-8 becomes U+FFFD in multipart forms
and stays literal ``%FF`` text in URL-encoded ones, so a bad byte would reach a job as
text nobody typed. Before a POST is handled, its body is read (within
``MAX_CONTENT_LENGTH``; werkzeug then parses the form from that cached copy) and each
text field decoded strictly: by werkzeug's own multipart decoder, or by the standard
library's query-string parser. File parts are left alone; the prompt-file parser names
the file and line of a bad byte itself.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

from flask import Flask, request
from werkzeug.formparser import MultiPartParser
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

from nova_queue.errors import InputError

#: How the submission form's fields are named in messages (as ``submit.py`` names them).
FIELD_LABELS = {"prompts": "prompts box", "params": "params"}


def _urlencoded_fields(body: bytes) -> Iterator[tuple[str, bytes]]:
    for name, value in urllib.parse.parse_qsl(body.decode("latin-1"), keep_blank_values=True,
                                              encoding="latin-1"):
        yield name, value.encode("latin-1")


def _multipart_fields(body: bytes, boundary: str) -> Iterator[tuple[str, bytes, str]]:
    decoder = MultipartDecoder(boundary.encode("ascii", "replace"))
    decoder.receive_data(body)
    decoder.receive_data(None)
    name: str | None = None
    charset, chunks = "utf-8", []
    while True:
        event = decoder.next_event()
        if isinstance(event, (Epilogue, NeedData)):
            return
        if isinstance(event, Field):
            name, chunks = event.name, []
            charset = MultiPartParser().get_part_charset(event.headers)
        elif isinstance(event, File):
            name = None
        elif isinstance(event, Data) and name is not None:
            chunks.append(event.data)
            if not event.more_data:
                yield name, b"".join(chunks), charset


def _raw_fields() -> Iterator[tuple[str, bytes, str]]:
    mimetype = request.mimetype
    if mimetype == "application/x-www-form-urlencoded":
        for name, value in _urlencoded_fields(request.get_data(cache=True)):
            yield name, value, "utf-8"
    elif mimetype == "multipart/form-data":
        boundary = request.mimetype_params.get("boundary", "")
        if boundary:
            yield from _multipart_fields(request.get_data(cache=True), boundary)


def check_utf8_form() -> None:
    """Raise InputError naming the first text field (and its line) that is not valid UTF-8."""
    try:
        fields = list(_raw_fields())
    except ValueError:  # a malformed body: werkzeug's parser refuses it in its own way
        return
    for name, raw, charset in fields:
        try:
            raw.decode(charset)
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            label = FIELD_LABELS.get(name) or f"form field {name!r}"
            raise InputError(f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                             f"{exc.start}); send the form as UTF-8 text",
                             source=label, line=line) from None


def init_app(app: Flask) -> None:
    """Check every form POST before its view runs."""

    @app.before_request
    def _strict_forms() -> None:
        if request.method in ("POST", "PUT", "PATCH"):
            check_utf8_form()
