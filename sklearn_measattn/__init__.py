"""Measure-to-measure regression with kernel-attention transformers.

Each sample is an ensemble of points (an empirical probability measure); the
model maps an input ensemble to an output ensemble with a post-norm transformer
whose attention kernel may grow more slowly than softmax's exponential, which
keeps heavy-tailed ensembles from collapsing.
"""

from .kernels import KERNEL_NAMES, AttentionKernel, get_kernel

__version__ = "0.1.0"

__all__ = [
    "AttentionKernel",
    "KERNEL_NAMES",
    "get_kernel",
]
