"""Turns as the tailer's parser and assembler rebuild them from generated log lines."""

from tailer.copilot.events import parse_line
from tailer.turns.assembly import SessionTurns, Turn


def assemble(lines: list[str], session_id: str) -> list[Turn]:
    assembler = SessionTurns(session_id)
    finished = []
    for text in lines:
        record = parse_line(text.encode())
        if record is not None:
            finished += assembler.feed(record)
    return finished
