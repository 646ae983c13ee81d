"""The CLI's own totals checked against the sums of a session's calls, as the report shows
them: the `reconciliation` of its snapshot, what the report's cache keeps of each check.
"""

from __future__ import annotations

from ..records import record, replace
from ..copilot.event_records import Usage
from ..turns.reconciliation import Reconciliation


@record(slots=True)
class Check:
    """The CLI's own totals for one run of a session, next to the sums of its calls.

    `differences` lists, per model that differs, both sides' figures (under "all models"
    when the CLI gave credits only)."""

    session_id: str
    source: str  # shutdown, usage_checkpoint
    scope: str  # run, log
    agrees: bool
    differences: list[dict]


def check_figures(check: Reconciliation) -> Check:
    """A check of the CLI's totals as the report shows it: what a report's cache keeps of it,
    10,000 of them where a watch of 10,000 sessions starts. Our credits of a model with a call
    of unknown credits are unknown (None) and not compared, as the check does not."""
    differences = []
    for model in sorted(check.ours.keys() | check.theirs.keys()) if check.ours != check.theirs else ():
        ours, theirs = check.ours.get(model, Usage()), check.theirs.get(model, Usage())
        unpriced = model in check.unpriced
        if (replace(ours, nano_aiu=theirs.nano_aiu) if unpriced else ours) != theirs:
            differences.append({"model": model, "ours": _figures(ours, unpriced),
                                "cli": _figures(theirs)})
    return Check(check.session_id, check.source, check.scope, check.agrees, differences)


def _figures(usage: Usage, unpriced: bool = False) -> dict:
    """One side's figures of a model, its input uncached as everywhere in the report."""
    return {"credits": None if unpriced else usage.aiu, "calls": usage.request_count,
            "input_tokens": usage.uncached_input(), "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens}
