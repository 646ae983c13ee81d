"""What changed in a CLI version: its schema against the pinned one's, and its scenarios.

Used by `python3 -m tests.realcli check VERSION` and `... matrix`; the tests assert the
same things on the pinned version instead of printing them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tailer.commands import doctor
from tailer.copilot import schema_drift
from tailer.copilot.ledger import ledger_beside

from . import reading
from .driver import Outcome
from .scenarios import SCENARIOS

# The part of the schema the pinned copy keeps (tests/realcli/record.py).
_COMPARED = re.compile(r"fusion|usage|shutdown")


def schema_diff(old: Path, new: Path) -> list[str]:
    """`+`/`-`/`~` lines for events and fields added, removed or retyped from old to new."""
    before, after = schema_drift.load(old), schema_drift.load(new)
    lines = []
    for event_type in sorted(set(before) | set(after)):
        if not _COMPARED.search(event_type):
            continue
        if event_type not in after:
            lines.append(f"- {event_type}")
            continue
        if event_type not in before:
            lines.append(f"+ {event_type}")
            continue
        old_fields, new_fields = before[event_type], after[event_type]
        for name in sorted(set(old_fields) | set(new_fields)):
            if name not in new_fields:
                lines.append(f"- {event_type} {name}")
            elif name not in old_fields:
                lines.append(f"+ {event_type} {name} ({_types(new_fields[name])})")
            elif old_fields[name].types != new_fields[name].types:
                lines.append(f"~ {event_type} {name}: {_types(old_fields[name])} -> "
                             f"{_types(new_fields[name])}")
    return lines


def _types(found: schema_drift.SchemaField) -> str:
    return "|".join(sorted(found.types)) or "any"


@dataclass
class Report:
    """One version's results, for a person (render) and for the matrix table (cells)."""

    version: str
    scenarios: dict[str, str] = field(default_factory=dict)  # name -> ok | what differed
    problems: list[str] = field(default_factory=list)
    schema_changes: list[str] = field(default_factory=list)
    schema_drift: schema_drift.Drift | None = None
    log_drift: bool = False
    totals_disagree: int = 0  # the CLI's own totals that the tailer's sums do not match
    ledger: str = "absent"  # what checking the CLI's ledger (session-store.db) found
    ledger_differs: int = 0  # sessions whose log and the CLI's ledger differ

    @property
    def recordable(self) -> bool:
        """The scenarios ran and the tailer read them: worth keeping as test data."""
        return (not self.problems and not self.log_drift
                and all(result == "ok" for result in self.scenarios.values()))

    @property
    def clean(self) -> bool:
        return (self.recordable and not self.totals_disagree and not self.ledger_differs
                and self.ledger in ("checked", "absent")
                and not (self.schema_drift and self.schema_drift.any))


def report(outcome: Outcome, pinned_schema: Path | None) -> Report:
    result = Report(outcome.version)
    runs = {}
    for run in outcome.runs:
        runs.setdefault(run.scenario, []).append(run)
    for scenario in SCENARIOS:
        failed = [run for run in runs.get(scenario.name, []) if run.returncode != 0]
        session_id = outcome.sessions[scenario.name]
        log = outcome.state_dir / session_id / "events.jsonl"
        if failed:
            result.scenarios[scenario.name] = f"exit {failed[0].returncode}"
            why = failed[0].stderr_tail[-300:].strip() or _session_error(log)
            result.problems.append(f"{scenario.name}: {why}")
            continue
        if not log.exists():
            result.scenarios[scenario.name] = "no log"
            continue
        found = reading.differences(scenario, reading.session_turns(log, session_id))
        result.scenarios[scenario.name] = "ok" if not found else "differs"
        result.problems += found
    if outcome.state_dir.is_dir():
        findings = doctor.examine(outcome.state_dir, ledger_beside(outcome.state_dir))
        result.log_drift = bool(findings.unknown_types or findings.unknown_fields
                                or findings.missing_fields or findings.malformed)
        result.totals_disagree = len(findings.disagreements)
        result.ledger = findings.ledger.problem or findings.ledger.status
        result.ledger_differs = len(findings.ledger.differ)
    if outcome.schema is not None:
        result.schema_drift = schema_drift.compare(schema_drift.load(outcome.schema))
        if pinned_schema is not None and pinned_schema.is_file():
            result.schema_changes = schema_diff(pinned_schema, outcome.schema)
    return result


def _session_error(log: Path) -> str:
    """The CLI's own account of a failed run, from the `session.error` in its log."""
    if log.exists():
        for line in log.read_text(errors="replace").splitlines():
            event = json.loads(line)
            if event.get("type") == "session.error":
                return str((event.get("data") or {}).get("message"))[:300]
    return "no error message"


def render(result: Report, pinned: str) -> str:
    out = [f"Copilot CLI {result.version}", ""]
    out.append(f"Schema changes against {pinned} (fusion, usage and shutdown events):")
    out += [f"  {line}" for line in result.schema_changes] or ["  none"]
    out.append("")
    out.append("doctor --cli (the schema against the tailer's knowledge):")
    if result.schema_drift is None:
        out.append("  no schema: the CLI did not unpack one")
    else:
        out += [f"  {line}" for line in doctor.render_cli(Path("-"), result.schema_drift)
                .splitlines()[2:] if line]
    out.append("")
    out.append("Scenarios (what the tailer made of the logs this version wrote):")
    width = max(len(name) for name in result.scenarios) if result.scenarios else 0
    out += [f"  {name.ljust(width)}  {state}" for name, state in result.scenarios.items()]
    out += [f"    {problem}" for problem in result.problems]
    out.append("")
    out.append("doctor on the logs: " + ("drift found" if result.log_drift else "no drift"))
    out.append(f"the CLI's own totals the tailer's sums disagree with: {result.totals_disagree}")
    out.append(f"the CLI's ledger: {result.ledger}; sessions that differ from it: "
               f"{result.ledger_differs}")
    return "\n".join(out) + "\n"
