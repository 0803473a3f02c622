"""Distances between batches of measures, proper scores of ensembles, collapse diagnostics and scorers.

Every distance compares ``y_true`` and ``y_pred`` *sample by sample*: both are
batches of measures of shape ``(n_samples, n_points, n_features)`` (or ragged
lists of ``(n_points_i, n_features)`` arrays); ``n_points`` may differ between
the two, ``n_features`` may not.

Return convention (shared by every distance and by :func:`spread_ratio`),
following scikit-learn's ``multioutput`` argument:

- ``multioutput="uniform_average"`` (default): a float, the average over samples
  of the per-sample values, weighted by ``sample_weight`` when given;
- ``multioutput="raw_values"``: the per-sample values, an array of shape
  ``(n_samples,)`` (``sample_weight`` is validated but does not change them).

Per-point weights ``weights_true`` / ``weights_pred`` of shape
``(n_samples, n_points)`` make each measure ``sum_i w_i delta_{x_i}``
(normalised to total mass 1); a zero weight means the point is absent.

The collapse diagnostics measure the three faces of ensemble collapse:
:func:`attention_ess` (attention level, of random projections; a fitted model
has :meth:`~sklearn_measattn.MeasureTransformerRegressor.attention_ess`),
:func:`spread_ratio` (within an ensemble) and :func:`across_sample_correlation`
(across samples); :func:`collapse_verdict` applies the fixed rule to them and
:func:`collapse_diagnostics` measures all of them on a fitted model.

Two proper scores compare an ensemble with the one true state it forecasts,
rather than two measures: :func:`energy_score` (vectors) and
:func:`crps_ensemble` (scalars, computed by sorting). Their leading axes index
the ensembles: ``ensemble`` is ``(..., n_members, n_features)`` (or
``(..., n_members)`` for the CRPS) and ``truth`` ``(..., n_features)`` (or
``(...)``); they return one score per ensemble, not the ``multioutput``
convention above.

Whether a model learned the measure-dependent map at all is judged against
predictions that need no model (:func:`reference_predictions`: the pooled
training targets, the input itself, the true target law where known) by the
fixed rule of :func:`learned_verdict`.
"""

from ._collapse import (
    ATTENTION_ESS_THRESHOLD,
    COLLAPSE_RULE,
    CORRELATION_THRESHOLD,
    SPREAD_THRESHOLD,
    collapse_diagnostics,
    collapse_verdict,
)
from ._diagnostics import across_sample_correlation, attention_ess, spread_ratio
from ._distances import energy_distance, mmd, wasserstein_distance
from ._ensemble_scores import crps_ensemble, energy_score
from ._learning import LEARNED_MARGIN, LEARNED_RULE, REFERENCE_NAMES, learned_verdict, reference_predictions
from ._scorer import (
    SCORER_NAMES,
    SCORING_SPACES,
    get_scorer,
    make_measure_scorer,
    neg_energy_scorer,
    neg_mmd_scorer,
    neg_sliced_wasserstein_scorer,
    neg_wasserstein_scorer,
    to_space,
)

__all__ = [
    "wasserstein_distance",
    "energy_distance",
    "mmd",
    "energy_score",
    "crps_ensemble",
    "spread_ratio",
    "across_sample_correlation",
    "attention_ess",
    "collapse_verdict",
    "collapse_diagnostics",
    "ATTENTION_ESS_THRESHOLD",
    "SPREAD_THRESHOLD",
    "CORRELATION_THRESHOLD",
    "COLLAPSE_RULE",
    "learned_verdict",
    "reference_predictions",
    "LEARNED_MARGIN",
    "LEARNED_RULE",
    "REFERENCE_NAMES",
    "to_space",
    "SCORING_SPACES",
    "make_measure_scorer",
    "get_scorer",
    "neg_energy_scorer",
    "neg_wasserstein_scorer",
    "neg_sliced_wasserstein_scorer",
    "neg_mmd_scorer",
    "SCORER_NAMES",
]
