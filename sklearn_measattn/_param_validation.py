"""scikit-learn's parameter validation, the one door through which the package uses it.

scikit-learn keeps its validation machinery (``validate_params``, the
constraint classes, ``InvalidParameterError``) in a private module,
``sklearn.utils._param_validation``, which may change without deprecation
between its releases. Every module of the package imports these names from
here, so that a change there is met in this one file (as imbalanced-learn does
with the same API); ``tests/test_architecture.py`` fails if any other module
imports scikit-learn's private module. The constraint tables themselves and
the package's own constraint classes live in ``_validation``.
"""

from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
    make_constraint,
    validate_parameter_constraints,
    validate_params,
)

__all__ = [
    "HasMethods",
    "Interval",
    "InvalidParameterError",
    "StrOptions",
    "make_constraint",
    "validate_parameter_constraints",
    "validate_params",
]
