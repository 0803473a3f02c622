"""Attention kernels, each defined by its log-weight ``g(s) = log kappa(s)``.

Normalised kernel attention with a positive kernel ``kappa = exp(g)`` is exactly
``softmax(g(S)) @ V``, so a kernel is fully described by ``g``. Every built-in ``g``
is written so that it is finite, with finite gradient, for scores as large as
``|s| = 1e4`` in float32.

The package holds the kernel record and the built-in log-weights (``_forms``),
the registry of built-in kernels by name (``_registry``), the one-exponential
factorisations the fused CPU kernels use (``_factorization``) and sparsemax's
thresholded weights (``_sparsemax``).
"""

from ._factorization import KappaFactorization
from ._forms import AttentionKernel
from ._registry import (
    ALL_KERNEL_NAMES,
    KERNEL_NAMES,
    SPARSE_KERNEL_NAMES,
    get_kernel,
)

# For the rest of the package (the transformer, attention's backends, the phase diagram), not the user.
from ._registry import LEARNED_DEGREE_INITIAL as LEARNED_DEGREE_INITIAL
from ._registry import learned_degree as learned_degree
from ._registry import learned_degree_raw as learned_degree_raw
from ._registry import poly_at_degree as poly_at_degree
from ._sparsemax import sparsemax_score_grad as sparsemax_score_grad
from ._sparsemax import sparsemax_weights as sparsemax_weights
from ._sparsemax import uniform_where_empty as uniform_where_empty

__all__ = ["ALL_KERNEL_NAMES", "AttentionKernel", "KappaFactorization", "KERNEL_NAMES", "SPARSE_KERNEL_NAMES", "get_kernel"]
