"""context_size: training on fresh random subsamples of each measure, predicting every point against one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError
from skorch.callbacks import Callback

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn._training._context import ContextSubsample, subsampled_context
from sklearn_measattn._training._streams import RandomStreams
from sklearn_measattn.datasets import make_matrix_inverse


@pytest.fixture(scope="module")
def large():
    return make_matrix_inverse(n_samples=10, n_points=96, tail="pareto", tail_index=0.7, random_state=0)


def _model(**params):
    base = {"d_model": 8, "n_heads": 2, "n_layers": 1, "dim_feedforward": 16, "max_epochs": 2, "batch_size": 4,
            "random_state": 0, "device": "cpu", "transform": "symlog"}
    return MeasureTransformerRegressor(**{**base, **params})


class _SeenSizes(Callback):
    """Records the shape of every batch the network trains on."""

    def __init__(self):
        self.sizes = []

    def on_batch_begin(self, net, batch=None, training=None, **kwargs):
        if training:
            self.sizes.append(tuple(batch[0]["X"].shape[:2]))


def test_training_sees_fresh_subsamples_of_context_size_points(large):
    X, y = large
    seen = _SeenSizes()
    _model(context_size=24, callbacks=[seen]).fit(X, y)
    assert seen.sizes and all(points == 24 for _, points in seen.sizes)
    assert sum(batch for batch, _ in seen.sizes) == 2 * len(X)  # every measure, every epoch


def test_collate_draws_fresh_points_keeps_weights_and_pairs_for_mse():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 2)).astype(np.float32)
    weights = np.r_[rng.uniform(0.5, 1.5, 30), np.zeros(20)].astype(np.float32)  # 30 real points, 20 padding
    samples = [({"X": x, "weights": weights}, 2 * x), ({"X": x[:8], "weights": np.ones(8, np.float32)}, 2 * x[:8])]
    collate = ContextSubsample(10, seed=0, paired=True)
    first, y_first = collate(samples)
    second, _ = collate(samples)
    assert first["X"].shape == (2, 10, 2) and y_first.shape == (2, 10, 2)
    torch.testing.assert_close(y_first, 2 * first["X"])  # paired: the target keeps the same points
    real = first["weights"][0] > 0
    assert bool(real.all())  # drawn from the 30 real points only
    chosen = [int(np.flatnonzero((x == row.numpy()).all(axis=1))[0]) for row in first["X"][0]]
    assert max(chosen) < 30 and len(set(chosen)) == 10
    np.testing.assert_allclose(first["weights"][0].numpy(), weights[chosen])
    assert first["weights"][1, 8:].sum() == 0 and first["weights"][1, :8].sum() == 8  # small measure: whole, padded
    assert not torch.equal(first["X"][0], second["X"][0])  # fresh at every step
    fixed = ContextSubsample(10, seed=0, fresh=False)
    torch.testing.assert_close(fixed(samples)[0]["X"], fixed(samples)[0]["X"])


def test_predict_gives_every_point_an_image_against_one_fixed_subsample(large):
    X, y = large
    model = _model(context_size=24).fit(X, y)
    predicted = model.predict(X)
    assert predicted.shape == y.shape and np.isfinite(predicted).all()
    np.testing.assert_array_equal(model.predict(X), predicted)  # the same context at every call
    context, weights = subsampled_context(model.transform_X_.transform(X.reshape(-1, 2)).reshape(X.shape), None, 24,
                                          seed=RandomStreams(model.net_.loader_seed).seed_of("inference_context"))
    assert weights is None and context.shape == (10, 24, 2)
    # Each point's image is the whole-measure map of the subsample, evaluated at that point.
    whole = model.set_params(context_size=None)
    subsample = whole.transform_X_.inverse_transform(context.reshape(-1, 2)).reshape(context.shape)
    np.testing.assert_allclose(whole.transport(subsample, X), predicted, rtol=1e-5, atol=1e-6)
    model.set_params(context_size=24)
    Z = np.random.default_rng(1).standard_normal((10, 7, 2))
    np.testing.assert_allclose(model.transport(X, Z), whole.set_params(context_size=None).transport(subsample, Z),
                               rtol=1e-5, atol=1e-6)


def test_a_context_at_least_the_measure_changes_nothing(large):
    X, y = large
    np.testing.assert_array_equal(_model(context_size=96).fit(X, y).predict(X), _model().fit(X, y).predict(X))


def test_seeded_by_random_state(large):
    X, y = large
    a, b = _model(context_size=16).fit(X, y).predict(X), _model(context_size=16).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, _model(context_size=16, random_state=1).fit(X, y).predict(X))


def test_ragged_and_weighted_measures_keep_working(large):
    X, y = large
    ragged_X, ragged_y = [x[: 10 + 9 * i] for i, x in enumerate(X)], [t[: 20 + i] for i, t in enumerate(y)]
    model = _model(context_size=16, early_stopping=True, validation_fraction=0.3).fit(ragged_X, ragged_y)
    predicted = model.predict(ragged_X)
    assert [len(p) for p in predicted] == [len(x) for x in ragged_X]
    assert all(np.isfinite(p).all() for p in predicted)
    assert "valid_loss" in model.history_[-1]
    for small, whole in zip(predicted[:1], model.set_params(context_size=None).predict(ragged_X[:1])):
        np.testing.assert_allclose(small, whole, rtol=1e-5, atol=1e-6)  # 10 points: used whole


@pytest.mark.parametrize("bad", [0, -3, 2.5, "all"])
def test_bad_context_size_is_refused_before_training(bad, large):
    with pytest.raises(InvalidParameterError, match="context_size"):
        _model(context_size=bad).fit(*large)


def test_a_model_trained_on_subsamples_predicts_on_whole_measures_without_context_size(large):
    X, y = large
    model = _model(context_size=24).fit(X, y)
    whole = model.set_params(context_size=None).predict(X)
    assert whole.shape == y.shape  # the training loaders' subsampling does not reach predict
    np.testing.assert_allclose(whole, model.transport(X, X), rtol=1e-5, atol=1e-6)


def test_measures_with_many_query_points_go_through_in_fewer_per_pass(large, monkeypatch):
    import sklearn_measattn.inspection._transport as transport
    from sklearn_measattn._training import FittedNetwork

    X, y = large
    model = _model(context_size=24).fit(X, y)
    expected = model.predict(X)
    seen = []
    real_batches = FittedNetwork.batches

    def recording(network, batch_size, *arrays):
        seen.append(batch_size)
        return real_batches(network, batch_size, *arrays)

    monkeypatch.setattr(transport, "QUERY_POINTS_PER_PASS", 200)  # 2 measures of 96 points per pass
    monkeypatch.setattr(FittedNetwork, "batches", recording)
    np.testing.assert_array_equal(model.predict(X), expected)
    assert seen == [2]
    np.testing.assert_array_equal(model.transport(X, X, batch_size=10), expected)
    assert seen == [2, 10]  # an explicit batch_size is kept
