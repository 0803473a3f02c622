"""Tests for the benchmark generators in ``sklearn_measattn.datasets``."""

import numpy as np
import pytest
from scipy.stats import kurtosis
from sklearn.utils import Bunch
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn._tails import sample_base
from sklearn_measattn.datasets import (
    BENCHMARK_NAMES,
    TAILS,
    load_benchmark,
    make_matrix_inverse,
    make_sheared_swap,
    sample_target_law,
)

GENERATORS = {"matrix_inverse": make_matrix_inverse, "sheared_swap": make_sheared_swap}
ALL_CASES = [(name, tail) for name in BENCHMARK_NAMES for tail in TAILS]


def hill_tail_index(values, k):
    """Hill estimator of the tail index from the ``k`` largest ``|values|``."""
    order = np.sort(np.abs(np.ravel(values)))[::-1]
    return 1.0 / np.mean(np.log(order[:k] / order[k]))


# --------------------------------------------------------------------------- #
# Shapes, dtypes, determinism
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name, tail", ALL_CASES)
@pytest.mark.parametrize("paired", [False, True])
def test_shapes_and_dtypes(name, tail, paired):
    X, y = GENERATORS[name](n_samples=3, n_points=7, n_features=4, tail=tail, paired=paired, random_state=0)
    assert X.shape == (3, 7, 4)
    assert y.shape == (3, 7, 4)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))


def test_return_params_shapes():
    _, _, params = make_matrix_inverse(n_samples=3, n_points=5, n_features=4, return_params=True, random_state=0)
    assert set(params) == {"A", "A_inv", "eigenvalues", "eigenvectors"}
    assert params["A"].shape == params["A_inv"].shape == params["eigenvectors"].shape == (3, 4, 4)
    assert params["eigenvalues"].shape == (3, 4)
    _, _, params = make_sheared_swap(n_samples=3, n_points=5, n_features=6, return_params=True, random_state=0)
    assert set(params) == {"scales", "shear"}
    assert params["scales"].shape == (3, 6)
    assert params["shear"].shape == (3, 3)


@pytest.mark.parametrize("name, tail", ALL_CASES)
def test_same_seed_same_arrays_different_seed_different(name, tail):
    gen = GENERATORS[name]
    X1, y1 = gen(n_samples=2, n_points=20, tail=tail, random_state=3)
    X2, y2 = gen(n_samples=2, n_points=20, tail=tail, random_state=3)
    X3, y3 = gen(n_samples=2, n_points=20, tail=tail, random_state=4)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(X1, X3)
    assert not np.array_equal(y1, y3)


@pytest.mark.parametrize("name", BENCHMARK_NAMES)
def test_random_state_instance_is_used(name):
    gen = GENERATORS[name]
    X1, _ = gen(n_samples=2, n_points=10, random_state=np.random.RandomState(5))
    X2, _ = gen(n_samples=2, n_points=10, random_state=5)
    np.testing.assert_array_equal(X1, X2)
    rng = np.random.RandomState(5)
    X3, _ = gen(n_samples=2, n_points=10, random_state=rng)
    X4, _ = gen(n_samples=2, n_points=10, random_state=rng)  # the generator advanced
    assert not np.array_equal(X3, X4)


@pytest.mark.parametrize("name, tail", ALL_CASES)
def test_paired_flag_keeps_inputs_changes_targets(name, tail):
    gen = GENERATORS[name]
    X_u, y_u, p_u = gen(n_samples=2, n_points=50, tail=tail, paired=False, return_params=True, random_state=1)
    X_p, y_p, p_p = gen(n_samples=2, n_points=50, tail=tail, paired=True, return_params=True, random_state=1)
    np.testing.assert_array_equal(X_u, X_p)
    for key in p_u:
        np.testing.assert_array_equal(p_u[key], p_p[key])
    assert not np.allclose(y_u, y_p)


# --------------------------------------------------------------------------- #
# Matrix inverse: closed form and laws
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("tail", TAILS)
def test_matrix_inverse_paired_closed_form(tail):
    X, y, params = make_matrix_inverse(
        n_samples=4, n_points=200, n_features=3, tail=tail, paired=True, condition=9.0,
        return_params=True, random_state=0,
    )
    A = params["A"]
    A_inv_direct = np.linalg.inv(A)
    np.testing.assert_allclose(params["A_inv"], A_inv_direct, rtol=1e-10, atol=1e-12)
    # y_k = A^-1 Z_k = A^-1 A^-1 X_k, computed independently with solve().
    expected = np.stack([np.linalg.solve(A[i], np.linalg.solve(A[i], X[i].T)).T for i in range(len(X))])
    scale = np.abs(expected).max()
    np.testing.assert_allclose(y, expected, rtol=1e-9, atol=1e-12 * scale)


def test_matrix_inverse_matrices_are_spd_with_bounded_condition():
    condition = 5.0
    _, _, params = make_matrix_inverse(
        n_samples=50, n_points=2, n_features=4, condition=condition, return_params=True, random_state=0
    )
    A = params["A"]
    np.testing.assert_allclose(A, np.swapaxes(A, 1, 2), atol=1e-14)
    eig = np.linalg.eigvalsh(A)
    assert np.all(eig > 0)
    assert np.all(eig.max(axis=1) / eig.min(axis=1) <= condition * (1 + 1e-10))
    assert np.all(eig >= condition**-0.5 * (1 - 1e-10)) and np.all(eig <= condition**0.5 * (1 + 1e-10))
    np.testing.assert_allclose(np.sort(params["eigenvalues"], axis=1), eig, rtol=1e-10)
    # The matrices are not all the same.
    assert np.ptp(eig[:, 0]) > 0.1


def test_matrix_inverse_condition_one_is_identity():
    X, y, params = make_matrix_inverse(
        n_samples=2, n_points=10, n_features=3, condition=1.0, paired=True, return_params=True, random_state=0
    )
    np.testing.assert_allclose(params["A"], np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-14)
    np.testing.assert_allclose(y, X, atol=1e-13)


def test_matrix_inverse_gaussian_target_covariance_is_A_inverse_squared():
    X, y, params = make_matrix_inverse(
        n_samples=1, n_points=20000, n_features=3, tail="gaussian", condition=9.0,
        return_params=True, random_state=0,
    )
    A, A_inv = params["A"][0], params["A_inv"][0]
    cov_y = np.cov(y[0], rowvar=False)
    cov_x = np.cov(X[0], rowvar=False)
    target = A_inv @ A_inv
    assert np.linalg.norm(cov_y - target) / np.linalg.norm(target) < 0.05
    assert np.linalg.norm(cov_x - A @ A) / np.linalg.norm(A @ A) < 0.05
    # Unpaired: targets are independent of the inputs.
    cross = np.corrcoef(X[0, :, 0], y[0, :, 0])[0, 1]
    assert abs(cross) < 0.05


# --------------------------------------------------------------------------- #
# Sheared swap: closed form and laws
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("n_features", [2, 6])
def test_sheared_swap_paired_closed_form(tail, n_features):
    X, y, params = make_sheared_swap(
        n_samples=5, n_points=100, n_features=n_features, tail=tail, paired=True,
        return_params=True, random_state=0,
    )
    scales, shear = params["scales"], params["shear"]
    np.testing.assert_allclose(shear, scales[:, 0::2] / scales[:, 1::2], rtol=1e-15)
    c = shear[:, np.newaxis, :]
    np.testing.assert_array_equal(y[..., 0::2], X[..., 1::2])
    np.testing.assert_allclose(y[..., 1::2], X[..., 0::2] + c * X[..., 1::2], rtol=1e-12)


def test_sheared_swap_scales_in_range_and_shear_varies():
    low, high = 0.25, 3.0
    _, _, params = make_sheared_swap(
        n_samples=200, n_points=2, n_features=4, scale_range=(low, high), return_params=True, random_state=0
    )
    assert np.all(params["scales"] >= low) and np.all(params["scales"] <= high)
    assert params["shear"].min() < 0.5 and params["shear"].max() > 2.0


def test_sheared_swap_constant_scale_range_gives_unit_shear():
    X, y, params = make_sheared_swap(
        n_samples=2, n_points=10, scale_range=(1.5, 1.5), paired=True, return_params=True, random_state=0
    )
    np.testing.assert_allclose(params["shear"], 1.0)
    np.testing.assert_allclose(y[..., 1], X[..., 0] + X[..., 1])


def test_sheared_swap_gaussian_marginal_scales():
    X, y, params = make_sheared_swap(
        n_samples=1, n_points=20000, tail="gaussian", return_params=True, random_state=0
    )
    s1, s2 = params["scales"][0]
    np.testing.assert_allclose(X[0].std(axis=0), [s1, s2], rtol=0.03)
    # y = (s2 Z'2, s1 (Z'1 + Z'2)): stds s2 and sqrt(2) s1.
    np.testing.assert_allclose(y[0].std(axis=0), [s2, np.sqrt(2) * s1], rtol=0.03)


# --------------------------------------------------------------------------- #
# Base families: tails
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("alpha", [1.5, 3.0])
def test_pareto_tail_index_recovered_by_hill(alpha):
    rng = np.random.RandomState(0)
    Z = sample_base((200_000, 2), "pareto", alpha, rng)
    # |Z| + 1 is exactly Pareto(alpha, xm=1): Hill is unbiased there.
    assert abs(hill_tail_index(np.abs(Z) + 1.0, k=2000) / alpha - 1) < 0.08
    # Survival function P(|Z| > t) = (1 + t)^-alpha.
    for t in [0.1, 0.5, 1.0, 3.0]:
        assert abs(np.mean(np.abs(Z) > t) - (1 + t) ** -alpha) < 0.005
    # Symmetric: about half the points are negative.
    assert abs(np.mean(Z < 0) - 0.5) < 0.01


def test_pareto_tail_index_through_generator():
    # A 1x1 "matrix" only rescales, so the tail index of X is the base one.
    X, _ = make_matrix_inverse(n_samples=1, n_points=200_000, n_features=1, tail="pareto",
                               tail_index=1.5, random_state=0)
    assert abs(hill_tail_index(X, k=1000) / 1.5 - 1) < 0.1
    X3, _ = make_matrix_inverse(n_samples=1, n_points=200_000, n_features=1, tail="pareto",
                                tail_index=3.0, random_state=0)
    assert hill_tail_index(X3, k=1000) > 2.0 > hill_tail_index(X, k=1000)


@pytest.mark.parametrize("df", [1.5, 3.0])
def test_student_t_radial_tail_index(df):
    Z = sample_base((200_000, 2), "student_t", df, np.random.RandomState(0))
    assert abs(hill_tail_index(np.linalg.norm(Z, axis=1), k=1000) / df - 1) < 0.12


def test_student_t_heavier_than_gaussian():
    Z_t = sample_base((20000, 2), "student_t", 1.5, np.random.RandomState(0))
    Z_g = sample_base((20000, 2), "gaussian", 1.5, np.random.RandomState(0))
    assert kurtosis(Z_t[:, 0]) > 50
    assert abs(kurtosis(Z_g[:, 0])) < 0.2
    assert np.abs(Z_t).max() > 10 * np.abs(Z_g).max()


def test_student_t_is_elliptical_shared_chi2():
    # One chi-square per point: the coordinates are uncorrelated but dependent,
    # |Z1| and |Z2| are strongly positively correlated (they share 1/sqrt(W)).
    Z = sample_base((50_000, 2), "student_t", 5.0, np.random.RandomState(0))
    assert abs(np.corrcoef(Z[:, 0], Z[:, 1])[0, 1]) < 0.03
    assert np.corrcoef(np.abs(Z[:, 0]), np.abs(Z[:, 1]))[0, 1] > 0.1
    P = sample_base((50_000, 2), "pareto", 5.0, np.random.RandomState(0))
    assert abs(np.corrcoef(np.abs(P[:, 0]), np.abs(P[:, 1]))[0, 1]) < 0.03


def test_gaussian_ignores_tail_index():
    X1, y1 = make_matrix_inverse(n_samples=2, n_points=10, tail="gaussian", tail_index=0.5, random_state=0)
    X2, y2 = make_matrix_inverse(n_samples=2, n_points=10, tail="gaussian", tail_index=7.0, random_state=0)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)


@pytest.mark.parametrize("name", BENCHMARK_NAMES)
@pytest.mark.parametrize("tail", ["student_t", "pareto"])
def test_overflowing_tails_raise(name, tail):
    with pytest.raises(ValueError, match="overflow float64"):
        GENERATORS[name](n_samples=5, n_points=1000, tail=tail, tail_index=0.01, random_state=0)


# --------------------------------------------------------------------------- #
# load_benchmark
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", BENCHMARK_NAMES)
def test_load_benchmark_matches_generator(name):
    kwargs = dict(n_samples=3, n_points=15, n_features=4, tail="pareto", tail_index=2.5, paired=True, random_state=7)
    bunch = load_benchmark(name, **kwargs)
    assert isinstance(bunch, Bunch)
    assert set(bunch) == {"data", "target", "params", "DESCR"}
    X, y, params = GENERATORS[name](**kwargs, return_params=True)
    np.testing.assert_array_equal(bunch.data, X)
    np.testing.assert_array_equal(bunch.target, y)
    for key, value in params.items():
        np.testing.assert_array_equal(bunch.params[key], value)
    for key, value in kwargs.items():
        assert bunch.params[key] == value
    assert "return_params" not in bunch.params
    assert isinstance(bunch.DESCR, str) and len(bunch.DESCR) > 100


def test_load_benchmark_fills_defaults():
    bunch = load_benchmark("matrix_inverse", random_state=0)
    assert bunch.data.shape == (100, 100, 2)
    assert bunch.params["condition"] == 4.0 and bunch.params["tail"] == "student_t"
    bunch = load_benchmark("sheared_swap", random_state=0)
    assert bunch.params["scale_range"] == (0.5, 2.0)
    assert "condition" not in bunch.params


@pytest.mark.parametrize(
    "name, params, error, match",
    [
        ("nope", {}, ValueError, "matrix_inverse"),
        ("Matrix_Inverse", {}, ValueError, "sheared_swap"),
        (None, {}, ValueError, r"'name' parameter of load_benchmark must be a str among"),
        ("matrix_inverse", {"return_params": True}, ValueError, "return_params"),
        ("matrix_inverse", {"scale_range": (1, 2)}, TypeError, "scale_range"),
        ("sheared_swap", {"condition": 2.0}, TypeError, "Valid parameters"),
        ("sheared_swap", {"n_features": 3}, ValueError, "even"),
    ],
)
def test_load_benchmark_invalid(name, params, error, match):
    with pytest.raises(error, match=match):
        load_benchmark(name, **params)


# --------------------------------------------------------------------------- #
# Validation of every argument
# --------------------------------------------------------------------------- #

COMMON_INVALID = [
    ({"n_samples": 0}, ValueError, "n_samples"),
    ({"n_samples": -3}, ValueError, "n_samples"),
    ({"n_samples": 2.0}, TypeError, "n_samples"),
    ({"n_samples": True}, TypeError, "n_samples"),
    ({"n_samples": "10"}, TypeError, "n_samples"),
    ({"n_samples": None}, TypeError, "n_samples"),
    ({"n_points": 0}, ValueError, "n_points"),
    ({"n_points": 1.5}, TypeError, "n_points"),
    ({"n_points": False}, TypeError, "n_points"),
    ({"n_features": 0}, ValueError, "n_features"),
    ({"n_features": 2.0}, TypeError, "n_features"),
    ({"n_features": "2"}, TypeError, "n_features"),
    ({"tail": "cauchy"}, ValueError, r"'tail' parameter .* among \{'gaussian', 'student_t', 'pareto'\}"),
    ({"tail": "Gaussian"}, ValueError, "'tail' parameter .* polynomial tails"),
    ({"tail": None}, ValueError, "'tail' parameter"),
    ({"tail_index": 0}, ValueError, "tail_index"),
    ({"tail_index": -1.0}, ValueError, "tail_index"),
    ({"tail_index": np.inf}, ValueError, "tail_index"),
    ({"tail_index": np.nan}, ValueError, "tail_index"),
    ({"tail_index": "1.5"}, TypeError, "tail_index"),
    ({"tail_index": True}, TypeError, "tail_index"),
    ({"paired": "yes"}, TypeError, "paired"),
    ({"paired": 1}, TypeError, "paired"),
    ({"return_params": None}, TypeError, "return_params"),
    ({"random_state": "seed"}, ValueError, "seed"),
]

MATRIX_INVERSE_INVALID = [
    ({"condition": 0.5}, ValueError, "condition"),
    ({"condition": 0}, ValueError, "condition"),
    ({"condition": np.inf}, ValueError, "condition"),
    ({"condition": np.nan}, ValueError, "condition"),
    ({"condition": "4"}, TypeError, "condition"),
    ({"condition": None}, TypeError, "condition"),
]

SHEARED_SWAP_INVALID = [
    ({"n_features": 3}, ValueError, "even"),
    ({"n_features": 1}, ValueError, "even"),
    ({"scale_range": (2.0, 1.0)}, ValueError, "low <= high"),
    ({"scale_range": (0.0, 1.0)}, ValueError, "scale_range"),
    ({"scale_range": (-1.0, 1.0)}, ValueError, "scale_range"),
    ({"scale_range": (1.0, np.inf)}, ValueError, "scale_range"),
    ({"scale_range": (1.0,)}, ValueError, "pair"),
    ({"scale_range": (1.0, 2.0, 3.0)}, ValueError, "pair"),
    ({"scale_range": 1.0}, ValueError, "pair"),
    ({"scale_range": "ab"}, ValueError, "pair"),
    ({"scale_range": ("a", 2.0)}, TypeError, "scale_range"),
    ({"scale_range": (None, 2.0)}, TypeError, "scale_range"),
]


@pytest.mark.parametrize("kwargs, error, match", COMMON_INVALID + MATRIX_INVERSE_INVALID)
def test_make_matrix_inverse_invalid(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_matrix_inverse(**kwargs)


@pytest.mark.parametrize("kwargs, error, match", COMMON_INVALID + SHEARED_SWAP_INVALID)
def test_make_sheared_swap_invalid(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_sheared_swap(**kwargs)


@pytest.mark.parametrize("name", BENCHMARK_NAMES)
def test_validation_happens_before_any_work(name, monkeypatch):
    # A bad argument must be rejected before the random generator is touched.
    import sklearn_measattn.datasets._benchmarks as benchmarks

    def fail(*args, **kwargs):
        raise AssertionError("check_random_state called before validation finished")

    monkeypatch.setattr(benchmarks, "check_random_state", fail)
    with pytest.raises(ValueError, match="tail"):
        GENERATORS[name](tail="bogus")


def test_numpy_integer_sizes_accepted():
    X, y = make_sheared_swap(n_samples=np.int64(2), n_points=np.int32(3), n_features=np.int64(4), random_state=0)
    assert X.shape == (2, 3, 4)


# --------------------------------------------------------------------------- #
# Drawing the target law again
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", BENCHMARK_NAMES)
def test_sample_target_law_draws_the_same_law_independently(name):
    """Gaussian control: the fresh draws have the target's covariance per measure, and are new points."""
    bunch = load_benchmark(name, n_samples=3, n_points=40000, tail="gaussian", random_state=0)
    fresh = sample_target_law(bunch, random_state=1)
    assert fresh.shape == bunch.target.shape
    for i in range(3):
        np.testing.assert_allclose(np.cov(fresh[i].T), np.cov(bunch.target[i].T), rtol=0.05, atol=0.02)
    assert not np.any(np.all(fresh == bunch.target, axis=-1))
    np.testing.assert_array_equal(sample_target_law(bunch, random_state=1), fresh)  # seeded


def test_sample_target_law_sizes_and_heavy_tails():
    bunch = load_benchmark("matrix_inverse", n_samples=4, n_points=30, tail="pareto", tail_index=0.7, random_state=0)
    fresh = sample_target_law(bunch, n_points=7, random_state=2)
    assert fresh.shape == (4, 7, 2) and np.all(np.isfinite(fresh))
    with pytest.raises(ValueError, match="load_benchmark"):
        sample_target_law(Bunch(data=bunch.data, target=bunch.target), random_state=0)
    with pytest.raises(ValueError, match="n_points"):
        sample_target_law(bunch, n_points=0)


@pytest.mark.parametrize(
    "call, name, reason",
    [
        (lambda: make_matrix_inverse(n_samples=0), "n_samples", r"\[1, inf\)"),
        (lambda: make_matrix_inverse(n_points=2.0), "n_points", r"\[1, inf\)"),
        (lambda: make_matrix_inverse(tail="cauchy"), "tail", "'student_t' or 'pareto' for polynomial tails"),
        (lambda: make_matrix_inverse(tail_index=np.inf), "tail_index", "the tail exponent alpha"),
        (lambda: make_matrix_inverse(condition=0.5), "condition", "1 gives A = I"),
        (lambda: make_matrix_inverse(paired=1), "paired", "bool"),
        (lambda: make_matrix_inverse(random_state="seed"), "random_state", "RandomState"),
        (lambda: make_sheared_swap(return_params="yes"), "return_params", "bool"),
        (lambda: make_sheared_swap(scale_range=1.0), "scale_range", "0 < low <= high"),
        (lambda: load_benchmark("mnist"), "name", "'matrix_inverse', 'sheared_swap'"),
        (lambda: sample_target_law(load_benchmark("matrix_inverse", n_samples=2, n_points=3), n_points=0),
         "n_points", r"\[1, inf\)"),
    ],
)
def test_bad_arguments_raise_invalid_parameter_error(call, name, reason):
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of \w+ must be .*{reason}"):
        call()


def test_load_benchmark_does_not_skip_the_generators_checks():
    with pytest.raises(InvalidParameterError, match=r"The 'n_samples' parameter of load_benchmark must be .*\[1, inf\)"):
        load_benchmark("matrix_inverse", n_samples=0)
