"""Measure-to-measure regression with kernel-attention transformers.

Each sample is an ensemble of points (an empirical probability measure); the
model maps an input ensemble to an output ensemble with a post-norm transformer
whose attention kernel may grow more slowly than softmax's exponential, which
keeps heavy-tailed ensembles from collapsing.

Submodules: :mod:`~sklearn_measattn.kernels`, :mod:`~sklearn_measattn.attention`,
:mod:`~sklearn_measattn.transformer`, :mod:`~sklearn_measattn.datasets`,
:mod:`~sklearn_measattn.metrics`, :mod:`~sklearn_measattn.experiments`.
"""

from . import datasets, experiments, metrics
from ._model_files import load_model, save_model
from ._persistence import UnstorableParameterError, alias_moved_modules
from ._version import __version__ as __version__
from .attention import kernel_attention
from .estimator import MeasureTransformerRegressor, StopTraining
from .inspection import MeasureDisplay
from .kernels import KERNEL_NAMES, AttentionKernel, get_kernel
from .metrics import get_scorer
from .preprocessing import SymlogTransformer
from .transformer import MeasureTransformer

alias_moved_modules()

__all__ = [
    "AttentionKernel",
    "KERNEL_NAMES",
    "MeasureDisplay",
    "MeasureTransformer",
    "MeasureTransformerRegressor",
    "StopTraining",
    "SymlogTransformer",
    "datasets",
    "experiments",
    "get_kernel",
    "get_scorer",
    "kernel_attention",
    "load_model",
    "metrics",
    "save_model",
    "UnstorableParameterError",
]
