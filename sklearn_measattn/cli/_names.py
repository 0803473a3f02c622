"""The names and defaults the ``measattn`` options offer, written out so that ``--help`` imports nothing heavy.

The library's own tables live in modules that load torch, skorch or
scikit-learn (a few seconds); the parsers need only the names. The tests of
the command line check that every table here equals the library's, so that a
kernel, tail, benchmark, loss or default added there fails a test until it is
added here.
"""

from __future__ import annotations

__all__ = [
    "ALL_KERNEL_NAMES",
    "BENCHMARK_NAMES",
    "KERNEL_NAMES",
    "LOSS_NAMES",
    "SPARSE_KERNEL_NAMES",
    "TAILS",
]

#: :data:`sklearn_measattn.kernels.KERNEL_NAMES`: the kernels with a closed-form log-weight.
KERNEL_NAMES = ("softmax", "poly", "log", "sigmoid", "softplus")
#: :data:`sklearn_measattn.kernels.SPARSE_KERNEL_NAMES`: the kernels of bounded support.
SPARSE_KERNEL_NAMES = ("compact", "sparsemax")
#: :data:`sklearn_measattn.kernels.ALL_KERNEL_NAMES`: every kernel the estimator takes by name.
ALL_KERNEL_NAMES = (*KERNEL_NAMES, *SPARSE_KERNEL_NAMES, "learned_poly")
#: :data:`sklearn_measattn.datasets.TAILS`: the base families of the benchmarks.
TAILS = ("gaussian", "student_t", "pareto")
#: :data:`sklearn_measattn.datasets.BENCHMARK_NAMES`: the built-in benchmarks.
BENCHMARK_NAMES = ("matrix_inverse", "sheared_swap")
#: The keys of :data:`sklearn_measattn.losses.LOSSES`: the training losses.
LOSS_NAMES = ("energy", "sliced", "sinkhorn", "mse", "quantile")
