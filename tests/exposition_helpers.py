"""Read a Prometheus text exposition back, for assertions."""

import re

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str, name: str) -> dict[tuple, float]:
    """{sorted label pairs: value} for the samples of one metric name."""
    found = {}
    for line in text.splitlines():
        match = _SAMPLE.fullmatch(line)
        if match and match.group(1) == name:
            labels = tuple(sorted(_LABEL.findall(match.group(2) or "")))
            found[labels] = float(match.group(3))
    return found


def saved_series(registry) -> dict:
    """The series as a checkpoint saves them (Registry.save_and_publish hands them over)."""
    saved = []
    registry.save_and_publish(saved.append)
    return saved[0]
