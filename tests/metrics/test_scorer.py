"""Scorers: every name of get_scorer is its make_measure_scorer spelling, and a
scorer's fixed arguments are checked, when it is made, by the metric's own table."""

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor, metrics
from sklearn_measattn._validation import parameter_constraints
from sklearn_measattn.metrics import SCORER_NAMES, energy_distance, get_scorer, make_measure_scorer

# How each get_scorer name is spelled with make_measure_scorer, written out here
# (not read from the scorer table) so that the test states what the names mean.
_RAW_SPELLINGS = {
    "neg_energy_distance": "energy_distance",
    "neg_energy_scorer": "energy",
    "neg_wasserstein_distance": "wasserstein_distance",
    "neg_wasserstein_scorer": "wasserstein",
    "neg_sliced_wasserstein_distance": "sliced_wasserstein_distance",
    "neg_sliced_wasserstein_scorer": "sliced_wasserstein",
    "neg_mmd": "mmd",
    "neg_mmd_scorer": "mmd",
}
_ALIASES = [name for name in _RAW_SPELLINGS if name.endswith("_scorer")]
SPELLINGS = {
    **{name: (metric, "raw") for name, metric in _RAW_SPELLINGS.items()},
    **{f"{name}_symlog": (metric, "symlog") for name, metric in _RAW_SPELLINGS.items() if name not in _ALIASES},
}


def test_every_scorer_name_has_a_spelling():
    assert sorted(SCORER_NAMES) == sorted(SPELLINGS)


@pytest.fixture(scope="module")
def fitted(data, seeded_tiny_params):
    """A fitted model and held-out measures (heavy-tailed: raw and symlog scores differ)."""
    X, y = data
    model = MeasureTransformerRegressor(**seeded_tiny_params).fit(X[:8], y[:8])
    return model, X[8:], y[8:]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_a_scorer_name_and_its_make_measure_scorer_spelling_score_alike(name, fitted):
    model, X, y = fitted
    metric, space = SPELLINGS[name]
    by_name, spelled = get_scorer(name), make_measure_scorer(metric, space=space)
    score = by_name(model, X, y)
    assert np.isfinite(score)
    assert score == spelled(model, X, y)
    weights = np.array([1.0, 0.0, 2.0, 5.0])
    assert by_name(model, X, y, sample_weight=weights) == spelled(model, X, y, sample_weight=weights)
    if name in _ALIASES:  # the module-level scorer object of that name
        assert getattr(metrics, name)(model, X, y) == score


def test_the_raw_and_symlog_scorers_differ_on_heavy_tails(fitted):
    model, X, y = fitted
    assert get_scorer("neg_energy_distance")(model, X, y) != get_scorer("neg_energy_distance_symlog")(model, X, y)


@pytest.mark.parametrize(
    "metric, kwargs, function, parameter",
    [
        ("energy", {"beta": 3}, "energy_distance", "beta"),
        ("wasserstein", {"p": 0.5}, "wasserstein_distance", "p"),
        ("sliced_wasserstein", {"n_projections": 0}, "wasserstein_distance", "n_projections"),
        ("wasserstein_distance", {"n_jobs": 0}, "wasserstein_distance", "n_jobs"),
        ("mmd", {"bandwidth": "scott"}, "mmd", "bandwidth"),
    ],
)
def test_a_scorer_checks_its_fixed_arguments_with_the_metric_table(metric, kwargs, function, parameter):
    """The error at construction is the one the metric itself raises for that value."""
    with pytest.raises(ValueError, match=rf"The '{parameter}' parameter of {function} must be") as from_scorer:
        make_measure_scorer(metric, **kwargs)
    y = np.zeros((3, 4, 2))
    with pytest.raises(ValueError) as from_metric:
        getattr(metrics, function)(y, y, **kwargs)
    assert str(from_scorer.value) == str(from_metric.value)


def test_the_energy_scorer_says_the_domain_of_beta_and_why():
    with pytest.raises(ValueError, match=r"'beta' parameter of energy_distance must be a float in the range \(0\.0, "
                                         r"2\.0\): only there is the energy distance a metric"):
        make_measure_scorer("energy", beta=3)


def test_a_scorer_accepts_the_arguments_its_metric_table_lists(fitted):
    model, X, y = fitted
    assert set(parameter_constraints(energy_distance)) == {"beta", "multioutput"}
    assert make_measure_scorer("energy", beta=0.5)(model, X, y) == -energy_distance(y, model.predict(X), beta=0.5)
    with pytest.raises(ValueError, match=r"unexpected keyword argument\(s\) \['gamma'\]; for energy_distance the "
                                         "keyword arguments it takes are beta"):
        make_measure_scorer("energy", gamma=1.0)


def test_make_measure_scorer_checks_its_own_parameters():
    with pytest.raises(ValueError, match="'greater_is_better' parameter of make_measure_scorer"):
        make_measure_scorer(lambda a, b: 0.0, greater_is_better="yes")
    with pytest.raises(TypeError, match=r"'metric' parameter of make_measure_scorer must be .* or a callable "
                                        r"metric\(y_true, y_pred, \*\*kwargs\)"):
        make_measure_scorer(3)


def test_get_scorer_names_the_valid_names_and_the_other_way():
    with pytest.raises(ValueError, match="'neg_energy_distance'.*make_measure_scorer.*Got 'r2' instead"):
        get_scorer("r2")


def test_the_scorer_signature_check_of_a_callable_is_its_own(fitted):
    """A user callable has no table: its fixed arguments are bound to its signature."""
    model, X, y = fitted

    def metric(y_true, y_pred, *, scale=1.0):
        return scale

    assert make_measure_scorer(metric, scale=2.0)(model, X, y) == -2.0
    with pytest.raises(ValueError, match="unexpected keyword.*takes scale"):
        make_measure_scorer(metric, p=2)
