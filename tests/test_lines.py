"""The line reader: complete lines only, split on \\n alone, bounded memory, truncation."""

import os

from hypothesis import given, strategies as st

from tailer import lines
from tailer.lines import LineReader


def read_all(reader):
    return [(line.number, line.data) for line in reader.read()]


def test_only_complete_lines_and_a_half_written_line_later(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}\n{"c":')
    reader = LineReader(path)
    assert read_all(reader) == [(1, b'{"a":1}'), (2, b'{"b":2}')]
    assert reader.offset == 16
    assert read_all(reader) == []
    with open(path, "ab") as handle:
        handle.write(b'3}\n')
    assert read_all(reader) == [(3, b'{"c":3}')]
    assert reader.offset == path.stat().st_size


def test_splits_on_newline_only(tmp_path):
    path = tmp_path / "events.jsonl"
    text = '{"t":"a\u2028b\u2029c\rd\x0be\x1cf\x85g"}\n'.encode()
    path.write_bytes(text)
    assert read_all(LineReader(path)) == [(1, text[:-1])]


def test_positions_resume_exactly(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    first = LineReader(path)
    consumed = next(first.read())
    resumed = LineReader(path, consumed.end_offset, consumed.number)
    assert read_all(resumed) == [(2, b"two"), (3, b"three")]


def test_truncated_file_is_read_again_from_the_start(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\n")
    reader = LineReader(path)
    read_all(reader)
    path.write_bytes(b"new\n")
    assert read_all(reader) == [(1, b"new")]


def test_replaced_file_is_read_from_the_start(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\n")
    reader = LineReader(path)
    read_all(reader)
    replacement = tmp_path / "other"
    replacement.write_bytes(b"uno\ndos\ntres\n")
    keep_inode_busy = open(path, "rb")  # so the new file cannot reuse the old inode
    try:
        os.replace(replacement, path)
        assert read_all(reader) == [(1, b"uno"), (2, b"dos"), (3, b"tres")]
    finally:
        keep_inode_busy.close()


def test_oversized_line_keeps_its_head_and_the_next_line(tmp_path, monkeypatch):
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(lines, "HEAD_BYTES", 100)
    monkeypatch.setattr(lines, "CHUNK_BYTES", 64)
    path = tmp_path / "events.jsonl"
    big = b'{"type":"tool.execution_complete","data":"' + b"x" * 5000 + b'"}'
    path.write_bytes(b"first\n" + big + b"\nlast\n")
    result = list(LineReader(path).read())
    assert [(line.number, line.oversized) for line in result] == [
        (1, False), (2, True), (3, False)]
    assert result[1].data == big[:lines.HEAD_BYTES]
    assert result[2].data == b"last"
    assert result[2].end_offset == path.stat().st_size


def test_oversized_line_does_not_hold_the_whole_line(tmp_path, monkeypatch):
    """Memory stays bounded: the reader never keeps more than the limit of one line."""
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 4096)
    monkeypatch.setattr(lines, "HEAD_BYTES", 100)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"y" * 3_000_000 + b"\nok\n")
    seen = [(line.data, line.oversized) for line in LineReader(path).read()]
    assert seen == [(b"y" * 100, True), (b"ok", False)]


def test_skip_to_end_counts_lines_and_leaves_a_partial_line(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\nthr")
    reader = LineReader(path)
    reader.skip_to_end()
    assert (reader.offset, reader.line_number) == (8, 2)
    with open(path, "ab") as handle:
        handle.write(b"ee\n")
    assert read_all(reader) == [(3, b"three")]


@given(
    st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    st.binary(max_size=50).map(lambda b: b.replace(b"\n", b"")),
    st.lists(st.integers(min_value=1, max_value=400), max_size=8),
    st.sampled_from([7, 64, 4096]),
    st.sampled_from([(), (b"ab",), (b"a", b"\x00")]),
)
def test_any_appends_yield_exactly_the_complete_lines(
    tmp_path_factory, body, tail, cuts, chunk, markers
):
    """However the file grows and however it is chunked, each line comes out once, whole,
    and with markers exactly the lines holding one, with their true line numbers."""
    lines.CHUNK_BYTES, saved = chunk, lines.CHUNK_BYTES
    try:
        content = b"".join(line + b"\n" for line in body) + tail
        path = tmp_path_factory.mktemp("fuzz") / "events.jsonl"
        path.write_bytes(b"")
        reader = LineReader(path, markers=markers)
        got = []
        written = 0
        for cut in sorted(cuts) + [len(content)]:
            cut = min(cut, len(content))
            with open(path, "ab") as handle:
                handle.write(content[written:cut])
            written = max(written, cut)
            got += [(line.number, line.data) for line in reader.read()]
        wanted = [(number, line) for number, line in enumerate(body, 1)
                  if not markers or any(marker in line for marker in markers)]
        assert got == wanted
        assert reader.offset == len(content) - len(tail)
        assert reader.line_number == len(body)
    finally:
        lines.CHUNK_BYTES = saved


def test_markers_pick_lines_and_keep_numbers(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"a\nx.fusion_1\nb\nc\nsession.shutdown\nd\npartial.fusion_")
    reader = LineReader(path, markers=(b".fusion_", b"shutdown"))
    assert read_all(reader) == [(2, b"x.fusion_1"), (5, b"session.shutdown")]
    assert (reader.line_number, reader.offset) == (6, 36)


def test_oversized_line_without_marker_in_its_head_is_passed_over(tmp_path, monkeypatch):
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(lines, "CHUNK_BYTES", 256)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"x" * 5000 + b".fusion_\n" + b'{".fusion_"}' + b"y" * 5000 + b"\nok.fusion_\n")
    reader = LineReader(path, markers=(b".fusion_",))
    result = [(line.number, line.oversized, line.data[:12]) for line in reader.read()]
    assert result == [(2, True, b'{".fusion_"}'), (3, False, b"ok.fusion_")]
    assert reader.line_number == 3
