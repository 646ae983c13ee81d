"""A line's JSON value, parsed as json.loads does, and without its bulk where it has one.

The parser (tailer/copilot/events.py) reads only metadata; the largest lines of a log are
tool events and prompts, whose bulk (a tool's output or arguments, a prompt's text) it
never reads, so a backfill of large sessions stays close to the speed of reading the files.
"""

from __future__ import annotations

import sys

from ..fast_json import NOT_JSON, scan_once

# json.loads less the work around its C scanner (detecting the encoding, a decoder object's
# checks): a few microseconds, on each of the tens of thousands of lines a backfill reads.
# json itself is imported only for a line that does not start as an object's first key.
_SCAN_ONCE = scan_once


def loads(line: bytes) -> object:
    """json.loads(line): the same value, the same exceptions."""
    if not line.startswith(b'{"'):  # json.loads may read it as another encoding
        import json

        return json.loads(line)
    text = line.decode("utf-8", "surrogatepass")  # as json.loads decodes
    try:
        value, end = _SCAN_ONCE(text, 0)
    except NOT_JSON:
        raise ValueError("not a JSON value") from None
    if end != len(text) and text[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return value


# -- Reading a large line without its bulk ---------------------------------------------
#
# A tool's output or arguments and a prompt's text can run to megabytes, and decoding them
# (unescaping every quote and newline) is most of what a full json.loads of such a line
# costs. The parser never reads them, so it cuts them out first: the line is parsed as its
# head (everything before the bulky member) joined to its tail (the members after it). A
# `,"` is either a boundary between members at some depth or, inside a string, its last
# comma and its closing quote (any other quote in a string is escaped). A cut inside a
# string turns every later string inside out, so the keys after the bulk (`"id"`,
# `"timestamp"`) stand outside any string and the joined text never parses; a cut at a
# boundary deeper in the bulk leaves braces that do not balance. So the first `,"` in the
# last _TAIL_BYTES that makes the joined text a valid object is the boundary at the bulk's
# own depth, the first member after the bulk. Any doubt (no bulky member near the start,
# nothing that joins) and the line is parsed whole: slower, never wrong.

# Shorter lines are parsed whole: cheaper than cutting them. Callgrind, a cold report on
# the small bench sets (escape-heavy / plain): 4096 bytes 2.907G / 1.572G instructions,
# 2048 2.841G / 1.567G, 1024 2.860G / 1.584G.
WHOLE_BELOW = 2048
_HEAD_BYTES = 4096  # where the bulky member's key is looked for
_TAIL_BYTES = 16384  # where the members after the bulk are looked for
_TAIL_TRIES = 8
_BULK_KEYS = {
    b"tool.execution_start": (b',"arguments":',),
    b"tool.execution_complete": (b',"result":', b',"error":'),
}
# A prompt's `data` is all text: the whole object is bulk.
_ALL_DATA_BULK = {b"user.message": b'{"type":"user.message","data":{'}


def loads_without_bulk(line: bytes, event_type: bytes) -> object | None:
    """The line's JSON value without its bulky member, or None: parse the line whole."""
    if len(line) < WHOLE_BELOW:
        return None
    cut = _bulk_start(line, event_type)
    if cut is None:
        return None
    head = line[:cut]
    data_opened = head.endswith(b"{")
    boundary = max(cut, len(line) - _TAIL_BYTES)
    for _ in range(_TAIL_TRIES):
        boundary = _comma_quote(line, boundary + 1)
        if boundary < 0:
            return None
        tails = [line[boundary + 1:] if data_opened else line[boundary:]]
        if line[boundary - 1] == 0x7D:  # "}": maybe the end of `data` itself
            tails.append(line[boundary - 1:])
        for tail in tails:
            try:
                return loads(head + tail)
            except (ValueError, RecursionError):
                continue
    return None


def _bulk_start(line: bytes, event_type: bytes) -> int | None:
    """Where the bulky member begins (its `,`, or the inside of a bulky `data`)."""
    opening = _ALL_DATA_BULK.get(event_type)
    if opening is not None:
        return len(opening) if line.startswith(opening) else None
    first = None
    for key in _BULK_KEYS.get(event_type, ()):
        # A key found first bounds where the next is looked for: an absent one (a result's
        # `error`) was searched for through all of _HEAD_BYTES, on every large tool line.
        end = _HEAD_BYTES if first is None else min(first + len(key) - 1, _HEAD_BYTES)
        position = line.find(key, 0, end)
        if position > 0:
            first = position
    return first


def _comma_quote(line: bytes, start: int) -> int:
    """line.find(b',"', start), sooner where the line holds few quotes after `start`.

    bytes.find walks the line a few bytes at a time for two bytes: some 8 us on each tool
    output of 9 KB, half of what cutting its bulk out cost. A quote alone is found at
    memchr's speed, and where the bulk's text holds no quote the one sought is the sixth
    or so (those of the bulk's key, of its text's key, the text's two ends). After
    _QUOTE_TRIES quotes not after a comma (a text full of escaped quotes), the two bytes
    are searched for, by `re` where the process has it: 2.4 times as fast as bytes.find on
    such a text (5.7 against 13.6 us on 13 KB). The footer's refresh never imports re
    (some 6 ms of its start-up), and finds the same place with bytes.find.
    """
    quote = line.find(b'"', start + 1)
    for _ in range(_QUOTE_TRIES):
        if quote < 0:
            return -1
        if line[quote - 1] == _COMMA:
            return quote - 1
        quote = line.find(b'"', quote + 1)
    if quote < 0:
        return -1
    search = _comma_quote_search()
    if search is None:
        return line.find(b',"', quote - 1)
    found = search(line, quote - 1)
    return -1 if found is None else found.start()


def _comma_quote_search():
    """re's search for `,"`, compiled once some module of this process has imported re."""
    global _SEARCH
    if _SEARCH is None and "re" in sys.modules:
        _SEARCH = sys.modules["re"].compile(b',"').search
    return _SEARCH


_QUOTE_TRIES = 8
_COMMA = ord(",")
_SEARCH = None
