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

import re

from .records import record

OTHER = "other"


@record(frozen=True, slots=True)
class CodeKind:
    """A kind of code: its name (for the counts of refused values) and what it may look like."""

    name: str
    pattern: re.Pattern[str]

    def accept(self, value: str | None) -> str | None:
        """The value when it is a code of this kind, OTHER when it is not, None when absent."""
        if value is None or value == "":
            return None
        return value if self.pattern.fullmatch(value) else OTHER

    def is_code(self, value: str) -> bool:
        return self.pattern.fullmatch(value) is not None


# An enum value of the log (pattern, outcome, verdict, phase kind, status, finish reason,
# failure and degraded reasons, an event type): one lower-case word, `_`, `-` or `.` between
# its parts, 64 characters at most.
ENUM = CodeKind("enum", re.compile(r"(?=.{1,64}\Z)[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*", re.ASCII | re.DOTALL))
# A model name: `claude-sonnet-4.6`, `gpt-5.4`, a BYOK `openai/gpt-4o`: one slash at most, so
# nothing that reads as a path passes.
MODEL = CodeKind("model", re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}(?:/[A-Za-z0-9][A-Za-z0-9._:+-]{0,63})?", re.ASCII))
# A tool or MCP server name: `bash`, `str_replace_editor`, `github-mcp-server`.
TOOL = CodeKind("tool", re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}", re.ASCII))
# An identifier the log makes (fusion, phase, commit and tool call ids): a uuid with the
# CLI's prefixes and suffixes, `fusion-<uuid>:phase:0`.
IDENTIFIER = CodeKind("id", re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", re.ASCII))
# A version or a rule's name the log gives: `1.0.102`, `2026-09-01`, `mu-118`, `rule-cascade`.
VERSION = CodeKind("version", re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}", re.ASCII))
# The name of a field of the log, as an unknown field is reported: `routingLatencyMs`.
FIELD = CodeKind("field", re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII))
# A name in dotted form, as OpenTelemetry names metrics, span events and scopes:
# `gen_ai.client.operation.duration`, `github.copilot`, `github-copilot`.
NAME = CodeKind("name", re.compile(r"(?=.{1,128}\Z)[A-Za-z][A-Za-z0-9_]*(?:[.-][A-Za-z0-9_]+)*", re.ASCII))
# A few codes with one space between them, as the CLI names spans (`chat gpt-5.4`,
# `execute_tool bash bash`, `invoke_agent`) and agents: each word a tool or model name.
WORDS = CodeKind("words", re.compile(
    r"(?=.{1,160}\Z)[A-Za-z0-9_][A-Za-z0-9_.:+-]*(?:/[A-Za-z0-9][A-Za-z0-9_.:+-]*)?"
    r"(?: [A-Za-z0-9_][A-Za-z0-9_.:+-]*(?:/[A-Za-z0-9][A-Za-z0-9_.:+-]*)?){0,3}", re.ASCII))
