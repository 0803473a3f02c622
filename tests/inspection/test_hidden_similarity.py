"""The depth face of collapse: mean pairwise cosine similarity of hidden states per block."""

import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.metrics import collapse_diagnostics


@pytest.fixture(scope="module")
def deep_params(seeded_tiny_params):
    """The seeded tiny regressor three blocks deep (a similarity per block), one epoch of batches of four."""
    return {**seeded_tiny_params, "n_layers": 3, "batch_size": 4, "max_epochs": 1}


@pytest.fixture(scope="module")
def fitted(deep_params):
    X, y = make_matrix_inverse(n_samples=8, n_points=12, random_state=0)
    return MeasureTransformerRegressor(**deep_params).fit(X, y), X, y


def _direct_similarity(model, measure):
    """Mean off-diagonal cosine similarity, from the module's layers run by hand, one measure."""
    module = model.net_.module_
    with torch.no_grad():
        h = module.embedding(torch.as_tensor(measure[None], dtype=torch.float32))
        states = [h]
        for block in module.blocks:
            h = block(h, None)
            states.append(h)
    out = []
    for state in states:
        points = state[0].double()
        cos = torch.nn.functional.cosine_similarity(points[:, None, :], points[None, :, :], dim=-1)
        n = points.shape[0]
        out.append(float((cos.sum() - cos.diagonal().sum()) / (n * (n - 1))))
    return np.array(out)


@pytest.mark.slow
def test_hidden_similarity_matches_a_direct_computation_from_the_module(fitted, deep_params):
    model, X, _ = fitted
    similarity = model.hidden_similarity(X)
    assert similarity.shape == (8, deep_params["n_layers"] + 1)
    for i in range(3):
        np.testing.assert_allclose(similarity[i], _direct_similarity(model, X[i]), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_hidden_similarity_of_a_ragged_batch_ignores_the_padding(fitted):
    model, X, _ = fitted
    ragged = [X[0][:5], X[1]]
    similarity = model.hidden_similarity(ragged, batch_size=2)
    np.testing.assert_allclose(similarity[0], _direct_similarity(model, X[0][:5]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(similarity[1], _direct_similarity(model, X[1]), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_hidden_similarity_is_one_for_a_measure_of_identical_points(fitted):
    model, X, _ = fitted
    same = np.repeat(X[:1, :1], 6, axis=1)
    np.testing.assert_allclose(model.hidden_similarity(same), 1.0, atol=1e-6)
    assert np.isnan(model.hidden_similarity(X[:1, :1])).all()  # one point: no pair


def test_hidden_similarity_checks_its_input(fitted):
    model, X, _ = fitted
    with pytest.raises(ValueError, match="feature"):
        model.hidden_similarity(X[..., :1])
    with pytest.raises(ValueError, match="batch_size"):
        model.hidden_similarity(X, batch_size=0)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        MeasureTransformerRegressor().hidden_similarity(X)


@pytest.mark.slow
def test_collapse_diagnostics_reports_the_depth_face_outside_the_verdict(fitted):
    model, X, y = fitted
    report = collapse_diagnostics(model, X, y, max_queries=None)
    expected = np.median(model.hidden_similarity(X), axis=0)
    np.testing.assert_allclose(report["hidden_similarity"], expected)
    assert report["hidden_similarity_last"] == pytest.approx(expected[-1])
    assert set(report) >= {"attention", "within", "across", "collapsed"}
    # the verdict is the attention face OR the within-ensemble face, whatever the depth face says
    faces = [f for f in (report["attention"], report["within"]) if f is not None]
    assert report["collapsed"] == any(faces)
    no_model = collapse_diagnostics(None, X, y, y_pred=y)
    assert no_model["hidden_similarity"] == [] and np.isnan(no_model["hidden_similarity_last"])


def test_trained_diagnostics_name_the_method_of_a_bad_argument(fitted):
    model, X, _ = fitted
    for call, name, method in [
        (lambda: model.hidden_similarity(X, batch_size=0), "batch_size", "hidden_similarity"),
        (lambda: model.attention_weights(X, batch_size=1.5), "batch_size", "attention_weights"),
        (lambda: model.attention_ess(X, max_queries=0), "max_queries", "attention_ess"),
    ]:
        with pytest.raises(
            InvalidParameterError, match=rf"The '{name}' parameter of MeasureTransformerRegressor\.{method} must be .*\[1, inf\)"
        ):
            call()
