"""What the status line shows, as plain data: the snapshot a line is drawn from.

Made from the turns where the log is read (tailer/statusline/summary.py), kept in the
session's saved state (tailer/statusline/saved.py), and drawn again from there while the
log is unchanged, without importing the reading stages. So it is plain tuples and lists
that JSON gives back as they were, and `snapshot_from_data` checks every value of one read
back, as tailer/saved_state.py's checks do: a text must be printable as it is (every text
was passed through printable when it was made, so one that is not was never ours), a
number must be in its range. A value that is not shaped as saved raises ValueError.
"""

from __future__ import annotations

# The states of a leg of a turn in flight, as tailer/turns/in_flight.py names them.
LEG_STATES = ("done", "running", "pending", "skipped")
KINDS = ("fusion", "fallback", "ordinary")
MAX_TEXT = 200
MAX_LEGS = 64
MAX_NANO = 2**63 - 1


class LegView:
    """One leg: its state, kind, model, verdict, credits (nano) and whether it failed."""

    __slots__ = ("state", "kind", "model", "verdict", "nano_aiu", "failed")

    def __init__(self, state: str, kind: str, model: str | None, verdict: str | None,
                 nano_aiu: int, failed: bool = False):
        self.state, self.kind, self.model, self.verdict = state, kind, model, verdict
        self.nano_aiu, self.failed = nano_aiu, failed

    def to_data(self) -> list:
        return [self.state, self.kind, self.model, self.verdict, self.nano_aiu, self.failed]

    @classmethod
    def from_data(cls, data: object) -> LegView:
        state, kind, model, verdict, nano_aiu, failed = _items(data, 6, "a leg")
        if state not in LEG_STATES:
            raise ValueError("a leg's state is not one of " + ", ".join(LEG_STATES))
        return cls(state, _text(kind), _text(model, True), _text(verdict, True),
                   _whole(nano_aiu), _flag(failed))


class TurnView:
    """A turn: `kind` fusion, fallback or ordinary; `pattern` as the report names it;
    `outcome`; when it started (unix ns); its credits (nano: its legs', or its calls' for
    an ordinary turn or one in flight) and whether they are all known; the model that
    answered an ordinary turn (or the one running); its legs; `answer`: the index of the
    leg whose answer the user got, -1 for none."""

    __slots__ = ("kind", "pattern", "outcome", "start_ns", "nano_aiu", "credits_known",
                 "model", "answer", "legs")

    def __init__(self, kind: str, pattern: str, outcome: str, start_ns: int, nano_aiu: int,
                 credits_known: bool, model: str | None, answer: int, legs: list[LegView]):
        self.kind, self.pattern, self.outcome, self.start_ns = kind, pattern, outcome, start_ns
        self.nano_aiu, self.credits_known, self.model = nano_aiu, credits_known, model
        self.answer, self.legs = answer, legs

    def to_data(self) -> list:
        return [self.kind, self.pattern, self.outcome, self.start_ns, self.nano_aiu,
                self.credits_known, self.model, self.answer, [leg.to_data() for leg in self.legs]]

    @classmethod
    def from_data(cls, data: object) -> TurnView:
        kind, pattern, outcome, start_ns, nano, known, model, answer, legs = _items(data, 9, "a turn")
        if kind not in KINDS:
            raise ValueError("a turn's kind is not one of " + ", ".join(KINDS))
        legs = [LegView.from_data(leg) for leg in _items(legs, None, "a turn's legs")]
        if len(legs) > MAX_LEGS or type(answer) is not int or not -1 <= answer < len(legs):
            raise ValueError("a turn's legs or the leg that answered are out of range")
        return cls(kind, _text(pattern), _text(outcome), _whole(start_ns), _whole(nano),
                   _flag(known), _text(model, True), answer, legs)


class Snapshot:
    """Everything the line shows of a session: the turn in flight (None: none), the last
    turn that answered, the session's credits so far (nano), and those of its HydraFusion
    legs with the part spent on legs whose answer was not kept (the review share's two
    terms); `reading`: the per cent of the log read while catching up on it, None once
    caught up. `idle`: what it shows instead once the log has been quiet until `idle_at_ns`
    with a turn still open (every command then finishes such a turn as it stands)."""

    __slots__ = ("flying", "last", "session_nano", "leg_nano", "review_nano", "reading",
                 "idle_at_ns", "idle")

    def __init__(self, flying: TurnView | None = None, last: TurnView | None = None,
                 session_nano: int = 0, leg_nano: int = 0, review_nano: int = 0,
                 reading: int | None = None, idle_at_ns: int = 0, idle: Snapshot | None = None):
        self.flying, self.last = flying, last
        self.session_nano, self.leg_nano, self.review_nano = session_nano, leg_nano, review_nano
        self.reading, self.idle_at_ns, self.idle = reading, idle_at_ns, idle

    def at(self, now_ns: int) -> Snapshot:
        """As it stands at `now_ns`."""
        return self.idle if self.idle is not None and now_ns >= self.idle_at_ns else self

    def to_data(self) -> list:
        return [_turn_data(self.flying), _turn_data(self.last), self.session_nano,
                self.leg_nano, self.review_nano, self.reading, self.idle_at_ns,
                None if self.idle is None else self.idle.to_data()]


def snapshot_from_data(data: object, nested: bool = False) -> Snapshot:
    flying, last, session_nano, leg_nano, review_nano, reading, idle_at_ns, idle = _items(
        data, 8, "a snapshot")
    if reading is not None and (type(reading) is not int or not 0 <= reading <= 100):
        raise ValueError("the part of the log read is not a per cent")
    if _whole(review_nano) > _whole(leg_nano):
        raise ValueError("the review credits are more than the legs' credits")
    if idle is not None and nested:
        raise ValueError("an idle snapshot holds another")
    return Snapshot(_turn(flying), _turn(last), _whole(session_nano), leg_nano, review_nano,
                    reading, _whole(idle_at_ns),
                    None if idle is None else snapshot_from_data(idle, nested=True))


def _turn_data(turn: TurnView | None) -> list | None:
    return None if turn is None else turn.to_data()


def _turn(data: object) -> TurnView | None:
    return None if data is None else TurnView.from_data(data)


def _items(data: object, count: int | None, what: str) -> list:
    if type(data) is not list or (count is not None and len(data) != count):
        raise ValueError(f"{what} is not a list" + (f" of {count}" if count else ""))
    return data


def _text(value: object, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if type(value) is not str or not value or len(value) > MAX_TEXT or not value.isprintable():
        raise ValueError(f"a text is not a printable text of 1 to {MAX_TEXT} characters")
    return value


def _whole(value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_NANO:
        raise ValueError(f"a number is not a whole number from 0 to {MAX_NANO}")
    return value


def _flag(value: object) -> bool:
    if type(value) is not bool:
        raise ValueError("a flag is not true or false")
    return value
