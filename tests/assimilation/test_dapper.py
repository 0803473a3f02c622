"""Tests of run_dapper: DAPPER's filters on the package's twin problems, scored as the package scores its own.

The tests that run DAPPER are skipped where it is not installed (CI's main
environment); those that check the arguments, the missing-DAPPER error and
the scoring helper run everywhere: every argument is checked before DAPPER is
imported.
"""

import importlib.util
import sys

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn.assimilation import EnKF, SerialEnKF, TwinResult, make_twin_problem, twin_experiment
from sklearn_measattn.assimilation._dapper import DAPPER_METHODS, _run_dapper, run_dapper
from sklearn_measattn.assimilation._twin import _cycle_scores

needs_dapper = pytest.mark.skipif(
    importlib.util.find_spec("dapper") is None, reason="DAPPER is not installed (pip install sklearn-measattn[assimilation])"
)

SMALL = {"EnKF": {"infl": 1.02}, "EnKF_sqrt": {"infl": 1.02}, "LETKF": {"infl": 1.02, "loc_rad": 3}, "PartFilt": {"reg": 0.7, "NER": 0.5}}


@pytest.fixture(scope="module")
def gaussian():
    return make_twin_problem(n_variables=10, n_cycles=200, random_state=0)


@pytest.fixture
def no_dapper(monkeypatch):
    """Make ``import dapper`` (and its submodules) fail, as where it is not installed."""
    for name in [name for name in sys.modules if name == "dapper" or name.startswith("dapper.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "dapper", None)


# --------------------------------------------------------------------------- #
# Without DAPPER
# --------------------------------------------------------------------------- #
def test_missing_dapper_raises_import_error_naming_the_extra(no_dapper, gaussian):
    with pytest.raises(ImportError, match=r"pip install sklearn-measattn\[assimilation\]"):
        run_dapper("EnKF", gaussian, ensemble_size=10, spin_up=50, infl=1.02)


@pytest.mark.parametrize(
    "method, kwargs, match",
    [
        ("EnKF_PertObs", {}, r"'method' parameter .* \{'EnKF', 'EnKF_sqrt', 'LETKF', 'PartFilt'\}"),
        ("enkf", {}, "'method' parameter"),
        ("EnKF", {"inflation": 1.05}, r"\['inflation'\] that DAPPER's EnKF does not take here; it takes infl, rot"),
        ("EnKF", {"N": 20}, "ensemble_size"),
        ("EnKF", {"upd_a": "Sqrt"}, "does not take"),
        ("EnKF", {"infl": 0.0}, "infl"),
        ("LETKF", {"infl": 1.02}, "needs loc_rad"),
        ("LETKF", {"loc_rad": -1.0}, "loc_rad"),
        ("PartFilt", {"NER": 1.5}, "NER"),
        ("PartFilt", {"loc_rad": 4}, "does not take"),
    ],
)
def test_bad_method_or_parameters_raise_before_dapper_is_imported(no_dapper, gaussian, method, kwargs, match):
    # DAPPER made unimportable: an InvalidParameterError (not the ImportError) shows the check comes first
    with pytest.raises(InvalidParameterError, match=match):
        run_dapper(method, gaussian, ensemble_size=10, spin_up=50, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"spin_up": 200}, "spin_up=200 leaves no cycle"),
        ({"ensemble_size": 1}, "ensemble_size"),
        ({"ensemble_size": 10.0}, "ensemble_size"),
        ({"random_state": "0"}, "random_state"),
    ],
)
def test_bad_run_parameters_raise_before_dapper_is_imported(no_dapper, gaussian, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        run_dapper("EnKF", gaussian, **{"ensemble_size": 10, "spin_up": 50, **kwargs})


def test_problem_must_be_a_twin_problem(no_dapper, gaussian):
    with pytest.raises(InvalidParameterError, match="'problem' parameter"):
        run_dapper("EnKF", gaussian.truth, ensemble_size=10)


def test_weighted_scores_with_equal_weights_are_the_cycle_scores():
    rng = np.random.default_rng(0)
    ensemble, truth = rng.normal(size=(30, 6)), rng.normal(size=6)
    assert np.allclose(_cycle_scores(ensemble, truth, np.full(30, 7.0)), _cycle_scores(ensemble, truth))
    assert _cycle_scores(ensemble, truth, None) == _cycle_scores(ensemble, truth)
    # a weight of 0 leaves a member out
    weights = np.r_[np.ones(20), np.zeros(10)]
    assert np.allclose(_cycle_scores(ensemble, truth, weights), _cycle_scores(ensemble[:20], truth))


# --------------------------------------------------------------------------- #
# With DAPPER
# --------------------------------------------------------------------------- #
@needs_dapper
def test_first_analysis_is_the_packages_on_the_same_observation():
    """Pairing, exactly: same initial ensemble, forecast and observation give the same first analysis.

    DAPPER's ETKF (``EnKF_sqrt`` without inflation or rotation) and the
    package's serial EAKF are different square roots of the same Kalman
    update: from the same forecast and observation they reach the same
    analysis mean and variances. Had DAPPER paired ``yy[k]`` with another
    truth time than the package, its forecast would still agree and its
    analysis would not.
    """
    problem = make_twin_problem(n_variables=8, n_cycles=30, random_state=3)
    cycles = {}

    def record(k, forecast, analysis, truth):
        cycles[k] = (forecast.mean(axis=0), analysis.mean(axis=0), analysis.std(axis=0, ddof=1), truth)

    twin_experiment(SerialEnKF(inflation=1.0), problem, ensemble_size=12, spin_up=0, random_state=7, callback=record)
    result, xp = _run_dapper("EnKF_sqrt", problem, ensemble_size=12, spin_up=0, random_state=7, method_params={"rot": False})
    forecast_mean, analysis_mean, analysis_std, truth = cycles[0]
    np.testing.assert_array_equal(xp.stats.mu.f[0], forecast_mean)  # the same model, bit for bit
    np.testing.assert_allclose(xp.stats.mu.a[0], analysis_mean, atol=1e-10)
    np.testing.assert_allclose(xp.stats.spread.a[0], analysis_std, atol=1e-10)
    np.testing.assert_array_equal(problem.truth[1], truth)
    assert result.rmse_per_cycle[0] == pytest.approx(np.sqrt(np.mean((analysis_mean - problem.truth[1]) ** 2)))


@needs_dapper
def test_dapper_enkf_tracks_the_truth_like_the_packages(gaussian):
    ours = twin_experiment(EnKF(inflation=1.02), gaussian, ensemble_size=20, spin_up=50, random_state=0)
    free = twin_experiment("none", gaussian, ensemble_size=20, spin_up=50, random_state=0)
    theirs = run_dapper("EnKF", gaussian, ensemble_size=20, spin_up=50, random_state=0, infl=1.02)
    assert not theirs.diverged
    assert abs(theirs.rmse - ours.rmse) < 0.25 * ours.rmse
    assert theirs.rmse < 0.1 * free.rmse


@needs_dapper
@pytest.mark.parametrize("method", DAPPER_METHODS)
def test_every_method_runs_and_is_scored_as_dapper_scores_it(gaussian, method):
    members = 300 if method == "PartFilt" else 20
    result, xp = _run_dapper(method, gaussian, ensemble_size=members, spin_up=50, random_state=0,
                             method_params=SMALL[method])
    assert isinstance(result, TwinResult)
    assert result.analysis.startswith(f"DAPPER {xp.da_method}(")
    assert result.ensemble_size == members and result.spin_up == 50
    assert not result.diverged and result.rmse < 1.0
    assert result.rmse_per_cycle.shape == result.energy_score_per_cycle.shape == (gaussian.n_cycles,)
    assert result.seconds_per_cycle > 0
    # per cycle, against the same truth: DAPPER's own statistics of its analysis (weighted for the particle filter)
    np.testing.assert_allclose(result.rmse_per_cycle, xp.stats.err.rms.a[:], rtol=1e-10)
    np.testing.assert_allclose(result.spread_per_cycle, xp.stats.spread.rms.a[:], rtol=1e-10)
    np.testing.assert_allclose(result.crps_per_cycle, xp.stats.crps.m.a[:], rtol=1e-8)
    # and its time averages, with BurnIn at the end of the spin-up
    xp.stats.average_in_time()
    assert result.rmse == pytest.approx(xp.avrgs.err.rms.a.val, rel=1e-10)


@needs_dapper
def test_same_seed_same_result_and_dapper_state_restored(gaussian):
    from dapper.tools import progressbar, seeding

    state, progbar = seeding.rng.bit_generator.state, progressbar.disable_progbar
    first = run_dapper("EnKF", gaussian, ensemble_size=10, spin_up=50, random_state=4, infl=1.02)
    assert seeding.rng.bit_generator.state == state and progressbar.disable_progbar == progbar
    second = run_dapper("EnKF", gaussian, ensemble_size=10, spin_up=50, random_state=4, infl=1.02)
    np.testing.assert_array_equal(first.rmse_per_cycle, second.rmse_per_cycle)
    other = run_dapper("EnKF", gaussian, ensemble_size=10, spin_up=50, random_state=5, infl=1.02)
    assert other.rmse != first.rmse


@needs_dapper
@pytest.mark.parametrize("method", ["EnKF", "LETKF"])
def test_cauchy_noise_is_reported_diverged_not_raised(method):
    problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=200, random_state=1)
    result = run_dapper(method, problem, ensemble_size=16, spin_up=50, random_state=0, **SMALL[method])
    assert result.diverged and result.diverged_at is not None
    if not np.isfinite(result.rmse):  # stopped: every cycle from there scores inf, as in twin_experiment
        assert np.all(np.isinf(result.rmse_per_cycle[result.diverged_at :]))
        assert np.all(np.isfinite(result.rmse_per_cycle[: result.diverged_at]))


@needs_dapper
def test_docstring_example_runs():
    problem = make_twin_problem(n_variables=10, n_cycles=300, random_state=0)
    ours = twin_experiment("enkf", problem, ensemble_size=20, random_state=0)
    theirs = run_dapper("EnKF", problem, ensemble_size=20, infl=1.02, random_state=0)
    assert bool(abs(theirs.rmse - ours.rmse) < 0.5 * ours.rmse)
