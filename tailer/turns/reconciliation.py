"""The CLI's own totals of a session checked against our sums of its calls.

The CLI writes what a run spent (`session.shutdown`, `session.usage_checkpoint`); a session
keeps its ledgers of the calls it read (assembly.SessionContext: since the run began, since
the log began), and a check compares the two, per model (tailer/turns/assembly.py feeds it).
"""

from __future__ import annotations

from ..records import record, replace
from ..copilot.event_records import SessionEnded, SessionTotals, Usage

ALL_MODELS = "all models"


@record(frozen=True)
class Reconciliation:
    """Our sums next to the CLI's own totals for one run of a session.

    `source` is `shutdown` or `usage_checkpoint`; `scope` says which ledger was compared:
    `run` (since the CLI run began) or, when that one disagrees but the whole log's agrees,
    `log` (a resumed run whose totals carry the earlier runs). `ours` and `theirs` are per
    model, or under ALL_MODELS when the CLI gives credits only. `unpriced` names the models
    whose credits in `ours` are unknown (see SessionContext): only their other figures
    are compared.
    """

    session_id: str
    source: str
    time_ns: int
    scope: str
    ours: dict[str, Usage]
    theirs: dict[str, Usage]
    unpriced: frozenset[str] = frozenset()

    @property
    def agrees(self) -> bool:
        return self._disagreeing() == []

    def describe(self) -> str:
        """One line naming the session and, per model that differs, both figures."""
        if self.agrees:
            return f"session {self.session_id}: our sums match the CLI's {self.source} totals"
        parts = [
            f"{model}: ours {_figures(self.ours.get(model, Usage()), model in self.unpriced)}, "
            f"CLI {_figures(self.theirs.get(model, Usage()))}"
            for model in self._disagreeing()
        ]
        return (f"session {self.session_id}: our sums differ from the CLI's {self.source} "
                f"totals: " + "; ".join(parts))

    def _disagreeing(self) -> list[str]:
        found = []
        for model in self.ours.keys() | self.theirs.keys():
            ours, theirs = self.ours.get(model, Usage()), self.theirs.get(model, Usage())
            if model in self.unpriced:
                ours = replace(ours, nano_aiu=theirs.nano_aiu)
            if ours != theirs:
                found.append(model)
        return sorted(found)


def _figures(usage: Usage, unpriced: bool = False) -> str:
    """`aiu>=` when some of the credits are unknown: ours are then at least that."""
    aiu = f"aiu>={usage.aiu:.9g}" if unpriced else f"aiu={usage.aiu:.9g}"
    return (f"{aiu} calls={usage.request_count} input={usage.input_tokens} "
            f"output={usage.output_tokens} cache_read={usage.cache_read_tokens} "
            f"cache_write={usage.cache_write_tokens}")


def reconcile(session_id: str, totals: SessionTotals, ledgers: tuple) -> Reconciliation | None:
    """The CLI's `totals` checked against the run's ledger, else the whole log's (when the
    run's disagrees and the log's agrees); None when there is no ledger to check them with.
    `ledgers`: (scope, the ledger or None while unknown, its unpriced models) for `run`,
    then `log` (assembly.SessionContext's).

    Credits alone (a usage checkpoint) are not checked against a ledger holding calls
    of unknown credits: there would be nothing left to compare."""
    if totals.models is not None:
        theirs, view = totals.models, dict
    elif totals.nano_aiu is not None:
        theirs, view = {ALL_MODELS: Usage(nano_aiu=totals.nano_aiu)}, _credits_only
    else:
        return None
    source = "shutdown" if isinstance(totals, SessionEnded) else "usage_checkpoint"
    checks = [
        Reconciliation(session_id, source, totals.time_ns, scope, view(ledger), theirs,
                       frozenset(unpriced))
        for scope, ledger, unpriced in ledgers
        if ledger is not None and not (unpriced and view is _credits_only)
    ]
    return next((c for c in checks if c.agrees), checks[0]) if checks else None


def _credits_only(ledger: dict[str, Usage]) -> dict[str, Usage]:
    return {ALL_MODELS: Usage(nano_aiu=sum(usage.nano_aiu for usage in ledger.values()))}
