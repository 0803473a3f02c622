"""A version stamp in pickles, checked on load, and CUDA-trained models loadable on a CPU."""

from __future__ import annotations

import inspect
import warnings

_VERSION_KEY = "_sklearn_measattn_version"


def _package_version():
    # Imported lazily: the package __init__ imports the estimator before defining __version__.
    from . import __version__

    return __version__


def _major_minor(version):
    return tuple(str(version).split(".")[:2])


class VersionStampMixin:
    """Pickle with the package version; refuse another major.minor version on load.

    A model trained on CUDA and loaded where CUDA is not available is moved to
    the CPU by skorch, with its ``DeviceWarning`` (``device_``, read from the
    net, becomes ``"cpu"``).
    """

    def __getstate__(self):
        state = super().__getstate__()
        state[_VERSION_KEY] = _package_version()
        return state

    def __setstate__(self, state):
        state = dict(state)
        saved = state.pop(_VERSION_KEY, None)
        current = _package_version()
        if saved is None:
            warnings.warn(
                f"This {type(self).__name__} was pickled without a sklearn_measattn version stamp "
                f"(an unknown, older version); loading it with version {current} may fail or "
                "give wrong predictions. Refit and save it again.",
                UserWarning,
                stacklevel=2,
            )
        elif _major_minor(saved) != _major_minor(current):
            raise RuntimeError(
                f"This {type(self).__name__} was saved with sklearn_measattn {saved}, but this is "
                f"sklearn_measattn {current}; models are only loadable within the same major.minor "
                f"version. Install sklearn_measattn=={saved} to load it, or refit the model."
            )
        # Parameters added to the estimator after it was saved take their defaults.
        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            if parameter.kind is parameter.KEYWORD_ONLY and name not in state:
                state[name] = parameter.default
        # Saved before the device became a property of the fitted net: the net's own device decides.
        state.pop("device_", None)
        super().__setstate__(state)
