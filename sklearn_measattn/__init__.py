"""Measure-to-measure regression with kernel-attention transformers.

Each sample is an ensemble of points (an empirical probability measure); the
model maps an input ensemble to an output ensemble with a post-norm transformer
whose attention kernel may grow more slowly than softmax's exponential, which
keeps heavy-tailed ensembles from collapsing.

Submodules: :mod:`~sklearn_measattn.kernels`, :mod:`~sklearn_measattn.attention`,
:mod:`~sklearn_measattn.transformer`, :mod:`~sklearn_measattn.datasets`,
:mod:`~sklearn_measattn.metrics`, :mod:`~sklearn_measattn.experiments`.

The public names are imported on first use (PEP 562): ``import
sklearn_measattn`` and ``measattn --help`` load neither torch nor skorch;
``from sklearn_measattn import MeasureTransformerRegressor`` loads what that
name needs.
"""

import importlib

from ._version import __version__ as __version__

# Each public name and the module, relative to this package, that defines it.
_HOMES = {
    "AttentionKernel": "kernels",
    "KERNEL_NAMES": "kernels",
    "MeasureDisplay": "inspection",
    "MeasureTransformer": "transformer",
    "MeasureTransformerRegressor": "estimator",
    "StopTraining": "estimator",
    "SymlogTransformer": "preprocessing",
    "UnstorableParameterError": "_persistence",
    "get_kernel": "kernels",
    "get_scorer": "metrics",
    "kernel_attention": "attention",
    "load_model": "_model_files",
    "save_model": "_model_files",
}

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


def _submodules():
    """The names of the modules and subpackages directly in this package (read from the folder, not imported)."""
    import pkgutil

    return {info.name for info in pkgutil.iter_modules(__path__)}


def __getattr__(name):
    """Import a public name, or a submodule, on first use."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    elif name in _submodules():
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | _submodules())
