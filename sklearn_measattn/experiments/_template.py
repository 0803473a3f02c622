"""The estimator template of the experiments: one regressor, cloned for each fit.

An experiment is handed a :class:`~sklearn_measattn.MeasureTransformerRegressor`
and sets on each clone only what the experiment varies (kernel, transform,
seed); every other hyper-parameter comes from the template, so a parameter
added to the estimator reaches the experiments without an edit here.
"""

from __future__ import annotations

from sklearn.base import clone

from ..estimator import MeasureTransformerRegressor
from ..kernels import get_kernel

#: What an experiment sets on each clone of the template.
VARIED_PARAMETERS = ("kernel", "transform", "random_state")

def experiment_estimator(estimator, *, defaults, caller):
    """The template of an experiment: ``estimator``, or the experiment's default.

    Parameters
    ----------
    estimator : MeasureTransformerRegressor or None
        The template the caller passed; ``None`` for the experiment's default.
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
    """
    if estimator is None:
        return MeasureTransformerRegressor(**defaults)
    if not isinstance(estimator, MeasureTransformerRegressor):
        raise TypeError(f"estimator must be a MeasureTransformerRegressor (the template each fit of {caller} "
                        f"clones) or None, got {type(estimator).__name__}.")
    return clone(estimator)


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
