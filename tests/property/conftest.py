"""Property-based tests of every parser of outside input: whatever the input, the answer is success
or a one-line error (exit 2, or the documented code) naming the file or key path, never a traceback.

Run time stays bounded: a fixed number of examples per test and a per-example deadline; under
CI=true the examples are derandomized so a CI run is reproducible (a local run explores new ones).
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

settings.register_profile(
    "opsctl", max_examples=60, deadline=timedelta(seconds=5), database=None, print_blob=True,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile("opsctl")
