import io
import pickle

import joblib
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils import estimator_checks
from skorch.callbacks import Callback

from sklearn_measattn import MeasureTransformerRegressor, SymlogTransformer
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.losses import energy_loss
from sklearn_measattn.metrics import energy_distance, neg_wasserstein_scorer
from sklearn_measattn.preprocessing import symlog


@pytest.fixture(scope="module")
def tiny(seeded_tiny_params):
    """A new tiny regressor (two seeded epochs), with any parameter overridden."""

    def make(**kwargs):
        return MeasureTransformerRegressor(**{**seeded_tiny_params, **kwargs})

    return make


@pytest.fixture(scope="module")
def fitted(data, tiny):
    return tiny().fit(*data)


# ---------------------------------------------------------------- sklearn API
API_CHECKS = [
    estimator_checks.check_estimator_cloneable,
    estimator_checks.check_estimator_tags_renamed,
    estimator_checks.check_valid_tag_types,
    estimator_checks.check_estimator_repr,
    estimator_checks.check_no_attributes_set_in_init,
    estimator_checks.check_estimators_unfitted,
    estimator_checks.check_do_not_raise_errors_in_init_or_set_params,
    estimator_checks.check_mixin_order,
    estimator_checks.check_parameters_default_constructible,
    estimator_checks.check_get_params_invariance,
    estimator_checks.check_set_params,
]
# sklearn's remaining API checks (fit_score_takes_y, overwrite_params, fit_returns_self,
# dont_overwrite_parameters, n_features_in_after_fitting, readonly_memmap_input,
# ...) call fit on 2-D arrays, which a measure estimator rejects by design; their
# 3-D equivalents are the tests below this block.


@pytest.mark.parametrize("check", API_CHECKS, ids=lambda check: check.__name__)
def test_sklearn_api_checks_that_do_not_fit(check, tiny):
    check(type(tiny()).__name__, tiny())


def test_fit_and_score_take_y(tiny):
    import inspect

    for method in ("fit", "score"):
        assert list(inspect.signature(getattr(tiny(), method)).parameters)[:2] == ["X", "y"]


def test_tags_declare_3d_multioutput(tiny):
    tags = tiny().__sklearn_tags__()
    assert tags.input_tags.three_d_array and not tags.input_tags.two_d_array
    assert tags.target_tags.multi_output and tags.estimator_type == "regressor"


def test_fit_returns_self_and_sets_attributes(data, tiny):
    X, y = data
    model = tiny()
    assert model.fit(X, y) is model
    assert model.n_features_in_ == 2 and model.n_features_out_ == 2
    assert model.device_ == "cpu"
    assert len(model.history_) == 2 and "train_loss" in model.history_[-1]
    assert isinstance(model.net_.module_, torch.nn.Module)


@pytest.mark.slow
def test_fit_does_not_change_params_or_data(data, tiny):
    X, y = data
    X_copy, y_copy = X.copy(), y.copy()
    model = tiny(kernel_params=None, loss_params={"beta": 1.0})
    params = model.get_params()
    model.fit(X, y)
    assert model.get_params() == params
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(y, y_copy)


def test_unfitted_errors(data, tiny):
    with pytest.raises(NotFittedError):
        tiny().predict(data[0])
    with pytest.raises(NotFittedError):
        tiny().score(*data)
    with pytest.raises(NotFittedError):
        _ = tiny().history_


def test_feature_mismatch_at_predict(fitted, data):
    X = np.concatenate([data[0], data[0][..., :1]], axis=-1)
    with pytest.raises(ValueError, match="has 3 features per point, but the estimator was fitted with 2"):
        fitted.predict(X)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["X", "y"])
def test_non_finite_input_rejected(data, bad, where, tiny):
    X, y = (a.copy() for a in data)
    (X if where == "X" else y)[0, 0, 0] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        tiny().fit(X, y)


@pytest.mark.parametrize(
    "X_shape, y_shape, match",
    [((12, 16), (12, 16, 2), "3-D"), ((12, 16, 2), (11, 16, 2), "12 measures but y has 11"), ((12, 0, 2), (12, 16, 2), "0 points")],
)
def test_bad_shapes_rejected(X_shape, y_shape, match, tiny):
    with pytest.raises(ValueError, match=match):
        tiny().fit(np.ones(X_shape), np.ones(y_shape))


@pytest.mark.slow
def test_deterministic_with_random_state(data, fitted, tiny):
    X, y = data
    again = tiny().fit(X, y)
    np.testing.assert_array_equal(again.predict(X), fitted.predict(X))
    other_seed = tiny(random_state=1).fit(X, y)
    assert not np.allclose(other_seed.predict(X), fitted.predict(X))


@pytest.mark.slow
def test_global_torch_rng_untouched(data, tiny):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    tiny().fit(*data)
    torch.testing.assert_close(torch.rand(3), expected)


def test_clone_pickle_joblib_round_trips(data, fitted):
    X, _ = data
    expected = fitted.predict(X)
    assert clone(fitted).get_params() == fitted.get_params()
    assert not hasattr(clone(fitted), "net_")
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fitted)).predict(X), expected)
    buffer = io.BytesIO()
    joblib.dump(fitted, buffer)
    buffer.seek(0)
    np.testing.assert_array_equal(joblib.load(buffer).predict(X), expected)


@pytest.mark.slow
def test_set_params_after_fit_is_used_on_refit(data, tiny):
    X, y = data
    model = tiny().fit(X, y)
    model.set_params(kernel="softmax", d_model=12, max_epochs=3)
    model.fit(X, y)
    assert len(model.history_) == 3
    assert model.net_.module_.embedding.out_features == 12
    assert model.net_.module_.blocks[0].attention.kernel.name == "softmax"


def test_predict_any_number_of_points(fitted, data):
    X = data[0]
    assert fitted.predict(X[:3, :5]).shape == (3, 5, 2)
    assert fitted.predict(np.concatenate([X, X], axis=1)).shape == (12, 32, 2)


def test_ragged_fit_and_predict(data, tiny):
    X, y = data
    X_ragged = [X[i, : 8 + i % 5] for i in range(len(X))]
    y_ragged = [y[i, : 10 + i % 3] for i in range(len(y))]
    model = tiny().fit(X_ragged, y_ragged)
    predictions = model.predict(X_ragged)
    assert isinstance(predictions, list)
    assert [p.shape for p in predictions] == [(8 + i % 5, 2) for i in range(len(X))]
    # Padding does not leak into real points: a measure predicted alone gives the same points.
    np.testing.assert_allclose(model.predict(X_ragged[0][None])[0], predictions[0], rtol=1e-5, atol=1e-6)
    assert np.isfinite(model.score(X_ragged, y_ragged))


@pytest.mark.slow
def test_symlog_transform_is_applied_and_inverted(data, tiny):
    X, y = data
    model = tiny(transform="symlog").fit(X, y)
    assert isinstance(model.transform_X_, SymlogTransformer)
    in_model_space = model.net_.predict({"X": symlog(X).astype(np.float32)}).astype(np.float64)
    expected = np.sign(in_model_space) * np.expm1(np.abs(in_model_space))
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-6)


@pytest.mark.slow
def test_transformer_object_is_cloned(data, tiny):
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler()
    model = tiny(transform=scaler).fit(*data)
    assert model.transform_X_ is not scaler and not hasattr(scaler, "mean_")
    np.testing.assert_allclose(model.transform_y_.mean_, data[1].reshape(-1, 2).mean(axis=0))


def test_score_is_negative_energy_distance(fitted, data):
    X, y = data
    assert fitted.score(X, y) == pytest.approx(-energy_distance(y, fitted.predict(X)))
    assert fitted.score(X, y) < 0


@pytest.mark.slow
def test_grid_search_over_kernels(data, tiny):
    X, y = data
    param_grid = {"kernel": ["softmax", "poly", "log", "sigmoid"]}
    for scoring in (None, neg_wasserstein_scorer):
        search = GridSearchCV(tiny(max_epochs=1), param_grid, cv=2, scoring=scoring).fit(X, y)
        assert search.best_params_["kernel"] in param_grid["kernel"]
        assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
        assert search.predict(X).shape == y.shape


@pytest.mark.slow
def test_pipeline_with_symlog(data, tiny):
    X, y = data
    pipeline = Pipeline([("symlog", SymlogTransformer()), ("model", tiny())]).fit(X, y)
    assert pipeline.predict(X).shape == y.shape
    np.testing.assert_allclose(pipeline.predict(X), pipeline[-1].predict(symlog(X)))


@pytest.mark.slow
def test_verbose_shows_epoch_table(data, capsys, tiny):
    tiny(verbose=1).fit(*data)
    out = capsys.readouterr()
    assert "train_loss" in out.out and "dur" in out.out
    tiny(verbose=0).fit(*data)
    assert capsys.readouterr().out == ""


@pytest.mark.slow
def test_user_callbacks_and_early_stopping(data, tiny):
    class CountEpochs(Callback):
        def initialize(self):
            self.epochs = 0
            return self

        def on_epoch_end(self, net, **kwargs):
            self.epochs += 1

    counter = CountEpochs()
    model = tiny(callbacks=[counter], early_stopping=True, validation_fraction=0.25, patience=1, max_epochs=50).fit(*data)
    assert "valid_loss" in model.history_[-1]
    used = model.net_.callbacks_
    assert any(isinstance(cb, CountEpochs) and cb.epochs == len(model.history_) for _, cb in used)
    assert len(model.history_) < 50


def test_device_resolution(monkeypatch, data, tiny):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        tiny(device="cuda").fit(*data)
    assert tiny(device="auto").fit(*data).device_ == "cpu"


@pytest.mark.slow
def test_non_finite_loss_stops_and_leaves_unfitted(data, tiny):
    def nan_loss(y_pred, y_true, pred_weights=None, true_weights=None):
        return (y_pred * np.nan).sum()

    model = tiny().fit(*data)
    # caught by the probe call before training, with the loss's name
    with pytest.raises(ValueError, match="loss='nan_loss' returned nan"):
        model.set_params(loss=nan_loss).fit(*data)

    calls = []

    def nan_later(y_pred, y_true, pred_weights=None, true_weights=None):
        calls.append(1)
        return energy_loss(y_pred, y_true, pred_weights, true_weights) * (np.nan if len(calls) > 3 else 1.0)

    model = tiny().fit(*data)
    # non-finite during training: the message blames the user loss, not the data
    with pytest.raises(FloatingPointError, match="the user loss 'nan_later' returned it"):
        model.set_params(loss=nan_later).fit(*data)
    assert not hasattr(model, "net_") and not hasattr(model, "n_features_in_")


@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"kernel": "cosine"}, ValueError, "kernel"),
        ({"kernel": "poly", "kernel_params": {"degree": -1}}, ValueError, "degree"),
        ({"kernel_params": [1]}, TypeError, "kernel_params"),
        ({"lr": -0.1}, ValueError, "lr"),
        ({"lr": "fast"}, TypeError, "lr"),
        ({"n_heads": 3}, ValueError, "n_heads"),
        ({"d_model": 0}, ValueError, "d_model"),
        ({"n_layers": 1.5}, TypeError, "n_layers"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"max_epochs": -1}, ValueError, "max_epochs"),
        ({"loss": "l2"}, ValueError, "loss"),
        ({"loss_params": {"nope": 1}}, TypeError, "loss"),
        ({"norm": "middle"}, ValueError, "norm"),
        ({"dropout": 1.5}, ValueError, "dropout"),
        ({"weight_decay": -1}, ValueError, "weight_decay"),
        ({"validation_fraction": 1.0}, ValueError, "validation_fraction"),
        ({"early_stopping": "yes"}, TypeError, "early_stopping"),
        ({"patience": 0}, ValueError, "patience"),
        ({"device": "tpu"}, ValueError, "device"),
        ({"attention_backend": "fast"}, ValueError, "attention_backend"),
        ({"transform": "log"}, ValueError, "transform"),
        ({"transform": object()}, TypeError, "transform"),
        ({"random_state": "seed"}, ValueError, "seed"),
        ({"verbose": -1}, ValueError, "verbose"),
        ({"callbacks": "progress"}, TypeError, "callbacks"),
    ],
)
def test_invalid_params_raise_at_fit(data, params, error, match, tiny):
    model = tiny(**params)  # never raises in __init__
    with pytest.raises(error, match=match):
        model.fit(*data)
    assert not hasattr(model, "net_")


def test_mse_needs_paired_points(data, tiny):
    X, y = data
    with pytest.raises(ValueError, match="loss='mse' needs paired targets"):
        tiny(loss="mse").fit(X, y[:, :10])


@pytest.mark.slow
def test_learns_gaussian_matrix_inverse():
    """A real learning test: training cuts the held-out energy distance well below
    that of the untrained model."""
    X, y = make_matrix_inverse(n_samples=64, n_points=32, tail="gaussian", random_state=0)
    X_test, y_test = make_matrix_inverse(n_samples=16, n_points=32, tail="gaussian", random_state=1)
    params = dict(d_model=16, n_heads=2, n_layers=1, dim_feedforward=32, batch_size=16, random_state=0)
    untrained = MeasureTransformerRegressor(**params, max_epochs=1, lr=1e-9).fit(X, y)
    trained = MeasureTransformerRegressor(**params, max_epochs=25, lr=5e-3).fit(X, y)
    before, after = -untrained.score(X_test, y_test), -trained.score(X_test, y_test)
    assert after < 0.4 * before, (before, after)


def test_every_hyper_parameter_has_a_declared_domain():
    # scikit-learn's _validate_params checks exactly the parameters listed in
    # _parameter_constraints; a new constructor argument must be listed too.
    params = set(MeasureTransformerRegressor().get_params())
    assert set(MeasureTransformerRegressor._parameter_constraints) == params


@pytest.mark.parametrize("param", ["d_model", "max_epochs", "lr", "dropout"])
def test_flags_are_not_numbers(param):
    with pytest.raises(TypeError, match=param):
        MeasureTransformerRegressor(**{param: True})._check_params()


def test_every_parameter_has_one_continued_fit_rule_and_the_docs_and_errors_follow_it(data, tiny_params):
    """One table says what a continued fit does with each parameter; the docstring and the refusal use it."""
    from sklearn_measattn.estimator import _APPLIED, _FIXED

    rules = MeasureTransformerRegressor._continued_fit
    assert set(rules) == set(MeasureTransformerRegressor._parameter_constraints)
    assert set(rules) == set(MeasureTransformerRegressor().get_params(deep=False))
    assert set(MeasureTransformerRegressor._free_on_resume) < set(rules)
    doc = MeasureTransformerRegressor.__doc__
    assert "APPLIED_ON_A_CONTINUED_FIT" not in doc and "FIXED_BY_THE_FIRST_FIT" not in doc
    for name, rule in rules.items():
        if rule in (_FIXED, _APPLIED):
            assert f"``{name}``" in doc.split("warm_start : bool")[1].split("distributed : bool")[0], name
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, random_state=0, warm_start=True).fit(X, y)
    model.set_params(n_layers=model.n_layers + 1)
    with pytest.raises(ValueError, match=r"n_layers=2 changed since it was fitted.*applies only lr, lr_schedule"):
        model.fit(X, y)


@pytest.mark.slow
def test_the_net_is_built_from_the_estimators_net_params(data, tiny_params):
    """What the estimator gives the training home is what the fitted net was built and trained with."""
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, random_state=0, lr=3e-3, weight_decay=0.01,
                                        loss="sliced", loss_params={"n_projections": 4}).fit(X, y)
    params = model._net_params()
    assert params["criterion__n_projections"] == 4 and model.net_.criterion__n_projections == 4
    assert model.net_.lr == 3e-3 and model.net_.optimizer_.param_groups[0]["weight_decay"] == 0.01
    assert model.net_.module_.blocks[0].attention.n_heads == model.n_heads
