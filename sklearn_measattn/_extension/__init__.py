"""The compiled CPU kernels (fused attention, the energy distance's moments) and their loader."""

from ._loader import (
    KIND_LOG,
    KIND_POLY_INT,
    KIND_POLY_REAL,
    KIND_SIGMOID,
    KIND_SOFTMAX,
    KIND_SOFTPLUS,
    build_seconds,
    fused_unavailable_reason,
)

__all__ = [
    "build_seconds",
    "fused_unavailable_reason",
    "KIND_LOG",
    "KIND_POLY_INT",
    "KIND_POLY_REAL",
    "KIND_SIGMOID",
    "KIND_SOFTMAX",
    "KIND_SOFTPLUS",
]
