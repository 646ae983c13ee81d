"""Run the real Prometheus, and promtool, at the version and with the features the stack uses.

    with running_prometheus(tmp_path, targets=["127.0.0.1:9464"], scrape_interval="1s") as prom:
        prom.wait_for("up", lambda result: single_value(result) == 1)
        prom.query('increase(x_total[1m] anchored)')   # the API's "result" list
    promtool("check", "rules", path)                    # a CompletedProcess

The binaries are the ones docker-compose.yml pins (tests/services.py), and both run with
the `--enable-feature` flags of the compose file's Prometheus command: features change what
PromQL means (`anchored`), so the tests must query the way the stack does. The scrape job
is named "test".
"""

import json
import random
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from time import monotonic, sleep
from typing import Sequence

import yaml

from services import binary

REPO = Path(__file__).resolve().parent.parent
JOB = "test"
POLL_SECONDS = 0.2


def stack_features() -> list[str]:
    """The `--enable-feature=...` flags of the Prometheus service in docker-compose.yml."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return [flag for flag in compose["services"]["prometheus"]["command"]
            if flag.startswith("--enable-feature=")]


def promtool(*args, timeout: float = 120, **run_options) -> subprocess.CompletedProcess:
    """promtool ARGS (paths may be Path objects), with the stack's features; text output."""
    return subprocess.run([binary("promtool"), *stack_features(), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, **run_options)


def _ephemeral_ports() -> range:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


_EPHEMERAL = _ephemeral_ports()
_LISTEN_PORTS = range(20000, 32000)
_handed_out: set[int] = set()


def free_port() -> int:
    """A port free right now on 127.0.0.1 that nothing else in this run will be handed.

    A port the kernel chose for a probe socket is an ephemeral port: the next outgoing
    connection of any process (a collector's export, a scrape) may take it before the
    service we start binds it, and the service then exits "address already in use". So
    the ports come from below the kernel's ephemeral range, each handed out once.
    """
    candidates = [port for port in _LISTEN_PORTS if port not in _EPHEMERAL and port not in _handed_out]
    for port in random.Random().sample(candidates, len(candidates)):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as probe:  # a machine whose ephemeral range leaves none below it
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def single_value(result: list[dict]) -> float | None:
    """The value of an instant query's only series, or None when there is no series."""
    if not result:
        return None
    assert len(result) == 1, f"expected one series, got {result}"
    return float(result[0]["value"][1])


class Prometheus:
    """A running Prometheus: its base URL and its HTTP query API."""

    def __init__(self, url: str, command: list[str], log_path: Path):
        self.url = url
        self.command = command
        self.log_path = log_path
        self.process = self._start()

    def _start(self) -> subprocess.Popen:
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)

    def start(self) -> None:
        """Start it again, after `stop`, on the same data and port; back once it is ready."""
        self.process = self._start()
        self._wait_ready(timeout=60)

    def stop(self, *, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def query(self, expr: str, time: float | None = None) -> list[dict]:
        """An instant query (at time, a Unix timestamp, or now): the API's result list."""
        params = {"query": expr} if time is None else {"query": expr, "time": str(time)}
        return self._api("query", params)["result"]

    def query_range(self, expr: str, start: float, end: float, step: str) -> list[dict]:
        """A range query: one dict per series, with "values" as [timestamp, "value"] pairs."""
        params = {"query": expr, "start": str(start), "end": str(end), "step": step}
        return self._api("query_range", params)["result"]

    def wait_for(self, expr: str, predicate, timeout: float = 30.0) -> list[dict]:
        """Poll expr until predicate(result) holds and return that result; fail at timeout."""
        deadline = monotonic() + timeout
        while True:
            result = self.query(expr)
            if predicate(result):
                return result
            if monotonic() > deadline:
                raise AssertionError(f"{expr!r} not as expected after {timeout} s; last result: {result}")
            sleep(POLL_SECONDS)

    def log_tail(self, characters: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-characters:]

    def _api(self, endpoint: str, params: dict[str, str]) -> dict:
        url = f"{self.url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)["data"]
        except urllib.error.HTTPError as error:
            # A bad query is a 400 whose body says why: show it, not just the status.
            raise AssertionError(f"{params['query']!r}: {error.read().decode(errors='replace')}") from None

    def _wait_ready(self, timeout: float) -> None:
        deadline = monotonic() + timeout
        while monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass  # not listening yet, or 503 while it starts
            sleep(POLL_SECONDS)
        raise RuntimeError(f"prometheus not ready after {timeout} s:\n{self.log_tail()}")


@contextmanager
def running_prometheus(
    tmp_path: Path, targets, scrape_interval: str = "1s", extra_config: dict | None = None,
    extra_flags: Sequence[str] = (),
):
    """Start Prometheus scraping targets (job "test"), yield a Prometheus once it is ready,
    and stop it afterwards. extra_config's top-level keys replace or extend the generated
    configuration (e.g. rule_files, or scrape_configs to replace the job); extra_flags are
    added to the command line (e.g. --web.enable-remote-write-receiver)."""
    directory = tmp_path / "prometheus"
    directory.mkdir()
    config = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": list(targets)}]}],
        **(extra_config or {}),
    }
    config_path = directory / "prometheus.yml"
    config_path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    log_path = directory / "prometheus.log"
    url = f"http://127.0.0.1:{free_port()}"
    prom = Prometheus(url, [
        binary("prometheus"),
        *stack_features(),
        f"--config.file={config_path}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address={urllib.parse.urlsplit(url).netloc}",
        *extra_flags,
    ], log_path)
    try:
        prom._wait_ready(timeout=30)
        yield prom
    except BaseException:
        # A test that fails while Prometheus misbehaves (it once stopped answering remote
        # writes under load) shows why in its captured output.
        sys.stderr.write(f"--- the end of Prometheus's log ---\n{log_path.read_text(errors='replace')[-6000:]}\n")
        raise
    finally:
        prom.stop()


def push_history(writer, series: list, **push_options) -> None:
    """Remote-write old samples with `writer` (a RemoteWriter) as the tailer's history push
    does (tailer/outputs/history.py): every series' newest sample first, so a Prometheus
    that holds nothing yet starts its in-order head there and takes all that is older into
    its out-of-order head. Sent oldest first, its head would span the whole history and be
    compacted block after block while the rest arrives out of order: where Prometheus
    panics (docs/HISTORY.md, "Prometheus under the first start")."""
    writer.push([(labels, [max(samples)]) for labels, samples in series if samples])
    writer.push(series, **push_options)
