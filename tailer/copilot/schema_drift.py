"""Compare the Copilot CLI's own event schema with what the tailer knows of the log.

Every CLI package ships `schemas/session-events.schema.json`, the JSON Schema of each
event it writes to events.jsonl. Read after an upgrade, it tells before any log shows it
whether the tailer still understands the CLI: the fusion and usage events and fields the
tailer does not know, the fields it relies on that are gone or changed type, and the new
fields that may carry text someone wrote (so the privacy allowlist is reviewed before the
field is ever kept).

What the tailer knows is not written here but read from the parser's tables: KNOWN_FIELDS
(the events the parser reads and every field they may carry), READ_AS (what the parser
reads each field it relies on as) and REQUIRED_FIELDS (tailer/copilot/event_fields.py),
KNOWN_UNUSED (event_types.py), and the scrubber's allowlist SCRUB_DATA (scrub_tables.py).
Events the schema marks as never written (`ephemeral: true`) are left out: they never reach
a log.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .event_fields import KNOWN_FIELDS, READ_AS, REQUIRED_FIELDS
from . import event_types, scrub_tables

SCHEMA_NAME = "session-events.schema.json"
MAX_SCHEMA_BYTES = 64 << 20
# Event types the check covers even when the tailer does not know them.
_SCOPE = re.compile(r"fusion|usage")
# What each way of reading a field accepts (JSON Schema types); null always reads as absent.
_ACCEPTED = {"string": {"string"}, "number": {"number", "integer"}, "object": {"object"}}
# Strings of these shapes are not free text.
_NOT_TEXT_FORMATS = {"date-time", "uuid", "duration"}
_MAX_DEPTH = 6


class SchemaError(ValueError):
    """The file is not a session-events schema this module can read."""


@dataclass(frozen=True)
class SchemaField:
    """One field of an event's data, as the schema declares it."""

    types: frozenset[str]  # JSON types; empty when the schema allows anything
    text_paths: tuple[str, ...]  # where in the field free text may be (`.` is the field)


@dataclass
class Drift:
    """What the schema holds that the tailer does not expect; names only, never values."""

    unknown_types: list[str] = field(default_factory=list)
    unknown_fields: list[tuple[str, str, str]] = field(default_factory=list)  # type, field, JSON type
    gone_types: list[str] = field(default_factory=list)
    gone_fields: list[tuple[str, str]] = field(default_factory=list)
    retyped: list[tuple[str, str, str, str]] = field(default_factory=list)  # type, field, now, read as
    free_text: list[tuple[str, str]] = field(default_factory=list)  # type, field path

    @property
    def any(self) -> bool:
        return any((self.unknown_types, self.unknown_fields, self.gone_types,
                    self.gone_fields, self.retyped, self.free_text))


def find_schemas(environ: dict[str, str]) -> list[Path]:
    """Every installed CLI version's schema in the CLI's package caches, newest first."""
    roots = []
    if environ.get("XDG_CACHE_HOME"):
        roots.append(Path(environ["XDG_CACHE_HOME"], "copilot", "pkg"))
    home = environ.get("HOME") or environ.get("USERPROFILE")
    if home:
        roots.append(Path(home, ".cache", "copilot", "pkg"))
    if environ.get("LOCALAPPDATA"):
        roots.append(Path(environ["LOCALAPPDATA"], "copilot", "pkg"))
    found = {path.resolve() for root in roots
             for path in root.glob(f"*/*/schemas/{SCHEMA_NAME}")}
    return sorted(found, key=lambda path: _version_key(version_of(path)), reverse=True)


def version_of(path: Path) -> str:
    """The CLI version a schema belongs to, from its package folder (`<version>/schemas/`)."""
    return path.parent.parent.name if path.parent.name == "schemas" else "unknown"


def _version_key(version: str) -> tuple:
    """1.0.84-4 sorts after 1.0.84 and before 1.0.85; names that are not versions sort first."""
    main, _, pre = version.partition("-")
    numbers = [int(part) for part in main.split(".") if part.isdigit()]
    return (numbers, 1 if pre else 0, int(pre) if pre.isdigit() else 0)


def event_fields(schema: dict) -> dict[str, dict[str, SchemaField]]:
    """{event type: {field path: SchemaField}} for every durable event the schema declares.

    Nested fields get dotted paths (`usage.inputTokens`) where the tailer knows the nested
    object's fields, so a new token figure is noticed like a new top-level field.
    """
    definitions = schema.get("definitions") if isinstance(schema, dict) else None
    if not isinstance(definitions, dict):
        raise SchemaError("no `definitions`: not a JSON Schema of session events")
    found = {}
    for definition in definitions.values():
        properties = _properties(definition, definitions)
        event_type = (properties.get("type") or {}).get("const")
        if not isinstance(event_type, str) or (properties.get("ephemeral") or {}).get("const"):
            continue
        data = _properties(properties.get("data") or {}, definitions)
        found[event_type] = {}
        _add_fields(found[event_type], "", data, scrub_tables.SCRUB_DATA.get(event_type, {}),
                    definitions)
    if not found:
        raise SchemaError("no event definitions (`type` const) found")
    return found


def _add_fields(found: dict[str, SchemaField], prefix: str, properties: dict[str, dict],
                kept: dict, definitions: dict) -> None:
    """Each of `properties` under `prefix`, and inside the nested objects `kept` names."""
    for name, spec in properties.items():
        found[prefix + name] = _field(spec, definitions)
        nested = _nested(kept.get(name))
        if nested is not None:
            spec = _resolve(spec, definitions)
            if spec.get("type") == "array":
                spec = spec.get("items") or {}
            _add_fields(found, f"{prefix}{name}.", _properties(spec, definitions), nested,
                        definitions)


def _nested(how: object) -> dict | None:
    """The fields kept of a nested object (or of each object of a list), else None."""
    if isinstance(how, list):
        how = how[0]
    return how if isinstance(how, dict) else None


def _nested_paths(kept: dict, prefix: str = "") -> set[str]:
    """The dotted paths of the nested fields the tailer names (in the scrubber's allowlist)."""
    paths = set()
    for name, how in kept.items():
        nested = _nested(how)
        if nested is not None:
            paths |= {f"{prefix}{name}.{sub}" for sub in nested}
            paths |= _nested_paths(nested, f"{prefix}{name}.")
    return paths


def _resolve(spec: dict, definitions: dict) -> dict:
    for _ in range(_MAX_DEPTH):
        ref = spec.get("$ref") if isinstance(spec, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#/definitions/"):
            break
        spec = definitions.get(ref.rsplit("/", 1)[1], {})
    return spec if isinstance(spec, dict) else {}


def _properties(spec: dict, definitions: dict) -> dict[str, dict]:
    properties = _resolve(spec, definitions).get("properties")
    return properties if isinstance(properties, dict) else {}


def _field(spec: dict, definitions: dict) -> SchemaField:
    return SchemaField(frozenset(_types(spec, definitions)),
                       tuple(_text_paths(spec, definitions, ".", 0)))


def _types(spec: dict, definitions: dict) -> set[str]:
    spec = _resolve(spec, definitions)
    declared = spec.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    types = set()
    for choice in (spec.get("anyOf") or []) + (spec.get("oneOf") or []):
        types |= _types(choice, definitions)
    if "const" in spec and not types:
        types.add(_CONST_TYPES.get(type(spec["const"]), "null"))
    return types


_CONST_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number",
                dict: "object", list: "array"}


def _text_paths(spec: dict, definitions: dict, path: str, depth: int) -> list[str]:
    """Where free text may be inside a value of this schema (opaque JSON counts as text)."""
    spec = _resolve(spec, definitions)
    if depth > _MAX_DEPTH or spec.get("x-opaque-json"):
        return [path]
    choices = (spec.get("anyOf") or []) + (spec.get("oneOf") or [])
    if choices:
        return sorted({p for c in choices for p in _text_paths(c, definitions, path, depth + 1)})
    types = _types(spec, definitions)
    if not types:
        return [path]  # anything at all
    paths = []
    if "string" in types and "enum" not in spec and "const" not in spec \
            and spec.get("format") not in _NOT_TEXT_FORMATS:
        paths.append(path)
    if "object" in types:
        for name, sub in _properties(spec, definitions).items():
            paths += _text_paths(sub, definitions, f"{path.rstrip('.')}.{name}", depth + 1)
        extra = spec.get("additionalProperties")
        if isinstance(extra, dict):
            paths += _text_paths(extra, definitions, f"{path.rstrip('.')}.*", depth + 1)
    if "array" in types and isinstance(spec.get("items"), dict):
        paths += _text_paths(spec["items"], definitions, f"{path.rstrip('.')}[]", depth + 1)
    return paths


def compare(fields: dict[str, dict[str, SchemaField]]) -> Drift:
    """What `fields` (from event_fields) holds that the parser's tables do not expect."""
    drift = Drift()
    known_types = (set(KNOWN_FIELDS) | set(event_types.KNOWN_UNUSED)
                   | set(scrub_tables.SCRUB_DATA) | {event_types.SHUTDOWN})
    for event_type, declared in sorted(fields.items()):
        if _SCOPE.search(event_type) and event_type not in known_types:
            drift.unknown_types.append(event_type)
            drift.free_text += _free_text(event_type, declared, set(declared))
    for event_type in sorted(KNOWN_FIELDS.keys() | READ_AS.keys()):
        declared = fields.get(event_type)
        if declared is None:
            drift.gone_types.append(event_type)
            continue
        if event_type in KNOWN_FIELDS:
            known_paths = (KNOWN_FIELDS[event_type]
                           | _nested_paths(scrub_tables.SCRUB_DATA.get(event_type, {})))
            new = sorted(set(declared) - known_paths)
            drift.unknown_fields += [
                (event_type, path, _shown_types(declared[path].types)) for path in new]
            drift.free_text += _free_text(event_type, declared, new)
        read_as = dict(READ_AS.get(event_type, {}))
        for name in REQUIRED_FIELDS.get(event_type, ()):
            read_as.setdefault(name, None)
        for name, reading in sorted(read_as.items()):
            found = declared.get(name)
            if found is None:
                drift.gone_fields.append((event_type, name))
            elif reading is not None and found.types - {"null"} - _ACCEPTED[reading]:
                drift.retyped.append((event_type, name, _shown_types(found.types), reading))
    return drift


def _free_text(event_type: str, declared: dict[str, SchemaField], names) -> list[tuple[str, str]]:
    found = []
    for name in sorted(names):
        for path in declared[name].text_paths:
            found.append((event_type, name if path == "." else name + path))
    return found


def _shown_types(types: frozenset[str]) -> str:
    return "|".join(sorted(types)) or "any"


def load(path: Path) -> dict[str, dict[str, SchemaField]]:
    """Read a schema file. Raises OSError, or SchemaError for a file that is not one."""
    from .lines import open_regular

    # A FIFO would wait for a writer for good, /dev/zero fill the memory: a regular file
    # only, and no larger than a schema (the CLI's is some 120 KB) is read.
    with open_regular(path) as handle:
        data = handle.read(MAX_SCHEMA_BYTES + 1)
    if len(data) > MAX_SCHEMA_BYTES:
        raise SchemaError(f"larger than {MAX_SCHEMA_BYTES >> 20} MiB: no schema")
    try:
        schema = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise SchemaError(f"not JSON ({type(error).__name__})") from None
    return event_fields(schema)


def schema_at(path: Path) -> Path:
    """A schema file given directly, or the one inside a CLI package folder given."""
    if path.is_dir():
        found = sorted(path.glob(f"**/{SCHEMA_NAME}"),
                       key=lambda p: _version_key(version_of(p)), reverse=True)
        if not found:
            raise FileNotFoundError(f"no {SCHEMA_NAME} under {path}")
        return found[0]
    return path
