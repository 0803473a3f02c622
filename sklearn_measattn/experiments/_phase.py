"""The phase diagram of collapse and learning: tail index against kernel growth.

One *cell* is a benchmark, a tail index, a kernel and a transform; each of its
seeds is one fit by :func:`~sklearn_measattn.experiments.compare_kernels`,
written as one row with the attention ESS/n, the learned ratio (held-out
energy over the best no-model row), the hidden similarity across depth, the
learnt degree (``learned_poly``), the growth rate of the first layer's
log-weights along the keys, and the kernel's theoretical threshold.
:func:`phase_agreement` sets the measured collapse against the threshold.
"""

from __future__ import annotations

import json
import math
from numbers import Integral, Real

import numpy as np

from .._param_validation import validate_parameter_constraints
from .._validation import Choices, Described, NumberInterval
from ..datasets import load_benchmark
from ..kernels import get_kernel
from ..preprocessing import symlog
from ._compare import compare_kernels
from ._report import format_number
from ._template import experiment_estimator

__all__ = [
    "PHASE_KERNELS",
    "PHASE_FIELDS",
    "phase_diagram",
    "phase_key",
    "kernel_threshold",
    "phase_cells",
    "phase_agreement",
]

#: Kernels of the phase diagram, in order of decreasing growth: label -> (registry name, kernel_params).
PHASE_KERNELS = {
    "softmax": ("softmax", None),
    "poly2": ("poly", {"degree": 2.0}),
    "poly": ("poly", None),
    "compact": ("compact", None),
    "learned_poly": ("learned_poly", None),
    "log": ("log", None),
    "sigmoid": ("sigmoid", None),
}

_TASKS = ("matrix_inverse", "sheared_swap")
_TRANSFORMS = ("none", "symlog")
_MODEL_KEYS = ("n_samples", "n_points", "n_test", "epochs", "d_model", "n_heads", "n_layers")

#: Columns of the rows of :func:`phase_diagram`, in order.
PHASE_FIELDS = (
    "task", "tail", "tail_index", "kernel", "transform", "seed", *_MODEL_KEYS, "benchmark_params", "status",
    "attention_ess", "attention_ess_min_head", "spread_ratio_median", "corr_scale", "energy_symlog",
    "pooled_symlog", "identity_symlog", "oracle_symlog", "collapse_attention", "collapsed", "learned",
    "energy_vs_baseline", "hidden_similarity", "hidden_similarity_last", "learned_degree", "log_weight_rate",
    "log_weight_rate_q90", "threshold", "fit_time",
)


class _NonEmptySequenceOf(Described):
    """A constraint: a non-empty sequence (a lone string or number is one item) of items that each satisfy one
    of ``items`` (constraint objects)."""

    def __init__(self, *items):
        super().__init__(list, f"a non-empty sequence of items each {' or '.join(map(str, items))}")
        self.items = items

    def is_satisfied_by(self, val):
        values = _as_list(val)
        return bool(values) and all(any(item.is_satisfied_by(v) for item in self.items) for v in values)


def _as_list(values):
    if isinstance(values, (str, Real)):
        return [values]
    try:
        return list(values)
    except TypeError:
        return []


# Defaults of the phase diagram's template where they differ from the estimator's: small, short fits on the CPU.
_PHASE_DEFAULTS = {"max_epochs": 30, "d_model": 16, "n_heads": 2, "dim_feedforward": 32, "lr": 3e-3,
                   "batch_size": 16, "device": "cpu"}
_TAIL_INDEX = NumberInterval(Real, 0, math.inf, closed="neither", why="a Pareto tail index")
_INTEGRAL = Choices(("values", "weights"))
_PHASE_CONSTRAINTS = {
    "tasks": [_NonEmptySequenceOf(Choices(_TASKS))],
    "kernels": [_NonEmptySequenceOf(Choices(PHASE_KERNELS))],
    "transforms": [_NonEmptySequenceOf(Choices(_TRANSFORMS))],
    "tail_indices": [_NonEmptySequenceOf(_TAIL_INDEX, Choices(("gaussian",)))],
    "seeds": [_NonEmptySequenceOf(NumberInterval(Integral, 0, None, closed="left"))],
    "benchmark_params": [dict, None],
    "on_row": [callable, None],
}


def _number(value):
    """A float from a row cell (str from a CSV, number, None or '')."""
    if value in (None, ""):
        return math.nan
    return float(value)


def _key_number(value):
    value = _number(value)
    return "nan" if math.isnan(value) else f"{value:g}"


def phase_key(row):
    """The identity of one fit of the phase diagram, equal for a row and the same row read back from a CSV.

    Parameters
    ----------
    row : dict
        A row of :func:`phase_diagram` (numbers may be strings, as read by
        :class:`csv.DictReader`).

    Returns
    -------
    key : tuple of str
        Task, tail, tail index, kernel label, transform, seed, the sizes
        (:data:`PHASE_FIELDS` from ``n_samples`` to ``n_layers``) and the
        further benchmark parameters.

    Examples
    --------
    >>> from sklearn_measattn.experiments import phase_key
    >>> row = {"task": "sheared_swap", "tail": "pareto", "tail_index": 0.7, "kernel": "log",
    ...        "transform": "none", "seed": 0, "n_samples": 256, "n_points": 64, "n_test": 32,
    ...        "epochs": 30, "d_model": 16, "n_heads": 2, "n_layers": 2, "benchmark_params": ""}
    >>> phase_key(row) == phase_key({key: str(value) for key, value in row.items()})
    True
    """
    return (str(row["task"]), str(row["tail"]), _key_number(row["tail_index"]), str(row["kernel"]),
            str(row["transform"]), str(int(_number(row["seed"]))),
            *(_key_number(row[key]) for key in _MODEL_KEYS), str(row.get("benchmark_params") or ""))


def kernel_threshold(kernel, *, transform="none", learned_degree=None, integral="values"):
    """The tail index at or below which a phase-diagram kernel's attention integral diverges.

    Without a transform it is :attr:`~sklearn_measattn.kernels.AttentionKernel.min_tail_index`
    (``inf`` for softmax: no polynomial tail is integrable; ``p + 1`` for a
    poly kernel of degree ``p``, the learnt one's mean degree for
    ``learned_poly``): the threshold of the integral of the values,
    ``int kappa(<q, k(y)>) v(y) dmu(y)``, which grows one power faster than
    the kernel. The normaliser ``int kappa(<q, k(y)>) dmu(y)``, which alone
    sets the attention weights and so their effective sample size, diverges
    one power later: ``integral="weights"`` gives that threshold
    (``min_tail_index - 1``: ``p`` for poly, 0 for log and sigmoid). The
    symlog of a Pareto(``alpha``) coordinate has an
    exponential tail of rate ``alpha``, which every kernel of polynomial or
    slower growth integrates (threshold 0); softmax integrates it only while
    its scores grow along the keys more slowly than ``alpha`` (a property of
    the trained model, so there is no fixed threshold: ``None``).

    Parameters
    ----------
    kernel : str
        A label of :data:`PHASE_KERNELS`.
    transform : {"none", "symlog"}, default="none"
        The data transform.
    learned_degree : float or None, default=None
        The learnt degree, for ``learned_poly`` (``None``: unknown, no threshold).
    integral : {"values", "weights"}, default="values"
        The integral of the values (numerator) or the normaliser alone.

    Returns
    -------
    threshold : float or None
        ``None`` when the threshold is not fixed by the kernel.

    Examples
    --------
    >>> from sklearn_measattn.experiments import kernel_threshold
    >>> kernel_threshold("poly2"), kernel_threshold("log"), kernel_threshold("softmax")
    (3.0, 1.0, inf)
    >>> kernel_threshold("learned_poly", learned_degree=0.6)
    1.6
    >>> kernel_threshold("poly", transform="symlog"), kernel_threshold("softmax", transform="symlog")
    (0.0, None)
    >>> kernel_threshold("poly2", integral="weights"), kernel_threshold("log", integral="weights")
    (2.0, 0.0)
    """
    validate_parameter_constraints(
        {"kernel": [Choices(PHASE_KERNELS)], "transform": [Choices(_TRANSFORMS)], "integral": [_INTEGRAL]},
        {"kernel": kernel, "transform": transform, "integral": integral}, caller_name="kernel_threshold",
    )
    name, params = PHASE_KERNELS[kernel]
    if transform == "symlog":
        return None if name == "softmax" else 0.0
    shift = 1.0 if integral == "values" else 0.0
    if name == "learned_poly":
        degree = _number(learned_degree)
        return None if math.isnan(degree) else degree + shift
    return float(get_kernel(name, **(params or {})).min_tail_index) - (1.0 - shift)


def _inspect_fit(model, X_test):
    """Extra columns of a fit: hidden similarity across depth, learnt degree, log-weight growth rate."""
    depth = [float(np.median(c[np.isfinite(c)])) if np.isfinite(c).any() else math.nan
             for c in model.hidden_similarity(X_test).T]
    degrees = model.learned_kernel_params_.get("degree")
    X_small = np.asarray(X_test[:8], dtype=np.float64)
    weights = model.attention_weights(X_small, layer=0)  # (m, heads, n, n)
    keys = symlog(X_small) if model.transform == "symlog" else X_small
    rates = []
    for i in range(len(X_small)):
        design = np.column_stack([np.ones(len(keys[i])), keys[i]])
        for head in weights[i]:
            with np.errstate(divide="ignore"):
                log_w = np.log(head)
            for row in log_w:
                finite = np.isfinite(row)
                if finite.sum() > design.shape[1]:
                    slope = np.linalg.lstsq(design[finite], row[finite], rcond=None)[0][1:]
                    rates.append(float(np.max(np.abs(slope))))
    return {
        "hidden_similarity": json.dumps([round(v, 4) for v in depth]),
        "hidden_similarity_last": depth[-1] if depth else math.nan,
        "learned_degree": float(np.mean(degrees[0])) if degrees is not None else math.nan,
        "log_weight_rate": float(np.median(rates)) if rates else math.nan,
        "log_weight_rate_q90": float(np.quantile(rates, 0.9)) if rates else math.nan,
    }


def phase_diagram(
    *,
    tasks=_TASKS,
    kernels=tuple(PHASE_KERNELS),
    transforms=_TRANSFORMS,
    tail_indices=(0.4, 0.7, 1.0, 1.5, 2.0, 3.0, "gaussian"),
    seeds=(0, 1),
    n_samples=256,
    n_points=64,
    n_test=32,
    estimator=None,
    torch_threads=1,
    benchmark_params=None,
    skip=(),
    on_row=None,
    progress=None,
):
    """Fit every cell of the phase diagram (task x tail index x kernel x transform), one row per seed.

    Each fit is one call of :func:`compare_kernels` on a Pareto benchmark (or
    the Gaussian control), judged against the no-model rows of its seed: the
    row keeps the attention ESS/n of the first layer (median over held-out
    measures and heads), the package's ``collapsed`` and ``learned`` verdicts,
    the learned ratio ``energy_vs_baseline`` (held-out symlog energy over the
    lower of the ``pooled`` and ``identity`` rows), the energies of the
    no-model rows, the hidden similarity after the embedding and each block
    (a JSON list), the learnt first-layer degree (``learned_poly``), the
    growth rate of the first layer's log-weights along the keys
    ``log_weight_rate`` (median over queries of the largest coordinate of the
    least-squares slope of ``log w_ij`` on the key point in the model's input
    space: symlog space with ``transform="symlog"``; for softmax it is the
    q.k scale per unit of key) and the kernel's threshold
    (:func:`kernel_threshold`).

    Parameters
    ----------
    tasks : sequence of {"matrix_inverse", "sheared_swap"}
        Benchmarks.
    kernels : sequence of str, default=all of :data:`PHASE_KERNELS`
        Kernel labels.
    transforms : sequence of {"none", "symlog"}
        Data transforms.
    tail_indices : sequence of float or "gaussian"
        Pareto tail indices (``P(|Z| > t) = (1 + t)^-alpha`` per coordinate);
        ``"gaussian"`` is the light-tailed control.
    seeds : sequence of int, default=(0, 1)
        One fit per seed (data, held-out data and weights).
    n_samples, n_points, n_test
        As in :func:`compare_kernels`.
    estimator : MeasureTransformerRegressor or None, default=None
        The template of every fit (as in :func:`compare_kernels`); its
        ``max_epochs``, ``d_model``, ``n_heads`` and ``n_layers`` are
        written in the rows (``epochs`` for the first). ``None`` means
        ``MeasureTransformerRegressor(max_epochs=30, d_model=16, n_heads=2,
        dim_feedforward=32, lr=3e-3, batch_size=16, device="cpu")``.
    torch_threads : int or None, default=1
        As in :func:`compare_kernels`.
    benchmark_params : dict or None, default=None
        Further generator arguments (e.g. ``{"scale_range": (0.1, 10.0)}``
        for the sheared swap), recorded as JSON in the rows.
    skip : iterable of dict, default=()
        Rows already run (e.g. read back from a CSV): fits with the same
        :func:`phase_key` are not run again.
    on_row : callable or None, default=None
        Called with each new row as soon as its fit is scored (to append it
        to a CSV, so an interrupted run resumes).
    progress : callable or None, default=None
        Called with a one-line summary of each fit.

    Returns
    -------
    rows : list of dict
        The new rows (keys :data:`PHASE_FIELDS`), in grid order.

    Raises
    ------
    ValueError
        For an unknown task, kernel or transform, a tail index that is not
        positive and finite, bad seeds or benchmark parameters; before any fit.

    Examples
    --------
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.experiments import phase_diagram
    >>> template = MeasureTransformerRegressor(max_epochs=1, d_model=8, n_heads=2, n_layers=1, device="cpu")
    >>> rows = phase_diagram(tasks=["sheared_swap"], kernels=["log"], transforms=["none"],
    ...                      tail_indices=[0.7], seeds=[0], n_samples=8, n_points=16, n_test=4,
    ...                      estimator=template)
    >>> row = rows[0]
    >>> row["kernel"], row["tail_index"], row["threshold"], len(row["hidden_similarity"]) > 2
    ('log', 0.7, 1.0, True)
    >>> phase_diagram(tasks=["sheared_swap"], kernels=["log"], tail_indices=[0.7], seeds=[0], skip=rows,
    ...               transforms=["none"], n_samples=8, n_points=16, n_test=4, estimator=template)
    []
    """
    validate_parameter_constraints(
        _PHASE_CONSTRAINTS,
        {"tasks": tasks, "kernels": kernels, "transforms": transforms, "tail_indices": tail_indices,
         "seeds": seeds, "benchmark_params": benchmark_params, "on_row": on_row},
        caller_name="phase_diagram",
    )
    template = experiment_estimator(estimator, defaults=_PHASE_DEFAULTS, caller="phase_diagram")
    tasks, kernels, transforms = _as_list(tasks), _as_list(kernels), _as_list(transforms)
    tails = [("gaussian", math.nan) if value == "gaussian" else ("pareto", float(value))
             for value in _as_list(tail_indices)]
    seeds = [int(seed) for seed in _as_list(seeds)]
    extra = dict(benchmark_params or {})
    for task in tasks:  # generator arguments, checked cheaply before any fit
        try:
            load_benchmark(task, n_samples=1, n_points=2, **extra, random_state=0)
        except TypeError as exc:
            raise ValueError(f"benchmark_params {extra!r} do not fit the {task} benchmark: {exc}") from exc
    extra_text = json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in sorted(extra.items())}) \
        if extra else ""
    sizes = {"n_samples": n_samples, "n_points": n_points, "n_test": n_test, "epochs": template.max_epochs,
             "d_model": template.d_model, "n_heads": template.n_heads, "n_layers": template.n_layers}
    done = {phase_key(row) for row in skip}
    rows = []
    for task in tasks:
        for tail, tail_index in tails:
            for kernel in kernels:
                for transform in transforms:
                    for seed in seeds:
                        row = {"task": task, "tail": tail, "tail_index": tail_index, "kernel": kernel,
                               "transform": transform, "seed": seed, **sizes, "benchmark_params": extra_text}
                        if phase_key(row) in done:
                            continue
                        row = _fit_cell(row, extra, estimator=template, torch_threads=torch_threads)
                        rows.append(row)
                        if on_row is not None:
                            on_row(row)
                        if progress is not None:
                            progress(_progress_line(row))
    return rows


def _fit_cell(row, extra, *, estimator, torch_threads):
    name, params = PHASE_KERNELS[row["kernel"]]
    fit, *references = compare_kernels(
        row["task"], kernels=[name], kernel_params=params, transforms=[row["transform"]],
        tail=row["tail"], tail_index=row["tail_index"] if row["tail"] == "pareto" else 1.0,
        n_samples=row["n_samples"], n_points=row["n_points"], n_test=row["n_test"], seeds=[row["seed"]],
        estimator=estimator, torch_threads=torch_threads, benchmark_params=extra or None, inspect=_inspect_fit,
    )
    out = dict(row)
    for field in PHASE_FIELDS:
        if field not in out:
            out[field] = fit.get(field, math.nan)
    for reference in references:
        out[f"{reference['kernel']}_symlog"] = reference["energy_symlog"]
    out["tail_index"] = row["tail_index"]
    out["threshold"] = kernel_threshold(row["kernel"], transform=row["transform"],
                                        learned_degree=out.get("learned_degree"))
    return out


def _progress_line(row):
    tail = "gaussian" if row["tail"] == "gaussian" else f"pareto {format_number(row['tail_index'])}"
    return (f"{row['task']} {tail} {row['kernel']}/{row['transform']} seed {row['seed']}: "
            f"ESS/n {format_number(_number(row['attention_ess']))}, ratio "
            f"{format_number(_number(row['energy_vs_baseline']))}, collapsed {row['collapsed']}, learned "
            f"{row['learned']}, rate {format_number(_number(row['log_weight_rate']))}, "
            f"fit {format_number(_number(row['fit_time']))} s")


def _flag(value):
    """True / False / None from a verdict cell (bool, or its CSV text)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return {"True": True, "False": False}.get(str(value))


def _tail_value(row):
    return math.inf if row["tail"] == "gaussian" else _number(row["tail_index"])


def phase_cells(rows):
    """Group the per-seed rows of a phase diagram into cells, with the seeds' verdicts combined.

    Parameters
    ----------
    rows : iterable of dict
        Rows of :func:`phase_diagram`, or the same rows read back from a CSV.

    Returns
    -------
    cells : list of dict
        One per (task, tail index, kernel, transform, sizes), with
        ``tail_index`` (``inf`` for the Gaussian control), ``seeds``,
        ``attention_ess`` and ``energy_vs_baseline`` (means over seeds),
        ``ess_min`` and ``ess_max``, ``diverged`` (seeds whose training
        diverged; they count as collapsed), ``collapsed`` and ``learned`` (True or
        False when every seed agrees, None when they disagree or cannot
        tell), ``learned_split`` (some seeds learned, others did not: the
        cell is near the learned boundary), ``learned_undecided`` (seeds where
        the learned rule cannot tell: even the oracle row is not clearly
        below the no-model rows), ``learned_degree`` and
        ``log_weight_rate`` (means), ``threshold`` and ``weight_threshold``
        (:func:`kernel_threshold` of the values and of the weights).

    Examples
    --------
    >>> from sklearn_measattn.experiments import phase_cells
    >>> rows = [{"task": "sheared_swap", "tail": "pareto", "tail_index": 0.7, "kernel": "softmax",
    ...          "transform": "none", "seed": s, "collapsed": c, "learned": False, "attention_ess": e,
    ...          "energy_vs_baseline": 1.2} for s, c, e in ((0, True, 0.02), (1, False, 0.06))]
    >>> cell, = phase_cells(rows)
    >>> cell["seeds"], cell["collapsed"], cell["learned"], round(cell["attention_ess"], 3)
    (2, None, False, 0.04)
    """
    groups = {}
    for row in rows:
        if str(row.get("status", "ok")) not in ("ok", "diverged"):
            continue
        key = (row["task"], _tail_value(row), row["kernel"], row["transform"],
               *(_key_number(row.get(k)) for k in _MODEL_KEYS), str(row.get("benchmark_params") or ""))
        groups.setdefault(key, []).append(row)
    cells = []
    for (task, tail_index, kernel, transform, *_), group in groups.items():
        collapsed = [True if str(r.get("status", "ok")) == "diverged" else _flag(r["collapsed"]) for r in group]
        learned = [_flag(r["learned"]) for r in group]
        ess = [_number(r["attention_ess"]) for r in group]
        degree = float(np.nanmean([_number(r.get("learned_degree")) for r in group])) \
            if any(not math.isnan(_number(r.get("learned_degree"))) for r in group) else math.nan
        cell = {
            "task": task, "tail_index": tail_index, "kernel": kernel, "transform": transform, "seeds": len(group),
            "attention_ess": float(np.nanmean(ess)) if not all(map(math.isnan, ess)) else math.nan,
            "ess_min": float(np.nanmin(ess)) if not all(map(math.isnan, ess)) else math.nan,
            "ess_max": float(np.nanmax(ess)) if not all(map(math.isnan, ess)) else math.nan,
            "energy_vs_baseline": _nanmean(_number(r["energy_vs_baseline"]) for r in group),
            "collapsed": _combine(collapsed), "learned": _combine(learned),
            "diverged": sum(str(r.get("status", "ok")) == "diverged" for r in group),
            "learned_split": True in learned and False in learned,
            "learned_undecided": sum(flag is None for flag in learned),
            "learned_degree": degree,
            "log_weight_rate": _nanmean(_number(r.get("log_weight_rate")) for r in group),
            "benchmark_params": str(group[0].get("benchmark_params") or ""),
            **{k: group[0].get(k) for k in _MODEL_KEYS},
        }
        for integral, field in (("values", "threshold"), ("weights", "weight_threshold")):
            cell[field] = kernel_threshold(kernel, transform=transform, learned_degree=degree, integral=integral) \
                if kernel in PHASE_KERNELS else None
        cells.append(cell)
    return cells


def _nanmean(values):
    values = [v for v in values if not math.isnan(v)]
    return float(np.mean(values)) if values else math.nan


def _combine(flags):
    if any(f is None for f in flags) or not flags:
        return None
    return True if all(flags) else False if not any(flags) else None


def _predicted(cell, integral):
    """Theory's verdict for a cell: True (diverges), False (converges), None (no fixed threshold)."""
    if math.isinf(cell["tail_index"]):
        return False  # the Gaussian control: every kernel's integrals converge
    threshold = cell["threshold" if integral == "values" else "weight_threshold"]
    return None if threshold is None else bool(cell["tail_index"] <= threshold)


def phase_agreement(rows, *, integral="values"):
    """How often the measured collapse matches the theory ``tail index <= threshold``, and which way it fails.

    A cell's measured verdict combines its seeds (:func:`phase_cells`); a cell
    whose seeds disagree is *near a boundary* and counted apart. Theory
    predicts collapse when the tail index is at or below the kernel's
    threshold (:func:`kernel_threshold`) and none on the Gaussian control;
    cells without a fixed threshold (softmax on symlog data, ``learned_poly``
    without a learnt degree) are counted apart too.

    Parameters
    ----------
    rows : iterable of dict
        Rows of :func:`phase_diagram`, or the same rows read back from a CSV.
    integral : {"values", "weights"}, default="values"
        Which threshold of :func:`kernel_threshold` makes the prediction.

    Returns
    -------
    table : list of dict
        One row per (task, transform, kernel) in the order met, then one per
        (task, transform) with ``kernel="all"``, then the grand total
        (``task="all"``): ``cells``, ``agree``, ``collapsed_above`` (collapsed
        although the integrals converge), ``survived_below`` (did not collapse
        although they diverge), ``near_boundary`` (seeds disagree) and
        ``no_threshold``.

    Examples
    --------
    >>> from sklearn_measattn.experiments import phase_agreement
    >>> def row(alpha, collapsed, kernel="log"):
    ...     return {"task": "matrix_inverse", "tail": "pareto", "tail_index": alpha, "kernel": kernel,
    ...             "transform": "none", "seed": 0, "collapsed": collapsed, "learned": False,
    ...             "attention_ess": 0.5, "energy_vs_baseline": 1.0}
    >>> table = phase_agreement([row(0.7, True), row(1.5, False), row(2.0, True), row(3.0, False, "softmax")])
    >>> total = table[-1]
    >>> total["cells"], total["agree"], total["collapsed_above"], total["survived_below"]
    (4, 2, 1, 1)
    >>> phase_agreement([row(0.7, False)], integral="weights")[-1]["agree"]  # log's weights always converge
    1
    """
    validate_parameter_constraints({"integral": [_INTEGRAL]}, {"integral": integral}, caller_name="phase_agreement")
    counts = {}
    order = []
    for cell in phase_cells(rows):
        predicted = _predicted(cell, integral)
        outcome = ("no_threshold" if predicted is None else "near_boundary" if cell["collapsed"] is None
                   else "agree" if cell["collapsed"] == predicted
                   else "collapsed_above" if cell["collapsed"] else "survived_below")
        for key in ((cell["task"], cell["transform"], cell["kernel"]), (cell["task"], cell["transform"], "all"),
                    ("all", "all", "all")):
            if key not in counts:
                counts[key] = dict.fromkeys(("cells", "agree", "collapsed_above", "survived_below",
                                             "near_boundary", "no_threshold"), 0)
                order.append(key)
            counts[key]["cells"] += 1
            counts[key][outcome] += 1
    rank = {key: (key[2] == "all") + (key[0] == "all") for key in order}
    return [{"task": k[0], "transform": k[1], "kernel": k[2], **counts[k]}
            for k in sorted(order, key=lambda k: rank[k])]
