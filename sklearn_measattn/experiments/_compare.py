"""Kernel comparisons: train one model per (kernel, transform, seed), score it on held-out measures.

The engine behind ``measattn compare`` and the scripts in ``studies/``: on a
built-in benchmark (:func:`compare_kernels`) or on the user's own measures
(:func:`compare_kernels_on_data`). Each fit is judged by
:func:`sklearn_measattn.metrics.collapse_verdict` and, against the predictions
that need no model (rows ``pooled``, ``identity`` and, on the benchmarks,
``oracle``, scored with the same columns), by
:func:`sklearn_measattn.metrics.learned_verdict`. Distances are reported in
symlog space (where they are finite on infinite-moment data) and in raw space.
"""

from __future__ import annotations

import math
import numbers
import sys
import time

import numpy as np
from joblib import Parallel, delayed
from sklearn.model_selection import train_test_split

from .._param_validation import validate_parameter_constraints
from .._threads import torch_threads
from .._validation import Described, NumberInterval, check_measures
from ..datasets import load_benchmark, sample_target_law
from ..metrics import (
    REFERENCE_NAMES,
    across_sample_correlation,
    collapse_diagnostics,
    energy_distance,
    learned_verdict,
    reference_predictions,
    spread_ratio,
    wasserstein_distance,
)
from ._report import format_number
from ._template import check_kernels, experiment_estimator, fit_estimator

__all__ = ["ROW_FIELDS", "compare_kernels", "compare_kernels_on_data", "print_progress"]

#: Exact W1 (network simplex, O(n^3)) up to this many points, sliced W1 above.
EXACT_W1_MAX_POINTS = 512

#: Columns of the per-fit rows returned by :func:`compare_kernels`.
ROW_FIELDS = (
    "task", "tail", "tail_index", "kernel", "transform", "seed",
    "n_samples", "n_points", "n_test", "epochs", "d_model", "status",
    "energy_symlog", "w1_symlog", "energy", "w1", "w1_method", "attention_ess",
    "attention_ess_min_head", "spread_ratio_median", "spread_ratio_mean",
    "corr_scale", "corr_location", "collapse_attention", "collapse_within", "collapse_across",
    "collapsed", "learned", "energy_vs_baseline", "fit_time",
)

_COMPARE_CONSTRAINTS = {
    "n_test": [NumberInterval(numbers.Integral, 3, None, closed="left",
                              why="the across-sample correlation ranks the held-out measures")],
    "inspect": [Described(callable, "a callable inspect(model, X_test) -> dict"), None],
}

# Seeds of the held-out measures and of the oracle's fresh draws, apart from the training seeds.
_TEST_SEED_OFFSET, _ORACLE_SEED_OFFSET = 1_000_003, 2_000_003


def print_progress(message):
    """Print one progress line on stderr, flushed (the default ``progress`` of the comparisons).

    Parameters
    ----------
    message : str
        The line.

    Returns
    -------
    None

    Examples
    --------
    >>> from sklearn_measattn.experiments import print_progress
    >>> print_progress("[1/4] fit done")
    """
    print(message, file=sys.stderr, flush=True)


def _transform_name(transform):
    return "none" if transform in (None, "none") else str(transform)


def _as_measures(X, input_name):
    """Validated measures: a dense float array, or a list of 2-D float arrays when ragged."""
    dense, padding = check_measures(X, input_name=input_name, dtype=np.float64)
    if padding is None:
        return dense
    return [dense[i, padding[i] > 0] for i in range(len(dense))]


def _take(X, indices):
    """Measures ``indices`` of a dense array or a ragged list."""
    if isinstance(X, np.ndarray):
        return X[indices]
    return [X[i] for i in indices]


# Defaults of the comparisons' template where they differ from the estimator's: smaller, shorter fits.
_COMPARE_DEFAULTS = {"max_epochs": 40, "d_model": 32, "dim_feedforward": 64, "batch_size": 16}


def _fit_and_score(row, train, test, model, keep_example, n_threads, inspect=None):
    """Train ``model`` (unfitted) on ``train = (X, y)``, score it on ``test``; return ``(row, example or None)``."""
    with torch_threads(n_threads):
        return _fit_and_score_inner(dict(row), train, test, model, keep_example, inspect)


def _fit_and_score_inner(row, train, test, model, keep_example, inspect=None):
    row.update(kernel=model.kernel, transform=_transform_name(model.transform), seed=model.random_state,
               epochs=model.max_epochs, d_model=model.d_model)
    seed = model.random_state
    start = time.perf_counter()
    try:
        model.fit(*train)
    except FloatingPointError as exc:
        row.update({field: math.nan for field in ROW_FIELDS if field not in row})
        row.update(status="diverged", w1_method="", error=str(exc), fit_time=time.perf_counter() - start)
        return row, None
    fit_time = time.perf_counter() - start
    X_test, y_true = test
    y_pred = model.predict(X_test)
    _score(row, model, X_test, y_true, y_pred, seed)
    if inspect is not None:
        row.update(inspect(model, X_test))
    row["fit_time"] = fit_time
    example = {"X": X_test[0], "y": y_true[0], "y_pred": y_pred[0]} if keep_example else None
    return row, example


def _score(row, model, X_test, y_true, y_pred, seed):
    """Fill the metric columns of ``row`` for a prediction (``model=None``: one made without a model)."""
    w1_method = "exact" if row["n_points"] <= EXACT_W1_MAX_POINTS else "sliced"
    report = collapse_diagnostics(
        model, X_test, y_true, y_pred=y_pred, space="symlog", max_queries=256, random_state=seed
    )
    ratios = spread_ratio(y_true, y_pred, multioutput="raw_values")
    row.update(
        status="ok",
        energy_symlog=report["energy"],
        w1_symlog=report["w1"],
        energy=float(energy_distance(y_true, y_pred)),
        w1=float(wasserstein_distance(y_true, y_pred, method=w1_method, random_state=seed)),
        w1_method=w1_method,
        attention_ess=report["attention_ess"],
        attention_ess_min_head=report["attention_ess_min_head"],
        spread_ratio_median=report["spread_ratio"],
        spread_ratio_mean=float(np.nanmean(ratios)),
        corr_scale=report["corr_scale"],
        corr_location=float(across_sample_correlation(y_true, y_pred, statistic="location")),
        collapse_attention=report["attention"],
        collapse_within=report["within"],
        collapse_across=report["across"],
        collapsed=report["collapsed"],
    )


def _reference_rows(row, train, test, seed, oracle=None):
    """The rows of the predictions that need no model, scored like the fits."""
    X_test, y_true = test
    predictions = reference_predictions(X_test, y_true, train[1], oracle=oracle, random_state=seed)
    rows = []
    for name in REFERENCE_NAMES:
        if name in predictions:
            reference = dict(row, kernel=name, transform="none", seed=seed, epochs=math.nan, d_model=math.nan)
            start = time.perf_counter()
            _score(reference, None, X_test, y_true, predictions[name], seed)
            reference.update(collapse_attention=None, learned=None, energy_vs_baseline=math.nan,
                             fit_time=time.perf_counter() - start)
            rows.append(reference)
    return rows


def _judge_learning(rows, references):
    """Set ``learned`` and ``energy_vs_baseline`` of every fit row from the reference rows of its data and seed."""
    def key(row):
        return (row["task"], row["tail"], str(row["tail_index"]), row["seed"])

    energies = {}
    for reference in references:
        energies.setdefault(key(reference), {})[reference["kernel"]] = reference["energy_symlog"]
    for row in rows:
        found = energies.get(key(row), {})
        verdict = learned_verdict(row["energy_symlog"] if row["status"] == "ok" else None,
                                  pooled=found.get("pooled"), identity=found.get("identity"),
                                  oracle=found.get("oracle"))
        row.update(learned=verdict["learned"], energy_vs_baseline=verdict["ratio"])


def _benchmark_data(task, data_params, n_test, seed):
    """Training measures, held-out measures (a separate stream of the same distribution) and the row's keys."""
    train = load_benchmark(task, **data_params, random_state=seed)
    test = load_benchmark(task, **dict(data_params, n_samples=n_test), random_state=_TEST_SEED_OFFSET + seed)
    row = {
        "task": task, "tail": data_params["tail"],
        "tail_index": data_params["tail_index"] if data_params["tail"] != "gaussian" else math.nan,
        "n_samples": data_params["n_samples"], "n_points": data_params["n_points"], "n_test": n_test,
    }
    return row, train, test


def _benchmark_fit(task, data_params, n_test, model, keep_example, n_threads, inspect=None):
    row, train, test = _benchmark_data(task, data_params, n_test, model.random_state)
    return _fit_and_score(row, (train.data, train.target), (test.data, test.target), model, keep_example,
                          n_threads, inspect)


def _benchmark_references(task, data_params, n_test, seed):
    row, train, test = _benchmark_data(task, data_params, n_test, seed)
    oracle = sample_target_law(test, random_state=_ORACLE_SEED_OFFSET + seed)
    return _reference_rows(row, (train.data, train.target), (test.data, test.target), seed, oracle=oracle)


def _split(name, X, y, test_size, seed):
    train_idx, test_idx = train_test_split(np.arange(len(X)), test_size=test_size, random_state=seed)
    n_points = max(np.shape(x)[0] for x in X)
    row = {"task": name, "tail": "", "tail_index": math.nan, "n_samples": len(train_idx),
           "n_points": n_points, "n_test": len(test_idx)}
    return row, (_take(X, train_idx), _take(y, train_idx)), (_take(X, test_idx), _take(y, test_idx))


def _split_fit(name, X, y, test_size, model, keep_example, n_threads):
    row, train, test = _split(name, X, y, test_size, model.random_state)
    return _fit_and_score(row, train, test, model, keep_example, n_threads)


def _split_references(name, X, y, test_size, seed):
    row, train, test = _split(name, X, y, test_size, seed)
    return _reference_rows(row, train, test, seed)


def _progress_line(done, total, row):
    """One fit's line: under 120 characters (the data it ran on is in its seed's ``[no model]`` line)."""
    head = f"[{done}/{total}] {row['kernel']}/{row['transform']} seed {row['seed']}: "
    if row["status"] != "ok":
        return head + f"diverged after {format_number(row['fit_time'])} s: {row.get('error', '')}"
    return head + (
        f"energy {format_number(row['energy_symlog'])}, ESS/n {format_number(row['attention_ess'])}, "
        f"spread {format_number(row['spread_ratio_median'])}, corr(scale) {format_number(row['corr_scale'])}, "
        f"fit {format_number(row['fit_time'])} s"
    )


def _reference_line(rows):
    """One seed's no-model rows: the data, and the held-out energies (symlog space, as every energy printed)."""
    first = rows[0]
    head = f"[no model] {first['task']} {first['tail']} seed {first['seed']}: energy [symlog] ".replace("  ", " ")
    return head + ", ".join(f"{row['kernel']} {format_number(row['energy_symlog'])}" for row in rows)


def _run(calls, references, n_jobs, progress, return_examples):
    """Score the reference rows (here, they are quick), run the fits, judge each fit against its references."""
    reference_rows = []
    for fn, args in references:
        rows = fn(*args)
        reference_rows.extend(rows)
        if progress is not None and rows:
            progress(_reference_line(rows))
    if n_jobs == 1:
        results = (fn(*args, **kw) for fn, args, kw in calls)
    else:
        results = Parallel(n_jobs=n_jobs, return_as="generator")(calls)
    rows, examples = [], {}
    for done, (row, example) in enumerate(results, start=1):
        rows.append(row)
        if example is not None:
            examples[(row["kernel"], row["transform"])] = example
        if progress is not None:
            progress(_progress_line(done, len(calls), row))
    _judge_learning(rows, reference_rows)
    rows.extend(reference_rows)
    return (rows, examples) if return_examples else rows


def compare_kernels(
    task="matrix_inverse",
    *,
    kernels=("softmax", "poly", "log", "sigmoid"),
    transforms=(None, "symlog"),
    tail="student_t",
    tail_index=1.5,
    n_samples=128,
    n_points=64,
    n_test=64,
    seeds=(0,),
    estimator=None,
    n_jobs=1,
    torch_threads=None,
    progress=None,
    return_examples=False,
    kernel_params=None,
    benchmark_params=None,
    inspect=None,
):
    """Train one :class:`~sklearn_measattn.MeasureTransformerRegressor` per kernel, transform and seed on a benchmark.

    For every seed ``s`` the training measures are ``load_benchmark(task, ...,
    random_state=s)`` and the held-out measures an independent draw
    (``random_state=1_000_003 + s``); the model is seeded with ``s`` too. Each
    fitted model is scored on the held-out measures with the energy distance,
    W1 (exact up to 512 points, sliced above), the spread ratio (median and
    mean over measures) and the across-sample correlations of scale and
    location, and judged by :func:`~sklearn_measattn.metrics.collapse_verdict`.

    Each model is a clone of ``estimator`` (the template) with the kernel,
    transform and seed of its fit set; every other hyper-parameter, the
    number of epochs included, is the template's.

    Beside the fits, every seed gets the rows of three predictions that need
    no model, scored with the same columns (``kernel`` names them,
    ``transform`` is ``"none"``, the attention columns are empty):
    ``pooled`` (each held-out measure predicted by points drawn from all the
    training targets), ``identity`` (``y_pred = X``, when the input and
    target features match) and ``oracle`` (a fresh sample of each held-out
    measure's true target law, :func:`~sklearn_measattn.datasets.sample_target_law`:
    the two-sample level of each distance). Each fit's ``learned`` column
    applies :func:`~sklearn_measattn.metrics.learned_verdict` against its
    seed's ``pooled`` and ``identity`` rows, and ``energy_vs_baseline`` is its
    energy over the lower of the two.

    Parameters
    ----------
    task : {"matrix_inverse", "sheared_swap"}, default="matrix_inverse"
        Benchmark.
    kernels : sequence of str, default=("softmax", "poly", "log", "sigmoid")
        Attention kernels.
    transforms : sequence of {None, "none", "symlog"}, default=(None, "symlog")
        Data transforms.
    tail : {"gaussian", "student_t", "pareto"}, default="student_t"
        Base family of the benchmark.
    tail_index : float, default=1.5
        Its tail exponent.
    n_samples : int, default=128
        Training measures.
    n_points : int, default=64
        Points per measure.
    n_test : int, default=64
        Held-out measures (>= 3).
    seeds : sequence of int, default=(0,)
        One run per seed.
    estimator : MeasureTransformerRegressor or None, default=None
        The template of every fit, cloned with ``kernel``, ``transform`` and
        ``random_state`` set (and ``kernel_params``, when given). ``None``
        means ``MeasureTransformerRegressor(max_epochs=40, d_model=32,
        dim_feedforward=64, batch_size=16)``: a shorter, smaller fit than the
        estimator's defaults.
    n_jobs : int, default=1
        joblib workers over fits.
    torch_threads : int or None, default=None
        Torch intra-op threads per fit (restored afterwards). ``None`` means 1
        whatever ``n_jobs``: the models are small, one thread per fit is about
        as fast and far more robust on a busy CPU, and the same thread count
        makes a parallel run give the same numbers as a serial one (float
        reductions split over other thread counts round differently).
    progress : callable or None, default=None
        Called with a one-line string after each finished fit
        (:func:`print_progress` prints it on stderr).
    return_examples : bool, default=False
        Also return, for the first seed, the first held-out measure, its target
        and each model's prediction: ``{(kernel, transform): {"X", "y",
        "y_pred"}}``.
    kernel_params : dict or None, default=None
        Passed to the estimator with every kernel (e.g. ``{"degree": 2}`` with
        ``kernels=["poly"]``).
    benchmark_params : dict or None, default=None
        Further arguments of the benchmark's generator (``scale_range`` of the
        sheared swap, ``condition`` of the matrix inverse, ...), for training
        and held-out measures alike.
    inspect : callable or None, default=None
        ``inspect(model, X_test)`` returns a dict of extra columns for each
        fit's row, computed on the fitted model and the held-out input
        measures (a module-level function when ``n_jobs > 1``).

    Returns
    -------
    rows : list of dict
        One row per fit, then the reference rows of each seed; keys
        :data:`ROW_FIELDS` (and the keys ``inspect`` returns, on the fits).
    examples : dict
        Only with ``return_examples=True``.

    Examples
    --------
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.experiments import compare_kernels
    >>> template = MeasureTransformerRegressor(max_epochs=1, d_model=8, n_heads=2, batch_size=16)
    >>> rows = compare_kernels(kernels=["log"], transforms=[None], n_samples=8,
    ...                        n_points=16, n_test=4, estimator=template)
    >>> [(row["kernel"], row["status"]) for row in rows]
    [('log', 'ok'), ('pooled', 'ok'), ('identity', 'ok'), ('oracle', 'ok')]
    """
    validate_parameter_constraints(_COMPARE_CONSTRAINTS, {"n_test": n_test, "inspect": inspect},
                                   caller_name="compare_kernels")
    data_params = {"n_samples": n_samples, "n_points": n_points, "tail": tail, "tail_index": tail_index}
    if benchmark_params is not None:
        if not isinstance(benchmark_params, dict) or set(benchmark_params) & set(data_params):
            raise ValueError(
                f"benchmark_params must be a dict of further generator arguments (not {sorted(data_params)}, "
                f"which are parameters of their own), got {benchmark_params!r}."
            )
        data_params.update(benchmark_params)
    # Validate data parameters once, cheaply, before launching any fit.
    load_benchmark(task, **dict(data_params, n_samples=1, n_points=2), random_state=0)
    template = experiment_estimator(estimator, defaults=_COMPARE_DEFAULTS, caller="compare_kernels")
    check_kernels(template, kernels, kernel_params)
    seeds = list(seeds)
    n_threads = torch_threads if torch_threads is not None else 1
    calls = [
        delayed(_benchmark_fit)(task, data_params, n_test,
                                fit_estimator(template, kernel=kernel, transform=transform, seed=seed,
                                              kernel_params=kernel_params),
                                return_examples and seed == seeds[0], n_threads, inspect)
        for seed in seeds for kernel in kernels for transform in transforms
    ]
    references = [(_benchmark_references, (task, data_params, n_test, seed)) for seed in seeds]
    return _run(calls, references, n_jobs, progress, return_examples)


def compare_kernels_on_data(
    X,
    y,
    *,
    kernels=("softmax", "poly", "log", "sigmoid"),
    transforms=(None, "symlog"),
    test_size=0.25,
    name="data",
    seeds=(0,),
    estimator=None,
    n_jobs=1,
    torch_threads=None,
    progress=None,
    return_examples=False,
):
    """Train one model per kernel, transform and seed on your measures; score on held-out ones.

    For every seed ``s`` the measures (pairs ``X[i] -> y[i]``) are split into
    training and held-out measures by
    :func:`sklearn.model_selection.train_test_split` with ``random_state=s``
    (so each seed also sees another split), the model is seeded with ``s``, and
    it is scored on the held-out measures exactly as in
    :func:`compare_kernels`, beside the ``pooled`` and ``identity`` rows of
    that split (there is no ``oracle`` row: the true target law of your
    measures is unknown).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_points, n_features) or list of 2-D arrays
        Input measures (a list may be ragged).
    y : array-like of shape (n_samples, n_points_y, n_features_y) or list of 2-D arrays
        Target measures, one per input measure.
    kernels : sequence of str, default=("softmax", "poly", "log", "sigmoid")
        Attention kernels.
    transforms : sequence of {None, "none", "symlog"}, default=(None, "symlog")
        Data transforms.
    test_size : float or int, default=0.25
        Held-out measures: a fraction of ``n_samples`` or a count; at least 3
        measures are held out and at least 2 are left for training.
    name : str, default="data"
        Written in the ``task`` column of the rows and in progress lines.
    seeds, estimator, n_jobs, torch_threads, progress, return_examples
        As in :func:`compare_kernels`.

    Returns
    -------
    rows : list of dict
        One row per fit, then the reference rows of each seed; keys
        :data:`ROW_FIELDS` (``tail`` empty, ``tail_index`` ``nan``,
        ``n_points`` the largest measure's size).
    examples : dict
        Only with ``return_examples=True``.

    Raises
    ------
    ValueError
        For invalid measures, ``X`` and ``y`` of different lengths, a split that
        leaves fewer than 3 held-out or 2 training measures, or an unknown
        kernel, before any training; for invalid parameters of the template,
        when the first fit checks them.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.experiments import compare_kernels_on_data
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_t(3, size=(12, 16, 2))
    >>> template = MeasureTransformerRegressor(max_epochs=1, d_model=8, n_heads=2, n_layers=1, batch_size=16)
    >>> rows = compare_kernels_on_data(X, 2.0 * X, kernels=["log"], transforms=["symlog"], estimator=template)
    >>> rows[0]["n_samples"], rows[0]["n_test"], rows[0]["status"]
    (9, 3, 'ok')
    >>> [row["kernel"] for row in rows[1:]]
    ['pooled', 'identity']
    """
    X = _as_measures(X, "X")
    y = _as_measures(y, "y")
    if len(X) != len(y):
        raise ValueError(
            f"X has {len(X)} measures but y has {len(y)}; each input measure needs its target measure "
            "(in the same order)."
        )
    n_samples = len(X)
    if isinstance(test_size, numbers.Integral) and not isinstance(test_size, bool) and test_size > 0:
        n_test = int(test_size)
    elif isinstance(test_size, numbers.Real) and not isinstance(test_size, bool) and 0 < test_size < 1:
        n_test = int(math.ceil(test_size * n_samples))
    else:
        raise ValueError(f"test_size must be a fraction in (0, 1) or a positive count of measures, got {test_size!r}.")
    if n_test < 3 or n_samples - n_test < 2:
        raise ValueError(
            f"{n_samples} measures with test_size={test_size!r} hold out {n_test} and leave {n_samples - n_test} "
            "for training; the comparison needs at least 3 held-out measures (their predictions are ranked) "
            "and 2 for training. Pass more measures or change test_size."
        )
    template = experiment_estimator(estimator, defaults=_COMPARE_DEFAULTS, caller="compare_kernels_on_data")
    check_kernels(template, kernels)
    seeds = list(seeds)
    n_threads = torch_threads if torch_threads is not None else 1
    calls = [
        delayed(_split_fit)(str(name), X, y, n_test,
                            fit_estimator(template, kernel=kernel, transform=transform, seed=seed),
                            return_examples and seed == seeds[0], n_threads)
        for seed in seeds for kernel in kernels for transform in transforms
    ]
    references = [(_split_references, (str(name), X, y, n_test, seed)) for seed in seeds]
    return _run(calls, references, n_jobs, progress, return_examples)
