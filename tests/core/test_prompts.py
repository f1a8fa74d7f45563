"""Prompt files: every parsing rule, every rejection (with its line), and a property test."""

from __future__ import annotations

import io
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nova_queue.errors import InputError
from nova_queue.prompts import parse_prompts, read_prompts


def parse(data: bytes, **kw) -> list[str]:
    return parse_prompts(data, "p.txt", **kw)


def rejected(data: bytes, **kw) -> InputError:
    with pytest.raises(InputError) as info:
        parse(data, **kw)
    assert info.value.source == "p.txt"
    return info.value


def test_one_prompt_per_line_trimmed():
    assert parse(b"  a cat  \n\tdog\t\nbird") == ["a cat", "dog", "bird"]


def test_bom_is_ignored():
    assert parse("\ufeffcafé\nzwei".encode()) == ["café", "zwei"]


def test_crlf_line_ends():
    assert parse(b"one\r\ntwo\r\n\r\nthree\r\n") == ["one", "two", "three"]


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\r", "\x1e"])
def test_other_line_separators_stay_inside_the_prompt(sep):
    assert parse(f"left{sep}right\nnext".encode()) == [f"left{sep}right", "next"]


def test_blank_lines_and_comments_skipped():
    data = b"# header\n\n   \n  # indented comment\nkeep # not a comment\n#\n\t\nlast\n"
    assert parse(data) == ["keep # not a comment", "last"]


def test_nul_byte_names_its_line():
    err = rejected(b"ok\nfine\nbad\x00line\n")
    assert err.line == 3 and "NUL" in str(err) and "p.txt:3" in str(err)


def test_invalid_utf8_names_the_line_of_the_first_bad_byte():
    err = rejected(b"ok\n\xc3\xa9 fine\nstill ok\nbroken \xff here\nalso \xfe\n")
    assert err.line == 4 and "UTF-8" in str(err) and "0xff" in str(err)


def test_truncated_multibyte_sequence_at_end():
    err = rejected(b"a\nb\n\xe6\x97")
    assert err.line == 3


def test_encoded_surrogate_is_invalid_utf8():
    err = rejected(b"a\n\xed\xa0\x80\n")
    assert err.line == 2


def test_first_problem_wins_between_nul_and_bad_utf8():
    assert rejected(b"a\n\xff\nb\x00\n").line == 2
    assert rejected(b"a\x00\n\xff\n").line == 1


def test_utf16_file_gets_a_hint():
    err = rejected("hello\nworld\n".encode("utf-16"))
    assert "UTF-16" in str(err) and err.line == 1


def test_too_long_line_names_the_limit():
    err = rejected(b"short\n" + b"x" * 11 + b"\n", max_line_chars=10)
    assert err.line == 2 and "10" in str(err)
    assert parse(b"x" * 10, max_line_chars=10) == ["x" * 10]


def test_limit_counts_characters_not_bytes():
    assert parse(("é" * 10).encode(), max_line_chars=10) == ["é" * 10]  # 20 bytes


def test_default_limit_is_4000():
    assert parse(b"y" * 4000) == ["y" * 4000]
    assert rejected(b"y" * 4001).line == 1


def test_too_many_prompts():
    err = rejected(b"a\nb\nc\n", max_prompts=2)
    assert err.line == 3 and "2" in str(err)


@pytest.mark.parametrize(
    "data", [b"", b"\n\n", b"# only\n  # comments\n\n", b"\xef\xbb\xbf", b" \t\r\n"]
)
def test_no_prompts_is_rejected(data):
    err = rejected(data)
    assert err.line is None and "no prompts" in str(err)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.txt"
    with pytest.raises(InputError) as info:
        read_prompts(str(path))
    assert info.value.source == str(path) and "no such file" in str(info.value)


def test_directory(tmp_path):
    with pytest.raises(InputError, match="directory"):
        read_prompts(str(tmp_path))


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("a\n")
    path.chmod(0)
    with pytest.raises(InputError, match="permission denied"):
        read_prompts(str(path))


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc")
def test_read_error_is_an_input_error():
    with pytest.raises(InputError, match="cannot read"):
        read_prompts("/proc/self/mem")  # exists, is a file, but reading offset 0 fails (EIO)


def test_read_file_and_errors_name_the_path(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_bytes(b"a cat\r\n# c\nbad \xff\n")
    with pytest.raises(InputError) as info:
        read_prompts(str(path))
    assert str(info.value).startswith(f"{path}:3: ")
    path.write_bytes(b"a cat\r\n# c\ndog\n")
    assert read_prompts(str(path)) == ["a cat", "dog"]


def test_stdin_dash_reads_bytes():
    assert read_prompts("-", io.BytesIO(b"\xef\xbb\xbfone\r\ntwo\n")) == ["one", "two"]
    with pytest.raises(InputError) as info:
        read_prompts("-", io.BytesIO(b"x\x00"))
    assert info.value.source == "<stdin>" and info.value.line == 1


def test_stdin_text_stream_is_accepted():
    text_stream = io.StringIO("één\ntwee\n")
    assert read_prompts("-", text_stream) == ["één", "twee"]  # type: ignore[arg-type]


def test_stdin_default_is_sys_stdin(monkeypatch):
    fake = io.TextIOWrapper(io.BytesIO(b"from stdin\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake)
    assert read_prompts("-") == ["from stdin"]


# Prompts that survive the format: no line feed / NUL, not starting with '#', and without
# surrounding whitespace (which the format trims by design).
_safe_chars = st.characters(blacklist_characters="\n\x00", blacklist_categories=("Cs",))
safe_prompts = st.text(_safe_chars, min_size=1, max_size=40).map(str.strip).filter(
    lambda s: s != "" and not s.startswith("#")
)
filler = st.sampled_from(["", "   ", "\t", "# a comment", "  #indented", "#"])


@settings(max_examples=300, deadline=None)
@given(
    prompts=st.lists(safe_prompts, min_size=1, max_size=30),
    data=st.data(),
    bom=st.booleans(),
    final_newline=st.booleans(),
)
def test_property_parse_returns_exactly_the_prompts(prompts, data, bom, final_newline):
    lines: list[str] = []
    for p in prompts:
        lines.extend(data.draw(st.lists(filler, max_size=2)))
        pad = data.draw(st.sampled_from(["", " ", "\t", "  "]))
        lines.append(pad + p + data.draw(st.sampled_from(["", " ", "\t"])))
    lines.extend(data.draw(st.lists(filler, max_size=2)))
    ends = data.draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=len(lines),
                              max_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, ends))
    if not final_newline:
        text = text.rstrip("\r\n")
    blob = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    assert parse_prompts(blob, "gen.txt") == prompts


# ---- bounded input: size limit, regular files only -------------------------------------------

class Endless(io.RawIOBase):
    """A stream that never ends (like /dev/zero or `yes`), counting the bytes handed out."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        buf[:] = b"y\n" * (len(buf) // 2) + b"y" * (len(buf) % 2)
        self.given += len(buf)
        return len(buf)


def test_default_limit_is_the_settings_default():
    from nova_queue.prompts import MAX_BYTES
    from nova_queue.settings import Settings

    assert MAX_BYTES == Settings().max_prompt_bytes == 64 * 1024 * 1024


def test_stdin_at_the_limit_is_read_one_byte_more_is_refused():
    assert read_prompts("-", io.BytesIO(b"ab\ncd\n"), max_bytes=6) == ["ab", "cd"]
    with pytest.raises(InputError) as info:
        read_prompts("-", io.BytesIO(b"ab\ncd\ne"), max_bytes=6)
    assert str(info.value) == ("<stdin>: has more than 6 bytes; the limit is 6 bytes (raise it "
                               "with --max-bytes or NOVA_MAX_PROMPT_BYTES, or split the prompts)")


def test_endless_stdin_stops_at_the_limit():
    stream = Endless()
    with pytest.raises(InputError, match="more than 1000000 bytes"):
        read_prompts("-", io.BufferedReader(stream), max_bytes=1_000_000)
    assert stream.given <= 1_000_000 + 2 * io.DEFAULT_BUFFER_SIZE + 1024 * 1024


def test_file_over_the_limit_is_refused_by_its_size(tmp_path):
    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        f.truncate(3 * 1024 * 1024 * 1024)  # sparse: 3 GiB that take no disk and are never read
    with pytest.raises(InputError) as info:
        read_prompts(str(path))
    assert str(info.value).startswith(f"{path}: is {3 * 1024 ** 3} bytes; the limit is "
                                      f"{64 * 1024 * 1024} bytes")
    path.write_bytes(b"a\nb\n")
    assert read_prompts(str(path), max_bytes=4) == ["a", "b"]
    with pytest.raises(InputError, match="is 4 bytes; the limit is 3 bytes"):
        read_prompts(str(path), max_bytes=3)


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_without_a_writer_is_refused_not_waited_for(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    with pytest.raises(InputError) as info:
        read_prompts(str(path))
    assert str(info.value) == (f"{path}: is a FIFO (named pipe), not a regular file; pipe it "
                               "in with 'enqueue -' to read standard input")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_device_is_refused():
    with pytest.raises(InputError, match="^/dev/zero: is a device, not a regular file"):
        read_prompts("/dev/zero")


def test_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(InputError, match="is a socket, not a regular file"):
            read_prompts(str(path))


def test_symlink_to_a_regular_file_is_fine(tmp_path):
    (tmp_path / "real.txt").write_bytes(b"cat\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    assert read_prompts(str(tmp_path / "link.txt")) == ["cat"]
