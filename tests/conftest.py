"""Shared test settings, and the fixtures several test files share.

Hypothesis' timing health checks are off: CI machines have two cores shared with real
servers started by other tests, and a slow draw says nothing about the code under test.
"""

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

settings.register_profile(
    "project", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200
)
settings.load_profile("project")


@pytest.fixture(scope="session")
def month(tmp_path_factory):
    """The month data set of tests/test_month.py (220 sessions, 5,000+ turns) and its
    expected turns, written once for every file that reads it: tailers only read their
    state folder, so one copy serves them all."""
    from test_month import write_month

    state = tmp_path_factory.mktemp("month") / "state"
    state.mkdir()
    return state, write_month(state)
