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
- ``clouds``: a few small point clouds for metrics at extreme scales;
- ``qkv``: the factory of random attention inputs, :func:`make_qkv`
  (``q, k, v = qkv((batch, heads, n_queries, d_head), seed=3)``); a module-level
  table, which no fixture reaches, imports it: ``from tests.conftest import make_qkv``
  (pytest imports this file as ``tests.conftest``).

Results recorded elsewhere (stored predictions, reference numbers) are compared
with :func:`assert_close_across_machines`, never bit for bit: float32 results are
reproducible exactly only on one machine with one build (Intel and AMD CPUs,
their vector instructions and BLAS builds round differently). Bit-identity is
asserted only where both sides run in the same process on the same machine.

A test file that needs another size overrides these explicitly
(``{**tiny_network, "n_layers": 3}``); the fixtures are read-only mappings, so
no test can change them for the next.

Markers (registered in ``pyproject.toml``):

- ``slow`` (worker processes, compilers, subprocesses): skipped by the fast inner
  loop ``pytest -m "not slow"``; CI runs everything;
- ``gpu``: needs a CUDA GPU; skipped, with the reason, where torch sees none;
- ``fused``: needs the compiled CPU kernels; skipped, with the reason, where
  :func:`fused_skip_reason` says they cannot be built (not Linux, no C++ compiler,
  ``MEASATTN_FUSED=0``). A machine that passes those checks but fails the build
  fails these tests rather than skipping them.
"""

import os
from types import MappingProxyType

import numpy as np
import pytest
import torch
from hypothesis import settings

from sklearn_measattn._extension._loader import build_precondition

# tests/data holds inputs: models pickled by an earlier version and the script that made them
collect_ignore_glob = ["data/*"]

settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


def fused_skip_reason():
    """Why the fused CPU kernels cannot be built here, or ``None`` when they can.

    The loader's own preconditions (``MEASATTN_FUSED`` not disabling them, Linux,
    a C++ compiler, ninja), checked without building anything, so collection
    stays fast.
    """
    reason = build_precondition()
    return None if reason is None else f"needs the fused CPU kernels: {reason}"


def pytest_collection_modifyitems(config, items):
    """Skip the tests marked ``gpu`` or ``fused`` where their hardware or build is missing."""
    checks = {
        "gpu": lambda: None if torch.cuda.is_available() else "needs a CUDA GPU (torch sees none)",
        "fused": fused_skip_reason,
    }
    reasons = {}
    for item in items:
        for name, check in checks.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in reasons:  # checked once, and only when some test needs it
                reasons[name] = check()
            if reasons[name] is not None:
                item.add_marker(pytest.mark.skip(reason=reasons[name]))


#: Tolerances for float32 results recorded on another machine: summation order differs between
#: CPUs, instruction sets (AVX2, AVX-512) and thread counts, which moves tiny models' outputs by up to
#: about 3e-5 relative (measured between an AMD EPYC and an Intel Xeon). A real regression (a wrong
#: layer, a lost transform) moves them by far more than 1e-3.
CROSS_MACHINE_RTOL = 1e-4
CROSS_MACHINE_ATOL_FRACTION = 1e-4


def assert_close_across_machines(actual, desired, err_msg=""):
    """Assert that ``actual`` equals ``desired``, recorded elsewhere, within float32's cross-machine noise.

    The absolute tolerance is :data:`CROSS_MACHINE_ATOL_FRACTION` of the recorded array's largest
    magnitude, so that entries near zero do not fail on their relative error alone.
    """
    desired = np.asarray(desired)
    atol = CROSS_MACHINE_ATOL_FRACTION * float(np.max(np.abs(desired))) if desired.size else 0.0
    np.testing.assert_allclose(actual, desired, rtol=CROSS_MACHINE_RTOL, atol=atol, err_msg=err_msg)


def make_qkv(shape, seed=0, dtype=torch.float32, scale=1.0, requires_grad=False, n_keys=None, d_value=None, device="cpu"):
    """Random queries, keys and values ``(q, k, v)`` for the attention tests.

    ``shape`` is the queries' ``(batch, heads, n_queries, d_head)``; the keys have
    ``n_keys`` points (default ``n_queries``) and the values ``d_value`` features
    (default ``d_head``). The entries are standard normal, drawn in the order q, k, v
    from one ``torch.Generator`` seeded with ``seed``, directly in ``dtype`` and on
    the CPU (the same numbers on every machine), then moved to ``device``. ``scale``
    multiplies the queries and keys (the scores grow as ``scale**2``), not the values.
    With ``requires_grad`` the three are leaves that record gradients.
    """
    batch, heads, n_queries, d_head = shape
    n_keys = n_queries if n_keys is None else n_keys
    d_value = d_head if d_value is None else d_value
    generator = torch.Generator().manual_seed(seed)
    shapes = [(batch, heads, n_queries, d_head), (batch, heads, n_keys, d_head), (batch, heads, n_keys, d_value)]
    q, k, v = (torch.randn(s, generator=generator, dtype=dtype) for s in shapes)
    if scale != 1.0:
        q, k = scale * q, scale * k
    return tuple(t.to(device).requires_grad_(requires_grad) for t in (q, k, v))


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
def qkv():
    """The factory :func:`make_qkv`: ``qkv(shape, seed=0, dtype=torch.float32, scale=1.0,
    requires_grad=False, n_keys=None, d_value=None, device="cpu")``."""
    return make_qkv


@pytest.fixture(scope="session")
def clouds():
    """Four input clouds of 15 points and four target clouds of 11 points, 2-D, of different spreads."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 15, 2)) * rng.uniform(0.5, 3.0, size=(4, 1, 1))
    y = rng.standard_normal((4, 11, 2)) + 0.7
    return x, y
