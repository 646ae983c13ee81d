"""What `hydrafusion-tailer run` and `demo` are told: one frozen Config, worked out once
from the options and the environment (tailer/commands/cli.py) and read by the builder of the
daemon's stages (tailer/daemon/stages.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..outputs.otlp import parse_resource_attributes
from ..turns.assembly import IDLE_TIMEOUT_S

# How long a --once run waits for a collector that does not take its spans yet: time for
# a few Retry-After answers, and what OpenTelemetry's SDKs give an export by default
# (OTEL_BSP_EXPORT_TIMEOUT, 30 s), while a cron job still ends soon.
ONCE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Config:
    state_dir: Path
    checkpoint: Path
    idle_timeout_s: float = IDLE_TIMEOUT_S
    from_start: bool = False
    once: bool = False
    once_timeout_s: float = ONCE_TIMEOUT_S
    wait_for_state_dir: bool = False
    backfill_days: float | None = None
    metrics_bind: tuple[str, int] | None = None  # (host, port); None: not served
    traces_url: str | None = None  # None: no export
    otlp_metrics_url: str | None = None
    cli_otel: Path | None = None  # the CLI's own telemetry export; None: not followed
    otlp_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    traces_certificate: str | None = None  # a CA file for an https endpoint
    metrics_push_url: str | None = None  # None: no metrics push
    # The metrics signal's headers and CA file: of the push, and of the CLI's metrics.
    metrics_push_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    metrics_push_certificate: str | None = None
    metrics_push_interval_s: float = 60.0
    resource: dict[str, str] = dataclasses.field(default_factory=dict)
    textfile: Path | None = None
    history_url: str | None = None
    history_labels: dict[str, str] = dataclasses.field(default_factory=dict)  # {}: the push's
    history_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    history_certificate: str | None = None

    @property
    def metrics_url(self) -> str:
        if self.metrics_bind is None:
            return "not served"
        host, port = self.metrics_bind
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"


def resource_attributes(environ: dict[str, str]) -> dict[str, str]:
    """The OTLP resource, from the standard variables, with our service name and version."""
    resource = parse_resource_attributes(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    resource["service.name"] = environ.get("OTEL_SERVICE_NAME") or resource.get(
        "service.name", "hydrafusion"
    )
    resource.setdefault("service.version", __version__)
    return resource
