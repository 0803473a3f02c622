"""Datasets: benchmark generators and loaders for your own ensembles.

A batch of measures is a float array ``(n_samples, n_points, n_features)``: sample
``i`` is an ensemble (an empirical measure) of ``n_points`` points in
``R^n_features``; a list of ``(n_points_i, n_features)`` arrays is a ragged batch.

- Benchmarks of maps between heavy-tailed measures: :func:`make_matrix_inverse`,
  :func:`make_sheared_swap`, :func:`load_benchmark`, and
  :func:`sample_target_law` to draw their target measures again (the
  two-sample level of a distance).
- A data-assimilation benchmark: forecast and analysis ensembles of the
  Lorenz-96 model, :func:`make_lorenz96_analysis`, and the model itself,
  :func:`integrate_lorenz96`.
- Your own ensembles from ``.npy``, ``.npz``, CSV/TSV files or a pandas
  DataFrame: :func:`load_measures`.
"""

from .._tails import TAILS
from .._validation import check_measures
from ._benchmarks import (
    BENCHMARK_NAMES,
    load_benchmark,
    make_matrix_inverse,
    make_sheared_swap,
    sample_target_law,
)
from ._loaders import MEASURE_FILE_FORMATS, load_measures
from ._lorenz96 import OBSERVATION_NOISES, integrate_lorenz96, make_lorenz96_analysis

__all__ = [
    "TAILS",
    "BENCHMARK_NAMES",
    "MEASURE_FILE_FORMATS",
    "OBSERVATION_NOISES",
    "make_matrix_inverse",
    "make_sheared_swap",
    "load_benchmark",
    "sample_target_law",
    "load_measures",
    "check_measures",
    "make_lorenz96_analysis",
    "integrate_lorenz96",
]
