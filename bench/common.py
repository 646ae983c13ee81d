"""What every script and module of bench/ shares: this checkout on the import path, the
unit of every size and rate, and the progress lines.

Importing it puts the checkout and tests/ first on sys.path, so the scripts measure the
tailer of this checkout and generate data with the tests' own writers (tests/sessiongen.py
writes turns exactly as the CLI does, tests/ledgergen.py its ledger; neither has a test
dependency).
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for _folder in (REPO / "tests", REPO):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

MB = 1_000_000  # every size and rate here is in decimal megabytes


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def data_folder(path: Path) -> Path:
    """--data's folder, made if missing, as an absolute path. One that cannot be made (a
    regular file in its place or above it, no permission) ends the script here in one line
    with exit 2: found by the data's generation, it was a traceback, in benchmark.py after
    minutes of measuring for a later data set."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        problem = "is not a folder"
    except OSError as error:
        problem = f"cannot be made: {error.strerror or type(error).__name__}"
    else:
        return path.resolve()
    print(f"{Path(sys.argv[0]).name}: --data {path} {problem}", file=sys.stderr)
    sys.exit(2)


def machine() -> str:
    model = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                      if line.startswith("model name")), "")
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model or platform.processor() or 'unknown CPU'}), "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest rank: with 50 values the 99th percentile is the largest."""
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


def verdict(met: bool | None) -> str:
    return {True: "met", False: "MISSED", None: "n/a"}[met]
