"""Heavy tails, one home: drawing measures with a chosen tail (the benchmarks' samplers) and
estimating a measure's tail index (Hill's estimator, within measures and across them).

:mod:`~sklearn_measattn.datasets` and :mod:`~sklearn_measattn.experiments` publish what users call.
"""

from ._estimation import (
    LIGHT_TAIL_INDEX,
    MIN_MEASURES_ACROSS,
    TAIL_ESTIMATE_CONSTRAINTS,
    TailIndexEstimate,
    across_sample_tail_index,
    estimate_tail_index,
    per_measure_tail_index,
)
from ._sampling import SIZE_CONSTRAINTS, TAIL, TAIL_INDEX, TAILS, check_finite_samples, sample_base

__all__ = [
    "across_sample_tail_index",
    "check_finite_samples",
    "estimate_tail_index",
    "LIGHT_TAIL_INDEX",
    "MIN_MEASURES_ACROSS",
    "per_measure_tail_index",
    "sample_base",
    "SIZE_CONSTRAINTS",
    "TAIL",
    "TAIL_ESTIMATE_CONSTRAINTS",
    "TAIL_INDEX",
    "TailIndexEstimate",
    "TAILS",
]
