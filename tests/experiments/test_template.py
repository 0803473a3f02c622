"""The experiments' estimator template: cloned per fit, its parameters reach every model, the old keywords warn."""

import math
import warnings

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.experiments import _compare, _phase, compare_kernels, compare_kernels_on_data, phase_diagram

NETWORK = dict(max_epochs=1, d_model=8, n_heads=2, n_layers=1, dim_feedforward=16, batch_size=4, device="cpu")
OLD_NETWORK = dict(epochs=1, d_model=8, n_heads=2, n_layers=1, dim_feedforward=16, batch_size=4, device="cpu")
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


def _comparable(rows):
    # NaN as a string (NaN != NaN); fit times vary
    return [{k: ("nan" if isinstance(v, float) and v != v else v) for k, v in row.items() if k != "fit_time"}
            for row in rows]


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
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        run()
    model, = seen
    assert {name: model.get_params()[name] for name in defaults} == defaults


@pytest.mark.parametrize("run, caller", [
    (lambda **kw: compare_kernels(**BENCHMARK, **kw), "compare_kernels"),
    (lambda **kw: compare_kernels_on_data(*_own_data(), kernels=["log"], transforms=[None], **kw),
     "compare_kernels_on_data"),
    (lambda **kw: phase_diagram(**PHASE, **kw), "phase_diagram"),
])
def test_the_old_keywords_warn_and_cannot_be_combined_with_a_template(monkeypatch, run, caller):
    seen = _record_models(monkeypatch, _compare, "_fit_and_score")
    with pytest.warns(FutureWarning, match=rf"Passing epochs, d_model.* to {caller} is deprecated.*"
                                           r"pass estimator=MeasureTransformerRegressor\(.*max_epochs=1"):
        run(**OLD_NETWORK)
    assert {name: seen[0].get_params()[name] for name in NETWORK} == NETWORK
    seen.clear()
    with pytest.raises(ValueError, match=rf"{caller} got estimator= and d_model, epochs: set d_model, max_epochs on "
                                         "the estimator instead"):
        run(estimator=MeasureTransformerRegressor(), epochs=3, d_model=8)
    with pytest.raises(TypeError, match="estimator must be a MeasureTransformerRegressor"):
        run(estimator={"d_model": 8})
    assert seen == []  # refused before any fit


def test_the_suggested_template_gives_the_old_keywords_results():
    with pytest.warns(FutureWarning, match="estimator=") as record:
        old = compare_kernels(**BENCHMARK, epochs=1, d_model=8, n_heads=2, n_layers=1, dim_feedforward=16)
    suggested = str(record[0].message).split("estimator=MeasureTransformerRegressor(")[1].split(") instead")[0]
    assert suggested == ("max_epochs=1, d_model=8, dim_feedforward=16, batch_size=16, n_heads=2, n_layers=1")
    new = compare_kernels(**BENCHMARK, estimator=MeasureTransformerRegressor(
        max_epochs=1, d_model=8, dim_feedforward=16, batch_size=16, n_heads=2, n_layers=1))
    assert _comparable(old) == _comparable(new)
    assert old[0]["status"] == "ok" and old[0]["energy_symlog"] > 0


def test_old_and_new_forms_give_the_same_rows_on_your_data_and_in_the_phase_diagram():
    X, y = _own_data()
    with pytest.warns(FutureWarning):
        old = compare_kernels_on_data(X, y, kernels=["log"], transforms=["symlog"], **OLD_NETWORK)
    new = compare_kernels_on_data(X, y, kernels=["log"], transforms=["symlog"],
                                  estimator=MeasureTransformerRegressor(**NETWORK))
    assert _comparable(old) == _comparable(new)
    with pytest.warns(FutureWarning):
        old = phase_diagram(**PHASE, **OLD_NETWORK)
    new = phase_diagram(**PHASE, estimator=MeasureTransformerRegressor(**NETWORK, lr=3e-3))  # the phase's rate
    assert _comparable(old) == _comparable(new) and old[0]["status"] == "ok"


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
