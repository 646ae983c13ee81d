"""The contract docs (docs/METRICS.md, TRACES.md, TAILER.md) stay true to the code.

Users build dashboards, TraceQL and PromQL queries and scripts on these docs, so a name the
code emits but the docs omit, or a name the docs promise but the code never emits, is a bug.
The docs keep names machine-readable: every table row that defines a name starts with it in
backticks.
"""

import contextlib
import io
import itertools
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assembly import assemble
from dashboard import load_dashboard, targets
from sessiongen import START, SessionWriter, every_pattern, whole_session
from tailerproc import tailer_env
from tailer.commands.cli import build_parser
from tailer.copilot.events import parse_line
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import LABEL_VALUE_LIMITS, Metrics
from tailer.outputs.otlp_metrics import prometheus_labels
from tailer.outputs.spans import turn_spans

DOCS = Path(__file__).resolve().parent.parent / "docs"
SESSION = "sess-docs"
OTLP_TYPES = {"stringValue": "string", "intValue": "int", "doubleValue": "double", "boolValue": "bool",
              "arrayValue": "string[]"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def read_doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def table_rows(doc: str) -> dict[str, list[str]]:
    """First backticked word of a table row's first cell -> the row's cells."""
    rows = {}
    for line in read_doc(doc).splitlines():
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        name = re.match(r"`([^`\s]+)", cells[0]) if cells else None
        if name:
            rows[name.group(1)] = cells
    return rows


def backticked(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


@pytest.fixture(scope="module")
def turns():
    """One turn of every shape the docs describe, from logs in the real CLI's order: every
    pattern, ordinary turns, a leg whose usage records lost a call, and calls of unknown
    credits."""
    damaged = SessionWriter(SESSION, START)
    damaged.single("gpt-5.6-sol", damaged_call=True, request_count=2)
    damaged.shutdown()
    unpriced = SessionWriter(SESSION, START, unpriced=1, seed="unpriced")
    unpriced.single("gpt-5.6-sol")
    unpriced.ordinary("claude-sonnet-4.6")
    unpriced.shutdown()
    return (assemble(every_pattern(SESSION).lines(), SESSION)
            + assemble(whole_session(SESSION).lines(), SESSION)
            + assemble(damaged.lines(), SESSION) + assemble(unpriced.lines(), SESSION))


# -- metrics --------------------------------------------------------------------------


def exposed_families(turns) -> dict[str, tuple[str, frozenset[str]]]:
    """Family name -> (type, label names) as /metrics shows them once every family has a series."""
    metrics = Metrics(Registry(label_value_limits=LABEL_VALUE_LIMITS))
    for turn in turns:
        metrics.count_turn(turn)
    metrics.count_new_policy("2026-09-01", turns[0].start_ns)  # as the fanout does
    # Give the drift and damage families a series too, the way the daemon counts them.
    drifted = parse_line(
        b'{"type":"session.fusion_resolved","timestamp":"2026-11-02T09:00:00Z",'
        b'"data":{"fusionId":"fusion-x","pattern":"single","fieldFromTheFuture":1}}'
    )
    assert drifted.unknown_fields and drifted.missing_fields
    metrics.count_lines("fusion")
    metrics.count_event(drifted)
    metrics.count_lines("malformed")
    metrics.count_damage("invalid_json")

    families: dict[str, tuple[str, set[str]]] = {}
    current = None
    for line in metrics.registry.render_final().splitlines():
        if line.startswith("# TYPE "):
            _, _, current, kind = line.split()
            families[current] = (kind, set())
        elif not line.startswith("#"):
            families[current][1].update(re.findall(r'(\w+)="', line))
    return {name: (kind, frozenset(labels - {"le"})) for name, (kind, labels) in families.items()}


def documented_families() -> dict[str, tuple[str, frozenset[str]]]:
    return {
        name: (cells[1], frozenset(backticked(cells[2])))
        for name, cells in table_rows("METRICS.md").items()
        if name.startswith("hydrafusion_")
    }


def test_every_metric_family_is_documented_with_its_type_and_labels(turns):
    exposed = exposed_families(turns)
    documented = documented_families()
    assert set(exposed) - set(documented) == set(), "families missing from METRICS.md"
    assert set(documented) - set(exposed) == set(), "METRICS.md names families the tailer lacks"
    assert documented == exposed


def test_every_metric_name_in_metrics_doc_exists(turns):
    """Covers the prose and the PromQL examples, where a typo would go unnoticed. The
    label a pushed series gets from the hydrafusion.team attribute is named too."""
    families = set(exposed_families(turns))
    labels = set(prometheus_labels({"hydrafusion.team": "t"}))
    for name in set(re.findall(r"\bhydrafusion_\w+", read_doc("METRICS.md"))) - labels:
        base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s)), name)
        assert name in families or base in families, name


# -- traces ---------------------------------------------------------------------------


def emitted_attributes(turns) -> dict[str, tuple[set[str], set[str]]]:
    """Attribute key -> (where it appears: root/route/leg/event/link, its OTLP value types)."""
    found: dict[str, tuple[set[str], set[str]]] = {}

    def note(attributes, where):
        for attribute in attributes:
            places, types = found.setdefault(attribute["key"], (set(), set()))
            places.add(where)
            types.update(OTLP_TYPES[kind] for kind in attribute["value"])

    for turn in turns:
        for span in (json.loads(written.json) for written in turn_spans(turn)):
            if "parentSpanId" not in span:
                where = "root"
            elif span["name"] == "route hydrafusion":
                where = "route"
            elif span["name"].startswith("chat "):
                where = "call"
            elif span["name"].startswith("execute_tool "):
                where = "tool"
            else:
                where = "leg"
            note(span["attributes"], where)
            for event in span.get("events", []):
                note(event["attributes"], "event")
            for link in span.get("links", []):
                note(link["attributes"], "link")
    return found


def documented_attributes() -> dict[str, tuple[set[str], set[str]]]:
    return {
        name: ({place.strip() for place in cells[1].split(",")}, {cells[2]})
        for name, cells in table_rows("TRACES.md").items()
        if name.startswith(("gen_ai.", "hydrafusion."))
    }


def test_every_span_attribute_is_documented_where_and_as_what_it_is_emitted(turns):
    emitted = emitted_attributes(turns)
    documented = documented_attributes()
    assert set(emitted) - set(documented) == set(), "attributes missing from TRACES.md"
    assert set(documented) - set(emitted) == set(), "TRACES.md names attributes never emitted"
    assert documented == emitted


def test_traceql_examples_use_emitted_attributes(turns):
    emitted = emitted_attributes(turns)
    queries = re.findall(r"\b(span|event)\.((?:gen_ai|hydrafusion)\.[\w.]+)", read_doc("TRACES.md"))
    assert queries
    for scope, name in queries:
        places = emitted[name][0] if name in emitted else set()
        assert places & ({"event"} if scope == "event" else {"root", "route", "leg", "call", "tool"}), \
            f"{scope}.{name}"


# -- command line ---------------------------------------------------------------------


@pytest.fixture
def command_help(monkeypatch) -> dict[str, str]:
    """The --help of every command whose options TAILER.md's tables document."""
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside an option or variable name
    helps = {}
    for command in ("run", "demo", "scrub"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            build_parser({}).parse_args([command, "--help"])
        helps[command] = out.getvalue()
    return helps


def test_every_option_and_variable_is_documented(command_help):
    """`demo` and `scrub` have tables of their own options in TAILER.md; the rest are run's."""
    every_help = "\n".join(command_help.values())
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", every_help)) - {"--help"}
    table = {name for name in table_rows("TAILER.md") if name.startswith("--")}
    assert {"--once", "--replay-interval", "--seed"} <= options
    assert options - table == set(), "options missing from TAILER.md's tables"
    assert table - options == set(), "TAILER.md documents options no command has"
    text = read_doc("TAILER.md")
    variables = set(re.findall(r"\$([A-Z][A-Z0-9_]+)", every_help))
    assert "HYDRAFUSION_REPLAY_INTERVAL" in variables
    assert {v for v in variables if f"`{v}`" not in text} == set()


def test_every_statusline_option_field_and_variable_is_documented(monkeypatch):
    """docs/STATUSLINE.md's tables name every option of `statusline --help` and every field
    a --format template may name, and nothing else; its text names every variable."""
    from tailer.statusline.options import FIELDS

    monkeypatch.setenv("COLUMNS", "200")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser({}).parse_args(["statusline", "--help"])
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", out.getvalue())) - {"--help"}
    rows = table_rows("STATUSLINE.md")
    assert {"--format", "--then", "--install", "--uninstall"} <= options
    assert options == {name for name in rows if name.startswith("--")}
    assert {"{" + field + "}" for field in FIELDS} == {name for name in rows if name.startswith("{")}
    text = read_doc("STATUSLINE.md")
    variables = set(re.findall(r"\$([A-Z][A-Z0-9_]+)", out.getvalue())) | {"NO_COLOR", "XDG_CACHE_HOME"}
    assert {"COPILOT_HOME", "COLUMNS"} <= variables
    assert {variable for variable in variables if variable not in text} == set()


# -- a team's central stack (TEAM.md) --------------------------------------------------


def test_every_variable_team_md_sets_on_a_laptop_is_one_the_tailer_reads(command_help):
    """A rollout line naming a variable the tailer ignores would fail on thousands of
    laptops without a word. The tailer names its variables in `run --help`, and the few it
    reads from the environment only (certificates) in TAILER.md."""
    named = set(re.findall(r"\b((?:OTEL|HYDRAFUSION)_[A-Z0-9_]*[A-Z0-9])\b", read_doc("TEAM.md")))
    assert {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_METRICS_EXPORTER",
            "OTEL_METRIC_EXPORT_INTERVAL", "OTEL_RESOURCE_ATTRIBUTES", "HYDRAFUSION_HISTORY_URL",
            "HYDRAFUSION_HISTORY_HEADERS"} <= named
    in_help = {variable for variable in named if f"${variable}" in command_help["run"]}
    environment_only = {variable for variable in named - in_help
                        if re.search(rf"^- `{variable}`: ", read_doc("TAILER.md"), flags=re.MULTILINE)}
    assert named - in_help - environment_only == set()
    assert environment_only <= {"OTEL_EXPORTER_OTLP_CERTIFICATE"}


def code_blocks(doc: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", read_doc(doc), flags=re.MULTILINE | re.DOTALL)


def test_team_md_config_blocks_parse_as_yaml():
    blocks = code_blocks("TEAM.md", "yaml")
    assert blocks
    for block in blocks:
        assert isinstance(yaml.safe_load(block), dict), block[:200]


def test_team_md_gives_the_gateway_configuration_the_tests_run():
    """The gateway TEAM.md shows is collector/gateway.yaml, the file the two-tailer test and
    bench/team_load.py run through the real collector, word for word."""
    gateway = (DOCS.parent / "collector" / "gateway.yaml").read_text()
    assert gateway in code_blocks("TEAM.md", "yaml")


ANCHORED = re.compile(r"\]\s*anchored\b")


def test_team_md_names_the_panels_and_rules_a_team_without_anchored_keeps_and_loses():
    """TEAM.md's "`anchored` on each query engine": the panels a Thanos team keeps are
    exactly the dashboard's panels with a Prometheus query and none using `anchored`, and
    the rules it loses are the ones that use it."""
    prometheus_queries = targets(load_dashboard(), "prometheus")
    anchored = {title for title, target in prometheus_queries if ANCHORED.search(target["expr"])}
    kept = {title for title, _ in prometheus_queries} - anchored
    sentence = re.search(r"every panel of the\s+dashboard but these, which read gauges or `up`:"
                         r"\s+(.*?)\.\n", read_doc("TEAM.md"), flags=re.DOTALL).group(1)
    named = set(re.split(r",\s+|\s+and\s+", " ".join(sentence.split())))
    assert named == kept
    rules = yaml.safe_load((DOCS.parent / "prometheus" / "rules" / "hydrafusion.yml").read_text())
    assert all(ANCHORED.search(rule["expr"]) for group in rules["groups"] for rule in group["rules"])
    assert "-query-frontend.enabled-promql-extended-range-selectors=smoothed,anchored" in read_doc("TEAM.md")


# -- docs/REPORT.md's samples are the report's real output ---------------------------------
# The demo ends a few minutes before it is run, so its clock times and the day lines are
# masked; everything else (ids, figures, legs, widths) must be what the code prints. The
# `--by` samples are left out: which day or week a demo turn falls on depends on the hour.
CLOCK = re.compile(r"\b\d\d:\d\d(:\d\d)?\b")
DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
# A day's heading in the turn list, or a day's row of PER DAY: which days the demo's turns
# fall on, and how they split, depends on the hour it runs.
DAY_LINE = re.compile(r"^\d{4}-\d\d-\d\d( +\d+ +[\d.]+ +#*)?$")


def report_samples() -> list[tuple[str, list[str]]]:
    """(command, lines shown) of every REPORT.md sample of a `--demo --turns` report."""
    blocks, block = [], None
    for line in read_doc("REPORT.md").splitlines():
        if line.startswith("```"):
            blocks, block = (blocks + [block], None) if block is not None else (blocks, [])
        elif block is not None:
            block.append(line)
    return [(block[0].removeprefix("$ "), block[1:]) for block in blocks
            if block and block[0].startswith("$ ") and "--demo" in block[0] and "--turns" in block[0]]


def masked(lines: list[str]) -> list[str]:
    return [DATE.sub("YYYY-MM-DD", CLOCK.sub("HH:MM", line)).rstrip() for line in lines
            if not DAY_LINE.match(line)]


def test_report_md_samples_are_what_the_report_prints():
    samples = report_samples()
    assert len(samples) >= 2
    for command, shown in samples:
        words = shlex.split(command.partition(" | ")[0])
        settings = dict(word.split("=", 1) for word in words if re.fullmatch(r"[A-Z_]+=\S*", word))
        args = [word for word in words if word not in {f"{k}={v}" for k, v in settings.items()}]
        assert args[:3] == ["python3", "-m", "tailer"], command
        done = subprocess.run([sys.executable, *args[1:]], cwd=DOCS.parent, capture_output=True,
                              text=True, timeout=120, env=tailer_env(**settings))
        assert done.returncode == 0, done.stderr
        printed = masked(done.stdout.rstrip("\n").splitlines())
        if shown[0] == "...":  # the output's end; how many days it spans depends on the hour
            shown = shown[1:]
            printed = printed[len(printed) - len(masked(shown)):]
        assert masked(shown) == printed, command


def test_the_readmes_sample_is_what_100_columns_print():
    """README.md's sample under "The report": each run of its lines between `...` is what
    `report --demo` prints piped without $COLUMNS (100 columns), in that order, clock
    times masked as above."""
    readme = (DOCS.parent / "README.md").read_text()
    sample = re.search(r"\n## The report.*?```\n(.*?)```", readme, re.S).group(1).splitlines()
    done = subprocess.run([sys.executable, "-m", "tailer", "report", "--demo", "--timezone", "UTC"],
                          cwd=DOCS.parent, capture_output=True, text=True, timeout=120,
                          env=tailer_env(COLUMNS=""))
    assert done.returncode == 0, done.stderr
    assert max(map(len, done.stdout.splitlines())) == 100
    printed = masked(done.stdout.splitlines())
    runs = [masked(run) for gap, run in itertools.groupby(sample, lambda line: line == "...")
            if not gap]
    assert len(runs) >= 2 and sum(map(len, runs)) >= 10
    at = 0
    for run in runs:
        found = [i for i in range(at, len(printed)) if printed[i:i + len(run)] == run]
        assert found, run
        at = found[0] + len(run)


REPO = DOCS.parent
# Named in the docs, but not in the clone: another project's file, and where an installed
# package keeps the clone's fixtures/ (pyproject.toml).
NOT_IN_THIS_REPOSITORY = {"docs/sources/tempo/configuration/manifest.md", "tailer/fixtures"}
_NAMED = re.compile(r"`([^`\n]+)`|\]\(([^)\s#]+)")
_PATH = re.compile(r"[\w.*-]+(?:/[\w.*-]+)*")


def named_paths(doc: Path) -> list[str]:
    """The repository paths a doc names that do not exist: a relative link's target; a path
    in backticks that begins with a top-level entry of the repository (a glob matches
    something); a Python module in backticks named alone (somewhere in the repository). A
    path with a placeholder (`<id>`, `NEW`), a home or absolute path, or one under a folder
    that git does not hold (.cache) is no path of the repository."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    top = {name.split("/")[0] for name in tracked}
    missing = []
    for code, link in _NAMED.findall(doc.read_text(encoding="utf-8")):
        if link:
            if not re.match(r"[a-z]+:", link) and not (doc.parent / link).exists():
                missing.append(link)
            continue
        name = code.strip().rstrip("/")
        if (not _PATH.fullmatch(name) or name in NOT_IN_THIS_REPOSITORY
                or any(part.isalpha() and part.isupper() for part in name.split("/"))):
            continue
        if "/" in name and name.split("/")[0] in top:
            if not any(REPO.glob(name)):
                missing.append(name)
        elif "/" not in name and name.endswith(".py") and not any(REPO.glob(f"**/{name}")):
            missing.append(name)
    return missing


@pytest.mark.parametrize("doc", ["README.md"] + sorted(f"docs/{path.name}" for path in DOCS.glob("*.md")))
def test_every_path_the_readme_and_docs_name_exists(doc):
    assert named_paths(REPO / doc) == []


def test_no_file_holds_a_merge_conflicts_markers():
    """A conflict left in a merge once reached main inside docs/REPORT.md, and every other
    test passed: git's markers are looked for in every file git tracks."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                             check=True).stdout.decode().split("\0")
    marker = re.compile(rb"^(<{7} |>{7} |={7}$)", re.MULTILINE)
    found = [name for name in tracked if name and (REPO / name).is_file()
             and marker.search((REPO / name).read_bytes())]
    assert not found, f"merge conflict markers in {found}"
