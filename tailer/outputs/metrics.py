"""The project's Prometheus metrics: what each finished turn adds, and the tailer's health.

The families and their labels are a contract (docs/METRICS.md) that the dashboard and the
recording rules depend on. Labels are bounded: no session or fusion id ever becomes a
label, and the registry caps the number of distinct values per label (models overflow into
`other`), so a damaged or hostile log cannot explode the series count.

Per-leg figures come from the legs and the turn count from the turn: credits and tokens are
counted once, from the legs, never again from the rollup.

A model call whose credits the log does not give (turns.assembly.Turn.leg_credits) adds no
credits to any family, and a leg or prompt that knows none adds no sample at all, not even
0 as a price: such calls are counted in `hydrafusion_unknown_credit_calls_total` instead,
so a panel of credits can say how many calls it leaves out.

The `hydrafusion_prompt_*` families put every prompt on one footing, fusion or not (label
`kind`: `fusion`, `ordinary`, or `fallback` for a route failure answered without fusion), so
credits, tokens, calls and latency per prompt compare across them. A fusion prompt's
figures there are its turn's (the rollup's), an ordinary prompt's the sum of its calls.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from .. import __version__
from . import copilot_otel
from ..copilot.event_records import Event, NOT_CODE_FIELDS, REJECTING_VERDICTS, UnknownFusionEvent
from .exposition import Registry
from ..turns.assembly import Turn
from ..turns.reconciliation import Reconciliation

# The GenAI conventions' duration buckets (0.01 s doubling to 81.92 s), extended for
# agentic turns that run for many minutes.
DURATION_BUCKETS = tuple(0.01 * 2**i for i in range(18))
ROUTING_BUCKETS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 2.0, 5.0)
MAX_MODELS = 50
# Routing policies the router was retuned to; past this many, new ones count under `other`
# (docs/METRICS.md says why this bound).
MAX_POLICY_VERSIONS = 32
# The registry's caps on label vocabularies (DEFAULT_LABEL_VALUE_LIMIT for the others);
# `field` holds every field a refusal is counted under, each with a series of its own.
LABEL_VALUE_LIMITS = {"model": MAX_MODELS, "policy_version": MAX_POLICY_VERSIONS,
                      "field": len(NOT_CODE_FIELDS)}


# An event time further ahead of the clock than this is a wrong clock or a damaged line:
# shown as the newest event, it would pin the gauge (and, restored, keep it pinned) for ever.
FUTURE_SLACK_NS = 86_400 * 10**9


def _believable(time_ns: int) -> bool:
    return time_ns <= time.time_ns() + FUTURE_SLACK_NS


# The `pattern` of an ordinary prompt where a family counts those too: the report's name.
ORDINARY_PATTERN = "ordinary"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _known_credits(family, labels: tuple, nano_aiu: int, unknown: int) -> list[tuple]:
    """The change that adds known credits: none when `unknown` calls leave nothing known, so
    no series says 0 where the credits are unknown."""
    return [] if unknown and not nano_aiu else [(family, labels, nano_aiu / 1e9)]


def python_version() -> str:
    """platform.python_version() without importing platform (start-up, as uuid in
    tailer/uuids.py): the version that opens sys.version, as it reads it."""
    return sys.version.split(None, 1)[0]


class TurnFamilies:
    """The families of fusion turns and their legs (`hydrafusion_*`), and what one finished
    turn adds to them: the families history covers (`turn_families`), with the prompts'.

    A part of Metrics, which declares every family on its one registry in the order
    docs/METRICS.md lists them.
    """

    def _declare_turn_families(self, counter, histogram) -> None:
        self.turns = counter(
            "hydrafusion_turns_total", "Fusion turns finished, by outcome.",
            ("pattern", "outcome", "compound"),
        )
        self.legs = counter(
            "hydrafusion_legs_total", "Legs (phases) the router ran.",
            ("pattern", "phase_kind", "role", "model", "status", "verdict", "committed"),
        )
        self.aiu = counter(
            "hydrafusion_aiu_total",
            "Credits (AIU) spent, per leg; compound: the leg's turn used more than one model.",
            ("pattern", "phase_kind", "model", "committed", "compound"),
        )
        self.judged_turns = counter(
            "hydrafusion_judged_turns_total",
            "Fusion turns a judge gave a verdict in; rejected: a verdict sent the draft back.",
            ("pattern", "rejected"),
        )
        self.gate_turns = counter(
            "hydrafusion_gate_turns_total",
            "Cascade turns by what the gate did: accepted (the draft kept), rejected (sent "
            "to the repair), unjudged (no verdict).",
            ("gate",),
        )
        self.gate_aiu = counter(
            "hydrafusion_gate_aiu_total",
            "Credits (AIU) of cascade turns by what the gate did; committed: the leg's "
            "answer was kept.",
            ("gate", "committed"),
        )
        self.tokens = counter(
            "hydrafusion_tokens_total",
            "Tokens per leg; input includes the cache-read tokens.",
            ("phase_kind", "model", "type"),
        )
        self.requests = counter(
            "hydrafusion_requests_total", "Inference calls made by legs.",
            ("phase_kind", "model"),
        )
        self.route_failures = counter(
            "hydrafusion_route_failures_total", "Prompts the router could not route.",
            ("reason",),
        )
        self.turn_duration = histogram(
            "hydrafusion_turn_duration_seconds", "Turn duration, routing included.",
            ("pattern",), DURATION_BUCKETS,
        )
        self.leg_duration = histogram(
            "hydrafusion_leg_duration_seconds", "Leg duration.",
            ("phase_kind", "model"), DURATION_BUCKETS,
        )
        self.routing_latency = histogram(
            "hydrafusion_routing_latency_seconds", "Time the router took to decide.",
            ("route_source",), ROUTING_BUCKETS,
        )
        self.router_turns = counter(
            "hydrafusion_router_turns_total",
            "Fusion turns routed, by the routing policy version that decided them.",
            ("policy_version", "pattern"),
        )
        self.router_aiu = counter(
            "hydrafusion_router_aiu_total",
            "Credits (AIU) spent on fusion turns, by the routing policy version.",
            ("policy_version", "pattern"),
        )

    def _declare_checks(self, counter) -> None:
        """Our sums checked: each leg against its calls, each run against the CLI's totals."""
        self.leg_call_mismatches = counter(
            "hydrafusion_leg_call_mismatches_total",
            "Legs whose model calls do not add up to the leg's own figures.",
            ("phase_kind",),
        )
        self.reconciliations = counter(
            "hydrafusion_reconciliations_total",
            "Checks of the CLI's own session totals against the tailer's sums.",
            ("source", "result"),
        )

    def count_turn(self, turn: Turn) -> None:
        self.registry.record(self.turn_changes(turn))

    def count_turn_as_history(self, turn: Turn) -> list:
        """count_turn for a turn that goes to history: returns what each sample gained."""
        return self.registry.record_history(self.turn_changes(turn))

    def turn_changes(self, turn: Turn) -> list[tuple]:
        """What one finished turn adds, as Registry.record takes it: (family, label values,
        amount to add or value to observe).

        The label values are tuples in the order the family declares its labels in
        __init__: the registry finds known series by them without building a dict per change.
        """
        duration_s = (turn.end_ns - turn.start_ns) / 1e9
        if turn.ordinary:
            return self._prompt_changes(turn, duration_s, turn.unknown_credit_calls)
        # Each leg's credits found once: the turn's, the router's and the prompt's sums are
        # of the same (known nano-AIU, unknown calls) pairs.
        credits = [turn.leg_credits(leg) for leg in turn.legs]
        known_nano_aiu = sum(known for known, _ in credits)
        unknown_calls = sum(unknown for _, unknown in credits)
        changes = self._prompt_changes(turn, duration_s, unknown_calls)
        pattern, compound = turn.pattern, _flag(turn.compound)
        changes += [
            (self.turns, (pattern, turn.outcome, compound), 1),
            (self.turn_duration, (pattern,), duration_s),
        ]
        verdicts = [leg.verdict for leg in turn.legs if leg.verdict]
        if verdicts:
            # Per turn, not per verdict: "how often was the draft sent back" is a share of
            # turns, and a turn judged twice must not weigh double.
            rejected = _flag(any(verdict in REJECTING_VERDICTS for verdict in verdicts))
            changes.append((self.judged_turns, (pattern, rejected), 1))
        gate = turn.gate_outcome
        if gate is not None:
            changes.append((self.gate_turns, (gate,), 1))
        if turn.route_failure is not None:
            changes.append((self.route_failures, (turn.route_failure.reason or "unknown",), 1))
        else:  # routed: by the policy its resolved record names
            version = turn.resolved.policy_version if turn.resolved is not None else None
            changes.append((self.router_turns, (version, pattern), 1))
            changes += _known_credits(self.router_aiu, (version, pattern), known_nano_aiu,
                                      unknown_calls)
            if turn.routing_latency_ms is not None and turn.resolved is not None:
                changes.append((
                    self.routing_latency,
                    (turn.resolved.route_source or "unknown",),
                    turn.routing_latency_ms / 1000,
                ))
        for leg, (leg_nano_aiu, unknown) in zip(turn.legs, credits):
            kind = leg.phase_kind or "unknown"
            model = leg.model or "unknown"
            committed = _flag(turn.is_committed(leg))
            usage = leg.usage
            if unknown:
                changes.append((self.unknown_credit_calls, (turn.kind, pattern, model), unknown))
            changes += _known_credits(self.aiu, (pattern, kind, model, committed, compound),
                                      leg_nano_aiu, unknown)
            if gate is not None:
                changes += _known_credits(self.gate_aiu, (gate, committed), leg_nano_aiu, unknown)
            changes += [
                (self.legs, (pattern, kind, leg.role or "unknown", model,
                             leg.status or "unknown", leg.verdict or "none", committed), 1),
                (self.tokens, (kind, model, "input"), usage.input_tokens),
                (self.tokens, (kind, model, "output"), usage.output_tokens),
                (self.tokens, (kind, model, "cache_read"), usage.cache_read_tokens),
                (self.tokens, (kind, model, "cache_write"), usage.cache_write_tokens),
                (self.requests, (kind, model), usage.request_count),
                (self.leg_duration, (kind, model), leg.duration_ms / 1000),
            ]
            if turn.calls_difference(leg) is not None:
                changes.append((self.leg_call_mismatches, (kind,), 1))
        return changes

    def count_reconciliation(self, check: Reconciliation) -> None:
        result = "agree" if check.agrees else "disagree"
        self.reconciliations.inc({"source": check.source, "result": result})

    @property
    def turn_families(self) -> set[str]:
        """The names of the families count_turn feeds: the ones history covers."""
        families = (self.turns, self.judged_turns, self.gate_turns, self.gate_aiu, self.legs,
                    self.aiu, self.tokens, self.requests, self.route_failures,
                    self.turn_duration, self.leg_duration, self.routing_latency, self.prompts, self.prompt_aiu, self.prompt_tokens,
                    self.prompt_calls, self.prompt_duration, self.model_calls,
                    self.unknown_credit_calls, self.call_duration, self.time_to_first_token,
                    self.tool_calls,
                    self.leg_call_mismatches, self.router_turns, self.router_aiu)
        return {family.name for family in families}


class PromptFamilies:
    """The `hydrafusion_prompt_*` families, and the model and tool calls, of every prompt,
    fusion or not; a part of Metrics."""

    def _declare_prompt_families(self, counter, histogram) -> None:
        self.prompts = counter(
            "hydrafusion_prompts_total",
            "Prompts answered: fusion, ordinary (one fixed model) or fallback (route failed).",
            ("kind", "model"),
        )
        self.prompt_aiu = counter(
            "hydrafusion_prompt_aiu_total", "Credits (AIU) spent per prompt kind.",
            ("kind", "model"),
        )
        self.prompt_tokens = counter(
            "hydrafusion_prompt_tokens_total",
            "Tokens per prompt kind; input includes the cache-read tokens.",
            ("kind", "model", "type"),
        )
        self.prompt_calls = counter(
            "hydrafusion_prompt_model_calls_total", "Model calls made to answer prompts.",
            ("kind", "model"),
        )
        self.prompt_duration = histogram(
            "hydrafusion_prompt_duration_seconds",
            "Prompt latency: from routing (fusion) or the prompt (ordinary) to the last event.",
            ("kind", "model"), DURATION_BUCKETS,
        )
        self.model_calls = counter(
            "hydrafusion_model_calls_total", "Model calls, one per usage record.",
            ("kind", "model", "finish_reason"),
        )
        self.unknown_credit_calls = counter(
            "hydrafusion_unknown_credit_calls_total",
            "Model calls whose credits the CLI did not give (aiCreditsStatus unavailable): "
            "left out of every credits family.",
            ("kind", "pattern", "model"),
        )
        self.call_duration = histogram(
            "hydrafusion_model_call_duration_seconds", "Duration of one model call.",
            ("model",), DURATION_BUCKETS,
        )
        self.time_to_first_token = histogram(
            "hydrafusion_time_to_first_token_seconds",
            "Time from a model call's start to its first token.",
            ("model",), DURATION_BUCKETS,
        )
        self.tool_calls = counter(
            "hydrafusion_tool_calls_total", "Tool calls, by tool and whether they succeeded.",
            ("kind", "tool", "success"),
        )

    def _prompt_changes(self, turn: Turn, duration_s: float, unknown_calls: int) -> list[tuple]:
        """The prompt-level families, and the turn's model calls and tool calls (an
        ordinary turn's calls of unknown credits too: a fusion turn's are counted by leg).
        `duration_s` and `unknown_calls` (Turn.unknown_credit_calls) are the turn's."""
        kind, model = turn.kind, turn.prompt_model
        usage = turn.usage
        calls = len(turn.calls) if turn.ordinary else usage.request_count
        changes = [(self.prompts, (kind, model), 1)]
        changes += _known_credits(self.prompt_aiu, (kind, model), usage.nano_aiu, unknown_calls)
        changes += [
            (self.prompt_tokens, (kind, model, "input"), usage.input_tokens),
            (self.prompt_tokens, (kind, model, "output"), usage.output_tokens),
            (self.prompt_tokens, (kind, model, "cache_read"), usage.cache_read_tokens),
            (self.prompt_tokens, (kind, model, "cache_write"), usage.cache_write_tokens),
            (self.prompt_calls, (kind, model), calls),
            (self.prompt_duration, (kind, model), duration_s),
        ]
        # A turn's dozens of calls and tools fall in a few series of each counter: counted
        # per series first, one change each (a change per call and per tool cost a backfill
        # some 2% of its instructions). Histograms take each observation.
        counted: dict[tuple, int] = {}
        for call in turn.calls:
            key = (self.model_calls, (kind, call.model, call.finish_reason or "unknown"))
            counted[key] = counted.get(key, 0) + 1
            changes.append((self.call_duration, (call.model,), call.duration_ms / 1000))
            if call.time_to_first_token_ms is not None:
                changes.append(
                    (self.time_to_first_token, (call.model,), call.time_to_first_token_ms / 1000))
            if turn.ordinary and not call.credits_known:
                key = (self.unknown_credit_calls, (kind, ORDINARY_PATTERN, call.model))
                counted[key] = counted.get(key, 0) + 1
        for tool in turn.tools:
            success = "unknown" if tool.success is None else _flag(tool.success)
            key = (self.tool_calls, (kind, tool.name or "unknown", success))
            counted[key] = counted.get(key, 0) + 1
        changes += [(family, labels, count) for (family, labels), count in counted.items()]
        return changes


class HealthFamilies:
    """The tailer's own health (`hydrafusion_tailer_*`) and what it follows now: the turns
    in flight, the router's policies first seen; a part of Metrics."""

    def _declare_health_families(self, counter, gauge) -> None:
        self.lines = counter(
            "hydrafusion_tailer_lines_total", "Log lines read, by what became of them.",
            ("outcome",),
        )
        self.malformed = counter(
            "hydrafusion_tailer_malformed_lines_total", "Lines skipped as damaged, by reason.",
            ("reason",),
        )
        self.unknown_fields = counter(
            "hydrafusion_tailer_unknown_fields_total",
            "Fields the tailer does not know, seen on fusion events.",
            ("event_type",),
        )
        self.missing_fields = counter(
            "hydrafusion_tailer_missing_fields_total",
            "Expected fields absent from fusion events.",
            ("event_type",),
        )
        self.not_codes = counter(
            "hydrafusion_tailer_values_not_codes_total",
            "Values of fields read as machine codes that were none and became `other`.",
            ("field",),
        )
        self.unknown_events = counter(
            "hydrafusion_tailer_unknown_events_total", "Fusion event types the tailer does not know.",
        )
        self.spans_exported = counter(
            "hydrafusion_tailer_spans_exported_total", "Spans the collector accepted.",
        )
        self.export_failures = counter(
            "hydrafusion_tailer_export_failures_total",
            "Spans whose export failed: retry (an attempt failed, will be retried), "
            "rejected (the collector refused them), dropped (lost).",
            ("outcome",),
        )
        self.turn_errors = counter(
            "hydrafusion_tailer_turn_errors_total",
            "Turns skipped because the tailer failed to handle them (a bug: see its log).",
        )
        self.cli_skipped = counter(
            "hydrafusion_tailer_cli_records_skipped_total",
            "Lines of the CLI's telemetry export skipped, by reason.", ("reason",),
        )
        self.cli_changed = counter(
            "hydrafusion_tailer_cli_values_changed_total",
            "Values of the CLI's telemetry export sent as `other`, left out or cut, by reason.",
            ("reason",),
        )
        self.policy_first_seen = gauge(
            "hydrafusion_router_policy_first_seen_timestamp_seconds",
            "Start of the first turn this tailer saw routed by each router policy version.",
            ("policy_version",),
        )
        self.sessions = gauge("hydrafusion_tailer_sessions", "Session logs followed.")
        self.unreadable_logs = gauge(
            "hydrafusion_tailer_unreadable_logs",
            "Session logs that cannot be read now (their folder, or the log: not a regular "
            "file, no permission); the tailer's log names each once.",
        )
        self.pending_spans = gauge(
            "hydrafusion_tailer_pending_spans",
            "Spans waiting for the collector (kept in the checkpoint; bounded, oldest dropped).",
        )
        self.history_pending = gauge(
            "hydrafusion_tailer_history_pending_series",
            "Series whose start-up history waits to be pushed to Prometheus (kept in the "
            "checkpoint; 0 once Prometheus took it).",
        )
        self.open_turns = gauge("hydrafusion_tailer_open_turns", "Turns started but not finished.")
        self.turns_in_flight = gauge(
            "hydrafusion_turns_in_flight",
            "Turns begun and not ended or finished incomplete yet, by kind (fusion, a route "
            "failure's included, or ordinary).", ("kind",),
        )
        self.oldest_in_flight = gauge(
            "hydrafusion_oldest_turn_in_flight_start_timestamp_seconds",
            "When the oldest turn in flight began; 0 when none is.",
        )
        self.last_event = gauge(
            "hydrafusion_tailer_last_event_timestamp_seconds",
            "Time written on the newest fusion event read.",
        )
        gauge(
            "hydrafusion_tailer_build_info", "The tailer's version.", ("version", "python"),
        ).set({"version": __version__, "python": python_version()}, 1)

    def show_in_flight(self, turns: list[Turn]) -> None:
        """The turns open now: set each pass, so one finished (or finished incomplete when
        idle) leaves both gauges at the next. A route failure counts as `fusion`: the user
        asked for fusion, and the turn ends, as fusion turns do, with a fusion record."""
        kinds = Counter("ordinary" if turn.ordinary else "fusion" for turn in turns)
        for kind in ("fusion", "ordinary"):
            self.turns_in_flight.set({"kind": kind}, kinds[kind])
        self.oldest_in_flight.set(None, min((turn.start_ns for turn in turns), default=0) / 1e9)

    def count_turn_error(self) -> None:
        self.turn_errors.inc()

    def count_new_policy(self, version: str, start_ns: int) -> None:
        """A version of the router's policy first seen (policy_versions.PolicyVersions): the
        dashboard's annotation reads the time from the gauge, which outages cannot move."""
        self.policy_first_seen.set({"policy_version": version}, start_ns / 1e9)

    def restore(self, snapshot: dict) -> None:
        """Counters from a checkpoint; the newest event time must not go back either."""
        self.registry.restore(snapshot)
        for _, value, _, _ in snapshot.get(self.last_event.name, []):
            if _believable(int(value * 1e9)):
                self._newest_event_ns = max(self._newest_event_ns, int(value * 1e9))
        self.last_event.set(None, self._newest_event_ns / 1e9)

    def count_lines(self, outcome: str, amount: int = 1) -> None:
        self.lines.inc({"outcome": outcome}, amount)

    def count_damage(self, reason: str) -> None:
        """One damaged line, by reason (count_lines counts it among the lines read)."""
        self.malformed.inc({"reason": reason})

    def count_cli_skip(self, reason: str) -> None:
        """One line of the CLI's telemetry export skipped (tailer/outputs/copilot_otel.py's reasons)."""
        self.cli_skipped.inc({"reason": reason})

    def count_cli_change(self, reason: str, amount: int) -> None:
        """Values of one line of the CLI's export changed (tailer/outputs/copilot_otel.py's reasons)."""
        self.cli_changed.inc({"reason": reason}, amount)

    def count_event(self, event: Event) -> None:
        """Note schema drift, values that were no codes and the newest event time."""
        for name in event.not_codes:
            self.not_codes.inc({"field": name})
        if event.event_type:  # named only with drift notes or an unknown type: seldom
            self._count_drift(event)
        self.note_event_time(event.time_ns)

    def note_event_time(self, time_ns: int) -> None:
        """An event's time, for the newest one (the daemon's records it does not count one
        by one come as the newest of their times)."""
        if time_ns > self._newest_event_ns and _believable(time_ns):
            self._newest_event_ns = time_ns
            self.last_event.set(None, time_ns / 1e9)

    def believable_until_ns(self) -> int:
        """A time up to which every event time is believable, now and from now on."""
        return time.time_ns() + FUTURE_SLACK_NS

    def _count_drift(self, event: Event) -> None:
        event_type = event.event_type
        if isinstance(event, UnknownFusionEvent):
            self.unknown_events.inc()
        if event.unknown_fields:
            self.unknown_fields.inc({"event_type": event_type}, len(event.unknown_fields))
        if event.missing_fields:
            self.missing_fields.inc({"event_type": event_type}, len(event.missing_fields))

    def count_export(self, outcome: str, spans: int) -> None:
        """Count what became of an export attempt's spans."""
        if outcome == "delivered":
            self.spans_exported.inc(None, spans)
        else:
            self.export_failures.inc({"outcome": outcome}, spans)


class Metrics(TurnFamilies, PromptFamilies, HealthFamilies):
    """Every family the tailer exposes: what finished turns add (`hydrafusion_*`) and the
    tailer's own health (`hydrafusion_tailer_*`).

    The families are one contract on one registry, so they are declared here, part by part
    in one order (the order a checkpoint saves them in): the declarations are data a reader
    checks against docs/METRICS.md top to bottom, and `turn_families` (what history covers)
    is the line between the two halves. Then the series shown at 0 before anything happens.
    """

    def __init__(self, registry: Registry):
        self.registry = registry
        counter, gauge, histogram = registry.counter, registry.gauge, registry.histogram
        self._declare_turn_families(counter, histogram)
        self._declare_prompt_families(counter, histogram)
        self._declare_checks(counter)
        self._declare_health_families(counter, gauge)
        for outcome in ("fusion", "ignored", "malformed"):
            self.lines.inc({"outcome": outcome}, 0)
        for reason in copilot_otel.SKIP_REASONS:
            self.cli_skipped.inc({"reason": reason}, 0)
        for reason in copilot_otel.CHANGE_REASONS:
            self.cli_changed.inc({"reason": reason}, 0)
        for outcome in ("retry", "rejected", "dropped"):
            self.export_failures.inc({"outcome": outcome}, 0)
        for source in ("shutdown", "usage_checkpoint"):
            for result in ("agree", "disagree"):
                self.reconciliations.inc({"source": source, "result": result}, 0)
        for name in NOT_CODE_FIELDS:
            self.not_codes.inc({"field": name}, 0)
        self.show_in_flight([])
        self.unknown_events.inc(None, 0)
        self.turn_errors.inc(None, 0)
        self.spans_exported.inc(None, 0)
        self._newest_event_ns = 0
