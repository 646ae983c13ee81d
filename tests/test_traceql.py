"""The TraceQL the dashboard runs and docs/TRACES.md gives users has Tempo's syntax.

Tempo is not run here: its licence (AGPL-3.0) rules it out of this project's machines, so
no test can send a query to Tempo and see it answer. tests/traceql.py parses TraceQL by the
grammar and rules Tempo documents, and these tests hold every query we ship to it: the
dashboard's, with each variable set to the values Grafana would put in (All, one value,
several joined by "|" as Grafana formats a multi-value variable for Tempo), and each
example of docs/TRACES.md. Known-good queries paraphrased from Tempo's documentation must
parse, and single mutations of good queries must be refused with the line and column of
the mistake, so the parser is neither too lax nor too strict on what users write.

What this proves: a shipped query has no syntax error Tempo's parser would report (braces,
operators, intrinsics, quoting, pipeline stages, metrics functions, hints), compares
operands of matching types, and uses regexes Go's RE2 compiles. What it does not prove:
that Tempo returns what the query means; that rests on the attribute checks against the
tailer's real spans (tests/test_docs.py, tests/test_dashboard_queries.py) and on the range
limits (tests/test_stack_configs.py). The parser follows Tempo's documented grammar, not
its code, and may lag a Tempo release that changes the language.
"""

import itertools
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dashboard as dash
from assembly import assemble
from sessiongen import every_pattern
from tailer.outputs.spans import turn_spans
from traceql import (ATTRIBUTE_SCOPES, COMPARISONS, INTRINSICS, SPANSET_OPERATORS, Attribute,
                     Binary, Call, Filter, Intrinsic, Pipeline, Query, SpansetOp, Static,
                     TraceQLError, Unary, parse, render, tokenize)

SESSION = "5d0c6f3e-8a41-4c1b-9e2a-3b7d9f10c2aa"
TRACES_DOC = dash.REPO / "docs" / "TRACES.md"

# The span attribute each Tempo-bound dashboard variable's values come from (the Prometheus
# label of the same name carries the same value).
VARIABLE_ATTRIBUTES = {
    "model": "gen_ai.response.model",
    "phase": "hydrafusion.phase.kind",
    "pattern": "hydrafusion.pattern",
    "session": "gen_ai.conversation.id",
}


@pytest.fixture(scope="module")
def span_values():
    """Attribute key -> the string values the tailer's spans give it, over every pattern."""
    values = {}
    for turn in assemble(every_pattern(SESSION).lines(), SESSION):
        for span in (json.loads(written.json) for written in turn_spans(turn)):
            for attribute in span["attributes"]:
                if "stringValue" in attribute["value"]:
                    values.setdefault(attribute["key"], set()).add(attribute["value"]["stringValue"])
    return {key: sorted(found) for key, found in values.items()}


def tempo_variables():
    """The dashboard variables the Tempo queries use, by name."""
    dashboard = dash.load_dashboard()
    queries = " ".join(target["query"] for _, target in dash.targets(dashboard, "tempo"))
    used = set(re.findall(r"\$\{?(\w+)", queries))
    return {v["name"]: v for v in dashboard["templating"]["list"] if v["name"] in used}


def variable_settings(span_values):
    """Every combination of the values a user can give the Turns query's variables."""
    choices = {}
    for name, variable in tempo_variables().items():
        if variable.get("type") == "custom":
            choices[name] = [option["value"] for option in variable["options"]]
        elif variable.get("includeAll"):
            seen = span_values[VARIABLE_ATTRIBUTES[name]]
            # Grafana's Tempo datasource joins a multi-value selection with "|".
            choices[name] = [dash.ALL, seen[0], "|".join(seen[:2])]
    names = sorted(choices)
    return [dict(zip(names, values)) for values in itertools.product(*(choices[n] for n in names))]


def turn_trace_ids(span_values):
    """The traceId variable's values: its regex applied to the turn keys, as Grafana does."""
    variable = tempo_variables()["traceId"]
    regex = re.compile(variable["regex"].strip("/").replace("(?<", "(?P<"))
    return [regex.fullmatch(key)["value"] for key in span_values[variable["query"]["label"]]]


def test_every_tempo_variable_has_typical_values(span_values):
    """A new Tempo-bound variable must say where its values come from, or it goes untested."""
    variables = tempo_variables()
    custom = {name for name, variable in variables.items() if variable.get("type") == "custom"}
    assert set(variables) - custom - {"traceId"} == set(VARIABLE_ATTRIBUTES)
    assert all(variables[name].get("includeAll") for name in VARIABLE_ATTRIBUTES)
    assert all(span_values.get(attribute) for attribute in VARIABLE_ATTRIBUTES.values())


def test_every_dashboard_traceql_query_parses_with_every_variable_value(span_values):
    """The Turns table under each combination of filters; the waterfall's query is a
    variable that holds a trace id (a lookup, not TraceQL)."""
    settings = variable_settings(span_values)
    assert len(settings) >= 2 * 3 ** 4  # both draft options, three values of four variables
    trace_ids = turn_trace_ids(span_values)
    raw = {title: target["query"] for title, target in dash.targets(dash.load_dashboard(), "tempo")}
    lookups = {title for title, query in raw.items() if re.fullmatch(r"\$\{?\w+\}?", query.strip())}
    assert lookups and set(raw) - lookups
    parsed = 0
    for variables, trace_id in itertools.product(settings, trace_ids[:2]):
        for title, query in dash.traceql_queries(7 * 86400, variables | {"traceId": trace_id}):
            if title in lookups:
                assert re.fullmatch(r"[0-9a-f]{32}", query), (title, query)
                continue
            try:
                parse(query)
            except TraceQLError as error:
                pytest.fail(f"{title} with {variables}: {error}\n{query}")
            parsed += 1
    assert parsed >= len(settings)


def docs_examples():
    """The queries of TRACES.md's "Example TraceQL" block: '#' lines are comments and an
    indented line continues the query above it."""
    section = TRACES_DOC.read_text(encoding="utf-8").split("## Example TraceQL", 1)[1]
    block = section.split("```", 2)[1]
    queries = []
    for line in block.splitlines()[1:]:
        if not line.strip() or line.startswith("#"):
            continue
        if line[0].isspace():
            queries[-1] += "\n" + line
        else:
            queries.append(line)
    return queries


def test_docs_examples_are_found():
    examples = docs_examples()
    assert len(examples) >= 15
    assert any("\n" in query for query in examples)  # the continued one was joined
    assert any("quantile_over_time" in query for query in examples)


@pytest.mark.parametrize("query", docs_examples())
def test_every_docs_example_parses(query):
    parse(query)


# Paraphrased from Tempo's TraceQL documentation (construct a query, metrics functions).
GOOD = [
    "{ }",
    '{ resource.service.name = "checkout" && name = "POST /api/cart" }',
    '{\n  resource.service.namespace = "shop" &&\n  name = "POST /api/orders" &&\n  status = error\n}',
    "{ span.http.response.status_code >= 200 && span.http.response.status_code < 300 } | count() > 2",
    '{ resource.service.name = "checkout" } >> { status = error }',
    '{ resource.deployment.environment = "prod" } && { resource.deployment.environment = "staging" }',
    '{ } !< { resource.service.name = "inventory" }',
    '{ resource.service.name = "inventory" } ~ { resource.service.name = "checkout" }',
    '{ span.http.url = "/api/cart" && status = error } &>> { status = error }',
    "{ status = error } !< { status = error }",
    '{ resource.region = "eu-west-1" } || { resource.region = "eu-north-1" }',
    "{ status = error } | select(span.http.url, resource.service.name)",
    '{ span.db.system =~ "postgresql|mysql" }',
    '{ event.exception.message =~ ".*timed out.*" }',
    '{ link.opentracing.ref_type = "follows_from" }',
    '{ instrumentation.language = "go" }',
    '{ span."attribute with space" = "value" }',
    '{ span.cart."item count" > 3 }',
    "{ span:duration > 100ms && span:kind = server }",
    '{ trace:duration > 2s && trace:rootName = "GET /" }',
    '{ event:name = "exception" && event:timeSinceStart > 2ms }',
    '{ link:traceID = "0123456789abcdef0123456789abcdef" }',
    '{ span:statusMessage = "Forbidden" && span:id != "0000000000000001" }',
    '{ resource.service.name = "cart" } | rate() by (instrumentation:name)',
    "avg(duration) > 20ms",
    "{ } | sum(span.bytes_processed) > 1000000000",
    "{ status = error } | by(resource.service.name) | count() > 1",
    "{ span.http.request.body.size > 10 * 1024 * 1024 }",
    "{ status = error } | rate() by (resource.service.name, name)",
    '{ name = "GET /:id" } | count_over_time() by (span.http.response.status_code)',
    '{ name = "GET /:id" } | min_over_time(duration) by (span.http.route)',
    '{ name = "GET /:id" } | max_over_time(span.http.response.body.size)',
    '{ name = "GET /:id" } | avg_over_time(duration) by (span.http.response.status_code)',
    '{ name = "GET /:id" } | quantile_over_time(duration, .99, .9, .5) by (span.http.route)',
    "{ } | histogram_over_time(duration) by (span.http.route)",
    '{ resource.service.name = "checkout" } | compare({ status = error })',
    "{ } | compare({ duration > 1s }, 5, 1700000000000000000, 1700000300000000000)",
    "{ } | rate() by (resource.service.name) | topk(5)",
    "{ } with (most_recent=true)",
    '{ span.cart.id = "a" } >> { status = error } with (most_recent=true)',
    "({ span.a = 1 } | count() > 1) && ({ span.b = 2 })",
    "{ span.any != nil }",
    "{ span.missing = nil }",
    "{ !(span.retry = true) || kind != client }",
    "{ span.http.request.header.accept =~ `application/.*` }",
    '{ resource.k8s.cluster.name = "prod" && trace:rootName !~ ".*health.*" }',
    "count() > 3 | { status = error }",
    "{ span.a > -1.5 && span.b < 1h30m && span.c >= 2d }",
    '{ span.route =~ "(?i)/api/v[0-9]+/(?P<thing>[a-z_]+)\\\\.json" }',
]


@pytest.mark.parametrize("query", GOOD)
def test_known_good_queries_parse(query):
    parse(query)


# (a good query, the same with one mistake, what the message says, line:column)
BROKEN = [
    ("{ span.a = 1 }", "{ span.a = 1", "expected '}' to close the '{' at column 1", "1:13"),
    ("{ span.a = 1 }", "span.a = 1 }", "expected a spanset filter", "1:1"),
    ("{ span.a = 1 } && { span.b = 2 }", "{ span.a = 1 } && { span.b = 2 } }", "'}' without a matching '{'", "1:34"),
    ("{ span.a = 1 && span.b = 2 }", "{ span.a = 1 { span.b = 2 } }", "filters do not nest", "1:14"),
    ("{ (span.a = 1 || span.b = 2) && span.c = 3 }", "{ (span.a = 1 || span.b = 2 && span.c = 3 }",
     "expected ')' to close the '(' at column 3", "1:43"),
    ("{ span.a = 1 }", "{ span.a == 1 }", "'==' is not TraceQL", "1:10"),
    ("{ span.a != 1 }", "{ span.a <> 1 }", "expected a value", "1:11"),
    ('{ span.a =~ "x" }', '{ span.a ~= "x" }', "'~' combines spansets", "1:10"),
    ("{ span.a = 1 } && { span.b = 2 }", "{ span.a = 1 } & { span.b = 2 }", "unexpected character '&'", "1:16"),
    ("{ span.a = 1 } && { span.b = 2 }", "{ span.a = 1 } = { span.b = 2 }", "cannot combine spansets", "1:16"),
    ("{ span.a = 1 } >> { span.b = 2 }", "{ span.a = 1 } >>> { span.b = 2 }", "expected a spanset filter", "1:18"),
    ("{ span.a = 1 && span.b = 2 }", "{ span.a = 1 >> span.b = 2 }", "'>>' combines spansets", "1:14"),
    ("{ status = error }", "{ status = failed }", "unknown word 'failed'", "1:12"),
    ('{ span.http.method = "GET" }', "{ span.http.method = GET }", 'a string is quoted ("GET")', "1:22"),
    ('{ span.a = "x" }', "{ span.a = 'x' }", "single quotes", "1:12"),
    ('{ span.a = "x" }', '{ span.a = "x }', "string not terminated", "1:12"),
    ('{ name = "x" }', '{ nme = "x" }', "unknown word 'nme'", "1:3"),
    ('{ span:name = "x" }', '{ span:nam = "x" }', "unknown intrinsic 'span:nam'", "1:3"),
    ("{ trace:duration > 1s }", "{ trace:length > 1s }", "unknown intrinsic 'trace:length'", "1:3"),
    ("{ span.a = 1 }", "{ span. = 1 }", "attribute name missing after 'span.'", "1:3"),
    ("{ span.a = 1 }", "{ spam.a = 1 }", "unknown scope 'spam.'", "1:3"),
    ('{ span.http.method = "GET" }', '{ http.method = "GET" }', "unknown scope 'http.'", "1:3"),
    ('{ span.a = "x" }', '{ span.a = "\\x" }', "unknown escape '\\x'", "1:13"),
    ("{ span.a =~ `\\d+` }", '{ span.a =~ "\\d+" }', "unknown escape '\\d'", "1:14"),
    ('{ span.a =~ "a.*" }', '{ span.a =~ "a.**" }', "invalid nested repetition operator", "1:13"),
    ('{ span.a =~ "(a|b)" }', '{ span.a =~ "(a|b" }', "missing closing ) (at character 1", "1:13"),
    ('{ span.a =~ "[a-z]+" }', '{ span.a =~ "[z-a]+" }', "invalid character class range", "1:13"),
    ('{ span.a =~ "(?:x)y" }', '{ span.a =~ "(?!x)y" }', "lookaround (?! is not supported", "1:13"),
    ("{ span.a =~ `(a)b` }", "{ span.a =~ `(a)\\1` }", "backreference \\1 is not supported", "1:13"),
    ('{ span.a =~ "x" }', "{ span.a =~ 1 }", "a regex is a string, not a int", "1:13"),
    ("{ duration > 1s }", '{ duration > "1s" }', "cannot compare a duration with a string", "1:12"),
    ("{ status = error }", '{ status = "error" }', "cannot compare a status with a string", "1:10"),
    ("{ span.a != nil }", "{ span.a > nil }", "nil can only be compared with = or !=", "1:12"),
    ("{ name != nil }", "{ name = nil }", "intrinsics cannot be nil", "1:3"),
    ("{ span.a = 1 }", "{ span.a + 1 }", "must be true or false", "1:3"),
    ("{ } | count() > 1", "{ } | count()", "an aggregate must be compared", "1:14"),
    ("{ } | max(duration) > 1s", "{ } | max(name) > 1s", "max() needs a number, not a string", "1:11"),
    ("{ span.a = 1 } | count() > 1", "{ span.a = 1 } | count > 1", "expected '(' after count", "1:24"),
    ("{ } | by(span.a) | count() > 1", "{ } | by() | count() > 1", "by() needs a field", "1:10"),
    ("{ } | coalesce()", "coalesce()", "cannot start with coalesce()", "1:1"),
    ("{ } | select(span.a)", "{ } | select()", "select() takes attributes", "1:14"),
    ("{ } | select(span.a, span.b)", "{ } | select(span.a span.b)", "expected ')' to close select(", "1:21"),
    ("{ } | rate() by (span.a)", "{ } | rate(duration) by (span.a)", "expected ')' to close rate(", "1:12"),
    ("{ } | rate()", "{ } | rates()", "unknown function 'rates'", "1:7"),
    ("{ } | quantile_over_time(duration, .95)", "{ } | quantile_over_time(duration)",
     "then the quantiles", "1:34"),
    ("{ } | quantile_over_time(duration, .95)", '{ } | quantile_over_time(duration, "p95")',
     "expects int or float", "1:36"),
    ("{ } | rate() | topk(5)", "{ } | rate() | topk(five)", "expects int", "1:21"),
    ("{ } | rate()", "{ } | rate() | rate()", "expected one of topk, bottomk", "1:16"),
    ("{ } with (most_recent=true)", "{ } with most_recent=true", "expected '(' after with", "1:10"),
    ("({ span.a = 1 } | count() > 1) && ({ span.b = 2 })",
     "({ span.a = 1 } | count() > 1) && ({ span.b = 2 }) | select(span.c)",
     "parenthesised pipelines cannot be piped further", "1:52"),
    ("({ span.a = 1 } | count() > 1) && ({ span.b = 2 })", "({ span.a = 1 } | count() > 1) && { span.b = 2 }",
     "a filter needs brackets too", "1:35"),
    ("{\n  span.a = 1 &&\n  span.b = 2\n}", "{\n  span.a = 1 &&\n  span.b == 2\n}", "'==' is not TraceQL", "3:10"),
]


@pytest.mark.parametrize("good, broken, message, position", BROKEN)
def test_one_mistake_is_refused_where_it_is(good, broken, message, position):
    parse(good)
    with pytest.raises(TraceQLError) as refused:
        parse(broken)
    assert message in str(refused.value)
    assert f"{refused.value.line}:{refused.value.column}" == position, str(refused.value)


def test_precedence_is_tempos():
    """&& and || share one level in Tempo's grammar (so `a || b && c` is `(a || b) && c`);
    structural operators bind tighter than && between spansets; unary minus takes what
    binds tighter than + after it."""
    same = [
        ("{ .a || .b && .c }", "{ (.a || .b) && .c }"),
        ("{ .a = 1 || .b = 2 }", "{ (.a = 1) || (.b = 2) }"),
        ("{ } && { .b } >> { .c }", "{ } && ({ .b } >> { .c })"),
        ("{ } >> { .b } || { .c }", "({ } >> { .b }) || { .c }"),
        ("{ -.a * 2 = 1 }", "{ -(.a * 2) = 1 }"),
        ("{ -.a + 2 = 1 }", "{ (-.a) + 2 = 1 }"),
        ("{ .a ^ 2 ^ 3 = 1 }", "{ .a ^ (2 ^ 3) = 1 }"),
        ("{ .a - 1 - 2 = 1 }", "{ (.a - 1) - 2 = 1 }"),
    ]
    for written, meant in same:
        assert parse(written) == parse(meant), written
    assert parse("{ .a - 1 - 2 = 1 }") != parse("{ .a - (1 - 2) = 1 }")


def test_unscoped_names_and_durations_lex_as_tempo_does():
    tokens = tokenize("{ .a.b-c/d=1 && span.x > 1h30m && .y < 1.5s && .z = .5 }")
    kinds = [(token.kind, token.value) for token in tokens if token.kind != "op"]
    assert kinds == [("attribute", ("", "a.b-c/d")), ("int", 1), ("attribute", ("span", "x")),
                     ("duration", 5400 * 10**9), ("attribute", ("", "y")), ("duration", 1_500_000_000),
                     ("attribute", ("", "z")), ("float", 0.5), ("end", None)]


# -- generated filters ------------------------------------------------------------------

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}(\.[a-z][a-z0-9_]{0,6}){0,3}", fullmatch=True)
ODD_NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=10)
ATTRIBUTES = st.builds(Attribute, st.sampled_from(("",) + ATTRIBUTE_SCOPES), NAMES | ODD_NAMES)


def intrinsics_of(kind):
    return st.sampled_from([Intrinsic(name) for name, type_ in INTRINSICS.items() if type_ == kind])


NUMBERS = st.one_of(
    st.builds(Static, st.just("int"), st.integers(0, 2**62)),
    st.builds(Static, st.just("float"), st.floats(0, 1e300, allow_nan=False, allow_infinity=False)),
    st.builds(Static, st.just("duration"), st.integers(0, 10**15)),
    ATTRIBUTES,
    intrinsics_of("duration"),
)
NUMERIC = st.recursive(NUMBERS, lambda inner: st.one_of(
    st.builds(Binary, st.sampled_from("+-*/%^"), inner, inner),
    st.builds(Unary, st.just("-"), inner)), max_leaves=5)
STRINGS = st.builds(Static, st.just("string"), st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
REGEXES = st.builds(Static, st.just("string"), st.sampled_from([
    ".*", "a|b", r"gpt-5\.6.*", "[a-z]+", "(?i)judge", "x{2,5}", r"\d+", "[[:alpha:]]+",
    r"\p{L}+", "(?P<n>a)b", "a*?b", r"\Qa.b\E", "[^]a]", r"[\]\\-]", "",
]) | st.from_regex(r"[A-Za-z0-9 _-]*", fullmatch=True))
TEXT_FIELDS = ATTRIBUTES | intrinsics_of("string")
EQUALITY = st.sampled_from(("=", "!="))
COMPARISON = st.one_of(
    st.builds(Binary, st.sampled_from(COMPARISONS), NUMERIC, NUMERIC),
    st.builds(Binary, EQUALITY, TEXT_FIELDS, STRINGS),
    st.builds(Binary, st.sampled_from(("=~", "!~")), TEXT_FIELDS, REGEXES),
    st.builds(Binary, EQUALITY, intrinsics_of("status"),
              st.sampled_from([Static("status", s) for s in ("ok", "error", "unset")])),
    st.builds(Binary, EQUALITY, intrinsics_of("kind"),
              st.sampled_from([Static("kind", k) for k in ("server", "client", "internal")])),
    st.builds(Binary, EQUALITY, ATTRIBUTES, st.just(Static("nil", None))),
    st.builds(Binary, EQUALITY, ATTRIBUTES, st.builds(Static, st.just("bool"), st.booleans())),
)
CONDITIONS = st.recursive(COMPARISON, lambda inner: st.one_of(
    st.builds(Binary, st.sampled_from(("&&", "||")), inner, inner),
    st.builds(Unary, st.just("!"), inner)), max_leaves=6)
FILTERS = st.builds(Filter, st.none() | CONDITIONS)
SPANSETS = st.recursive(FILTERS, lambda inner: st.builds(
    SpansetOp, st.sampled_from(sorted(SPANSET_OPERATORS)), inner, inner), max_leaves=4)
SELECTS = st.builds(Call, st.just("select"), st.lists(ATTRIBUTES | intrinsics_of("string"),
                                                       min_size=1, max_size=3).map(tuple))
HINTS = st.lists(st.tuples(st.sampled_from(("most_recent", "sample", "exemplars")),
                           st.builds(Static, st.just("bool"), st.booleans())), max_size=2).map(tuple)
QUERIES = st.builds(lambda spansets, selects, hints: Query(Pipeline((spansets,) + tuple(selects)), (), hints),
                    SPANSETS, st.lists(SELECTS, max_size=1), HINTS)


@given(QUERIES)
def test_generated_queries_parse_back_to_themselves(query):
    text = render(query)
    parsed = parse(text)
    assert parsed == query, text
    assert render(parsed) == text


@given(QUERIES)
def test_a_query_missing_its_last_closing_brace_is_refused(query):
    text = render(query)
    last = [token for token in tokenize(text) if token.kind == "op" and token.text == "}"][-1]
    with pytest.raises(TraceQLError):
        parse(text[:last.pos] + " " + text[last.pos + 1:])


PIECES = st.sampled_from(list("{}()[]\"`'\\.:=!~<>&|+-*/%^, 0123456789aeilnsu_\n") + [
    "span.", "span:", "nil", "&&", "rate()", "by(", "select(", "with (", "1s", ".95"])


@given(st.sampled_from(GOOD), st.integers(0, 300), st.integers(0, 3), st.lists(PIECES, max_size=3))
def test_any_edit_of_a_query_parses_or_is_refused_with_a_position(query, at, removed, inserted):
    """Whatever a user types, the answer is a tree or a TraceQLError, never a crash."""
    at %= len(query) + 1
    text = query[:at] + "".join(inserted) + query[at + removed:]
    try:
        parse(text)
    except TraceQLError as refused:
        assert 1 <= refused.line <= text.count("\n") + 1 and refused.column >= 1
