"""JSON read with the C scanner the standard library's json decodes with, without `import json`.

json.decoder compiles regular expressions when it is imported, so `import json` imports
`re`, which imports `enum`: some 6 ms of a start, most of what `statusline` would cost the
CLI's footer beyond the interpreter's own start. The scanner json itself uses
(_json.make_scanner, in C) needs none of it, given a context with json.JSONDecoder's
defaults. `loads` gives what json.loads gives and raises ValueError (or RecursionError)
where json.loads does (tests/test_statusline.py holds the two to it); where there is no C
scanner, it is json.loads.
"""

from __future__ import annotations

_WHITESPACE = " \t\n\r"  # json.decoder's WHITESPACE
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Defaults:
    """What the scanner reads of a json.JSONDecoder, as one made with no arguments has it."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


try:
    from _json import make_scanner
except ImportError:
    _scan = None
else:
    _scan = make_scanner(_Defaults())


def loads(data: bytes | str) -> object:
    """The value of the JSON document `data` (bytes in UTF-8)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if _scan is None:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("no JSON value where one was expected") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError("more after the JSON value")
    return value
