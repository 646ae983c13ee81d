"""Shared test settings.

Hypothesis' timing health checks are off: CI machines have two cores shared with real
servers started by other tests, and a slow draw says nothing about the code under test.
"""

import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

settings.register_profile(
    "project", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200
)
settings.load_profile("project")
