"""Text fitted to a terminal's width: wrapped between words where nothing of it may be lost
(flow, prose), or cut where a column must keep its width (cut, fit).

The report's table and --watch measure with these, so a line is never wider than the
terminal and what wraps wraps the same everywhere. A colour code shows as nothing, so it
counts for nothing in a line's length.
"""

from __future__ import annotations

import re

COLOR_CODE = re.compile(r"(\x1b\[[0-9;]*m)")


def fit(line: str, width: int) -> str:
    """The line cut to `width` visible characters, its colour codes kept and closed."""
    if len(line) <= width:
        return line
    kept, seen = [], 0
    for part in COLOR_CODE.split(line):
        if COLOR_CODE.fullmatch(part):
            kept.append(part)
        else:
            kept.append(part[:max(width - seen, 0)])
            seen += len(part)
    text = "".join(kept)
    return text + "\x1b[0m" if "\x1b[" in text else text


def cut(text: str, width: int) -> str:
    """`text` within `width`, a `~` where it was cut: for a cell that must keep its column."""
    return text if len(text) <= width else text[:max(width - 1, 0)] + "~"


def flow(parts: list[str], width: int, indent: str = "  ") -> list[str]:
    """The parts, a space between each two, on as many lines as `width` needs, the lines
    after the first beginning with `indent`. A line breaks between two parts; a part too
    long for any line breaks between its words, and a word longer than a line inside it:
    nothing is cut. A part may be painted: its length is what shows of it."""
    lines, line, pending = [], "", list(parts)
    while pending:
        part = pending.pop(0)
        joined = f"{line} {part}" if line.strip() else line + part
        if shown_length(joined) <= width:
            line = joined
        elif line.strip() and len(indent) + shown_length(part.lstrip()) <= width:
            lines.append(line)
            line = indent + part.lstrip()
        elif len(part.split()) > 1:  # too long for any line: word by word
            words = part.split()
            pending[:0] = [part[:len(part) - len(part.lstrip())] + words[0]] + words[1:]
        else:  # a word longer than a line: broken, from a line of its own
            if line.strip():
                lines.append(line)
                line = indent
            room = max(1, width - len(line))
            lines.append(line + part[:room])
            line = indent
            if part[room:]:
                pending.insert(0, part[room:])
    return lines + [line] if line.strip() or not lines else lines


def prose(text: str, width: int) -> list[str]:
    """A sentence on as many lines as `width` needs, broken between words, the lines after
    the first indented two more than it."""
    lead = " " * (len(text) - len(text.lstrip(" ")))
    words = text.split()
    return flow([lead + words[0]] + words[1:], width, lead + "  ")


def commas(items: list[str]) -> list[str]:
    """Each item but the last with a comma: parts of a list for flow."""
    return [item + "," for item in items[:-1]] + items[-1:]


def shown_length(text: str) -> int:
    """What shows of `text` on a terminal: its length without its colour codes."""
    return len(COLOR_CODE.sub("", text)) if "\x1b[" in text else len(text)
