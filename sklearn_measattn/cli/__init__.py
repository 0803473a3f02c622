"""The ``measattn`` command line (also ``python -m sklearn_measattn``)."""

from ._main import main

__all__ = ["main"]
