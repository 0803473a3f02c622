"""Shared pytest configuration and fixtures.

Hypothesis draws the same examples on every run (``derandomize``), so CI results
are reproducible; set ``HYPOTHESIS_PROFILE=explore`` to search with fresh random
examples locally.

Fixtures shared by the test files:

- ``tiny_network``: the architecture of the tiny models the tests train;
- ``tiny_params``: the tiny regressor's parameters (the network, three epochs of
  batches of four, on the CPU, unseeded: a test passes its own ``random_state``);
- ``seeded_tiny_params``: the tiny regressor seeded (``random_state=0``), two
  epochs of batches of eight;
- ``data``: twelve small measure pairs to train on;
- ``clouds``: a few small point clouds for metrics at extreme scales.

A test file that needs another size overrides these explicitly
(``{**tiny_network, "n_layers": 3}``); the fixtures are read-only mappings, so
no test can change them for the next.

Tests marked ``slow`` (worker processes, compilers, subprocesses) are skipped by
the fast inner loop ``pytest -m "not slow"``; CI runs everything.
"""

import os
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import settings

# tests/data holds inputs: models pickled by an earlier version and the script that made them
collect_ignore_glob = ["data/*"]

settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(scope="session")
def tiny_network():
    """The smallest network the tests train: 8-wide, 2 heads, 1 block."""
    return MappingProxyType(dict(d_model=8, n_heads=2, n_layers=1, dim_feedforward=16))


@pytest.fixture(scope="session")
def tiny_params(tiny_network):
    """The tiny regressor: three epochs of batches of four on the CPU, unseeded."""
    return MappingProxyType({**tiny_network, "batch_size": 4, "max_epochs": 3, "device": "cpu"})


@pytest.fixture(scope="session")
def seeded_tiny_params(tiny_network):
    """The tiny regressor, seeded: two epochs of batches of eight, ``random_state=0``."""
    return MappingProxyType({**tiny_network, "max_epochs": 2, "batch_size": 8, "random_state": 0})


@pytest.fixture(scope="session")
def data():
    """Twelve matrix-inverse measure pairs of 16 points in 2-D (Student-t tails of index 2)."""
    from sklearn_measattn.datasets import make_matrix_inverse  # here: a broken package fails its tests, not collection

    return make_matrix_inverse(n_samples=12, n_points=16, tail="student_t", tail_index=2.0, random_state=0)


@pytest.fixture(scope="session")
def clouds():
    """Four input clouds of 15 points and four target clouds of 11 points, 2-D, of different spreads."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 15, 2)) * rng.uniform(0.5, 3.0, size=(4, 1, 1))
    y = rng.standard_normal((4, 11, 2)) + 0.7
    return x, y
