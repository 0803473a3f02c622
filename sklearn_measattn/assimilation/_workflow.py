"""Tuning an analysis step on separate problems and comparing several on held-out ones, in parallel through joblib."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, delayed
from sklearn.model_selection import ParameterGrid

from ._baselines import AnalysisStep
from ._problem import TwinProblem
from ._twin import twin_experiment

__all__ = ["TUNING_RULE", "TuningResult", "compare_analyses", "tune_analysis"]

#: How :func:`tune_analysis` ranks the candidates.
TUNING_RULE = "fewest divergences over the tuning problems, then the lowest mean analysis RMSE (ties: first in grid)"


def _checked_problems(problems, caller):
    if isinstance(problems, TwinProblem):
        problems = [problems]
    problems = list(problems)
    if not problems or not all(isinstance(problem, TwinProblem) for problem in problems):
        raise TypeError(
            f"{caller} takes a non-empty list of TwinProblem (make_twin_problem(..., random_state=seed) for each "
            f"seed); got {[type(problem).__name__ for problem in problems] or 'an empty list'}."
        )
    return problems


def _checked_step(step, caller, name="step"):
    if not isinstance(step, AnalysisStep):
        raise TypeError(
            f"{caller} takes an AnalysisStep for {name} (e.g. LETKF(), RankHistogramFilter()); got "
            f"{type(step).__name__}."
        )
    step._check_parameters()


def _with_params(step, params):
    """A new step of ``step``'s class with its parameters and ``params``; a fitted estimator it holds is shared,
    not cloned (scikit-learn's ``clone`` would hand the step an unfitted copy)."""
    return type(step)(**{**step.get_params(deep=False), **params})


def _run_one(step, problem, ensemble_size, spin_up, random_state):
    result = twin_experiment(step, problem, ensemble_size=ensemble_size, spin_up=spin_up, random_state=random_state)
    return {"rmse": float(result.rmse), "crps": float(result.crps), "spread": float(result.spread),
            "diverged": bool(result.diverged), "ms_per_cycle": 1e3 * float(result.seconds_per_cycle)}


@dataclass
class TuningResult:
    """What :func:`tune_analysis` found: the chosen step and every candidate's scores.

    Parameters
    ----------
    best_step : AnalysisStep
        A fresh copy of the step with the chosen parameters (unbound).
    best_params : dict
        The chosen parameters.
    candidates : list of dict
        One entry per candidate, in grid order: ``params``, ``n_diverged``,
        ``mean_rmse`` and ``rmse`` (one value per tuning problem; inf where
        the run diverged before the end).
    rule : str
        The rule that chose (:data:`TUNING_RULE`).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import LETKF, make_twin_problem, tune_analysis
    >>> problem = make_twin_problem(n_variables=12, n_cycles=40, random_state=0)
    >>> tuning = tune_analysis(LETKF(), {"inflation": [1.0, 1.05]}, [problem], ensemble_size=8, spin_up=10)
    >>> tuning.candidates[0]["params"], tuning.rule.split(",")[0]
    ({'inflation': 1.0}, 'fewest divergences over the tuning problems')
    """

    best_step: AnalysisStep
    best_params: dict
    candidates: list = field(repr=False)
    rule: str = TUNING_RULE


def tune_analysis(step, param_grid, problems, *, ensemble_size=40, spin_up=100, random_state=0, n_jobs=None):
    """Choose an analysis step's parameters on tuning problems: fewest divergences, then lowest mean RMSE.

    Every candidate of ``param_grid`` (scikit-learn's
    :class:`~sklearn.model_selection.ParameterGrid` convention: a dict of
    lists, or a list of such dicts) runs a twin experiment on every problem,
    with the same ``random_state`` (the same initial ensemble and
    perturbations for every candidate). The runs are independent and go
    through :class:`joblib.Parallel`: ``n_jobs`` workers, or the joblib
    backend in effect (Dask's spreads them over a cluster); the result does
    not depend on ``n_jobs`` beyond floating-point rounding (a worker may run
    BLAS on fewer threads). Use problems separate from the ones the step is
    evaluated on (other seeds): the tuned step is only as good as its
    held-out comparison (:func:`compare_analyses`).

    Parameters
    ----------
    step : AnalysisStep
        The step whose parameters are tuned (not changed: copies are run).
    param_grid : dict or list of dict
        Parameter names to lists of values.
    problems : TwinProblem or list of TwinProblem
        The tuning problems.
    ensemble_size : int, default=40
        Members of every run.
    spin_up : int, default=100
        Cycles left out of the RMSE.
    random_state : int, default=0
        Seed of every run.
    n_jobs : int or None, default=None
        Parallel workers (joblib's convention: None is 1 unless a backend
        context says otherwise, -1 all cores).

    Returns
    -------
    TuningResult

    Examples
    --------
    >>> from sklearn_measattn.assimilation import LETKF, make_twin_problem, tune_analysis
    >>> problems = [make_twin_problem(n_variables=12, observed="every_other", n_cycles=80, random_state=seed)
    ...             for seed in (1000, 1001)]
    >>> tuning = tune_analysis(LETKF(), {"inflation": [1.0, 1.1], "localization_radius": [2.0, 4.0]}, problems,
    ...                        ensemble_size=8, spin_up=20)
    >>> sorted(tuning.best_params), len(tuning.candidates)
    (['inflation', 'localization_radius'], 4)
    """
    _checked_step(step, "tune_analysis")
    problems = _checked_problems(problems, "tune_analysis")
    grid = list(ParameterGrid(param_grid))
    steps = [_with_params(step, params) for params in grid]
    for candidate in steps:
        candidate._check_parameters()
    runs = Parallel(n_jobs=n_jobs)(
        delayed(_run_one)(candidate, problem, ensemble_size, spin_up, random_state)
        for candidate in steps for problem in problems
    )
    candidates = []
    for index, params in enumerate(grid):
        scores = runs[index * len(problems):(index + 1) * len(problems)]
        rmse = [score["rmse"] for score in scores]
        candidates.append({"params": params, "n_diverged": sum(score["diverged"] for score in scores),
                           "mean_rmse": float(np.mean(rmse)), "rmse": rmse})
    best = min(range(len(grid)), key=lambda i: (candidates[i]["n_diverged"], candidates[i]["mean_rmse"]))
    return TuningResult(best_step=_with_params(step, grid[best]), best_params=grid[best], candidates=candidates)


def compare_analyses(steps, problems, *, ensemble_size=40, spin_up=100, random_state=0, reference=None, n_jobs=None):
    """Run several analysis steps on the same held-out problems: per-problem scores, with ratios to a reference.

    Each step runs a twin experiment on every problem (one per seed) with the
    same ``random_state``; runs go through :class:`joblib.Parallel` and the
    rows do not depend on ``n_jobs`` beyond floating-point rounding.

    Parameters
    ----------
    steps : dict of str to AnalysisStep
        The steps, by the name their rows carry (tune each first, on other
        problems: :func:`tune_analysis`).
    problems : TwinProblem or list of TwinProblem
        The held-out problems.
    ensemble_size : int, default=40
        Members of every run.
    spin_up : int, default=100
        Cycles left out of the scores.
    random_state : int, default=0
        Seed of every run.
    reference : str or None, default=None
        The name of the step the ratios are to: each row gets
        ``rmse_ratio`` and ``crps_ratio``, its score over the reference's on
        the same problem.
    n_jobs : int or None, default=None
        Parallel workers (as in :func:`tune_analysis`).

    Returns
    -------
    list of dict
        One row per step and problem: ``step``, ``problem`` (its index),
        ``rmse``, ``crps``, ``spread``, ``diverged``, ``ms_per_cycle`` (the
        analysis step's mean time per cycle) and, with ``reference``, the
        ratios.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import LETKF, EnKF, compare_analyses, make_twin_problem
    >>> problems = [make_twin_problem(n_variables=12, n_cycles=60, random_state=seed) for seed in (1, 2)]
    >>> rows = compare_analyses({"LETKF": LETKF(), "EnKF": EnKF(localization_radius=4.0)}, problems,
    ...                         ensemble_size=8, spin_up=20, reference="LETKF")
    >>> len(rows), rows[0]["rmse_ratio"]
    (4, 1.0)
    """
    if not isinstance(steps, dict) or not steps:
        raise TypeError("compare_analyses takes a non-empty dict of steps by name, e.g. {'LETKF': LETKF(), ...}.")
    for name, step in steps.items():
        _checked_step(step, "compare_analyses", name=f"{name!r}")
    if reference is not None and reference not in steps:
        raise ValueError(f"reference={reference!r} is not one of the steps' names {sorted(steps)}.")
    problems = _checked_problems(problems, "compare_analyses")
    pairs = [(name, index) for name in steps for index in range(len(problems))]
    runs = Parallel(n_jobs=n_jobs)(
        delayed(_run_one)(steps[name], problems[index], ensemble_size, spin_up, random_state) for name, index in pairs
    )
    rows = [{"step": name, "problem": index, **run} for (name, index), run in zip(pairs, runs)]
    if reference is not None:
        scores = {row["problem"]: row for row in rows if row["step"] == reference}
        for row in rows:
            for score in ("rmse", "crps"):
                row[f"{score}_ratio"] = row[score] / scores[row["problem"]][score]
    return rows
