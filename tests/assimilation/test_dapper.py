"""Tests of run_dapper (DAPPER's filters on the package's twin problems, scored as the package scores its own)
and of dapper_method (the package's analysis steps as DAPPER methods).

The tests that run DAPPER are skipped where it is not installed (CI's main
environment); those that check the arguments, the missing-DAPPER error and
the scoring helper run everywhere: every argument is checked before DAPPER is
imported.
"""

import dataclasses
import importlib.util
import sys

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn.assimilation import (
    EnKF,
    ObservationModel,
    RankHistogramFilter,
    SerialEnKF,
    TwinResult,
    dapper_method,
    make_twin_problem,
    twin_experiment,
)
from sklearn_measattn.assimilation._dapper import DAPPER_METHODS, _run_dapper, run_dapper
from sklearn_measattn.assimilation._twin import _cycle_scores

needs_dapper = pytest.mark.skipif(
    importlib.util.find_spec("dapper") is None, reason="DAPPER is not installed (pip install sklearn-measattn[assimilation])"
)

SMALL = {"EnKF": {"infl": 1.02}, "EnKF_sqrt": {"infl": 1.02}, "EnKF_N": {"xN": 1.0}, "LETKF": {"infl": 1.02, "loc_rad": 3},
         "iEnKS": {"Lag": 1, "nIter": 3, "xN": 1.0}, "PartFilt": {"reg": 0.7, "NER": 0.5}}


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
@pytest.mark.slow
def test_missing_dapper_raises_import_error_naming_the_extra(no_dapper, gaussian):
    with pytest.raises(ImportError, match=r"pip install sklearn-measattn\[assimilation\]"):
        run_dapper("EnKF", gaussian, ensemble_size=10, spin_up=50, infl=1.02)


@pytest.mark.parametrize(
    "method, kwargs, match",
    [
        ("EnKF_PertObs", {}, r"'method' parameter .* \{'EnKF', 'EnKF_sqrt', 'EnKF_N', 'LETKF', 'iEnKS', 'PartFilt'\}"),
        ("enkf", {}, "'method' parameter"),
        ("EnKF", {"inflation": 1.05}, r"\['inflation'\]; for DAPPER's EnKF .* the keyword arguments it takes are infl, rot"),
        ("EnKF", {"N": 20}, "ensemble_size"),
        ("EnKF", {"upd_a": "Sqrt"}, "unexpected keyword argument"),
        ("EnKF", {"infl": 0.0}, "infl"),
        ("LETKF", {"infl": 1.02}, r"'loc_rad' parameter of DAPPER's LETKF .*\(it is required, e.g. loc_rad=4"),
        ("LETKF", {"loc_rad": -1.0}, "loc_rad"),
        ("LETKF", {"loc_rad": 4, "loc_batch": 0}, "loc_batch"),
        ("LETKF", {"loc_rad": 4, "loc_batch": 1.5}, "loc_batch"),
        ("EnKF", {"loc_batch": 1}, r"unexpected keyword argument\(s\) \['loc_batch'\]"),
        ("PartFilt", {"NER": 1.5}, "NER"),
        ("iEnKS", {"nIter": 0}, "nIter"),
        ("iEnKS", {"Lag": 1.5}, "Lag"),
        ("iEnKS", {"loc_rad": 4}, r"unexpected keyword argument\(s\) \['loc_rad'\]"),
        ("PartFilt", {"loc_rad": 4}, r"unexpected keyword argument\(s\) \['loc_rad'\]"),
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


def test_iEnKS_refuses_a_cycle_without_observations_before_dapper_is_imported(no_dapper, gaussian):
    observations = gaussian.observations.copy()
    observations[40] = np.nan
    observations[3, 0] = np.nan  # a partly observed cycle is fine
    problem = dataclasses.replace(gaussian, observations=observations)
    with pytest.raises(ValueError, match=r"iEnKS analyses every cycle, but 1 cycle\(s\) .* \(the first: 40\)"):
        run_dapper("iEnKS", problem, ensemble_size=10, spin_up=50, Lag=1)


@needs_dapper
def test_iEnKS_with_missing_observations_tracks_the_truth(gaussian):
    observations = gaussian.observations.copy()
    observations[np.random.default_rng(0).uniform(size=observations.shape) < 0.3] = np.nan
    problem = dataclasses.replace(gaussian, observations=observations)
    result = run_dapper("iEnKS", problem, ensemble_size=20, spin_up=50, random_state=0, **SMALL["iEnKS"])
    full = run_dapper("iEnKS", gaussian, ensemble_size=20, spin_up=50, random_state=0, **SMALL["iEnKS"])
    assert not result.diverged and result.rmse < 1.0
    assert result.rmse > full.rmse  # fewer observations, a larger error


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


# --------------------------------------------------------------------------- #
# dapper_method: the package's steps as DAPPER methods
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    "step, kwargs, match",
    [
        ("kalman", {}, "'step' parameter of dapper_method"),
        (SerialEnKF(inflation=0.5), {}, "'inflation' parameter of SerialEnKF"),
        ("serial_enkf", {"ensemble_size": 1}, "'ensemble_size' parameter of dapper_method"),
        ("serial_enkf", {"ensemble_size": 20.0}, "'ensemble_size'"),
        ("serial_enkf", {"observation_model": "cauchy"}, "'observation_model' parameter"),
        ("serial_enkf", {"random_state": "0"}, "'random_state' parameter"),
    ],
)
def test_dapper_method_bad_arguments_raise_before_dapper_is_imported(no_dapper, step, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        dapper_method(step, **kwargs)


def test_dapper_method_without_dapper_raises_import_error_naming_the_extra(no_dapper):
    with pytest.raises(ImportError, match=r"dapper_method needs DAPPER.*pip install sklearn-measattn\[assimilation\]"):
        dapper_method(SerialEnKF())


@pytest.fixture(scope="module")
def sakov():
    """DAPPER's standard Lorenz-96 setting (40 variables, all observed, unit noise), 40 cycles, its truth and obs."""
    pytest.importorskip("dapper")
    import dapper.mods as modelling
    from dapper.mods.Lorenz96.sakov2008 import HMM
    from dapper.tools.seeding import set_seed

    hmm = HMM.copy()
    hmm.tseq = modelling.Chronology(0.05, dko=1, Ko=40, BurnIn=0.5, Tplot=1)
    set_seed(3)
    xx, yy = hmm.simulate()
    return hmm, xx, yy


def _assimilate(xp, hmm, xx, yy, seed=3):
    from dapper.tools.seeding import set_seed

    set_seed(seed)
    xp.assimilate(hmm, xx, yy)
    xp.stats.average_in_time()
    return xp


def test_serial_enkf_in_dapper_is_dappers_square_root_enkf(sakov):
    """Same seed, same initial ensemble (DAPPER's first draw): the serial EAKF and DAPPER's ETKF without inflation
    or rotation are two square roots of the same Kalman update, so their first analysis has the same mean and
    spread; over the run they stay as close."""
    from dapper.da_methods import EnKF as DapperEnKF

    ours = _assimilate(dapper_method(SerialEnKF(inflation=1.0), ensemble_size=20), *sakov)
    theirs = _assimilate(DapperEnKF("Sqrt", N=20, infl=1.0, rot=False), *sakov)
    np.testing.assert_array_equal(ours.stats.mu.f[0], theirs.stats.mu.f[0])  # the same forecast, bit for bit
    np.testing.assert_allclose(ours.stats.mu.a[0], theirs.stats.mu.a[0], atol=1e-10)
    np.testing.assert_allclose(ours.stats.spread.a[0], theirs.stats.spread.a[0], atol=1e-10)
    assert ours.avrgs.err.rms.a.val == pytest.approx(theirs.avrgs.err.rms.a.val, rel=0.03)
    assert ours.avrgs.spread.rms.a.val == pytest.approx(theirs.avrgs.spread.rms.a.val, rel=0.03)
    # DAPPER's bookkeeping: forecast, analysis and universal series all written, the duration registered
    assert np.all(np.isfinite(ours.stats.err.rms.f[:])) and np.all(np.isfinite(ours.stats.err.rms.a[:]))
    assert ours.stat is not None and ours.avrgs.duration > 0


def test_rank_histogram_filter_in_an_xplist(sakov):
    import dapper

    xps = dapper.xpList([dapper_method(RankHistogramFilter(), ensemble_size=20),
                         dapper_method("serial_enkf", ensemble_size=20, random_state=0)])
    for xp in xps:
        _assimilate(xp, *sakov)
        for value in (xp.avrgs.err.rms.a.val, xp.avrgs.spread.rms.a.val, xp.avrgs.crps.m.a.val,
                      xp.avrgs.err.rms.f.val):
            assert np.isfinite(value)
        assert xp.avrgs.err.rms.a.val < 0.5  # it tracks the truth (the forecast's error is about 3.6 unobserved)
    table = xps.tabulate_avrgs(["rmse.a", "rmv.a"], colorize=False)
    assert "RankHistogramFilter()" in table and "serial_enkf" in table  # the step tells them apart
    assert [xp.da_method for xp in xps] == ["AnalysisStepMethod"] * 2


def test_observation_model_comes_from_dappers_operator_and_noise(sakov):
    import dapper.mods as modelling

    hmm, xx, _ = sakov
    partial = hmm.copy()
    partial.Obs = modelling.TimeDependentOperator(**modelling.partial_Id_Obs(40, np.arange(0, 40, 2)), noise=0.25)
    yy = np.array([xx[k, ::2] + 0.5 for k in partial.tseq.kko])
    seen = []

    def probe(forecast, observation, *, observation_model):
        seen.append((observation_model, observation))
        return forecast

    _assimilate(dapper_method(probe, ensemble_size=5), partial, xx, yy)
    model, observation = seen[0]
    assert len(seen) == partial.tseq.Ko + 1
    np.testing.assert_array_equal(model.observed, np.arange(0, 40, 2))
    assert model.noise == "gaussian" and model.noise_scale == pytest.approx(0.5)
    np.testing.assert_array_equal(observation, yy[0])


def _operator(name):
    import dapper.mods as modelling
    from dapper.tools.matrices import CovMat
    from dapper.tools.randvars import GaussRV, LaplaceRV

    direct = modelling.Id_Obs(40)
    if name == "averaging":
        return {"M": 40, "model": lambda E: 0.5 * (E + np.roll(E, 1, axis=-1)), "noise": 1}
    if name == "squared":
        return {"M": 40, "model": lambda E: E**2, "noise": 1}
    if name == "correlated":
        return {**direct, "noise": GaussRV(C=CovMat(np.eye(40) + 0.3 * np.eye(40, k=1) + 0.3 * np.eye(40, k=-1)))}
    if name == "unequal":
        return {**direct, "noise": GaussRV(C=np.linspace(0.5, 1.5, 40))}
    return {**direct, "noise": LaplaceRV(C=1, M=40)}


@pytest.mark.parametrize(
    "name, match",
    [
        ("averaging", r"HMM.Obs\(0\) is not a direct observation of state variables"),
        ("squared", "is not a direct observation"),
        ("correlated", "not independent with one positive variance"),
        ("unequal", "not independent with one positive variance"),
        ("laplace", "noise is a LaplaceRV.*pass observation_model="),
    ],
)
def test_other_observation_operators_are_refused_before_any_cycle(sakov, name, match):
    import dapper.mods as modelling

    hmm, xx, yy = sakov
    other = hmm.copy()
    other.Obs = modelling.TimeDependentOperator(**_operator(name))
    forecasts = []
    model = other.Dyn.model
    other.Dyn.model = lambda *args: forecasts.append(1) or model(*args)
    xp = dapper_method(SerialEnKF(), ensemble_size=10)
    with pytest.raises(ValueError, match=match):
        xp.assimilate(other, xx, yy)
    assert forecasts == []


def test_observation_model_overrides_the_hmm_for_heavy_tailed_noise(sakov):
    hmm, xx, _ = sakov
    cauchy = ObservationModel(n_variables=40, noise="cauchy", noise_scale=0.5)
    rng = np.random.RandomState(0)
    yy = np.array([cauchy.sample(xx[k], rng) for k in hmm.tseq.kko])
    xp = _assimilate(dapper_method(RankHistogramFilter(), ensemble_size=20, observation_model=cauchy), hmm, xx, yy)
    assert np.isfinite(xp.avrgs.err.rms.a.val) and xp.avrgs.err.rms.a.val < 1.0
    with pytest.raises(ValueError, match="observation_model has n_variables=8"):
        dapper_method(RankHistogramFilter(), observation_model=ObservationModel(n_variables=8)).assimilate(hmm, xx, yy)
    with pytest.raises(ValueError, match=r"yy\[0\] does not fit"):
        every_other = ObservationModel(n_variables=40, observed="every_other")
        dapper_method(RankHistogramFilter(), observation_model=every_other).assimilate(hmm, xx, yy)


def test_dapper_method_is_reproducible_and_pickles(sakov):
    import dill

    first = _assimilate(dapper_method("enkf", ensemble_size=10), *sakov)
    second = _assimilate(dapper_method("enkf", ensemble_size=10), *sakov)
    np.testing.assert_array_equal(first.stats.mu.a[:], second.stats.mu.a[:])  # DAPPER's seed seeds the step too
    other = _assimilate(dapper_method("enkf", ensemble_size=10), *sakov, seed=4)
    assert not np.array_equal(first.stats.mu.a[:], other.stats.mu.a[:])
    copy = dill.loads(dill.dumps(dapper_method("enkf", ensemble_size=10)))  # xpList.launch stores xps with dill
    assert type(copy) is type(first) and repr(copy) == repr(dapper_method("enkf", ensemble_size=10))


def test_dapper_method_docstring_example_runs():
    pytest.importorskip("dapper")
    import dapper
    import dapper.mods as modelling
    from dapper.da_methods import EnKF as DapperEnKF
    from dapper.mods.Lorenz96.sakov2008 import HMM
    from dapper.tools.seeding import set_seed

    HMM = HMM.copy()
    HMM.tseq = modelling.Chronology(0.05, dko=1, Ko=60, BurnIn=1, Tplot=1)
    set_seed(3)
    xx, yy = HMM.simulate()
    xps = dapper.xpList([DapperEnKF("Sqrt", N=20, infl=1.02),
                         dapper_method(SerialEnKF(inflation=1.02), ensemble_size=20),
                         dapper_method(RankHistogramFilter(), ensemble_size=20)])
    for xp in xps:
        set_seed(3)
        xp.assimilate(HMM, xx, yy)
        xp.stats.average_in_time()
    assert [bool(xp.avrgs.err.rms.a.val < 0.5) for xp in xps] == [True, True, True]
    assert "rmse.a" in xps.tabulate_avrgs(["rmse.a", "rmv.a"], colorize=False)


@needs_dapper
def test_dapper_results_hold_the_forecast_statistics_beside_the_analysis():
    problem = make_twin_problem(n_variables=8, n_cycles=30, random_state=3)
    result, xp = _run_dapper("EnKF_sqrt", problem, ensemble_size=12, spin_up=5, random_state=7,
                             method_params={"infl": 1.02})
    assert type(xp).__name__ == "EnKF" and "stats" not in type(xp).__dict__  # the recording class is gone
    forecast_rmse = np.sqrt(np.mean((xp.stats.mu.f - problem.truth[1:]) ** 2, axis=1))
    np.testing.assert_allclose(result.forecast_rmse_per_cycle, forecast_rmse, rtol=1e-10)
    np.testing.assert_allclose(result.forecast_spread_per_cycle, np.sqrt(np.mean(xp.stats.spread.f**2, axis=1)),
                               rtol=1e-10)
    assert result.forecast_rmse == pytest.approx(forecast_rmse[5:].mean())


@needs_dapper
def test_dapper_inflates_the_analysis_where_the_package_inflates_the_forecast():
    problem = make_twin_problem(n_variables=8, n_cycles=3, random_state=3)
    runs = {infl: _run_dapper("EnKF_sqrt", problem, ensemble_size=12, spin_up=0, random_state=7,
                              method_params={"infl": infl, "rot": False})[1] for infl in (1.0, 1.1)}
    # DAPPER: the forecast before the first analysis is the same, the analysis anomalies are 1.1 times larger
    np.testing.assert_array_equal(runs[1.1].stats.spread.f[0], runs[1.0].stats.spread.f[0])
    np.testing.assert_allclose(runs[1.1].stats.spread.a[0], 1.1 * runs[1.0].stats.spread.a[0], rtol=1e-10)
    # the package: the forecast is inflated before the update; the same forecast statistics, a wider analysis
    results = {inflation: twin_experiment(SerialEnKF(inflation=inflation), problem, ensemble_size=12, spin_up=0,
                                          random_state=7) for inflation in (1.0, 1.1)}
    assert results[1.1].forecast_spread_per_cycle[0] == results[1.0].forecast_spread_per_cycle[0]
    assert results[1.1].spread_per_cycle[0] != pytest.approx(1.1 * results[1.0].spread_per_cycle[0], rel=1e-6)
