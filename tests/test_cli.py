"""Options, environment variables, entry points."""

import subprocess
import sys
from pathlib import Path

import pytest

from otlp_sink import OtlpSink
from tailer.commands.cli import (COPILOT_OTEL_PATH_ENV, build_parser, default_state_dir, otlp_url,
                                 parse_address, parse_args, run_config)
from tailerproc import ROOT, run_once, tailer_env
from sessiongen import every_pattern


def test_state_dir_precedence():
    assert default_state_dir({"COPILOT_STATE_DIR": "/a", "COPILOT_HOME": "/b"}) == Path("/a")
    assert default_state_dir({"COPILOT_HOME": "/b"}) == Path("/b", "session-state")
    assert default_state_dir({}) == Path.home() / ".copilot" / "session-state"


def test_a_cli_telemetry_path_with_a_tilde_of_no_such_user_is_a_path_as_typed():
    """`run --cli-otel=~nobody/x` (after `=`, the shell expands no `~`) or such a
    $COPILOT_OTEL_FILE_EXPORTER_PATH: Path.expanduser raised RuntimeError, a traceback as
    run started. As for the other path options (path_options.user_path), the path stays
    as typed, as a shell leaves it; `~` alone is still the home folder."""
    gone = "~no-such-user-of-the-tailer/otel.jsonl"
    for args, environ in ((["run", f"--cli-otel={gone}"], {}),
                          (["run"], {COPILOT_OTEL_PATH_ENV: gone})):
        assert run_config(parse_args(args, environ), environ).cli_otel == Path(gone)
    mine = run_config(parse_args(["run", "--cli-otel=~/otel.jsonl"], {}), {}).cli_otel
    assert mine == Path.home() / "otel.jsonl"


def test_otlp_endpoint_precedence():
    assert otlp_url(None, {}) == "http://localhost:4318/v1/traces"
    generic = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}
    assert otlp_url(None, generic) == "http://c:4318/v1/traces"
    specific = dict(generic, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="https://t.example/ingest")
    assert otlp_url(None, specific) == "https://t.example/ingest"
    assert otlp_url("http://flag:4318", specific) == "http://flag:4318/v1/traces"
    assert otlp_url("http://flag:4318/v1/traces", {}) == "http://flag:4318/v1/traces"
    assert otlp_url("none", specific) is None
    with pytest.raises(ValueError):
        otlp_url(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "localhost:4318"})


@pytest.mark.parametrize("value, address", [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)), (":9464", ("0.0.0.0", 9464)),
    ("[::1]:9464", ("::1", 9464)), ("[::]:0", ("::", 0)), ("localhost:65535", ("localhost", 65535)),
])
def test_metrics_addresses(value, address):
    assert parse_address(value) == address


@pytest.mark.parametrize("value", ["9464", "[::1]", "host:", "host:port", "host:65536", "h:-1"])
def test_bad_metrics_addresses(value):
    with pytest.raises(ValueError):
        parse_address(value)


@pytest.mark.parametrize("value", ["\udcff:9464", "a\x01:9464", "host:\u00b2", "host:\u0663"])
def test_metrics_addresses_of_odd_characters_are_refused(value):
    """A host of argv bytes that are no UTF-8 ended in bind's TypeError, a traceback; a port
    of "²" passed isdigit, then int() refused it without naming the option; "٣" was port 3."""
    with pytest.raises(ValueError, match="--metrics-address"):
        parse_address(value)


def test_every_option_has_an_environment_variable():
    environ = {
        "COPILOT_STATE_DIR": "/s", "HYDRAFUSION_WAIT_FOR_STATE_DIR": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "HYDRAFUSION_METRICS_ADDRESS": "none",
        "HYDRAFUSION_TEXTFILE": "/t.prom", "HYDRAFUSION_FROM_START": "1",
        "HYDRAFUSION_ONCE": "yes", "HYDRAFUSION_IDLE_TIMEOUT": "60",
        "HYDRAFUSION_LOG_LEVEL": "DEBUG",
    }
    args = parse_args(["run"], environ)
    assert (args.command, args.state_dir, args.wait_for_state_dir) == ("run", Path("/s"), True)
    assert (otlp_url(args.otlp_endpoint, environ), args.metrics_address) == (
        "http://c:4318/v1/traces", "none")
    assert (args.textfile, args.from_start, args.once) == (Path("/t.prom"), True, True)
    assert (args.idle_timeout, args.log_level) == (60.0, "DEBUG")
    defaults = parse_args(["run"], {})
    assert (defaults.metrics_address, defaults.idle_timeout) == ("127.0.0.1:9464", 1800.0)
    assert not (defaults.from_start or defaults.once or defaults.wait_for_state_dir)


def test_help_names_the_environment_variable_of_every_option():
    run_parser = build_parser({})._subparsers._group_actions[0].choices["run"]
    help_text = run_parser.format_help()
    for action in run_parser._actions:
        if action.option_strings and action.dest != "help":
            assert "$" in (action.help or ""), action.option_strings
    for variable in ("COPILOT_STATE_DIR", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_SERVICE_NAME",
                     "OTEL_RESOURCE_ATTRIBUTES", "HYDRAFUSION_METRICS_ADDRESS"):
        assert variable in help_text.replace("\n", "").replace(" ", "")


def test_run_is_the_default_command():
    assert parse_args(["--once"], {}).once
    assert parse_args(["run", "--once"], {}).once


def test_otel_environment_reaches_the_collector(tmp_path):
    every_pattern("otel-env").write(tmp_path)
    with OtlpSink() as sink:
        env = tailer_env(
            OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint,
            OTEL_EXPORTER_OTLP_HEADERS="x-api-key=s%3Dcret,x-team=obs",
            OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test,host.name=laptop",
            OTEL_SERVICE_NAME="my-fusion",
            HYDRAFUSION_METRICS_ADDRESS="none",
        )
        result = run_once("--state-dir", str(tmp_path), env=env)
        assert result.returncode == 0, result.stderr
        spans = sink.spans()
        headers = sink.request_headers[0]
    assert headers["x-api-key"] == "s=cret" and headers["x-team"] == "obs"
    assert headers["content-encoding"] == "gzip"
    assert headers["content-type"] == "application/json"
    resource = spans[0]["resource"]
    assert resource["service.name"] == "my-fusion"
    assert resource["deployment.environment"] == "test"


def test_bad_option_values_exit_2_with_one_line(tmp_path):
    result = run_once("--state-dir", str(tmp_path), "--otlp-endpoint", "ftp://x")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    bad = subprocess.run(
        [sys.executable, "-m", "tailer", "--state-dir", str(tmp_path), "--metrics-address",
         "nonsense"], cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("variable, value", [
    ("HYDRAFUSION_IDLE_TIMEOUT", "soon"), ("HYDRAFUSION_LOG_LEVEL", "LOUD"),
])
def test_bad_environment_values_are_usage_errors(tmp_path, variable, value):
    result = run_once("--state-dir", str(tmp_path), "--otlp-endpoint", "none",
                      env=tailer_env(**{variable: value}))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_once_fails_when_the_collector_refuses_the_spans(tmp_path):
    every_pattern("refused").write(tmp_path)
    with OtlpSink() as sink:
        sink.script(*[400] * 50)
        result = run_once("--state-dir", str(tmp_path), "--otlp-endpoint", sink.endpoint)
    assert result.returncode == 1
    assert "400" in result.stderr


def test_console_script_is_installed(tmp_path):
    """`pip install .` gives a `hydrafusion-tailer` command (installed here into a folder)."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--target", str(target), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    script = target / "bin" / "hydrafusion-tailer"
    result = subprocess.run([sys.executable, str(script), "--version"], capture_output=True,
                            text=True, env=tailer_env(PYTHONPATH=str(target)), timeout=60)
    assert result.returncode == 0 and "hydrafusion-tailer 0.1.0" in result.stdout


def test_module_entry_point_help():
    result = subprocess.run([sys.executable, "-m", "tailer", "--help"], cwd=ROOT,
                            capture_output=True, text=True, env=tailer_env(), timeout=60)
    assert result.returncode == 0 and "run" in result.stdout


def test_demo_command_replays_the_fixtures_and_keeps_adding_turns(tmp_path):
    from fixture_truth import FIXTURES, fixture_turns
    from tailerproc import running_tailer

    with running_tailer(tmp_path, "--state-dir", str(FIXTURES), "--otlp-endpoint", "none",
                        "--replay-interval", "1", command="demo") as tailer:
        tailer.wait_for_log(r" fusion fusion-", count=len(fixture_turns()) + 2, timeout=90)
        assert tailer.stop() == 0


def test_scrub_command_removes_every_text(tmp_path):
    from sessiongen import CANARY

    raw = tmp_path / "raw"
    every_pattern("to-share").write(raw)
    result = subprocess.run(
        [sys.executable, "-m", "tailer", "scrub", str(raw), str(tmp_path / "clean")],
        cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    [log] = (tmp_path / "clean").glob("*/events.jsonl")
    assert CANARY not in log.read_text() and "to-share" not in str(log)
    again = run_once("--state-dir", str(tmp_path / "clean"), "--otlp-endpoint", "none")
    assert again.stderr.count(" fusion fusion-") == 9


def test_bad_history_options_are_usage_errors(tmp_path):
    for extra in (["--history-url", "foo"],
                  ["--history-url", "http://localhost:9090/api/v1/write"],
                  ["--history-url", "http://p/api/v1/write", "--history-labels", "job"]):
        result = run_once("--state-dir", str(tmp_path), "--otlp-endpoint", "none", *extra)
        assert result.returncode == 2, extra
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("url", ["http://h:99999", "http://h:-1", "http://h:\u0663", "http://h:1_0",
                                 "http://:4318", "http://a\x01b:4318", "http://\udcff:4318"])
def test_urls_no_request_can_go_to_are_refused_at_start(url):
    """Taken at start, each failed in its request alone: the traces were dropped or retried
    for ever, the metrics push ended in a traceback, the history was never sent."""
    for args in (["run", "--otlp-endpoint", url], ["run", "--otlp-metrics-endpoint", url],
                 ["run", "--history-url", url, "--history-labels", "job=a,instance=b"]):
        with pytest.raises(ValueError, match="http"):
            run_config(parse_args(args, {}), {})


def test_demo_keeps_a_checkpoint_of_its_own():
    run_args, demo_args = parse_args(["run"], {}), parse_args(["demo"], {})
    assert run_args.checkpoint != demo_args.checkpoint
    assert demo_args.checkpoint.name == "demo-checkpoint.json"
