"""The line reader: complete lines only, split on \\n alone, bounded memory, truncation."""

import os
import tracemalloc

from hypothesis import given, strategies as st

from tailer.copilot import lines
from tailer.copilot.lines import LineReader, NotARegularFile, Position


def holding(markers):
    return lambda line: any(marker in line for marker in markers)


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
    resumed = LineReader(path, Position(consumed.end_offset, consumed.number))
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


def _peak_bytes_reading(reader):
    """What reading every line costs at most, with one line held at a time."""
    tracemalloc.start()
    try:
        handed_out = [(line.number, len(line.data), line.oversized) for line in reader.read()]
        return handed_out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_line_is_held_once(tmp_path):
    """A line of several MB costs its own size, not two or three times it (readline's
    pieces and their join, the copy without its newline): those lines make a backfill's
    peak memory."""
    path = tmp_path / "events.jsonl"
    size = 6_000_000
    path.write_bytes(b"first\n" + b"x" * size + b"\nlast\n")
    handed_out, peak = _peak_bytes_reading(LineReader(path))
    assert handed_out == [(1, 5, False), (2, size, False), (3, 4, False)]
    assert peak < 1.3 * size


def test_an_oversized_line_costs_a_few_chunks_whatever_its_size(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"y" * (3 * lines.MAX_LINE_BYTES) + b"\nok\n")
    handed_out, peak = _peak_bytes_reading(LineReader(path))
    assert handed_out == [(1, lines.HEAD_BYTES, True), (2, 2, False)]
    assert peak < 4 * lines.CHUNK_BYTES  # the pieces readline joins, twice


def test_a_long_line_changed_before_it_is_read_again_is_not_handed_out(tmp_path, monkeypatch):
    """A long line is read twice (through, then whole): if the file changed in between, the
    line waits for the next read, which checks the file first."""
    monkeypatch.setattr(lines, "CHUNK_BYTES", 64)
    path = tmp_path / "events.jsonl"
    long_line = b"z" * 1000
    path.write_bytes(b"a\n" + long_line + b"\nb\n")
    real_open = lines.open_regular

    def rewritten_meanwhile(p):
        return _Rewritten(real_open(p), len(long_line))

    monkeypatch.setattr(lines, "open_regular", rewritten_meanwhile)
    reader = LineReader(path)
    assert read_all(reader) == [(1, b"a")]
    assert reader.position[:2] == (2, 1)
    monkeypatch.setattr(lines, "open_regular", real_open)
    assert read_all(reader) == [(2, long_line), (3, b"b")]


class _Wrapped:
    """An open file standing in for the reader's own, changing what some calls do."""

    def __init__(self, handle):
        self._handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


class _Rewritten(_Wrapped):
    """A file whose bytes change after a first pass through them: a read of `size` bytes
    gets other bytes than were there."""

    def __init__(self, handle, size):
        super().__init__(handle)
        self._size = size

    def read(self, *args):
        data = self._handle.read(*args)
        return b"w" * len(data) if args == (self._size,) else data


def test_skip_to_end_counts_lines_and_leaves_a_partial_line(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\nthr")
    reader = LineReader(path)
    reader.skip_to_end()
    assert reader.position[:2] == (8, 2)
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
        reader = LineReader(path, wanted=holding(markers) if markers else None)
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
        assert reader.position.line == len(body)
    finally:
        lines.CHUNK_BYTES = saved


def test_markers_pick_lines_and_keep_numbers(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"a\nx.fusion_1\nb\nc\nsession.shutdown\nd\npartial.fusion_")
    reader = LineReader(path, wanted=holding((b".fusion_", b"shutdown")))
    assert read_all(reader) == [(2, b"x.fusion_1"), (5, b"session.shutdown")]
    assert reader.position[:2] == (36, 6)


def test_oversized_line_without_marker_in_its_head_is_passed_over(tmp_path, monkeypatch):
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(lines, "CHUNK_BYTES", 256)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"x" * 5000 + b".fusion_\n" + b'{".fusion_"}' + b"y" * 5000 + b"\nok.fusion_\n")
    reader = LineReader(path, wanted=holding((b".fusion_",)))
    result = [(line.number, line.oversized, line.data[:12]) for line in reader.read()]
    assert result == [(2, True, b'{".fusion_"}'), (3, False, b"ok.fusion_")]
    assert reader.position.line == 3


def test_a_log_rewritten_in_place_and_grown_past_the_position_is_read_again(tmp_path):
    """Size alone cannot tell: the bytes before the position are checked on every read."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2}\n')
    reader = LineReader(path)
    read_all(reader)
    path.write_bytes(b'{"m":1}\n{"m":2}\n{"m":3}\n{"m":4}\n')  # same inode, longer
    assert read_all(reader) == [(1, b'{"m":1}'), (2, b'{"m":2}'), (3, b'{"m":3}'),
                                (4, b'{"m":4}')]
    assert reader.generation == 1


def test_a_saved_position_is_checked_before_resuming(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\n")
    first = LineReader(path)
    read_all(first)
    path.write_bytes(b"one\ntwo\nthree\n")
    assert read_all(LineReader(path, Position.from_data(first.position.to_data()))) == [
        (3, b"three")]
    path.write_bytes(b"uno\ndos\ntres\ncuatro\n")
    again = LineReader(path, first.position)
    assert read_all(again) == [(1, b"uno"), (2, b"dos"), (3, b"tres"), (4, b"cuatro")]
    assert again.generation == 1


def test_a_copied_log_is_resumed(tmp_path):
    """The bytes decide, not the inode: a restored or remounted log carries on."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\n")
    reader = LineReader(path)
    read_all(reader)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(b"one\ntwo\nthree\n")
    os.replace(copy, path)
    assert read_all(reader) == [(3, b"three")]


def test_a_long_line_written_in_pieces_is_read_once(tmp_path, monkeypatch):
    """Each piece costs its own bytes, not the line so far: no quadratic re-reading."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"")
    read_bytes = []
    real_open = lines.open_regular

    def counting_open(p):
        return _Counting(real_open(p), read_bytes)

    monkeypatch.setattr(lines, "open_regular", counting_open)
    reader = LineReader(path)
    piece = b"x" * 50_000  # 6 MB in all: under MAX_LINE_BYTES, so it is kept whole
    for _ in range(120):
        with open(path, "ab") as handle:
            handle.write(piece)
        assert read_all(reader) == []
    with open(path, "ab") as handle:
        handle.write(b"\nnext\n")
    assert read_all(reader) == [(1, piece * 120), (2, b"next")]
    assert sum(read_bytes) < 3 * 120 * len(piece)  # re-reading would be about 60 times it


class _Counting(_Wrapped):
    """A file wrapper that counts the bytes read through it."""

    def __init__(self, handle, counts):
        super().__init__(handle)
        self._counts = counts

    def read(self, *args):
        data = self._handle.read(*args)
        self._counts.append(len(data))
        return data

    def readline(self, *args):
        data = self._handle.readline(*args)
        self._counts.append(len(data))
        return data


def test_a_fifo_is_refused_without_blocking(tmp_path):
    path = tmp_path / "events.jsonl"
    os.mkfifo(path)
    try:
        list(LineReader(path).read())
    except NotARegularFile:
        pass
    else:
        raise AssertionError("a FIFO was read")


def _open_then_stopped(real_open):
    """`open` as a stop signal meets it: its KeyboardInterrupt raised just after `open`
    returned, before the caller holds the file object (which is dropped, closing its fd)."""
    def stopped_open(*args, **kwargs):
        real_open(*args, **kwargs)
        raise KeyboardInterrupt
    return stopped_open


def test_a_stop_just_after_the_log_is_opened_stays_a_stop_and_closes_it_once(tmp_path, monkeypatch):
    """The file object owns the descriptor from `open` on: closing it again raised EBADF in
    the stop's place, and the report went on, calling the log unreadable (a burst of stop
    signals in tests/test_command_frictions.py met it)."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"a":1}\n')
    monkeypatch.setattr(lines, "open", _open_then_stopped(open), raising=False)
    before = sorted(os.listdir("/proc/self/fd"))
    try:
        read_all(LineReader(path))
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the stop was lost")
    assert sorted(os.listdir("/proc/self/fd")) == before
