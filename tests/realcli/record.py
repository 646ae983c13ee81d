"""Keep the sessions a suite run produced, scrubbed, as test data in the repository.

They are the ground truth for the tailer's reading of real logs, and tests that cannot
install the CLI (no registry) still check them. Each session goes through the project's
own scrubber (`python -m tailer scrub`), so only metadata is kept: no prompt, answer, tool
argument or output, path or error text. The scrubber gives each session a new id;
`scenarios.json` says which scenario each one is.

The CLI's ledger of model calls (`session-store.db`) is kept as `ledger.sql`: the SQL that
makes its table `assistant_usage_events`, as the CLI wrote it, and that table's rows, their
session ids the scrubbed sessions' new ones. Nothing else of the file is kept: its other
tables hold the prompts (`sessions.summary`, `turns`), the conversation's text (the search
index) and paths. `ledger_database` makes a database of it again. The SQL of every table
and index of the file (no row) is kept as `session-store.schema.sql`, so a test can fill
the CLI's whole layout with text that must not leave (tests/test_privacy.py).

The CLI's own OpenTelemetry export of each scenario is kept too (`otel/<scenario>.jsonl`):
its session ids become the scrubbed sessions' new ones, so its prompts still pair with
the turns, and every attribute the tailer does not forward (tailer/outputs/copilot_otel.py's
allowlist) has its text replaced by CONTENT_MARK. The CLI wrote it with content capture
on, so the marks stand where its prompts, answers, instructions and paths were: a test
can check that none of them is forwarded.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

from tailer.outputs import copilot_otel as cli_otel
from tailer.commands.scrub import scrub_tree

from .driver import REPO, Outcome

DATA = REPO / "tests" / "data" / "realcli"
MANIFEST = "scenarios.json"
OTEL = "otel"
CONTENT_MARK = "REALCLI-CANARY content the CLI captured"
SCHEMA = "session-events.schema.json"
LEDGER = "ledger.sql"
LEDGER_TABLE = "assistant_usage_events"
STORE_SCHEMA = "session-store.schema.sql"
# The events of the CLI's schema that are kept (with every definition they refer to): the
# ones `doctor --cli` looks at. The whole file is about 1 MB; this part about 100 kB.
_KEPT_EVENTS = re.compile(r"fusion|usage|shutdown")


def data_dir(version: str) -> Path:
    return DATA / version


def record(outcome: Outcome, dest: Path) -> dict[str, str]:
    """Write dest/sessions/<new id>/events.jsonl per scenario and dest/scenarios.json."""
    sessions = dest / "sessions"
    if sessions.exists():
        shutil.rmtree(sessions)
    sessions.mkdir(parents=True)
    manifest = {}
    with tempfile.TemporaryDirectory() as scratch:
        for scenario, session_id in outcome.sessions.items():
            scrubbed = Path(scratch, scenario)
            scrub_tree(outcome.state_dir / session_id, scrubbed)
            (folder,) = scrubbed.iterdir()
            shutil.move(str(folder), sessions / folder.name)
            manifest[scenario] = folder.name
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    new_ids = {outcome.sessions[scenario]: new for scenario, new in manifest.items()}
    keep_otel(outcome.otel_dir, dest / OTEL, new_ids)
    keep_ledger(outcome.state_dir.parent / "session-store.db", dest / LEDGER, new_ids)
    return manifest


def keep_ledger(database: Path, dest: Path, new_ids: dict[str, str]) -> None:
    """The ledger's table of calls as SQL: its CREATE TABLE as the CLI wrote it, then an
    INSERT per row, its session id renamed (a session of no scenario's: dropped); and the
    SQL of the file's whole layout beside it (STORE_SCHEMA)."""
    dest.write_text(ledger_sql(database, new_ids))
    dest.with_name(STORE_SCHEMA).write_text(store_schema(database))


def store_schema(database: Path) -> str:
    """Every CREATE statement of the CLI's session store, in the order the CLI made them:
    its tables, indexes and the search index (whose own tables SQLite makes with it)."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        found = connection.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                                   "ORDER BY rowid").fetchall()
    finally:
        connection.close()
    statements = [sql.strip() + ";" for name, sql in found
                  if not name.startswith("sqlite_") and not sql.startswith("CREATE TABLE '")]
    return "\n".join(statements) + "\n"


def ledger_sql(database: Path, new_ids: dict[str, str] | None = None) -> str:
    """The SQL keep_ledger writes, of the CLI's ledger at `database` (read-only); with no
    `new_ids`, the session ids as they are."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        (create,) = connection.execute("SELECT sql FROM sqlite_master WHERE type = 'table' "
                                       "AND name = ?", (LEDGER_TABLE,)).fetchone()
        cursor = connection.execute(f"SELECT * FROM {LEDGER_TABLE} ORDER BY id")
        columns = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    finally:
        connection.close()
    at = columns.index("session_id")
    lines = [create.strip() + ";"]
    for row in rows:
        row = list(row)
        if new_ids is not None:
            if row[at] not in new_ids:
                continue
            row[at] = new_ids[row[at]]
        values = ", ".join(_sql_value(value) for value in row)
        lines.append(f"INSERT INTO {LEDGER_TABLE} ({', '.join(columns)}) VALUES ({values});")
    return "\n".join(lines) + "\n"


def _sql_value(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def ledger_database(version: str, dest: Path) -> Path:
    """A SQLite database at dest/session-store.db made of the version's kept ledger, in
    WAL mode as the CLI keeps it."""
    path = dest / "session-store.db"
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.executescript((data_dir(version) / LEDGER).read_text())
    finally:
        connection.close()
    return path


def keep_otel(source: Path, dest: Path, new_ids: dict[str, str]) -> None:
    """Each export file of `source`, its session ids renamed and its content marked."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for export in sorted(source.glob("*.jsonl")):
        lines = [json.dumps(_marked(json.loads(line), new_ids), separators=(",", ":"))
                 for line in export.read_text().splitlines() if line.strip()]
        (dest / export.name).write_text("\n".join(lines) + "\n")


def _marked(record: dict, new_ids: dict[str, str]) -> dict:
    for holder in [record, record.get("resource") or {}, *(record.get("events") or []),
                   *(record.get("dataPoints") or [])]:
        allowed = (cli_otel.RESOURCE_ATTRIBUTES if holder is record.get("resource")
                   else cli_otel.ATTRIBUTES)
        attributes = holder.get("attributes") or {}
        for key, value in attributes.items():
            if key == "gen_ai.conversation.id":
                attributes[key] = new_ids.get(value, CONTENT_MARK)
            elif key not in allowed and isinstance(value, str):
                attributes[key] = CONTENT_MARK
    status = record.get("status")
    if isinstance(status, dict) and "message" in status:
        status["message"] = CONTENT_MARK
    return record


def recorded_otel(version: str) -> Path:
    """The kept export files of a version (one per scenario)."""
    return data_dir(version) / OTEL


def recorded(version: str) -> tuple[Path, dict[str, str]] | None:
    """The kept state dir of a version and its scenario -> session id map, if there is one."""
    folder = data_dir(version)
    if not (folder / MANIFEST).is_file():
        return None
    return folder / "sessions", json.loads((folder / MANIFEST).read_text())


def keep_schema(source: Path, dest: Path) -> None:
    """Write the fusion, usage and shutdown events of the CLI's schema to dest/SCHEMA."""
    schema = json.loads(source.read_text())
    definitions = schema["definitions"]
    events = [choice for choice in definitions["SessionEvent"]["anyOf"]
              if _KEPT_EVENTS.search(_event_type(definitions, choice))]
    kept = {"SessionEvent": {**definitions["SessionEvent"], "anyOf": events}}
    pending = [choice["$ref"] for choice in events]
    while pending:
        name = pending.pop().rsplit("/", 1)[1]
        if name not in kept:
            kept[name] = definitions[name]
            pending += _refs(definitions[name])
    trimmed = {**schema, "definitions": dict(sorted(kept.items()))}
    (dest / SCHEMA).write_text(json.dumps(trimmed, indent=1) + "\n")


def _event_type(definitions: dict, choice: dict) -> str:
    event = definitions[choice["$ref"].rsplit("/", 1)[1]]
    return event["properties"]["type"].get("const", "")


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []
