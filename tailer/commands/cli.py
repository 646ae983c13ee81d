"""Command line: the commands, their options and the environment variables behind them.

Every option can also be set by an environment variable (named in `--help`), because the
tailer usually runs in a container. The daemon itself is tailer/daemon/service.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Collection

from .. import __version__, invocation
from ..path_options import (check_output_file, exists, is_folder, ledger_path, nearest_existing,
                            user_path)
from ..printable import printable

if TYPE_CHECKING:
    from ..daemon.config import Config

# Start-up is part of every answer, so each command imports its own modules when it runs
# (in the functions below), never at the top here: `report` loads neither the daemon nor
# the exporters, `run` not the report, `--version` nothing (tests/test_imports.py).

COMMANDS = ("run", "demo", "scrub", "doctor", "report", "statusline", "completion")
EXIT_INTERRUPTED = 130  # the shells' code for a command ended by Ctrl-C
EXIT_USAGE = 2
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9464"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# The tailer's own setting, and the CLI's (README.md, "The CLI's own telemetry").
CLI_OTEL_ENV = "HYDRAFUSION_CLI_OTEL_PATH"
COPILOT_OTEL_PATH_ENV = "COPILOT_OTEL_FILE_EXPORTER_PATH"


def default_state_dir(environ: dict[str, str]) -> Path:
    # os.path.expanduser, as path_options.user_path: `~name` of no such user is no error.
    if environ.get("COPILOT_STATE_DIR"):
        return Path(os.path.expanduser(environ["COPILOT_STATE_DIR"]))
    if environ.get("COPILOT_HOME"):
        return Path(os.path.expanduser(os.path.join(environ["COPILOT_HOME"], "session-state")))
    # No home ($HOME unset, a uid the user database does not know: a container's): `~`
    # stays, a folder that does not exist, where Path.home raised RuntimeError.
    return Path(os.path.expanduser("~"), ".copilot", "session-state")


def otlp_url(option: str | None, environ: dict[str, str]) -> str | None:
    """The traces URL, or None for `none`. Raises ValueError for a URL that is not http(s).

    As the OpenTelemetry spec says, the signal-specific variable is used as it is, while a
    base endpoint (the option or OTEL_EXPORTER_OTLP_ENDPOINT) gets `/v1/traces` appended.
    """
    from ..outputs.otlp import traces_url

    return _signal_url(option, environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces_url)


def otlp_metrics_url(option: str | None, environ: dict[str, str]) -> str | None:
    """The metrics URL, found as the traces URL is (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)."""
    from ..outputs.otlp import metrics_url

    return _signal_url(option, environ, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", metrics_url)


def _signal_url(option: str | None, environ: dict[str, str], variable: str, url) -> str | None:
    if _is_none(option):
        return None
    if option is not None:  # given, even empty: an empty URL is refused, not the default
        return url(option)
    specific = environ.get(variable)
    if specific:
        url(specific)
        return specific.strip()
    return url(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318")


def default_cli_otel(environ: dict[str, str]) -> str:
    """Where the CLI writes its telemetry, if the environment says: the tailer run from the
    same shell as the CLI finds it there."""
    if environ.get(CLI_OTEL_ENV):
        return environ[CLI_OTEL_ENV]
    return environ.get(COPILOT_OTEL_PATH_ENV) or "none"


def metrics_push_url(option: str | None, environ: dict[str, str]) -> str | None:
    """The URL the tailer pushes its own metrics to, or None (the default) for no push.

    Off unless the option names an endpoint or OTEL_METRICS_EXPORTER says `otlp`, so a
    tailer that only sends traces to OTEL_EXPORTER_OTLP_ENDPOINT starts pushing nothing
    new. The endpoint is then found as otlp_metrics_url finds it.
    """
    exporters = {name.strip().lower() for name in environ.get("OTEL_METRICS_EXPORTER", "").split(",")}
    if option is None and "otlp" not in exporters:
        return None
    return otlp_metrics_url(option, environ)


def _export_interval_s(environ: dict[str, str]) -> float:
    """$OTEL_METRIC_EXPORT_INTERVAL, in milliseconds as every OpenTelemetry SDK reads it, as
    seconds (60 unset). ValueError when it is not a number: a variable has no usage line."""
    text = environ.get("OTEL_METRIC_EXPORT_INTERVAL") or "60000"
    try:
        return float(text) / 1000
    except ValueError:
        raise ValueError(f"$OTEL_METRIC_EXPORT_INTERVAL {text!r} is not a number of "
                         "milliseconds") from None


def _signal_setting(environ: dict[str, str], signal: str, setting: str) -> str:
    """OTEL_EXPORTER_OTLP_<SIGNAL>_<SETTING>, else OTEL_EXPORTER_OTLP_<SETTING>."""
    return (environ.get(f"OTEL_EXPORTER_OTLP_{signal}_{setting}")
            or environ.get(f"OTEL_EXPORTER_OTLP_{setting}") or "")


def _certificate(path: str, what: str) -> str | None:
    """A CA file for https, checked now so a wrong one is a usage error, not a retry loop."""
    from ..outputs.otlp import tls_context

    if not path:
        return None
    try:
        tls_context(path)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None
    return path


def history_endpoint(url: str, environ: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The remote-write URL without user:password, and the headers to send: basic auth of
    the URL's user:password, then HYDRAFUSION_HISTORY_HEADERS (the OTLP headers' format)."""
    import base64
    import urllib.parse

    from ..outputs.otlp import is_http_url, parse_headers

    parts = urllib.parse.urlsplit(url)
    if not is_http_url(parts):
        raise ValueError("--history-url is not an http(s) URL")
    headers = {}
    if parts.username is not None:
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    headers.update(parse_headers(environ.get("HYDRAFUSION_HISTORY_HEADERS", "")))
    return urllib.parse.urlunsplit(parts), headers


def _flag(environ: dict[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def build_parser(environ: dict[str, str],
                 options_of: Collection[str] = COMMANDS) -> argparse.ArgumentParser:
    """The command line: every command, with the options of those in `options_of`.

    Every command is listed with its help line; only the commands in `options_of` get
    their options, whose defaults and types come from the command's own modules. Running a
    command builds its options alone (parse_args), so it imports nothing of the others';
    the completion script and the docs take the whole parser.
    """
    parser = Parser(
        prog="hydrafusion-tailer",
        description=(
            "Follow GitHub Copilot CLI session logs and turn every HydraFusion turn into an "
            "OpenTelemetry trace, Prometheus metrics and a log line."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        command = commands.add_parser(name, help=COMMAND_HELP[name])
        if name in options_of:
            _OPTIONS[name](command, environ)
    return parser


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are a line and a hint, not the whole usage: a wrong
    value or option is named, with the command that lists the options as the user ran it."""

    def error(self, message: str):
        command = " ".join([invocation.command(), *self.prog.split()[1:]])
        self.exit(EXIT_USAGE, printable(f"{self.prog}: {message}") +
                  f"\n  (`{command} --help` lists the options)\n")


COMMAND_HELP = {
    "run": "follow the session logs (also what options alone run: `--once` is `run --once`)",
    "demo": "replay the fixture sessions in --state-dir at recent times, then a turn every "
    "--replay-interval seconds (what `docker compose --env-file demo.env up` runs)",
    "scrub": "copy session logs keeping only metadata that is safe to share",
    "doctor": "report whether the tailer still understands the session logs",
    "report": "print what HydraFusion did, read straight from the session logs "
    "(no daemon; nothing written but its cache; docs/REPORT.md)",
    "statusline": "print HydraFusion's line for Copilot CLI's footer, from the JSON the CLI "
    "pipes to its status line command; --install sets it up (docs/STATUSLINE.md)",
    "completion": "print a shell completion script (README.md: Shell completion)",
}


def _run_options(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    _add_run_options(parser, environ, "checkpoint.json", default_state_dir(environ),
                     "$COPILOT_STATE_DIR, else $COPILOT_HOME/session-state, else "
                     "~/.copilot/session-state")
    parser.add_argument(
        "--cli-otel", metavar="PATH|none", default=default_cli_otel(environ),
        help="the Copilot CLI's own OpenTelemetry file export (a file, or a folder of them) "
        "to follow and send on as OTLP, linked to the turns, or `none` [$HYDRAFUSION_CLI_"
        "OTEL_PATH, else $COPILOT_OTEL_FILE_EXPORTER_PATH, else none]",
    )


def _demo_options(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    from .demo import FIXTURES

    _add_run_options(parser, environ, "demo-checkpoint.json", FIXTURES,
                     "the bundled example sessions")
    parser.add_argument(
        "--replay-interval", type=_not_negative, metavar="SECONDS",
        default=environ.get("HYDRAFUSION_REPLAY_INTERVAL") or "30",
        help="how often a fixture turn is replayed [$HYDRAFUSION_REPLAY_INTERVAL, default 30]",
    )


def _scrub_options(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    parser.add_argument("src", type=user_path, metavar="SRC",
                        help="a session-state folder, or one session folder")
    parser.add_argument("dst", type=user_path, metavar="DST", help="a new or empty folder")
    parser.add_argument(
        "--seed", type=_nonempty,
        help="makes the new ids reproducible; only for fixtures (a known seed lets "
        "anyone check a guessed session id)",
    )


def _doctor_options(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    parser.add_argument(
        "--state-dir", type=user_path, default=default_state_dir(environ),
        help="Copilot session-state folder [$COPILOT_STATE_DIR, else "
        "$COPILOT_HOME/session-state, else ~/.copilot/session-state]",
    )
    parser.add_argument(
        "--ledger", type=ledger_path, metavar="FILE|none",
        help="the Copilot CLI's own ledger of model calls to check the logs against, or "
        "`none` [default: session-store.db beside the state folder]",
    )
    parser.add_argument(
        "--cli", nargs="?", const="", metavar="PATH",
        help="check the installed Copilot CLI's own event schema instead of the logs: "
        "session-events.schema.json, or a folder holding it [default: the newest version "
        "in $XDG_CACHE_HOME/copilot/pkg or ~/.cache/copilot/pkg]",
    )


def _report_options(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    from ..report import command as report

    report.add_arguments(parser, default_state_dir(environ))


def _statusline_options(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    from ..statusline import command as statusline

    statusline.add_arguments(parser, environ)


def _completion_options(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    from . import completion

    parser.add_argument("shell", choices=completion.SHELLS, type=str.lower)


_OPTIONS = {"run": _run_options, "demo": _demo_options, "scrub": _scrub_options,
            "doctor": _doctor_options, "report": _report_options,
            "statusline": _statusline_options, "completion": _completion_options}


def _add_run_options(
    parser: argparse.ArgumentParser, environ: dict[str, str], checkpoint_name: str,
    state_dir: Path, state_dir_default: str,
) -> None:
    """The options of `run` and `demo`; each has a checkpoint of its own by default, so a
    demo never takes over the real sessions' state, and sessions of its own: the demo's are
    the bundled ones, wherever the package is installed, not the CLI's folder."""
    from ..daemon import checkpoint
    from ..daemon.config import ONCE_TIMEOUT_S
    from ..turns.assembly import IDLE_TIMEOUT_S

    parser.add_argument("--state-dir", type=user_path, default=state_dir,
                        help=f"Copilot session-state folder [{state_dir_default}]")
    parser.add_argument(
        "--wait-for-state-dir", action="store_true",
        default=_flag(environ, "HYDRAFUSION_WAIT_FOR_STATE_DIR"),
        help="wait for a missing state folder to appear instead of exiting "
        "[$HYDRAFUSION_WAIT_FOR_STATE_DIR]",
    )
    parser.add_argument(
        "--otlp-endpoint", metavar="URL|none",
        help="OTLP/HTTP endpoint, or `none` to export no traces [$OTEL_EXPORTER_OTLP_TRACES_"
        "ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318]; also reads "
        "$OTEL_EXPORTER_OTLP_HEADERS, $OTEL_RESOURCE_ATTRIBUTES, $OTEL_SERVICE_NAME",
    )
    parser.add_argument(
        "--otlp-metrics-endpoint", metavar="URL|none",
        help="also push the metrics over OTLP/HTTP to URL (a base endpoint: /v1/metrics is "
        "appended), or `none` [on when $OTEL_METRICS_EXPORTER is otlp: "
        "$OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT, else "
        "http://localhost:4318; default none]; also reads $OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    )
    parser.add_argument(
        "--otlp-metrics-interval", type=float, metavar="SECONDS",
        help="seconds between pushes; one more at exit [$OTEL_METRIC_EXPORT_INTERVAL in "
        "milliseconds, default 60 s]",
    )
    parser.add_argument(
        "--metrics-address", metavar="HOST:PORT|none",
        default=environ.get("HYDRAFUSION_METRICS_ADDRESS") or DEFAULT_METRICS_ADDRESS,
        help="where to serve /metrics, or `none` [$HYDRAFUSION_METRICS_ADDRESS, "
        "default 127.0.0.1:9464]",
    )
    parser.add_argument(
        "--textfile", type=user_path, metavar="FILE",
        default=environ.get("HYDRAFUSION_TEXTFILE") or None,
        help="also write the metrics to FILE after each change and at exit, for "
        "node_exporter's textfile collector [$HYDRAFUSION_TEXTFILE]",
    )
    parser.add_argument(
        "--from-start", action="store_true", default=_flag(environ, "HYDRAFUSION_FROM_START"),
        help="read logs that exist at start from their beginning; otherwise from their end "
        "[$HYDRAFUSION_FROM_START]",
    )
    parser.add_argument(
        "--checkpoint", type=user_path, metavar="FILE",
        default=(environ.get("HYDRAFUSION_CHECKPOINT")
                 or checkpoint.default_path(environ, checkpoint_name)),
        help="where the tailer keeps its state between runs [$HYDRAFUSION_CHECKPOINT, default "
        f"$XDG_STATE_HOME/hydrafusion/{checkpoint_name} or ~/.local/state/hydrafusion/…]",
    )
    parser.add_argument(
        "--once", action="store_true", default=_flag(environ, "HYDRAFUSION_ONCE"),
        help="read what is new in every log (logs the saved state does not know: from their "
        "beginning), export, save the state, write the textfile and exit; turns still open "
        "stay in the saved state for the next run [$HYDRAFUSION_ONCE]",
    )
    parser.add_argument(
        "--once-timeout", type=_not_negative, metavar="SECONDS",
        default=environ.get("HYDRAFUSION_ONCE_TIMEOUT") or f"{ONCE_TIMEOUT_S:g}",
        help="how long a --once run waits for a collector that does not take its spans "
        "yet (one asking it to retry later); what is left then is kept for the next run "
        f"[$HYDRAFUSION_ONCE_TIMEOUT, default {ONCE_TIMEOUT_S:g}]",
    )
    parser.add_argument(
        "--backfill-days", type=_not_negative, metavar="DAYS",
        default=environ.get("HYDRAFUSION_BACKFILL_DAYS") or None,
        help="with --from-start, read from their beginning only the logs written in the last "
        "DAYS days; older ones from their end [$HYDRAFUSION_BACKFILL_DAYS, default: no limit]",
    )
    parser.add_argument(
        "--history-url", metavar="URL|none",
        default=environ.get("HYDRAFUSION_HISTORY_URL") or "none",
        help="Prometheus remote-write URL (e.g. http://localhost:9090/api/v1/write) to which "
        "turns read at start-up are pushed at the times they happened, or `none` "
        "[$HYDRAFUSION_HISTORY_URL, default none]",
    )
    parser.add_argument(
        "--history-labels", type=_labels, metavar="NAME=VALUE,...",
        default=environ.get("HYDRAFUSION_HISTORY_LABELS") or "",
        help="the labels Prometheus gives the tailer's series when it scrapes them (job and "
        "instance), so history and scrapes are one series; when the metrics are pushed, by "
        "default the labels the pushed series get [$HYDRAFUSION_HISTORY_LABELS]; also reads "
        "$HYDRAFUSION_HISTORY_HEADERS and $HYDRAFUSION_HISTORY_CERTIFICATE",
    )
    parser.add_argument(
        "--idle-timeout", type=_not_negative, metavar="SECONDS",
        # A string default goes through `type`, so a bad variable is a usage error too.
        default=environ.get("HYDRAFUSION_IDLE_TIMEOUT") or f"{IDLE_TIMEOUT_S:g}",
        help="finish a turn as incomplete when its session log has not changed for this "
        f"long [$HYDRAFUSION_IDLE_TIMEOUT, default {IDLE_TIMEOUT_S:g}]",
    )
    parser.add_argument(
        "--log-level", type=_log_level, default=environ.get("HYDRAFUSION_LOG_LEVEL") or "INFO",
        help="DEBUG, INFO, WARNING or ERROR [$HYDRAFUSION_LOG_LEVEL, default INFO]",
    )


def _is_none(value: str | None) -> bool:
    """`none`, the word that turns an output off, in any case (`--otlp-endpoint NONE`)."""
    return value is not None and value.strip().lower() == "none"


def _cli_otel_path(value: str) -> Path | None:
    return None if value.strip().lower() in ("", "none") else user_path(value)


def _nonempty(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty value")
    return value


def _not_negative(value: str) -> float:
    """A number of seconds or days, 0 or more: a negative or NaN one would make the daemon
    end every turn at once or read nothing, without a word (0 is the tests' "at once")."""
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of 0 or more, got {value!r}")
    return number


def _labels(value: str) -> dict[str, str]:
    labels = {}
    for pair in filter(None, (item.strip() for item in value.split(","))):
        name, separator, label_value = pair.partition("=")
        if not separator or not name.strip():
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {pair!r}")
        labels[name.strip()] = label_value.strip()
    return labels


def _log_level(value: str) -> str:
    if value.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(LOG_LEVELS)}")
    return value.upper()


def parse_args(argv: list[str], environ: dict[str, str]) -> argparse.Namespace:
    """`run` is the command when options come first, so `hydrafusion-tailer --once` works
    too; with nothing at all, the commands and what each does (exit 2): a daemon started by
    a bare `python3 -m tailer` surprises. The image names `run` (tailer/Dockerfile). A word
    that is no command, or an option the command does not have, is named with the closest
    one there is. SystemExit for each of these, and for argparse's own errors."""
    if not argv:
        print(commands_text(), file=sys.stderr)
        sys.exit(EXIT_USAGE)
    if argv[0] not in (*COMMANDS, "-h", "--help", "--version"):
        if not argv[0].startswith("-"):
            _unknown("hydrafusion-tailer", "command", argv[0], COMMANDS, "")
        argv = ["run", *argv]
    parser = build_parser(environ, options_of=argv[:1])
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _subparsers(parser)[args.command]
        name = unknown[0].partition("=")[0] if unknown[0].startswith("-") else unknown[0]
        if not name.startswith("-"):
            _usage_error(f"{command.prog}: unexpected argument {name}", f" {args.command}")
        options = [flag for action in command._actions for flag in action.option_strings]
        _unknown(command.prog, "option", name, options, f" {args.command}")
    return args


def commands_text() -> str:
    """What a bare command prints: the commands, what each does, where to read more."""
    import textwrap

    command = invocation.command()
    lines = [f"usage: {command} COMMAND [OPTION...]", "", "commands:"]
    for name in COMMANDS:
        lines += textwrap.wrap(COMMAND_HELP[name], 98, initial_indent=f"  {name:<12}",
                               subsequent_indent=" " * 14)
    return "\n".join(lines + ["", f"`{command} COMMAND --help` lists a command's options."])


def _unknown(prog: str, what: str, name: str, known: Collection[str], command: str) -> None:
    """Exit 2 naming `name`, which is no `what` of `prog`, and the closest of `known` (by
    their names without dashes, which every option shares)."""
    import difflib

    names = {option.lstrip("-"): option for option in known}
    closest = difflib.get_close_matches(name.lstrip("-"), names, n=1)
    guess = f"; did you mean {names[closest[0]]}?" if closest else ""
    _usage_error(f"{prog}: no {what} {name}{guess}", command,
                 "commands" if what == "command" else "options")


def _usage_error(message: str, command: str, listed: str = "options") -> None:
    print(printable(message) + f"\n  (`{invocation.command()}{command} --help` lists the {listed})",
          file=sys.stderr)
    sys.exit(EXIT_USAGE)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    # argparse has no public way to reach a subcommand's parser (completion.py reads the same)
    return next(action.choices for action in parser._actions
                if isinstance(action, argparse._SubParsersAction))


def parse_address(value: str) -> tuple[str, int]:
    """HOST:PORT, an IPv6 host in brackets (`[::1]:9464`); an empty host is every IPv4 one."""
    host, separator, port = value.rpartition(":")
    # bind raises TypeError on a host of undecodable argv bytes (surrogates); int() takes
    # "٣" as 3 and isdigit takes "²", which int() refuses without naming the option.
    if (not separator or not host.isprintable() or not (port.isascii() and port.isdigit())
            or int(port) > 65535):
        raise ValueError(f"--metrics-address: expected HOST:PORT or none, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    args = parse_args(sys.argv[1:] if argv is None else argv, environ)
    if args.command == "doctor":
        from . import doctor

        if args.cli is not None and args.state_dir != default_state_dir(environ):
            _usage_error("hydrafusion-tailer doctor: --cli checks the CLI's event schema, no "
                         "session logs: it takes no --state-dir", " doctor")
        return _until_stopped(lambda: doctor.main(args, environ))
    if args.command == "scrub":
        from . import scrub

        return _until_stopped(lambda: scrub.main(args))
    if args.command == "report":
        return _report(args, environ)
    if args.command == "statusline":
        from ..statusline import command as statusline

        return statusline.main(args, environ)
    if args.command == "completion":
        from . import completion

        print(completion.script(build_parser(environ), args.shell), end="")
        return 0
    return _run(args, environ)


def _run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    """`run` and `demo`: the daemon, logging to stderr."""
    import logging

    from ..daemon import service
    from ..outputs import logs

    try:
        config = run_config(args, environ)
    except ValueError as error:
        print(printable(f"hydrafusion-tailer: {error}"), file=sys.stderr)
        return service.EXIT_USAGE
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logs.PrintableFormatter("%(asctime)s %(levelname)s %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    # The format shows no thread or process: not looking them up for every record takes
    # a quarter off the cost of the line logged per turn (the logging HOWTO's advice).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    if args.command == "demo":
        from .demo_run import run_demo

        return run_demo(config, args.replay_interval)
    return service.run(config)


def _report(args: argparse.Namespace, environ: dict[str, str]) -> int:
    """The report: its demo on a copy of the fixtures, made and removed here."""
    from ..report import command as report

    if args.demo and args.state_dir != default_state_dir(environ):
        # Judged by its value: $COPILOT_STATE_DIR, set for every report, is no mistake.
        return report.refused(ValueError("--demo reports on the bundled example sessions: "
                                         "it takes no --state-dir"))
    # A watch ends on a stop with 0 (live.watch): also one stopped before it draws, while
    # the demo copies its fixtures, which exited 130.
    stopped = 0 if args.watch else EXIT_INTERRUPTED
    if args.demo:
        from .demo_report import report_demo

        return _until_stopped(lambda: report_demo(args, environ), stopped)
    return _until_stopped(lambda: report.main(args, environ), stopped)


def _until_stopped(command, stopped: int = EXIT_INTERRUPTED) -> int:
    """`command()`, which SIGTERM and SIGHUP end as Ctrl-C does (commands/stops.py): what
    it made is removed, and it exits `stopped` (130 but for a --watch) without a
    traceback."""
    from . import stops

    try:
        with stops.as_interrupt():
            return command()
    except KeyboardInterrupt:
        return stopped


def _ignored(args: argparse.Namespace, environ: dict[str, str], push_url: str | None,
             history_url: str | None) -> str | None:
    """Why an option typed for `run` or `demo` would do nothing in this run, or None. An
    option its variable could have set is judged only when the variable is not set: one is
    often set for every run (the stack sets several), and is no mistake of the run's."""
    if args.once and args.wait_for_state_dir and not _flag(environ, "HYDRAFUSION_WAIT_FOR_STATE_DIR"):
        return "--once does not wait for the state folder: leave --wait-for-state-dir out"
    if (args.once and not _is_none(args.metrics_address)
            and not environ.get("HYDRAFUSION_METRICS_ADDRESS")
            and args.metrics_address != DEFAULT_METRICS_ADDRESS):
        return ("--once serves no /metrics (its figures go to --textfile): leave "
                "--metrics-address out")
    if args.otlp_metrics_interval is not None and push_url is None:
        return ("--otlp-metrics-interval is how often the metrics are pushed: it needs "
                "--otlp-metrics-endpoint (or OTEL_METRICS_EXPORTER=otlp)")
    if (args.history_labels and not environ.get("HYDRAFUSION_HISTORY_LABELS")
            and history_url is None and push_url is None):
        return ("--history-labels label the history (--history-url) or the pushed metrics "
                "(--otlp-metrics-endpoint): give one of them, or leave it out")
    cli_otel = getattr(args, "cli_otel", "none")
    if (not _is_none(cli_otel) and cli_otel != default_cli_otel(environ)
            and _is_none(args.otlp_endpoint)):
        return ("--cli-otel relays the CLI's telemetry with the traces: it takes no "
                "--otlp-endpoint none")
    return None


def run_config(args: argparse.Namespace, environ: dict[str, str]) -> Config:
    """The options of `run` or `demo` as the daemon takes them; ValueError when they are off."""
    from ..daemon.config import Config, resource_attributes
    from ..outputs.exposition import ZERO_HOLD_SECONDS
    from ..outputs.otlp import parse_headers

    # A metrics server would live for a moment only under --once: the textfile serves.
    bind = None if _is_none(args.metrics_address) else parse_address(args.metrics_address)
    serve = bind is not None and not args.once
    push_url = metrics_push_url(args.otlp_metrics_endpoint, environ)
    history_url, history_headers = None, {}
    if not _is_none(args.history_url):
        history_url, history_headers = history_endpoint(args.history_url, environ)
        pushed = push_url is not None and not args.history_labels
        if not pushed and not {"job", "instance"} <= set(args.history_labels):
            raise ValueError("--history-url needs --history-labels job=...,instance=..., "
                             "or the metrics pushed (--otlp-metrics-endpoint)")
    ignored = _ignored(args, environ, push_url, history_url)
    if ignored:
        raise ValueError(ignored)
    if args.textfile is not None:
        check_output_file("--textfile", args.textfile)
        # Each save's textfile would replace the checkpoint: every run then afresh.
        if os.path.realpath(args.textfile) == os.path.realpath(args.checkpoint):
            raise ValueError(f"--textfile {printable(str(args.textfile))} is the checkpoint: "
                             "give each a file of its own")
    if is_folder("--checkpoint", args.checkpoint):  # it would be moved aside as unreadable and replaced
        raise ValueError(f"--checkpoint {printable(str(args.checkpoint))} is a folder: give a file name")
    # Nor moved aside as a damaged checkpoint: `/dev/null` (or the link at `/dev/stdout`)
    # renamed, as root, is the machine's own gone.
    if exists("--checkpoint", args.checkpoint) and not os.path.isfile(args.checkpoint):
        raise ValueError(f"--checkpoint {printable(str(args.checkpoint))} is not a regular file: "
                         "give a file name")
    # Its folders are made as needed, but not through a file: the load would fail, and ask
    # that a checkpoint which is not there be moved aside.
    folder = nearest_existing(args.checkpoint.parent)
    if not is_folder("--checkpoint", folder):
        raise ValueError(f"--checkpoint {printable(str(args.checkpoint))}: "
                         f"{printable(str(folder))} is not a folder")
    # Never saved, it would have every restart export the same turns again.
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--checkpoint {printable(str(args.checkpoint))}: "
                         f"{printable(str(folder))} is not writable")
    is_folder("--state-dir", args.state_dir)  # one that cannot be looked at is refused now
    push_interval_s = args.otlp_metrics_interval
    if push_interval_s is None:
        push_interval_s = _export_interval_s(environ)
    if not 0 < push_interval_s <= ZERO_HOLD_SECONDS:
        # A new series is pushed at zero for ZERO_HOLD_SECONDS (Registry.collect_pushed):
        # a longer interval could skip that zero, and increase() would miss the first count.
        raise ValueError(f"the metrics push interval must be above 0 and at most "
                         f"{ZERO_HOLD_SECONDS:g} s, got {push_interval_s:g}")
    return Config(
        state_dir=args.state_dir,
        checkpoint=args.checkpoint,
        idle_timeout_s=args.idle_timeout,
        from_start=args.from_start,
        once=args.once,
        once_timeout_s=args.once_timeout,
        wait_for_state_dir=args.wait_for_state_dir,
        backfill_days=args.backfill_days,
        metrics_bind=bind if serve else None,
        traces_url=otlp_url(args.otlp_endpoint, environ),
        otlp_metrics_url=otlp_metrics_url(args.otlp_endpoint, environ),
        cli_otel=_cli_otel_path(getattr(args, "cli_otel", "none")),
        otlp_headers=parse_headers(environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")),
        traces_certificate=_certificate(_signal_setting(environ, "TRACES", "CERTIFICATE"),
                                        "OTEL_EXPORTER_OTLP_CERTIFICATE"),
        metrics_push_url=push_url,
        metrics_push_headers=parse_headers(_signal_setting(environ, "METRICS", "HEADERS")),
        metrics_push_certificate=_certificate(
            _signal_setting(environ, "METRICS", "CERTIFICATE"),
            "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE"),
        metrics_push_interval_s=push_interval_s,
        resource=resource_attributes(environ),
        textfile=args.textfile,
        history_url=history_url,
        history_labels=args.history_labels,
        history_headers=history_headers,
        history_certificate=_certificate(environ.get("HYDRAFUSION_HISTORY_CERTIFICATE", ""),
                                         "HYDRAFUSION_HISTORY_CERTIFICATE"),
    )
