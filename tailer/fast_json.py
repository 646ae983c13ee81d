"""JSON read and written with the C scanner and encoder the standard library's json uses,
without `import json`.

json.decoder compiles regular expressions when it is imported, so `import json` imports
`re`, which imports `enum`: some 6 ms of a start, most of what `statusline` would cost the
CLI's footer beyond the interpreter's own start. The scanner json itself uses
(_json.make_scanner, in C) needs none of it, given a context with json.JSONDecoder's
defaults. `loads` gives what json.loads gives and raises ValueError (or RecursionError)
where json.loads does; `dumps` writes what json.dumps writes with separators (",", ":") and
ASCII only, as the status line's state is saved (tests/test_statusline.py holds both to
json). Where there is no C scanner or encoder, they are json's.
"""

from __future__ import annotations

_WHITESPACE = " \t\n\r"  # json.decoder's WHITESPACE
# What scan_once raises where json.loads raises ValueError: StopIteration where no value
# starts, and, on Python 3.11 in a process that has not imported json, SystemError for any
# other error: its C scanner raises json.decoder.JSONDecodeError, which it looks for among
# the modules already imported only (the status line's reading, which never imports json).
NOT_JSON = (StopIteration, SystemError)
_OTHER_ENCODINGS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")  # byte order marks
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Defaults:
    """What the scanner reads of a json.JSONDecoder, as one made with no arguments has it."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


try:
    from _json import encode_basestring_ascii, make_encoder, make_scanner
except ImportError:
    import json.scanner

    scan_once = json.scanner.make_scanner(json.JSONDecoder())
    _encode = None
else:
    # (text, index) -> (the value starting at index, where it ends); StopIteration if none.
    scan_once = make_scanner(_Defaults())

    def _encode(value: object):
        # As json.JSONEncoder.iterencode makes it for one call (a fresh `markers`, which
        # finds circular references), with json.dumps's defaults less the separators.
        return make_encoder({}, _not_serializable, encode_basestring_ascii, None, ":", ",",
                            False, False, True)(value, 0)


def loads(data: bytes | str) -> object:
    """The value of the JSON document `data` (bytes in UTF-8)."""
    if isinstance(data, bytes) and (b"\0" in data[:4] or data.startswith(_OTHER_ENCODINGS)):
        # UTF-16 or UTF-32 (NULs among the first bytes), or a byte order mark: json.loads
        # reads bytes in the encoding they are found in, and so must this.
        import json

        return json.loads(data)
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = scan_once(text, start)
    except NOT_JSON:
        raise ValueError("no JSON value where one was expected") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError("more after the JSON value")
    return value


def dumps(value: object) -> str:
    """json.dumps(value, separators=(",", ":")): the same text, the same exceptions."""
    if _encode is None:
        import json

        return json.dumps(value, separators=(",", ":"))
    return "".join(_encode(value))
