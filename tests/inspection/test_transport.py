"""The learnt map at new points: MeasureTransformer.transport and MeasureTransformerRegressor.transport."""

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn import transformer as transformer_module
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.preprocessing import SymlogTransformer
from sklearn_measattn.transformer import MeasureTransformer

# Every backend that runs on the CPU. sdpa computes softmax attention only. flex is
# the CUDA backend; on the CPU (forward only) torch 2.13's compiler fails to build
# its kernel for some query counts that differ from the key count (an undeclared
# `cur_qSplitSize2` in the generated C++, depending on the sizes and thread count),
# which is what transport asks for, so it is not among them.
CPU_BACKENDS = [("naive", "log"), ("chunked", "log"), ("fused", "sigmoid"), ("sdpa", "softmax")]
TRAINABLE_CPU_BACKENDS = [case for case in CPU_BACKENDS if case[0] != "flex"]
ATOL = 2e-5  # float32 rounding of a different grouping of the same sums


@pytest.fixture(scope="module")
def data():
    """Ten measure pairs of 24 points (the ragged cuts below need these sizes), not the shared twelve of 16."""
    X, y = make_matrix_inverse(n_samples=10, n_points=24, tail="student_t", tail_index=2.0, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def fitted(seeded_tiny_params):
    """``fitted(backend, kernel, data, transform=None)``: the tiny regressor, two blocks deep, trained
    one epoch with that backend, kernel and transform (once per module, then reused)."""
    params = {**seeded_tiny_params, "n_layers": 2, "max_epochs": 1, "batch_size": 4, "device": "cpu"}
    cache = {}

    def fit(backend, kernel, data, transform=None):
        key = (backend, kernel, None if transform is None else repr(transform))
        if key not in cache:
            X, y = data
            cache[key] = MeasureTransformerRegressor(
                **params, kernel=kernel, transform=transform, attention_backend=backend
            ).fit(X, y)
        return cache[key]

    return fit


def ragged(X, lengths):
    return [X[i, :n] for i, n in enumerate(lengths)]


# ------------------------------------------------------------ the module
@pytest.mark.slow
@pytest.mark.parametrize("backend, kernel", CPU_BACKENDS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_module_transport_identities(backend, kernel, norm_first):
    model = MeasureTransformer(2, 3, d_model=8, n_heads=2, n_layers=2, kernel=kernel, norm_first=norm_first,
                               attention_backend=backend, random_state=0).eval()
    generator = torch.Generator().manual_seed(1)
    X, Z = torch.randn(3, 20, 2, generator=generator), torch.randn(3, 40, 2, generator=generator)
    weights = torch.ones(3, 20)
    weights[1, 12:] = 0.0  # a ragged context: padding has weight 0
    with torch.no_grad():
        torch.testing.assert_close(model.transport(X, X, weights), model(X, weights), atol=ATOL, rtol=1e-5)
        torch.testing.assert_close(model.transport(X, Z, weights)[:, :7], model.transport(X, Z[:, :7], weights),
                                   atol=ATOL, rtol=1e-5)
        # The padding of the context is not there: deleting it changes nothing.
        torch.testing.assert_close(model.transport(X[1:2, :12], Z[1:2]), model.transport(X, Z, weights)[1:2],
                                   atol=ATOL, rtol=1e-5)


def test_module_transport_attends_to_the_context_only(monkeypatch):
    """The attention sees the N context points as keys and N + M queries: memory O(N + M), not O((N + M)^2)."""
    seen = []
    original = transformer_module.run_attention

    def recording(q, k, v, *args, **kwargs):
        seen.append((q.shape[2], k.shape[2], v.shape[2]))
        return original(q, k, v, *args, **kwargs)

    monkeypatch.setattr(transformer_module, "run_attention", recording)
    model = MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=3, kernel="log", attention_backend="chunked",
                               random_state=0)
    with torch.no_grad():
        out = model.transport(torch.randn(1, 16, 2), torch.randn(1, 5000, 2))
    assert out.shape == (1, 5000, 2)
    assert seen == [(5016, 16, 16)] * 3


def test_module_transport_refuses_mismatched_points():
    model = MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=1, random_state=0)
    with pytest.raises(ValueError, match="Z must be 3-D"):
        model.transport(torch.randn(2, 5, 2), torch.randn(3, 5, 2))
    with pytest.raises(ValueError, match="Z must be 3-D"):
        model.transport(torch.randn(2, 5, 2), torch.randn(2, 5, 3))


# ------------------------------------------------------------ the estimator
@pytest.mark.slow
@pytest.mark.parametrize("backend, kernel", TRAINABLE_CPU_BACKENDS)
def test_transport_of_the_context_is_predict(backend, kernel, data, fitted):
    X, _ = data
    model = fitted(backend, kernel, data)
    np.testing.assert_allclose(model.transport(X, X), model.predict(X), atol=ATOL, rtol=1e-5)
    X_ragged = ragged(X, [24, 9, 17, 24, 3, 11, 24, 20, 8, 1])
    for got, expected in zip(model.transport(X_ragged, X_ragged), model.predict(X_ragged), strict=True):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=ATOL, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("backend, kernel", TRAINABLE_CPU_BACKENDS)
def test_query_points_do_not_influence_each_other(backend, kernel, data, fitted):
    X, _ = data
    model = fitted(backend, kernel, data)
    Z = np.random.default_rng(0).standard_normal((len(X), 60, 2)) * 3
    images = model.transport(X, Z)
    assert images.shape == (len(X), 60, 2)
    np.testing.assert_allclose(images[:, :7], model.transport(X, Z[:, :7]), atol=ATOL, rtol=1e-5)
    np.testing.assert_allclose(images[:, 30:31], model.transport(X, Z[:, 30:31]), atol=ATOL, rtol=1e-5)
    # Ragged query sets and a ragged context give the same images as one at a time.
    lengths = [60, 1, 33, 5, 60, 12, 2, 40, 7, 19]
    X_ragged = ragged(X, [24, 9, 17, 24, 3, 11, 24, 20, 8, 1])
    images_ragged = model.transport(X_ragged, ragged(Z, lengths))
    assert [m.shape for m in images_ragged] == [(n, 2) for n in lengths]
    for i, n in enumerate(lengths):
        alone = model.transport(X_ragged[i][None], Z[i : i + 1, :n])[0]
        np.testing.assert_allclose(images_ragged[i], alone, atol=ATOL, rtol=1e-5)


@pytest.mark.slow
def test_more_queries_than_context_points_and_batches(data, fitted):
    X, _ = data
    model = fitted("auto", "log", data)
    Z = np.random.default_rng(1).standard_normal((len(X), 500, 2))
    np.testing.assert_allclose(model.transport(X[:, :16], Z), model.transport(X[:, :16], Z, batch_size=3),
                               atol=ATOL, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("transform", ["symlog", StandardScaler()], ids=["symlog", "scaler"])
def test_fitted_transform_is_applied_to_the_points_and_inverted(transform, data, fitted):
    X, _ = data
    model = fitted("chunked", "log", data, transform=transform)
    Z = np.random.default_rng(2).standard_normal((len(X), 30, 2)) * 10
    module = model.net_.module_.eval()

    def forward(points):
        return model.transform_X_.transform(points.reshape(-1, 2)).reshape(points.shape)

    with torch.no_grad():
        raw = module.transport(torch.as_tensor(forward(X), dtype=torch.float32),
                               torch.as_tensor(forward(Z), dtype=torch.float32)).numpy().astype(np.float64)
    expected = model.transform_y_.inverse_transform(raw.reshape(-1, 2)).reshape(raw.shape)
    np.testing.assert_allclose(model.transport(X, Z), expected, rtol=1e-6, atol=1e-9)
    if transform == "symlog":
        assert isinstance(model.transform_X_, SymlogTransformer)


@pytest.mark.parametrize(
    "make_points, match",
    [
        (lambda X: X[0], "points must be 3-D"),
        (lambda X: X[..., :1], "points has 1 features per point, but the estimator was fitted with 2"),
        (lambda X: np.where(np.arange(X.shape[1])[None, :, None] == 3, np.nan, X), "points contains NaN at measure 0, point 3"),
        (lambda X: X[:4], "X has 10 measures but points has 4 sets of query points"),
        (lambda X: [x for x in X[:3]], "X has 10 measures but points has 3"),
        (lambda X: [X[0], X[1, :, :1]], "different numbers of features"),
        (lambda X: X[:, :0], "points has 0 points per measure"),
        (lambda X: np.full(X.shape, "a"), "strings"),
    ],
    ids=["rank", "features", "nan", "measures", "ragged-measures", "ragged-features", "empty", "strings"],
)
def test_bad_points_are_refused_before_any_work(make_points, match, data, monkeypatch, fitted):
    X, _ = data
    model = fitted("chunked", "log", data)

    def no_work(*args, **kwargs):
        raise AssertionError("the network ran before the input was checked")

    monkeypatch.setattr(model.net_.module_, "transport", no_work)
    with pytest.raises((ValueError, TypeError), match=match):
        model.transport(X, make_points(X))


def test_bad_context_and_arguments_are_refused(data, fitted):
    X, _ = data
    model = fitted("chunked", "log", data)
    with pytest.raises(ValueError, match="X has 3 features per point"):
        model.transport(np.concatenate([X, X[..., :1]], axis=-1), X)
    with pytest.raises(ValueError, match="X contains infinity"):
        model.transport(np.where(X > 1, np.inf, X), X)
    with pytest.raises(ValueError, match=r"'batch_size' parameter of MeasureTransformerRegressor.transport must be"):
        model.transport(X, X, batch_size=0)
    with pytest.raises(NotFittedError):
        MeasureTransformerRegressor().transport(X, X)
