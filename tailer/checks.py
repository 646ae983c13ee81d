"""The checks a saved state is read back with: each returns the value, or raises ValueError
naming the field (`what`), never its value, which may be anything a damaged file holds."""

from __future__ import annotations

import math

# No saved number of ours comes near it, and every conversion of one (to int64, to
# nanoseconds) stays finite.
NUMBER_BOUND = 2.0**63


def dict_of(value: object, what: str) -> dict:
    if type(value) is not dict:
        raise ValueError(f"{what} is not an object")
    return value


def list_of(value: object, what: str) -> list:
    if type(value) is not list:
        raise ValueError(f"{what} is not a list")
    return value


def whole(value: object, what: str, high: int = 2**63 - 1, low: int = 0) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{what} is not a whole number from {low} to {high}")
    return value


def number(value: object, what: str, low: float = -NUMBER_BOUND,
           high: float = NUMBER_BOUND) -> float:
    # A JSON NaN or Infinity reads as a float, but no saved figure may hold one.
    if type(value) not in (int, float) or not (low <= value <= high and math.isfinite(value)):
        raise ValueError(f"{what} is not a finite number from {low} to {high}")
    return float(value)


def text(value: object, what: str, limit: int | None = 1000) -> str:
    if type(value) is not str or (limit is not None and len(value) > limit):
        raise ValueError(f"{what} is not a text of at most {limit} characters")
    return value
