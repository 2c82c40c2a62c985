"""Hypothesis profiles: deterministic by default (CI runs the same examples every time);
``BLZ_HYPOTHESIS_PROFILE=soak`` draws many more, from a random seed:

    BLZ_HYPOTHESIS_PROFILE=soak target/py-venv/bin/pytest python/tests -x
"""

import os

from hypothesis import HealthCheck, settings

_common = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("ci", derandomize=True, max_examples=30, print_blob=True, **_common)
settings.register_profile("soak", max_examples=2000, **_common)
settings.load_profile(os.environ.get("BLZ_HYPOTHESIS_PROFILE", "ci"))
