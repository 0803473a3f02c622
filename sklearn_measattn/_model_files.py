"""Model files: :func:`save_model` and :func:`load_model`, on the safetensors format of :mod:`._persistence`."""

import os
import warnings

from ._persistence import (
    estimator_params_as_data,
    is_pickle_like,
    network_state,
    not_a_model_error,
    params_from_data,
    read_state,
    warn_other_version,
    write_state,
)
from ._training import resolve_device
from .estimator import MeasureTransformerRegressor, fitted_network, restore_fitted


def fitted_state(estimator):
    """``(tensors, metadata)`` of a fitted estimator: everything that predicts and reports as it does."""
    network = fitted_network(estimator)
    tensors, metadata = network_state(
        network.net, params=estimator_params_as_data(estimator), transform_X=network.transform_X,
        transform_y=network.transform_y, n_features_in=network.n_features_in,
        n_features_out=network.n_features_out,
    )
    metadata["learned_kernel_params"] = {
        key: value.tolist() for key, value in network.learned_kernel_params().items()
    }
    recipe = getattr(estimator, "analysis_recipe_", None)
    if recipe is not None:
        metadata["analysis_recipe"] = recipe
    return tensors, metadata


def _load_device(requested, saved):
    """The device a loaded model runs on: the one asked for, else the saved one where it exists, else the CPU."""
    if requested is not None:
        return resolve_device(requested)
    try:
        return resolve_device(saved)
    except ValueError:
        warnings.warn(
            f"The model was saved with device={saved!r}, which this machine lacks; it is loaded on the CPU "
            "(pass device= to load_model to choose).",
            UserWarning,
            stacklevel=3,
        )
        return "cpu"


def save_model(estimator, path):
    """Save a fitted model to one safetensors file that holds data only.

    The file holds the network's tensors and, as JSON metadata, the
    estimator's parameters, the fitted transforms, the learnt kernel
    parameters, ``n_features_in_``/``n_features_out_``, the training history,
    the package version and the file format's version, and, for a model
    trained as a learned analysis step, its ``analysis_recipe_`` (how the
    step reads it: window, localisation, ranges, how it was trained), which
    :func:`load_model` restores. Loading it
    (:func:`load_model`) runs nothing from the file, so it is safe to share
    and to load from anyone. The file is written atomically (a crash while
    saving leaves the previous file at ``path`` intact), with the permissions
    the umask gives any new file (``0o666`` less the umask, as ``open``
    creates files), so that it can be shared as other files are.

    The metadata also records a SHA-256 digest of the content, which
    :func:`load_model` checks: the hash of every tensor (in the order of the
    sorted names: the JSON of its name, dtype and shape, then its raw
    little-endian bytes) followed by the canonical JSON of the metadata
    (sorted keys, no spaces); see ``sklearn_measattn._persistence.content_digest``.

    Parameters
    ----------
    estimator : MeasureTransformerRegressor
        A fitted estimator whose kernel and loss are given by name and whose
        transform is None, ``"symlog"``, a ``SymlogTransformer`` or a
        scikit-learn scaler (``StandardScaler``, ``MinMaxScaler``,
        ``MaxAbsScaler``, ``RobustScaler``).
    path : str or path-like
        Where to write; by convention it ends with ``.safetensors``.

    Returns
    -------
    None

    Raises
    ------
    UnstorableParameterError
        (a ``ValueError`` and ``TypeError``) When a parameter is code (a kernel
        or loss given as a function, another transformer): pickle such a model
        with joblib instead, and load it only where you trust the file.
    sklearn.exceptions.NotFittedError
        When the estimator is not fitted.

    Notes
    -----
    ``callbacks`` are not saved (the loaded estimator has ``callbacks=None``),
    nor is the optimiser's state: a loaded model predicts, transports and
    reports diagnostics exactly as the saved one, and a warm start from it
    starts a fresh optimiser. ``checkpoint_dir`` keeps the optimiser for
    resuming a fit.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn_measattn import MeasureTransformerRegressor, load_model, save_model
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> X, y = make_matrix_inverse(n_samples=8, n_points=16, random_state=0)
    >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=1,
    ...                                     transform="symlog", random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> save_model(model, path)
    >>> loaded = load_model(path)
    >>> bool((loaded.predict(X) == model.predict(X)).all())
    True
    """
    if not isinstance(estimator, MeasureTransformerRegressor):
        raise TypeError(
            f"save_model saves a fitted MeasureTransformerRegressor, got {type(estimator).__name__}. For other "
            "objects (e.g. a Pipeline around it), save the regressor step with save_model and rebuild the rest."
        )
    tensors, metadata = fitted_state(estimator)
    write_state(path, tensors, metadata)


def load_model(path, *, device=None, allow_pickle=False):
    """Load a model saved by :func:`save_model`: a fitted estimator, without running anything from the file.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save_model` (or ``measattn fit --save``).
    device : str or torch.device, default=None
        Where the network runs: ``None`` keeps the saved ``device`` parameter
        where this machine has it and uses the CPU otherwise (with a warning),
        ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` choose. The
        estimator's ``device`` parameter is left as saved.
    allow_pickle : bool, default=False
        Also load a fitted estimator pickled with ``joblib.dump`` (or
        ``pickle.dump``), as ``numpy.load`` does with the same keyword:
        unpickling runs whatever code the file holds, so pass it only for a
        file you made or trust. ``device`` does not apply to a pickle.

    Returns
    -------
    estimator : MeasureTransformerRegressor
        The fitted estimator: it predicts, transports and reports diagnostics
        as the saved one did (on the same device, identically).

    Raises
    ------
    ValueError
        When the file is not a model file (a pickle without
        ``allow_pickle=True``, an archive, another safetensors file), is
        truncated, was written in a newer format, or is damaged (its tensors
        or metadata differ from the SHA-256 digest :func:`save_model`
        recorded: copy it again); the message says which, and nothing in the
        file was run. With ``allow_pickle=True``, also when the pickle does
        not hold a fitted ``MeasureTransformerRegressor``.
    FileNotFoundError
        When there is no file at ``path``.

    Notes
    -----
    The file's content is checked against the SHA-256 digest that
    :func:`save_model` recorded in it before anything is built from it. Files
    written by versions that recorded no digest load as before, unchecked and
    without a warning.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn_measattn import MeasureTransformerRegressor, load_model, save_model
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> X, y = make_matrix_inverse(n_samples=8, n_points=16, random_state=0)
    >>> model = MeasureTransformerRegressor(kernel="poly", kernel_params={"degree": "learn"}, d_model=8,
    ...                                     n_heads=2, n_layers=1, max_epochs=1, random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> save_model(model, path)
    >>> load_model(path).learned_kernel_params_["degree"].shape
    (1, 2)
    """
    if allow_pickle and os.path.isfile(path) and is_pickle_like(path):
        return _load_trusted_pickle(path)
    tensors, metadata = read_state(path)
    if metadata.get("estimator") != MeasureTransformerRegressor.__name__:
        raise not_a_model_error(os.fspath(path), f"it holds a {metadata.get('estimator')!r}")
    warn_other_version(metadata)
    estimator = MeasureTransformerRegressor(**_known_params(params_from_data(metadata["params"])))
    restore_fitted(estimator, tensors, metadata, device=_load_device(device, metadata["params"].get("device", "auto")))
    if "analysis_recipe" in metadata:
        estimator.analysis_recipe_ = metadata["analysis_recipe"]
    return estimator


def _load_trusted_pickle(path):
    import joblib

    try:
        model = joblib.load(path)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not a model file"
        raise not_a_model_error(os.fspath(path), f"it could not be unpickled ({type(exc).__name__}: {exc})") from exc
    if not isinstance(model, MeasureTransformerRegressor):
        raise not_a_model_error(os.fspath(path), f"it holds a {type(model).__name__}, not a "
                                "MeasureTransformerRegressor")
    if not hasattr(model, "net_"):
        raise ValueError(f"{os.fspath(path)!r} holds an unfitted MeasureTransformerRegressor; fit it first.")
    return model


def _known_params(params):
    """Parameters this version's estimator takes (a newer minor version may have added some)."""
    known = MeasureTransformerRegressor().get_params(deep=False)
    return {name: value for name, value in params.items() if name in known}
