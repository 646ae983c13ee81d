import json
import sys
import threading
import urllib.error
import urllib.request

import pytest
from hypothesis import given, strategies as st

from assembly import assemble
from exposition_helpers import samples, saved_series
from prom import promtool, running_prometheus, single_value
from sessiongen import START, SessionWriter
from tailer.outputs.exposition import (
    CONTENT_TYPE,
    ZERO_HOLD_SECONDS,
    EXACT,
    Registry,
    _escape,
    sanitise_label_value,
    write_textfile,
)
from tailer.outputs.metrics import Metrics
from tailer.outputs.metrics_server import MetricsServer


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def publish(registry: Registry) -> None:
    """As the tailer does after saving its checkpoint (here, saving nothing)."""
    registry.save_and_publish(lambda snapshot: None)


def scrape(registry: Registry) -> str:
    """What a scrape sees right after the tailer published (see "Published values")."""
    publish(registry)
    return registry.render()


def textfile(registry: Registry) -> str:
    publish(registry)
    return registry.render_textfile()


def sample_lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name)]


# Formatting


def test_families_and_series_are_sorted_with_help_and_type():
    registry = Registry()
    turns = registry.counter("b_turns_total", "Turns.", ["pattern"])
    registry.gauge("a_open", "Open turns.").set(None, 2)
    turns.inc({"pattern": "single"}, 2)
    turns.inc({"pattern": "cascade"})
    assert registry.render_final() == (
        "# HELP a_open Open turns.\n"
        "# TYPE a_open gauge\n"
        "a_open 2\n"
        "# HELP b_turns_total Turns.\n"
        "# TYPE b_turns_total counter\n"
        'b_turns_total{pattern="cascade"} 1\n'
        'b_turns_total{pattern="single"} 2\n'
    )


def test_labels_follow_declared_order_within_a_series():
    registry = Registry()
    legs = registry.counter("legs_total", "Legs.", ["model", "kind"])
    legs.inc({"kind": "judge", "model": "m1"})
    assert sample_lines(registry.render_final(), "legs_total") == ['legs_total{model="m1",kind="judge"} 1']


@pytest.mark.parametrize(
    ("value", "text"),
    [(2, "2"), (2.0, "2"), (0.5, "0.5"), (-3.25, "-3.25"), (1e-05, "1e-05"),
     (float("inf"), "+Inf"), (float("-inf"), "-Inf"), (float("nan"), "NaN")],
)
def test_values_are_formatted_like_prometheus(value, text):
    registry = Registry()
    registry.gauge("g", "G.").set(None, value)
    assert sample_lines(scrape(registry), "g ") == [f"g {text}"]


def test_help_escapes_backslash_and_newline_but_not_quotes():
    registry = Registry()
    registry.gauge("g", 'a\\b\nc "d"')
    assert '# HELP g a\\\\b\\nc "d"\n' in scrape(registry)


def test_label_value_escaping():
    """Sanitised label values never need escaping, so this checks the escaper itself."""
    assert _escape('a\\b\n"c"', quoted=True) == 'a\\\\b\\n\\"c\\"'


def test_histogram_buckets_are_cumulative_with_inf_sum_and_count():
    registry = Registry()
    duration = registry.histogram("d_seconds", "D.", ["pattern"], [0.5, 1, 2.5])
    for value in (0.2, 0.5, 2, 9):
        duration.observe({"pattern": "single"}, value)
    assert sample_lines(registry.render_final(), "d_seconds") == [
        'd_seconds_bucket{pattern="single",le="0.5"} 2',  # le is inclusive: 0.5 counts here
        'd_seconds_bucket{pattern="single",le="1.0"} 2',
        'd_seconds_bucket{pattern="single",le="2.5"} 3',
        'd_seconds_bucket{pattern="single",le="+Inf"} 4',
        'd_seconds_sum{pattern="single"} 11.7',
        'd_seconds_count{pattern="single"} 4',
    ]


def test_promtool_accepts_the_exposition():
    registry = Registry()
    registry.counter("demo_turns_total", "Turns.", ["pattern"]).inc({"pattern": "cascade"})
    registry.gauge("demo_open_turns", "Open turns.").set(None, 1)
    durations = registry.histogram("demo_turn_duration_seconds", "Durations.", ["pattern"], [1, 10])
    durations.observe({"pattern": "x"}, 3)
    checked = promtool("check", "metrics", input=registry.render_final())
    assert checked.returncode == 0, checked.stdout + checked.stderr


# Validation


@pytest.mark.parametrize(
    "declare",
    [
        lambda r: r.counter("1_total", "x"),
        lambda r: r.counter("a-b_total", "x"),
        lambda r: r.counter("turns", "counters must end in _total"),
        lambda r: r.gauge("g", "x", ["bad-label"]),
        lambda r: r.gauge("g", "x", ["__reserved"]),
        lambda r: r.gauge("g", "x", ["a", "a"]),
        lambda r: r.histogram("h", "x", ["le"], [1]),
        lambda r: r.histogram("h", "x", [], [2, 1]),
        lambda r: r.histogram("h", "x", [], [1, 1]),
        lambda r: r.histogram("h", "x", [], []),
        lambda r: r.histogram("h", "x", [], [float("nan")]),
    ],
)
def test_bad_declarations_raise(declare):
    with pytest.raises(ValueError):
        declare(Registry())


def test_a_name_is_declared_once():
    registry = Registry()
    registry.gauge("g", "x")
    with pytest.raises(ValueError):
        registry.counter("g", "x")


def test_labels_must_match_the_declared_names():
    counter = Registry().counter("c_total", "x", ["model"])
    with pytest.raises(ValueError):
        counter.inc({"model": "a", "extra": "b"})
    with pytest.raises(ValueError):
        counter.inc({})
    with pytest.raises(ValueError):
        counter.inc({"modle": "a"})


@pytest.mark.parametrize("amount", [-1, float("nan")])
def test_counters_only_grow(amount):
    with pytest.raises(ValueError):
        Registry().counter("c_total", "x").inc(None, amount)


def test_histogram_rejects_nan():
    with pytest.raises(ValueError):
        Registry().histogram("h", "x", [], [1]).observe(None, float("nan"))


def test_explicit_inf_bucket_is_not_doubled():
    registry = Registry()
    registry.histogram("h", "x", [], [1, float("inf")]).observe(None, 5)
    assert sample_lines(registry.render_final(), "h_bucket") == [
        'h_bucket{le="1.0"} 0', 'h_bucket{le="+Inf"} 1']


# Label values


@pytest.mark.parametrize(
    ("value", "expected"),
    [("gpt-5.4", "gpt-5.4"), ("a/b:c+d_e", "a/b:c+d_e"), ('  two words"\n ', "two_words_"),
     ("modèle", "mod_le"), (7, "7"), (None, "unknown"), ("", "unknown"), ("  ", "unknown"),
     ("x" * 100, "x" * 64)],
)
def test_label_values_are_sanitised(value, expected):
    assert sanitise_label_value(value) == expected


def test_sanitised_values_are_what_series_carry():
    registry = Registry()
    registry.counter("c_total", "x", ["model"]).inc({"model": 'a "b"'})
    assert sample_lines(registry.render_final(), "c_total") == ['c_total{model="a__b_"} 1']


def test_a_full_label_vocabulary_counts_new_values_as_other_in_every_family():
    registry = Registry(label_value_limits={"model": 2})
    legs = registry.counter("legs_total", "x", ["model"])
    tokens = registry.counter("tokens_total", "x", ["model"])
    for model in ("m1", "m2", "m3", "m4", "m1"):
        legs.inc({"model": model})
    tokens.inc({"model": "m5"})
    tokens.inc({"model": "m2"})
    text = registry.render_final()
    assert sample_lines(text, "legs_total") == [
        'legs_total{model="m1"} 2', 'legs_total{model="m2"} 1', 'legs_total{model="other"} 2']
    assert sample_lines(text, "tokens_total") == [
        'tokens_total{model="m2"} 1', 'tokens_total{model="other"} 1']


def test_other_label_names_have_the_default_limit_of_32():
    registry = Registry(label_value_limits={"model": 1})
    counter = registry.counter("c_total", "x", ["kind"])
    for number in range(33):
        counter.inc({"kind": f"k{number}"})
    lines = sample_lines(registry.render_final(), "c_total")
    assert len(lines) == 33
    assert 'c_total{kind="k31"} 1' in lines
    assert 'c_total{kind="other"} 1' in lines


# Zero first


def test_a_new_counter_series_is_scraped_at_zero_once_then_at_its_value():
    registry = Registry(clock=FakeClock())
    counter = registry.counter("c_total", "x", ["kind"])
    counter.inc({"kind": "a"}, 3)
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 0']
    counter.inc({"kind": "a"}, 2)
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 5']


def test_an_unlabelled_counter_exists_at_zero_from_its_declaration():
    registry = Registry(clock=FakeClock())
    counter = registry.counter("c_total", "x")
    assert sample_lines(scrape(registry), "c_total") == ["c_total 0"]
    counter.inc()
    assert sample_lines(scrape(registry), "c_total") == ["c_total 1"]


def test_a_series_declared_with_zero_is_shown_and_then_counts():
    registry = Registry(clock=FakeClock())
    counter = registry.counter("c_total", "x", ["kind"])
    counter.inc({"kind": "a"}, 0)
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 0']
    counter.inc({"kind": "a"}, 4)
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 4']


def test_a_new_histogram_series_is_scraped_all_zero_first():
    registry = Registry(clock=FakeClock())
    histogram = registry.histogram("h", "x", ["kind"], [1])
    histogram.observe({"kind": "a"}, 0.5)
    assert sample_lines(scrape(registry), "h") == [
        'h_bucket{kind="a",le="1.0"} 0', 'h_bucket{kind="a",le="+Inf"} 0',
        'h_sum{kind="a"} 0', 'h_count{kind="a"} 0']
    assert sample_lines(scrape(registry), "h") == [
        'h_bucket{kind="a",le="1.0"} 1', 'h_bucket{kind="a",le="+Inf"} 1',
        'h_sum{kind="a"} 0.5', 'h_count{kind="a"} 1']


def test_gauges_are_shown_at_their_value_at_once():
    registry = Registry(clock=FakeClock())
    registry.gauge("g", "x", ["kind"]).set({"kind": "a"}, 5)
    assert sample_lines(scrape(registry), "g") == ['g{kind="a"} 5']
    assert sample_lines(textfile(registry), "g") == ['g{kind="a"} 5']


def test_the_textfile_holds_the_zero_for_the_hold_time_whatever_scrapes_do():
    clock = FakeClock()
    registry = Registry(clock=clock)
    counter = registry.counter("c_total", "x", ["kind"])
    counter.inc({"kind": "a"}, 3)
    scrape(registry)  # a scrape uses up the HTTP view's zero, not the textfile's
    clock.now += ZERO_HOLD_SECONDS - 1
    assert sample_lines(textfile(registry), "c_total") == ['c_total{kind="a"} 0']
    clock.now += 1
    assert sample_lines(textfile(registry), "c_total") == ['c_total{kind="a"} 3']


def test_a_series_pending_for_the_hold_time_is_scraped_at_its_value():
    clock = FakeClock()
    registry = Registry(clock=clock)
    registry.counter("c_total", "x", ["kind"]).inc({"kind": "a"}, 3)
    clock.now += ZERO_HOLD_SECONDS
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 3']


def test_render_final_shows_true_values_and_promotes_every_series():
    registry = Registry(clock=FakeClock())
    registry.counter("c_total", "x", ["kind"]).inc({"kind": "a"}, 3)
    assert sample_lines(registry.render_final(), "c_total") == ['c_total{kind="a"} 3']
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 3']
    assert sample_lines(textfile(registry), "c_total") == ['c_total{kind="a"} 3']


def test_concurrent_counting_and_rendering_lose_nothing():
    """Races show up by chance: without the registry's lock this fails most runs, not all."""
    registry = Registry(label_value_limits={"n": 10_000})
    counter = registry.counter("c_total", "x", ["n"])

    def count():
        for number in range(2000):
            counter.inc({"n": str(number % 500)})

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so unguarded state would break
    try:
        threads = [threading.Thread(target=count) for _ in range(3)]
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            scrape(registry)
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old_interval)
    lines = sample_lines(registry.render_final(), "c_total")
    assert len(lines) == 500
    assert sum(float(line.rsplit(" ", 1)[1]) for line in lines) == 6000


# Textfile


def test_write_textfile_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "hydrafusion.prom"
    path.write_text("old\n")
    write_textfile(path, "a 1\nb 2\n")
    assert path.read_bytes() == b"a 1\nb 2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["hydrafusion.prom"]


def test_write_textfile_cleans_up_when_it_cannot_replace(tmp_path):
    target = tmp_path / "is_a_directory"
    target.mkdir()
    (target / "inside").write_text("x")  # a non-empty directory cannot be replaced by a file
    with pytest.raises(OSError):
        write_textfile(target, "a 1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["is_a_directory"]


# HTTP


@pytest.fixture
def served():
    registry = Registry()
    server = MetricsServer("127.0.0.1", 0, registry)
    server.start()
    yield registry, f"http://127.0.0.1:{server.port}"
    server.close()


def fetch(url: str, method: str = "GET"):
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as response:
        return response.status, response.headers["Content-Type"], response.read()


def test_metrics_are_served_with_the_exact_content_type(served):
    registry, url = served
    registry.gauge("g", "x").set(None, 1)
    publish(registry)
    status, content_type, body = fetch(f"{url}/metrics")
    assert (status, content_type) == (200, "text/plain; version=0.0.4; charset=utf-8")
    assert b"\ng 1\n" in body


def test_root_healthz_and_unknown_paths(served):
    _, url = served
    assert b"/metrics" in fetch(f"{url}/")[2]
    assert fetch(f"{url}/healthz")[:1] == (200,)
    with pytest.raises(urllib.error.HTTPError) as missing:
        fetch(f"{url}/nope")
    assert missing.value.code == 404


def test_head_answers_without_using_up_a_pending_zero(served):
    registry, url = served
    registry.counter("c_total", "x", ["kind"]).inc({"kind": "a"}, 3)
    status, content_type, body = fetch(f"{url}/metrics", method="HEAD")
    assert (status, content_type, body) == (200, CONTENT_TYPE, b"")
    assert b'c_total{kind="a"} 0' in fetch(f"{url}/metrics")[2]


def test_close_without_start_releases_the_port():
    server = MetricsServer("127.0.0.1", 0, Registry())
    server.close()
    MetricsServer("127.0.0.1", server.port, Registry()).close()


# A real Prometheus


def test_real_prometheus_counts_the_first_increment_of_a_new_series(tmp_path):
    registry = Registry()
    things = registry.counter("demo_things_total", "Things.", ["kind"])
    server = MetricsServer("127.0.0.1", 0, registry)
    server.start()
    try:
        with running_prometheus(tmp_path, targets=[f"127.0.0.1:{server.port}"], scrape_interval="1s") as prom:
            prom.wait_for("up", lambda result: single_value(result) == 1)
            things.inc({"kind": "new"}, 3)
            publish(registry)
            new = 'demo_things_total{kind="new"}'
            prom.wait_for(f"count_over_time({new}[1m])", lambda result: (single_value(result) or 0) >= 1)
            publish(registry)  # as the tailer does once a scrape has seen the zero
            prom.wait_for(f"count_over_time({new}[1m])", lambda result: (single_value(result) or 0) >= 5)
            assert single_value(prom.query(f"max_over_time({new}[1m]) - min_over_time({new}[1m])")) == 3
            # increase() extrapolates towards the end of the window (not below the zero
            # sample at its start), so it is at least the true 3 and a little more at most.
            assert 3 <= single_value(prom.query(f"increase({new}[1m])")) <= 4
            assert single_value(prom.query(f'up{{instance="127.0.0.1:{server.port}"}}')) == 1
    finally:
        server.close()


def test_prometheus_stores_bucket_bounds_as_the_exposition_writes_them(tmp_path):
    """Prometheus 3 rewrites a scraped `le="1"` as `le="1.0"` and stores pushed history as
    sent: the tailer must write bounds in Prometheus's own form, or a histogram's history
    and its scrapes are two series."""
    registry = Registry()
    durations = registry.histogram("demo_wait_seconds", "Waits.", ["pattern"], [0.05, 1, 2.5, 10])
    durations.observe({"pattern": "single"}, 3)
    publish(registry)
    written = {dict(labels)["le"] for labels in samples(registry.render(), "demo_wait_seconds_bucket")}
    server = MetricsServer("127.0.0.1", 0, registry)
    server.start()
    try:
        with running_prometheus(tmp_path, targets=[f"127.0.0.1:{server.port}"], scrape_interval="1s") as prom:
            stored = prom.wait_for("group by (le) (demo_wait_seconds_bucket)", lambda result: result)
    finally:
        server.close()
    assert {series["metric"]["le"] for series in stored} == written


# Published values and checkpoints


def test_scrapes_see_only_published_values():
    registry = Registry()
    counter = registry.counter("c_total", "x")
    counter.inc(None, 2)
    assert sample_lines(registry.render(), "c_total") == ["c_total 0"]
    assert sample_lines(registry.render_textfile(), "c_total") == ["c_total 0"]
    publish(registry)
    counter.inc(None, 5)
    assert sample_lines(registry.render(), "c_total") == ["c_total 2"]
    assert sample_lines(registry.render_final(), "c_total") == ["c_total 7"]


@given(st.lists(st.lists(st.floats(0, 10), max_size=4), min_size=1, max_size=4))
def test_a_histogram_scrape_sees_what_the_last_publish_copied(rounds):
    """Every publish copies each histogram's value (its own copy, not the generic one):
    observations after it are scraped only after the next."""
    registry = Registry()
    histogram = registry.histogram("h", "x", (), [1, 5])
    histogram.observe(None, 0.5)
    publish(registry)
    registry.render()  # the zero first, seen
    publish(registry)
    for observed in rounds:
        published = sample_lines(registry.render_final(), "h")
        for value in observed:
            histogram.observe(None, value)
        assert sample_lines(registry.render(), "h") == published
        publish(registry)
        assert sample_lines(registry.render(), "h") == sample_lines(registry.render_final(), "h")


def test_snapshot_and_restore_keep_values_and_zero_first_state():
    now = [100.0]
    first = Registry(clock=lambda: now[0])
    counter = first.counter("c_total", "x", ["kind"])
    histogram = first.histogram("h", "x", ["kind"], [1, 2])
    counter.inc({"kind": "seen"}, 3)
    publish(first)
    first.render()  # a scrape saw "seen" at zero
    counter.inc({"kind": "unseen"}, 4)
    histogram.observe({"kind": "a"}, 1.5)
    snapshot = json.loads(json.dumps(saved_series(first)))  # it must survive a JSON file

    now[0] = 5000.0
    second = Registry(clock=lambda: now[0])
    second.counter("c_total", "x", ["kind"])
    second.histogram("h", "x", ["kind"], [1, 2])
    second.restore(snapshot)
    text = second.render()
    # Restored values are published at once; a series no scrape saw at zero still shows zero.
    assert sample_lines(text, "c_total") == ['c_total{kind="seen"} 3', 'c_total{kind="unseen"} 0']
    publish(second)  # the tailer saves soon after a zero was served
    assert sample_lines(second.render(), "c_total")[1] == 'c_total{kind="unseen"} 4'
    assert 'h_bucket{kind="a",le="2.0"} 1' in second.render_final()
    assert "h_sum{kind=\"a\"} 1.5" in second.render_final()


def test_restore_skips_families_no_longer_declared():
    registry = Registry()
    registry.counter("kept_total", "x")
    registry.restore({"gone_total": [[[], 5 * EXACT, False, 0]],
                      "kept_total": [[[], 2 * EXACT, False, 0]]})
    assert "gone_total" not in registry.render_final()
    assert sample_lines(registry.render(), "kept_total") == ["kept_total 2"]


def test_a_served_zero_stays_until_the_save_that_records_it():
    """Otherwise a crash after a scrape saw the value, before the save, would show the zero
    again on restart: Prometheus would read a reset and count the value twice."""
    registry = Registry()
    counter = registry.counter("c_total", "x", ["kind"])
    counter.inc({"kind": "a"}, 3)
    saved = []
    registry.save_and_publish(saved.append)
    assert sample_lines(registry.render(), "c_total") == ['c_total{kind="a"} 0']
    assert sample_lines(registry.render(), "c_total") == ['c_total{kind="a"} 0']
    assert registry.served_zeros  # the tailer's loop sees it and saves
    registry.save_and_publish(saved.append)
    assert saved[0]["c_total"][0][2] is True  # before any scrape: still to be shown at zero
    assert registry.served_zeros is False
    assert saved[1]["c_total"][0][2] is False  # saved as done, and only then...
    assert sample_lines(registry.render(), "c_total") == ['c_total{kind="a"} 3']  # ...shown


def test_a_failed_save_still_publishes():
    registry = Registry()
    registry.gauge("g", "x").set(None, 4)

    def broken(snapshot):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        registry.save_and_publish(broken)
    assert sample_lines(registry.render(), "g") == ["g 4"]


# Changes in bulk (Registry.record) and history


def test_record_lands_in_the_series_inc_and_observe_use():
    registry = Registry(clock=FakeClock())
    counter = registry.counter("c_total", "x", ["kind", "model"])
    histogram = registry.histogram("h", "x", ["kind"], [1])
    counter.inc({"kind": "a", "model": 'm "1"'}, 2)
    registry.record([
        (counter, ("a", 'm "1"'), 3),
        (counter, ("b", "m2"), 1),
        (histogram, ("a",), 0.5),
    ])
    text = registry.render_final()
    assert sample_lines(text, "c_total") == [
        'c_total{kind="a",model="m__1_"} 5', 'c_total{kind="b",model="m2"} 1']
    assert sample_lines(text, "h_count") == ['h_count{kind="a"} 1']


def test_a_series_first_made_by_record_is_scraped_at_zero_first():
    registry = Registry(clock=FakeClock())
    counter = registry.counter("c_total", "x", ["kind"])
    registry.record([(counter, ("a",), 3)])
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 0']
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 3']


def test_record_checks_every_change_even_for_series_it_knows():
    registry = Registry()
    counter = registry.counter("c_total", "x", ["kind", "model"])
    histogram = registry.histogram("h", "x", ["kind"], [1])
    registry.record([(counter, ("a", "m"), 1), (histogram, ("a",), 1)])
    for bad in ((counter, ("a",), 1), (counter, ("a", "m", "x"), 1),
                (counter, ("a", "m"), -1), (histogram, ("a",), float("nan"))):
        with pytest.raises(ValueError):
            registry.record([bad])
    text = registry.render_final()
    assert sample_lines(text, "c_total") == ['c_total{kind="a",model="m"} 1']
    assert sample_lines(text, "h_count") == ['h_count{kind="a"} 1']


def test_history_gains_are_by_stored_series_and_end_the_zero():
    """Two raw values the vocabulary folds into one series are one series in history too:
    keyed by the raw values, they would be counted twice."""
    registry = Registry(clock=FakeClock(), label_value_limits={"kind": 1})
    counter = registry.counter("c_total", "x", ["kind"])
    registry.record([(counter, ("first",), 1)])
    gained = registry.record_history([(counter, ("x y",), 2), (counter, ("z",), 3)])
    assert gained == [("c_total", [("kind", "other")], 5 * EXACT, EXACT)]
    assert registry.exact_samples({"c_total"}) == [
        ("c_total", [("kind", "first")], 1 * EXACT, EXACT),
        ("c_total", [("kind", "other")], 5 * EXACT, EXACT)]
    # its history starts at zero, so scrapes need not show one
    assert sample_lines(scrape(registry), "c_total") == [
        'c_total{kind="first"} 0', 'c_total{kind="other"} 5']


def test_history_gains_of_a_histogram_are_per_sample():
    registry = Registry(clock=FakeClock())
    histogram = registry.histogram("h", "x", ["kind"], [1, 2])
    registry.record([(histogram, ("a",), 0.5)])
    gained = registry.record_history([(histogram, ("a",), 1.5)])
    assert gained == [
        ("h_bucket", [("kind", "a"), ("le", "2.0")], 1, 1),
        ("h_bucket", [("kind", "a"), ("le", "+Inf")], 1, 1),
        ("h_sum", [("kind", "a")], 1_500_000_000, EXACT), ("h_count", [("kind", "a")], 1, 1)]


@given(st.lists(st.integers(0, 10**12), max_size=30), st.randoms())
def test_sums_do_not_depend_on_the_order_of_the_amounts(nano_amounts, rng):
    """Credits are nano units / 1e9: counted in any order, the total shows the same to the
    bit (floats would not, and history adds them in time order, scrapes in reading order)."""
    shown = set()
    for _ in range(3):
        rng.shuffle(nano_amounts)
        registry = Registry(clock=FakeClock())
        counter = registry.counter("c_total", "x")
        for amount in nano_amounts:
            registry.record([(counter, (), amount / 1e9)])
        shown.add(registry.render_final())
    assert len(shown) == 1


def test_restore_keeps_every_series_apart_when_the_vocabulary_is_full():
    """Restoring family by family into a capped vocabulary used to fold a later family's
    values into "other", one series overwriting another."""
    def declare(registry):
        return (registry.counter("a_total", "x", ["model"]),
                registry.counter("b_total", "x", ["model"]))

    before = Registry(clock=FakeClock(), label_value_limits={"model": 2})
    a, b = declare(before)
    before.record([(a, ("m1",), 1), (b, ("m2",), 2), (b, ("m3",), 4), (a, ("m4",), 8)])
    after = Registry(clock=FakeClock(), label_value_limits={"model": 2})
    declare(after)
    after.restore(saved_series(before))
    assert after.render_final() == before.render_final()


def test_withheld_families_are_left_out_until_shown_then_zero_first():
    clock = FakeClock()
    registry = Registry(clock=clock)
    counter = registry.counter("c_total", "x", ["kind"])
    registry.withhold({"c_total"})
    registry.record([(counter, ("a",), 3)])
    clock.now += 1000  # far past the zero hold: a withheld series' hold starts when shown
    publish(registry)
    assert "c_total" not in scrape(registry)
    assert "c_total" not in registry.render_textfile()
    registry.show_all()
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 0']
    publish(registry)
    assert sample_lines(scrape(registry), "c_total") == ['c_total{kind="a"} 3']


def test_a_turn_counts_into_series_labelled_as_each_family_declares():
    """turn_changes gives label values by position: a value in the wrong place would go
    unnoticed by the registry, so here every label of a leg's series is named."""
    writer = SessionWriter("s", START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject",
                   repair_model="gpt-5.6-sol")
    [turn] = assemble(writer.lines(), "s")
    metrics = Metrics(Registry())
    metrics.count_turn(turn)
    text = metrics.registry.render_final()
    judge = {"pattern": "cascade", "phase_kind": "judge", "role": "judge",
             "model": "gpt-5.6-sol", "status": "succeeded", "verdict": "reject",
             "committed": "false"}
    repair = {**judge, "phase_kind": "repair", "role": "solver", "verdict": "none",
              "committed": "true"}
    legs = samples(text, "hydrafusion_legs_total")
    assert legs[tuple(sorted(judge.items()))] == 1
    assert legs[tuple(sorted(repair.items()))] == 1
    aiu = samples(text, "hydrafusion_aiu_total")
    assert (("committed", "true"), ("compound", "true"), ("model", "gpt-5.6-sol"),
            ("pattern", "cascade"), ("phase_kind", "repair")) in aiu
    [repair_leg] = [leg for leg in turn.legs if leg.phase_kind == "repair"]
    tokens = samples(text, "hydrafusion_tokens_total")
    assert tokens[(("model", "gpt-5.6-sol"), ("phase_kind", "repair"), ("type", "output"))] == (
        repair_leg.usage.output_tokens)
    assert samples(text, "hydrafusion_routing_latency_seconds_count") == {
        (("route_source", turn.resolved.route_source),): 1}
