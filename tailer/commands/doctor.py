"""`doctor`: after a Copilot CLI upgrade, does the tailer still understand the session logs?

The log is the CLI's private state and changes without notice. This command reads every
log under the state folder once, from its beginning, through the daemon's own line reader
and parser, and prints what a user needs to judge that: sessions, CLI versions, fusion
turns, every event type with its count, and the drift the daemon would count in its
metrics (fusion event types and fields it does not know, required fields missing, damaged
lines), and the sessions whose model calls do not add up to the CLI's own totals
(`session.shutdown`, `session.usage_checkpoint`) or, session by session, from the CLI's
own ledger of model calls (`session-store.db` beside the state folder, read-only and only
its table of calls: tailer/copilot/ledger.py). The exit code says whether there was drift
or disagreement, so a script can alert after an upgrade.

Only metadata is printed: type and field names, counts, versions and session ids. No value
from the log is, so neither the text of prompts and answers nor the paths in
`session.start`.

`doctor --cli [PATH]` asks the same question before any log shows the answer: it reads
the event schema the installed CLI ships (tailer/copilot/schema_drift.py) and names what a new
version changed that the tailer does not expect.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..copilot import event_records, event_types, schema_drift
from ..copilot.files import find_logs, is_session_folder
from ..copilot.ledger import chosen_ledger
from ..path_options import is_folder
from ..printable import printable
from ..stdout_gone import stdout_to_devnull
from ..copilot.problems import (folder_problem, no_event_problem, session_folder_given, state_dir_missing,
                                state_dir_problem)
from ..turns.session_log import Read, SessionLog
from ..turns.reconciliation import Reconciliation
from ..turns import ledger_check
from ..turns.ledger_check import LedgerCheck

EXIT_DRIFT = 1
EXIT_USAGE = 2
# A damaged log can hold any number of distinct names; past this many per table the rest
# are counted together so the report stays readable and memory stays bounded.
MAX_NAMES = 200
OTHERS = "(others)"
NO_TYPE = "(no type)"
NO_VERSION = "(none)"


@dataclass
class Findings:
    """What the logs hold, as counts; names are type and field names, never values."""

    sessions: int = 0
    lines: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)  # session id -> its problem
    damaged: dict[str, str] = field(default_factory=dict)  # logs with lines, none an event
    versions: Counter = field(default_factory=Counter)  # CLI version -> sessions
    fusion_ids: set[str] = field(default_factory=set)
    route_failures: set[str] = field(default_factory=set)  # their attempts' ids
    event_types: Counter = field(default_factory=Counter)  # type -> lines
    unknown_types: Counter = field(default_factory=Counter)  # fusion type -> lines
    unknown_fields: Counter = field(default_factory=Counter)  # (type, field) -> lines
    missing_fields: Counter = field(default_factory=Counter)  # (type, field) -> lines
    malformed: Counter = field(default_factory=Counter)  # reason -> lines
    totals_checked: int = 0
    # Why no session was found, when it is the folder of one (problems.session_folder_given).
    session_folder: str | None = None
    disagreements: list[Reconciliation] = field(default_factory=list)
    ledger: LedgerCheck = field(default_factory=lambda: LedgerCheck(ledger_check.OFF))

    @property
    def drift(self) -> bool:
        return bool(self.unknown_types or self.unknown_fields or self.missing_fields
                    or self.malformed or self.disagreements or self.damaged or self.ledger.differ
                    or self.ledger.status == ledger_check.UNKNOWN_LAYOUT)


def main(args: argparse.Namespace, environ: dict[str, str] | None = None) -> int:
    if args.cli is not None:
        return check_cli(args.cli, environ or {})
    state_dir = args.state_dir
    try:
        found = is_folder("--state-dir", state_dir)
    except ValueError as error:
        print(printable(f"hydrafusion-tailer: {error}"), file=sys.stderr)
        return EXIT_USAGE
    if not found:
        print(printable(f"hydrafusion-tailer: {state_dir_missing(state_dir)}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        ledger = chosen_ledger(args.ledger, state_dir)
    except ValueError as error:
        print(f"hydrafusion-tailer: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        findings = examine(state_dir, ledger)
    except OSError as error:
        print(printable(f"hydrafusion-tailer: {state_dir_problem(error)}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        print(render(state_dir, findings), end="")
        sys.stdout.flush()
    except BrokenPipeError:
        # `doctor | less` quit early: the reader has all it wanted.
        stdout_to_devnull()
    # docs/REPORT.md, "Exit codes": no logs is nothing to report, as drift is something to mend.
    return EXIT_DRIFT if findings.drift or not findings.sessions else 0


def examine(state_dir: Path, ledger: Path | None = None) -> Findings:
    """Read every session log once, and check them against the CLI's ledger at `ledger`
    (None: not). Raises OSError when the state folder cannot be listed."""
    findings = Findings()
    logs, unreadable = find_logs(state_dir)
    sums: dict[str, ledger_check.LogSums | None] = {}
    findings.sessions = len(logs) + len(unreadable)
    if not findings.sessions and is_session_folder(state_dir):
        findings.session_folder = session_folder_given(state_dir)
    for session_id, error in unreadable.items():
        findings.unreadable[session_id] = folder_problem(session_id, error)
    for session_id, path in sorted(logs.items()):
        versions: set[str] = set()
        types: Counter = Counter()  # the session's lines by type, added once it is read
        # Every line: unlike the daemon, doctor tallies the types of lines that are not fusion.
        session = SessionLog(session_id, path, every_line=True)
        for read in session.read():
            version = _examine_line(findings, read, types)
            if version is not None:
                versions.add(version)
        if types.keys() == {NO_TYPE}:  # lines, and none an event: no log, not a log's lines
            findings.damaged[session_id] = no_event_problem(session_id)
        else:
            for name, count in types.items():
                _tally(findings.event_types, name, count)
        if session.problem is not None:
            findings.unreadable[session_id] = session.problem
        else:
            context = session.turns.context
            sums[session_id] = ledger_check.log_sums(context.log, context.log_unpriced)
        for check in session.turns.take_reconciliations():
            findings.totals_checked += 1
            if not check.agrees and len(findings.disagreements) < MAX_NAMES:
                findings.disagreements.append(check)
        for version in versions or {NO_VERSION}:
            _tally(findings.versions, version)
    findings.ledger = ledger_check.check(ledger, lambda: sums, logs.keys() | unreadable.keys())
    return findings


def _examine_line(findings: Findings, read: Read, types: Counter) -> str | None:
    """Count one line (its record judged and fed to its turns by SessionLog, as the daemon
    reads it) and its type into its session's `types`; return the CLI version when it is a
    `session.start` naming one."""
    line, record = read.line, read.record
    findings.lines += 1
    event_type = event_types.event_type_of(line.data)
    _tally(types, event_type or NO_TYPE)
    if isinstance(record, event_records.Malformed):
        findings.malformed[record.reason] += 1
    elif isinstance(record, event_records.Event):
        if isinstance(record, event_records.UnknownFusionEvent):
            _tally(findings.unknown_types, record.event_type)
        elif isinstance(record, (event_records.Resolved, event_records.Completed)):
            findings.fusion_ids.add(record.fusion_id)
        elif isinstance(record, event_records.RouteFailed):
            findings.route_failures.add(record.fusion_id)
        for name in record.unknown_fields:
            _tally(findings.unknown_fields, (record.event_type, name),
                   others=(record.event_type, OTHERS))
        for name in record.missing_fields:
            findings.missing_fields[record.event_type, name] += 1
    if event_type == event_types.SESSION_START and not line.oversized:
        return event_types.cli_version_of(line.data)
    return None


def _tally(counter: Counter, key, count: int = 1, *, others=OTHERS) -> None:
    if key in counter or len(counter) < MAX_NAMES:
        counter[key] += count
    else:
        counter[others] += count


def render(state_dir: Path, findings: Findings) -> str:
    """The report: sections of aligned rows, then one line with the verdict."""
    out = [f"Copilot session logs in {printable(str(state_dir))}", ""]
    out += _table("Sessions", [
        ("sessions found", findings.sessions),
        ("lines read", findings.lines),
        ("unreadable logs", len(findings.unreadable)),
        ("damaged logs (no line an event)", len(findings.damaged)),
    ])
    if findings.unreadable:
        out += _table("Unreadable logs", [(problem,) for _, problem in
                                          sorted(findings.unreadable.items())])
    if findings.damaged:
        out += _table("Damaged logs", [(problem,) for _, problem in sorted(findings.damaged.items())])
    out += _table("Copilot CLI versions (sessions)", _by_count(findings.versions))
    out += _table("Fusion turns", [
        ("turns (distinct fusion ids)", len(findings.fusion_ids)),
        ("route failures (distinct attempts)", len(findings.route_failures)),
    ])
    out += _table("Event types (lines)", _by_count(findings.event_types))
    out += _table("Fusion event types the tailer does not know (lines)",
                  _by_count(findings.unknown_types))
    out += _table("Unknown fields on fusion events (type, field, lines)",
                  _by_count(findings.unknown_fields))
    out += _table("Required fields missing (type, field, lines)",
                  _by_count(findings.missing_fields))
    out += _table("Malformed lines (reason, lines)", _by_count(findings.malformed))
    out += _table("The CLI's own totals", [
        ("totals checked (shutdowns and usage checkpoints)", findings.totals_checked),
        ("totals our sums disagree with", len(findings.disagreements)),
    ])
    out += _table("Sessions whose sums differ from the CLI's totals (session, totals, model, "
                  "our AIU, CLI AIU)", _disagreement_rows(findings.disagreements))
    out += _ledger_lines(findings.ledger)
    if findings.drift:
        out.append("Drift found: the tailer may miss or misread turns in these logs "
                   "(a CLI upgrade, damaged lines or logs, or sums that differ from the CLI's "
                   "totals or ledger; see above).")
    elif findings.session_folder:
        out.append(f"Nothing to check: {printable(findings.session_folder)}.")
    elif not findings.sessions:
        out.append("Nothing to check: no session logs (*/events.jsonl) in this folder.")
    else:
        out.append("No drift: the tailer knows every fusion event type and field in these logs.")
    return "\n".join(out) + "\n"


def _ledger_lines(found: LedgerCheck) -> list[str]:
    """The logs against the CLI's ledger: counts, then the sessions that differ and those
    it holds without a log; or one line saying why it was not checked."""
    heading = "The CLI's ledger (session-store.db beside the state folder, or --ledger)"
    if found.status != ledger_check.CHECKED:
        why = {ledger_check.OFF: "not read (--ledger none)",
               ledger_check.ABSENT: "none there (Copilot CLI 1.0.102 and later keep one)"}
        return [heading, f"  {why.get(found.status) or found.problem}", ""]
    out = _table(heading, [
        ("sessions whose credits were not compared (unknown to the CLI)",
         found.credits_not_compared),
        ("sessions with calls in their log but none in the ledger", found.not_in_ledger),
        ("sessions whose log was read without its start", found.logs_without_start),
        ("sessions in the ledger without a log", len(found.only_in_ledger)
         + found.only_in_ledger_unnamed),
        ("  of those, ids not shaped as the CLI's (not shown)", found.only_in_ledger_unnamed),
    ])
    out.insert(1, f"  {ledger_check.summary(found)}")
    out += _table("Sessions whose log and the CLI's ledger differ (session, what differs)",
                  [(differs.session_id, ledger_check.described(differs))
                   for differs in found.differ[:MAX_NAMES]])
    only = [(only.session_id, only.cli.calls, _shown_credits(only.cli.credits))
              for only in found.only_in_ledger[:MAX_NAMES]]
    out += _table("Sessions in the CLI's ledger without a log (session, calls, credits)", only)
    return out


def _shown_credits(credits: float | None) -> str:
    return "unknown" if credits is None else f"{credits:.9g}"


def _disagreement_rows(checks: list[Reconciliation]) -> list[tuple]:
    """One row per model whose figures differ; credits shown, tokens differ when equal."""
    rows = []
    for check in checks:
        for model in sorted(check.ours.keys() | check.theirs.keys()):
            ours, theirs = check.ours.get(model), check.theirs.get(model)
            if ours != theirs:
                rows.append((check.session_id, check.source, model,
                             _credits(ours), _credits(theirs)))
    return rows


def _credits(usage: event_records.Usage | None) -> str:
    return "none" if usage is None else f"{usage.aiu:.9g}"


def _by_count(counter: Counter) -> list[tuple]:
    """Rows of (name..., count), most frequent first."""
    ordered = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
    return [(*(key if isinstance(key, tuple) else (key,)), count) for key, count in ordered]


def _table(heading: str, rows: list[tuple]) -> list[str]:
    """A heading, its rows indented with columns aligned (numbers to the right), a blank line."""
    if not rows:
        return [heading, "  none", ""]
    cells = [[_shown(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = [heading]
    for row, shown in zip(rows, cells):
        aligned = [
            text.rjust(width) if isinstance(cell, int) else text.ljust(width)
            for cell, text, width in zip(row, shown, widths)
        ]
        lines.append("  " + "  ".join(aligned).rstrip())
    return lines + [""]


def _shown(cell: object) -> str:
    """Names come from the log: printable, so none can drive a terminal or break a row, and
    an empty one shown as `''`."""
    return printable(str(cell)) or "''"


def check_cli(path: str, environ: dict[str, str]) -> int:
    """`doctor --cli [PATH]`: the installed CLI's event schema against the tailer's knowledge."""
    try:
        if path:
            schema = schema_drift.schema_at(Path(path))
        else:
            found = schema_drift.find_schemas(environ)
            if not found:
                print("hydrafusion-tailer: no Copilot CLI package found in its caches "
                      "($XDG_CACHE_HOME/copilot/pkg, ~/.cache/copilot/pkg); run `copilot "
                      "--version` once, or give the path of session-events.schema.json",
                      file=sys.stderr)
                return EXIT_USAGE
            schema = found[0]
        drift = schema_drift.compare(schema_drift.load(schema))
    except (OSError, schema_drift.SchemaError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        print(f"hydrafusion-tailer: cannot read the CLI's event schema {printable(path or '')}: "
              f"{printable(str(reason))}",
              file=sys.stderr)
        return EXIT_USAGE
    print(render_cli(schema, drift), end="")
    return EXIT_DRIFT if drift.any else 0


def render_cli(schema: Path, drift: schema_drift.Drift) -> str:
    """The schema report: what a new CLI version changed that the tailer does not expect."""
    version = schema_drift.version_of(schema)
    named = f"Copilot CLI {version}" if version != "unknown" else "Copilot CLI"
    out = [printable(f"{named} event schema: {schema}"), ""]
    out += _table("Fusion and usage event types the tailer does not know",
                  [(name,) for name in drift.unknown_types])
    out += _table("Fields the tailer does not know (type, field, JSON type)",
                  drift.unknown_fields)
    out += _table("Event types the tailer reads that are gone", [(t,) for t in drift.gone_types])
    out += _table("Fields the tailer relies on that are gone (type, field)", drift.gone_fields)
    out += _table("Fields the tailer relies on whose type changed (type, field, now, read as)",
                  drift.retyped)
    out += _table("New fields that may carry free text: review the privacy allowlist "
                  "(type, field)", drift.free_text)
    if drift.any:
        out.append("Drift found: update tailer/copilot/ (KNOWN_FIELDS, READ_AS, the decoders, "
                   "SCRUB_DATA) for this CLI version; see docs/COMPATIBILITY.md.")
    else:
        out.append("No drift: the tailer knows every fusion and usage event and field this "
                   "CLI version declares.")
    return "\n".join(out) + "\n"
