"""The demo: the bundled fixture sessions at recent times, and a turn replayed now and then.

Someone without Copilot CLI runs the stack with demo.env and opens the dashboard. For them
to see anything, the fixture turns must fall in the dashboard's default time range, and
for the page to look alive, new turns must keep arriving. So, unlike the real tailer, which
never restamps a turn, the demo does:

- `prepare` copies the fixture sessions into a work folder, each session moved as a whole
  (its internal timing, and so every turn's, is kept) so the set's last event lies
  `END_BEFORE_NOW` before start-up and the sessions keep their spread over the days
  before. Sessions that end more than `SPREAD` apart have the gaps between their ends
  shrunk in proportion until they fit.
- `Replayer` replays one fixture turn at a time into a demo session of its own, beginning
  at the current time and written as the CLI writes it: each event when the clock reaches
  its time, so the turn is in flight a leg at a time and "now" (`report --watch`, the
  dashboard's "Running now") shows it. The daemon's loop calls `tick()` (each second,
  say); a turn begins every `interval_s` seconds, or later when the last one has not
  ended `PAUSE_S` before, so replayed turns never overlap.

Both give every copy fresh ids (but `report --demo`, which keeps the sessions' own: see
`prepare`), through the scrubber's rewriting (tailer/commands/scrub.py): trace
ids derive from session and fusion ids, so a copy that kept the fixtures' ids would merge
with an earlier start's traces in Tempo. The tailer then reads the work folder as it would
a user's state directory.
"""

from __future__ import annotations

import itertools
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from ..copilot import event_types, event_values
from ..copilot.scrub_tables import Kept
from ..copilot.files import LOG_NAME, find_logs
from .scrub import IdMap, dumps, read_events, scrub_event, seeded_uuid
from ..copilot.problems import folder_problem
from ..turns.session_log import SessionLog

END_BEFORE_NOW = timedelta(minutes=3)
SPREAD = timedelta(days=2)
# The least time between two replayed turns, as a user reads an answer and types the next
# prompt; it also covers the routing that happens before a turn's first event.
PAUSE_S = 5.0
_NS_PER_MS = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _fixtures() -> Path:
    """The example sessions the demos replay by default: the clone's top-level fixtures/
    (tests/make_fixtures.py writes them there), which pyproject.toml packages as
    tailer/fixtures, so an installed wheel or pipx install has them too."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "fixtures"
    return installed if installed.is_dir() else package.parent / "fixtures"


FIXTURES = _fixtures()

# The seed of `report --demo`'s ids, so a run's ids are the next run's.
REPORT_SEED = "report --demo"

# A turn runs from its routing decision to the next one; these end it earlier, since they
# belong to the session rather than to the turn before them.
_SESSION_EVENTS = (event_types.SESSION_START, event_types.SESSION_RESUME, event_types.SHUTDOWN)
_TURN_STARTS = (event_types.RESOLVED, event_types.ROUTE_FAILED)
_MODEL_CHANGE = "session.model_change"


def prepare(fixtures: Path, work: Path, now: datetime, *,
            keep_session_ids: bool = False) -> list[Path]:
    """Copy every session under `fixtures` into `work`, moved to end shortly before `now`.

    `now` is timezone-aware. `work` must be new or empty: the demo never writes among
    other files. Ids are fresh, drawn from a generator seeded with `now`; with
    `keep_session_ids` (`report --demo`, which sends nothing to Tempo) the sessions keep
    the fixtures' ids and every other id is the same on every run, so the README's
    `--session c523b6e0` finds its session. Returns the logs written.
    """
    if work.exists() and any(work.iterdir()):
        raise ValueError(f"{work} is not empty")
    sessions = {
        session_id: _events(session_id, path)
        for session_id, path in sorted(_logs(fixtures).items())
    }
    sessions = {session_id: lines for session_id, lines in sessions.items() if lines}
    if not sessions:
        raise ValueError(f"no session logs in {fixtures}")
    ends = {session_id: _time_ns(lines[-1]) for session_id, lines in sessions.items()}
    set_end = max(ends.values())
    span = set_end - min(ends.values())
    scale = min(1.0, _duration_ns(SPREAD) / span) if span else 1.0
    target_end = _ms_floor(_duration_ns(now - END_BEFORE_NOW - _EPOCH))
    rng = random.Random(REPORT_SEED if keep_session_ids else now.isoformat())
    written = []
    for session_id, lines in sessions.items():
        new_end = target_end - _ms_floor(round((set_end - ends[session_id]) * scale))
        offset = new_end - ends[session_id]
        ids = IdMap(rng)
        if keep_session_ids:
            ids.pin(Kept.SESSION_ID, session_id, session_id)
        folder = work / ids.replace(Kept.SESSION_ID, session_id)
        folder.mkdir(parents=True)
        path = folder / LOG_NAME
        text = "".join(dumps(scrub_event(line, ids, _shift(offset))) + "\n" for line in lines)
        path.write_bytes(text.encode())
        written.append(path)
    return written


class Replayer:
    """Writes the fixture turns, each event at its time, into a demo session under `work`.

    Turns are taken in the fixtures' time order and start over after the last. When one is
    due it is moved to begin at the clock's current time and gets fresh ids; the first one
    is preceded by a `session.start`. Its events keep their spacing and the CLI's order (the
    routing decision and the prompt, a usage record as each model call ends, each leg when
    it ends, the commit and its replayed messages, the rollup), and each is written at the
    first tick at or after its time. `clock` gives unix seconds; `rng` draws the ids.
    """

    def __init__(
        self,
        work: Path,
        fixtures: Path,
        interval_s: float = 30.0,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ):
        self.interval_s = interval_s
        self.clock = clock
        self.rng = rng or random.Random()
        self._start, self._source_session_id, self._turns = _fixture_turns(fixtures)
        if not self._turns:
            raise ValueError(f"no fusion turns in {fixtures}")
        self.session_id = seeded_uuid(self.rng)
        self.log_path = work / self.session_id / LOG_NAME
        self._next = 0
        self._due = clock()
        self._last_event_id: str | None = None
        self._unwritten: list[tuple[int, str]] = []  # the turn's lines to come, with their times

    def tick(self) -> bool:
        """Write the lines whose time has come, beginning the next turn when it is due; True
        when a line was written."""
        now = self.clock()
        now_ns = round(now * 1000) * _NS_PER_MS
        if not self._unwritten and now >= self._due:
            self._begin(now_ns)
        due = list(itertools.takewhile(lambda line: line[0] <= now_ns, self._unwritten))
        if not due:
            return False
        del self._unwritten[:len(due)]
        with open(self.log_path, "ab") as out:
            out.write("".join(text for _, text in due).encode())
        return True

    def _begin(self, start_ns: int) -> None:
        """Take the next turn, moved to begin at `start_ns`, and when the one after is due."""
        lines = self._turns[self._next]
        self._next = (self._next + 1) % len(self._turns)
        offset_ns = start_ns - _time_ns(lines[0])
        if self._last_event_id is None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # The first turn is the first session's, so the start keeps its place before it.
            if self._start is not None:
                lines = [self._start, *lines]
        self._unwritten = [(_time_ns(event), dumps(event) + "\n")
                           for event in self._rewrite(lines, offset_ns)]
        end_ns = self._unwritten[-1][0]
        self._due = max(start_ns / 1e9 + self.interval_s, end_ns / 1e9 + PAUSE_S)

    def _rewrite(self, lines: list[dict], offset_ns: int) -> list[dict]:
        """`lines` with fresh ids, chained after the log's last event, moved by `offset_ns`."""
        ids = IdMap(self.rng)
        ids.pin(Kept.SESSION_ID, self._source_session_id, self.session_id)
        first_parent = lines[0].get("parentId")
        if isinstance(first_parent, str) and self._last_event_id is not None:
            ids.pin(Kept.EVENT_ID, first_parent, self._last_event_id)
        rewritten = [scrub_event(line, ids, _shift(offset_ns)) for line in lines]
        if self._last_event_id is None:
            rewritten[0]["parentId"] = None
        self._last_event_id = rewritten[-1]["id"]
        return rewritten


def _fixture_turns(fixtures: Path) -> tuple[dict | None, str, list[list[dict]]]:
    """The first session's start event, its session id, and every turn in time order.

    A turn is the run of events from a routing decision (or route failure), or from an
    ordinary prompt, up to the next turn or session event (see _starts_a_turn).
    """
    sessions = []
    for session_id, path in _logs(fixtures).items():
        lines = _events(session_id, path)
        if lines:
            sessions.append((_time_ns(lines[0]), session_id, lines))
    if not sessions:
        return None, "", []
    sessions.sort()
    _, first_id, first_lines = sessions[0]
    start = first_lines[0] if first_lines[0]["type"] == event_types.SESSION_START else None
    turns = []
    for _, _, lines in sessions:
        turn = None
        for line in lines:
            if line["type"] in _SESSION_EVENTS:
                turn = None
            elif line["type"] == _MODEL_CHANGE:
                continue  # a switch between turns belongs to none; its time would pace one
            elif _starts_a_turn(line["type"], turn):
                turn = [line]
                turns.append(turn)
            elif turn is not None:
                turn.append(line)
    return start, first_id, turns


def _logs(fixtures: Path) -> dict[str, Path]:
    """The fixture sessions' logs; a folder that cannot be read is named and left out."""
    logs, unreadable = find_logs(fixtures)
    for session_id, error in sorted(unreadable.items()):
        _warn(folder_problem(session_id, error))
    return logs


def _events(session_id: str, path: Path) -> list[dict]:
    """A fixture log's events, read as every command reads a log (tailer/turns/session_log.py)."""
    session = SessionLog(session_id, path, every_line=True)
    found = [event for event in read_events(session) if event is not None]
    if session.problem is not None:
        _warn(session.problem)
    return found


def _warn(problem: str) -> None:
    # Imported here: a fixture that cannot be read is rare, and logging costs every
    # `report --demo` some 3 ms of start-up.
    import logging

    logging.getLogger("tailer").warning("%s", problem)


def _starts_a_turn(event_type: str, turn: list[dict] | None) -> bool:
    """Whether an event begins the next turn to replay, given the turn read so far.

    A routing decision begins a fusion turn; a prompt that follows no routing decision
    begins an ordinary one. A fusion turn's own prompt, written after its routing decision,
    stays with it.
    """
    if event_type in _TURN_STARTS:
        return True
    if event_type != event_types.USER_MESSAGE:
        return False
    return turn is None or not (len(turn) == 1 and turn[0]["type"] in _TURN_STARTS)


def _shift(offset_ns: int) -> Callable[[str], str]:
    def shifted(timestamp: str) -> str:
        moment = event_values.parse_timestamp(timestamp)
        return timestamp if moment is None else event_values.format_timestamp(moment + offset_ns)
    return shifted


def _time_ns(event: dict) -> int:
    return event_values.parse_timestamp(event["timestamp"])


def _duration_ns(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _ms_floor(time_ns: int) -> int:
    """Whole milliseconds, so moved timestamps keep the CLI's precision exactly."""
    return time_ns - time_ns % _NS_PER_MS
