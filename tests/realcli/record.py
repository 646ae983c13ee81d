"""Keep the sessions a suite run produced, scrubbed, as test data in the repository.

They are the ground truth for the tailer's reading of real logs, and tests that cannot
install the CLI (no registry) still check them. Each session goes through the project's
own scrubber (`python -m tailer scrub`), so only metadata is kept: no prompt, answer, tool
argument or output, path or error text. The scrubber gives each session a new id;
`scenarios.json` says which scenario each one is.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from tailer.scrub import scrub_tree

from .driver import REPO, Outcome

DATA = REPO / "tests" / "data" / "realcli"
MANIFEST = "scenarios.json"
SCHEMA = "session-events.schema.json"
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
    return manifest


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
