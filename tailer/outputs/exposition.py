"""A small metrics registry, Prometheus text exposition (format 0.0.4) and textfiles.

Generic and standard library only: tailer.outputs.metrics declares the project's metric families on
top of it. One lock guards the whole registry, because the HTTP thread renders while other
threads count.

Label values are sanitised before they become series (see sanitise_label_value) and each
label NAME has a bounded vocabulary shared by all families: once it holds its limit of
distinct values (label_value_limits, else DEFAULT_LABEL_VALUE_LIMIT), new values are counted
under "other". So a garbage log cannot explode the number of series.

Zero first (a contract users rely on)
-------------------------------------
Prometheus's increase() and rate() cannot see the first value of a series: a counter that
first appears at 3 adds nothing to increase(). So every new counter or histogram series
(label set, including one declared with inc(labels, 0)) is born *pending*: it is rendered
at zero (a histogram with all buckets, sum and count at zero) while its true value keeps
accumulating, and is *promoted* to its true value as follows.

- render(), for an HTTP scrape: a pending series is shown at zero once, and from the next
  render() on at its true value.
- render_textfile(), for a file read at times we do not know: a pending series is shown at
  zero until ZERO_HOLD_SECONDS have passed since it was born. 120 s covers Prometheus's
  default 1 min scrape interval. The two views keep separate state, so a scrape of /metrics
  never cuts short the zero in the textfile.
- A series pending for ZERO_HOLD_SECONDS is shown at its true value by render() as well,
  even if no scrape ever saw its zero.
- render_final(), for the exit and --once: every series at its true value, and every
  series promoted for both views, because no later scrape would show what was held back.
- Gauges are exempt: they are shown at their value at once.

Published values
----------------
render() and render_textfile() show each series as of the last publish(), not as it is
this instant. The tailer publishes right after it saved its checkpoint, so a scrape never
sees a count that a crash could take back: a counter that went down after a restart
would look like a reset to Prometheus, and increase() would count it twice.
render_final() shows the true values.

Only the first scraper of /metrics is sure to see a zero: a second Prometheus scraping the
same endpoint (an HA pair) may see the series first at its value.
"""

import bisect
import copy
import math
import re
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple

from .. import saved_state
from ..atomic_file import replace_file

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ZERO_HOLD_SECONDS = 120.0
DEFAULT_LABEL_VALUE_LIMIT = 32
MAX_LABEL_VALUE_LENGTH = 64
OVERFLOW_LABEL_VALUE = "other"
ABSENT_LABEL_VALUE = "unknown"
SERIES_REMEMBERED = 10_000  # per family, by raw label values

# One sample: (sample name, [(label, value), ...], value), for history and for tests.
Sample = tuple[str, list, float]
# The same, as the registry keeps it: (name, labels, whole number, what to divide it by).
ExactSample = tuple[str, list, int, int]

# Counters and histogram sums are kept as whole numbers of 1/EXACT (see _exact).
EXACT = 1_000_000_000


def _exact(amount: float) -> int:
    """An amount as a whole number of 1/EXACT: sums of these do not depend on their order.

    Floats do: turns added in reading order and in time order (history) could end an ulp
    apart, and a history sample an ulp above the next scrape reads as a counter reset. Every
    amount counted here is a count, credits in nano units / 1e9 or milliseconds / 1000, so
    nothing is lost.
    """
    return amount * EXACT if type(amount) is int else round(amount * EXACT)


def _exact_loaded(data) -> int:
    """A saved exact value; a float is a value as shown, from a version 2 checkpoint."""
    return data if type(data) is int else _exact(float(data))

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_UNSAFE_LABEL_VALUE_CHARS = re.compile(r"[^A-Za-z0-9._:/+-]")


def sanitise_label_value(value: object) -> str:
    """Make any value a safe, short label value; absent and empty values become "unknown"."""
    text = "" if value is None else str(value).strip()
    text = _UNSAFE_LABEL_VALUE_CHARS.sub("_", text)[:MAX_LABEL_VALUE_LENGTH]
    return text or ABSENT_LABEL_VALUE


def _escape(text: str, *, quoted: bool) -> str:
    """The one place text is escaped: HELP text escapes backslash and newline, quoted label
    values escape double quotes too. Sanitised label values never need it; this keeps the
    output valid if that ever changes."""
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quoted else text


def _format_value(value: float) -> str:
    """Format like Prometheus: 1, 0.5, +Inf, -Inf, NaN (whole numbers without ".0")."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _format_le(bound: float) -> str:
    """A bucket bound as Prometheus 3 stores it: whole numbers with ".0" (`1.0`, not `1`).

    Prometheus 3 rewrites the `le` of scraped buckets to this form but keeps pushed samples
    as they are, so writing it ourselves keeps history and scrapes one series.
    """
    if math.isinf(bound):
        return "+Inf"
    text = repr(float(bound))
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"


def _sample(name: str, labels: list[tuple[str, str]], value: float) -> str:
    if not labels:
        return f"{name} {_format_value(value)}"
    pairs = ",".join(f'{label}="{_escape(text, quoted=True)}"' for label, text in labels)
    return f"{name}{{{pairs}}} {_format_value(value)}"


# How far a series is through zero first, for scrapes.
PENDING, SERVED, DONE = "pending", "served", "done"


class _Series:
    """One label set (key: its label values as stored): its true value, and how far it is
    through zero first."""

    __slots__ = ("key", "value", "published", "scrape_zero", "zero_until")

    def __init__(self, key: tuple[str, ...], value, zero_first: bool, now: float):
        self.key = key
        self.value = value
        self.published = copy.deepcopy(value)
        self.scrape_zero = PENDING if zero_first else DONE
        self.zero_until = now + ZERO_HOLD_SECONDS if zero_first else now


def _scrape_shows_zero(series: _Series, now: float) -> bool:
    """A served zero goes on being shown until the next save_and_publish: only then is the
    fact that a scrape saw it saved, so a restart cannot show the zero after the value."""
    if series.scrape_zero == PENDING and now < series.zero_until:
        series.scrape_zero = SERVED
    return series.scrape_zero == SERVED


def _textfile_shows_zero(series: _Series, now: float) -> bool:
    return now < series.zero_until


def _final_shows_zero(series: _Series, now: float) -> bool:
    series.scrape_zero = DONE
    series.zero_until = now
    return False


class _Family:
    """A metric family: a name, HELP text, label names and its series by label values."""

    type = ""
    zero_first = True

    def __init__(self, registry: "Registry", name: str, help: str, labelnames):
        labelnames = tuple(labelnames)
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(f"invalid metric name {name!r}")
        for label in labelnames:
            if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
                raise ValueError(f"invalid label name {label!r} in {name}")
        if len(set(labelnames)) != len(labelnames):
            raise ValueError(f"repeated label name in {name}")
        self._registry = registry
        self.name = name
        self.help = help
        self.labelnames = labelnames
        self.series: dict[tuple[str, ...], _Series] = {}
        self.remembered: dict[tuple, _Series] = {}  # by raw label values, see Registry._series

    def _ordered_values(self, labels: dict[str, str] | None) -> tuple:
        """The values of labels in the declared label order, as Registry.record takes them."""
        if not labels and not self.labelnames:
            return ()  # without a list to build: the newest event's gauge is set most lines
        labels = labels or {}
        if len(labels) == len(self.labelnames):
            try:
                return tuple([labels[label] for label in self.labelnames])
            except KeyError:
                pass
        raise ValueError(f"{self.name} takes labels {sorted(self.labelnames)}, got {sorted(labels)}")

    def _record(self, values: tuple, amount: float) -> None:
        """Add `amount` to (a counter) or observe it in (a histogram) the series of `values`,
        given in declared order; the caller holds the lock."""
        self._add(self._registry._series(self, values), amount)

    def zero(self):
        return 0.0

    def dump(self, value) -> object:
        return value

    def load(self, data) -> object:
        return float(data)

    def exact_values(self, labels: list[tuple[str, str]], value) -> list[ExactSample]:
        """The samples a series is made of, each as a number and what to divide it by."""
        return [(self.name, labels, value, 1)]

    def values(self, labels: list[tuple[str, str]], value) -> list[Sample]:
        """The samples a series is made of: (sample name, labels, value)."""
        return [(name, labels, number / divisor)
                for name, labels, number, divisor in self.exact_values(labels, value)]


class Counter(_Family):
    type = "counter"

    def __init__(self, registry, name, help, labelnames):
        if not name.endswith("_total"):
            raise ValueError(f"counter name {name!r} must end with _total")
        super().__init__(registry, name, help, labelnames)

    def inc(self, labels: dict[str, str] | None = None, amount: float = 1.0) -> None:
        """Add amount; inc(labels, 0) declares the series so it is seen at zero early."""
        values = self._ordered_values(labels)
        with self._registry._lock:
            self._record(values, amount)

    def _add(self, series: _Series, amount: float) -> None:
        if not amount >= 0:
            raise ValueError(f"counter {self.name} can only grow, got {amount!r}")
        series.value += _exact(amount)

    def zero(self) -> int:
        return 0

    def load(self, data) -> int:
        return _exact_loaded(data)

    def exact_values(self, labels, value: int) -> list[ExactSample]:
        return [(self.name, labels, value, EXACT)]


class Gauge(_Family):
    type = "gauge"
    zero_first = False

    def set(self, labels: dict[str, str] | None, value: float) -> None:
        values = self._ordered_values(labels)
        with self._registry._lock:
            self._registry._series(self, values).value = float(value)


class _HistogramValue:
    __slots__ = ("bucket_counts", "sum")

    def __init__(self, bucket_count: int):
        self.bucket_counts = [0] * bucket_count
        self.sum = 0  # exact: see _exact

    def __deepcopy__(self, memo) -> "_HistogramValue":
        # Every save copies every series (Registry._publish): copy's generic way, through
        # __reduce_ex__, took some ten times as long.
        copied = _HistogramValue(0)
        copied.bucket_counts, copied.sum = list(self.bucket_counts), self.sum
        return copied


class Histogram(_Family):
    type = "histogram"

    def __init__(self, registry, name, help, labelnames, buckets):
        bounds = [float(bound) for bound in buckets]
        if bounds and bounds[-1] == math.inf:
            bounds.pop()  # +Inf is always rendered; accept it but do not count it twice
        if not bounds or not all(map(math.isfinite, bounds)) or bounds != sorted(set(bounds)):
            raise ValueError(f"buckets of {name} must be finite and strictly increasing")
        if "le" in labelnames:
            raise ValueError(f"histogram {name} cannot have a label named le")
        super().__init__(registry, name, help, labelnames)
        self.bounds = tuple(bounds)

    def observe(self, labels: dict[str, str] | None, value: float) -> None:
        values = self._ordered_values(labels)
        with self._registry._lock:
            self._record(values, value)

    def _add(self, series: _Series, value: float) -> None:
        if math.isnan(value):
            raise ValueError(f"histogram {self.name} cannot observe NaN")
        state = series.value
        state.bucket_counts[bisect.bisect_left(self.bounds, value)] += 1
        state.sum += _exact(value)

    def zero(self) -> _HistogramValue:
        return _HistogramValue(len(self.bounds) + 1)

    def dump(self, value: _HistogramValue) -> object:
        return {"buckets": list(value.bucket_counts), "sum": value.sum}

    def load(self, data) -> _HistogramValue:
        value = self.zero()
        if len(data["buckets"]) == len(value.bucket_counts):
            value.bucket_counts = [int(count) for count in data["buckets"]]
            value.sum = _exact_loaded(data["sum"])
        return value

    def exact_values(self, labels, state: _HistogramValue) -> list[ExactSample]:
        samples = []
        cumulative = 0
        for bound, count in zip((*self.bounds, math.inf), state.bucket_counts):
            cumulative += count
            le = ("le", _format_le(bound))
            samples.append((f"{self.name}_bucket", [*labels, le], cumulative, 1))
        samples.append((f"{self.name}_sum", labels, state.sum, EXACT))
        samples.append((f"{self.name}_count", labels, cumulative, 1))
        return samples


class FamilySamples(NamedTuple):
    """One family as a view shows it: what `render` writes."""

    name: str
    help: str
    type: str
    samples: list[Sample]


def render(families: list[FamilySamples]) -> str:
    """The text exposition (format 0.0.4) of collected families: a pure function."""
    lines = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape(family.help, quoted=False)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        lines.extend(_sample(*sample) for sample in family.samples)
    return "".join(line + "\n" for line in lines)

def series_from_state(data: object) -> dict:
    """The series `Registry.save_and_publish` gave, checked; ValueError when damaged.

    Whether a value fits its family (a histogram's or a counter's) is left to `restore`,
    which skips one that does not: the families are declared only after the checkpoint
    is read.
    """
    for rows in saved_state.mapping(data, "metrics").values():
        for row in saved_state.sequence(rows, "a metric's series"):
            _check_series(row)
    return data


def _check_series(row: object) -> None:
    if type(row) is not list or len(row) != 4:
        raise ValueError("a metric series is not a list of 4")
    labels, value, pending, hold_left = row
    for label in saved_state.sequence(labels, "a series' label values"):
        saved_state.text(label, "a label value")
    if type(value) is dict:  # a histogram's
        if set(value) != {"buckets", "sum"}:
            raise ValueError("a histogram's value is not its buckets and sum")
        for count in saved_state.sequence(value["buckets"], "a histogram's buckets"):
            saved_state.whole(count, "a bucket's count")
        _check_value(value["sum"], "a histogram's sum")
    else:
        _check_value(value, "a series' value")
    saved_state.flag(pending, "a series' zero first state")
    saved_state.finite(hold_left, "a series' zero hold", 0, ZERO_HOLD_SECONDS)


def _check_value(value: object, what: str) -> None:
    """A counter's or a histogram sum's exact whole number (see _exact: credits in nano
    units, so larger than int64 can hold), or a value as shown (a gauge, version 2)."""
    if type(value) is int:
        saved_state.whole(value, what, saved_state.EXACT_BOUND, -saved_state.EXACT_BOUND)
    else:
        saved_state.finite(value, what)


class Registry:
    """Metric families, their series and the label vocabulary, behind one lock.

    Over 150 lines because every view of the series (a scrape, the textfile, the push, the
    history, a checkpoint's save and restore) must read them under that one lock, with the
    zero-first state and the published values the module docstring describes."""

    def __init__(self, *, clock=time.monotonic, label_value_limits: dict[str, int] | None = None):
        self._clock = clock
        self._limits = dict(label_value_limits or {})
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}
        self._label_values: dict[str, set[str]] = {}
        # A scrape was shown a zero that no checkpoint records yet: the tailer saves soon.
        self.served_zeros = False
        self._withheld: frozenset[str] = frozenset()

    def counter(self, name: str, help: str, labelnames=()) -> Counter:
        return self._add(Counter(self, name, help, labelnames))

    def gauge(self, name: str, help: str, labelnames=()) -> Gauge:
        return self._add(Gauge(self, name, help, labelnames))

    def histogram(self, name: str, help: str, labelnames, buckets) -> Histogram:
        return self._add(Histogram(self, name, help, labelnames, buckets))

    def render(self) -> str:
        """The exposition for an HTTP scrape (see "Zero first" above)."""
        return self._render(_scrape_shows_zero, published=True)

    def render_textfile(self) -> str:
        """The exposition for a textfile written while running (see "Zero first" above)."""
        return self._render(_textfile_shows_zero, published=True)

    def render_final(self) -> str:
        """Every series at its true value, all promoted: for the exit and --once."""
        return self._render(_final_shows_zero, published=False)

    def collect_pushed(self) -> list[FamilySamples]:
        """What render_textfile shows, as data, for a metrics push (tailer/outputs/otlp_metrics.py):
        read at times we do not know, as a textfile is, so a new series is held at zero
        for ZERO_HOLD_SECONDS; published values; withheld families left out."""
        return self._collect(_textfile_shows_zero, published=True)

    def collect_final(self) -> list[FamilySamples]:
        """What render_final shows, as data: the last push, at exit."""
        return self._collect(_final_shows_zero, published=False)

    def record(self, changes: list[tuple[_Family, tuple, float]]) -> None:
        """Apply (counter or histogram, label values in its declared order, amount to add or
        value to observe) changes, taking the lock once: a finished turn makes a dozen or more.

        The values are given as tuples, not dicts, because they are the keys the families
        remember: a known series is found with no label dict to build or check.
        """
        with self._lock:
            for family, values, amount in changes:
                # _series's first step, here: a turn's changes nearly all find a known series.
                family._add(family.remembered.get(values) or self._series(family, values), amount)

    def save_and_publish(self, save: Callable[[dict], None]) -> None:
        """Hand every series to `save` as plain data (what `restore` takes back, after
        `series_from_state` checked it), then let scrapes see the values as they are now.

        Both under the lock, so no scrape falls between them (see "Published values"). A
        `save` that raises still publishes: the tailer keeps counting when the disk fails.
        """
        with self._lock:
            try:
                save(self._snapshot())
            finally:
                self._publish()

    def _publish(self) -> None:
        self.served_zeros = False
        for family in self._families.values():
            for series in family.series.values():
                series.published = copy.deepcopy(series.value)
                if series.scrape_zero == SERVED:
                    series.scrape_zero = DONE

    def _snapshot(self) -> dict:
        """{family name: [[label values], value, zero pending, seconds of zero left]}.

        A served zero is saved as done: the publish that follows every save shows the value.
        """
        now = self._clock()
        return {
            name: [
                [list(key), family.dump(series.value), series.scrape_zero == PENDING,
                 max(series.zero_until - now, 0.0)]
                for key, series in family.series.items()
            ]
            for name, family in self._families.items()
        }

    def restore(self, snapshot: dict) -> None:
        """Take back the series `save_and_publish` gave, published; families no longer
        declared are skipped."""
        with self._lock:
            now = self._clock()
            for name, rows in snapshot.items():
                family = self._families.get(name)
                if family is None:
                    continue
                for key, value, scrape_zero_pending, hold_left in rows:
                    if len(key) != len(family.labelnames):
                        continue
                    try:
                        value = family.load(value)
                    except (TypeError, ValueError, KeyError):
                        continue  # a value of another kind of family's: damage, left out
                    series = self._restored_series(family, tuple(key))
                    series.value = value
                    series.published = copy.deepcopy(series.value)
                    series.scrape_zero = PENDING if scrape_zero_pending else DONE
                    series.zero_until = now + float(hold_left)

    def record_history(self, changes: list[tuple[_Family, tuple, float]]) -> list[ExactSample]:
        """Apply changes as `record` does, for a turn whose counts go to history; return
        what each sample of the series it touched gained, by the series as stored.

        As stored: two label values that the vocabulary folds into one series ("other")
        are one series here as in every scrape. Those series need no zero first (see the
        module docstring): their history starts at zero.
        """
        with self._lock:
            touched = {}
            for family, values, _ in changes:
                series = self._series(family, values)
                if id(series) not in touched:
                    touched[id(series)] = (family, series, family.dump(series.value))
            for family, values, amount in changes:
                family._record(values, amount)
            gained = []
            for family, series, before in touched.values():
                series.scrape_zero, series.zero_until = DONE, float("-inf")
                labels = list(zip(family.labelnames, series.key))
                old = family.exact_values(labels, family.load(before))
                new = family.exact_values(labels, series.value)
                gained += [(name, labels, after - was, divisor)
                           for (name, labels, was, divisor), (_, _, after, _) in zip(old, new)
                           if after != was]
            return gained

    def exact_samples(self, names: set[str]) -> list[ExactSample]:
        """The true current samples of every series of these families, exact."""
        with self._lock:
            samples = []
            for name in sorted(names):
                family = self._families[name]
                for key, series in family.series.items():
                    samples += family.exact_values(list(zip(family.labelnames, key)),
                                                   series.value)
            return samples

    def withhold(self, names: set[str]) -> None:
        """Leave these families out of scrapes and textfiles until `show_all`.

        While the turns read at start-up wait to be pushed as history, a scrape of their
        counters would write samples at "now" that the history then contradicts (see
        tailer/outputs/history.py). Left out, they make no sample at all until the history is in.
        """
        with self._lock:
            self._withheld = frozenset(names)

    def show_all(self) -> None:
        """End `withhold`; a series still owed its zero gets its full hold from now on."""
        with self._lock:
            now = self._clock()
            for name in self._withheld:
                for series in self._families[name].series.values():
                    if series.scrape_zero == PENDING:
                        series.zero_until = now + ZERO_HOLD_SECONDS
            self._withheld = frozenset()

    def _add(self, family: _Family) -> _Family:
        with self._lock:
            if family.name in self._families:
                raise ValueError(f"metric {family.name} is already declared")
            self._families[family.name] = family
            if not family.labelnames:
                # Its only series exists from the start, so the first scrape shows it at zero.
                self._series(family, ())
        return family

    def _series(self, family: _Family, values: tuple) -> _Series:
        """The series for label values, created pending if new. The caller holds the lock.

        Remembered per family by the values as given: a turn counts into a dozen series,
        nearly always known ones, and this spares them the sanitising. The series of given
        values never changes (a vocabulary only grows, a series is never dropped), so
        remembering is safe, and only values of the right length are ever remembered.
        """
        series = family.remembered.get(values)
        if series is None:
            key = self._key(family, values)
            series = family.series.get(key)
            if series is None:
                series = family.series[key] = _Series(
                    key, family.zero(), family.zero_first, self._clock())
            if len(family.remembered) < SERIES_REMEMBERED:
                family.remembered[values] = series
        return series

    def _restored_series(self, family: _Family, key: tuple) -> _Series:
        """The series a snapshot stored under `key`, which was admitted when it was made:
        admitted again as it is, past the caps, so no restored series folds into another."""
        key = tuple(sanitise_label_value(value) for value in key)
        for label, value in zip(family.labelnames, key):
            self._label_values.setdefault(label, set()).add(value)
        series = family.series.get(key)
        if series is None:
            series = family.series[key] = _Series(key, family.zero(), family.zero_first,
                                                  self._clock())
        return series

    def _key(self, family: _Family, values: tuple) -> tuple[str, ...]:
        """The label values as the series is stored: sanitised, "other" past the caps."""
        if len(values) != len(family.labelnames):
            raise ValueError(f"{family.name} takes {len(family.labelnames)} label values, "
                             f"got {len(values)}")
        return tuple(self._admit(label, sanitise_label_value(value))
                     for label, value in zip(family.labelnames, values))

    def _admit(self, label: str, value: str) -> str:
        """value if the vocabulary of this label name knows it or has room for it, else "other"."""
        known = self._label_values.setdefault(label, set())
        if value not in known:
            if len(known) >= self._limits.get(label, DEFAULT_LABEL_VALUE_LIMIT):
                return OVERFLOW_LABEL_VALUE
            known.add(value)
        return value

    def _render(self, shows_zero, *, published: bool) -> str:
        return render(self._collect(shows_zero, published=published))

    def _collect(self, shows_zero, *, published: bool) -> list[FamilySamples]:
        """What one view shows, as plain data; taking it moves series through zero first."""
        collected = []
        with self._lock:
            now = self._clock()
            for name in sorted(self._families.keys() - self._withheld):
                family = self._families[name]
                samples = []
                for key in sorted(family.series):
                    series = family.series[key]
                    zero = family.zero_first and shows_zero(series, now)
                    if zero and series.scrape_zero == SERVED:
                        self.served_zeros = True
                    shown = family.zero() if zero else (
                        series.published if published else series.value)
                    samples += family.values(list(zip(family.labelnames, key)), shown)
                collected.append(FamilySamples(name, family.help, family.type, samples))
        return collected


def write_textfile(path: Path, text: str) -> None:
    """Replace path with text atomically, readable by others (node_exporter is often another
    user). Bytes are written as they are, so Windows gets "\\n" line ends too."""
    replace_file(path, lambda out: out.write(text.encode("utf-8")), durable=False, mode=0o644)
