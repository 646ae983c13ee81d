"""The dashboard: schema lint, what it asks in which order, and the names it relies on.

Grafana cannot run here. The dashboard is linted with grafana-foundation-sdk's
JSON schemas (../shared/schemas/grafana), which are stricter than Grafana:
the places where Grafana's real format differs are listed by name below.
Every PromQL expression is parsed by the stack's promtool (tests/prom.py); running them against a
real Prometheus fed by the tailer is a separate test. The names the dashboard
uses are checked against the tailer's contract (tests/dashboard.py).
"""

import json
import re
import urllib.parse

import pytest
import yaml
from jsonschema import Draft7Validator

import dashboard as dash
from prom import promtool

SCHEMAS = dash.REPO.parent / "shared" / "schemas" / "grafana"

# Where Grafana's dashboard format is looser than the foundation SDK's schema.
# Each is (name, why, path pattern) over the error's JSON path, * for any index.
SCHEMA_EXCEPTIONS = [
    ("override matcher options",
     "the byName matcher takes a field name string; the schema types matcher options as an object",
     "panels.*.fieldConfig.overrides.*.matcher.options"),
    ("override property values",
     "override values are strings, numbers, booleans or lists (displayName, decimals, links); "
     "the schema types them as objects",
     "panels.*.fieldConfig.overrides.*.properties.*.value"),
    ("field data links",
     "a field's data links are {title, url}; the schema types them as dashboard links "
     "(the links above the panels, with type, icon, tags, ...)",
     "panels.*.fieldConfig.defaults.links.*"),
    ("Tempo variable query",
     "the Tempo datasource's variable query is {type, label, refId}; the schema allows only a "
     "string or an object of objects",
     "templating.list.*.query"),
]
# Panel types with no schema in ../shared/schemas/grafana.
UNSCHEMED_PANEL_TYPES = {"row", "traces"}

# Health first, then the questions of issues 3 and 13, in the order the page answers them.
QUESTION_PANELS = [
    "Tailer",
    "Credits",
    "Credits on multi-model turns",
    "Compound rate",
    "Rejection rate",
    "Review share of credits",
    "Fusion vs ordinary turns",
    "Credits by model over time",
    "Compound rate over time",
    "Rejection rate over time",
    "Credits by model",
    "Credits by leg kind",
    "Leg ledger",
    "Cache share of input tokens",
    "Routing latency",
    "Answer and review credits by pattern",
    "The gate: cascade turns by what the judge did",
    "Turns",
    "Turn waterfall",
]
RANGE_SELECTOR = re.compile(r"\[([^\]]*)\]")


@pytest.fixture(scope="module")
def dashboard():
    return dash.load_dashboard()


def schema(file, definition):
    if not SCHEMAS.is_dir():
        pytest.skip(f"{SCHEMAS} is absent (a clone without ../shared): cannot lint the dashboard")
    definitions = json.loads((SCHEMAS / file).read_text())["definitions"]
    return {"$ref": f"#/definitions/{definition}", "definitions": definitions}


def schema_errors(instance, schema_, where=()):
    """(JSON path, message) of every schema error."""
    return [(".".join(str(p) for p in where + tuple(error.absolute_path)), error.message[:200])
            for error in Draft7Validator(schema_).iter_errors(instance)]


def dashboard_schema_errors(dashboard):
    """Errors of the dashboard and of each panel, each against its own definition.

    Panels are checked one by one because the schema's panels list is a oneOf
    (panel or row), whose failure says only that neither matched.
    """
    panel_schema = schema("dashboard.jsonschema.json", "Panel")
    row_schema = schema("dashboard.jsonschema.json", "RowPanel")
    errors = schema_errors(dict(dashboard, panels=[]), schema("dashboard.jsonschema.json", "Dashboard"))
    for index, panel in enumerate(dashboard["panels"]):
        errors += schema_errors(panel, row_schema if panel["type"] == "row" else panel_schema, ("panels", index))
    return errors


def unexcused(errors):
    return [f"{path}: {message}" for path, message in errors
            if not any(_matches(path, pattern) for _, _, pattern in SCHEMA_EXCEPTIONS)]


def _matches(path, pattern):
    return re.fullmatch(re.escape(pattern).replace(r"\*", r"[^.]+"), path) is not None


def test_dashboard_passes_the_dashboard_schema(dashboard):
    assert unexcused(dashboard_schema_errors(dashboard)) == []


def test_panel_options_and_queries_pass_their_schemas(dashboard):
    errors = []
    for panel in dash.all_panels(dashboard):
        if panel["type"] in UNSCHEMED_PANEL_TYPES:
            continue
        options = schema(f"{panel['type']}.jsonschema.json", "Options")
        errors += schema_errors(panel["options"], options, (panel["title"], "options"))
        custom = panel["fieldConfig"]["defaults"].get("custom")
        if custom is not None:
            field_config = schema(f"{panel['type']}.jsonschema.json", "FieldConfig")
            errors += schema_errors(custom, field_config, (panel["title"], "fieldConfig.defaults.custom"))
        for target in panel["targets"]:
            kind = target["datasource"]["type"]
            query = schema(f"{kind}.jsonschema.json", "Dataquery")
            errors += schema_errors(target, query, (panel["title"], target["refId"]))
    assert unexcused(errors) == []


def test_lint_exceptions_are_each_still_needed(dashboard):
    """An exception that nothing triggers any more would hide a future real error."""
    paths = [path for path, _ in dashboard_schema_errors(dashboard)]
    for name, _, pattern in SCHEMA_EXCEPTIONS:
        assert any(_matches(path, pattern) for path in paths), f"exception '{name}' is unused"


def test_the_lint_reports_an_error_no_exception_covers(dashboard):
    broken = dict(dashboard, refresh=60)
    assert unexcused(dashboard_schema_errors(broken)) == ["refresh: 60 is not of type 'string'"]


def test_the_page_answers_the_questions_in_order(dashboard):
    titles = [panel["title"] for panel in dash.all_panels(dashboard)]
    assert [title for title in titles if title in QUESTION_PANELS] == QUESTION_PANELS


def test_panels_are_laid_out_in_page_order(dashboard):
    positions = [(p["gridPos"]["y"], p["gridPos"]["x"]) for p in dash.all_panels(dashboard)]
    assert positions == sorted(positions)
    assert len({panel["id"] for panel in dash.all_panels(dashboard)}) == len(positions)


def test_every_statistic_follows_the_time_picker(dashboard):
    """Counters are read only as increase(...[$__range] anchored) in a statistic, and as
    increase(...[$__interval] anchored) in a time series, whose points then tile the range:
    never totals since the tailer started, and never extrapolated (docs/METRICS.md,
    "Counting over a window")."""
    for title, target in dash.targets(dashboard, "prometheus"):
        expr = target["expr"]
        window = "$__range" if target.get("instant") else "$__interval"
        # A time series' point stands for the bucket that begins at it, so today's bucket
        # shows today's turns so far (Grafana's last point is at or before now).
        shift = "" if target.get("instant") else re.escape(" offset -$__interval")
        assert target.get("instant") is not target.get("range"), title
        assert set(RANGE_SELECTOR.findall(expr)) <= {window}, \
            f"{title}: fixed window in {expr}"
        counters = [name for name in dash.metric_names(expr)
                    if name.endswith(("_total", "_bucket", "_sum", "_count"))]
        for selector in set(re.findall(r'\{__name__=~"[^"]*"\}', expr)):
            # The collector's and Tempo's series: by their increase, and whole when born
            # inside the window (tested in test_dashboard_queries).
            held = re.escape(selector)
            bare = re.sub(rf"\bincrease\({held}\[\$__range\] anchored\)|{held} offset \$__range|{held} unless", "", expr)
            assert selector not in bare, f"{title}: {selector} read outside the window"
        for name in counters:
            mentions = re.findall(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr)
            windowed = re.findall(
                rf"\bincrease\(\s*{re.escape(name)}(?:\{{[^}}]*\}})?\[{re.escape(window)}\] anchored{shift}\)", expr)
            assert len(windowed) == len(mentions), \
                f"{title}: {name} read outside increase(...[{window}] anchored)"


def test_time_series_buckets_lie_on_the_history_grid(dashboard):
    """History has a sample every 5 minutes (and at every turn's end), so a bucket that is a
    multiple of 5 minutes has a sample at each of its ends: no gap, no spike at the seam
    between history and scrapes. Each time series takes its step from the Bucket setting."""
    (bucket,) = [v for v in dashboard["templating"]["list"] if v["name"] == "bucket"]
    assert bucket["type"] == "interval" and not bucket.get("auto")
    seconds = {"m": 60, "h": 3600, "d": 86400}
    options = [option["value"] for option in bucket["options"]]
    assert options == bucket["query"].split(",") == ["1h", "1d"]
    assert all(int(o[:-1]) * seconds[o[-1]] % 300 == 0 for o in options)
    assert bucket["current"]["value"] == "1d"
    series = [p for p in dash.all_panels(dashboard) if p["type"] == "timeseries"]
    assert {p["title"] for p in series} == {
        "Credits by model over time", "Compound rate over time", "Rejection rate over time"}
    for panel in series:
        assert panel["interval"] == "$bucket", panel["title"]
        assert all(target["range"] and not target["instant"] for target in panel["targets"])


def test_every_promql_expression_parses(dashboard, tmp_path):
    """promtool parses each expression (substituted as Grafana would) as a recording rule."""
    exprs = dash.prometheus_exprs(window_seconds=86400)
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr{index}", "expr": expr} for index, (_, expr) in enumerate(exprs)]}]}
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", tmp_path / "dashboard.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def test_every_metric_the_dashboard_names_is_in_the_tailer_contract():
    used = dash.metric_families_used()
    assert used - dash.CONTRACT_METRICS - dash.PROMETHEUS_OWN_METRICS == set()
    assert "hydrafusion_aiu_total" in used


def test_metric_names_finds_series_but_not_functions_labels_or_numbers():
    expr = ('histogram_quantile(0.9, sum by (le, model) (rate(a_bucket{model=~"x"}[5m]))) '
            '/ on(job) group_left(version) b offset 5m > 1e3 and c')
    assert dash.metric_names(expr) == {"a_bucket", "b", "c"}


def test_every_span_attribute_the_stack_queries_is_in_the_tailer_contract():
    assert dash.traceql_span_attributes() <= dash.ROOT_SPAN_ATTRIBUTES | dash.LEG_SPAN_ATTRIBUTES
    assert dash.span_attributes_used() <= dash.ROOT_SPAN_ATTRIBUTES | dash.LEG_SPAN_ATTRIBUTES


def test_every_variable_a_query_uses_is_defined():
    """substitute() raises KeyError for an unknown variable."""
    assert dash.prometheus_exprs(3600)
    assert dash.prometheus_range_exprs(3600)
    assert dash.traceql_queries(3600, {"traceId": "0123456789abcdef0123456789abcdef"})


def test_variables_filter_by_pattern_model_and_session(dashboard):
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["pattern"]["query"] == "label_values(hydrafusion_turns_total, pattern)"
    assert variables["model"]["query"] == "label_values(hydrafusion_legs_total, model)"
    assert variables["session"]["datasource"]["type"] == "tempo"
    assert variables["session"]["query"]["label"] == "gen_ai.conversation.id"
    assert variables["phase"]["query"] == "label_values(hydrafusion_legs_total, phase_kind)"
    for name in ("pattern", "model", "phase", "session"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == dash.ALL, name
    assert variables["traceId"]["datasource"]["type"] == "tempo"
    # The Draft filter is a condition on a leg: "any" holds for every leg.
    rejected = variables["rejected"]
    assert {o["text"]: o["value"] for o in rejected["options"]} == {
        "any": "span.hydrafusion.phase.id != nil",
        "sent back": 'span.hydrafusion.phase.verdict =~ "reject|revise"'}
    assert rejected["current"]["value"] == "span.hydrafusion.phase.id != nil"


def test_user_and_instance_variables_list_every_tailer(dashboard):
    """Picked from a counter every tailer has from its start; the user first, then the
    instances of the users picked. user_name is what Prometheus's OTLP translation makes of
    the promoted resource attribute user.name; a local tailer has none, and All (".*")
    matches a series without the label too."""
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["user"]["query"] == "label_values(hydrafusion_tailer_lines_total, user_name)"
    assert variables["instance"]["query"] == \
        'label_values(hydrafusion_tailer_lines_total{user_name=~"$user"}, instance)'
    for name in ("user", "instance"):
        variable = variables[name]
        assert variable["datasource"]["type"] == "prometheus", name
        assert variable["multi"] and variable["includeAll"] and variable["allValue"] == dash.ALL, name
        assert variable["current"]["value"] == "$__all", name
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names.index("user") < names.index("instance") < names.index("pattern")


_SELECTOR = re.compile(r"\b(hydrafusion_\w+|up)(\{[^}]*\})?")


def test_every_query_of_a_tailers_series_filters_by_instance_and_user(dashboard):
    """Every selector of the tailers' series (and of their scrape's up), in every panel, so
    a pick narrows the whole page. The collector's and Tempo's own series are the central
    stack's, not a tailer's: they carry neither label and are left unfiltered."""
    exprs = [target["expr"] for _, target in dash.targets(dashboard, "prometheus")]
    selectors = [match for expr in exprs for match in _SELECTOR.finditer(expr)]
    assert len(selectors) > 50
    for match in selectors:
        matchers = [m.strip() for m in (match.group(2) or "{}")[1:-1].split(",")]
        assert set(dash.TAILER_FILTERS) <= set(matchers), match.group()
    unfiltered = {name for expr in exprs for name in dash.metric_names(expr)} - {m.group(1) for m in selectors}
    assert unfiltered == set()


def test_every_data_link_keeps_the_users_and_instances_picked(dashboard):
    for title, url in dash.links(dashboard):
        assert "${user:queryparam}" in url and "${instance:queryparam}" in url, title


def test_every_data_link_sets_only_variables_that_exist(dashboard):
    """A link that sets var-x for a variable the dashboard lacks would silently filter
    nothing; ${x:queryparam} of a missing variable would be left in the URL."""
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    found = dash.links(dashboard)
    assert {title for title, _ in found} >= {
        "Credits by model over time", "Credits by model", "Leg ledger", "Rejection rate", "Turns"}
    for title, url in found:
        assert url.startswith(f"/d/{dashboard['uid']}/"), (title, url)
        query = url.split("?", 1)[1]
        set_ = re.findall(r"(?:^|&)var-(\w+)=", query)
        carried = re.findall(r"\$\{(\w+):queryparam\}", query)
        assert set_ and set(set_) | set(carried) <= variables.keys(), (title, url)
        assert len(set_ + carried) == len(set(set_ + carried)), f"{title}: a variable set twice"
        for name, value in re.findall(r"(?:^|&)var-(\w+)=([^&$]+)", query):
            options = [o["value"] for o in variables[name].get("options", [])]
            allowed = options + (["All"] if variables[name].get("includeAll") else [])
            if options or value == "All":
                assert urllib.parse.unquote(value) in allowed, (title, name, value)


def test_a_click_filters_the_turn_list_to_what_was_clicked(dashboard):
    by_title = {}
    for title, url in dash.links(dashboard):
        by_title.setdefault(title, []).append(url)
    (model_link,) = by_title["Credits by model over time"]
    assert "var-model=${__field.labels.model}" in model_link
    assert "var-phase=${__data.fields.phase_kind}" in by_title["Leg ledger"][0]
    assert "var-model=${__data.fields.model}" in by_title["Leg ledger"][0]
    (rejected,) = by_title["Rejection rate"]
    assert urllib.parse.unquote(rejected.split("var-rejected=")[1].split("&")[0]) == \
        'span.hydrafusion.phase.verdict =~ "reject|revise"'
    turns = next(p for p in dash.all_panels(dashboard) if p["title"] == "Turns")
    query = turns["targets"][0]["query"]
    for name in ("model", "phase", "rejected", "pattern", "session"):
        assert f"${name}" in query, name


def test_datasources_the_dashboard_uses_are_provisioned(dashboard):
    provisioned = {(s["type"], s["uid"]) for s in dash.load_datasources()}
    used = set()
    for panel in dash.all_panels(dashboard):
        for holder in [panel, *panel.get("targets", [])]:
            if "datasource" in holder:
                used.add((holder["datasource"]["type"], holder["datasource"]["uid"]))
    assert used == provisioned


def test_turns_table_shows_one_row_per_turn_with_its_figures(dashboard):
    panel = next(p for p in dash.all_panels(dashboard) if p["title"] == "Turns")
    (target,) = panel["targets"]
    assert target["tableType"] == "spans" and target["queryType"] == "traceql"
    # One matching span per trace: the root, named "hydrafusion {pattern}" (the route span
    # "route hydrafusion" carries the pattern too, the legs do not), that is an ancestor
    # (<<) of a leg matching the filters. The model is matched against the leg's own model
    # with TraceQL's fully anchored =~: whole names, never a substring of the turn's list.
    leg, root = re.fullmatch(r"\{ (.*) \}\n<< \{ (.*) \}\n\| select\(.*\)\nwith \(most_recent=true\)",
                             target["query"]).groups()
    assert root.startswith('name =~ "hydrafusion .*" && ')
    assert 'span.gen_ai.response.model =~ "$model"' in leg.split(" && ")
    assert "hydrafusion.models" not in target["query"]
    # Newest first however many match: Tempo's most_recent hint, and the table sorted by time.
    assert target["limit"] >= 1000
    assert panel["options"]["sortBy"] == [{"displayName": "Time", "desc": True}]
    selected = re.search(r"\| select\(([^)]*)\)", target["query"]).group(1)
    assert [c.strip() for c in selected.split(",")] == [
        "span.hydrafusion.pattern", "span.hydrafusion.model_sequence", "span.hydrafusion.verdict",
        "span.hydrafusion.aiu", "span.hydrafusion.outcome"]
    order = panel["transformations"][0]["options"]["indexByName"]
    assert sorted(order, key=order.get)[:6] == [
        "time", "hydrafusion.pattern", "hydrafusion.model_sequence", "hydrafusion.verdict",
        "hydrafusion.aiu", "duration"]


def test_clicking_a_turn_shows_its_waterfall_on_the_same_page(dashboard):
    table = next(p for p in dash.all_panels(dashboard) if p["title"] == "Turns")
    trace_column = next(o for o in table["fieldConfig"]["overrides"]
                        if o["matcher"]["options"] == "traceIdHidden")
    (links,) = [p["value"] for p in trace_column["properties"] if p["id"] == "links"]
    (url,) = [link["url"] for link in links]
    assert url.startswith(f"/d/{dashboard['uid']}/")
    assert "var-traceId=${__value.raw}" in url and "${__url_time_range}" in url
    waterfall = next(p for p in dash.all_panels(dashboard) if p["title"] == "Turn waterfall")
    assert waterfall["type"] == "traces"
    assert [t["query"] for t in waterfall["targets"]] == ["${traceId}"]


def test_health_comes_first_and_turns_red(dashboard):
    """The first row: each stat red on trouble (the tailer down, damaged lines, logs it
    cannot read, spans waiting or lost anywhere, history not yet in Prometheus, the log
    format drifted), green when all is well."""
    panels = dash.all_panels(dashboard)
    assert panels[0]["type"] == "row" and panels[0]["title"] == "Tailer health"
    end = next(i for i, p in enumerate(panels[1:], 1) if p["type"] == "row")
    health = {p["title"]: p for p in panels[1:end]}
    assert list(health) == ["Tailer", "Damaged lines", "Unreadable logs", "Spans waiting", "History waiting",
                            "Spans refused or dropped", "Log format drift", "Collector and Tempo drops"]
    for title, panel in health.items():
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert panel["options"]["colorMode"] == "background", title
        assert panel["gridPos"]["y"] == 1 and panel["gridPos"]["h"] <= 3, title
        (expr,) = [t["expr"] for t in panel["targets"]]
        assert "or on() vector(0)" in expr, f"{title}: no value would not be red or green"
        if title == "Tailer":
            assert [s["color"] for s in steps] == ["red", "green"] and steps[1]["value"] == 1
        else:
            assert [s["color"] for s in steps] == ["green", "red"] and 0 < steps[1]["value"] <= 1e-6, title
    exprs = " ".join(t["expr"] for p in health.values() for t in p["targets"])
    for name in dash.COMPONENT_METRICS:
        assert name in exprs, name


def test_tailer_health_row_tells_no_turns_from_a_broken_tailer(dashboard):
    panels = dash.all_panels(dashboard)
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == "Tailer health")
    exprs = " ".join(t.get("expr", "") for p in panels[start + 1:] for t in p.get("targets", []))
    for family in ("up", "hydrafusion_tailer_lines_total", "hydrafusion_tailer_malformed_lines_total",
                   "hydrafusion_tailer_export_failures_total",
                   "hydrafusion_tailer_last_event_timestamp_seconds",
                   "hydrafusion_tailer_unknown_fields_total"):
        assert family in dash.metric_names(exprs), family


def test_the_home_dashboard_has_a_fixed_uid(dashboard):
    assert dashboard["uid"] == "hydrafusion"
