"""The HydraFusion dashboard as its queries, for tests.

Grafana cannot run here, so tests read the dashboard file and do the part of
Grafana's job they need: list every PromQL expression and TraceQL query, and
substitute the time range and variables the way Grafana would. A test can then
run each expression against a real Prometheus, or check the names it uses
against the tailer's contract (the lists below) and against a real exposition
or a captured OTLP payload.
"""

import json
import math
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
DASHBOARD_PATH = REPO / "grafana" / "dashboards" / "hydrafusion.json"
DATASOURCES_PATH = REPO / "grafana" / "provisioning" / "datasources" / "datasources.yaml"

# The tailer's metric families (issue 2's contract). Histograms are listed by
# family name; their series add _bucket, _sum and _count.
CONTRACT_COUNTERS_AND_GAUGES = frozenset({
    "hydrafusion_turns_total",
    "hydrafusion_legs_total",
    "hydrafusion_aiu_total",
    "hydrafusion_tokens_total",
    "hydrafusion_requests_total",
    "hydrafusion_route_failures_total",
    "hydrafusion_judged_turns_total",
    "hydrafusion_gate_turns_total",
    "hydrafusion_gate_aiu_total",
    "hydrafusion_prompts_total",
    "hydrafusion_prompt_aiu_total",
    "hydrafusion_prompt_model_calls_total",
    "hydrafusion_unknown_credit_calls_total",
    "hydrafusion_router_turns_total",
    "hydrafusion_router_aiu_total",
    "hydrafusion_router_policy_first_seen_timestamp_seconds",
    "hydrafusion_tailer_lines_total",
    "hydrafusion_tailer_malformed_lines_total",
    "hydrafusion_tailer_sessions",
    "hydrafusion_tailer_unreadable_logs",
    "hydrafusion_tailer_open_turns",
    "hydrafusion_turns_in_flight",
    "hydrafusion_oldest_turn_in_flight_start_timestamp_seconds",
    "hydrafusion_tailer_export_failures_total",
    "hydrafusion_tailer_spans_exported_total",
    "hydrafusion_tailer_last_event_timestamp_seconds",
    "hydrafusion_tailer_unknown_fields_total",
    "hydrafusion_tailer_unknown_events_total",
    "hydrafusion_tailer_missing_fields_total",
    "hydrafusion_tailer_pending_spans",
    "hydrafusion_tailer_history_pending_series",
    "hydrafusion_tailer_build_info",
})
CONTRACT_HISTOGRAMS = frozenset({
    "hydrafusion_turn_duration_seconds",
    "hydrafusion_leg_duration_seconds",
    "hydrafusion_routing_latency_seconds",
    "hydrafusion_prompt_duration_seconds",
})
CONTRACT_METRICS = CONTRACT_COUNTERS_AND_GAUGES | CONTRACT_HISTOGRAMS

# Series Prometheus makes itself, which the dashboard may also read.
PROMETHEUS_OWN_METRICS = frozenset({"up"})

# The collector's and Tempo's own metrics (prometheus/prometheus.yml scrapes both), named
# by a __name__ regex because their exposition may or may not add _total.
COMPONENT_METRICS = ("otelcol_exporter_send_failed_spans", "otelcol_receiver_refused_spans",
                     "tempo_discarded_spans")

# Span attributes of the tailer's traces (issue 2's contract): the turn's root
# span, and each leg's span. Both carry the GenAI inference set.
GEN_AI_ATTRIBUTES = frozenset({
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.conversation.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_write.input_tokens",
})
ROOT_SPAN_ATTRIBUTES = GEN_AI_ATTRIBUTES | frozenset({
    "hydrafusion.turn.key",
    "hydrafusion.fusion_id",
    "hydrafusion.pattern",
    "hydrafusion.policy",
    "hydrafusion.route_source",
    "hydrafusion.routing_latency_ms",
    "hydrafusion.outcome",
    "hydrafusion.degraded_reason",
    "hydrafusion.phase_count",
    "hydrafusion.request_count",
    "hydrafusion.aiu",
    "hydrafusion.models",
    "hydrafusion.model_sequence",
    "hydrafusion.verdict",
    "hydrafusion.compound",
    "hydrafusion.review_aiu",
    "hydrafusion.usage_mismatch",
    "hydrafusion.route_failure_reason",
    "hydrafusion.fallback_model",
})
LEG_SPAN_ATTRIBUTES = GEN_AI_ATTRIBUTES | frozenset({
    "hydrafusion.phase.id",
    "hydrafusion.phase.kind",
    "hydrafusion.phase.role",
    "hydrafusion.phase.scope",
    "hydrafusion.phase.status",
    "hydrafusion.phase.verdict",
    "hydrafusion.phase.committed",
    "hydrafusion.phase.failure_reason",
    "hydrafusion.aiu",
    "hydrafusion.request_count",
})

# What Grafana puts in place of a multi-value variable set to "All" (the
# variables' allValue): a regex that matches everything, the empty string included, so
# a series without the label (one local tailer has no user_name) matches too.
ALL = ".*"

# The labels that tell one tailer from another (the instance and user variables), and the
# matchers every selector of a tailer's series carries for them.
TAILER_FILTERS = ('instance=~"$instance"', 'user_name=~"$user"')

# Grafana's $__rate_interval is max(4 x scrape interval, step + scrape interval);
# for an instant query over a whole range that is 4 x 15 s.
RATE_INTERVAL = "60s"


def load_dashboard():
    return json.loads(DASHBOARD_PATH.read_text(encoding="utf-8"))


def load_datasources():
    return yaml.safe_load(DATASOURCES_PATH.read_text(encoding="utf-8"))["datasources"]


def all_panels(dashboard):
    """Every panel in page order, rows included, with a collapsed row's panels after it."""
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def targets(dashboard, datasource_type):
    """(panel title, target) for every query of that datasource type."""
    found = []
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            source = target.get("datasource") or panel.get("datasource") or {}
            if source.get("type") == datasource_type:
                found.append((panel["title"], target))
    return found


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def chosen(*values):
    """What Grafana puts in place of a multi-value variable used in a PromQL regex matcher
    when these values are picked: each escaped for a regex inside a PromQL string (so the
    dots of 127.0.0.1:9464 match only dots), several as (a|b)."""
    # A regex escape is a backslash, written twice inside the PromQL string: "\\." for ".".
    escaped = [re.sub(r"[$^*{}\[\]'+?.()|]", r"\\\\\g<0>", value.replace("\\", "\\\\\\\\"))
               for value in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def default_value(variable):
    """What Grafana puts in place of a variable left as the dashboard opens."""
    if variable.get("includeAll"):
        return ALL
    return variable["current"]["value"]


def substitute(text, window_seconds, variables=None, dashboard=None, step_seconds=None):
    """Replace Grafana's $__range, $__interval, $__rate_interval and dashboard variables.

    Variables not given keep their default ("All" where they have one). A name that is
    neither a built-in nor a dashboard variable raises KeyError, so a typo cannot pass
    unseen. step_seconds is a range query's step ($__interval).
    """
    dashboard = dashboard or load_dashboard()
    values = {variable["name"]: default_value(variable) for variable in dashboard["templating"]["list"]}
    values.update(variables or {})
    values["__range"] = f"{int(window_seconds)}s"
    if step_seconds is not None:
        values["__interval"] = f"{int(step_seconds)}s"
    values["__rate_interval"] = RATE_INTERVAL

    def replace(match):
        return values[match.group(1) or match.group(2)]

    return _VARIABLE.sub(replace, text)


def prometheus_exprs(window_seconds, variables=None):
    """(panel title, expr) for every instant PromQL expression on the dashboard, ready to
    run: each is a query over the whole window, to run at the window's end."""
    dashboard = load_dashboard()
    return [(title, substitute(target["expr"], window_seconds, variables, dashboard))
            for title, target in targets(dashboard, "prometheus") if target.get("instant")]


def prometheus_annotations(dashboard):
    """The dashboard's annotations that query Prometheus."""
    return [annotation for annotation in dashboard["annotations"]["list"]
            if annotation.get("datasource", {}).get("type") == "prometheus"]


def annotation_exprs(step_seconds, variables=None):
    """(annotation name, expr) for every Prometheus annotation, for a range query with that
    step, as Grafana runs them over the dashboard's time range."""
    dashboard = load_dashboard()
    return [(annotation["name"],
             substitute(annotation["expr"], step_seconds, variables, dashboard, step_seconds))
            for annotation in prometheus_annotations(dashboard)]


def annotation_events(annotation, result):
    """What Grafana draws for a range-query result of a Prometheus annotation that takes
    its time from the series' value (useValueForTime, in ms: the only kind the dashboard
    has): one event per time, as (title, time in ms)."""
    assert annotation["useValueForTime"], annotation["name"]
    events = set()
    for series in result:
        title = re.sub(r"\{\{(\w+)\}\}", lambda m: series["metric"].get(m.group(1), ""),
                       annotation["titleFormat"])
        events |= {(title, math.floor(float(value))) for _, value in series["values"]}
    return events


def prometheus_range_exprs(step_seconds, variables=None):
    """(panel title, expr) for every range (time series) PromQL expression, for a range
    query with that step: each point counts the step that ends at it."""
    dashboard = load_dashboard()
    return [(title, substitute(target["expr"], step_seconds, variables, dashboard, step_seconds))
            for title, target in targets(dashboard, "prometheus") if not target.get("instant")]


def traceql_queries(window_seconds, variables=None):
    """(panel title, query) for every TraceQL query on the dashboard."""
    dashboard = load_dashboard()
    return [(title, substitute(target["query"], window_seconds, variables, dashboard))
            for title, target in targets(dashboard, "tempo")]


def traces_to_metrics_queries():
    """The PromQL behind the Tempo datasource's span-to-metrics links, with $__tags as is."""
    tempo = next(source for source in load_datasources() if source["type"] == "tempo")
    # "$$" in provisioning files is Grafana's escape for "$".
    return [query["query"].replace("$$", "$")
            for query in tempo["jsonData"]["tracesToMetrics"]["queries"]]


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^}]*\}")
_BRACKETS = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.$])[A-Za-z_:][\w:]*(?![\w:])(?!\s*\()")
_KEYWORDS = frozenset({
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
    "group_left", "group_right", "inf", "nan", "Inf", "NaN", "anchored", "smoothed",
})


def metric_names(expr):
    """The series names a PromQL expression selects (not functions, labels or keywords)."""
    bare = _STRING.sub('""', expr)
    bare = _BRACES.sub("", bare)
    bare = _BRACKETS.sub("", bare)
    bare = _GROUPING.sub("", bare)
    return {name for name in _IDENTIFIER.findall(bare) if name not in _KEYWORDS}


def metric_family(series_name):
    """The family a series belongs to: a contract histogram for its _bucket/_sum/_count."""
    for suffix in ("_bucket", "_sum", "_count"):
        base = series_name.removesuffix(suffix)
        if base != series_name and base in CONTRACT_HISTOGRAMS:
            return base
    return series_name


def metric_families_used():
    """Every metric family the dashboard, its variables and the Tempo links read."""
    dashboard = load_dashboard()
    exprs = [target["expr"] for _, target in targets(dashboard, "prometheus")]
    exprs += [variable["query"] for variable in dashboard["templating"]["list"]
              if variable.get("datasource", {}).get("type") == "prometheus"]
    exprs += traces_to_metrics_queries()
    exprs += [annotation["expr"] for annotation in prometheus_annotations(dashboard)]
    families = set()
    for expr in exprs:
        families |= {metric_family(name) for name in _label_values_metric(expr) or metric_names(expr)}
    return families


def links(dashboard):
    """(panel title, url) of every data link on the dashboard: field defaults and overrides."""
    found = []
    for panel in all_panels(dashboard):
        field_config = panel.get("fieldConfig", {})
        holders = [field_config.get("defaults", {}).get("links", [])]
        holders += [prop["value"] for override in field_config.get("overrides", [])
                    for prop in override["properties"] if prop["id"] == "links"]
        found += [(panel["title"], link["url"]) for holder in holders for link in holder]
    return found


def _label_values_metric(expr):
    """label_values(metric, label) is Grafana's variable syntax, not PromQL."""
    match = re.fullmatch(r"label_values\((\w+)(?:\{[^}]*\})?,\s*\w+\)", expr.strip())
    return {match.group(1)} if match else None


_SPAN_ATTRIBUTE = re.compile(r"\bspan\.([A-Za-z_][\w.]*)")


def traceql_span_attributes():
    """Span attributes the dashboard's TraceQL queries name (on turns' root spans and legs)."""
    dashboard = load_dashboard()
    attributes = set()
    for _, target in targets(dashboard, "tempo"):
        attributes |= set(_SPAN_ATTRIBUTE.findall(target["query"]))
    return attributes


def span_attributes_used():
    """Every span attribute the stack relies on: TraceQL, the session variable, the span-to-metrics links."""
    dashboard = load_dashboard()
    attributes = traceql_span_attributes()
    for variable in dashboard["templating"]["list"]:
        if variable.get("datasource", {}).get("type") == "tempo":
            attributes.add(variable["query"]["label"])
    tempo = next(source for source in load_datasources() if source["type"] == "tempo")
    attributes |= {tag["key"] for tag in tempo["jsonData"]["tracesToMetrics"]["tags"]}
    return attributes
