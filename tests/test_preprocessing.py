import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_measattn.preprocessing import SymlogTransformer, inverse_symlog, symlog


@parametrize_with_checks([SymlogTransformer(scale=0.3)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _extreme_values(rng, shape):
    mags = 10.0 ** rng.uniform(-300, 30, size=shape)
    return np.where(rng.random(shape) < 0.5, -mags, mags)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 250.0])
@pytest.mark.parametrize("shape", [(7, 3), (4, 11, 2)])
def test_round_trip_exact(shape, scale):
    rng = np.random.default_rng(0)
    X = _extreme_values(rng, shape)
    X.flat[0] = 0.0
    X.flat[1] = 1e30
    X.flat[2] = -1e-300
    st_ = SymlogTransformer(scale=scale).fit(X)
    Xt = st_.transform(X)
    assert Xt.shape == X.shape
    assert np.all(np.isfinite(Xt))
    assert_allclose(st_.inverse_transform(Xt), X, rtol=1e-12, atol=0)
    assert_array_equal(np.sign(Xt), np.sign(X))


def test_known_values_and_shape_3d():
    X = np.array([[[np.e - 1.0, -(np.e**2 - 1.0)], [0.0, 1e-8]]])
    Xt = SymlogTransformer().fit_transform(X)
    assert_allclose(Xt, [[[1.0, -2.0], [0.0, np.log1p(1e-8)]]], rtol=1e-12)
    st_ = SymlogTransformer(scale=2.0).fit(X)
    assert_allclose(st_.transform(X), np.sign(X) * np.log1p(np.abs(X) / 2.0))
    assert st_.n_features_in_ == 2


def test_float32_preserved_3d():
    X = np.random.default_rng(1).standard_t(2, size=(3, 5, 2)).astype(np.float32)
    st_ = SymlogTransformer().fit(X)
    Xt = st_.transform(X)
    assert Xt.dtype == np.float32
    assert st_.inverse_transform(Xt).dtype == np.float32
    assert_allclose(st_.inverse_transform(Xt), X, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int64, np.float16])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 1)])
def test_other_dtypes_become_float(dtype, shape):
    Xt = SymlogTransformer().fit_transform(np.ones(shape, dtype=dtype))
    assert Xt.dtype in (np.float32, np.float64)
    assert_allclose(Xt, np.log(2.0), rtol=1e-6)


def test_inverse_saturates_instead_of_overflowing():
    st_ = SymlogTransformer().fit(np.zeros((1, 1)))
    out = st_.inverse_transform(np.array([[800.0], [-800.0]]))
    assert np.all(np.isfinite(out))
    assert_array_equal(out.ravel(), [np.finfo(np.float64).max, -np.finfo(np.float64).max])
    # |x| / scale overflowing in transform is handled too
    big = np.array([[1e308]])
    assert_allclose(symlog(big, 1e-10), np.log(1e308) + np.log(1e10), rtol=1e-12)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    X=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=5),
        elements=st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
    ),
    scale=st.floats(1e-6, 1e6),
)
def test_round_trip_property(X, scale):
    Xt = symlog(X, scale)
    assert np.all(np.isfinite(Xt))
    assert_allclose(inverse_symlog(Xt, scale), X, rtol=1e-11, atol=1e-300)
    st_ = SymlogTransformer(scale=scale).fit(X)
    assert_allclose(st_.transform(X), Xt, rtol=0, atol=0)


def test_pipeline_with_regressor():
    rng = np.random.default_rng(0)
    X = rng.standard_t(1.5, size=(60, 3))
    y = symlog(X) @ np.array([1.0, -2.0, 0.5])
    pipe = make_pipeline(SymlogTransformer(), Ridge(alpha=1e-8)).fit(X, y)
    assert pipe.score(X, y) > 0.999
    assert_array_equal(pipe[:-1].get_feature_names_out(), ["x0", "x1", "x2"])
    cloned = clone(pipe).set_params(symlogtransformer__scale=2.0).fit(X, y)
    assert cloned[0].scale == 2.0


def test_get_feature_names_out():
    X = np.zeros((2, 3))
    st_ = SymlogTransformer().fit(X)
    assert_array_equal(st_.get_feature_names_out(), ["x0", "x1", "x2"])
    assert_array_equal(st_.get_feature_names_out(["a", "b", "c"]), ["a", "b", "c"])
    st3 = SymlogTransformer().fit(np.zeros((2, 4, 3)))
    assert_array_equal(st3.get_feature_names_out(), ["x0", "x1", "x2"])


def test_feature_names_from_dataframe():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"u": [1.0, -2.0], "v": [3.0, 4.0]})
    st_ = SymlogTransformer().fit(df)
    assert_array_equal(st_.feature_names_in_, ["u", "v"])
    assert_array_equal(st_.get_feature_names_out(), ["u", "v"])
    # refitting on a 3-D array forgets the names
    st_.fit(np.zeros((1, 2, 2)))
    assert not hasattr(st_, "feature_names_in_")


@pytest.mark.parametrize("scale", [0, -1.0, np.inf, np.nan])
def test_invalid_scale_value(scale):
    with pytest.raises(ValueError, match="scale"):
        SymlogTransformer(scale=scale).fit(np.ones((2, 2)))


@pytest.mark.parametrize("scale", ["1", None, True])
def test_invalid_scale_type(scale):
    with pytest.raises(TypeError, match="scale"):
        SymlogTransformer(scale=scale).fit(np.ones((2, 2)))


@pytest.mark.parametrize("shape", [(3, 2), (2, 3, 2)])
def test_nan_and_inf_rejected(shape):
    X = np.ones(shape)
    X.flat[1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SymlogTransformer().fit(X)
    st_ = SymlogTransformer().fit(np.ones(shape))
    X.flat[1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        st_.transform(X)


@pytest.mark.parametrize("method", ["transform", "inverse_transform"])
def test_feature_mismatch(method):
    st2 = SymlogTransformer().fit(np.ones((2, 3)))
    with pytest.raises(ValueError, match="X has 2 features, but SymlogTransformer is expecting 3"):
        getattr(st2, method)(np.ones((2, 2)))
    st3 = SymlogTransformer().fit(np.ones((2, 5, 3)))
    with pytest.raises(ValueError, match="X has 4 features, but SymlogTransformer is expecting 3"):
        getattr(st3, method)(np.ones((2, 5, 4)))
    # the number of points and samples may change freely
    assert getattr(st3, method)(np.ones((7, 1, 3))).shape == (7, 1, 3)
    assert getattr(st3, method)(np.ones((7, 3))).shape == (7, 3)


@pytest.mark.parametrize("method", ["transform", "inverse_transform"])
def test_not_fitted(method):
    with pytest.raises(NotFittedError):
        getattr(SymlogTransformer(), method)(np.ones((2, 2)))


def test_bad_rank_and_ragged():
    with pytest.raises(ValueError, match="4-D"):
        SymlogTransformer().fit(np.ones((1, 2, 3, 4)))
    with pytest.raises(ValueError, match="2D array"):
        SymlogTransformer().fit(np.ones(3))
    with pytest.raises(ValueError, match="ragged"):
        SymlogTransformer().fit([np.ones((2, 2)), np.ones((3, 2))])
    with pytest.raises(ValueError, match="0 points"):
        SymlogTransformer().fit(np.ones((2, 0, 2)))


def test_does_not_modify_input():
    X = np.array([[[1.0, -5.0]]])
    X_copy = X.copy()
    st_ = SymlogTransformer().fit(X)
    st_.transform(X)
    st_.inverse_transform(X)
    assert_array_equal(X, X_copy)


# --------------------------------------------------------------------------- #
# scales at the ends of the float range
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("scale", [1e-50, 1e-300, 1e40])
def test_symlog_scale_outside_float32_stays_finite(scale):
    X = np.array([[0.0, 1.0], [3e38, -2.0]], dtype=np.float32)
    transformer = SymlogTransformer(scale=scale).fit(X)
    Z = transformer.transform(X)
    assert Z.dtype == np.float32 and np.all(np.isfinite(Z)) and np.all((Z == 0) == (X == 0))
    back = transformer.inverse_transform(Z)
    assert np.all(np.isfinite(back))
    np.testing.assert_allclose(back, X, rtol=1e-4)


def test_symlog_scale_that_loses_the_data_raises():
    X = np.array([[1.0, -2.0]], dtype=np.float32)
    with pytest.raises(ValueError, match="maps nonzero values of X"):
        SymlogTransformer(scale=1e50).fit_transform(X)
