"""TraceQL, parsed: a syntax check for the queries the dashboard and the docs give users.

Tempo cannot run here (its licence keeps it out), so nothing sends these queries to it.
This module reads a query the way Tempo's parser does, from the grammar and the rules its
documentation describes (grafana.com/docs/tempo/latest/traceql, and the shape of
pkg/traceql's yacc grammar and lexer): spanset filters and the operators between them,
pipelines of aggregates, by(), select() and coalesce(), TraceQL metrics with their by(...),
topk/bottomk, and `with (...)` hints. It also makes the cheap checks Tempo makes after
parsing: the operand types of a comparison, where nil may stand, and whether Go's RE2 would
compile a regex (tests/re2syntax.py). `parse` returns the query's syntax tree, `render`
writes a tree back as a query, and every refusal is a TraceQLError naming the line and
column.

What it does not model: Tempo's rarer forms (parent. attributes, scalar filters over
wrapped pipelines such as `({ } | count()) > 2`, the "unsupported" forms its validation
refuses, the metrics functions newer than this grammar), and Tempo's leniency about
whitespace inside `span: name`. A query it accepts has
Tempo's syntax; whether Tempo finds anything is another question, left to the attribute
checks in tests/test_docs.py and tests/test_dashboard_queries.py.
"""

import re
from dataclasses import dataclass, field

from re2syntax import re2_problem

# -- the tree ---------------------------------------------------------------------------
# Each node keeps where it starts in the text (pos) for messages; pos takes no part in
# equality, so a tree parsed back from its rendering equals the original.


def _at():
    return field(default=-1, compare=False, repr=False)


@dataclass(frozen=True)
class Static:
    type: str  # string, int, float, duration (value in ns), bool, nil, status, kind
    value: object
    pos: int = _at()


@dataclass(frozen=True)
class Attribute:
    scope: str  # "" for an unscoped `.name`, else span, resource, event, link, instrumentation
    name: str
    pos: int = _at()


@dataclass(frozen=True)
class Intrinsic:
    name: str  # as written: `duration`, `span:name`, `trace:rootName` ...
    pos: int = _at()


@dataclass(frozen=True)
class Unary:
    op: str
    operand: object
    pos: int = _at()


@dataclass(frozen=True)
class Binary:
    op: str
    left: object
    right: object
    pos: int = _at()


@dataclass(frozen=True)
class Filter:
    expr: object  # None for `{ }`
    pos: int = _at()


@dataclass(frozen=True)
class SpansetOp:
    op: str
    left: object
    right: object
    pos: int = _at()


@dataclass(frozen=True)
class Wrapped:
    """A parenthesised pipeline that is more than spansets, as in `({ } | count() > 1) && ({ })`."""
    pipeline: object
    pos: int = _at()


@dataclass(frozen=True)
class Call:
    """A function: an aggregate (count(), avg(duration)), a stage (by, select, coalesce),
    or a metrics function (rate() by (...), topk(5))."""
    func: str
    args: tuple
    by: tuple = ()
    pos: int = _at()


@dataclass(frozen=True)
class Pipeline:
    stages: tuple
    pos: int = _at()


@dataclass(frozen=True)
class Query:
    pipeline: object  # a Pipeline, or Wrapped pipelines (alone or joined by SpansetOp)
    metrics: tuple = ()  # a metrics Call, then at most one topk/bottomk Call
    hints: tuple = ()  # (name, Static) pairs
    pos: int = _at()


class TraceQLError(ValueError):
    """A query Tempo would refuse; the message starts with the line and column."""

    def __init__(self, text, pos, message):
        self.line = text.count("\n", 0, pos) + 1
        self.column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"line {self.line}, column {self.column}: {message}")


# -- words and operators ---------------------------------------------------------------

STATUSES = ("ok", "error", "unset")
KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
LITERAL_WORDS = {"true": ("bool", True), "false": ("bool", False), "nil": ("nil", None)}
LITERAL_WORDS |= {word: ("status", word) for word in STATUSES}
LITERAL_WORDS |= {word: ("kind", word) for word in KINDS}

# Intrinsics and their types; the unscoped spellings are the older ones Tempo still reads.
_DURATION, _STRING = "duration", "string"
INTRINSICS = {
    "duration": _DURATION, "name": _STRING, "status": "status", "statusMessage": _STRING,
    "kind": "kind", "childCount": "int", "rootName": _STRING, "rootServiceName": _STRING,
    "traceDuration": _DURATION,
    "span:duration": _DURATION, "span:name": _STRING, "span:kind": "kind",
    "span:status": "status", "span:statusMessage": _STRING, "span:id": _STRING,
    "span:parentID": _STRING,
    "trace:duration": _DURATION, "trace:rootName": _STRING, "trace:rootService": _STRING,
    "trace:id": _STRING,
    "event:name": _STRING, "event:timeSinceStart": _DURATION,
    "link:traceID": _STRING, "link:spanID": _STRING,
    "instrumentation:name": _STRING, "instrumentation:version": _STRING,
}
INTRINSIC_SCOPES = ("span", "trace", "event", "link", "instrumentation")
ATTRIBUTE_SCOPES = ("span", "resource", "event", "link", "instrumentation")

AGGREGATES = ("count", "avg", "min", "max", "sum")
METRICS_FUNCTIONS = ("rate", "count_over_time", "min_over_time", "max_over_time",
                     "avg_over_time", "sum_over_time", "quantile_over_time",
                     "histogram_over_time", "compare")
SECOND_STAGE_FUNCTIONS = ("topk", "bottomk")
_NOT_NAMES = set(LITERAL_WORDS) | set(AGGREGATES) | set(METRICS_FUNCTIONS) | {
    "by", "select", "coalesce", "with"} | set(SECOND_STAGE_FUNCTIONS)

# Longest first, so `&>>` is not read as `&>` then `>`.
OPERATORS = sorted(["&>>", "&<<", "!>>", "!<<", "&&", "||", "!=", "!~", "=~", ">=", "<=", ">>",
                    "<<", "!>", "!<", "&>", "&<", "&~", "=", "<", ">", "!", "~", "|", "+", "-",
                    "*", "/", "%", "^", "{", "}", "(", ")", ","], key=len, reverse=True)

# Binding power in a field expression (Tempo's yacc precedences): && and || share the
# lowest, so `a || b && c` is `(a || b) && c`; ^ is the only right-associative one.
FIELD_OPERATORS = {"&&": 1, "||": 1, "=": 2, "!=": 2, "<": 2, "<=": 2, ">": 2, ">=": 2,
                   "=~": 2, "!~": 2, "+": 3, "-": 3, "*": 5, "/": 5, "%": 5, "^": 6}
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
UNARY_OPERATORS = {"-": 3, "!": 4}  # an operand takes the operators binding tighter
# Between spansets: && and || below the structural operators, all left-associative.
SPANSET_OPERATORS = {"&&": 1, "||": 1} | dict.fromkeys(
    (">", "<", ">>", "<<", "~", "!>", "!<", "!>>", "!<<", "!~", "&>", "&<", "&>>", "&<<", "&~"), 2)


# -- the lexer -------------------------------------------------------------------------

@dataclass(frozen=True)
class Token:
    kind: str  # string, int, float, duration, attribute, intrinsic, word, op, end
    text: str
    pos: int
    value: object = None


_NUMBER = re.compile(r"\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+")
_DURATION_TAIL = re.compile(r"[0-9.nsumhµdwy]+")
_PROM_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_GO_DURATION_PART = re.compile(r"(\d*\.?\d*)(ns|us|µs|ms|s|m|h)")
_PROM_UNITS_NS = tuple(seconds * 10**9 for seconds in (365 * 86400, 7 * 86400, 86400, 3600, 60, 1)) + (10**6,)
_GO_UNITS_NS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTRIBUTE_END = set("{}()=~!<>&|^,") | {" ", "\t", "\n", "\r"}
_GO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
               "\\": "\\", '"': '"'}


def duration_ns(text):
    """A Prometheus-style (1d, 1h30m) or Go-style (1.5s, 250us) duration, or None."""
    prom = _PROM_DURATION.fullmatch(text)
    if text and prom and any(prom.groups()):
        return sum(int(n) * unit for n, unit in zip(prom.groups(), _PROM_UNITS_NS) if n)
    total, at = 0.0, 0
    for part in _GO_DURATION_PART.finditer(text):
        if part.start() != at or part.group(1) in ("", "."):
            return None
        total, at = total + float(part.group(1)) * _GO_UNITS_NS[part.group(2)], part.end()
    return int(total) if at == len(text) and at else None


class _Lexer:
    """Splits a query into tokens as Tempo's lexer does: an attribute's name runs from its
    scope to the next space or operator character, a number followed by a unit is a
    duration, and strings are Go string literals."""

    def __init__(self, text):
        self.text = text

    def error(self, pos, message):
        return TraceQLError(self.text, pos, message)

    def tokens(self):
        found, at = [], 0
        while True:
            while at < len(self.text) and self.text[at].isspace():
                at += 1
            if at == len(self.text):
                return found + [Token("end", "", at)]
            token = self.token_at(at)
            found.append(token)
            at = token.pos + len(token.text)

    def token_at(self, at):
        text, char = self.text, self.text[at]
        if char in "\"`":
            return self.string(at)
        if char == "'":
            raise self.error(at, "strings take double quotes or backquotes, not single quotes")
        number = _NUMBER.match(text, at)
        if number:
            return self.number(at, number.group())
        if char == ".":
            return self.attribute(at, "", at + 1)
        word = _WORD.match(text, at)
        if word:
            return self.scoped(at, word.group())
        if text.startswith("==", at):
            raise self.error(at, "'==' is not TraceQL: equality is '='")
        for operator in OPERATORS:
            if text.startswith(operator, at):
                return Token("op", operator, at, operator)
        raise self.error(at, f"unexpected character {char!r}")

    def string(self, at):
        quote, text = self.text[at], self.text
        end = text.find(quote, at + 1) if quote == "`" else self.string_end(at)
        if end < 0:
            raise self.error(at, "string not terminated")
        body = text[at + 1:end]
        value = body.replace("\r", "") if quote == "`" else self.unquote(at + 1, body)
        return Token("string", text[at:end + 1], at, value)

    def string_end(self, at):
        index = at + 1
        while index < len(self.text) and self.text[index] not in '"\n':
            index += 2 if self.text[index] == "\\" else 1
        return index if index < len(self.text) and self.text[index] == '"' else -1

    def unquote(self, start, body):
        """Go's rules for a double-quoted literal: an unknown escape such as `\\d` is an
        error, so a regex class needs `\\\\d` (or a backquoted string)."""
        out, index = [], 0
        while index < len(body):
            if body[index] != "\\":
                out.append(body[index])
                index += 1
                continue
            escape = body[index + 1]
            if escape in _GO_ESCAPES:
                out.append(_GO_ESCAPES[escape])
                index += 2
                continue
            digits = {"x": 2, "u": 4, "U": 8}.get(escape)
            if digits and re.fullmatch(r"[0-9a-fA-F]{%d}" % digits, body[index + 2:index + 2 + digits]):
                out.append(chr(int(body[index + 2:index + 2 + digits], 16)))
                index += 2 + digits
                continue
            if re.fullmatch(r"[0-3][0-7]{2}", body[index + 1:index + 4]):
                out.append(chr(int(body[index + 1:index + 4], 8)))
                index += 4
                continue
            raise self.error(start + index, f"unknown escape '\\{escape}' in a string "
                             "(a regex's backslash is written '\\\\' in double quotes)")
        return "".join(out)

    def number(self, at, digits):
        tail = _DURATION_TAIL.match(self.text, at + len(digits))
        if tail:
            nanoseconds = duration_ns(digits + tail.group())
            if nanoseconds is not None:
                return Token("duration", digits + tail.group(), at, nanoseconds)
        if re.fullmatch(r"\d+", digits):
            return Token("int", digits, at, int(digits))
        return Token("float", digits, at, float(digits))

    def scoped(self, at, word):
        after = at + len(word)
        following = self.text[after:after + 1]
        if following == "." and word in ATTRIBUTE_SCOPES:
            return self.attribute(at, word, after + 1)
        if following == ":" and word in INTRINSIC_SCOPES:
            name = _WORD.match(self.text, after + 1)
            intrinsic = f"{word}:{name.group() if name else ''}"
            if intrinsic not in INTRINSICS:
                known = ", ".join(sorted(n for n in INTRINSICS if n.startswith(word + ":")))
                raise self.error(at, f"unknown intrinsic {intrinsic!r} (known: {known})")
            return Token("intrinsic", intrinsic, at, intrinsic)
        if following in (".", ":") and word not in _NOT_NAMES and word not in INTRINSICS:
            scopes = ", ".join(s + "." for s in ATTRIBUTE_SCOPES)
            raise self.error(at, f"unknown scope {word + following!r}: attributes are "
                             f".name or scoped ({scopes})")
        return Token("word", word, at, word)

    def attribute(self, at, scope, name_at):
        name, index = [], name_at
        while index < len(self.text) and self.text[index] not in _ATTRIBUTE_END:
            if self.text[index] != '"':
                name.append(self.text[index])
                index += 1
                continue
            index = self.quoted_part(index, name)
        if not name:
            raise self.error(at, f"attribute name missing after {self.text[at:name_at]!r}")
        return Token("attribute", self.text[at:index], at, (scope, "".join(name)))

    def quoted_part(self, index, name):
        """`span."a b"` names the attribute `a b`; only \\" and \\\\ escape inside."""
        start, index = index, index + 1
        while index < len(self.text) and self.text[index] != '"':
            if self.text[index] == "\\":
                if self.text[index + 1:index + 2] not in ('"', "\\"):
                    raise self.error(index, "only \\\" and \\\\ escape inside a quoted attribute name")
                index += 1
            name.append(self.text[index])
            index += 1
        if index == len(self.text):
            raise self.error(start, "quoted attribute name not terminated")
        return index + 1


def tokenize(text):
    return _Lexer(text).tokens()


# -- the parser ------------------------------------------------------------------------

class _Parser:
    """Recursive descent over the tokens; each method reads one rule of the grammar."""

    def __init__(self, text):
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0

    # - helpers

    def peek(self, ahead=0):
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def take(self):
        token = self.peek()
        self.index += 1
        return token

    def at(self, *texts):
        """Whether the next token is one of these operators or words."""
        token = self.peek()
        return token.kind in ("op", "word") and token.text in texts

    def error(self, token, message):
        return TraceQLError(self.text, token.pos, message)

    def column(self, token):
        return TraceQLError(self.text, token.pos, "").column

    def found(self, token):
        return "the end of the query" if token.kind == "end" else repr(token.text)

    def expect(self, text, context):
        token = self.peek()
        if token.kind not in ("op", "word") or token.text != text:
            raise self.error(token, f"expected {text!r} {context}, found {self.found(token)}")
        return self.take()

    # - the query

    def query(self):
        start = self.peek()
        pipeline = self.pipeline(top=True)
        metrics = ()
        if self.at("|"):
            if not isinstance(pipeline, Pipeline):
                raise self.error(self.peek(), "metrics follow a pipeline, not parenthesised pipelines")
            metrics = self.metrics()
        hints = self.hints() if self.at("with") else ()
        end = self.peek()
        if end.kind != "end":
            if end.text == "}":
                raise self.error(end, "'}' without a matching '{'")
            if end.text == ")":
                raise self.error(end, "')' without a matching '('")
            raise self.error(end, f"unexpected {self.found(end)} after a complete query")
        return Query(pipeline, metrics, hints, pos=start.pos)

    def pipeline(self, top=False):
        start = self.peek()
        stages = [self.stage(first=True)]
        while self.at("|"):
            following = self.peek(1)
            if top and following.kind == "word" and following.text in METRICS_FUNCTIONS:
                break
            if _holds_wrapped(stages[0]):
                raise self.error(self.peek(), "parenthesised pipelines cannot be piped further")
            self.take()
            stages.append(self.stage(first=False))
            if _holds_wrapped(stages[-1]):
                raise self.error(self.peek(), "a parenthesised pipeline cannot follow '|'")
        if len(stages) == 1 and _holds_wrapped(stages[0]):
            return stages[0]
        return Pipeline(tuple(stages), pos=start.pos)

    def stage(self, first):
        token = self.peek()
        if token.kind in ("int", "float", "duration") or self.at("-", *AGGREGATES):
            return self.scalar_filter()
        if self.at("("):
            ahead = 1
            while self.peek(ahead).kind == "op" and self.peek(ahead).text == "(":
                ahead += 1
            inner = self.peek(ahead)  # what the brackets hold: a scalar, or spansets
            if inner.kind in ("int", "float", "duration") or (
                    inner.kind in ("word", "op") and inner.text in AGGREGATES + ("-",)):
                return self.scalar_filter()
            return self.spanset()
        if self.at("{"):
            return self.spanset()
        if self.at("by"):
            self.take()
            self.expect("(", "after by")
            if self.at(")"):
                raise self.error(self.peek(), "by() needs a field, as in by(resource.service.name)")
            grouped = self.field()
            _type_of(self.text, grouped)
            self.expect(")", "to close by(")
            return Call("by", (grouped,), pos=token.pos)
        if self.at("select"):
            self.take()
            self.expect("(", "after select")
            return Call("select", self.attribute_list("select"), pos=token.pos)
        if self.at("coalesce"):
            if first:
                raise self.error(token, "a pipeline cannot start with coalesce()")
            self.take()
            self.expect("(", "after coalesce")
            self.expect(")", "coalesce() takes no arguments")
            return Call("coalesce", (), pos=token.pos)
        if token.kind == "word" and self.peek(1).text == "(":
            raise self.error(token, f"unknown function {token.text!r} in a pipeline")
        raise self.error(token, "expected a spanset filter '{ ... }', an aggregate, by(), "
                         f"select() or coalesce(), found {self.found(token)}")

    # - spansets

    def spanset(self, min_power=1, bare=None):
        """Spansets joined by operators. Tempo's grammar joins parenthesised pipelines only
        to others in brackets, so bare collects the unbracketed operands of the chain."""
        top, bare = bare is None, [] if bare is None else bare
        if not self.at("("):
            bare.append(self.peek())
        left = self.spanset_operand()
        while True:
            token = self.peek()
            power = SPANSET_OPERATORS.get(token.text) if token.kind == "op" else None
            if power is None and token.kind == "op" and token.text in FIELD_OPERATORS:
                raise self.error(token, f"{token.text!r} cannot combine spansets "
                                 "(&&, ||, >, >>, <, <<, ~ and their ! and & forms can)")
            if power is None or power < min_power:
                break
            self.take()
            left = SpansetOp(token.text, left, self.spanset(power + 1, bare), pos=token.pos)
        if top and bare and _holds_wrapped(left):
            raise self.error(bare[0], "joined to a parenthesised pipeline, a filter needs "
                             "brackets too: ({ ... })")
        return left

    def spanset_operand(self):
        token = self.peek()
        if self.at("{"):
            self.take()
            if self.at("}"):
                self.take()
                return Filter(None, pos=token.pos)
            expr = self.field()
            if self.at("{"):
                raise self.error(self.peek(), "'{' inside a spanset filter: filters do not nest")
            self.expect("}", f"to close the '{{' at column {self.column(token)}")
            _check_filter(self.text, expr)
            return Filter(expr, pos=token.pos)
        if self.at("("):
            self.take()
            inner = self.pipeline()
            self.expect(")", f"to close the '(' at column {self.column(token)}")
            if not isinstance(inner, Pipeline):
                return inner  # already parenthesised pipelines
            if len(inner.stages) == 1 and isinstance(inner.stages[0], (Filter, SpansetOp)):
                return inner.stages[0]
            return Wrapped(inner, pos=token.pos)
        raise self.error(token, f"expected a spanset filter '{{ ... }}', found {self.found(token)}")

    # - field expressions, inside { }

    def field(self, min_power=1):
        left = self.field_operand()
        while True:
            token = self.peek()
            power = FIELD_OPERATORS.get(token.text) if token.kind == "op" else None
            if power is None:
                if token.kind == "op" and token.text in SPANSET_OPERATORS:
                    raise self.error(token, f"{token.text!r} combines spansets: "
                                     "use it between '{ }' filters")
                return left
            if power < min_power:
                return left
            self.take()
            right_power = power if token.text == "^" else power + 1
            left = Binary(token.text, left, self.field(right_power), pos=token.pos)

    def field_operand(self):
        token = self.peek()
        if token.kind == "op" and token.text in UNARY_OPERATORS:
            self.take()
            return Unary(token.text, self.field(UNARY_OPERATORS[token.text] + 1), pos=token.pos)
        if self.at("("):
            self.take()
            inner = self.field()
            self.expect(")", f"to close the '(' at column {self.column(token)}")
            return inner
        value = self.static_or_field(token)
        if value is None:
            if token.kind == "word":
                raise self.error(token, f"unknown word {token.text!r}: not an intrinsic; a string "
                                 f"is quoted (\"{token.text}\"), an attribute scoped (span.{token.text})")
            raise self.error(token, f"expected a value, an attribute or an intrinsic, "
                             f"found {self.found(token)}")
        self.take()
        return value

    def static_or_field(self, token):
        if token.kind in ("string", "int", "float", "duration"):
            return Static(token.kind, token.value, pos=token.pos)
        if token.kind == "attribute":
            return Attribute(*token.value, pos=token.pos)
        if token.kind == "intrinsic" or (token.kind == "word" and token.text in INTRINSICS):
            return Intrinsic(token.text, pos=token.pos)
        if token.kind == "word" and token.text in LITERAL_WORDS:
            return Static(*LITERAL_WORDS[token.text], pos=token.pos)
        return None

    def attribute_list(self, function):
        attributes = [self.attribute(function)]
        while self.at(","):
            self.take()
            attributes.append(self.attribute(function))
        self.expect(")", f"to close {function}(")
        return tuple(attributes)

    def attribute(self, function):
        token = self.peek()
        value = self.static_or_field(token)
        if not isinstance(value, (Attribute, Intrinsic)):
            raise self.error(token, f"{function}() takes attributes or intrinsics, "
                             f"found {self.found(token)}")
        self.take()
        return value

    # - scalar filters: count() > 2, avg(duration) > 1s

    def scalar_filter(self):
        left = self.scalar()
        token = self.peek()
        if not (token.kind == "op" and token.text in COMPARISONS):
            raise self.error(token, "an aggregate must be compared, as in count() > 2, "
                             f"found {self.found(token)}")
        self.take()
        return Binary(token.text, left, self.scalar(), pos=token.pos)

    def scalar(self, min_power=1):
        left = self.scalar_operand()
        while True:
            token = self.peek()
            power = FIELD_OPERATORS.get(token.text) if token.text in "+-*/%^" else None
            if power is None or power < min_power:
                return left
            self.take()
            right_power = power if token.text == "^" else power + 1
            left = Binary(token.text, left, self.scalar(right_power), pos=token.pos)

    def scalar_operand(self):
        token = self.take()
        if token.kind in ("int", "float", "duration"):
            return Static(token.kind, token.value, pos=token.pos)
        if token.kind == "op" and token.text == "-" and self.peek().kind in ("int", "float", "duration"):
            number = self.take()
            return Static(number.kind, -number.value, pos=token.pos)
        if token.kind == "op" and token.text == "(":
            inner = self.scalar()
            self.expect(")", "to close '('")
            return inner
        if token.kind == "word" and token.text in AGGREGATES:
            self.expect("(", f"after {token.text}")
            if token.text == "count":
                self.expect(")", "count() takes no arguments")
                return Call("count", (), pos=token.pos)
            if self.at(")"):
                raise self.error(self.peek(), f"{token.text}() needs a field, as in {token.text}(duration)")
            start = self.peek()
            arg = self.field()
            kind = _type_of(self.text, arg)
            if kind not in _NUMERIC + ("attribute",):
                raise self.error(start, f"{token.text}() needs a number, not a {kind}")
            self.expect(")", f"to close {token.text}(")
            return Call(token.text, (arg,), pos=token.pos)
        raise self.error(token, f"expected an aggregate or a number, found {self.found(token)}")

    # - metrics: | rate() by (...) | topk(5)

    def metrics(self):
        self.take()  # |
        first = self.metrics_function(METRICS_FUNCTIONS)
        if not self.at("|"):
            return (first,)
        self.take()
        return first, self.metrics_function(SECOND_STAGE_FUNCTIONS)

    def metrics_function(self, functions):
        token = self.take()
        if token.kind != "word" or token.text not in functions:
            raise self.error(token, f"expected one of {', '.join(functions)}, found {self.found(token)}")
        self.expect("(", f"after {token.text}")
        if token.text in ("rate", "count_over_time"):
            args = ()
        elif token.text in SECOND_STAGE_FUNCTIONS:
            args = (self.number(token.text, ("int",)),)
        elif token.text == "compare":
            args = self.compare_args()
        else:
            args = (self.attribute(token.text),)
            if token.text == "quantile_over_time":
                self.expect(",", "then the quantiles, as in quantile_over_time(duration, .95)")
                args += (self.number(token.text, ("int", "float")),)
                while self.at(","):
                    self.take()
                    args += (self.number(token.text, ("int", "float")),)
        self.expect(")", f"to close {token.text}(")
        by = ()
        if token.text in METRICS_FUNCTIONS and self.at("by"):
            self.take()
            self.expect("(", "after by")
            by = self.attribute_list("by")
        return Call(token.text, args, by, pos=token.pos)

    def compare_args(self):
        args = (self.spanset_operand(),)
        if not isinstance(args[0], Filter):
            raise self.error(self.peek(), "compare() takes one spanset filter '{ ... }'")
        counts = []
        while self.at(","):
            self.take()
            counts.append(self.number("compare", ("int",)))
        if len(counts) not in (0, 1, 3):
            raise self.error(self.peek(), "compare() takes a filter, then a top N, then "
                             "both or neither of a start and an end")
        return args + tuple(counts)

    def number(self, function, kinds):
        token = self.take()
        if token.kind not in kinds:
            raise self.error(token, f"{function}() expects {' or '.join(kinds)} here, found {self.found(token)}")
        return Static(token.kind, token.value, pos=token.pos)

    # - hints: with (most_recent=true)

    def hints(self):
        self.take()  # with
        self.expect("(", "after with")
        hints = [self.hint()]
        while self.at(","):
            self.take()
            hints.append(self.hint())
        self.expect(")", "to close with(")
        return tuple(hints)

    def hint(self):
        name = self.take()
        if name.kind != "word" or name.text in _NOT_NAMES or name.text in INTRINSICS:
            raise self.error(name, f"expected a hint name, found {self.found(name)}")
        self.expect("=", f"after the hint {name.text}")
        value = self.static_or_field(self.peek())
        if not isinstance(value, Static) or value.type == "nil":
            raise self.error(self.peek(), f"a hint's value is a literal, found {self.found(self.peek())}")
        self.take()
        return name.text, value


def _holds_wrapped(node):
    if isinstance(node, Wrapped):
        return True
    return isinstance(node, SpansetOp) and (_holds_wrapped(node.left) or _holds_wrapped(node.right))


def parse(text):
    """The query's syntax tree (a Query), or TraceQLError saying where and why not."""
    return _Parser(text).query()


# -- the checks Tempo makes after parsing ------------------------------------------------

_NUMERIC = ("int", "float", "duration")


def _check_filter(text, expr):
    kind = _type_of(text, expr)
    if kind not in ("bool", "attribute"):
        start = expr
        while isinstance(start, Binary):
            start = start.left
        raise TraceQLError(text, start.pos, f"a spanset filter must be true or false, not a {kind}")


def _type_of(text, node):
    """The type of a field expression (attribute when only the data can tell), refusing
    what Tempo's validation refuses: mismatched operands, nil outside `= nil`/`!= nil`,
    a regex that is not a string RE2 compiles."""
    def fail(at, message):
        raise TraceQLError(text, at.pos, message)

    if isinstance(node, Static):
        if node.type == "nil":
            fail(node, "nil can only be compared with = or !=")
        return node.type
    if isinstance(node, Attribute):
        return "attribute"
    if isinstance(node, Intrinsic):
        return INTRINSICS[node.name]
    if isinstance(node, Unary):
        kind = _type_of(text, node.operand)
        wanted = ("bool",) if node.op == "!" else _NUMERIC
        if kind not in wanted + ("attribute",):
            fail(node, f"{node.op!r} cannot apply to a {kind}")
        return "bool" if node.op == "!" else kind
    nil = [side for side in (node.left, node.right) if isinstance(side, Static) and side.type == "nil"]
    if nil:
        if node.op not in ("=", "!="):
            fail(nil[0], "nil can only be compared with = or !=")
        other = node.right if node.left is nil[0] else node.left
        if node.op == "=" and isinstance(other, Intrinsic):
            fail(other, f"intrinsics cannot be nil: {other.name} is always set")
        if other is not nil[0] and not (isinstance(other, Static) and other.type == "nil"):
            _type_of(text, other)
        return "bool"
    left, right = _type_of(text, node.left), _type_of(text, node.right)
    if node.op in ("&&", "||"):
        for side, kind in ((node.left, left), (node.right, right)):
            if kind not in ("bool", "attribute"):
                fail(side, f"{node.op!r} joins conditions, not a {kind}")
        return "bool"
    if node.op in ("=~", "!~"):
        _check_regex(text, node, left, right)
        return "bool"
    if node.op in COMPARISONS:
        if not (left == right or "attribute" in (left, right) or (left in _NUMERIC and right in _NUMERIC)):
            fail(node, f"cannot compare a {left} with a {right} using {node.op!r}")
        return "bool"
    for side, kind in ((node.left, left), (node.right, right)):
        if kind not in _NUMERIC + ("attribute",):
            fail(side, f"{node.op!r} needs numbers, not a {kind}")
    return left if left != "attribute" else right  # as Tempo implies it: `.a + 1` is an int


def _check_regex(text, node, left, right):
    if left not in ("string", "attribute"):
        raise TraceQLError(text, node.left.pos, f"a {left} cannot match a regex")
    if right != "attribute" and right != "string":
        raise TraceQLError(text, node.right.pos, f"a regex is a string, not a {right}")
    if isinstance(node.right, Static):
        problem = re2_problem(node.right.value)
        if problem:
            where, message = problem
            raise TraceQLError(text, node.right.pos, f"RE2 refuses the regex {node.right.value!r}: "
                               f"{message} (at character {where + 1} of the regex)")


# -- rendering: a tree back to a query ----------------------------------------------------

def render(node):
    """The query text of a tree, with only the parentheses the precedences need, so that
    parse(render(tree)) == tree."""
    if isinstance(node, Query):
        text = render(node.pipeline)
        text += "".join(" | " + render(stage) for stage in node.metrics)
        if node.hints:
            text += " with (" + ", ".join(f"{name}={render(value)}" for name, value in node.hints) + ")"
        return text
    if isinstance(node, Pipeline):
        return " | ".join(render(stage) for stage in node.stages)
    if isinstance(node, Filter):
        return "{ }" if node.expr is None else "{ " + render(node.expr) + " }"
    if isinstance(node, Wrapped):
        return "(" + render(node.pipeline) + ")"
    if isinstance(node, SpansetOp):
        return _render_binary(node, SPANSET_OPERATORS)
    if isinstance(node, Call):
        text = f"{node.func}({', '.join(render(arg) for arg in node.args)})"
        return text + (f" by ({', '.join(render(arg) for arg in node.by)})" if node.by else "")
    if isinstance(node, Binary):
        return _render_binary(node, FIELD_OPERATORS)
    if isinstance(node, Unary):
        operand = render(node.operand)
        if _power(node.operand, FIELD_OPERATORS) <= UNARY_OPERATORS[node.op]:
            operand = f"({operand})"
        return node.op + operand
    if isinstance(node, Attribute):
        return ("." if not node.scope else node.scope + ".") + _render_attribute_name(node)
    if isinstance(node, Intrinsic):
        return node.name
    return _render_static(node)


def _power(node, powers):
    if isinstance(node, (Binary, SpansetOp)):
        return powers[node.op]
    if isinstance(node, Unary):
        return UNARY_OPERATORS[node.op]
    return 99


def _render_binary(node, powers):
    power = powers[node.op]
    left, right = render(node.left), render(node.right)
    right_associative = node.op == "^"
    # A unary operand swallows the tighter operators after it, so it is always bracketed.
    if isinstance(node.left, Unary) or _power(node.left, powers) < power + right_associative:
        left = f"({left})"
    if isinstance(node.right, Unary) or _power(node.right, powers) < power + (not right_associative):
        right = f"({right})"
    return f"{left} {node.op} {right}"


def _render_attribute_name(node):
    name = node.name
    plain = name and not any(char in _ATTRIBUTE_END or char == '"' for char in name)
    if plain and (node.scope or not name[0].isdigit()):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render_static(node):
    if node.type == "string":
        return '"' + "".join(_go_escape(char) for char in node.value) + '"'
    if node.type == "duration":
        for unit, size in (("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9), ("ms", 10**6), ("us", 10**3)):
            if node.value and node.value % size == 0:
                return f"{node.value // size}{unit}"
        return f"{node.value}ns"
    if node.type == "float":
        return repr(node.value)
    if node.type in ("bool", "nil"):
        return {True: "true", False: "false", None: "nil"}[node.value]
    return str(node.value)


def _go_escape(char):
    for name, value in _GO_ESCAPES.items():
        if char == value:
            return "\\" + name
    return char if char.isprintable() else f"\\U{ord(char):08x}"
