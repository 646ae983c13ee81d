"""Copilot CLI ledgers (`session-store.db`) for tests, in the layout the real CLI writes.

The layout is the one tests/realcli recorded from the pinned CLI: `ledger.sql` (the table
of calls, as the CLI made it, and the rows of the recorded scenarios) and
`session-store.schema.sql` (every table and index of the file). The truth a ledger should
hold of a session is read from its log's lines here, apart from the tailer: one row per
`session.usage_record`, as the CLI writes one per model call.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from realcli import driver, record

TABLE = record.LEDGER_TABLE
VERSION = driver.pinned_version()


def cli_table_sql() -> str:
    """The CREATE TABLE of the calls' table, as the pinned CLI wrote it."""
    text = (record.data_dir(VERSION) / record.LEDGER).read_text()
    return text[:text.index(";") + 1]


def store_schema_sql() -> str:
    """Every CREATE statement of the pinned CLI's session store."""
    return (record.data_dir(VERSION) / record.STORE_SCHEMA).read_text()


def rows_of_log(log: Path, session_id: str | None = None) -> list[dict]:
    """A row per usage record of `log` (its session the folder's name unless given), with
    the figures the CLI's ledger keeps of it: what the real CLI writes, from the same call."""
    session_id = session_id or log.parent.name
    rows = []
    with open(log, encoding="utf-8") as lines:
        for line in lines:
            if line.startswith(USAGE_RECORD):
                rows.append(_row(json.loads(line), session_id))
    return rows


# The type leads every line the CLI writes (tailer/copilot/event_types.py reads it there too): a
# gigabyte of logs is looked through without parsing its other lines.
USAGE_RECORD = '{"type":"session.usage_record"'


def _row(event: dict, session_id: str) -> dict:
    usage = event["data"]["usage"]
    return {
        "session_id": session_id, "model": usage["model"],
        "input_tokens": usage["inputTokens"], "output_tokens": usage["outputTokens"],
        "cache_read_tokens": usage.get("cacheReadTokens", 0),
        "cache_write_tokens": usage.get("cacheWriteTokens", 0),
        "total_nano_aiu": (usage.get("copilotUsage") or {}).get("totalNanoAiu"),
        "duration_ms": usage.get("duration"), "initiator": usage.get("initiator"),
        "finish_reason": usage.get("finishReason"), "created_at": event["timestamp"],
    }


def rows_of_state(state_dir: Path) -> list[dict]:
    """rows_of_log of every session log under `state_dir`."""
    return [row for log in sorted(state_dir.glob("*/events.jsonl")) for row in rows_of_log(log)]


def write_ledger(path: Path, rows: list[dict], *, schema: str | None = None, wal: bool = True) -> Path:
    """A ledger at `path` holding `rows` (column -> value) in the calls' table, made with
    `schema` (default: the CLI's table of calls alone), in WAL mode as the CLI keeps it."""
    connection = sqlite3.connect(path)
    try:
        if wal:
            connection.execute("PRAGMA journal_mode = WAL")
        connection.executescript(schema if schema is not None else cli_table_sql())
        insert_rows(connection, TABLE, rows)
        connection.commit()
    finally:
        connection.close()
    return path


def insert_rows(connection: sqlite3.Connection, table: str, rows: list[dict]) -> None:
    for row in rows:
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        connection.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))


def text_columns(connection: sqlite3.Connection) -> dict[str, list[str]]:
    """Every table of the database (not SQLite's own, nor the search index's inner tables)
    with its columns that may hold text (declared TEXT, or with no type)."""
    tables = [name for (name,) in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE 'search_index_%'")]
    found = {}
    for table in tables:
        columns = connection.execute(f"PRAGMA table_info({table})").fetchall()
        found[table] = [name for _, name, kind, *_ in columns
                        if not re.search(r"INT|REAL", kind.upper())]
    return found


def canary_store(path: Path, canary: str, rows: list[dict]) -> Path:
    """A session store in the CLI's whole layout with `canary` in every text column of every
    table (the prompts' `sessions.summary` and `turns`, the search index, paths, and the
    calls' own text columns: model, agent, token details, created_at) and a row of its own
    in each; and `rows` (the calls of sessions that have logs) in the calls' table, their
    session ids kept, every other text column the canary. Its numbers are whole numbers, so
    the ledger is read: what it may show is then put to the test."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.executescript(store_schema_sql())
        texts = text_columns(connection)
        for table, columns in texts.items():
            row = {}
            for _, name, kind, _, _, primary in connection.execute(f"PRAGMA table_info({table})"):
                if not (primary and "INT" in kind.upper()):
                    row[name] = canary if name in columns else 1
            insert_rows(connection, table, [row])
        insert_rows(connection, TABLE, [
            dict(row, **{name: canary for name in texts[TABLE] if name != "session_id"})
            for row in rows])
        connection.commit()
    finally:
        connection.close()
    return path
