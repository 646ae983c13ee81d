"""Push the tailer's metrics as OTLP/HTTP JSON, for a laptop that no Prometheus can scrape.

`metrics_request` turns the registry's collected families (exposition.FamilySamples, what
a scrape or textfile would show) into an ExportMetricsServiceRequest: counters become
cumulative monotonic sums, gauges gauges, histograms cumulative explicit-bucket histograms.
Names, label names and values are the scrape's own, so Prometheus's OTLP translation (which
keeps a name ending in `_total` as it is and adds `_bucket`, `_sum`, `_count` to a
histogram's) gives back exactly the series a scrape would have made. No unit is sent: the
translation would add it to the name.

Every point carries the same start time, kept in the checkpoint from the tailer's first
run on (tailer/outputs/identity.py): the counters carry on from the checkpoint, so a restart must not tell
Prometheus that they started again from zero.

`MetricsPusher` sends from a thread of its own. The request is cumulative, so only the
newest one matters: one still waiting when a newer comes is replaced, and nothing is lost
by that. A push that fails is tried again with the newest request, after a backoff.
"""

from __future__ import annotations

import gzip
import json
import logging
import threading
import time
from typing import TYPE_CHECKING

from .otlp import error_text, retryable

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("tailer.otlp")

# What a resource may say of who sent the metrics. Prometheus makes job of service.name and
# instance of service.instance.id, and promotes the opt-in rest to labels where its
# configuration says so (prometheus/central.yml): nothing else, and nothing long, so the
# label sets stay bounded. hydrafusion.team is ours: the semantic conventions name no team.
RESOURCE_ATTRIBUTES = ("service.name", "service.version", "service.instance.id",
                       "user.name", "host.name", "hydrafusion.team")
PROMOTED_ATTRIBUTES = ("user.name", "host.name", "hydrafusion.team")
MAX_ATTRIBUTE_LENGTH = 64
CUMULATIVE = 2  # AggregationTemporality
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0


def bounded_resource(resource: dict[str, str]) -> dict[str, str]:
    """The resource attributes a metrics push sends: the allowlisted ones, cut short."""
    return {key: str(resource[key])[:MAX_ATTRIBUTE_LENGTH]
            for key in RESOURCE_ATTRIBUTES if resource.get(key)}


def prometheus_labels(resource: dict[str, str]) -> dict[str, str]:
    """The labels Prometheus's OTLP translation gives the pushed series of this resource
    (job, instance and the promoted attributes, dots as underscores): history pushed by
    remote write carries the same ones, so both are one series."""
    resource = bounded_resource(resource)
    labels = {"job": resource.get("service.name", ""),
              "instance": resource.get("service.instance.id", "")}
    for key in PROMOTED_ATTRIBUTES:
        if key in resource:
            labels[key.replace(".", "_")] = resource[key]
    return labels


def pushed_le(le: str) -> str:
    """A bucket bound as Prometheus's OTLP translation writes it: Go's shortest decimal,
    `1` where a scrape (and exposition._format_le) writes `1.0`."""
    return le[:-2] if le.endswith(".0") else le


def _key_values(values: dict[str, str]) -> list[dict]:
    return [{"key": key, "value": {"stringValue": value}} for key, value in values.items()]


def _sum(family, start: str, now: str) -> dict:
    points = [{"attributes": _key_values(dict(labels)), "startTimeUnixNano": start,
               "timeUnixNano": now, "asDouble": float(value)}
              for _, labels, value in family.samples]
    return {"sum": {"aggregationTemporality": CUMULATIVE, "isMonotonic": True,
                    "dataPoints": points}}


def _gauge(family, start: str, now: str) -> dict:
    points = [{"attributes": _key_values(dict(labels)), "timeUnixNano": now,
               "asDouble": float(value)}
              for _, labels, value in family.samples]
    return {"gauge": {"dataPoints": points}}


def _histogram(family, start: str, now: str) -> dict:
    """The scrape's cumulative `_bucket` samples (with `le`), `_sum` and `_count`, per label
    set, back into one point of per-bucket counts each."""
    series: dict[tuple, dict] = {}
    for name, labels, value in family.samples:
        own = tuple(pair for pair in labels if pair[0] != "le")
        point = series.setdefault(own, {"bounds": [], "cumulative": [], "sum": 0.0})
        if name.endswith("_bucket"):
            point["bounds"].append(float(dict(labels)["le"]))
            point["cumulative"].append(int(value))
        elif name.endswith("_sum"):
            point["sum"] = float(value)
    points = []
    for labels, point in series.items():
        cumulative = point["cumulative"]
        counts = [count - before for count, before in zip(cumulative, [0, *cumulative])]
        points.append({
            "attributes": _key_values(dict(labels)), "startTimeUnixNano": start,
            "timeUnixNano": now, "count": str(cumulative[-1]), "sum": point["sum"],
            "bucketCounts": [str(count) for count in counts],
            "explicitBounds": point["bounds"][:-1],  # the last is +Inf, implied
        })
    return {"histogram": {"aggregationTemporality": CUMULATIVE, "dataPoints": points}}


_DATA = {"counter": _sum, "gauge": _gauge, "histogram": _histogram}


def metrics_request(families, resource: dict[str, str], *, scope_name: str,
                    scope_version: str, start_ns: int, time_ns: int) -> dict:
    """An OTLP/JSON ExportMetricsServiceRequest of collected families: a pure function."""
    start, now = str(start_ns), str(time_ns)
    metrics = [{"name": family.name, "description": family.help, "unit": "",
                **_DATA[family.type](family, start, now)}
               for family in families if family.samples]
    return {"resourceMetrics": [{
        "resource": {"attributes": _key_values(bounded_resource(resource))},
        "scopeMetrics": [{"scope": {"name": scope_name, "version": scope_version},
                          "metrics": metrics}],
    }]}


def encode(request: dict) -> bytes:
    return gzip.compress(json.dumps(request, separators=(",", ":")).encode(), compresslevel=1)


class MetricsPusher:
    """Posts the newest metrics request to one OTLP/HTTP metrics URL, every interval_s."""

    def __init__(self, url: str, *, headers: dict[str, str], interval_s: float,
                 ssl_context: ssl.SSLContext | None = None, timeout: float = 10.0,
                 user_agent: str = "hydrafusion-tailer"):
        from .http_client import Endpoint  # here, as in otlp.py: only a configured push pays for it

        self.url = url
        self.interval_s = interval_s
        self._endpoint = Endpoint(
            url, timeout=timeout, ssl_context=ssl_context,
            headers={**headers, "Content-Type": "application/json",
                     "Content-Encoding": "gzip", "User-Agent": user_agent},
            certificate_setting="OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE or OTEL_EXPORTER_OTLP_CERTIFICATE")
        self._next_at = 0.0
        self._waiting: bytes | None = None
        self._sending = False
        self._closing = False
        self._failing = False
        self._lock = threading.Condition()
        self._worker = threading.Thread(target=self._run, name="otlp-metrics", daemon=True)
        self._worker.start()

    def due(self, now: float) -> bool:
        """Whether a push is due at monotonic time `now` (and, if so, the next one later)."""
        if now < self._next_at:
            return False
        self._next_at = now + self.interval_s
        return True

    def offer(self, body: bytes) -> None:
        """Send this request next, in place of one still waiting; never blocks."""
        with self._lock:
            self._waiting = body
            self._lock.notify_all()

    def close(self, body: bytes, timeout: float) -> bool:
        """Send this last request and stop; True if it was delivered within timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._lock.wait_for(lambda: not self._sending, timeout / 2)
            self._closing = True
            self._waiting = None
            self._lock.notify_all()
        self._endpoint.cut()  # a push still in flight has lost to this last one
        self._worker.join(max(0.0, deadline - time.monotonic()))
        return self._post(body, max(0.1, deadline - time.monotonic()))

    def _run(self) -> None:
        backoff = FIRST_BACKOFF_S
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._waiting is not None or self._closing)
                if self._closing:
                    return
                body, self._waiting, self._sending = self._waiting, None, True
            delivered = self._post(body)
            with self._lock:
                self._sending = False
                if not delivered and self._waiting is None:
                    self._waiting = body  # tried again unless a newer one comes first
                self._lock.notify_all()
                if not delivered:
                    self._lock.wait_for(lambda: self._closing, backoff)
            backoff = FIRST_BACKOFF_S if delivered else min(backoff * 2, MAX_BACKOFF_S)

    def _post(self, body: bytes, timeout: float | None = None) -> bool:
        """One attempt; True when it needs no retry (delivered, or refused as bad data)."""
        answer = self._endpoint.post(body, timeout)
        if retryable(answer):
            detail = f": {error_text(answer.body)}" if answer.status is not None and answer.body else ""
            return self._failed(answer.reason() + detail)
        if not answer.delivered:
            log.error("OTLP metrics push refused (HTTP %d): %s", answer.status, error_text(answer.body))
            return True
        if self._failing:
            log.info("OTLP metrics push to %s works again", self.url)
        self._failing = False
        return True

    def _failed(self, reason: str) -> bool:
        if not self._failing:
            log.warning("OTLP metrics push failed (%s); the next push sends the counters "
                        "as they are then", reason)
        self._failing = True
        return False

