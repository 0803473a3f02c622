"""The ``measattn`` command line (also ``python -m sklearn_measattn``).

One module per command (``diagnose``, ``compare``, ``fit``, ``predict``,
``ess``), each adding its parser and the function that runs it; the shared
argument types, files and reports in private modules that import no command.
"""

from ._main import main

__all__ = ["main"]
