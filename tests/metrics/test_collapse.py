"""Collapse diagnostics of trained models, scoring in symlog space, and softmax on raw heavy tails."""

import math

import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.losses import MeasureLoss
from sklearn_measattn.metrics import (
    ATTENTION_ESS_THRESHOLD,
    collapse_diagnostics,
    energy_distance,
    get_scorer,
    learned_verdict,
    make_measure_scorer,
    reference_predictions,
    to_space,
)
from sklearn_measattn.preprocessing import symlog
from sklearn_measattn.transformer import MeasureTransformer


@pytest.fixture(scope="module")
def small_params(tiny_network):
    """The tiny network twice as wide and deep (room to collapse or not), batches of eight, seeded."""
    return {**tiny_network, "d_model": 16, "n_layers": 2, "dim_feedforward": 32, "batch_size": 8, "random_state": 0}


@pytest.fixture(scope="module")
def pareto():
    return make_matrix_inverse(n_samples=16, n_points=64, tail="pareto", tail_index=0.7, random_state=0)


@pytest.fixture(scope="module")
def fitted(pareto, small_params):
    X, y = pareto
    return {
        kernel: MeasureTransformerRegressor(kernel=kernel, max_epochs=2, **small_params).fit(X, y)
        for kernel in ("softmax", "log")
    }


def _direct_weights(model, X, layer):
    """Attention weights recomputed by hand from the module's parameters (float64)."""
    module = model.net_.module_
    h = torch.as_tensor(X, dtype=torch.float32)
    with torch.no_grad():
        h = module.embedding(h)
        for block in module.blocks[:layer]:
            h = block(h, None)
        attention = module.blocks[layer].attention
        d_model = h.shape[-1]
        d_head = d_model // attention.n_heads
        W, b = attention.in_proj.weight.double(), attention.in_proj.bias.double()
        q = h.double() @ W[:d_model].T + b[:d_model]
        k = h.double() @ W[d_model : 2 * d_model].T + b[d_model : 2 * d_model]
        q = q.view(*h.shape[:2], attention.n_heads, d_head).transpose(1, 2)
        k = k.view(*h.shape[:2], attention.n_heads, d_head).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
        return torch.softmax(attention.kernel.log_weight(scores), dim=-1).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["softmax", "log"])
@pytest.mark.parametrize("layer", [0, 1])
def test_attention_ess_and_weights_match_direct_recomputation(fitted, pareto, kernel, layer):
    model, X = fitted[kernel], pareto[0][:4]
    direct = _direct_weights(model, X, layer)
    weights = model.attention_weights(X, layer=layer)
    assert weights.shape == (4, 2, 64, 64)
    np.testing.assert_allclose(weights, direct, atol=1e-5)
    ess = model.attention_ess(X, layer=layer)
    expected = (1.0 / (direct**2).sum(-1)).mean(-1) / 64
    np.testing.assert_allclose(ess, expected, rtol=1e-4)


@pytest.mark.slow
def test_trained_softmax_collapses_on_raw_pareto_while_log_and_symlog_do_not(fitted, pareto, small_params):
    X, y = pareto
    assert np.median(fitted["softmax"].attention_ess(X)) < ATTENTION_ESS_THRESHOLD
    assert np.median(fitted["log"].attention_ess(X)) > 4 * ATTENTION_ESS_THRESHOLD
    symlog_softmax = MeasureTransformerRegressor(kernel="softmax", transform="symlog", max_epochs=2, **small_params)
    assert np.median(symlog_softmax.fit(X, y).attention_ess(X)) > 4 * ATTENTION_ESS_THRESHOLD


def test_attention_ess_respects_point_weights_and_ragged_input(fitted, pareto):
    model, X = fitted["log"], pareto[0]
    ragged = [X[0, :40], X[1]]
    ess = model.attention_ess(ragged)
    # Padding has weight 0: a ragged measure gives the ESS of the measure alone.
    np.testing.assert_allclose(ess[0], model.attention_ess(X[:1, :40])[0], rtol=1e-6)
    np.testing.assert_allclose(ess[1], model.attention_ess(X[1:2])[0], rtol=1e-6)
    weights = model.attention_weights(ragged)
    assert [w.shape for w in weights] == [(2, 40, 40), (2, 64, 64)]
    # A repeated point counts twice: duplicating all points leaves ESS/n unchanged.
    doubled = np.concatenate([X[:2], X[:2]], axis=1)
    np.testing.assert_allclose(model.attention_ess(doubled), model.attention_ess(X[:2]), rtol=1e-5)


def test_attention_ess_subsampled_queries_estimate_the_full_value(fitted, pareto):
    model, X = fitted["log"], pareto[0]
    full = model.attention_ess(X)
    sub = model.attention_ess(X, max_queries=32, random_state=3)
    assert not np.allclose(full, sub)  # a real subsample
    assert abs(sub.mean() - full.mean()) < 0.05


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda m, X: m.attention_ess(X, layer=2), ValueError, r"layer must be an integer in \[0, 2\)"),
        (lambda m, X: m.attention_ess(X, layer=True), ValueError, "layer"),
        (lambda m, X: m.attention_ess(X[..., :1]), ValueError, "features"),
        (lambda m, X: m.attention_ess(X, max_queries=0), ValueError, "max_queries"),
        (lambda m, X: m.attention_weights(np.zeros((70, 8192, 2))), ValueError, "GiB"),
    ],
)
def test_attention_diagnostics_bad_input(fitted, pareto, call, error, match):
    with pytest.raises(error, match=match):
        call(fitted["log"], pareto[0])


def test_attention_ess_needs_a_fitted_model(pareto):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        MeasureTransformerRegressor().attention_ess(pareto[0])


def _non_finite_gradient_batches(backend, X, y, kernel="softmax"):
    torch.manual_seed(0)
    module = MeasureTransformer(2, 2, d_model=32, n_heads=4, n_layers=2, dim_feedforward=64, kernel=kernel,
                                attention_backend=backend)
    loss = MeasureLoss(name="energy")
    bad = 0
    for start in range(0, len(X), 8):
        module.zero_grad()
        xb = torch.as_tensor(X[start : start + 8], dtype=torch.float32)
        yb = torch.as_tensor(y[start : start + 8], dtype=torch.float32)
        loss(module(xb), yb, None, None).backward()
        grads = torch.cat([p.grad.flatten() for p in module.parameters() if p.grad is not None])
        bad += int(not bool(torch.isfinite(grads).all()))
    return bad


@pytest.mark.slow
def test_default_backend_gives_finite_gradients_where_the_mathematics_is_finite():
    # Raw Pareto(0.7) points reach 1e6, first-layer scores 1e12: SDPA's backward
    # recomputes exp(s - lse) with other rounding than its forward and overflows.
    X, y = make_matrix_inverse(n_samples=64, n_points=256, tail="pareto", tail_index=0.7, random_state=0)
    assert _non_finite_gradient_batches("naive", X, y) == 0
    assert _non_finite_gradient_batches("sdpa", X, y) > 0  # the artefact itself
    assert _non_finite_gradient_batches("auto", X, y) == 0


@pytest.mark.slow
def test_softmax_fits_raw_infinite_mean_data_with_the_default_backend(small_params):
    X, y = make_matrix_inverse(n_samples=32, n_points=128, tail="pareto", tail_index=0.7, random_state=1)
    model = MeasureTransformerRegressor(kernel="softmax", max_epochs=2, **small_params).fit(X, y)
    assert np.all(np.isfinite(model.predict(X[:4])))
    assert len(model.history_) == 2


def test_non_finite_loss_error_names_the_loss_stage(pareto, small_params):
    X, y = pareto

    def broken_loss(y_pred, y_true, pred_weights, true_weights):
        return (y_pred.sum() - y_true.sum()) * math.inf

    model = MeasureTransformerRegressor(loss=broken_loss, max_epochs=1, **small_params)
    with pytest.raises(ValueError, match="loss='broken_loss' returned -?(nan|inf)"):
        model.fit(X, y)
    assert not hasattr(model, "net_")

    calls = []

    def breaks_in_training(y_pred, y_true, pred_weights, true_weights):
        calls.append(1)
        return broken_loss(y_pred, y_true, pred_weights, true_weights) if len(calls) > 1 else y_pred.mean() ** 2

    model = MeasureTransformerRegressor(loss=breaks_in_training, max_epochs=1, **small_params)
    with pytest.raises(FloatingPointError, match="loss became .* outputs were finite"):
        model.fit(X, y)
    assert not hasattr(model, "net_")


def test_non_finite_gradient_error_names_the_backward_stage(pareto, small_params):
    X, y = pareto

    def loss_with_nan_gradient(y_pred, y_true, pred_weights, true_weights):
        # Finite value, NaN gradient: sqrt has an infinite slope at 0.
        return torch.sqrt((y_pred * 0.0).sum()) + (y_pred.mean() - y_true.mean()) ** 2

    model = MeasureTransformerRegressor(loss=loss_with_nan_gradient, max_epochs=1, **small_params)
    with pytest.raises(FloatingPointError, match="backward pass produced non-finite gradients"):
        model.fit(X, y)


@pytest.mark.slow
def test_scoring_in_symlog_space(fitted, pareto):
    X, y = pareto
    model = fitted["log"]
    scorer = make_measure_scorer("energy", space="symlog")
    expected = -energy_distance(symlog(y), symlog(model.predict(X)))
    assert scorer(model, X, y) == pytest.approx(expected)
    assert get_scorer("neg_energy_distance_symlog")(model, X, y) == pytest.approx(expected)
    assert model.set_params(score_space="symlog").score(X, y) == pytest.approx(expected)
    model.set_params(score_space="raw")
    assert make_measure_scorer("energy")(model, X, y) == pytest.approx(model.score(X, y))
    # One extreme point moves the raw distance far more than the symlog one.
    shifted = y.copy()
    shifted[0, 0] += 1e8
    raw = energy_distance(y, shifted)
    in_symlog = energy_distance(to_space(y, "symlog"), to_space(shifted, "symlog"))
    assert raw > 1e4 * in_symlog
    ragged = to_space([y[0], y[1, :5]], "symlog")
    np.testing.assert_allclose(ragged[1], symlog(y[1, :5]))


def test_space_is_validated():
    with pytest.raises(ValueError, match="'space' parameter of make_measure_scorer must be a str among {'raw', 'symlog'}"):
        make_measure_scorer("energy", space="log")
    with pytest.raises(ValueError, match="space"):
        MeasureTransformerRegressor(score_space="log", max_epochs=1).fit(np.zeros((2, 3, 1)), np.zeros((2, 3, 1)))


@pytest.mark.slow
def test_grid_search_over_kernels_with_symlog_scoring_and_trained_ess(pareto, small_params):
    X, y = pareto
    search = GridSearchCV(
        MeasureTransformerRegressor(max_epochs=1, **small_params),
        {"kernel": ["softmax", "log"], "transform": [None, "symlog"]},
        scoring=make_measure_scorer("energy", space="symlog"), cv=2,
    ).fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_estimator_.attention_ess(X).shape == (16, 2)


@pytest.mark.slow
def test_collapse_diagnostics_report(fitted, pareto):
    X, y = pareto
    report = collapse_diagnostics(fitted["softmax"], X, y)
    assert report["attention"] is True and report["collapsed"] is True
    assert report["attention_ess"] < ATTENTION_ESS_THRESHOLD and report["space"] == "symlog"
    log_report = collapse_diagnostics(fitted["log"], X, y)
    assert log_report["attention"] is False
    assert log_report["attention_ess"] > report["attention_ess"]


# --------------------------------------------------------------------------- #
# Predictions that need no model, and the learned face
# --------------------------------------------------------------------------- #


def test_reference_predictions_shapes_ragged_and_errors():
    rng = np.random.default_rng(0)
    X_test = [rng.normal(size=(n, 2)) for n in (5, 9, 7)]
    y_test = [rng.normal(size=(n, 2)) for n in (6, 6, 11)]
    y_train = rng.normal(size=(4, 3, 2))  # a pool of 12 points, smaller than one target: drawn with replacement
    refs = reference_predictions(X_test, y_test, y_train, oracle=y_test, random_state=0)
    assert [len(m) for m in refs["pooled"]] == [6, 6, 11]
    pool = y_train.reshape(-1, 2)
    assert all((m[:, None] == pool[None]).all(-1).any(1).all() for m in refs["pooled"])  # pool points only
    assert [len(m) for m in refs["identity"]] == [5, 9, 7] and len(refs["oracle"]) == 3
    # no identity when the dimensions differ
    assert "identity" not in reference_predictions(rng.normal(size=(3, 4, 3)), rng.normal(size=(3, 4, 2)),
                                                   y_train, random_state=0)
    with pytest.raises(ValueError, match="y_train has 3 features but y_test has 2"):
        reference_predictions(X_test, y_test, rng.normal(size=(4, 3, 3)))
    with pytest.raises(ValueError, match="one target per input"):
        reference_predictions(X_test[:2], y_test, y_train)


def test_learned_verdict_takes_the_better_no_model_row():
    assert learned_verdict(0.05, pooled=0.08, identity=0.2) == {
        "learned": True, "baseline": "pooled", "baseline_energy": 0.08, "ratio": 0.05 / 0.08}
    assert learned_verdict(0.05, pooled=0.08, identity=0.06)["learned"] is False  # copying the input is as good
    assert learned_verdict(0.05, pooled=0.08)["baseline"] == "pooled"
    assert learned_verdict(0.07, pooled=0.08)["learned"] is False  # within the margin
    assert learned_verdict(float("nan"), pooled=0.08)["learned"] is None
    assert learned_verdict(0.05)["learned"] is None
    # when even a fresh sample of the true law is not clearly below the no-model rows, nothing can be told
    assert learned_verdict(0.01, pooled=0.08, oracle=0.07)["learned"] is None
    assert learned_verdict(0.01, pooled=0.08, oracle=0.03)["learned"] is True
    with pytest.raises(TypeError, match="pooled must be a real number"):
        learned_verdict(0.05, pooled="low")


def test_collapse_diagnostics_of_a_prediction_without_model():
    X, y = make_matrix_inverse(n_samples=6, n_points=20, tail="gaussian", random_state=0)
    report = collapse_diagnostics(None, X, y, y_pred=y[::-1])
    assert report["attention"] is None and math.isnan(report["attention_ess"])
    assert report["energy"] > 0 and report["within"] is False
    with pytest.raises(ValueError, match="pass y_pred"):
        collapse_diagnostics(None, X, y)
