"""Counts in words a person reads: `1 session`, `2 sessions`.

Every command says how many of something it found; one rule keeps "1 sessions" out of all
of them.
"""


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`number`, with thousands separators (`3,119 turns`), and the noun in its singular or
    plural (`noun` + s unless `plural` says)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"
