"""The metrics push: the OTLP request, decoded with opentelemetry-proto, field by field; the
values are the scrape's to the bit; the identity; the sender thread."""

import gzip
import json
import math

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from exposition_helpers import samples
from otlp_sink import OtlpSink, decode_metrics_body, plain_attributes
from tailer.outputs.exposition import Registry, _format_le
from tailer.outputs.identity import Identity
from tailer.outputs.otlp_metrics import (MAX_ATTRIBUTE_LENGTH, MetricsPusher, bounded_resource,
                                 encode, metrics_request, prometheus_labels)

START_NS, NOW_NS = 1_700_000_000_123_456_789, 1_800_000_000_987_654_321
RESOURCE = {"service.name": "hydrafusion", "service.version": "9.9", "service.instance.id": "id-1",
            "user.name": "ada", "deployment.environment": "dev"}


def registry_with_values() -> Registry:
    registry = Registry()
    turns = registry.counter("x_turns_total", "Turns.", ("pattern",))
    credits = registry.counter("x_aiu_total", "Credits.", ("model",))
    registry.gauge("x_sessions", "Sessions.").set(None, 3)
    latency = registry.histogram("x_latency_seconds", "Latency.", ("route",), (0.1, 1.0, 2.5))
    turns.inc({"pattern": "cascade"}, 2)
    credits.inc({"model": "m"}, 0.000_000_007)
    credits.inc({"model": "m"}, 1.3)
    for value in (0.05, 0.1, 0.7, 9.0):
        latency.observe({"route": "rules"}, value)
    registry.save_and_publish(lambda snapshot: None)
    return registry


def request_of(registry, resource=RESOURCE) -> dict:
    return metrics_request(registry.collect_final(), resource, scope_name="scope",
                           scope_version="1.2", start_ns=START_NS, time_ns=NOW_NS)


def decoded(request: dict) -> dict:
    """The request through protobuf's JSON mapping (strict) and back: what a collector reads."""
    message = decode_metrics_body(json.dumps(request).encode())
    return json_format.MessageToDict(message, use_integers_for_enums=True)


def test_every_field_of_the_request():
    document = decoded(request_of(registry_with_values()))
    [resource_metrics] = document["resourceMetrics"]
    # Only the allowlisted resource attributes; deployment.environment stays home.
    assert plain_attributes(resource_metrics["resource"]["attributes"]) == {
        "service.name": "hydrafusion", "service.version": "9.9",
        "service.instance.id": "id-1", "user.name": "ada"}
    [scope] = resource_metrics["scopeMetrics"]
    assert scope["scope"] == {"name": "scope", "version": "1.2"}
    metrics = {metric["name"]: metric for metric in scope["metrics"]}
    assert set(metrics) == {"x_turns_total", "x_aiu_total", "x_sessions", "x_latency_seconds"}
    assert all("unit" not in metric for metric in metrics.values())  # no unit: no name suffix
    assert metrics["x_turns_total"]["description"] == "Turns."

    turns = metrics["x_turns_total"]["sum"]
    assert turns["aggregationTemporality"] == AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
    assert turns["isMonotonic"] is True
    assert turns["dataPoints"] == [{
        "attributes": [{"key": "pattern", "value": {"stringValue": "cascade"}}],
        "startTimeUnixNano": str(START_NS), "timeUnixNano": str(NOW_NS), "asDouble": 2.0}]
    [credit] = metrics["x_aiu_total"]["sum"]["dataPoints"]
    assert credit["asDouble"] == 1.300000007

    [gauge] = metrics["x_sessions"]["gauge"]["dataPoints"]
    assert gauge == {"timeUnixNano": str(NOW_NS), "asDouble": 3.0}

    histogram = metrics["x_latency_seconds"]["histogram"]
    assert histogram["aggregationTemporality"] == 2
    assert histogram["dataPoints"] == [{
        "attributes": [{"key": "route", "value": {"stringValue": "rules"}}],
        "startTimeUnixNano": str(START_NS), "timeUnixNano": str(NOW_NS),
        "count": "4", "sum": 9.85, "bucketCounts": ["2", "1", "0", "1"],
        "explicitBounds": [0.1, 1.0, 2.5]}]


def as_scraped(request: dict) -> dict[tuple, float]:
    """The samples Prometheus's OTLP translation makes of the request (names kept, buckets
    cumulated with their `le`), for comparison with a scrape."""
    found = {}
    for metric in request["resourceMetrics"][0]["scopeMetrics"][0].get("metrics", []):
        name = metric["name"]
        for kind in ("sum", "gauge"):
            for point in metric.get(kind, {}).get("dataPoints", []):
                found[name, labels_of(point)] = point["asDouble"]
        for point in metric.get("histogram", {}).get("dataPoints", []):
            labels = labels_of(point)
            cumulative = 0
            bounds = [*point["explicitBounds"], math.inf]
            for bound, count in zip(bounds, point["bucketCounts"]):
                cumulative += int(count)
                found[f"{name}_bucket", tuple(sorted((*labels, ("le", _format_le(bound)))))] = cumulative
            found[f"{name}_sum", labels] = point["sum"]
            found[f"{name}_count", labels] = int(point["count"])
    return found


def labels_of(point: dict) -> tuple:
    return tuple(sorted((pair["key"], pair["value"]["stringValue"])
                        for pair in point.get("attributes", [])))


def scraped(text: str, names) -> dict[tuple, float]:
    return {(name, labels): value for name in names
            for labels, value in samples(text, name).items()}


amounts = st.one_of(st.integers(0, 10**6), st.floats(0, 1e6, allow_nan=False),
                    st.integers(0, 10**12).map(lambda nano: nano / 1e9))


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.tuples(st.sampled_from("abc"), amounts), max_size=30),
       observed=st.lists(st.tuples(st.sampled_from("xy"), st.floats(0, 100)), max_size=30))
def test_the_pushed_values_are_the_scraped_ones_to_the_bit(counts, observed):
    registry = Registry()
    counter = registry.counter("y_total", "Y.", ("k",))
    histogram = registry.histogram("h_seconds", "H.", ("k",), (0.5, 1.0, 10.0))
    for key, amount in counts:
        counter.inc({"k": key}, amount)
    for key, value in observed:
        histogram.observe({"k": key}, value)
    registry.save_and_publish(lambda snapshot: None)
    text = registry.render_final()
    request = decoded(request_of(registry))
    names = ("y_total", "h_seconds_bucket", "h_seconds_sum", "h_seconds_count")
    assert as_scraped(request) == scraped(text, names)


def test_withheld_families_are_not_pushed_and_new_series_are_held_at_zero():
    registry = registry_with_values()
    registry.withhold({"x_turns_total"})
    pushed = metrics_request(registry.collect_pushed(), RESOURCE, scope_name="s",
                             scope_version="1", start_ns=START_NS, time_ns=NOW_NS)
    names = {m["name"] for m in pushed["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]}
    assert names == {"x_aiu_total", "x_sessions", "x_latency_seconds"}
    # A series seen for the first time is pushed at zero first, as a textfile shows it:
    # Prometheus's increase() cannot see a series' first value.
    [credit] = [m for m in pushed["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
                if m["name"] == "x_aiu_total"][0]["sum"]["dataPoints"]
    assert credit["asDouble"] == 0.0
    registry.show_all()
    final = request_of(registry)
    assert "x_turns_total" in {m["name"] for m in final["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]}


def test_the_resource_is_bounded_and_the_labels_are_prometheus_s():
    long = "n" * 500
    resource = {**RESOURCE, "host.name": long, "hydrafusion.team": "core",
                "session.id": "s-1", "process.command_line": "copilot --prompt secret"}
    bounded = bounded_resource(resource)
    assert set(bounded) == {"service.name", "service.version", "service.instance.id",
                            "user.name", "host.name", "hydrafusion.team"}
    assert bounded["host.name"] == "n" * MAX_ATTRIBUTE_LENGTH
    assert prometheus_labels(resource) == {
        "job": "hydrafusion", "instance": "id-1", "user_name": "ada",
        "host_name": "n" * MAX_ATTRIBUTE_LENGTH, "hydrafusion_team": "core"}


def test_the_identity_is_made_once_and_kept():
    first = Identity(None)
    assert first.is_new and len(first.instance_id) == 36
    again = Identity(first.state())
    assert not again.is_new
    assert (again.instance_id, again.start_ns) == (first.instance_id, first.start_ns)
    assert again.resource({"service.name": "s"})["service.instance.id"] == first.instance_id
    # One the user names wins.
    assert again.resource({"service.instance.id": "mine"})["service.instance.id"] == "mine"
    assert Identity(None).instance_id != first.instance_id


def test_the_pusher_sends_the_newest_request_and_the_last_one_at_close():
    with OtlpSink() as sink:
        pusher = MetricsPusher(sink.endpoint + "/v1/metrics", headers={"Authorization": "Bearer t"},
                               interval_s=60)
        assert pusher.due(100.0) and not pusher.due(159.0) and pusher.due(160.0)
        pusher.offer(encode(request_of(registry_with_values())))
        sink.wait_for_metrics(1)
        final = registry_with_values()
        final.counter("z_total", "Z.").inc(None, 5)
        assert pusher.close(encode(request_of(final)), timeout=10)
        requests = sink.wait_for_metrics(2)
    assert sink.metric_headers[0]["authorization"] == "Bearer t"
    assert sink.metric_headers[0]["content-encoding"] == "gzip"
    last = json_format.MessageToDict(requests[-1])
    names = {m["name"] for m in last["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]}
    assert "z_total" in names
    assert gzip.decompress(encode({"a": 1})) == b'{"a":1}'


# -- configuration and restarts -----------------------------------------------------------


def config_of(*argv, **environ):
    from tailer.commands.cli import parse_args, run_config

    return run_config(parse_args(["--state-dir", "/s", *argv], environ), environ)


def test_the_push_is_off_unless_asked_for_and_follows_the_standard_variables():
    from tailer.commands.cli import metrics_push_url

    # Today's users, who send traces to OTEL_EXPORTER_OTLP_ENDPOINT, push nothing new.
    assert metrics_push_url(None, {}) is None
    assert metrics_push_url(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://gw:4318"}) is None
    assert metrics_push_url(None, {"OTEL_METRICS_EXPORTER": "none"}) is None
    on = {"OTEL_METRICS_EXPORTER": "otlp"}
    assert metrics_push_url(None, on) == "http://localhost:4318/v1/metrics"
    assert metrics_push_url(None, {**on, "OTEL_EXPORTER_OTLP_ENDPOINT": "https://gw:4318/"}) \
        == "https://gw:4318/v1/metrics"
    specific = {**on, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://gw:4318",
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://m.example/otlp/push"}
    assert metrics_push_url(None, specific) == "https://m.example/otlp/push"  # as it is
    assert metrics_push_url("http://gw:4318", {}) == "http://gw:4318/v1/metrics"
    assert metrics_push_url("none", specific) is None

    config = config_of(OTEL_METRICS_EXPORTER="otlp", OTEL_METRIC_EXPORT_INTERVAL="15000",
                       OTEL_EXPORTER_OTLP_HEADERS="a=1", OTEL_EXPORTER_OTLP_METRICS_HEADERS="b=2")
    assert (config.metrics_push_interval_s, config.metrics_push_headers) == (15.0, {"b": "2"})
    assert config_of(OTEL_METRICS_EXPORTER="otlp", OTEL_EXPORTER_OTLP_HEADERS="a=1") \
        .metrics_push_headers == {"a": "1"}
    assert config_of().metrics_push_url is None
    assert config_of().metrics_push_interval_s == 60.0
    assert config_of("--otlp-metrics-interval", "5", OTEL_METRICS_EXPORTER="otlp",
                     OTEL_METRIC_EXPORT_INTERVAL="15000").metrics_push_interval_s == 5.0  # the option first


def test_a_push_interval_variable_that_is_no_number_is_refused_by_its_name():
    with pytest.raises(ValueError, match=r"^\$OTEL_METRIC_EXPORT_INTERVAL 'soon' is not a number "):
        config_of(OTEL_METRIC_EXPORT_INTERVAL="soon")
    with pytest.raises(ValueError, match="at most 120 s, got 600"):
        config_of(OTEL_METRIC_EXPORT_INTERVAL="600000")


def test_history_labels_come_from_the_push_and_auth_from_the_url_and_variables():
    with pytest.raises(ValueError, match="--history-labels"):
        config_of("--history-url", "http://p:9090/api/v1/write")
    config = config_of("--history-url", "https://ada:s%40cret@p.example/api/v1/write",
                       OTEL_METRICS_EXPORTER="otlp", HYDRAFUSION_HISTORY_HEADERS="X-Scope-OrgID=t1")
    assert config.history_url == "https://p.example/api/v1/write"
    assert config.history_labels == {}  # the pushed series' own, made at start (service.py)
    assert config.history_headers == {"Authorization": "Basic YWRhOnNAY3JldA==",
                                      "X-Scope-OrgID": "t1"}


def test_a_restart_keeps_the_instance_and_the_start_time_and_counts_on(tmp_path):
    """Two runs on one checkpoint push one instance id and one start time, and the second
    run's counters start where the first's ended: to Prometheus, no reset."""
    from tailerproc import run_once, tailer_env
    from sessiongen import every_pattern

    state = tmp_path / "state"
    state.mkdir()
    every_pattern("restart-0").write(state)
    with OtlpSink() as sink:
        env = tailer_env(OTEL_METRICS_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint,
                         HYDRAFUSION_CHECKPOINT=str(tmp_path / "checkpoint.json"))
        assert run_once("--state-dir", str(state), "--otlp-endpoint", "none", env=env).returncode == 0
        first = len(sink.metric_requests)
        every_pattern("restart-1").write(state)
        assert run_once("--state-dir", str(state), "--otlp-endpoint", "none", env=env).returncode == 0
        requests = [json_format.MessageToDict(r) for r in sink.metric_requests]
    assert 0 < first < len(requests)
    ids = {plain_attributes(r["resourceMetrics"][0]["resource"]["attributes"])["service.instance.id"]
           for r in requests}
    starts = {point["startTimeUnixNano"] for r in requests
              for metric in r["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
              for kind in ("sum", "histogram") for point in metric.get(kind, {}).get("dataPoints", [])}
    assert len(ids) == 1 and len(starts) == 1

    def turns(request) -> float:
        return sum(point.get("asDouble", 0) for metric in request["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
                   if metric["name"] == "hydrafusion_turns_total" for point in metric["sum"]["dataPoints"])

    assert turns(requests[first - 1]) > 0
    assert turns(requests[-1]) == 2 * turns(requests[first - 1])
