"""Text made safe to write where a person reads it: a terminal, a log line, a CSV cell.

A value from a log or from a server's answer may hold bytes a terminal obeys (ESC and the
C1 controls start escape sequences that set the title, clear the screen or draw links),
line breaks that forge another row or log line (CR, LF, U+2028, U+2029), and the
bidirectional overrides that show text in another order than it is. Every such character
becomes a visible escape (`\\x1b`, `\\u2028`), so what is printed is what the value holds.
A lone surrogate (JSON's `"\\ud800"` decodes to one) is escaped too: no encoder can write
it, so printing it would fail instead of showing it.
"""

from __future__ import annotations

_UNSAFE = ("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
           "\ud800-\udfff]")


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """The text with every control, line-breaking and direction-changing character escaped.

    What it writes is printable, so printing twice gives what printing once gave: a value
    may pass through more than one layer that escapes (a sender's message, then the log's
    formatter) and still reads the same. A backslash is kept as it is, so a value that
    already holds the text `\\x1b` shows the same as one that held ESC; what matters here is
    that neither can drive the terminal.
    """
    if text.isprintable():
        return text
    # Imported here, as rarely needed: the status line's refresh never compiles the pattern
    # when its text is printable (re's module cache keeps it compiled for the next call).
    import re

    return re.sub(_UNSAFE, _escape, text)


# What a terminal draws in other than one column: wide characters (CJK, most emoji) in
# two, combining marks and zero-width or format characters (a joiner, a variation
# selector) in none; unassigned and private ones in whatever its font says.
_NOT_ONE_COLUMN = frozenset(("Mn", "Me", "Mc", "Cf", "Cn", "Co", "Zl", "Zp"))


def one_column(text: str) -> str:
    """The text as printable() gives it, with each character a terminal would not draw in
    exactly one column escaped too (`\\u4f1a`), so its length is the columns it takes: for
    a table's cell, whose width is counted in characters, of a value any text may be (a
    session id is the name of a folder)."""
    text = printable(text)
    if text.isascii():
        return text
    return "".join(ch if ord(ch) < 0x80 or _one_column(ch) else f"\\u{ord(ch):04x}"
                   if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}" for ch in text)


def _one_column(ch: str) -> bool:
    import unicodedata  # here: the status line's refresh imports this module, and draws no table

    return (unicodedata.east_asian_width(ch) not in ("W", "F")
            and unicodedata.category(ch) not in _NOT_ONE_COLUMN)
