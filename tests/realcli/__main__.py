"""Run the real-CLI scenarios by hand: `python3 -m tests.realcli COMMAND` from the repo root.

  record           run the pinned version and keep its scrubbed sessions and schema part
                   in tests/data/realcli/<version>/ (after a version bump)
  check VERSION    run VERSION and print what changed against the pinned version: schema
                   diff, doctor --cli, what the tailer made of each scenario; exit 1 if
                   anything differs
  matrix           `check` for every published version since fusion appeared; prints a
                   Markdown table for docs/COMPATIBILITY.md (long: run it in the background)

docs/COMPATIBILITY.md says when to use which.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import compare, driver, record
from .scenarios import SCENARIOS

FIRST_FUSION_VERSION = "1.0.83"
# Old versions may hang where the pinned one answers: the matrix gives each prompt less time.
MATRIX_PROMPT_TIMEOUT_S = 60


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.realcli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("record", help="re-record the pinned version's sessions and schema")
    check = commands.add_parser("check", help="run a version and print what changed")
    check.add_argument("version")
    matrix = commands.add_parser("matrix", help="check every version since fusion appeared")
    matrix.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.command == "record":
        return _record()
    if args.command == "check":
        result = _check(args.version)
        print(compare.render(result, driver.pinned_version()), end="")
        return 0 if result.clean else 1
    return _matrix(args.json)


def _record() -> int:
    version = driver.pinned_version()
    with tempfile.TemporaryDirectory(prefix="realcli-") as workdir:
        outcome = driver.run_scenarios(version, Path(workdir))
        result = compare.report(outcome, None)
        if not result.recordable:
            print(compare.render(result, version), end="")
            print("not recorded: the pinned version does not pass its own scenarios")
            return 1
        dest = record.data_dir(version)
        manifest = record.record(outcome, dest)
        record.keep_schema(outcome.schema, dest)
    print(f"recorded {len(manifest)} sessions and the schema of CLI {version} in {dest}")
    return 0


def _check(version: str, timeout: float = driver.PROMPT_TIMEOUT_S) -> compare.Report:
    pinned = record.data_dir(driver.pinned_version()) / record.SCHEMA
    with tempfile.TemporaryDirectory(prefix="realcli-") as workdir:
        try:
            outcome = driver.run_scenarios(version, Path(workdir), timeout=timeout)
        except (driver.Unavailable, RuntimeError) as error:
            result = compare.Report(version)
            result.problems.append(f"not installed: {error}")
            return result
        return compare.report(outcome, pinned)


def published_versions() -> list[str]:
    """Every published version since fusion appeared; a prerelease only where no release
    of the same number exists (1.0.84 was published only as 1.0.84-4)."""
    npm = shutil.which("npm") or "npm"
    listed = json.loads(subprocess.run(
        [npm, "view", driver.PACKAGE, "versions", "--json"], capture_output=True, text=True,
        check=True, timeout=120).stdout)
    releases = {v for v in listed if "-" not in v}
    wanted = [v for v in listed
              if "-" not in v or v.partition("-")[0] not in releases]
    first = _key(FIRST_FUSION_VERSION)
    return sorted((v for v in wanted if _key(v) >= first), key=_key)


def _key(version: str) -> tuple:
    main, _, pre = version.partition("-")
    return tuple(int(part) for part in main.split(".")), pre


def _matrix(json_path: Path | None) -> int:
    results = []
    for version in published_versions():
        result = _check(version, MATRIX_PROMPT_TIMEOUT_S)
        results.append(result)
        print(compare.render(result, driver.pinned_version()), file=sys.stderr, flush=True)
    print(_table(results), end="")
    if json_path is not None:
        json_path.write_text(json.dumps([{
            "version": r.version, "scenarios": r.scenarios, "problems": r.problems,
            "schema_changes": r.schema_changes, "log_drift": r.log_drift,
            "schema_drift": r.schema_drift.any if r.schema_drift else None,
        } for r in results], indent=1) + "\n")
    return 0 if all(result.clean for result in results) else 1


def _table(results: list[compare.Report]) -> str:
    """Scenarios down, versions across: `ok`, `differs`, `exit N`, or `-` (not run)."""
    head = "| scenario | " + " | ".join(r.version for r in results) + " |"
    rule = "|---|" + "---|" * len(results)
    rows = [f"| {s.name} | " + " | ".join(r.scenarios.get(s.name, "-") for r in results) + " |"
            for s in SCENARIOS]
    drift = "| doctor --cli | " + " | ".join(
        "-" if r.schema_drift is None else ("drift" if r.schema_drift.any else "ok")
        for r in results) + " |"
    changes = "| schema changes vs pinned | " + " | ".join(
        str(len(r.schema_changes)) for r in results) + " |"
    return "\n".join([head, rule, *rows, drift, changes]) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
