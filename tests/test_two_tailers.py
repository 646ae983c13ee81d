"""Two developers' tailers into one central stack, on the real parts (tests/gateway.py).

Each tailer has its own sessions (tests/sessiongen.py), checkpoint and identity
(service.instance.id made by the tailer, user.name set by its user). Both send traces and
push metrics through the gateway collector over https (a self-signed certificate, given by
OTEL_EXPORTER_OTLP_CERTIFICATE) into the real Prometheus build, and push their history
by remote write. Then:

- totals add up to the truth computed from the files, and stay apart by instance and user;
- the history of both lands at its real time: the value at the end of a past day is the
  turns that had ended by then;
- one tailer stopped cleanly and the other killed with -9, both restarted with a new session
  each: the totals are the truth again, nothing counted twice, and no counter ever went
  down (a restart never reads as a reset).
"""

import time
from datetime import datetime, timedelta, timezone

from gateway import central_prometheus, make_certificate, running_gateway
from otlp_sink import OtlpSink
from prom import single_value
from sessiongen import every_pattern, whole_session
from tailer.outputs.metrics import ROUTING_BUCKETS
from tailerproc import running_tailer, tailer_env

NOW = datetime.now(timezone.utc)
DAY_MS = 86_400_000


def fusion_turns(turns) -> list:
    return [turn for turn in turns if turn.kind != "ordinary"]


class Developer:
    """One laptop: its sessions, checkpoint and environment."""

    def __init__(self, tmp_path, name: str, days_ago: tuple[int, int], gateway, cert, prom):
        self.name = name
        self.state = tmp_path / name / "state"
        self.state.mkdir(parents=True)
        self.turns = []
        self.write(every_pattern(f"{name}-a", NOW - timedelta(days=days_ago[0])))
        self.write(whole_session(f"{name}-b", NOW - timedelta(days=days_ago[1])))
        self.env = tailer_env(
            OTEL_EXPORTER_OTLP_ENDPOINT=gateway, OTEL_EXPORTER_OTLP_CERTIFICATE=str(cert),
            OTEL_METRICS_EXPORTER="otlp", OTEL_METRIC_EXPORT_INTERVAL="1000",
            OTEL_RESOURCE_ATTRIBUTES=f"user.name={name},hydrafusion.team=core",
            HYDRAFUSION_HISTORY_URL=f"{prom.url}/api/v1/write",
            HYDRAFUSION_CHECKPOINT=str(tmp_path / name / "checkpoint.json"),
        )
        self.tmp_path = tmp_path / name

    def write(self, writer) -> None:
        writer.write(self.state)
        self.turns += writer.expected

    def tailer(self):
        return running_tailer(self.tmp_path, "--state-dir", str(self.state), "--from-start",
                              env=self.env)


def by_user(prom, at: float | None = None) -> dict[str, float]:
    result = prom.query("sum by (user_name) (hydrafusion_turns_total)", time=at)
    return {series["metric"]["user_name"]: float(series["value"][1]) for series in result}


def wait_for_totals(prom, developers) -> None:
    want = {d.name: len(fusion_turns(d.turns)) for d in developers}
    prom.wait_for("sum by (user_name) (hydrafusion_turns_total)",
                  lambda result: by_user(prom) == want, timeout=120)


def wait_for_pushes_after(prom, moment: float) -> None:
    """Until every turn series has a sample pushed after `moment`: pushes on top of what
    was there, not just time gone by (a loaded machine may push late)."""
    prom.wait_for("min(timestamp(hydrafusion_turns_total))",
                  lambda result: result and float(result[0]["value"][1]) > moment, timeout=120)


def test_two_tailers_add_up_stay_apart_land_at_their_time_and_survive_restarts(tmp_path):
    cert, key = make_certificate(tmp_path)
    with central_prometheus(tmp_path) as prom, OtlpSink() as tempo, \
            running_gateway(tmp_path, tempo, prom, tls=(cert, key)) as gateway:
        ada = Developer(tmp_path, "ada", (3, 2), gateway, cert, prom)
        bob = Developer(tmp_path, "bob", (4, 1), gateway, cert, prom)
        with ada.tailer() as ada_tailer, bob.tailer() as bob_tailer:
            for tailer in (ada_tailer, bob_tailer):
                tailer.wait_for_log("history: pushed", timeout=120)
            wait_for_totals(prom, (ada, bob))
            tempo.wait_for_spans(len(ada.turns) + len(bob.turns), timeout=60)
            # Apart by instance too: two ids, each made by its tailer, one per user.
            instances = prom.query("count by (instance, user_name, hydrafusion_team, job) "
                                   "(hydrafusion_turns_total)")
            assert sorted((s["metric"]["user_name"], s["metric"]["hydrafusion_team"],
                           s["metric"]["job"]) for s in instances) == [
                ("ada", "core", "hydrafusion"), ("bob", "core", "hydrafusion")]
            assert len({s["metric"]["instance"] for s in instances}) == 2
            # History and push are one series, histograms too: each `le` once per instance
            # (Prometheus's OTLP translation writes 1, 2, 5 as `1`, the history likewise).
            # The bounds no past turn touched come with the first push after the history
            # (it is pushed from a thread; the push follows within a pass and an interval).
            prom.wait_for("count by (instance) (count by (instance, le) "
                          "(hydrafusion_routing_latency_seconds_bucket))",
                          lambda bounds: [float(s["value"][1]) for s in bounds]
                          == [len(ROUTING_BUCKETS) + 1] * 2, timeout=30)
            # History at its real time: each past day's end sees the turns ended by then.
            for days in (3, 2, 1):
                at_ms = round((NOW - timedelta(days=days)).timestamp() * 1000) + DAY_MS // 2
                want = {d.name: sum(t.end_ms <= at_ms for t in fusion_turns(d.turns))
                        for d in (ada, bob)}
                assert by_user(prom, at_ms / 1000) == {k: v for k, v in want.items() if v}, days
            wait_for_pushes_after(prom, time.time())
            assert ada_tailer.stop() == 0
            bob_tailer.process.kill()
            bob_tailer.process.wait()
        # New sessions while both are down; then both start again from their checkpoints.
        ada.write(every_pattern("ada-c", NOW - timedelta(hours=5)))
        bob.write(every_pattern("bob-c", NOW - timedelta(hours=6)))
        with ada.tailer() as ada_tailer, bob.tailer() as bob_tailer:
            for tailer in (ada_tailer, bob_tailer):
                tailer.wait_for_log("history: pushed", timeout=120)
            wait_for_totals(prom, (ada, bob))
            wait_for_pushes_after(prom, time.time())
            assert by_user(prom) == {d.name: len(fusion_turns(d.turns)) for d in (ada, bob)}
        instances = prom.query("count by (instance) (hydrafusion_turns_total)")
        resets = prom.query("sum(resets(hydrafusion_turns_total[1d]))")
    assert len(instances) == 2  # the restarted tailers kept their ids
    assert single_value(resets) == 0
