"""Shared pytest configuration.

Hypothesis draws the same examples on every run (``derandomize``), so CI results
are reproducible; set ``HYPOTHESIS_PROFILE=explore`` to search with fresh random
examples locally.
"""

import os

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
