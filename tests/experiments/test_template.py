"""The experiments' estimator template: cloned per fit, its parameters reach every model, set on it only."""

import math

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.experiments import _compare, _phase, compare_kernels, compare_kernels_on_data, phase_diagram

NETWORK = dict(max_epochs=1, d_model=8, n_heads=2, n_layers=1, dim_feedforward=16, batch_size=4, device="cpu")
BENCHMARK = dict(kernels=["log"], transforms=[None], n_samples=8, n_points=12, n_test=3)
PHASE = dict(tasks=["sheared_swap"], kernels=["log"], transforms=["none"], tail_indices=[0.7], seeds=[0],
             n_samples=8, n_points=12, n_test=3)


def _own_data():
    X = np.random.default_rng(0).standard_t(3, size=(12, 10, 2))
    return X, 2.0 * X


def _record_models(monkeypatch, module, name):
    """Replace ``module.name`` (a fit of one model) by a recorder of the models it is handed; no training."""
    seen = []

    def record(*args, **kwargs):
        model = next(a for a in (*args, *kwargs.values()) if isinstance(a, MeasureTransformerRegressor))
        seen.append(model)
        row = dict(args[0] if isinstance(args[0], dict) else {}, kernel=model.kernel, transform="none",
                   seed=model.random_state, status="ok", energy_symlog=math.nan, fit_time=0.0)
        return row, None

    monkeypatch.setattr(module, name, record)
    return seen


def test_a_parameter_the_experiments_never_name_reaches_every_fitted_model():
    template = MeasureTransformerRegressor(**NETWORK, norm="pre", weight_decay=0.01, loss="sliced")

    def inspect(model, X_test):
        return {"norm": model.norm, "weight_decay": model.weight_decay, "loss": model.loss,
                "fitted": hasattr(model, "net_")}

    rows = compare_kernels(**dict(BENCHMARK, kernels=["log", "sigmoid"], transforms=[None, "symlog"]),
                           seeds=[0, 1], estimator=template, inspect=inspect)
    fits = [row for row in rows if row["kernel"] in ("log", "sigmoid")]
    assert len(fits) == 8
    assert all((row["norm"], row["weight_decay"], row["loss"], row["fitted"]) == ("pre", 0.01, "sliced", True)
               for row in fits)
    assert {(row["kernel"], row["transform"], row["seed"]) for row in fits} == {
        (k, t, s) for k in ("log", "sigmoid") for t in ("none", "symlog") for s in (0, 1)}
    assert all(row["epochs"] == 1 and row["d_model"] == 8 for row in fits)
    assert not hasattr(template, "net_") and template.kernel == "log" and template.random_state is None


def test_the_template_reaches_the_fits_on_your_data_and_of_the_phase_diagram(monkeypatch):
    template = MeasureTransformerRegressor(**NETWORK, weight_decay=0.02, kernel_params={"degree": 1.5})
    seen = _record_models(monkeypatch, _compare, "_fit_and_score")
    compare_kernels_on_data(*_own_data(), kernels=["poly"], transforms=["symlog", None], seeds=[3],
                            estimator=template)
    assert [(m.kernel, m.transform, m.random_state) for m in seen] == [("poly", "symlog", 3), ("poly", None, 3)]
    assert all(m.weight_decay == 0.02 and m.kernel_params == {"degree": 1.5} and m.max_epochs == 1 for m in seen)
    assert all(m is not template for m in seen)

    seen.clear()
    rows = phase_diagram(**dict(PHASE, kernels=["poly2", "poly"]), estimator=template)
    # the phase diagram's own kernel parameters where its label has them, the template's elsewhere
    assert [(m.kernel, m.kernel_params) for m in seen] == [("poly", {"degree": 2.0}), ("poly", {"degree": 1.5})]
    assert all(m.weight_decay == 0.02 and m.device == "cpu" for m in seen)
    assert [(row["epochs"], row["d_model"], row["n_heads"], row["n_layers"]) for row in rows] == [(1, 8, 2, 1)] * 2


@pytest.mark.parametrize("run, defaults", [
    (lambda: compare_kernels(**BENCHMARK),
     dict(max_epochs=40, d_model=32, n_heads=4, n_layers=2, dim_feedforward=64, lr=1e-3, lr_schedule="constant",
          batch_size=16, device="auto")),
    (lambda: compare_kernels_on_data(*_own_data(), kernels=["log"], transforms=[None]),
     dict(max_epochs=40, d_model=32, n_heads=4, n_layers=2, dim_feedforward=64, lr=1e-3, lr_schedule="constant",
          batch_size=16, device="auto")),
    (lambda: phase_diagram(**PHASE),
     dict(max_epochs=30, d_model=16, n_heads=2, n_layers=2, dim_feedforward=32, lr=3e-3, lr_schedule="constant",
          batch_size=16, device="cpu")),
])
def test_without_a_template_each_experiment_fits_with_its_own_defaults(monkeypatch, run, defaults):
    seen = _record_models(monkeypatch, _compare, "_fit_and_score")
    run()
    model, = seen
    assert {name: model.get_params()[name] for name in defaults} == defaults


@pytest.mark.parametrize("run", [
    lambda **kw: compare_kernels(**BENCHMARK, **kw),
    lambda **kw: compare_kernels_on_data(*_own_data(), kernels=["log"], transforms=[None], **kw),
    lambda **kw: phase_diagram(**PHASE, **kw),
])
def test_the_network_is_set_on_the_template_only(monkeypatch, run):
    seen = _record_models(monkeypatch, _compare, "_fit_and_score")
    with pytest.raises(TypeError, match="unexpected keyword argument 'epochs'"):
        run(epochs=1, d_model=8)
    with pytest.raises(TypeError, match="estimator must be a MeasureTransformerRegressor"):
        run(estimator={"d_model": 8})
    assert seen == []  # refused before any fit


def test_an_unknown_kernel_is_refused_before_any_fit(monkeypatch):
    seen = _record_models(monkeypatch, _compare, "_fit_and_score")
    with pytest.raises(ValueError, match="kernel='nope'"):
        compare_kernels(**dict(BENCHMARK, kernels=["log", "nope"]), estimator=MeasureTransformerRegressor(**NETWORK))
    assert seen == []


def test_phase_diagram_fits_through_the_comparison(monkeypatch):
    """The phase diagram's fits go through compare_kernels with the template, not its own copy of the loop."""
    calls = []
    monkeypatch.setattr(_phase, "compare_kernels", lambda *a, **kw: calls.append(kw) or [{"status": "ok"}])
    template = MeasureTransformerRegressor(**NETWORK)
    phase_diagram(**PHASE, estimator=template)
    assert calls[0]["estimator"].get_params() == template.get_params()


@pytest.mark.parametrize("bad, reason", [
    (dict(n_test=2), "the across-sample correlation ranks"),
    (dict(n_test=3.0), r"\[3, inf\)"),
    (dict(inspect="columns"), "a callable inspect"),
])
def test_compare_kernels_checks_its_arguments_against_constraints_before_any_fit(monkeypatch, bad, reason):
    seen = _record_models(monkeypatch, _compare, "_fit_and_score")
    with pytest.raises(ValueError, match=rf"The '{next(iter(bad))}' parameter of compare_kernels must be .*{reason}"):
        compare_kernels(**dict(BENCHMARK, **bad))
    assert seen == []
