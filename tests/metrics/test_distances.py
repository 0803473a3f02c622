"""Tests for sklearn_measattn.metrics: distances, collapse diagnostics, scorers."""

import inspect
import warnings

import joblib
import numpy as np
import pytest
import scipy.stats
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from sklearn_measattn import metrics
from sklearn_measattn._validation import parameter_constraints
from sklearn_measattn.metrics import (
    SCORER_NAMES,
    across_sample_correlation,
    attention_ess,
    energy_distance,
    get_scorer,
    make_measure_scorer,
    mmd,
    neg_energy_scorer,
    neg_mmd_scorer,
    neg_sliced_wasserstein_scorer,
    neg_wasserstein_scorer,
    spread_ratio,
    wasserstein_distance,
)

RAW = {"multioutput": "raw_values"}


@pytest.fixture
def clouds():
    rng = np.random.default_rng(0)
    return rng.normal(size=(4, 12, 2)), rng.normal(size=(4, 9, 2)) + 0.5


# --------------------------------------------------------------------------- #
# agreement with scipy in 1-D
# --------------------------------------------------------------------------- #
def test_wasserstein_1d_matches_scipy_with_weights():
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=15), rng.exponential(size=11)
    uw, vw = rng.uniform(0.1, 2, size=15), rng.uniform(0.1, 2, size=11)
    ours = wasserstein_distance(u[None, :, None], v[None, :, None])
    assert ours == pytest.approx(scipy.stats.wasserstein_distance(u, v), rel=1e-9)
    ours_w = wasserstein_distance(
        u[None, :, None], v[None, :, None], weights_true=uw[None], weights_pred=vw[None]
    )
    assert ours_w == pytest.approx(scipy.stats.wasserstein_distance(u, v, uw, vw), rel=1e-9)
    # in 1-D every projection is +-1, so sliced W equals exact W
    sliced = wasserstein_distance(
        u[None, :, None], v[None, :, None], weights_true=uw[None], weights_pred=vw[None],
        method="sliced", n_projections=5, random_state=0,
    )
    assert sliced == pytest.approx(ours_w, rel=1e-9)


def test_energy_1d_is_square_of_scipy():
    rng = np.random.default_rng(2)
    u, v = rng.normal(size=15), rng.standard_t(3, size=11) + 1.0
    uw, vw = rng.uniform(0.1, 2, size=15), rng.uniform(0.1, 2, size=11)
    assert energy_distance(u[None, :, None], v[None, :, None]) == pytest.approx(
        scipy.stats.energy_distance(u, v) ** 2, rel=1e-9
    )
    ours_w = energy_distance(u[None, :, None], v[None, :, None], weights_true=uw[None], weights_pred=vw[None])
    assert ours_w == pytest.approx(scipy.stats.energy_distance(u, v, uw, vw) ** 2, rel=1e-9)


# --------------------------------------------------------------------------- #
# exact properties
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("p", [1, 2])
def test_wasserstein_of_translate_is_translation_length(p):
    X = np.random.default_rng(3).normal(size=(2, 20, 2))
    t = np.array([3.0, -4.0])
    d = wasserstein_distance(X, X + t, p=p, **RAW)
    np.testing.assert_allclose(d, [5.0, 5.0], rtol=1e-9)


def test_sliced_matches_analytic_value_for_translation():
    """For a translation by t in 2-D: SW_1 = (2/pi)|t|, SW_2 = |t|/sqrt(2)."""
    X = np.random.default_rng(4).normal(size=(1, 15, 2))
    t = np.array([3.0, 4.0])
    exact = wasserstein_distance(X, X + t)
    sw1 = wasserstein_distance(X, X + t, method="sliced", n_projections=2000, random_state=0)
    sw2 = wasserstein_distance(X, X + t, p=2, method="sliced", n_projections=2000, random_state=0)
    assert exact == pytest.approx(5.0)
    assert sw1 == pytest.approx(exact * 2 / np.pi, rel=0.05)
    assert sw2 == pytest.approx(exact / np.sqrt(2), rel=0.05)


def test_sliced_is_deterministic_given_random_state(clouds):
    a, b = clouds
    kw = dict(method="sliced", n_projections=20, random_state=7, **RAW)
    np.testing.assert_array_equal(wasserstein_distance(a, b, **kw), wasserstein_distance(a, b, **kw))


def test_sinkhorn_is_upper_approximation(clouds):
    a, b = clouds
    exact = wasserstein_distance(a, b, **RAW)
    sink = wasserstein_distance(a, b, method="sinkhorn", reg=0.05, **RAW)
    assert np.all(sink > exact)
    np.testing.assert_allclose(sink, exact, rtol=0.05)


def test_sinkhorn_says_when_it_has_not_converged(clouds):
    a, b = clouds
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converged: silent
        wasserstein_distance(a[:1], b[:1], method="sinkhorn", reg=0.05)
    with pytest.warns(UserWarning, match="did not converge in 5000 iterations.*raise reg"):
        value = wasserstein_distance(100 * a[:1], 100 * b[:1], method="sinkhorn", reg=0.3)
    assert np.isfinite(value)
    with pytest.raises(ValueError, match="non-finite cost.*Raise reg"):  # far too small for the costs
        wasserstein_distance(100 * a[:1], 100 * b[:1], method="sinkhorn", reg=1e-3)


def test_parallel_matches_sequential(clouds):
    a, b = clouds
    with joblib.parallel_config(backend="threading"):  # no process start-up in the test
        parallel = wasserstein_distance(a, b, n_jobs=2, method="sliced", random_state=3, **RAW)
    sequential = wasserstein_distance(a, b, method="sliced", random_state=3, **RAW)
    np.testing.assert_array_equal(parallel, sequential)


def test_energy_zero_on_identical_and_symmetric(clouds):
    a, b = clouds
    np.testing.assert_array_equal(energy_distance(a, a, **RAW), np.zeros(4))
    ab = energy_distance(a, b, beta=1.5, **RAW)
    np.testing.assert_allclose(ab, energy_distance(b, a, beta=1.5, **RAW), rtol=1e-12)
    assert np.all(ab > 0)


def test_mmd_zero_on_identical_positive_otherwise(clouds):
    a, b = clouds
    np.testing.assert_array_equal(mmd(a, a, **RAW), np.zeros(4))
    assert np.all(mmd(a, b, **RAW) > 0)
    assert mmd(a, b, bandwidth=2.0) == pytest.approx(mmd(b, a, bandwidth=2.0))


@pytest.mark.parametrize(
    "metric, kwargs",
    [
        (wasserstein_distance, {}),
        (wasserstein_distance, {"p": 2}),
        (wasserstein_distance, {"method": "sliced", "n_projections": 30, "random_state": 0}),
        (energy_distance, {}),
        (energy_distance, {"beta": 0.5}),
        (mmd, {}),
        (mmd, {"bandwidth": 0.7}),
    ],
)
def test_integer_weights_equal_repeated_points(metric, kwargs):
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(4, 2)) + 1.0
    k = np.array([1, 2, 3, 1, 1])
    weighted = metric(x[None], y[None], weights_true=k[None].astype(float), **kwargs)
    repeated = metric(np.repeat(x, k, axis=0)[None], y[None], **kwargs)
    assert weighted == pytest.approx(repeated, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("metric", [wasserstein_distance, energy_distance, mmd, spread_ratio])
def test_ragged_lists_match_padded_with_weights(metric):
    rng = np.random.default_rng(6)
    lengths_true, lengths_pred = [5, 8, 3], [7, 4, 6]
    y_true = [rng.normal(size=(n, 2)) for n in lengths_true]
    y_pred = [rng.normal(size=(n, 2)) for n in lengths_pred]

    def pad(arrays, n):
        out, w = np.full((len(arrays), n, 2), 123.0), np.zeros((len(arrays), n))
        for i, a in enumerate(arrays):
            out[i, : len(a)], w[i, : len(a)] = a, 1.0
        return out, w

    pt, wt = pad(y_true, 8)
    pp, wp = pad(y_pred, 7)
    ragged = metric(y_true, y_pred, **RAW)
    padded = metric(pt, pp, weights_true=wt, weights_pred=wp, **RAW)
    np.testing.assert_allclose(ragged, padded, rtol=1e-12)
    assert ragged.shape == (3,)


def test_sample_weight_and_multioutput(clouds):
    a, b = clouds
    raw = energy_distance(a, b, **RAW)
    assert energy_distance(a, b) == pytest.approx(raw.mean())
    sw = np.array([1.0, 0.0, 3.0, 0.0])
    assert energy_distance(a, b, sample_weight=sw) == pytest.approx((raw[0] + 3 * raw[2]) / 4)
    assert isinstance(wasserstein_distance(a, b), float)


# --------------------------------------------------------------------------- #
# collapse diagnostics
# --------------------------------------------------------------------------- #
def test_spread_ratio_identity_and_collapse():
    rng = np.random.default_rng(7)
    y = rng.normal(size=(6, 40, 3))
    np.testing.assert_allclose(spread_ratio(y, y, **RAW), np.ones(6))
    assert spread_ratio(y, 3.0 * y) == pytest.approx(3.0)
    collapsed = y.mean(axis=1, keepdims=True) + 1e-3 * rng.normal(size=(6, 40, 3))
    assert spread_ratio(y, collapsed) < 0.01
    assert spread_ratio(y, np.zeros_like(y)) == 0.0
    # a target without spread gives nan for that sample, left out of the mean
    y_const = y.copy()
    y_const[0] = 1.0
    ratios = spread_ratio(y_const, y, **RAW)
    assert np.isnan(ratios[0]) and np.all(np.isfinite(ratios[1:]))
    assert spread_ratio(y_const, y) == pytest.approx(ratios[1:].mean())


def test_across_sample_correlation_good_vs_constant():
    rng = np.random.default_rng(8)
    scales = rng.uniform(0.5, 4.0, size=(30, 1, 1))
    shifts = rng.normal(scale=3.0, size=(30, 1, 2))
    y_true = rng.normal(size=(30, 50, 2)) * scales + shifts
    good = rng.normal(size=(30, 60, 2)) * scales + shifts  # fresh particles, same law
    for statistic in ("scale", "location"):
        assert across_sample_correlation(y_true, good, statistic=statistic) > 0.8
        const = np.broadcast_to(good.mean(axis=0), good.shape)  # one average measure
        assert across_sample_correlation(y_true, const, statistic=statistic) == 0.0
    # an unrelated prediction has small correlation
    unrelated = rng.normal(size=(30, 50, 2)) * rng.uniform(0.5, 4.0, size=(30, 1, 1))
    assert abs(across_sample_correlation(y_true, unrelated)) < 0.5


@pytest.mark.slow
def test_attention_ess_separates_regimes():
    """Softmax ESS/n -> 0 on heavy tails as n grows; log and sigmoid stay away from 0.

    Margins checked over 8 data/projection seeds: softmax at n=1024 was 0.012-0.053
    (0.3x its n=64 value at most), log and sigmoid >= 0.59, Gaussian >= 0.41.
    """
    rng = np.random.default_rng(0)
    kw = dict(n_draws=2, random_state=0)
    kernels = ("softmax", "log", "sigmoid")
    heavy = {n: rng.standard_t(1.5, size=(2, n, 2)) for n in (64, 1024)}
    ess = {(k, n): attention_ess(heavy[n], k, **kw).mean() for k in kernels for n in heavy}
    assert ess["softmax", 1024] < 0.1
    assert ess["softmax", 1024] < 0.5 * ess["softmax", 64]
    for k in ("log", "sigmoid"):
        assert ess[k, 64] > 0.4 and ess[k, 1024] > 0.4
        assert ess[k, 1024] > 5 * ess["softmax", 1024]
    gauss = rng.normal(size=(3, 256, 2))  # the Gaussian limit does not depend on n
    for k in kernels:
        assert attention_ess(gauss, k, **kw).mean() > 0.3


def test_attention_ess_weights_projections_and_per_query():
    rng = np.random.default_rng(9)
    X = [rng.normal(size=(n, 2)) for n in (10, 6)]
    padded = np.zeros((2, 10, 2))
    w = np.zeros((2, 10))
    for i, x in enumerate(X):
        padded[i, : len(x)], w[i, : len(x)] = x, 1.0
    padded[1, 6:] = 50.0  # padding must be ignored whatever its value
    W = (rng.normal(size=(2, 3)), rng.normal(size=(2, 3)))
    np.testing.assert_allclose(
        attention_ess(X, "poly", kernel_params={"degree": 2}, projections=W),
        attention_ess(padded, "poly", kernel_params={"degree": 2}, projections=W, weights=w),
    )
    per_query = attention_ess(X, projections=W, per_query=True)
    assert per_query.shape == (2, 10)
    assert np.all(np.isnan(per_query[1, 6:])) and np.all((per_query[0] > 0) & (per_query[0] <= 1 + 1e-12))
    # zero projections: flat attention, ESS equals the measure's own size
    zeros = (np.zeros((2, 2)), np.zeros((2, 2)))
    np.testing.assert_allclose(attention_ess(padded, projections=zeros, weights=w), [1.0, 1.0])


# --------------------------------------------------------------------------- #
# scorers
# --------------------------------------------------------------------------- #
class ScaleRegressor(RegressorMixin, BaseEstimator):
    """Predicts the input measure scaled by ``scale`` (3-D in, 3-D out)."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y=None):
        self.fitted_ = True
        return self

    def predict(self, X):
        return np.asarray(X) * self.scale


@pytest.fixture
def scale_data():
    X = np.random.default_rng(10).normal(size=(12, 8, 2))
    return X, 2.0 * X


@pytest.mark.parametrize(
    "scoring",
    [neg_energy_scorer, neg_wasserstein_scorer, neg_sliced_wasserstein_scorer, neg_mmd_scorer,
     "neg_energy_distance", "neg_mmd_scorer"],
)
def test_scorers_in_grid_search(scoring, scale_data):
    X, y = scale_data
    if isinstance(scoring, str):
        scoring = get_scorer(scoring)
    grid = GridSearchCV(ScaleRegressor(), {"scale": [0.5, 1.0, 2.0, 3.0]}, scoring=scoring, cv=3)
    grid.fit(X, y)
    assert grid.best_params_ == {"scale": 2.0}
    assert grid.best_score_ == pytest.approx(0.0, abs=1e-9)


def test_scorers_in_cross_val_score(scale_data):
    X, y = scale_data
    scores = cross_val_score(ScaleRegressor(scale=1.0), X, y, scoring=get_scorer("neg_wasserstein_distance"),
                             cv=KFold(3))
    assert scores.shape == (3,) and np.all(scores < 0)
    expected = [-wasserstein_distance(y[test], X[test]) for _, test in KFold(3).split(X)]
    np.testing.assert_allclose(scores, expected)


def test_make_measure_scorer_and_get_scorer(scale_data):
    X, y = scale_data
    est = ScaleRegressor(scale=1.0)
    assert make_measure_scorer("wasserstein_distance", p=2)(est, X, y) == pytest.approx(
        -wasserstein_distance(y, X, p=2)
    )
    assert make_measure_scorer("spread_ratio")(est, X, y) == pytest.approx(-abs(np.log(0.5)))
    custom = make_measure_scorer(lambda yt, yp: float(np.abs(yt - yp).mean()))
    assert custom(est, X, y) == pytest.approx(-np.abs(X).mean())
    sw = np.arange(12.0)
    expected = -energy_distance(y, X, sample_weight=sw)
    assert neg_energy_scorer(est, X, y, sample_weight=sw) == pytest.approx(expected)
    for name in SCORER_NAMES:
        assert get_scorer(name)(est, X, y) < 0
    with pytest.raises(ValueError, match="neg_energy_distance"):
        get_scorer("neg_mean_squared_error")
    with pytest.raises(ValueError, match="'metric' parameter of make_measure_scorer must be a str among {'energy_distance'"):
        make_measure_scorer("chamfer")
    with pytest.raises(ValueError, match=r"'p' parameter of wasserstein_distance must be .*\[1\.0, inf\)"):
        make_measure_scorer("wasserstein_distance", p=0.5)
    with pytest.raises(ValueError, match="unexpected keyword"):
        make_measure_scorer("energy_distance", gamma=1.0)


NAMED_METRICS = ["energy_distance", "energy", "wasserstein_distance", "wasserstein", "sliced_wasserstein_distance",
                 "sliced_wasserstein", "mmd", "spread_ratio"]


@pytest.mark.parametrize("metric", NAMED_METRICS)
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"gamma": 1.0}, "unexpected keyword"),  # not the metric's parameter at all
        ({"multioutput": "raw_values"}, "one number"),  # taken by the metric, but a scorer supplies it
        ({"sample_weight": np.ones(12)}, "each call"),
        ({"weights_true": np.ones((12, 8))}, "measures scored"),
        ({"weights_pred": np.ones((12, 8))}, "measures scored"),
    ],
    ids=["unknown", "multioutput", "sample_weight", "weights_true", "weights_pred"],
)
def test_a_scorer_refuses_arguments_it_cannot_score_with(metric, kwargs, match, scale_data):
    """An argument the scored function does not take, or one that the scorer
    must supply itself on each call, fails when the scorer is made, never as a
    NaN score (GridSearchCV's error_score) later."""
    with pytest.raises(ValueError, match=match):
        make_measure_scorer(metric, **kwargs)


def test_a_callable_metric_is_checked_against_its_own_signature(scale_data):
    X, y = scale_data
    with pytest.raises(ValueError, match="unexpected keyword.*takes scale"):
        make_measure_scorer(lambda yt, yp, *, scale=1.0: float(np.abs(yt - yp).mean()) * scale, p=2)
    with pytest.raises(ValueError, match="each call"):
        make_measure_scorer(lambda yt, yp, sample_weight=None: 0.0, sample_weight=np.ones(12))
    takes_any = make_measure_scorer(lambda yt, yp, **kwargs: float(kwargs["scale"]), scale=3.0)
    assert takes_any(ScaleRegressor(), X, y) == -3.0


@pytest.mark.parametrize("name", [n for n in SCORER_NAMES if not n.endswith("_scorer")])
def test_both_spellings_of_a_scorer_are_one_scorer(name, scale_data):
    """get_scorer's name and make_measure_scorer's metric name (with its space)
    come from one table: the same function and arguments, the same scores, and
    the same score on every call (the sliced projections are seeded)."""
    X, y = scale_data
    base, space = (name[: -len("_symlog")], "symlog") if name.endswith("_symlog") else (name, "raw")
    metric = base.removeprefix("neg_")
    made = make_measure_scorer(metric, space=space)
    named = get_scorer(name)
    assert made._kwargs == named._kwargs
    assert repr(made._score_func) == repr(named._score_func)
    est = ScaleRegressor(scale=1.3)
    scores = [made(est, X, y), made(est, X, y), named(est, X, y), named(est, X, y)]
    assert len(set(scores)) == 1, scores
    alias = {"energy_distance": "energy", "wasserstein_distance": "wasserstein",
             "sliced_wasserstein_distance": "sliced_wasserstein"}.get(metric)
    if alias is not None:
        assert make_measure_scorer(alias, space=space)(est, X, y) == scores[0]


def test_the_sliced_scorer_takes_another_seed():
    X = np.random.default_rng(1).normal(size=(6, 10, 3))
    est = ScaleRegressor(scale=2.0)
    seeded = [make_measure_scorer("sliced_wasserstein", random_state=seed)(est, X, X) for seed in (0, 1)]
    assert seeded[0] == get_scorer("neg_sliced_wasserstein_distance")(est, X, X) != seeded[1]


# --------------------------------------------------------------------------- #
# invalid input
# --------------------------------------------------------------------------- #
def _good():
    return np.zeros((2, 3, 2)), np.ones((2, 4, 2))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda a, b: energy_distance(a, np.ones((2, 4, 3))), "features"),
        (lambda a, b: energy_distance(a, np.ones((3, 4, 2))), "n_samples"),
        (lambda a, b: mmd(np.where(a == 0, np.nan, a), b), "NaN"),
        (lambda a, b: wasserstein_distance(np.zeros((2, 0, 2)), b), "at least 1 point"),
        (lambda a, b: wasserstein_distance(a[0], b[0]), "3-D"),
        (lambda a, b: wasserstein_distance(a, b, method="greedy"), "exact.*sliced.*sinkhorn"),
        (lambda a, b: wasserstein_distance(a, b, p=0.5), r"'p' parameter of wasserstein_distance .*\[1\.0, inf\): W_p "),
        (lambda a, b: energy_distance(a, b, beta=2.0), r"\(0\.0, 2\.0\): only there .* a metric"),
        (lambda a, b: energy_distance(a, b, beta=0.0), r"\(0\.0, 2\.0\): only there .* a metric"),
        (lambda a, b: energy_distance(a, b, weights_true=-np.ones((2, 3))), "negative"),
        (lambda a, b: energy_distance(a, b, weights_pred=np.zeros((2, 4))), "sums to 0"),
        (lambda a, b: energy_distance(a, b, weights_true=np.ones((2, 4))), "shape"),
        (lambda a, b: energy_distance(a, b, sample_weight=[1.0, -1.0]), "negative"),
        (lambda a, b: energy_distance(a, b, sample_weight=[1.0]), "shape"),
        (lambda a, b: energy_distance(a, b, multioutput="variance_weighted"), "raw_values"),
        (lambda a, b: mmd(a, b, bandwidth=-1.0), "bandwidth"),
        (lambda a, b: mmd(a, b, bandwidth="scott"), "median"),
        (lambda a, b: across_sample_correlation(a, b), "at least 3 samples"),
        (lambda a, b: across_sample_correlation(a, b, statistic="mean"), "scale"),
        (lambda a, b: attention_ess(a, "exp"), "Valid choices"),
        (lambda a, b: attention_ess(a, projections=(np.ones((3, 2)), np.ones((3, 2)))), "n_features"),
        (lambda a, b: attention_ess(a, weights=-np.ones((2, 3))), "negative"),
    ],
)
def test_invalid_input_raises_value_error(call, match):
    a, b = _good()
    with pytest.raises(ValueError, match=match):
        call(a, b)


def test_attention_ess_max_queries_subsamples_queries():
    X = np.random.default_rng(3).normal(size=(2, 600, 2))
    full = attention_ess(X, "log", random_state=0)
    sub = attention_ess(X, "log", max_queries=200, random_state=0)
    np.testing.assert_allclose(sub, full, rtol=0.05)
    per_query = attention_ess(X, "log", max_queries=200, per_query=True, random_state=0)
    assert np.isfinite(per_query).sum(axis=1).tolist() == [200, 200]
    with pytest.raises(ValueError, match="max_queries"):
        attention_ess(X, "log", max_queries=0)


def test_energy_distance_metric_equals_the_dense_formula():
    """The metric (O(n) memory) gives the dense V-statistic, weights included."""
    rng = np.random.default_rng(5)
    y_true, y_pred = rng.normal(size=(2, 300, 2)), rng.standard_t(2.0, size=(2, 250, 2))
    weights = rng.uniform(0.1, 1.0, size=(2, 300))
    got = energy_distance(y_true, y_pred, beta=1.5, weights_true=weights, multioutput="raw_values")
    for i in range(2):
        a = weights[i] / weights[i].sum()
        b = np.full(250, 1 / 250)
        d = lambda u, v: np.linalg.norm(u[:, None] - v[None], axis=-1) ** 1.5  # noqa: E731
        dense = 2 * a @ d(y_true[i], y_pred[i]) @ b - a @ d(y_true[i], y_true[i]) @ a - b @ d(y_pred[i], y_pred[i]) @ b
        np.testing.assert_allclose(got[i], dense, rtol=1e-10)
    assert got.min() > 0


@pytest.mark.parametrize("p", [1, 2])
def test_sliced_sorting_shortcut_matches_pot_quantile_path(p):
    """Equal-size uniform clouds take the sorting shortcut; a weight perturbed by
    1e-12 forces POT's general path with the same projections."""
    rng = np.random.default_rng(8)
    y_true, y_pred = rng.normal(size=(2, 200, 3)), rng.standard_t(2.0, size=(2, 200, 3)) + 1.0
    weights = np.ones((2, 200))
    weights[:, 0] += 1e-12
    shortcut = wasserstein_distance(y_true, y_pred, p=p, method="sliced", random_state=0, multioutput="raw_values")
    general = wasserstein_distance(
        y_true, y_pred, p=p, method="sliced", random_state=0, weights_true=weights, multioutput="raw_values"
    )
    np.testing.assert_allclose(shortcut, general, rtol=1e-9)


# Per public metric function, the parameters its table leaves to other checks:
# the measures and their weights (_validation), the estimator, a kernel
# (get_kernel) and fixed projections (their shapes depend on the data).
_CHECKED_ELSEWHERE = {
    "wasserstein_distance": {"y_true", "y_pred", "weights_true", "weights_pred", "sample_weight"},
    "energy_distance": {"y_true", "y_pred", "weights_true", "weights_pred", "sample_weight"},
    "mmd": {"y_true", "y_pred", "weights_true", "weights_pred", "sample_weight"},
    "spread_ratio": {"y_true", "y_pred", "weights_true", "weights_pred", "sample_weight"},
    "across_sample_correlation": {"y_true", "y_pred", "weights_true", "weights_pred"},
    "attention_ess": {"X", "kernel", "projections", "weights"},
    "collapse_diagnostics": {"estimator", "X", "y", "y_pred"},
    "to_space": {"y"},
    "get_scorer": set(),
}


@pytest.mark.parametrize("name", sorted(_CHECKED_ELSEWHERE))
def test_each_metric_has_one_table_of_its_parameters(name):
    func = getattr(metrics, name)
    table = parameter_constraints(func)
    assert set(table) | _CHECKED_ELSEWHERE[name] == set(inspect.signature(func).parameters)
    assert not set(table) & _CHECKED_ELSEWHERE[name]
