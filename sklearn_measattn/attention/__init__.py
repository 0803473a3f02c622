"""Kernel attention: ``softmax(g(Q K^T / sqrt(d))) V`` with several backends.

A positive attention kernel ``kappa = exp(g)`` normalised over the keys is exactly
a softmax of the log-weights ``g(S)``. Per-point weights ``w_j`` of the input
measure enter as ``+ log w_j`` on the logits, so a zero weight removes a point
and a weight ``k`` counts it ``k`` times.

The backends are records in one table (``_backends.py``): each says which
requests it supports and how it runs; ``"auto"`` takes the first of
:data:`AUTO_PREFERENCE` that supports the request.
"""

from ._api import fused_status, kernel_attention
from ._backends import AUTO_PREFERENCE, BACKENDS, resolve_backend

# For the rest of the package (the transformer, the diagnostics, inspection), not the user.
from ._backends import run_attention as run_attention
from ._weights import attention_weight_blocks as attention_weight_blocks
from ._weights import log_point_weights as log_point_weights
from ._weights import query_ess_fractions as query_ess_fractions

__all__ = ["kernel_attention", "fused_status", "resolve_backend", "BACKENDS", "AUTO_PREFERENCE"]
