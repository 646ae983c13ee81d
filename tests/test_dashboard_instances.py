"""The dashboard's instance and user variables, on two tailers' data in one Prometheus.

Two tailers, each with its own generated sessions (tests/sessiongen.py), are scraped by the
stack's Prometheus build as two targets of the tailer's job: one labelled
user_name="alice" (what Prometheus's OTLP translation makes of a promoted user.name), the
other with no user label at all, as a local tailer is. The dashboard's queries, substituted
as Grafana does for the values picked (tests/dashboard.py), must give each pick's truth
from the files: All (every tailer, the unlabelled one included), one instance, the other,
one user, and both instances picked together.

How the labels arrive (a scrape's target labels here; resource attributes over OTLP in
the team's stack) makes no difference to the queries: the same label names, the same
matchers.
"""

import math
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from time import time

import pytest

import dashboard as dash
from dashboard_truth import headline_truth, headlines, same_figures
from prom import free_port, running_prometheus
from sessiongen import SessionWriter, every_pattern
from tailer.outputs.remote_write import RemoteWriter
from tailerproc import running_tailer


def singles_and_a_rejection(session_id, start):
    """Turns unlike every_pattern's, so the two tailers' figures differ."""
    writer = SessionWriter(session_id, start)
    writer.single("claude-sonnet-4.6")
    writer.cascade("mai-code-1.1-flash", "claude-sonnet-4.6", verdict="reject", repair_model="gpt-5.6-sol")
    writer.single("gemini-3.1-pro")
    writer.shutdown()
    return writer


def credits_by_model(turns):
    credits = defaultdict(float)
    for turn in turns:
        for leg in turn.legs:
            credits[leg.model] += leg.nano_aiu / 1e9
    return dict(credits)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """(Prometheus, the time to query at, the window, {tailer: (its instance, its turns)})."""
    tmp = tmp_path_factory.mktemp("team")
    start = datetime.now(timezone.utc) - timedelta(minutes=5)
    writers = {"alice": every_pattern("team-alice", start), "local": singles_and_a_rejection("team-local", start)}
    ports = {name: free_port() for name in writers}
    job = {"job_name": "hydrafusion-tailer", "static_configs": [
        {"targets": [f"127.0.0.1:{ports['alice']}"], "labels": {"user_name": "alice"}},
        {"targets": [f"127.0.0.1:{ports['local']}"]}]}
    began = time()
    with running_prometheus(tmp, [], extra_config={"scrape_configs": [job]}) as prom:
        tailers = []
        for name, writer in writers.items():
            state = tmp / name
            state.mkdir()
            writer.write(state)
            tailers.append(running_tailer(tmp, "--state-dir", str(state), "--from-start",
                                          "--otlp-endpoint", "none", metrics_port=ports[name]))
        with tailers[0], tailers[1]:
            total = sum(len(writer.expected) for writer in writers.values())
            prom.wait_for("sum(hydrafusion_turns_total)",
                          lambda r: r and float(r[0]["value"][1]) == total, timeout=60)
            counted = time()  # both tailers scraped once more after every turn was in
            result = prom.wait_for('min(timestamp(up{job="hydrafusion-tailer"}))',
                                   lambda r: r and float(r[0]["value"][1]) > counted + 1, timeout=30)
            at = float(result[0]["value"][1])
        window = math.ceil(at - began) + 60
        yield prom, at, window, {name: (f"127.0.0.1:{ports[name]}", writers[name].expected) for name in writers}


def picks(team):
    """{what is picked: (the variables, the turns it must show)}."""
    _, _, _, tailers = team
    (alice, alice_turns), (local, local_turns) = tailers["alice"], tailers["local"]
    return {
        "All": ({}, alice_turns + local_turns),
        "alice's instance": ({"instance": dash.chosen(alice)}, alice_turns),
        "the local instance": ({"instance": dash.chosen(local)}, local_turns),
        "user alice": ({"user": dash.chosen("alice")}, alice_turns),
        "both instances": ({"instance": dash.chosen(alice, local)}, alice_turns + local_turns),
        "user alice, the local instance": ({"user": dash.chosen("alice"), "instance": dash.chosen(local)}, []),
    }


@pytest.mark.parametrize("pick", ["All", "alice's instance", "the local instance", "user alice",
                                  "both instances"])
def test_the_headlines_are_the_truth_of_what_is_picked(team, pick):
    prom, at, window, _ = team
    variables, turns = picks(team)[pick]
    # Each tailer's figures differ from the other's and from both's, so a query that ignored
    # the pick would give the wrong truth.
    truths = [headline_truth(turns) for _, turns in picks(team).values() if turns]
    assert all(not same_figures(a, b) for a in truths[:3] for b in truths[:3] if a is not b)
    figures = headlines(prom, window, at, variables)
    assert same_figures(figures, headline_truth(turns)), (figures, headline_truth(turns))


@pytest.mark.parametrize("pick", ["All", "alice's instance", "the local instance", "user alice"])
def test_credits_by_model_and_health_follow_the_pick(team, pick):
    prom, at, window, _ = team
    variables, turns = picks(team)[pick]
    results = {title: prom.query(expr, time=at) for title, expr in dash.prometheus_exprs(window, variables)
               if title in ("Credits by model", "Tailer", "Sessions followed")}
    got = {sample["metric"]["model"]: float(sample["value"][1]) for sample in results["Credits by model"]}
    assert got == pytest.approx(credits_by_model(turns), rel=1e-9)
    assert float(results["Tailer"][0]["value"][1]) == 1
    assert float(results["Sessions followed"][0]["value"][1]) == len({turn.session_id for turn in turns})


def test_a_pick_that_matches_no_tailer_shows_nothing_counted(team):
    prom, at, window, _ = team
    variables, _ = picks(team)["user alice, the local instance"]
    figures = headlines(prom, window, at, variables)
    assert figures["Credits"] == [0, 0] and figures["Compound rate"] == [None]


def test_a_tailer_that_only_pushes_is_there_for_five_minutes_after_its_last_push(tmp_path):
    """A laptop's tailer is never scraped (no up): the Tailer stat is green while its pushed
    series are fresh (Prometheus's 5-minute lookback), red after."""
    pushed_at = (int(time()) - 600) * 1000
    labels = [("__name__", "hydrafusion_tailer_build_info"), ("instance", "laptop-1"), ("job", "hydrafusion"),
              ("user_name", "bob"), ("version", "0.1.0")]
    with running_prometheus(tmp_path, [], extra_flags=["--web.enable-remote-write-receiver"]) as prom:
        RemoteWriter(f"{prom.url}/api/v1/write").push([(labels, [(pushed_at, 1.0)])])
        (tailer,) = [expr for title, expr in dash.prometheus_exprs(600, {"user": dash.chosen("bob")})
                     if title == "Tailer"]
        assert [prom.query(tailer, time=pushed_at / 1000 + seconds)[0]["value"][1] for seconds in (1, 299, 301)] \
            == ["1", "1", "0"]
