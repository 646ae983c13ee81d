"""The canary test: no prompt, answer, tool text, error message or path ever leaves the tailer.

Every free-text field of the generated sessions (prompts, answers, leg `content`,
`projectionMessage`, `stagedTerminal`, handoff `message`, `errorMessage`, hints, tool
arguments and results, cwd and file paths) holds CANARY, and so do damaged lines and
unknown fields. The sessions hold ordinary turns, MCP tools, tool output long enough to be
read without decoding it, usage records (one damaged, some of unknown credits, one whose
`aiCreditsStatus` holds CANARY), and totals that disagree, so every
span, attribute, metric and log line of the whole turn is covered. The CLI's own telemetry
export, with its content capture on, holds CANARY in every attribute that is not metadata
(and a damaged line). Three more sessions hold free text, a path and a password (POISON,
tests/poison.py) where the log should hold machine codes: in every code field of every event
type (patterns, reasons, outcomes, verdicts, kinds, models, tools, an abort's reason), in
every id, and in every key. The tailer runs as a daemon with every output on; neither the
canary nor any part of POISON must be in any of them: OTLP payloads (spans, the CLI's
telemetry and the tailer's metrics push), the history pushed to Prometheus, /metrics, the
textfile, the log; nor in any format of the report (table, `--watch`, JSON, CSV, HTML), nor
in what `scrub` writes, nor in the footer's `statusline` (given the CLI's JSON with the canary
in its paths and its session name) or the state it saves. Beside the report's sessions is a
copy of the CLI's session store (`session-store.db`, its whole layout) with CANARY in every
text column of every table: the prompts and paths it keeps, and the text columns of its
ledger of calls; the report and doctor read its ledger, and show none of it.
"""

import io
import json
import os
import re
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ledgergen import canary_store, rows_of_log
from otlp_sink import OtlpSink
from poison import FRAGMENTS, poison_codes, write_poisoned_sessions
from prom import free_port
from sessiongen import CANARY, START, SessionWriter, every_pattern, retuned, whole_session
from tailerproc import ROOT, running_tailer, tailer_env

DAMAGED = [
    # A fusion event cut off mid-line by a crash, then a good line glued to NUL padding.
    '{"type":"assistant.fusion_phase_completed","data":{"content":"' + CANARY,
    "\0\0\0" + json.dumps({"type": "user.message", "data": {"content": CANARY}}),
    # Unknown fields and an unknown event type carrying text.
    json.dumps({"type": "session.fusion_resolved", "timestamp": "2026-11-04T12:00:00Z",
                "data": {"fusionId": "fusion-damaged", "pattern": "single",
                         "routingLatencyMs": 200, "newFreeText": CANARY,
                         "plan": {"why": CANARY}}}),
    json.dumps({"type": "session.fusion_explained", "timestamp": "2026-11-04T12:00:01Z",
                "data": {"fusionId": "fusion-damaged", "explanation": CANARY}}),
    # A line that is valid JSON but not an object, and one with wrong field types.
    json.dumps(["session.fusion_completed", CANARY]),
    json.dumps({"type": "session.fusion_completed", "timestamp": CANARY,
                "data": {"fusionId": "fusion-damaged"}}),
    json.dumps({"type": "session.fusion_completed", "timestamp": "2026-11-04T12:00:02Z",
                "data": {"fusionId": "fusion-damaged", "outcome": {"text": CANARY},
                         "pattern": "single", "errorMessage": CANARY}}),
    # Bytes that are not UTF-8 next to the canary.
    '{"type":"session.fusion_handoff","data":{"message":"' + CANARY + '\udcff"}}',
    # A usage record with text where figures belong, one with unknown text fields (in its
    # `copilotUsage` too), and tool events whose output is long enough to be read without
    # decoding it.
    json.dumps({"type": "session.usage_record", "timestamp": "2026-11-04T12:00:03Z",
                "data": {"usage": {"model": "m", "inputTokens": CANARY, "outputTokens": 1,
                                   "cost": 1, "duration": 5}}}),
    json.dumps({"type": "session.usage_record", "timestamp": "2026-11-04T12:00:04Z",
                "data": {"usage": {"model": "m", "inputTokens": 1, "outputTokens": 1, "cost": 1,
                                   "duration": 5, "note": CANARY, "label": {"why": CANARY},
                                   "aiCreditsStatus": CANARY,
                                   "copilotUsage": {"totalNanoAiu": 5, "model": CANARY,
                                                    "tokenDetails": [{"tokenType": CANARY}],
                                                    "why": CANARY}}}}),
    json.dumps({"type": "tool.execution_start", "timestamp": "2026-11-04T12:00:05Z",
                "data": {"toolCallId": "call-canary", "toolName": "bash",
                         "arguments": {"command": (CANARY + ' "\\",') * 500}}}),
    json.dumps({"type": "tool.execution_complete", "timestamp": "2026-11-04T12:00:06Z",
                "data": {"toolCallId": "call-canary", "success": False,
                         "error": {"message": (CANARY + ",\"") * 500},
                         "result": {"content": CANARY * 2000}}}),
]


# The CLI's own telemetry with content capture on: the canary in every attribute that is
# not metadata, in events, status, resource, metric points and descriptions.
CLI_EXPORT = [
    {"type": "span", "traceId": "66f506b430071b87151f2ff2ab35aca1", "spanId": "ad84e60a72de378a",
     "name": "invoke_agent", "kind": 0, "startTime": [1793793600, 0], "endTime": [1793793605, 0],
     "attributes": {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "privacy-0",
                    "gen_ai.input.messages": CANARY, "gen_ai.output.messages": CANARY,
                    "gen_ai.system_instructions": CANARY, "process.executable.path": CANARY,
                    "github.copilot.tool.parameters.command": CANARY, "new.field": CANARY},
     "status": {"code": 2, "message": CANARY},
     "events": [{"name": "exception", "time": [1793793601, 0],
                 "attributes": {"exception.message": CANARY,
                                "github.copilot.mcp.server.error": CANARY}}],
     "resource": {"attributes": {"service.name": "github-copilot", "host.name": CANARY}},
     "instrumentationScope": {"name": "github.copilot", "version": "1.0.102"}},
    {"type": "span", "traceId": "66f506b430071b87151f2ff2ab35aca1", "spanId": "e17a0fc1240dc535",
     "parentSpanId": "ad84e60a72de378a", "name": "execute_tool bash", "kind": 0,
     "startTime": [1793793602, 0], "endTime": [1793793603, 0],
     "attributes": {"gen_ai.tool.name": "bash", "gen_ai.tool.call.arguments": CANARY,
                    "gen_ai.tool.call.result": CANARY, "gen_ai.tool.description": CANARY},
     "resource": {"attributes": {"service.name": "github-copilot"}}},
    {"type": "metric", "name": "github.copilot.tool.call.count", "unit": CANARY,
     "description": CANARY, "resource": {"attributes": {"service.name": "github-copilot",
                                                        "user.name": CANARY}},
     "dataPoints": [{"attributes": {"gen_ai.tool.name": "bash", "error.message": CANARY},
                     "startTime": [1793793600, 0], "endTime": [1793793605, 0], "value": 1}]},
]


class RemoteWriteCapture:
    """Stands in for Prometheus's remote-write receiver: keeps the bodies and their
    headers (names lowercased), answers 204; over https with tls=(certificate file, key file)."""

    def __init__(self, tls=None):
        self.bodies = []
        self.headers = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                capture.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                capture.headers.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*map(str, tls))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}/api/v1/write"

    def __enter__(self):
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


def test_no_text_ever_leaves(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    expected = []
    writers = [every_pattern("privacy-0"), whole_session("privacy-1", totals_off_by=3),
               every_pattern("privacy-2", unpriced=0.5), retuned("privacy-3")]
    for writer in writers:
        path = writer.write(state)
        expected += writer.expected
    with open(path, "ab") as handle:
        for line in DAMAGED:
            handle.write(line.encode("utf-8", "surrogateescape") + b"\n")
    assert CANARY.encode() in path.read_bytes()
    write_poisoned_sessions(state, every_pattern)
    cli_otel = tmp_path / "otel"
    cli_otel.mkdir()
    lines = [json.dumps(record) for record in CLI_EXPORT] + ["{" + CANARY]
    (cli_otel / "copilot.jsonl").write_text("\n".join(lines) + "\n")

    textfile = tmp_path / "metrics.prom"
    with OtlpSink() as sink, RemoteWriteCapture() as history, running_tailer(
        tmp_path, "--state-dir", str(state), "--from-start", "--textfile", str(textfile),
        "--otlp-endpoint", sink.endpoint, "--log-level", "DEBUG",
        "--history-url", history.url, "--history-labels", "job=privacy,instance=test",
        "--cli-otel", str(cli_otel), metrics_port=free_port(), env=tailer_env(
            OTEL_METRICS_EXPORTER="otlp", OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.endpoint + "/v1/metrics",
            OTEL_METRIC_EXPORT_INTERVAL="500"),
    ) as tailer:
        tailer.wait_for_log(r" fusion fusion-", count=sum(t.kind != "ordinary" for t in expected) + 1)
        tailer.wait_for_log(r" ordinary prompt-", count=sum(t.kind == "ordinary" for t in expected))
        tailer.wait_for_log(r"our sums differ from the CLI's shutdown totals")
        tailer.wait_for_log(r"skipped line")
        tailer.wait_for_log(r"history: pushed", timeout=180)  # slow under load
        sink.wait_for_spans(len(expected), timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (sink.metric_requests and any(
                span["name"] == "invoke_agent" for span in sink.spans())):
            time.sleep(0.1)
        # The turn families show on /metrics at the save after the history went out.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "hydrafusion_turns_total{" not in tailer.metrics():
            time.sleep(0.1)
        scrapes = [tailer.metrics(), tailer.metrics()]
        assert tailer.stop() == 0
        bodies = list(sink.raw_bodies) + list(sink.metric_bodies)
        # The tailer's own pushes: the one at exit holds every series.
        pushed = [body for body in sink.metric_bodies if b"hydrafusion_turns_total" in body]

    outputs = {
        "OTLP": b"\n".join(bodies).decode(),
        "metrics push (OTLP)": b"\n".join(pushed).decode(),
        # Protobuf with literal-only snappy: the strings in it stand as they are.
        "history (remote write)": b"\n".join(history.bodies).decode("latin-1"),
        "/metrics": "\n".join(scrapes),
        "textfile": textfile.read_text(),
        "log": tailer.log(),
    }
    for name, text in outputs.items():
        assert text, f"{name} is empty: the test would prove nothing"
        assert CANARY not in text, f"the canary leaked into {name}"
        assert "CANARY" not in text.upper(), f"part of the canary leaked into {name}"
        for fragment in FRAGMENTS:
            assert fragment not in text, f"{fragment!r} of a code field leaked into {name}"
    # The poisoned sessions were read: their refusals counted, their bad keys seen.
    assert "hydrafusion other" in {span["name"] for span in sink.spans()}  # a poisoned pattern
    assert 'reason="bad_fusion_id"' in outputs["/metrics"]
    # Every kind of span was exported, the damage was seen and reported without its text.
    names = {span["name"].split(" ")[0] for span in sink.spans()}
    assert {"hydrafusion", "ordinary", "chat", "execute_tool", "route", "invoke_agent"} <= names
    assert sink.metric_requests, "the CLI's metric was not sent: the test would prove nothing"
    assert 'reason="damaged_usage_record"' in outputs["/metrics"]
    assert "hydrafusion_unknown_credit_calls_total{" in outputs["/metrics"]  # calls of unknown credits
    assert "aiu>=" in outputs["log"] or "aiu=unknown" in outputs["log"]
    assert "hydrafusion_reconciliations_total" in outputs["/metrics"]
    assert "malformed" in outputs["/metrics"]
    assert '"stringValue":"damaged_usage_record"' in outputs["metrics push (OTLP)"]
    assert "log format drift" in outputs["log"]
    # The router's ids went out (its ruleName and hint, which hold the canary, never did),
    # and a poisoned policyVersion went out as `other`.
    assert '"key":"hydrafusion.policy_version","value":{"stringValue":"2026-11-05"}' in outputs["OTLP"]
    assert '"key":"hydrafusion.rule_id"' in outputs["OTLP"]
    assert 'hydrafusion_router_turns_total{policy_version="2026-11-05"' in outputs["/metrics"]
    assert 'hydrafusion_router_turns_total{policy_version="other"' in outputs["/metrics"]
    assert "router policy_version=2026-11-05 first seen" in outputs["log"]
    assert "router policy_version=other first seen" in outputs["log"]


def test_no_text_in_any_report_format(tmp_path):
    """The report's table, JSON, CSV and HTML page, on the same sessions and damage, from a
    state folder whose path holds the canary too."""
    from report_helpers import run_report

    state = tmp_path / CANARY / "session-state"
    state.mkdir(parents=True)
    writers = [every_pattern("report-privacy-0"),
               whole_session("report-privacy-1", totals_off_by=3, unpriced=0.5),
               retuned("report-privacy-2")]
    calls = []
    for writer in writers:
        path = writer.write(state)
        calls += rows_of_log(path)
    # The CLI's session store beside it, the canary in every text column of every table.
    canary_store(state.parent / "session-store.db", CANARY, calls[1:])
    with open(path, "ab") as handle:
        for line in DAMAGED:
            handle.write(line.encode("utf-8", "surrogateescape") + b"\n")
    write_poisoned_sessions(state, every_pattern)
    write_poisoned_turn_in_flight(state)
    page = tmp_path / "report.html"
    outputs = {}
    # One cache for every run: the second run's reports read what the first ones cached.
    env = tailer_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    for name, options in (("table", []), ("JSON", ["--format", "json"]),
                          ("CSV", ["--format", "csv"]), ("worth CSV", ["--format", "csv-worth"]),
                          ("HTML", ["--html", str(page)]),
                          ("--by session", ["--by", "session", "--breakdown"]),
                          ("--by day JSON", ["--by", "day", "--format", "json"]),
                          ("--by session CSV", ["--by", "session", "--breakdown", "--format", "csv"])):
        for run in ("", " (from the cache)"):
            done = run_report("--state-dir", str(state), *options, env=env)
            assert done.returncode == 0, done.stderr
            outputs[name + run] = page.read_text() if name == "HTML" else done.stdout + done.stderr
    # Filters matching nothing: what there is instead, named (sessions, patterns, models, times).
    done = run_report("--state-dir", str(state), "--session", "none-such", "--pattern", "none-such",
                      "--model", "none-such", "--since", "2000-01-01", "--until", "2000-01-02", env=env)
    assert done.returncode == 1, done.stderr
    outputs["no match"] = done.stdout + done.stderr
    footer = statusline_lines(state, env)
    footer_states = sorted((tmp_path / "cache" / "hydrafusion" / "statusline").iterdir())
    assert footer_states, "no state of the footer's line was saved: the test would prove nothing"
    footer += "".join(path.read_text() for path in footer_states)
    caches = sorted(path for path in (tmp_path / "cache").rglob("*")
                    if path.is_file() and path not in footer_states)
    assert caches, "no cache was written: the test would prove nothing"
    for path in caches:
        outputs[f"the cache file {path.name}"] = path.read_text()
    outputs["--watch"] = watched(state)
    scrubbed = tmp_path / "scrubbed"
    done = subprocess.run([sys.executable, "-m", "tailer", "scrub", str(state), str(scrubbed)],
                          cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    outputs["scrub"] = done.stdout + done.stderr + "".join(
        path.read_text() for path in sorted(scrubbed.rglob("*")) if path.is_file())
    for name, text in outputs.items():
        assert "gpt-5.6-sol" in text, f"{name} holds no turn: the test would prove nothing"
        assert "CANARY" not in text.upper(), f"the canary leaked into the report's {name}"
        for fragment in FRAGMENTS:
            assert fragment not in text, f"{fragment!r} of a code field leaked into {name}"
    assert "5.6-sol" in footer and "other" in footer, "no turn in the footer's lines: proves nothing"
    assert "CANARY" not in footer.upper(), "the canary leaked into the footer's line"
    for fragment in FRAGMENTS:
        assert fragment not in footer, f"{fragment!r} of a code field leaked into the footer's line"
    assert "other" in outputs["JSON"], "no poisoned turn was reported: the test would prove nothing"
    ledger = json.loads(outputs["JSON"].partition("\n")[0])["ledger"]
    assert ledger["status"] == "checked", "the store was not read: the test would prove nothing"
    assert ledger["sessions_checked"] == 3 and ledger["only_in_ledger_unnamed"] == 1
    assert "3 sessions checked against the CLI's ledger, " in outputs["table"]
    assert re.search(r'"unknown_credit_calls":[1-9]', outputs["JSON"]) and "calls unknown" in outputs["table"]
    assert '"policy_version":"2026-11-05"' in outputs["JSON"]
    assert '"policy_version":"other"' in outputs["JSON"]
    assert "2026-11-05" in outputs["table"] and 'data-policy="2026-11-05"' in outputs["HTML"]
    in_flight = json.loads(outputs["JSON"].partition("\n")[0])["in_flight"]
    poisoned = [turn for turn in in_flight if turn["session_id"] == "poison-in-flight"]
    assert poisoned and "other" in json.dumps(poisoned), "no poisoned turn in flight: proves nothing"
    now_lines = outputs["--watch"].rpartition("now: ")[2].partition("\n\x1b[K\n")[0]
    assert "poison-i" in now_lines and "other" in now_lines, now_lines


def test_no_text_of_the_clis_session_store_reaches_any_output(tmp_path):
    """The CLI's session-store.db holds the prompts, the conversation's text and paths: with
    the canary in every text column of every table, the ledger is read (its calls compared,
    the sessions without a log listed) and no output of the report or doctor holds it. With
    the canary where a figure should be, the ledger is refused in one line, without it."""
    from report_helpers import run_report

    state = tmp_path / "copilot" / "session-state"
    writer = whole_session("0b5e1a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b")
    calls = rows_of_log(writer.write(state))
    store = state.parent / "session-store.db"
    # A call of a session without a log, its id the CLI's shape: listed, and nothing else.
    canary_store(store, CANARY, calls[1:] + [dict(calls[0], session_id="4c0ffee0-0000-4000-8000-00000000cafe")])
    page = tmp_path / "page.html"
    outputs = {}
    for name, options in (("table", []), ("JSON", ["--format", "json"]),
                          ("CSV", ["--format", "csv-calls"]), ("HTML", ["--html", str(page)])):
        done = run_report("--state-dir", str(state), *options)
        assert done.returncode == 0, done.stderr
        outputs[name] = done.stdout + done.stderr + (page.read_text() if name == "HTML" else "")
    done = subprocess.run([sys.executable, "-m", "tailer", "doctor", "--state-dir", str(state)],
                          cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=120)
    outputs["doctor"] = done.stdout + done.stderr
    ledger = json.loads(outputs["JSON"])["ledger"]
    assert ledger["status"] == "checked" and ledger["sessions_checked"] == 1
    assert [only["session_id"] for only in ledger["only_in_ledger"]] == ["4c0ffee0-0000-4000-8000-00000000cafe"]
    assert ledger["only_in_ledger_unnamed"] == 1  # the canary's own row, its id the canary
    assert "4c0ffee0" in outputs["table"] and "4c0ffee0" in outputs["doctor"] and "4c0ffee0" in outputs["HTML"]
    # And with the canary where a figure should be: refused, in words of our own.
    connection = sqlite3.connect(store)
    connection.execute(f"UPDATE assistant_usage_events SET output_tokens = '{CANARY}'")
    connection.commit()
    connection.close()
    done = run_report("--state-dir", str(state), "--format", "json")
    assert json.loads(done.stdout)["ledger"]["status"] == "not_read"
    outputs["JSON, the store refused"] = done.stdout + done.stderr
    for name, text in outputs.items():
        assert "CANARY" not in text.upper(), f"the canary leaked into the {name}"


def statusline_lines(state, env) -> str:
    """`statusline`'s lines (the default template and every field, read afresh and from
    its saved state) for every session, given the CLI's JSON with the canary in its paths
    and the session's name, as the CLI gives the first prompt's words there."""
    from tailer.statusline.options import FIELDS

    every_field = " ".join("{%s}" % name for name in FIELDS)
    lines = []
    for folder in sorted(path.parent for path in state.glob("*/events.jsonl")):
        status = json.dumps({"session_id": folder.name, "transcript_path": str(folder),
                             "session_name": CANARY, "cwd": f"/home/{CANARY}",
                             "workspace": {"current_dir": f"/home/{CANARY}"}}).encode()
        for template in ("HydraFusion {turn} · {session}", every_field, every_field):
            done = subprocess.run([sys.executable, "-m", "tailer", "statusline", "--format", template,
                                   "--width", "1000"], cwd=ROOT, env=env, input=status,
                                  capture_output=True, timeout=120, start_new_session=True)
            assert done.returncode == 0 and done.stderr == b"", done
            lines.append(done.stdout.decode())
    return "".join(lines)


def write_poisoned_turn_in_flight(state):
    """A session whose last turn, POISON in every code field, is cut off after its critics'
    calls: in flight, with a poisoned plan, in the JSON and the "now" lines."""
    writer = SessionWriter("poison-in-flight", START)
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6"], revision_model="gpt-5.6-sol")
    lines = writer.lines()
    handoff = next(i for i, line in enumerate(lines) if '"session.fusion_handoff"' in line)
    folder = state / "poison-in-flight"
    folder.mkdir()
    (folder / "events.jsonl").write_text("".join(
        json.dumps(poison_codes(json.loads(line))) + "\n" for line in lines[:handoff]))


def watched(state):
    """What `report --watch` draws of the state folder, until every turn has been shown."""
    from tailer.report.live import watch
    from tailer.report.read import Selection
    from tailer.copilot.watch import SessionWatcher

    out = io.StringIO()
    calls = []

    def terminal_size():
        calls.append(1)
        if len(calls) > 3:
            raise KeyboardInterrupt
        return os.terminal_size((160, 200))

    assert watch(state, Selection(), {}, out, color=False, terminal_size=terminal_size,
                 watcher=SessionWatcher(state, use_inotify=False)) == 0
    return out.getvalue()
