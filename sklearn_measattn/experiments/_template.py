"""The estimator template of the experiments: one regressor, cloned for each fit.

An experiment is handed a :class:`~sklearn_measattn.MeasureTransformerRegressor`
and sets on each clone only what the experiment varies (kernel, transform,
seed); every other hyper-parameter comes from the template, so a parameter
added to the estimator reaches the experiments without an edit here. The
network keywords the experiments took before (``d_model``, ``epochs``, ...)
still build the template, with a ``FutureWarning``.
"""

from __future__ import annotations

import warnings

from sklearn.base import clone

from ..estimator import MeasureTransformerRegressor
from ..kernels import get_kernel

#: The network and training keywords the experiments took before the template, and the estimator
#: parameter each one sets.
DEPRECATED_KEYWORDS = {
    "epochs": "max_epochs", "d_model": "d_model", "n_heads": "n_heads", "n_layers": "n_layers",
    "dim_feedforward": "dim_feedforward", "lr": "lr", "lr_schedule": "lr_schedule", "batch_size": "batch_size",
    "device": "device",
}

#: What an experiment sets on each clone of the template.
VARIED_PARAMETERS = ("kernel", "transform", "random_state")

#: The default value of a deprecated keyword: "not given".
DEPRECATED = "deprecated"


def experiment_estimator(estimator, keywords, *, defaults, caller):
    """The template of an experiment: ``estimator``, or one built from the deprecated keywords.

    Parameters
    ----------
    estimator : MeasureTransformerRegressor or None
        The template the caller passed; ``None`` for the experiment's default.
    keywords : dict
        The caller's arguments (its ``locals()``); those named in
        :data:`DEPRECATED_KEYWORDS` are read, :data:`DEPRECATED` meaning not given.
    defaults : dict
        The estimator parameters of the experiment's default template (those
        that differ from the estimator's own defaults, e.g. fewer epochs).
    caller : str
        The experiment's name, for the messages.

    Returns
    -------
    template : MeasureTransformerRegressor
        An unfitted clone (the caller's object is never changed).

    Raises
    ------
    TypeError
        If ``estimator`` is not a :class:`~sklearn_measattn.MeasureTransformerRegressor`.
    ValueError
        If ``estimator`` and deprecated keywords are both given.
    """
    given = {name: keywords[name] for name in DEPRECATED_KEYWORDS
             if name in keywords and not _is_default(keywords[name])}
    if estimator is not None:
        if not isinstance(estimator, MeasureTransformerRegressor):
            raise TypeError(f"estimator must be a MeasureTransformerRegressor (the template each fit of {caller} "
                            f"clones) or None, got {type(estimator).__name__}.")
        if given:
            raise ValueError(
                f"{caller} got estimator= and {', '.join(sorted(given))}: set "
                f"{', '.join(sorted(DEPRECATED_KEYWORDS[name] for name in given))} on the estimator instead."
            )
        return clone(estimator)
    params = {**defaults, **{DEPRECATED_KEYWORDS[name]: value for name, value in given.items()}}
    if given:
        settings = ", ".join(f"{name}={value!r}" for name, value in params.items())
        warnings.warn(
            f"Passing {', '.join(given)} to {caller} is deprecated in 0.2 and will be removed in 0.3; "
            f"pass estimator=MeasureTransformerRegressor({settings}) instead (the experiment sets the kernel, "
            "transform and seed of each fit).",
            FutureWarning,
            stacklevel=3,
        )
    return MeasureTransformerRegressor(**params)


def _is_default(value):
    return isinstance(value, str) and value == DEPRECATED


def fit_estimator(template, *, kernel, transform, seed, kernel_params=None):
    """A clone of ``template`` set to one fit of an experiment.

    Parameters
    ----------
    template : MeasureTransformerRegressor
        The experiment's template.
    kernel : str
        The attention kernel of the fit.
    transform : {None, "none", "symlog"}
        Its data transform (``"none"`` is None).
    seed : int
        Its ``random_state``.
    kernel_params : dict or None, default=None
        Given: the kernel's parameters; None keeps the template's.

    Returns
    -------
    model : MeasureTransformerRegressor
        Unfitted.
    """
    params = {"kernel": kernel, "transform": None if transform in (None, "none") else transform,
              "random_state": seed}
    if kernel_params is not None:
        params["kernel_params"] = kernel_params
    return clone(template).set_params(**params)


def check_kernels(template, kernels, kernel_params=None):
    """Build each kernel of an experiment once, so that a bad name or parameter fails before any fit.

    Parameters
    ----------
    template : MeasureTransformerRegressor
        The experiment's template (its ``kernel_params`` apply unless
        ``kernel_params`` is given).
    kernels : sequence of str
        The kernels the experiment fits.
    kernel_params : dict or None, default=None
        The experiment's kernel parameters.

    Raises
    ------
    ValueError, TypeError
        From :func:`~sklearn_measattn.get_kernel`, naming the kernel.
    """
    params = template.kernel_params if kernel_params is None else kernel_params
    for kernel in kernels:
        try:
            get_kernel(kernel, **(params or {}))
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"Invalid kernel={kernel!r} / kernel_params={params!r}: {exc}") from exc
