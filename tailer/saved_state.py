"""The checks a component runs on its own part of a checkpoint before trusting it.

Each component reads back what it saved (its `*_from_state`), and what it reads may be
damaged (a bit flip, a hand edit, another program's file at the checkpoint's path): a value
of the wrong type or range would crash every start, or worse, be exported. Each check
returns the value it was given, or raises ValueError naming the field, never its value (it
may be anything, a prompt's text included). checkpoint.load turns the error into a
CheckpointError, and the daemon moves the file aside and starts afresh.
"""

from __future__ import annotations

import math

# A metric's value: no series of ours comes near it, and every conversion of one (to int64,
# to nanoseconds) stays finite.
METRIC_BOUND = 2.0**63
# An exact value is that many units of 1/1e9 (exposition._exact).
EXACT_BOUND = 2**63 * 10**9


def parsed(data: bytes | str) -> object:
    """The JSON value of `data`; ValueError when it is none, a value nested too deep for
    the parser included (json raises RecursionError: `[[[[...` of a few thousand brackets
    would otherwise end every run that reads it)."""
    import json  # here: the status line's refresh imports this module and never json

    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("a JSON value nested too deep") from None


def mapping(value: object, what: str) -> dict:
    if type(value) is not dict:
        raise ValueError(f"{what} is not an object")
    return value


def sequence(value: object, what: str) -> list:
    if type(value) is not list:
        raise ValueError(f"{what} is not a list")
    return value


def whole(value: object, what: str, high: int = 2**63 - 1, low: int = 0) -> int:
    """A whole number from low to high; a time in Unix ms or ns by default."""
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{what} is not a whole number from {low} to {high}")
    return value


def finite(value: object, what: str, low: float = -METRIC_BOUND,
           high: float = METRIC_BOUND) -> float:
    # A JSON NaN or Infinity reads as a float, but no counter may hold one.
    if type(value) not in (int, float) or not (low <= value <= high and math.isfinite(value)):
        raise ValueError(f"{what} is not a finite number from {low} to {high}")
    return float(value)


def text(value: object, what: str, limit: int | None = 1000) -> str:
    if type(value) is not str or (limit is not None and len(value) > limit):
        raise ValueError(f"{what} is not a text of at most {limit} characters")
    return value


def flag(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise ValueError(f"{what} is not true or false")
    return value
