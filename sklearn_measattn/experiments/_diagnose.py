"""Diagnose a batch of measures before training: tails, attention ESS per kernel, a recommendation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import check_random_state

from .._param_validation import validate_params
from .._tails import (
    MIN_MEASURES_ACROSS,
    TAIL_ESTIMATE_CONSTRAINTS,
    across_sample_tail_index,
    estimate_tail_index,
    per_measure_tail_index,
)
from .._threads import torch_threads
from .._validation import POSITIVE_INT, POSITIVE_REAL, check_measures
from ..kernels import KERNEL_NAMES, get_kernel
from ..metrics import ATTENTION_ESS_THRESHOLD, attention_ess
from ..preprocessing import symlog
from ._report import format_number, format_table

__all__ = ["Diagnosis", "diagnose_measures", "format_diagnosis", "attention_ess_table", "SYMLOG_BELOW_TAIL_INDEX"]

#: Kernels ordered from the fastest-growing (most selective attention) to the slowest.
_GROWTH_ORDER = {"exponential": 0, "polynomial": 1, "linear": 2, "logarithmic": 3, "bounded": 4}

#: Below this tail index the variance is infinite: train on a logarithmic scale.
SYMLOG_BELOW_TAIL_INDEX = 2.0


@dataclass(frozen=True)
class Diagnosis:
    """What :func:`diagnose_measures` found; print it with :func:`format_diagnosis`.

    Parameters
    ----------
    tails : TailIndexEstimate
        Hill estimates per feature and of the norm, within ensembles: the
        points' distances to their own measure's median, pooled.
    kernels : list of dict
        One dict per kernel: ``kernel``, ``growth``, ``min_tail_index`` (its
        integrals converge for tail indices above this), ``integrals``
        (``"converge"``, ``"diverge"``, ``"borderline"`` when the interval of
        the tail index straddles ``min_tail_index``, ``"unknown"`` for user
        kernels; at the norm's tail index of the basis, ``basis_tails``),
        ``support`` (``"full"``, or ``"bounded"`` for kernels that are zero
        below a threshold), ``ess_none`` and ``ess_symlog`` (random-projection
        attention ESS / n without and with symlog).
    light_tailed : bool
        The norm's tails that the recommendation rests on (``tail_basis``)
        read light: within ensembles, an estimate above the light-tail
        threshold, and then no heavy tail across samples either (which would
        have become the basis).
    kernel : str
        The recommended kernel.
    transform : str or None
        The recommended transform (``"symlog"`` or ``None``).
    reason : str
        Why, in one or two sentences.
    shape : tuple
        ``(n_samples, n_points, n_features)`` of the input (largest measure's
        size for ragged input).
    n_measures_ess : int
        Measures used for the ESS.
    n_queries_ess : int
        Queries per measure used for the ESS.
    notes : list of str
        Caveats printed before the recommendation (e.g. few points, or
        measures whose tails differ).
    measure_tail_index : tuple of float
        ``(lowest, highest)`` of the norm's tail index estimated on each
        measure alone (NaN when no measure has the 36 points this needs).
    tails_differ : bool
        Whether the measures' own estimates are too far apart for one common
        tail index (their simultaneous intervals do not all overlap); the
        pooled estimate then mixes different tails.
    across_tails : TailIndexEstimate or None
        Hill estimates per feature and of the norm across samples: of each
        measure's coordinate-wise median, centred at the median of all of them
        (a shift shared by all the points of a measure shows here, not in
        ``tails``), read with ``light_rule="interval"``. ``None`` for fewer
        than 25 measures.
    tail_basis : str
        The tails the recommendation rests on: ``"within ensembles"``
        (``tails``) or ``"across samples"`` (``across_tails``, when its norm
        reads heavy and heavier than within ensembles).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.experiments import diagnose_measures
    >>> diagnosis = diagnose_measures(np.random.default_rng(0).normal(size=(8, 64, 2)), kernels=["softmax", "log"])
    >>> [k["kernel"] for k in diagnosis.kernels], diagnosis.shape
    (['softmax', 'log'], (8, 64, 2))
    """

    tails: object
    kernels: list
    light_tailed: bool
    kernel: str
    transform: str | None
    reason: str
    shape: tuple
    n_measures_ess: int
    n_queries_ess: int
    notes: list = field(default_factory=list)
    measure_tail_index: tuple = (math.nan, math.nan)
    tails_differ: bool = False
    across_tails: object = None
    tail_basis: str = "within ensembles"

    @property
    def basis_tails(self):
        """The estimate the recommendation rests on: ``tails`` or ``across_tails``, as ``tail_basis`` says."""
        return self.across_tails if self.tail_basis == "across samples" else self.tails

    def rows(self):
        """The diagnosis as CSV rows (long format, for :func:`write_csv`).

        Returns
        -------
        rows : list of dict
            Keys ``what`` (``"tail_index"`` within ensembles,
            ``"tail_index_across_samples"``, ``"integrals"``,
            ``"attention_ess"``, ``"tail_index_per_measure"``, ``"tail_basis"``
            or ``"recommendation"``), ``of``, ``value``, ``standard_error``,
            ``ci_lower``, ``ci_upper``, ``detail``.
        """
        rows = []
        for what, tails in (("tail_index", self.tails), ("tail_index_across_samples", self.across_tails)):
            rows += [
                {"what": what, "of": r["of"], "value": r["tail_index"], "standard_error": r["standard_error"],
                 "ci_lower": r["ci_lower"], "ci_upper": r["ci_upper"],
                 "detail": f"Hill, k={r['n_tail']} of {r['n_values']}, {'light' if r['light_tailed'] else 'heavy'}"}
                for r in (tails.rows() if tails is not None else [])
            ]
        for k in self.kernels:
            rows.append({"what": "integrals", "of": k["kernel"], "value": k["min_tail_index"],
                         "detail": f"{k['integrals']} ({k['growth']} growth"
                                   + (", bounded support" if k.get("support") == "bounded" else "") + ")"})
            for transform in ("none", "symlog"):
                rows.append({"what": "attention_ess", "of": f"{k['kernel']}/{transform}", "value": k[f"ess_{transform}"],
                             "detail": f"ESS/n, {self.n_measures_ess} measures x {self.n_queries_ess} queries"})
        low, high = self.measure_tail_index
        rows.append({"what": "tail_index_per_measure", "of": "norm", "ci_lower": low, "ci_upper": high,
                     "detail": "differ" if self.tails_differ else "consistent with one tail index"})
        alpha, lower, upper = self.basis_tails.norm
        rows.append({"what": "tail_basis", "of": "norm", "value": alpha, "ci_lower": lower, "ci_upper": upper,
                     "detail": self.tail_basis})
        rows.append({"what": "recommendation", "of": f"{self.kernel}/{self.transform or 'none'}",
                     "detail": self.reason})
        return rows


def _standardize(X, weights):
    """Centre every measure at its median and divide each feature by its median absolute deviation."""
    X = X.copy()
    present = np.ones(X.shape[:2], dtype=bool) if weights is None else weights > 0
    for i in range(X.shape[0]):
        X[i] -= np.median(X[i][present[i]], axis=0)
        X[i][~present[i]] = 0.0
    deviations = np.abs(X[present])
    scale = np.median(deviations, axis=0)
    fallback = deviations.mean(axis=0)
    scale = np.where(scale > 0, scale, np.where(fallback > 0, fallback, 1.0))
    return X / scale


def _integrals(kernel, lower, upper, light):
    threshold = kernel.min_tail_index
    if threshold is None:
        return "unknown"
    if light:
        return "converge"
    if lower > threshold:
        return "converge"
    if upper <= threshold:
        return "diverge"
    return "borderline"


def _ess(X, weights, kernel, n_draws, max_queries, random_state):
    try:
        return float(np.mean(attention_ess(X, kernel, weights=weights, n_draws=n_draws, max_queries=max_queries,
                                           random_state=random_state)))
    except ValueError:  # scores beyond float64: one point takes all the weight
        return math.nan


def _moments(alpha):
    if not np.isfinite(alpha):
        return "no power law seen"
    if alpha <= 1:
        return "even the mean is infinite"
    if alpha <= 2:
        return "the variance is infinite"
    return f"moments of order {format_number(alpha)} and above are infinite"


def _percent(fraction):
    return "an unmeasurable share" if not np.isfinite(fraction) else f"{format_number(100 * fraction)}%"


def _tail_basis(tails, across):
    """``"across samples"`` when the tails across samples read heavy and heavier than within ensembles."""
    if across is None:
        return "within ensembles"
    within_alpha, across_alpha = tails.norm[0], across.norm[0]
    across_heavy = bool(np.isfinite(across_alpha) and not across.light_tailed[-1])
    within_heavy = bool(np.isfinite(within_alpha) and not tails.light_tailed[-1])
    if across_heavy and not (within_heavy and within_alpha <= across_alpha):
        return "across samples"
    if np.isnan(within_alpha) and np.isfinite(across_alpha):  # no reading within ensembles (e.g. one point each)
        return "across samples"
    return "within ensembles"


def _tails_phrase(tails):
    alpha = tails.norm[0]
    if tails.light_tailed[-1]:
        return f"read light (tail index estimate {format_number(alpha)})"
    return f"have tail index about {format_number(alpha)}"


@dataclass(frozen=True)
class _Reading:
    """What the recommendation rules read: the tails it rests on and the kernels assessed on the data."""

    tails: object  # the TailIndexEstimate the recommendation rests on
    within: object  # the tails within ensembles
    across: object  # the tails across samples, or None
    basis: str  # "within ensembles" or "across samples"
    kernels: list  # the kernels' rows, full-support ones only when any
    healthy: list  # kernels whose integrals converge and whose ESS is healthy, slowest growth last
    softmax: dict | None  # softmax's row, when assessed


def _reading(within, across, basis, kernels):
    # Bounded-support kernels are assessed and listed, but recommended only when nothing else was asked for:
    # their weights vanish below a threshold, which on heavy tails puts the weight on the top scores.
    kernels = [k for k in kernels if k.get("support", "full") == "full"] or kernels
    healthy = [k for k in kernels if k["integrals"] == "converge" and k["ess_none"] >= ATTENTION_ESS_THRESHOLD]
    healthy.sort(key=lambda k: _GROWTH_ORDER.get(k["growth"], len(_GROWTH_ORDER)))
    return _Reading(
        tails=across if basis == "across samples" else within, within=within, across=across, basis=basis,
        kernels=kernels, healthy=healthy, softmax=next((k for k in kernels if k["kernel"] == "softmax"), None),
    )


def _light_tails_rule(reading):
    """Light tails and a healthy kernel: the fastest-growing healthy kernel (softmax first), no transform."""
    if not (reading.tails.light_tailed[-1] and reading.healthy):
        return None
    best = reading.healthy[0]
    if reading.basis == "across samples":
        where = "Your measures' medians have light tails across samples"
        other = "no reading within ensembles"
    else:
        where = "Your points have light tails within ensembles"
        other = ("too few measures to estimate the tails across samples" if reading.across is None
                 else "across samples the measures' medians show no heavy tail either")
    every = len(reading.healthy) == len(reading.kernels)
    reason = (
        f"{where} (tail index estimate {format_number(reading.tails.norm[0])}, no sign of a power law; {other}), so "
        + ("every kernel's attention integrals converge and every kernel is fine. " if every else
           "the attention integrals converge. ")
        + f"Use kernel={best['kernel']!r} without a transform: it keeps {_percent(best['ess_none'])} of the "
        "points in play" + (", and softmax is the standard, fastest choice." if best["kernel"] == "softmax" else ".")
    )
    return best["kernel"], None, reason


def _converging_kernel_rule(reading):
    """Heavy tails, but a kernel whose integrals converge there: that kernel, with symlog below index 2."""
    if not reading.healthy:
        return None
    best = reading.healthy[0]
    transform = "symlog" if reading.tails.norm[1] <= SYMLOG_BELOW_TAIL_INDEX else None
    reason = _heavy_tails_text(reading) + (
        f"Use kernel={best['kernel']!r}" + (" with transform='symlog'" if transform else " without a transform")
        + f": its integrals converge at these tails and it keeps {_percent(best['ess_none'])} of the points in play"
        + ("; symlog puts the data on a logarithmic scale, where losses and scores stay finite." if transform
           else ".")
    )
    return best["kernel"], transform, reason


def _symlog_rule(reading):
    """No kernel converges: symlog, with the slowest-growing kernel (the most points in play after symlog)."""
    best = _slowest_kernel(reading.kernels)
    reason = _heavy_tails_text(reading) + (
        f"No kernel's integrals converge this far out, so use transform='symlog', which compresses the tails to a "
        f"logarithmic scale, with kernel={best['kernel']!r}, whose weights grow slowest and keep "
        f"{_percent(best['ess_symlog'])} of the points in play after symlog."
    )
    return best["kernel"], "symlog", reason


#: The recommendation is the advice of the first rule that gives one (the last always does).
_RULES = (_light_tails_rule, _converging_kernel_rule, _symlog_rule)


def _recommend(within, across, basis, kernels):
    """``(kernel, transform, reason)`` from the tail estimates and the measured ESS: the first of :data:`_RULES`
    that applies; the rule is in the docstring of :func:`diagnose_measures`."""
    reading = _reading(within, across, basis, kernels)
    for rule in _RULES:
        advice = rule(reading)
        if advice is not None:
            return advice
    raise AssertionError("the last rule always applies")


def _heavy_tails_text(reading):
    """The first sentence of a heavy-tail recommendation: where the tails are heavy, and softmax's ESS."""
    alpha, lower, upper = reading.tails.norm
    level = f"{int(100 * reading.tails.confidence)}%"
    interval = f"{format_number(lower)}-{format_number(upper)}"
    if reading.basis == "across samples":
        text = (f"Your measures have heavy tails across samples: their medians, one per measure, have tail index "
                f"about {format_number(alpha)} ({level} interval {interval}), so {_moments(alpha)} for the shifts of "
                f"whole measures, while within ensembles the points {_tails_phrase(reading.within)}")
    else:
        text = (f"Your points have heavy tails within ensembles: tail index about {format_number(alpha)} ({level} "
                f"interval {interval}), so {_moments(alpha)}")
    softmax = reading.softmax
    if softmax is not None and reading.basis == "across samples":
        text += (f"; within each ensemble, centred on its median, softmax attention effectively uses "
                 f"{_percent(softmax['ess_none'])} of the points, and a far shift of a whole measure scales its "
                 "attention scores and concentrates it further")
    elif softmax is not None:
        text += (f"; softmax attention on your data effectively uses only {_percent(softmax['ess_none'])} of "
                 "the points")
    return text + ". "


def _slowest_kernel(kernels):
    """Among the kernels of the slowest known growth (all, if none is known), the best ESS after symlog."""
    known = [k for k in kernels if k["min_tail_index"] is not None and np.isfinite(k["min_tail_index"])]
    pool = known or kernels
    if known:
        slowest = min(k["min_tail_index"] for k in known)
        pool = [k for k in known if k["min_tail_index"] == slowest]
    return max(pool, key=lambda k: k["ess_symlog"] if np.isfinite(k["ess_symlog"]) else -1.0)


# Not skipped as nested: get_kernel checks each of ``kernels``.
@validate_params(
    {
        **TAIL_ESTIMATE_CONSTRAINTS,
        "max_measures": [POSITIVE_INT],
        "max_queries": [POSITIVE_INT],
        "n_draws": [POSITIVE_INT],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=False,
)
def diagnose_measures(
    X,
    *,
    kernels=KERNEL_NAMES,
    n_tail="sqrt",
    confidence=0.95,
    max_measures=32,
    max_queries=64,
    n_draws=2,
    random_state=0,
    feature_names=None,
):
    """Diagnose measures before training: how heavy are the tails, which kernels collapse, what to use.

    Three measurements, in seconds on a laptop:

    1. the tail index per feature and of the point norm, with its confidence
       interval, twice. *Within ensembles*: the distances of the points to
       their own measure's median, pooled over the measures
       (:func:`estimate_tail_index`). *Across samples* (from 25 measures):
       each measure's coordinate-wise median, centred at the median of all of
       them, with ``k = floor(sqrt(n_samples))``. A shift shared by all the
       points of a measure (say an observation error drawn once per measure)
       leaves the first untouched and shows in the second; heavy tails of
       i.i.d. points show in the first and hardly in the second (a median of
       many points has light tails). With a few dozen values, Hill's estimate
       of a Gaussian tail is itself small (about 4 from 40 values), so the
       tails across samples read heavy only when the whole interval of the
       norm's estimate lies below both :data:`LIGHT_TAIL_INDEX` and the
       value Hill's estimator gives on Gaussian values at that count
       (``TailIndexEstimate.light_rule="interval"``). The recommendation rests
       on the heavier reading (``Diagnosis.tail_basis``): the tails across
       samples when they read heavy and their norm's estimate is below the
       one within ensembles (or the latter is undetermined), else the tails
       within ensembles;
    2. whether each kernel's attention integrals converge at that norm's tail
       index (``AttentionKernel.min_tail_index``: they converge above it);
    3. the attention effective sample size / n of each kernel with random
       query/key projections (:func:`~sklearn_measattn.metrics.attention_ess`),
       on the data and after symlog, on at most ``max_measures`` measures and
       ``max_queries`` queries per measure. Each measure is first centred at
       its median and each feature divided by its median absolute deviation, so
       that the bulk of the points has unit scale, as a trained embedding would
       see it. This centring removes the shifts of whole measures: when the
       recommendation rests on the tails across samples, the ESS tells how
       attention spreads within an ensemble, and a far shift concentrates it
       further (it scales the query, hence the differences between scores).

    The recommendation follows a fixed rule, on the norm's tail index of
    the basis. *Light tails* (within ensembles, estimate above
    :data:`LIGHT_TAIL_INDEX`): the fastest-growing kernel whose ESS / n is at
    least :data:`~sklearn_measattn.metrics.ATTENTION_ESS_THRESHOLD` (softmax,
    when it is among ``kernels``), no transform. *Heavy tails*: the
    fastest-growing kernel whose integrals converge over the whole interval of
    the tail index and whose ESS / n passes the threshold (softmax never
    qualifies: its integrals diverge for every power law), with symlog when the
    interval reaches down to 2 (infinite variance possible); when no kernel
    converges, symlog with the kernel of the smallest ``min_tail_index`` that
    keeps the largest ESS / n after symlog.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_points, n_features) or list of 2-D arrays
        The measures (a ragged list is accepted).
    kernels : sequence of str or AttentionKernel, default=KERNEL_NAMES
        Kernels to assess. The bounded-support kernels
        (:data:`~sklearn_measattn.kernels.SPARSE_KERNEL_NAMES`: ``"compact"``,
        ``"sparsemax"``) are measured and listed with their divergence rule
        when named here, but recommended only when no kernel of full support
        is among ``kernels``.
    n_tail : "sqrt", int or float, default="sqrt"
        Order statistics of the tail estimate, see :func:`estimate_tail_index`.
    confidence : float, default=0.95
        Level of the tail index interval.
    max_measures : int, default=32
        Measures drawn at random for the ESS.
    max_queries : int, default=64
        Queries per measure for the ESS (each against every point).
    n_draws : int, default=2
        Random projection pairs averaged in the ESS.
    random_state : int, RandomState instance or None, default=0
        Seeds the subsamples and the projections.
    feature_names : sequence of str, default=None
        Names of the features in the report (e.g. a table's column names);
        None means ``"feature 0", "feature 1", ...``.

    Returns
    -------
    diagnosis : Diagnosis
        The pooled estimate assumes one tail index for all measures; each
        measure is also estimated alone, and when those estimates are too far
        apart for one common index (``diagnosis.tails_differ``) a note says
        so, with their range. ``diagnosis.across_tails`` holds the estimate
        across samples and ``diagnosis.tail_basis`` the one the
        recommendation rests on.

    Raises
    ------
    ValueError
        For invalid measures, too few points for the tail estimate, or invalid
        options; before any computation.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.experiments import diagnose_measures
    >>> rng = np.random.default_rng(0)
    >>> diagnosis = diagnose_measures(rng.normal(size=(16, 128, 2)))
    >>> diagnosis.light_tailed, diagnosis.kernel, diagnosis.transform
    (True, 'softmax', None)
    >>> cauchy = diagnose_measures(rng.standard_cauchy(size=(16, 128, 2)))
    >>> cauchy.light_tailed, cauchy.transform, cauchy.kernel != "softmax"
    (False, 'symlog', True)

    Gaussian ensembles, each shifted as a whole by one Cauchy draw: light
    within ensembles, heavy across samples.

    >>> shifted = rng.normal(size=(64, 128, 2)) + rng.standard_cauchy(size=(64, 1, 2))
    >>> diagnosis = diagnose_measures(shifted)
    >>> bool(diagnosis.tails.light_tailed[-1]), diagnosis.tail_basis, diagnosis.transform
    (True, 'across samples', 'symlog')
    """
    kernel_objs = [get_kernel(k) for k in kernels]
    if not kernel_objs:
        raise ValueError("kernels is empty; pass at least one kernel name, e.g. kernels=('softmax', 'log').")
    max_measures, max_queries, n_draws = int(max_measures), int(max_queries), int(n_draws)
    X, weights = check_measures(X, input_name="X", dtype=np.float64)
    tails = estimate_tail_index(X if weights is None else [X[i][weights[i] > 0] for i in range(len(X))],
                                n_tail=n_tail, confidence=confidence, feature_names=feature_names)
    own, own_lower, own_upper = per_measure_tail_index(X, weights, confidence=confidence)
    estimated = np.isfinite(own_lower) & np.isfinite(own_upper)
    differ = bool(estimated.sum() >= 2 and own_lower[estimated].max() > own_upper[estimated].min())
    spread = (float(np.nanmin(own)), float(np.nanmax(own))) if np.isfinite(own).any() else (math.nan, math.nan)
    across = across_sample_tail_index(X, weights, confidence=confidence, feature_names=feature_names)
    basis = _tail_basis(tails, across)
    basis_tails = across if basis == "across samples" else tails
    light = bool(basis_tails.light_tailed[-1])
    _, lower, upper = basis_tails.norm
    rng = check_random_state(random_state)
    chosen = np.sort(rng.choice(X.shape[0], min(max_measures, X.shape[0]), replace=False))
    sub_weights = None if weights is None else weights[chosen]
    standardized = _standardize(X[chosen], sub_weights)
    transformed = symlog(standardized)
    seed = int(rng.randint(2**31 - 1))
    rows = []
    with torch_threads(1):  # small tensors: one thread is many times faster on a busy CPU
        for kernel in kernel_objs:
            rows.append({
                "kernel": kernel.name, "growth": kernel.growth, "min_tail_index": kernel.min_tail_index,
                "support": kernel.support,
                "integrals": _integrals(kernel, lower, upper, light),
                "ess_none": _ess(standardized, sub_weights, kernel, n_draws, max_queries, seed),
                "ess_symlog": _ess(transformed, sub_weights, kernel, n_draws, max_queries, seed),
            })
    kernel, transform, reason = _recommend(tails, across, basis, rows)
    notes = []
    if tails.n_tail < 30:
        notes.append(f"Only {tails.n_values} points in all: the tail estimate is rough; more measures sharpen it.")
    if across is None:
        notes.append(
            f"Only {X.shape[0]} measures: too few ({MIN_MEASURES_ACROSS} at least) to estimate the tails across "
            "samples, so heavy-tailed shifts of whole measures would go unseen; the recommendation rests on the "
            "tails within ensembles."
        )
    if differ:
        heaviest, lightest = int(np.nanargmin(own)), int(np.nanargmax(own))
        notes.append(
            f"The measures' tails differ: estimated on each measure alone, the norm's tail index runs from "
            f"{format_number(own[heaviest])} (measure {heaviest}) to {format_number(own[lightest])} (measure "
            f"{lightest}), too far apart for one common index. The pooled estimate above mixes them and the "
            "recommendation follows the heaviest tails it sees; diagnose groups of similar measures separately "
            "for a sharper reading."
        )
    return Diagnosis(tails, rows, light, kernel, transform, reason, tuple(X.shape), len(chosen),
                     min(max_queries, X.shape[1]), notes, spread, differ, across, basis)


def _tail_reading(alpha, light):
    if light:
        return "light"
    if not np.isfinite(alpha):
        return "undetermined"
    return "heavy: " + ("infinite mean" if alpha <= 1 else "infinite variance" if alpha <= 2 else "finite variance")


def _tail_body(tails):
    return [
        [label, format_number(a), format_number(se), f"{format_number(lo)}-{format_number(hi)}",
         _tail_reading(a, light)]
        for label, a, se, lo, hi, light in zip(tails.labels, tails.tail_index, tails.standard_error, tails.ci_lower,
                                               tails.ci_upper, tails.light_tailed)
    ]


def format_diagnosis(diagnosis):
    """The diagnosis as text: tails within ensembles and across samples, kernels, the basis, the recommendation.

    Parameters
    ----------
    diagnosis : Diagnosis
        Output of :func:`diagnose_measures`.

    Returns
    -------
    text : str

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.experiments import diagnose_measures, format_diagnosis
    >>> text = format_diagnosis(diagnose_measures(np.random.default_rng(0).normal(size=(8, 64, 2))))
    >>> text.splitlines()[-1].startswith("Recommendation: kernel='softmax', no transform.")
    True
    """
    tails, across = diagnosis.tails, diagnosis.across_tails
    n_samples, n_points, n_features = diagnosis.shape
    level = f"{int(round(100 * tails.confidence))}%"
    header = ["of", "tail index", "std. error", f"{level} interval", "reading"]
    tail_table = format_table(
        header, _tail_body(tails),
        title=(f"Tails within ensembles: Hill estimate from the {tails.n_tail} largest of {tails.n_values} distances "
               "to each measure's median"),
        notes=[f"Tail index a: P(|x| > t) falls like t^-a. Above {tails.light_tail_index:g} the tails read as light: "
               "for Gaussian data Hill's estimate is large and grows with the number of points."],
    )
    if across is None:
        across_table = (f"Tails across samples: not estimated, {n_samples} measures are too few "
                        f"({MIN_MEASURES_ACROSS} at least).")
    else:
        bound = min(across.light_tail_index, across.gaussian_tail_index)
        across_table = format_table(
            header, _tail_body(across),
            title=(f"Tails across samples: Hill estimate from the {across.n_tail} largest of {across.n_values} "
                   "distances of each measure's median to the median of all"),
            notes=["A shift shared by all the points of a measure shows here, not within ensembles. From "
                   f"{across.n_values} values these tails read heavy only when the whole interval lies below "
                   f"{format_number(bound)} (what Hill's estimate gives on Gaussian values at this count, at most "
                   f"{across.light_tail_index:g})."],
        )
    kernel_body = [
        [k["kernel"] + (" (bounded support)" if k.get("support") == "bounded" else ""), k["growth"],
         "none" if k["min_tail_index"] is not None and math.isinf(k["min_tail_index"])
         else "unknown" if k["min_tail_index"] is None else format_number(k["min_tail_index"]),
         k["integrals"], format_number(k["ess_none"]), format_number(k["ess_symlog"])]
        for k in diagnosis.kernels
    ]
    kernel_table = format_table(
        ["kernel", "growth", "converges for a >", "at your tails", "ESS/n", "ESS/n symlog"], kernel_body,
        title=(f"Kernels: attention with random projections on {diagnosis.n_measures_ess} of your measures, "
               f"{diagnosis.n_queries_ess} queries each"),
        notes=["ESS/n: share of the points each query effectively uses (1 = all, 1/n = one point takes all the "
               f"weight; below {ATTENTION_ESS_THRESHOLD:g} counts as collapsed).",
               "at your tails: whether the kernel's attention integrals converge at the norm's tail index "
               f"{diagnosis.tail_basis} (borderline: the interval straddles the limit)."],
    )
    transform = "no transform" if diagnosis.transform is None else f"transform={diagnosis.transform!r}"
    alpha, lower, upper = diagnosis.basis_tails.norm
    basis = (f"Basis: the tails {diagnosis.tail_basis} (the norm's tail index {format_number(alpha)}, {level} "
             f"interval {format_number(lower)}-{format_number(upper)}).")
    lines = [f"{n_samples} measures x {n_points} points x {n_features} features", "", tail_table, "", across_table, "",
             kernel_table, ""]
    lines += diagnosis.notes + ([""] if diagnosis.notes else [])
    lines.append(basis)
    lines.append(f"Recommendation: kernel={diagnosis.kernel!r}, {transform}. {diagnosis.reason}")
    return "\n".join(lines)


# Not skipped as nested: the generator and attention_ess check the other arguments.
@validate_params({"tail_index": [POSITIVE_REAL]}, prefer_skip_nested_validation=False)
def attention_ess_table(
    *, kernels=KERNEL_NAMES, tails=("gaussian", "student_t", "pareto"), tail_index=1.5, n_points=(64, 256),
    n_features=2, n_measures=1, n_draws=2, random_state=0,
):
    """Random-projection attention ESS / n of each kernel on simulated tails, for several ensemble sizes.

    Parameters
    ----------
    kernels : sequence of str, default=KERNEL_NAMES
        Kernels.
    tails : sequence of str, default=("gaussian", "student_t", "pareto")
        Base families (:data:`sklearn_measattn.datasets.TAILS`).
    tail_index : float, default=1.5
        Tail exponent of the heavy families.
    n_points : sequence of int, default=(64, 256)
        Ensemble sizes.
    n_features : int, default=2
        Dimension of the points.
    n_measures : int, default=1
        Measures averaged per cell.
    n_draws : int, default=2
        Random projection pairs per measure.
    random_state : int, default=0
        Seeds the data and the projections.

    Returns
    -------
    rows : list of dict
        Keys ``kernel``, ``tail``, ``tail_index`` (``nan`` for Gaussian),
        ``n_points``, ``ess_fraction`` (mean ESS / n, at most 256 queries per
        measure).

    Examples
    --------
    >>> from sklearn_measattn.experiments import attention_ess_table
    >>> rows = attention_ess_table(kernels=["softmax"], tails=["pareto"], tail_index=0.7, n_points=[64])
    >>> rows[0]["kernel"], 0 < rows[0]["ess_fraction"] <= 1
    ('softmax', True)
    """
    from ..datasets import make_matrix_inverse

    rows = []
    for tail in tails:
        for n in n_points:
            # condition=1 gives A = I: the points are plain draws of the base family.
            X, _ = make_matrix_inverse(n_samples=n_measures, n_points=n, n_features=n_features, tail=tail,
                                       tail_index=tail_index, condition=1.0, random_state=random_state)
            for kernel in kernels:
                with torch_threads(1):
                    ess = attention_ess(X, kernel, n_draws=n_draws, max_queries=256, random_state=random_state)
                rows.append({"kernel": kernel, "tail": tail,
                             "tail_index": tail_index if tail != "gaussian" else math.nan,
                             "n_points": n, "ess_fraction": float(np.mean(ess))})
    return rows


