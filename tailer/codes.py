"""The one rule for strings that leave the tailer as machine codes.

The log calls many fields enums or identifiers (a pattern, a finish reason, a model name,
a tool name), and those values become span attributes, metric labels, log words and report
cells. The CLI may put anything there, an error message or a path, so a value is passed on
only when it looks like a code of its kind: short, from a strict set of characters. Any
other value becomes OTHER; the value itself is never kept. Callers count what they turned
into OTHER, so a code set that grew (a new model family's spelling) shows up as a number
rather than as silently lost detail. docs/TRACES.md lists each kind's rule.
"""

from __future__ import annotations

from .records import record

TYPE_CHECKING = False  # typing costs the footer's start-up; a type checker takes it as True
if TYPE_CHECKING:
    from typing import Callable

OTHER = "other"


@record(frozen=True, slots=True)
class CodeKind:
    """A kind of code: its name (for the counts of refused values) and its check, which
    tells whether a text is a code of this kind (`kind.is_code(text)`)."""

    name: str
    is_code: Callable[[str], bool]

    def accept(self, value: str | None) -> str | None:
        """The value when it is a code of this kind, OTHER when it is not, None when absent."""
        if value is None or value == "":
            return None
        return value if self.is_code(value) else OTHER


# The checks are made of str and bytes methods, not regular expressions: `re` (with the
# `enum` it imports) and compiling these patterns cost the footer's refresh some 5 ms of
# start-up (docs/PERFORMANCE.md, issue 41). tests/test_codes_patterns.py holds each check
# to the pattern it replaced.
_DIGITS = "0123456789"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_LETTERS = _LOWER + _LOWER.upper()
_ALNUM = _LETTERS + _DIGITS


def _spelled_from(characters: str) -> Callable[[str], bool]:
    """A check that every character of a text is one of `characters` (ASCII)."""
    deleted = characters.encode("ascii")
    # Deleting the allowed bytes in C leaves nothing: as fast as a pattern's match, where a
    # set of characters, tested one by one, took twice as long on a uuid.
    return lambda value: value.isascii() and not value.encode("ascii").translate(None, deleted)


def _word(first: str, rest: str, longest: int) -> Callable[[str], bool]:
    """A check for a text of 1 to `longest` characters: its first one of `first`, every
    other one of `rest` (which holds `first`)."""
    spelled = _spelled_from(rest)
    return lambda value: 0 < len(value) <= longest and value[0] in first and spelled(value)


def _parts(first: str, rest: str, separators: str, longest: int) -> Callable[[str], bool]:
    """A check for a text of 1 to `longest` characters: its first one of `first`, then
    characters of `rest`, with one of `separators` at most between two of them (never two
    together, never one at the end)."""
    spelled = _spelled_from(rest + separators)
    one, others = separators[0], separators[1:]

    def fits(value: str) -> bool:
        if not (0 < len(value) <= longest and value[0] in first and spelled(value)):
            return False
        for separator in others:
            value = value.replace(separator, one)
        return one + one not in value and not value.endswith(one)
    return fits


def _model(value: str) -> bool:
    head, slash, tail = value.partition("/")
    return _MODEL_PART(head) and (not slash or _MODEL_PART(tail))


_MODEL_PART = _word(_ALNUM, _ALNUM + "._:+-", 64)
_WORD_HEAD = _spelled_from(_ALNUM + "_.:+-")


def _words(value: str) -> bool:
    if not 0 < len(value) <= 160:
        return False
    words = value.split(" ")
    return len(words) <= 4 and all([_is_word(word) for word in words])


def _is_word(word: str) -> bool:
    """A word of WORDS: a tool or model name, of any length; after a `/`, no `_` first."""
    head, slash, tail = word.partition("/")
    if not (head and head[0] in _ALNUM + "_" and _WORD_HEAD(head)):
        return False
    return not slash or bool(tail) and tail[0] in _ALNUM and _WORD_HEAD(tail)


# An enum value of the log (pattern, outcome, verdict, phase kind, status, finish reason,
# failure and degraded reasons, an event type): one lower-case word, `_`, `-` or `.` between
# its parts, 64 characters at most.
ENUM = CodeKind("enum", _parts(_LOWER, _LOWER + _DIGITS, "._-", 64))
# A model name: `claude-sonnet-4.6`, `gpt-5.4`, a BYOK `openai/gpt-4o`: one slash at most, so
# nothing that reads as a path passes; 64 characters at most on each side of it.
MODEL = CodeKind("model", _model)
# A tool or MCP server name: `bash`, `str_replace_editor`, `github-mcp-server`.
TOOL = CodeKind("tool", _word(_ALNUM + "_", _ALNUM + "_.:-", 64))
# An identifier the log makes (fusion, phase, commit and tool call ids): a uuid with the
# CLI's prefixes and suffixes, `fusion-<uuid>:phase:0`.
IDENTIFIER = CodeKind("id", _word(_ALNUM, _ALNUM + "._:-", 128))
# A version or a rule's name the log gives: `1.0.102`, `2026-09-01`, `mu-118`, `rule-cascade`.
VERSION = CodeKind("version", _word(_ALNUM, _ALNUM + ".+_-", 64))
# The name of a field of the log, as an unknown field is reported: `routingLatencyMs`.
FIELD = CodeKind("field", _word(_LETTERS + "_", _ALNUM + "_", 64))
# A name in dotted form, as OpenTelemetry names metrics, span events and scopes:
# `gen_ai.client.operation.duration`, `github.copilot`, `github-copilot`.
NAME = CodeKind("name", _parts(_LETTERS, _ALNUM + "_", ".-", 128))
# A few codes with one space between them, as the CLI names spans (`chat gpt-5.4`,
# `execute_tool bash bash`, `invoke_agent`) and agents: each word a tool or model name,
# 160 characters in all at most.
WORDS = CodeKind("words", _words)
