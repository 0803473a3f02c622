"""The fitted network: the one object inference, inspection and model files run a trained network through."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

import sklearn_measattn
from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn._training import FittedNetwork
from sklearn_measattn._training._streams import RandomStreams
from sklearn_measattn.estimator import fitted_network

TRAINING = Path(sklearn_measattn.__file__).parent / "_training"


@pytest.fixture(scope="module")
def fitted(data, seeded_tiny_params):
    X, y = data
    return MeasureTransformerRegressor(**{**seeded_tiny_params, "transform": "symlog"}).fit(X, y)


def test_the_estimator_hands_out_its_fitted_network(fitted):
    network = fitted_network(fitted)
    assert isinstance(network, FittedNetwork)
    assert network.net is fitted.net_ and network.module is fitted.net_.module_
    assert network.transform_X is fitted.transform_X_ and network.device == fitted.device_ == "cpu"
    assert (network.n_features_in, network.n_features_out) == (fitted.n_features_in_, fitted.n_features_out_)
    assert network.batch_size == fitted.batch_size


@pytest.mark.parametrize("mode", [True, False], ids=["training-mode", "eval-mode"])
def test_inference_leaves_the_modules_mode_as_it_found_it(fitted, data, mode):
    X, _ = data
    module = fitted.net_.module_
    module.train(mode)
    try:
        fitted.predict(X[:2])
        fitted.transport(X[:2], X[:2, :3])
        fitted.attention_ess(X[:2])
        fitted.hidden_similarity(X[:2])
        fitted_network(fitted).run(X[:2])
        assert all(layer.training == mode for layer in module.modules())
    finally:
        module.eval()


def test_run_is_predict_without_the_checks(fitted, data):
    X, _ = data
    np.testing.assert_allclose(fitted_network(fitted).run(X), fitted.predict(X), rtol=1e-6, atol=1e-9)


def test_predict_takes_a_batch_size_that_changes_nothing_but_memory(fitted, data):
    X, _ = data
    before = fitted.batch_size
    np.testing.assert_allclose(fitted.predict(X, batch_size=1), fitted.predict(X), rtol=1e-5, atol=1e-7)
    assert fitted.batch_size == before  # the estimator's parameter is left as it was
    with pytest.raises(ValueError, match="batch_size"):
        fitted.predict(X, batch_size=0)


def test_random_streams_have_names_and_distinct_seeds():
    streams = RandomStreams(7)
    seeds = {name: streams.seed_of(name) for name in streams.DERIVATION}
    # the streams that draw different things start at different places
    different = ["shuffling", "loss_projections", "inference_context", "training_context", "validation_context"]
    assert len({seeds[name] for name in different}) == len(different)
    assert torch.equal(streams.generator("loss_projections").get_state(),
                       torch.Generator().manual_seed(seeds["loss_projections"]).get_state())
    with pytest.raises(ValueError, match="No random stream named 'dropout'"):
        streams.seed_of("dropout")


def test_the_training_home_names_no_parameter_of_the_network():
    """The network's keyword arguments flow from the estimator to the module untouched: the training home
    lists none of them, so that a new one is an edit of the estimator only."""
    # (the kernel and dropout are also words of the checkpoint's random streams and the attention records)
    names = set(MeasureTransformerRegressor()._module_params()) - {"kernel", "dropout"}
    assert {"d_model", "n_heads", "norm_first"} <= names
    for path in sorted(TRAINING.glob("*.py")):
        mentioned = {node.value for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        mentioned |= {f"module__{name}" for name in names if f"module__{name}" in path.read_text()}
        assert not (mentioned & (names | {f"module__{name}" for name in names})), path.name


def test_a_new_network_parameter_reaches_the_module(data, tiny_params, monkeypatch):
    """A keyword argument added where the estimator gathers the network's reaches the torch module."""
    import sklearn_measattn.transformer as transformer

    seen = {}
    original = transformer.MeasureTransformer.__init__

    def recording(self, *args, extra_flag=None, **kwargs):
        seen["extra_flag"] = extra_flag
        original(self, *args, **kwargs)

    monkeypatch.setattr(transformer.MeasureTransformer, "__init__", recording)
    gathered = MeasureTransformerRegressor._module_params
    monkeypatch.setattr(MeasureTransformerRegressor, "_module_params",
                        lambda self: {**gathered(self), "extra_flag": True})
    X, y = data
    MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 1}).fit(X, y)
    assert seen == {"extra_flag": True}


def test_a_fitted_or_loaded_module_waits_in_evaluation_mode_and_trains_again_when_fitted_further(
        data, seeded_tiny_params, tmp_path):
    X, y = data
    model = MeasureTransformerRegressor(**{**seeded_tiny_params, "warm_start": True}).fit(X, y)
    assert not any(layer.training for layer in model.net_.module_.modules())
    seen = []
    hook = model.net_.module_.register_forward_pre_hook(lambda module, args: seen.append(module.training))
    model.fit(X, y)
    hook.remove()
    assert True in seen  # the continued fit's batches ran in training mode
    assert not model.net_.module_.training
    sklearn_measattn.save_model(model, tmp_path / "model.safetensors")
    loaded = sklearn_measattn.load_model(tmp_path / "model.safetensors")
    assert not any(layer.training for layer in loaded.net_.module_.modules())
