"""Property-based tests (hypothesis): symlog, kernels, metrics, validation."""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sklearn_measattn import KERNEL_NAMES, SymlogTransformer, get_kernel
from sklearn_measattn._validation import check_measures
from sklearn_measattn.metrics import energy_distance, mmd, wasserstein_distance
from sklearn_measattn.preprocessing import inverse_symlog, symlog

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Subnormal inputs are excluded: symlog(5e-324, scale=2) underflows to 0, so signs
# (and relative round-trip error) are only defined on normal floats.
finite64 = st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False, allow_subnormal=False)
scales = st.floats(1e-3, 1e3)


# --------------------------------------------------------------------------- #
# symlog
# --------------------------------------------------------------------------- #
@pytest.mark.slow
@SETTINGS
@given(x=hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=4), elements=finite64), scale=scales)
def test_symlog_inverse_round_trip(x, scale):
    y = symlog(x, scale)
    assert np.all(np.isfinite(y))
    assert np.array_equal(np.sign(y), np.sign(x))
    np.testing.assert_allclose(inverse_symlog(y, scale), x, rtol=1e-9, atol=1e-300)


@SETTINGS
@given(
    X=hnp.arrays(np.float64, hnp.array_shapes(min_dims=3, max_dims=3, max_side=4), elements=finite64),
    scale=scales,
)
def test_symlog_transformer_round_trip(X, scale):
    st_ = SymlogTransformer(scale=scale).fit(X)
    Z = st_.transform(X)
    assert Z.shape == X.shape and np.all(np.isfinite(Z))
    np.testing.assert_allclose(st_.inverse_transform(Z), X, rtol=1e-9, atol=1e-300)


@SETTINGS
@given(a=finite64, b=finite64)
def test_symlog_is_monotone(a, b):
    lo, hi = min(a, b), max(a, b)
    assert symlog(np.array([lo]))[0] <= symlog(np.array([hi]))[0]


# --------------------------------------------------------------------------- #
# kernels: g finite, increasing, kappa = exp(g), matches the design table
# --------------------------------------------------------------------------- #
def _reference_g(name, s, degree=1.0):
    """The design table's g, in float64 numpy."""
    pos = np.maximum(s, 0.0)
    neg = np.minimum(s, 0.0)
    if name == "softmax":
        return s
    if name == "poly":
        return neg + degree * np.log1p(pos / degree)
    if name == "log":
        return neg + np.log1p(np.log1p(pos))
    if name == "sigmoid":
        return -np.logaddexp(0.0, -s)
    if name == "softplus":
        # log(softplus(s)) = s + log(log1p(e^s) / e^s) -> s as s -> -inf (no underflow)
        with np.errstate(divide="ignore"):
            return np.where(s < -30.0, s, np.log(np.logaddexp(0.0, s)))
    raise AssertionError(name)


scores = hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(-1e4, 1e4, width=32))


@pytest.mark.slow
@pytest.mark.parametrize("name", KERNEL_NAMES)
@SETTINGS
@given(s=scores, degree=st.floats(0.25, 8.0))
def test_kernel_g_finite_increasing_and_matches_kappa(name, s, degree):
    kernel = get_kernel(name, degree=degree) if name == "poly" else get_kernel(name)
    t = torch.from_numpy(np.sort(s))
    g = kernel(t)
    assert g.dtype == t.dtype and g.shape == t.shape
    assert torch.isfinite(g).all()
    assert (torch.diff(g) >= 0).all(), "g must be nondecreasing"
    torch.testing.assert_close(kernel.kappa(t), torch.exp(g))
    ref = _reference_g(name, np.sort(s).astype(np.float64), degree)
    np.testing.assert_allclose(g.double().numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", KERNEL_NAMES)
@SETTINGS
@given(s=scores)
def test_kernel_gradients_finite(name, s):
    t = torch.from_numpy(s).requires_grad_(True)
    get_kernel(name)(t).sum().backward()
    assert torch.isfinite(t.grad).all()
    assert (t.grad >= 0).all()


# --------------------------------------------------------------------------- #
# metrics: symmetric, nonnegative, zero on identical inputs, order-invariant
# --------------------------------------------------------------------------- #
coords = st.floats(-100, 100, allow_nan=False, width=64)


@st.composite
def measure_pairs(draw):
    n_samples = draw(st.integers(1, 2))
    d = draw(st.integers(1, 2))
    a = draw(hnp.arrays(np.float64, (n_samples, draw(st.integers(1, 5)), d), elements=coords))
    b = draw(hnp.arrays(np.float64, (n_samples, draw(st.integers(1, 5)), d), elements=coords))
    seed = draw(st.integers(0, 2**16))
    return a, b, seed


METRICS = {
    "energy_distance": energy_distance,
    "wasserstein_exact_w1": lambda a, b, **kw: wasserstein_distance(a, b, p=1, method="exact", **kw),
    "mmd": mmd,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(METRICS))
@SETTINGS
@given(pair=measure_pairs())
@example(pair=(np.array([[[2.82119531e-95], [2.82119531e-95], [0.0]]]), np.zeros((1, 1, 1)), 0))
def test_metric_axioms(name, pair):
    metric = METRICS[name]
    a, b, seed = pair
    ab = metric(a, b, multioutput="raw_values")
    assert np.all(np.isfinite(ab)) and np.all(ab >= 0)
    np.testing.assert_allclose(metric(b, a, multioutput="raw_values"), ab, rtol=1e-7, atol=1e-9)
    self_distance = metric(a, a, multioutput="raw_values")
    if name.startswith("wasserstein"):
        # POT's network simplex works to an absolute tolerance: for points ~1e-95
        # apart it may leave a residual of that order (found by hypothesis).
        np.testing.assert_array_less(self_distance, 1e-12)
    else:
        np.testing.assert_array_equal(self_distance, 0.0)
    rng = np.random.default_rng(seed)
    a_perm = a[:, rng.permutation(a.shape[1])]
    b_perm = b[:, rng.permutation(b.shape[1])]
    np.testing.assert_allclose(metric(a_perm, b_perm, multioutput="raw_values"), ab, rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------------------- #
# validation never crashes with anything but ValueError / TypeError
# --------------------------------------------------------------------------- #
any_dtype = st.one_of(
    hnp.scalar_dtypes(),
    hnp.byte_string_dtypes(max_len=3),
    hnp.unicode_string_dtypes(max_len=3),
    st.just(np.dtype(object)),
)
any_array = hnp.arrays(any_dtype, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3))


@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(X=st.one_of(any_array, st.lists(any_array, max_size=3)))
def test_check_measures_fails_only_with_value_or_type_error(X):
    try:
        out, weights = check_measures(X)
    except (ValueError, TypeError) as exc:
        assert str(exc)  # a message, always
        return
    assert out.ndim == 3 and min(out.shape) >= 1
    assert out.dtype in (np.float32, np.float64)
    assert np.all(np.isfinite(out))
    if weights is not None:
        assert weights.shape == out.shape[:2] and np.all(weights.sum(axis=1) > 0)


@SETTINGS
@given(
    x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=3, max_dims=3, max_side=3), elements=st.floats(-10, 10)),
    w=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=9),
)
def test_metric_weights_fail_only_with_value_or_type_error(x, w):
    weights = np.resize(np.asarray(w), x.shape[:2]) if math.prod(x.shape[:2]) else np.asarray(w)
    try:
        value = energy_distance(x, x + 1.0, weights_true=weights)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    assert np.isfinite(value) and value >= 0
