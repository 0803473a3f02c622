"""Bad input, everywhere: a table of cases over every public entry point.

Each case is ``(id, call, expectation)``. A call either raises a ``ValueError`` /
``TypeError`` whose message names the problem (checked with a regex) and that
was raised by our validation -- never deep inside torch, POT, scipy or numpy --
or, for valid-but-unusual input (one point, float16, magnitude 1e30, integer
data, nested lists, ragged lists), returns a finite result. NaN is never
returned silently.

``CASES`` is built at import time; ``test_case_count`` asserts its size and
prints a per-entry-point summary (visible with ``pytest -rA``).
"""

from __future__ import annotations

import collections
import re
import traceback

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError, UndefinedMetricWarning

from sklearn_measattn import MeasureTransformerRegressor, SymlogTransformer, datasets, get_kernel, kernel_attention, metrics
from sklearn_measattn.metrics import attention_ess, get_scorer, make_measure_scorer, wasserstein_distance
from tests.conftest import make_qkv

RNG = np.random.default_rng(0)
GOOD = RNG.normal(size=(3, 4, 2))
GOOD_Y = RNG.normal(size=(3, 5, 2))
ERR = (ValueError, TypeError)

# Where an error may be raised from: our code or sklearn's own validation helpers.
_FOREIGN = ("/torch/", "/ot/", "/scipy/", "/numpy/", "/skorch/")


def _finite(result):
    """Whether every number in a (nested) result is finite."""
    if isinstance(result, dict):
        return all(_finite(v) for k, v in result.items() if k != "DESCR")
    if isinstance(result, (list, tuple)):
        return all(_finite(r) for r in result)
    if isinstance(result, torch.Tensor):
        return bool(torch.isfinite(result).all())
    if isinstance(result, (str, type(None))):
        return True
    if hasattr(result, "predict") or callable(result):
        return True
    arr = np.asarray(result)
    if arr.dtype.kind not in "biuf":
        return True
    return bool(np.all(np.isfinite(arr)))


class Expect:
    """Expected outcome of a case."""

    def __init__(self, kind, exc=ERR, pattern=""):
        self.kind, self.exc, self.pattern = kind, exc, pattern


FINITE = Expect("finite")


def raises(pattern, exc=ERR):
    return Expect("raise", exc, pattern)


def finite_or_raises(pattern, exc=ERR):
    return Expect("finite_or_raise", exc, pattern)


CASES: list[tuple[str, object, Expect]] = []


def case(name, call, expect):
    CASES.append((name, call, expect))


# --------------------------------------------------------------------------- #
# Array mutations
# --------------------------------------------------------------------------- #
def _with(X, value):
    X = np.array(X, dtype=np.float64)
    X[0, 0, 0] = value
    return X


def _objects(X):
    X = X.astype(object)
    X[0, 0, 0] = "a"
    return X


BAD_ARRAYS = {
    "nan": (lambda X: _with(X, np.nan), raises(r"nan", ValueError)),
    "posinf": (lambda X: _with(X, np.inf), raises(r"inf", ValueError)),
    "neginf": (lambda X: _with(X, -np.inf), raises(r"inf", ValueError)),
    "rank1": (lambda X: X.ravel(), raises(r"3-d|2d|dimension", ValueError)),
    "rank2": (lambda X: X[0], raises(r"3-d", ValueError)),
    "rank4": (lambda X: X[None], raises(r"3-d", ValueError)),
    "scalar": (lambda X: 1.5, raises(r"3-d|2d|scalar", ValueError)),
    "none": (lambda X: None, raises(r"3-d|2d|array|numeric|none")),
    "zero_samples": (lambda X: X[:0], raises(r"0 samples|sample", ValueError)),
    "zero_points": (lambda X: X[:, :0], raises(r"0 points|point", ValueError)),
    "zero_features": (lambda X: X[:, :, :0], raises(r"0 features|feature", ValueError)),
    "strings": (lambda X: X.astype(str), raises(r"string|numeric", TypeError)),
    "bytes": (lambda X: X.astype("S8"), raises(r"string|bytes|numeric", TypeError)),
    "objects": (_objects, raises(r"non-numeric|numeric", TypeError)),
    "complex": (lambda X: X + 1j, raises(r"complex", TypeError)),
    "ragged_feature_mismatch": (lambda X: [X[0], X[1][:, :1]], raises(r"features|feature")),
    "inhomogeneous_nested": (lambda X: [[[1.0, 2.0], [3.0]]], raises(r"array|convert|inhomogeneous|shape")),
}

VALID_ARRAYS = {
    "one_point": lambda X: X[:, :1],
    "float16": lambda X: X.astype(np.float16),
    "float32": lambda X: X.astype(np.float32),
    "integers": lambda X: np.round(10 * X).astype(np.int64),
    "magnitude_1e30": lambda X: X * 1e30,
    "nested_lists": lambda X: X.tolist(),
    "ragged_list": lambda X: [X[0], X[1][:2], X[2][:3]],
}


# --------------------------------------------------------------------------- #
# Metrics: every array slot x every mutation, plus weights and parameters
# --------------------------------------------------------------------------- #
PAIR_METRICS = {
    "energy_distance": metrics.energy_distance,
    "wasserstein_exact": metrics.wasserstein_distance,
    "wasserstein_sliced": lambda a, b, **kw: metrics.wasserstein_distance(
        a, b, method="sliced", n_projections=20, random_state=0, **kw
    ),
    "wasserstein_sinkhorn": lambda a, b, **kw: metrics.wasserstein_distance(a, b, method="sinkhorn", **kw),
    "mmd": metrics.mmd,
    "spread_ratio": metrics.spread_ratio,
    "across_sample_correlation": metrics.across_sample_correlation,
}


def _metric_call(fn, slot, X):
    if slot == "y_true":
        return lambda: fn(X, GOOD_Y)
    return lambda: fn(GOOD, X)


for mname, fn in PAIR_METRICS.items():
    for slot in ("y_true", "y_pred"):
        for bname, (mutate, expect) in BAD_ARRAYS.items():
            case(f"{mname}-{slot}-{bname}", _metric_call(fn, slot, mutate(GOOD if slot == "y_true" else GOOD_Y)), expect)
        for vname, mutate in VALID_ARRAYS.items():
            if mname == "spread_ratio" and slot == "y_true" and vname == "one_point":
                continue  # undefined ratio: covered below (warns, never silent)
            expect = FINITE
            if mname == "wasserstein_sinkhorn" and vname == "magnitude_1e30":
                expect = finite_or_raises(r"reg", ValueError)  # reg is absolute: too small for 1e30
            case(f"{mname}-{slot}-{vname}", _metric_call(fn, slot, mutate(GOOD if slot == "y_true" else GOOD_Y)), expect)
    case(f"{mname}-n_features_mismatch", lambda fn=fn: fn(GOOD, GOOD_Y[..., :1]), raises(r"features", ValueError))
    case(f"{mname}-n_samples_mismatch", lambda fn=fn: fn(GOOD, GOOD_Y[:2]), raises(r"n_samples|measures", ValueError))
    case(
        f"{mname}-both_1e30",
        lambda fn=fn: fn(GOOD * 1e30, GOOD_Y * 1e30),
        finite_or_raises(r"reg", ValueError) if mname == "wasserstein_sinkhorn" else FINITE,
    )
    W_T = np.ones(GOOD.shape[:2])
    for wname, weights, expect in [
        ("negative", -W_T, raises(r"negative|>= 0", ValueError)),
        ("zero_total", 0 * W_T, raises(r"sums to 0|positive", ValueError)),
        ("nan", np.where(W_T > 0, np.nan, 0), raises(r"nan|finite", ValueError)),
        ("wrong_shape", W_T[:, :2], raises(r"shape", ValueError)),
        ("strings", W_T.astype(str), raises(r"string|numeric", TypeError)),
        ("complex", W_T + 1j, raises(r"complex", TypeError)),
        ("partly_zero", np.c_[np.zeros((3, 1)), W_T[:, 1:]], FINITE),
    ]:
        case(f"{mname}-weights_true-{wname}", lambda fn=fn, w=weights: fn(GOOD, GOOD_Y, weights_true=w), expect)
    if mname != "across_sample_correlation":
        for sname, sw, expect in [
            ("negative", [-1.0, 1.0, 1.0], raises(r"negative", ValueError)),
            ("zero_total", [0.0, 0.0, 0.0], raises(r"sums to 0", ValueError)),
            ("wrong_shape", [1.0, 1.0], raises(r"shape", ValueError)),
            ("nan", [np.nan, 1.0, 1.0], raises(r"nan", ValueError)),
            ("strings", ["a", "b", "c"], raises(r"numeric", TypeError)),
        ]:
            case(f"{mname}-sample_weight-{sname}", lambda fn=fn, sw=sw: fn(GOOD, GOOD_Y, sample_weight=sw), expect)
        case(f"{mname}-multioutput-unknown", lambda fn=fn: fn(GOOD, GOOD_Y, multioutput="mean"), raises(r"multioutput", ValueError))

case("spread_ratio-zero_spread_target-warns", lambda: _warns_and_nan(lambda: metrics.spread_ratio(GOOD[:, :1], GOOD_Y)), FINITE)


def _warns_and_nan(call):
    """An undefined spread ratio is reported loudly: a warning, then NaN."""
    with pytest.warns(UndefinedMetricWarning, match="spread"):
        value = call()
    assert np.isnan(value)
    return 0.0


W = metrics.wasserstein_distance
for pname, call, expect in [
    ("wasserstein-p_below_1", lambda: W(GOOD, GOOD_Y, p=0.5), raises(r"'p' parameter of wasserstein_distance must", ValueError)),
    ("wasserstein-p_string", lambda: W(GOOD, GOOD_Y, p="1"), raises(r"'p' parameter of wasserstein_distance must", TypeError)),
    ("wasserstein-p_nan", lambda: W(GOOD, GOOD_Y, p=np.nan), raises(r"'p' parameter of wasserstein_distance must", ValueError)),
    ("wasserstein-method_unknown", lambda: W(GOOD, GOOD_Y, method="emd"), raises(r"method", ValueError)),
    ("wasserstein-method_type", lambda: W(GOOD, GOOD_Y, method=1), raises(r"method", ValueError)),
    ("wasserstein-n_projections_zero", lambda: W(GOOD, GOOD_Y, method="sliced", n_projections=0), raises(r"n_projections", ValueError)),
    ("wasserstein-n_projections_float", lambda: W(GOOD, GOOD_Y, method="sliced", n_projections=2.5), raises(r"n_projections", TypeError)),
    ("wasserstein-reg_zero", lambda: W(GOOD, GOOD_Y, method="sinkhorn", reg=0), raises(r"reg", ValueError)),
    ("wasserstein-reg_string", lambda: W(GOOD, GOOD_Y, method="sinkhorn", reg="big"), raises(r"reg", TypeError)),
    ("wasserstein-random_state_bad", lambda: W(GOOD, GOOD_Y, method="sliced", random_state="x"), raises(r"'random_state' parameter of wasserstein_distance must", ValueError)),
    ("wasserstein-p2_1e30", lambda: W(GOOD * 1e30, GOOD_Y, p=2), FINITE),
    ("energy-beta_2", lambda: metrics.energy_distance(GOOD, GOOD_Y, beta=2.0), raises(r"beta", ValueError)),
    ("energy-beta_zero", lambda: metrics.energy_distance(GOOD, GOOD_Y, beta=0.0), raises(r"beta", ValueError)),
    ("energy-beta_string", lambda: metrics.energy_distance(GOOD, GOOD_Y, beta="1"), raises(r"beta", TypeError)),
    ("energy-beta_bool", lambda: metrics.energy_distance(GOOD, GOOD_Y, beta=True), raises(r"beta", TypeError)),
    ("mmd-bandwidth_unknown", lambda: metrics.mmd(GOOD, GOOD_Y, bandwidth="scott"), raises(r"bandwidth", ValueError)),
    ("mmd-bandwidth_zero", lambda: metrics.mmd(GOOD, GOOD_Y, bandwidth=0.0), raises(r"bandwidth", ValueError)),
    ("mmd-bandwidth_negative", lambda: metrics.mmd(GOOD, GOOD_Y, bandwidth=-1.0), raises(r"bandwidth", ValueError)),
    ("mmd-bandwidth_list", lambda: metrics.mmd(GOOD, GOOD_Y, bandwidth=[1.0]), raises(r"bandwidth", TypeError)),
    ("across-statistic_unknown", lambda: metrics.across_sample_correlation(GOOD, GOOD_Y, statistic="mean"), raises(r"statistic", ValueError)),
    ("across-two_samples", lambda: metrics.across_sample_correlation(GOOD[:2], GOOD_Y[:2]), raises(r"3 samples", ValueError)),
]:
    case(pname, call, expect)

# attention_ess: one array slot plus its own parameters
ESS = metrics.attention_ess
for bname, (mutate, expect) in BAD_ARRAYS.items():
    case(f"attention_ess-X-{bname}", lambda X=mutate(GOOD): ESS(X, "log", random_state=0), expect)
for vname, mutate in VALID_ARRAYS.items():
    case(f"attention_ess-X-{vname}", lambda X=mutate(GOOD): ESS(X, "log", random_state=0), FINITE)
for kname in ("softmax", "poly", "log", "sigmoid", "softplus"):
    case(f"attention_ess-1e30-{kname}", lambda k=kname: ESS(GOOD * 1e30, k, random_state=0), FINITE)
for pname, call, expect in [
    ("kernel_unknown", lambda: ESS(GOOD, "cauchy"), raises(r"unknown attention kernel", ValueError)),
    ("kernel_type", lambda: ESS(GOOD, 3), raises(r"kernel must", TypeError)),
    ("kernel_params_bad", lambda: ESS(GOOD, "poly", kernel_params={"degree": -1}), raises(r"degree", ValueError)),
    ("kernel_params_unknown", lambda: ESS(GOOD, "log", kernel_params={"degree": 2}), raises(r"unknown parameter", ValueError)),
    ("d_head_zero", lambda: ESS(GOOD, d_head=0), raises(r"d_head", ValueError)),
    ("n_draws_float", lambda: ESS(GOOD, n_draws=1.5), raises(r"n_draws", TypeError)),
    ("projections_shape", lambda: ESS(GOOD, projections=(np.eye(3), np.eye(3))), raises(r"projections", ValueError)),
    ("projections_nan", lambda: ESS(GOOD, projections=(np.full((2, 2), np.nan), np.eye(2))), raises(r"nan", ValueError)),
    ("projections_not_pair", lambda: ESS(GOOD, projections=np.eye(2)), raises(r"pair", ValueError)),
    ("weights_negative", lambda: ESS(GOOD, weights=-np.ones((3, 4))), raises(r"negative", ValueError)),
    ("weights_zero", lambda: ESS(GOOD, weights=np.zeros((3, 4))), raises(r"sums to 0", ValueError)),
    ("weights_shape", lambda: ESS(GOOD, weights=np.ones((3, 5))), raises(r"shape", ValueError)),
]:
    case(f"attention_ess-{pname}", call, expect)


# --------------------------------------------------------------------------- #
# Scorers
# --------------------------------------------------------------------------- #
class _Identity(RegressorMixin, BaseEstimator):
    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.asarray(X, dtype=np.float64) + 0.5


SCORER_NAMES = ("neg_energy_distance", "neg_wasserstein_distance", "neg_sliced_wasserstein_distance", "neg_mmd")
for sname in SCORER_NAMES:
    for bname in ("nan", "posinf", "rank2", "zero_points", "strings", "complex"):
        mutate, expect = BAD_ARRAYS[bname]
        case(f"scorer-{sname}-y-{bname}", lambda s=sname, y=mutate(GOOD): get_scorer(s)(_Identity(), GOOD, y), expect)
    for vname in ("one_point", "float16", "magnitude_1e30"):
        case(
            f"scorer-{sname}-y-{vname}",
            lambda s=sname, y=VALID_ARRAYS[vname](GOOD): get_scorer(s)(_Identity(), GOOD, y),
            FINITE,
        )
    case(f"scorer-{sname}-n_features_mismatch", lambda s=sname: get_scorer(s)(_Identity(), GOOD, GOOD[..., :1]), raises(r"features", ValueError))
for pname, call, expect in [
    ("get_scorer-unknown", lambda: get_scorer("r2"), raises(r"'name' parameter of get_scorer must be a str among", ValueError)),
    ("get_scorer-type", lambda: get_scorer(3), raises(r"'name' parameter of get_scorer must be a str among", ValueError)),
    ("get_scorer-none", lambda: get_scorer(None), raises(r"'name' parameter of get_scorer must be a str among", ValueError)),
    ("make_scorer-unknown", lambda: make_measure_scorer("r2"), raises(r"'metric' parameter of make_measure_scorer must", ValueError)),
    ("make_scorer-type", lambda: make_measure_scorer(3), raises(r"'metric' parameter of make_measure_scorer must", TypeError)),
    ("make_scorer-bad_kwarg", lambda: make_measure_scorer("energy_distance", bogus=1), raises(r"keyword", ValueError)),
    ("make_scorer-bad_p", lambda: make_measure_scorer("wasserstein_distance", p=0.5), raises(r"'p' parameter of wasserstein_distance must", ValueError)),
    ("make_scorer-bad_beta", lambda: make_measure_scorer("energy_distance", beta=3), raises(r"beta", ValueError)),
    ("make_scorer-fixed_clash", lambda: make_measure_scorer("sliced_wasserstein_distance", method="exact"), raises(r"fixes", ValueError)),
    ("make_scorer-valid", lambda: make_measure_scorer("mmd", bandwidth=1.0)(_Identity(), GOOD, GOOD_Y), FINITE),
    ("make_scorer-bad_bandwidth", lambda: make_measure_scorer("mmd", bandwidth="wide"), raises(r"bandwidth", ValueError)),
    ("make_scorer-bad_method", lambda: make_measure_scorer("wasserstein", method="fast"), raises(r"method", ValueError)),
    ("make_scorer-bad_n_jobs", lambda: make_measure_scorer("wasserstein", n_jobs=0), raises(r"n_jobs", ValueError)),
]:
    case(pname, call, expect)


# --------------------------------------------------------------------------- #
# SymlogTransformer
# --------------------------------------------------------------------------- #
def _symlog_fitted():
    return SymlogTransformer().fit(GOOD)


SYMLOG_CALLS = {
    "fit": lambda X: SymlogTransformer().fit(X).transform(GOOD),
    "transform": lambda X: _symlog_fitted().transform(X),
    "inverse_transform": lambda X: _symlog_fitted().inverse_transform(X),
    "fit_transform": lambda X: SymlogTransformer(scale=2.0).fit_transform(X),
}
SYMLOG_BAD = {k: v for k, v in BAD_ARRAYS.items() if k not in ("rank2", "ragged_feature_mismatch", "inhomogeneous_nested")}
SYMLOG_BAD["rank1"] = (lambda X: X.ravel(), raises(r"2d|2-d|dimension", ValueError))
SYMLOG_BAD["rank4"] = (lambda X: X[None], raises(r"2-d|3-d", ValueError))
SYMLOG_BAD["ragged_points"] = (lambda X: [X[0], X[1][:2]], raises(r"ragged", ValueError))
SYMLOG_VALID = {k: v for k, v in VALID_ARRAYS.items() if k != "ragged_list"}
SYMLOG_VALID["table_2d"] = lambda X: X[0]
for mname, call in SYMLOG_CALLS.items():
    for bname, (mutate, expect) in SYMLOG_BAD.items():
        if mname in ("fit", "fit_transform") or bname not in ("zero_features",):
            case(f"symlog-{mname}-{bname}", lambda c=call, X=mutate(GOOD): c(X), expect)
    for vname, mutate in SYMLOG_VALID.items():
        case(f"symlog-{mname}-{vname}", lambda c=call, X=mutate(GOOD): c(X), FINITE)
    if mname in ("transform", "inverse_transform"):
        case(f"symlog-{mname}-n_features_mismatch", lambda c=call: c(np.zeros((3, 4, 3))), raises(r"features", ValueError))
        case(f"symlog-{mname}-unfitted", lambda m=mname: getattr(SymlogTransformer(), m)(GOOD), raises(r"not fitted", NotFittedError))
case("symlog-inverse_transform-huge_saturates", lambda: _symlog_fitted().inverse_transform(GOOD * 1e3), FINITE)
for sname, scale, expect in [
    ("zero", 0.0, raises(r"scale", ValueError)),
    ("negative", -1.0, raises(r"scale", ValueError)),
    ("nan", np.nan, raises(r"scale", ValueError)),
    ("inf", np.inf, raises(r"scale", ValueError)),
    ("string", "1", raises(r"scale", TypeError)),
    ("none", None, raises(r"scale", TypeError)),
    ("tiny", 1e-300, FINITE),
]:
    case(f"symlog-scale-{sname}", lambda s=scale: SymlogTransformer(scale=s).fit_transform(GOOD), expect)


# --------------------------------------------------------------------------- #
# Datasets
# --------------------------------------------------------------------------- #
GENERATORS = {
    "make_matrix_inverse": datasets.make_matrix_inverse,
    "make_sheared_swap": datasets.make_sheared_swap,
    "load_benchmark_matrix_inverse": lambda **kw: datasets.load_benchmark("matrix_inverse", **kw),
    "load_benchmark_sheared_swap": lambda **kw: datasets.load_benchmark("sheared_swap", **kw),
}
SMALL = dict(n_samples=2, n_points=3, random_state=0)
for gname, gen in GENERATORS.items():
    for pname, params, expect in [
        ("n_samples_zero", dict(n_samples=0), raises(r"n_samples", ValueError)),
        ("n_samples_negative", dict(n_samples=-1), raises(r"n_samples", ValueError)),
        ("n_samples_float", dict(n_samples=2.5), raises(r"n_samples", TypeError)),
        ("n_samples_string", dict(n_samples="2"), raises(r"n_samples", TypeError)),
        ("n_points_zero", dict(n_points=0), raises(r"n_points", ValueError)),
        ("n_features_zero", dict(n_features=0), raises(r"n_features", ValueError)),
        ("n_features_bool", dict(n_features=True), raises(r"n_features", TypeError)),
        ("tail_unknown", dict(tail="cauchy"), raises(r"'tail' parameter", ValueError)),
        ("tail_type", dict(tail=None), raises(r"'tail' parameter", ValueError)),
        ("tail_index_zero", dict(tail_index=0.0), raises(r"tail_index", ValueError)),
        ("tail_index_negative", dict(tail_index=-1.5), raises(r"tail_index", ValueError)),
        ("tail_index_nan", dict(tail_index=np.nan), raises(r"tail_index", ValueError)),
        ("tail_index_string", dict(tail_index="1.5"), raises(r"tail_index", TypeError)),
        ("paired_string", dict(paired="yes"), raises(r"paired", TypeError)),
        ("random_state_bad", dict(random_state="seed"), raises(r"seed", ValueError)),
        ("one_point", dict(n_points=1), FINITE),
        ("one_sample", dict(n_samples=1), FINITE),
        ("heavy_pareto", dict(tail="pareto", tail_index=0.5), FINITE),
        ("extreme_tail", dict(tail="pareto", tail_index=0.01, n_points=50), finite_or_raises(r"overflow", ValueError)),
    ]:
        case(f"{gname}-{pname}", lambda g=gen, p=params: g(**{**SMALL, **p}), expect)
for pname, call, expect in [
    ("condition_below_1", lambda: datasets.make_matrix_inverse(**SMALL, condition=0.5), raises(r"condition", ValueError)),
    ("condition_string", lambda: datasets.make_matrix_inverse(**SMALL, condition="4"), raises(r"condition", TypeError)),
    ("condition_inf", lambda: datasets.make_matrix_inverse(**SMALL, condition=np.inf), raises(r"condition", ValueError)),
    ("scale_range_zero", lambda: datasets.make_sheared_swap(**SMALL, scale_range=(0, 1)), raises(r"scale_range", ValueError)),
    ("scale_range_reversed", lambda: datasets.make_sheared_swap(**SMALL, scale_range=(2, 1)), raises(r"scale_range", ValueError)),
    ("scale_range_string", lambda: datasets.make_sheared_swap(**SMALL, scale_range="ab"), raises(r"scale_range", ValueError)),
    ("scale_range_types", lambda: datasets.make_sheared_swap(**SMALL, scale_range=("a", "b")), raises(r"scale_range", TypeError)),
    ("sheared_swap_odd_features", lambda: datasets.make_sheared_swap(**SMALL, n_features=3), raises(r"even", ValueError)),
    ("load_benchmark_unknown", lambda: datasets.load_benchmark("mnist"), raises(r"'name' parameter of load_benchmark", ValueError)),
    ("load_benchmark_type", lambda: datasets.load_benchmark(3), raises(r"'name' parameter of load_benchmark", ValueError)),
    ("load_benchmark_bad_kwarg", lambda: datasets.load_benchmark("matrix_inverse", condtion=2.0), raises(r"valid parameters", TypeError)),
    ("load_benchmark_return_params", lambda: datasets.load_benchmark("matrix_inverse", return_params=True), raises(r"return_params", ValueError)),
    ("load_benchmark_wrong_generator_kwarg", lambda: datasets.load_benchmark("sheared_swap", condition=2.0), raises(r"valid parameters", TypeError)),
]:
    case(f"datasets-{pname}", call, expect)


# --------------------------------------------------------------------------- #
# kernel_attention (and get_kernel)
# --------------------------------------------------------------------------- #
Q, K, V = make_qkv((2, 1, 5, 4))  # module level: the case table below reads them, where no fixture reaches
KA = kernel_attention
for pname, call, expect in [
    ("q_numpy", lambda: KA(Q.numpy(), K, V, "log"), raises(r"torch.tensor", TypeError)),
    ("q_list", lambda: KA(Q.tolist(), K, V, "log"), raises(r"torch.tensor", TypeError)),
    ("q_3d", lambda: KA(Q[0], K, V, "log"), raises(r"4-d", ValueError)),
    ("v_5d", lambda: KA(Q, K, V[None], "log"), raises(r"4-d", ValueError)),
    ("q_int", lambda: KA(Q.long(), K.long(), V.long(), "log"), raises(r"floating", TypeError)),
    ("q_complex", lambda: KA(Q.to(torch.complex64), K, V, "log"), raises(r"floating|dtype", ERR)),
    ("dtype_mismatch", lambda: KA(Q.double(), K, V, "log"), raises(r"dtype", ValueError)),
    ("batch_mismatch", lambda: KA(Q[:1], K, V, "log"), raises(r"agree", ValueError)),
    ("n_keys_mismatch", lambda: KA(Q, K, V[:, :, :3], "log"), raises(r"n_keys|agree", ValueError)),
    ("d_head_mismatch", lambda: KA(Q[..., :3], K, V, "log"), raises(r"d_head", ValueError)),
    ("zero_keys", lambda: KA(Q, K[:, :, :0], V[:, :, :0], "log"), raises(r"0 points", ValueError)),
    ("kernel_unknown", lambda: KA(Q, K, V, "cauchy"), raises(r"unknown attention kernel", ValueError)),
    ("kernel_type", lambda: KA(Q, K, V, 3.0), raises(r"kernel must", TypeError)),
    ("backend_unknown", lambda: KA(Q, K, V, "log", backend="cuda"), raises(r"backend", ValueError)),
    ("sdpa_non_softmax", lambda: KA(Q, K, V, "log", backend="sdpa"), raises(r"sdpa", ValueError)),
    ("chunk_size_zero", lambda: KA(Q, K, V, "log", backend="chunked", chunk_size=0), raises(r"chunk_size", ValueError)),
    ("weights_numpy", lambda: KA(Q, K, V, "log", weights=np.ones((2, 5))), raises(r"torch.tensor", TypeError)),
    ("weights_shape", lambda: KA(Q, K, V, "log", weights=torch.ones(2, 4)), raises(r"shape", ValueError)),
    ("weights_negative", lambda: KA(Q, K, V, "log", weights=-torch.ones(2, 5)), raises(r">= 0", ValueError)),
    ("weights_nan", lambda: KA(Q, K, V, "log", weights=torch.full((2, 5), float("nan"))), raises(r"finite", ValueError)),
    ("weights_zero_total", lambda: KA(Q, K, V, "log", weights=torch.zeros(2, 5)), raises(r"sum to 0", ValueError)),
    ("one_key", lambda: KA(Q, K[:, :, :1], V[:, :, :1], "log"), FINITE),
    ("float16", lambda: KA(*(t.half() for t in (Q, K, V)), "log", backend="naive"), FINITE),
    ("float64", lambda: KA(*(t.double() for t in (Q, K, V)), "sigmoid"), FINITE),
    ("weights_partly_zero", lambda: KA(Q, K, V, "log", weights=torch.tensor([[0.0, 1, 1, 1, 1]] * 2)), FINITE),
    ("get_kernel-poly_degree_zero", lambda: get_kernel("poly", degree=0), raises(r"degree", ValueError)),
    ("get_kernel-poly_degree_string", lambda: get_kernel("poly", degree="2"), raises(r"degree", TypeError)),
    ("get_kernel-unknown_param", lambda: get_kernel("softmax", degree=2), raises(r"unknown parameter", ValueError)),
]:
    case(f"kernel_attention-{pname}", call, expect)
for kname in ("softmax", "poly", "log", "sigmoid", "softplus"):
    # Scores of 1e4 (documented finite range) in float32: finite outputs.
    case(f"kernel_attention-large_scores-{kname}", lambda k=kname: KA(Q * 50, K * 50, V, k), FINITE)

# Non-finite q/k/v: kernel_attention does not validate them (see test_kernel_attention_rejects_non_finite).


# --------------------------------------------------------------------------- #
# MeasureTransformerRegressor
# --------------------------------------------------------------------------- #
# The cases below are built at import time; the estimator they train is the tiny
# network made smaller still (every case fits one), filled in from the shared
# fixture before any test runs.
TINY = {}
_FITTED = {}


@pytest.fixture(scope="module", autouse=True)
def _tiny_estimator(seeded_tiny_params):
    TINY.update(seeded_tiny_params, d_model=4, n_heads=1, dim_feedforward=8, max_epochs=1, batch_size=4)


def _fitted(transform=None):
    if transform not in _FITTED:
        _FITTED[transform] = MeasureTransformerRegressor(**TINY, transform=transform).fit(GOOD, GOOD_Y)
    return _FITTED[transform]


def _half_score(s):
    """A user kernel g(s) = s / 2 (a module-level function, so it pickles)."""
    return 0.5 * s


def _fit(X=GOOD, y=GOOD_Y, **params):
    return lambda: MeasureTransformerRegressor(**{**TINY, **params}).fit(X, y).predict(GOOD)


NAN_GUARD = finite_or_raises(r"symlog", (FloatingPointError, ValueError))
for bname, (mutate, expect) in BAD_ARRAYS.items():
    case(f"estimator-fit-X-{bname}", _fit(X=mutate(GOOD)), expect)
    if bname not in ("ragged_feature_mismatch",):
        case(f"estimator-fit-y-{bname}", _fit(y=mutate(GOOD_Y)), expect)
    case(f"estimator-predict-X-{bname}", lambda X=mutate(GOOD): _fitted().predict(X), expect)
    case(f"estimator-score-y-{bname}", lambda y=mutate(GOOD_Y): _fitted().score(GOOD, y), expect)
for vname, mutate in VALID_ARRAYS.items():
    expect = NAN_GUARD if vname == "magnitude_1e30" else FINITE
    if vname != "ragged_list":
        case(f"estimator-fit-X-{vname}", _fit(X=mutate(GOOD), y=mutate(GOOD_Y)[:, :1] if vname == "one_point" else GOOD_Y), expect)
    case(f"estimator-predict-X-{vname}", lambda X=mutate(GOOD): _fitted().predict(X), expect)
    case(f"estimator-predict_symlog-X-{vname}", lambda X=mutate(GOOD): _fitted("symlog").predict(X), FINITE)
case("estimator-fit_symlog-1e30", _fit(X=GOOD * 1e30, y=GOOD_Y * 1e30, transform="symlog"), FINITE)
case("estimator-fit_symlog-1e300", _fit(X=GOOD * 1e300, y=GOOD_Y * 1e300, transform="symlog"), FINITE)
case("estimator-fit-1e300_without_symlog", _fit(X=GOOD * 1e300), raises(r"float32.*symlog", ValueError))
case("estimator-predict-1e300_without_symlog", lambda: _fitted().predict(GOOD * 1e300), raises(r"float32.*symlog", ValueError))
case("estimator-fit-ragged_list", _fit(X=VALID_ARRAYS["ragged_list"](GOOD), y=VALID_ARRAYS["ragged_list"](GOOD_Y)), FINITE)
case("estimator-fit-n_samples_mismatch", _fit(y=GOOD_Y[:2]), raises(r"measures", ValueError))
case("estimator-fit-mse_points_mismatch", _fit(loss="mse"), raises(r"mse", ValueError))
case("estimator-predict-n_features_mismatch", lambda: _fitted().predict(GOOD[..., :1]), raises(r"features", ValueError))
case("estimator-score-n_features_mismatch", lambda: _fitted().score(GOOD, GOOD_Y[..., :1]), raises(r"features", ValueError))
case("estimator-score-sample_weight_negative", lambda: _fitted().score(GOOD, GOOD_Y, sample_weight=[-1, 1, 1]), raises(r"negative", ValueError))
case("estimator-predict-unfitted", lambda: MeasureTransformerRegressor().predict(GOOD), raises(r"not fitted", NotFittedError))
case("estimator-score-unfitted", lambda: MeasureTransformerRegressor().score(GOOD, GOOD_Y), raises(r"not fitted", NotFittedError))
for pname, params, expect in [
    ("kernel_unknown", dict(kernel="cauchy"), raises(r"kernel", ValueError)),
    ("kernel_type", dict(kernel=3), raises(r"kernel", TypeError)),
    ("kernel_params_type", dict(kernel="poly", kernel_params=[2]), raises(r"kernel_params", TypeError)),
    ("kernel_params_bad", dict(kernel="poly", kernel_params={"degree": -2}), raises(r"degree", ValueError)),
    ("loss_unknown", dict(loss="l2"), raises(r"loss", ValueError)),
    ("loss_params_type", dict(loss_params="x"), raises(r"loss_params", TypeError)),
    ("loss_params_unknown", dict(loss_params={"gamma": 1.0}), raises(r"loss", ERR)),
    ("transform_unknown", dict(transform="log"), raises(r"transform", ValueError)),
    ("transform_type", dict(transform=3), raises(r"transform", TypeError)),
    ("d_model_string", dict(d_model="8"), raises(r"d_model", TypeError)),
    ("d_model_zero", dict(d_model=0), raises(r"d_model", ValueError)),
    ("n_heads_not_dividing", dict(d_model=4, n_heads=3), raises(r"n_heads", ValueError)),
    ("n_layers_float", dict(n_layers=1.5), raises(r"n_layers", TypeError)),
    ("max_epochs_zero", dict(max_epochs=0), raises(r"max_epochs", ValueError)),
    ("batch_size_negative", dict(batch_size=-4), raises(r"batch_size", ValueError)),
    ("lr_negative", dict(lr=-1e-3), raises(r"lr", ValueError)),
    ("lr_string", dict(lr="fast"), raises(r"lr", TypeError)),
    ("lr_nan", dict(lr=np.nan), raises(r"lr", ValueError)),
    ("dropout_one", dict(dropout=1.0), raises(r"dropout", ValueError)),
    ("norm_unknown", dict(norm="mid"), raises(r"norm", ValueError)),
    ("device_unknown", dict(device="tpu"), raises(r"device", ValueError)),
    ("device_type", dict(device=0), raises(r"device", ValueError)),
    ("attention_backend_unknown", dict(attention_backend="fast"), raises(r"attention_backend", ValueError)),
    ("attention_backend_sdpa_log", dict(attention_backend="sdpa", kernel="log"), raises(r"attention_backend='sdpa' cannot run here.*softmax attention only", ValueError)),
    ("attention_backend_fused_callable", dict(attention_backend="fused", kernel=_half_score), raises(r"attention_backend='fused' cannot run here.*built-in kernels", ValueError)),
    ("early_stopping_string", dict(early_stopping="yes"), raises(r"early_stopping", TypeError)),
    ("validation_fraction_one", dict(early_stopping=True, validation_fraction=1.0), raises(r"validation_fraction", ValueError)),
    ("verbose_negative", dict(verbose=-1), raises(r"verbose", ValueError)),
    ("callbacks_type", dict(callbacks="progress"), raises(r"callbacks", TypeError)),
    ("random_state_bad", dict(random_state="seed"), raises(r"seed", ValueError)),
]:
    case(f"estimator-param-{pname}", _fit(**params), expect)


# A torch.device is a device, as in skorch.
case("estimator-param-device_torch_device", _fit(device=torch.device("cpu")), FINITE)
case("estimator-param-device_torch_meta", _fit(device=torch.device("meta")), raises(r"device", ValueError))

# set_params: ``name__key`` only reaches into estimators; dicts, strings and None
# are set whole, and the message says how.
for pname, start, params, pattern in [
    ("kernel_params_none", {}, {"kernel_params__degree": 2}, r"kernel_params is a dict.*set the whole dict"),
    ("kernel_params_dict", {"kernel": "poly", "kernel_params": {"degree": 1}}, {"kernel_params__degree": 2},
     r"kernel_params is a dict.*'degree'"),
    ("loss_params_dict", {"loss": "sliced", "loss_params": {"n_projections": 8}}, {"loss_params__n_projections": 4},
     r"loss_params is a dict"),
    ("transform_string", {"transform": "symlog"}, {"transform__scale": 2.0}, r"transform='symlog' is not an estimator"),
    ("kernel_string", {}, {"kernel__degree": 2}, r"kernel='log' is not an estimator"),
    ("unknown", {}, {"module__d_model": 4}, r"invalid parameter 'module'"),
]:
    case(f"estimator-set_params-{pname}",
         lambda start=start, params=params: MeasureTransformerRegressor(**start).set_params(**params),
         raises(pattern, ValueError))
case("estimator-set_params-nested_estimator",
     lambda: MeasureTransformerRegressor(transform=SymlogTransformer()).set_params(transform__scale=2.0).transform.scale,
     FINITE)


# --------------------------------------------------------------------------- #
# The tests
# --------------------------------------------------------------------------- #
MIN_CASES = 500


def _innermost_file(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1].filename if frames else ""


@pytest.mark.parametrize("name, call, expect", CASES, ids=[c[0] for c in CASES])
def test_bad_input(name, call, expect):
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - classified below
        if expect.kind == "finite":
            raise AssertionError(f"{name}: valid input raised {type(exc).__name__}: {exc}") from exc
        assert isinstance(exc, expect.exc), f"{name}: expected {expect.exc}, got {type(exc).__name__}: {exc}"
        message = str(exc)
        assert re.search(expect.pattern, message, flags=re.IGNORECASE), (
            f"{name}: error message does not name the problem ({expect.pattern!r}): {message!r}"
        )
        origin = _innermost_file(exc).replace("\\", "/")
        assert not any(part in origin for part in _FOREIGN), (
            f"{name}: raw error from library internals ({origin}) instead of our validation: {message!r}"
        )
        return
    assert expect.kind != "raise", f"{name}: expected {expect.exc} matching {expect.pattern!r}, got a result"
    assert _finite(result), f"{name}: returned non-finite values silently: {result!r}"


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_kernel_attention_rejects_non_finite(which, qkv):
    q, k, v = qkv((2, 1, 5, 4))
    {"q": q, "k": k, "v": v}[which][0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"(?i)nan|finite"):
        kernel_attention(q, k, v, "log")


def test_case_count():
    by_entry = collections.Counter(name.split("-")[0] for name, _, _ in CASES)
    kinds = collections.Counter(expect.kind for _, _, expect in CASES)
    summary = ", ".join(f"{k}: {n}" for k, n in sorted(by_entry.items()))
    print(f"\n{len(CASES)} bad-input cases ({dict(kinds)}); by entry point: {summary}")
    assert len(CASES) >= MIN_CASES
    assert len({name for name, _, _ in CASES}) == len(CASES), "case ids must be unique"


def _with_bad_value(A, value, at=(2, 1, 1)):
    A = np.array(A, dtype=np.float64)
    A[at] = value
    return A


@pytest.mark.parametrize("value, word", [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "-infinity")])
@pytest.mark.parametrize(
    "entry",
    [
        lambda bad: MeasureTransformerRegressor(**TINY).fit(bad, GOOD_Y),
        lambda bad: MeasureTransformerRegressor(**TINY).fit(GOOD, bad[:, :, :2]),
        lambda bad: _fitted().predict(bad),
        lambda bad: metrics.energy_distance(bad, GOOD),
        lambda bad: MeasureTransformerRegressor(**TINY).fit([bad[0], bad[1][:3], bad[2]], GOOD_Y),
    ],
    ids=["fit-X", "fit-y", "predict", "metric", "ragged"],
)
def test_a_non_finite_value_is_located(entry, value, word):
    """Every entry point says which measure, point and feature hold the first
    non-finite value (not sklearn's bare 'Input X contains NaN')."""
    with pytest.raises(ValueError, match=rf"contains {re.escape(word)} at measure 2, point 1, feature 1"):
        entry(_with_bad_value(GOOD, value))


# --------------------------------------------------------------------------- #
# weights, n_jobs and projections
# --------------------------------------------------------------------------- #
def test_ragged_weights_follow_ragged_measures():
    x = [np.array([[0.0], [1.0], [2.0]]), np.array([[5.0], [6.0]])]
    y = [np.array([[0.0]]), np.array([[5.0]])]
    weights = [np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0])]
    assert wasserstein_distance(x, y, weights_true=weights) == 0.0
    with pytest.raises(ValueError, match=r"weights_true\[1\].*2 points"):
        wasserstein_distance(x, y, weights_true=[np.ones(3), np.ones(1)])


def test_attention_ess_rejects_empty_projections(clouds):
    x, _ = clouds
    with pytest.raises(ValueError, match="d_head"):
        attention_ess(x, projections=(np.zeros((2, 0)), np.zeros((2, 0))))


@pytest.mark.parametrize("n_jobs", [0, 1.5, "two", True])
def test_invalid_n_jobs(clouds, n_jobs):
    x, y = clouds
    with pytest.raises(ValueError, match="n_jobs"):
        wasserstein_distance(x, y, n_jobs=n_jobs)
