"""Saving fitted models: safetensors files that hold data only, and version-stamped pickles.

A model file written by :func:`save_model` is one safetensors file: the
network's tensors, and the estimator's parameters, the fitted transforms, the
training history and the versions as JSON metadata. Reading it parses JSON and
copies tensors; nothing in it is ever executed, so a file from anyone is safe
to load. A pickle (``joblib.dump``) can store anything, user functions
included, and runs code when loaded: it is for files you made yourself.

Every file written here records a SHA-256 digest of its content
(:func:`content_digest`), checked when it is read: a file damaged on disk or in
transfer is refused instead of giving wrong predictions. Files written before
the digest existed have none and load unchecked.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sys
import warnings
from numbers import Integral

import numpy as np
import torch

from . import _version

_VERSION_KEY = "_sklearn_measattn_version"

#: What ``save_model`` writes in the file's metadata, under ``_METADATA_KEY``.
FORMAT_NAME = "sklearn-measattn-model"
#: What a checkpoint (``checkpoint_dir``) writes there instead: the same layout with the training state.
CHECKPOINT_FORMAT = "sklearn-measattn-checkpoint"
#: The version of that layout; a file with a higher one was written by a newer release.
FORMAT_VERSION = 1
_METADATA_KEY = "sklearn_measattn"
# Beside it in the safetensors metadata: the hex SHA-256 of :func:`content_digest`.
_DIGEST_KEY = "sklearn_measattn_sha256"
# A safetensors header is JSON describing the tensors; ours stays far below this.
_MAX_HEADER_BYTES = 100 * 2**20


class UnstorableParameterError(ValueError, TypeError):
    """A parameter is a Python object (a function, a custom transformer) that a data-only file cannot hold.

    Raised by :func:`save_model` and by ``checkpoint_dir``; it is both a
    ``ValueError`` and a ``TypeError``.

    Examples
    --------
    >>> import os, tempfile
    >>> import torch
    >>> from sklearn_measattn import MeasureTransformerRegressor, UnstorableParameterError, save_model
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> def my_kernel(scores):
    ...     return torch.log1p(torch.relu(scores))
    >>> X, y = make_matrix_inverse(n_samples=4, n_points=8, random_state=0)
    >>> model = MeasureTransformerRegressor(kernel=my_kernel, d_model=8, n_heads=2, n_layers=1,
    ...                                     max_epochs=1, random_state=0).fit(X, y)
    >>> try:
    ...     save_model(model, os.path.join(tempfile.mkdtemp(), "model.safetensors"))
    ... except UnstorableParameterError as exc:
    ...     print(str(exc).startswith("kernel is <function my_kernel"), isinstance(exc, ValueError))
    True True
    """


def _package_version():
    return _version.__version__  # looked up on each call, so that tests can stand in another version


def major_minor(version):
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
        elif major_minor(saved) != major_minor(current):
            raise RuntimeError(
                f"This {type(self).__name__} was saved with sklearn_measattn {saved}, but this is "
                f"sklearn_measattn {current}; models are only loadable within the same major.minor "
                f"version. Install sklearn_measattn=={saved} to load it, or refit the model."
            )
        super().__setstate__(state)


# ----------------------------------------------------------------- transforms
def _storable_transformers():
    """The transformer classes whose state is plain data, by the name a file records."""
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler

    from .preprocessing import SymlogTransformer

    classes = (SymlogTransformer, StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler)
    return {f"{cls.__module__.split('.')[0]}.{cls.__name__}": cls for cls in classes}


def _transformer_name(transformer):
    for name, cls in _storable_transformers().items():
        if type(transformer) is cls:
            return name
    return None


def _unstorable(what, value, remedy):
    return UnstorableParameterError(
        f"{what} is {value!r}, a Python object that a model file cannot store as data (it would have to run "
        f"code when loaded). {remedy} To keep such a model, pickle it (joblib.dump) and load the pickle only "
        "on machines and from sources you trust."
    )


def _transform_param(value):
    """The ``transform`` parameter as JSON data."""
    if value is None or isinstance(value, str):
        return value
    name = _transformer_name(value)
    if name is None:
        storable = ", ".join(sorted(_storable_transformers()))
        raise _unstorable("transform", value, f"Model files store transform=None, 'symlog' or one of {storable}.")
    return {"transformer": name, "params": _json_params(value.get_params(deep=False), "transform")}


def _fitted_transformer(transformer, prefix, tensors):
    """A fitted transformer's state: JSON for its parameters and scalars, tensors (added) for its arrays."""
    if transformer is None:
        return None
    name = _transformer_name(transformer)
    if name is None:
        raise _unstorable(prefix, transformer, "Use transform=None, 'symlog' or a scikit-learn scaler.")
    attributes = {}
    for key, value in vars(transformer).items():
        if not key.endswith("_") or key.startswith("_"):
            continue
        if isinstance(value, np.ndarray) and value.dtype.kind in "fiub":
            tensors[f"{prefix}.{key}"] = torch.from_numpy(np.ascontiguousarray(value)).clone()
            attributes[key] = {"tensor": f"{prefix}.{key}"}
        elif isinstance(value, np.ndarray):  # feature names
            attributes[key] = {"strings": [str(item) for item in value]}
        else:
            attributes[key] = {"value": _plain(value)}
    return {"transformer": name, "params": _json_params(transformer.get_params(deep=False), prefix),
            "attributes": attributes}


def _restored_transformer(state, tensors):
    if state is None:
        return None
    cls = _storable_transformers()[state["transformer"]]
    transformer = cls(**state["params"])
    for key, value in state["attributes"].items():
        if "tensor" in value:
            setattr(transformer, key, tensors[value["tensor"]].numpy())
        elif "strings" in value:
            setattr(transformer, key, np.asarray(value["strings"], dtype=object))
        else:
            setattr(transformer, key, value["value"])
    return transformer


# ----------------------------------------------------------------- parameters
def _plain(value):
    """``value`` with numpy scalars made Python numbers, for JSON."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def _json_params(params, owner):
    """``params`` as JSON data, or an error naming the one that is not data."""
    out = {}
    for name, value in params.items():
        value = _plain(value)
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise _unstorable(f"{owner} parameter {name}", value, "") from None
        out[name] = value
    return out


def estimator_params_as_data(estimator):
    """The estimator's parameters as JSON data (what a model file and a checkpoint record).

    ``callbacks`` are not stored (they are training-time objects: the loaded
    estimator has ``callbacks=None``), a ``RandomState`` instance is stored as
    None (the seed the fit drew from it is stored with the network) and a
    ``torch.device`` as its string. A function given as the kernel or the loss
    raises :class:`UnstorableParameterError`.
    """
    params = estimator.get_params(deep=False)
    for name in ("kernel", "loss"):
        if callable(params[name]):
            raise _unstorable(
                name, params[name],
                f"Model files store the built-in {name}s by name; a {name} given as a function is code.",
            )
    params["callbacks"] = None
    if isinstance(params["random_state"], np.random.RandomState):
        params["random_state"] = None
    if isinstance(params["device"], torch.device):
        params["device"] = str(params["device"])
    if params.get("checkpoint_dir") is not None:
        params["checkpoint_dir"] = os.fspath(params["checkpoint_dir"])
    transform = _transform_param(params.pop("transform"))
    out = _json_params(params, type(estimator).__name__)
    out["transform"] = transform
    return out


def params_from_data(params):
    """Constructor arguments from :func:`estimator_params_as_data`'s output."""
    params = dict(params)
    transform = params.get("transform")
    if isinstance(transform, dict):
        params["transform"] = _storable_transformers()[transform["transformer"]](**transform["params"])
    return params


# ----------------------------------------------------------------- state
def _history_as_data(history):
    return json.loads(json.dumps(list(history), default=_json_default))


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return repr(value)  # a user callback's entry that is not data: kept as its text


def network_state(net, *, params, transform_X, transform_y, n_features_in, n_features_out, kind=FORMAT_NAME):
    """``(tensors, metadata)`` of a net and its fitted transforms (a model file's or a checkpoint's core)."""
    tensors = {f"module.{key}": value.detach().cpu().contiguous().clone()
               for key, value in net.module_.state_dict().items()}
    metadata = {
        "format": kind,
        "format_version": FORMAT_VERSION,
        "package_version": _package_version(),
        "torch_version": torch.__version__.split("+")[0],
        "estimator": "MeasureTransformerRegressor",
        "params": params,
        "n_features_in": int(n_features_in),
        "n_features_out": int(n_features_out),
        "seed": int(net.loader_seed),
        "transform_X": _fitted_transformer(transform_X, "transform_X", tensors),
        "transform_y": _fitted_transformer(transform_y, "transform_y", tensors),
        "history": _history_as_data(net.history),
    }
    return tensors, metadata


def restored_transforms(tensors, metadata):
    """The fitted ``(transform_X, transform_y)`` a file holds."""
    return (_restored_transformer(metadata["transform_X"], tensors),
            _restored_transformer(metadata["transform_y"], tensors))


def _module_tensors(tensors):
    return {key[len("module."):]: value for key, value in tensors.items() if key.startswith("module.")}


def load_network(net, tensors, metadata):
    """Put a file's weights and history into an initialised ``net``."""
    from skorch.history import History

    net.module_.load_state_dict(_module_tensors(tensors))
    net.history_ = History(metadata["history"])


# ----------------------------------------------------------------- files
def _canonical_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def content_digest(tensors, metadata):
    """The SHA-256 (hex) that a model file or a checkpoint records of its content, and is checked against.

    The hash is fed, for each tensor in the order of the sorted names, the
    canonical JSON of ``[name, dtype, shape]`` (``dtype`` as torch spells it,
    ``"torch.float32"``), a newline and the tensor's bytes (C order,
    little-endian, as safetensors stores them); then the canonical JSON of
    ``metadata`` (sorted keys, no spaces, ASCII, ``NaN``/``Infinity`` as
    Python's ``json`` writes them). The shape and dtype fix each tensor's byte
    count, so the sequence reads back one way only.

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
        The file's tensors, on the CPU.
    metadata : dict
        The file's metadata as JSON reads it back (string keys, lists).

    Returns
    -------
    digest : str
        64 hexadecimal digits.
    """
    sha = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        sha.update(_canonical_json([name, str(tensor.dtype), list(tensor.shape)]).encode() + b"\n")
        raw = tensor.reshape(-1).view(torch.uint8)
        if sys.byteorder == "big" and tensor.element_size() > 1:
            raw = raw.reshape(-1, tensor.element_size()).flip(-1).reshape(-1)
        sha.update(raw.numpy())
    sha.update(_canonical_json(metadata).encode())
    return sha.hexdigest()


def _create_beside(path):
    """Create a new, empty temporary file next to ``path``: ``(descriptor, name)``.

    It is opened as ``open`` creates files (mode ``0o666`` less the umask),
    not with ``tempfile``'s owner-only ``0o600``, so that the file it becomes
    has the permissions of any file the user writes.
    """
    directory = os.path.dirname(os.path.abspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        name = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue


def write_state(path, tensors, metadata):
    """Write one safetensors file atomically: into a temporary file beside it, then renamed over ``path``.

    A crash while writing leaves whatever was at ``path`` before intact. The
    metadata records the :func:`content_digest` of the file's content, and the
    file gets the permissions the umask gives new files.
    """
    from safetensors.torch import save

    text = json.dumps(metadata, allow_nan=True)
    digest = content_digest(tensors, json.loads(text))
    payload = save(tensors, metadata={"format": "pt", _METADATA_KEY: text, _DIGEST_KEY: digest})
    path = os.fspath(path)
    handle, temporary = _create_beside(path)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _check_digest(path, recorded, tensors, metadata, expected):
    """Refuse a file whose content differs from the digest it recorded (a file without one passes)."""
    if recorded is None or content_digest(tensors, metadata) == recorded:
        return
    if expected == CHECKPOINT_FORMAT:
        remedy = (f"The fit cannot resume from it; delete the checkpoint file {path!r} (or its directory "
                  f"{os.path.dirname(path)!r}) and the fit starts afresh.")
    else:
        remedy = "Copy or download it again from where it came."
    raise ValueError(
        f"{path!r} is damaged: its tensors or metadata differ from the SHA-256 digest recorded when it was "
        f"written (bytes changed on disk or in transfer). {remedy} Nothing in the file was used."
    )


# Leading bytes of the files people mistake for a model file, and what they are.
_SIGNATURES = (
    (b"\x80", "a pickle (as written by joblib.dump, pickle.dump or torch.save's legacy format)"),
    (b"PK\x03\x04", "a zip archive (a torch.save file or an .npz)"),
    (b"\x1f\x8b", "a gzip-compressed file (e.g. a compressed joblib pickle)"),
    (b"x\x9c", "a zlib-compressed file (e.g. a compressed joblib pickle)"),
    (b"x\x01", "a zlib-compressed file (e.g. a compressed joblib pickle)"),
    (b"x^", "a zlib-compressed file (e.g. a compressed joblib pickle)"),
    (b"x\xda", "a zlib-compressed file (e.g. a compressed joblib pickle)"),
    (b"BZh", "a bz2-compressed file (e.g. a compressed joblib pickle)"),
    (b"\xfd7zXZ", "an xz-compressed file (e.g. a compressed joblib pickle)"),
    (b"\x04\x22\x4d\x18", "an lz4-compressed file (e.g. a compressed joblib pickle)"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"\x89HDF", "an HDF5 file"),
)


#: The bytes :func:`describe_file` reads: a safetensors file's header length and its JSON's first byte.
HEAD_BYTES = 9


def _starts_like_safetensors(head):
    # An 8-byte little-endian header length, then the JSON header. The length's bytes can
    # match a signature (a 1152-byte header starts b"\x80\x04", as a protocol-4 pickle does),
    # so this is checked first; no pickle or archive has "{" at byte 8 after two zero bytes.
    return len(head) >= HEAD_BYTES and head[6:8] == b"\x00\x00" and head[8:9] == b"{"


def describe_file(head):
    """What a file's first :data:`HEAD_BYTES` bytes say it is (None: a safetensors file, or nothing recognised)."""
    if _starts_like_safetensors(head):
        return None
    for signature, what in _SIGNATURES:
        if head.startswith(signature):
            return what
    return None


def is_pickle_like(path):
    """Whether ``path`` starts like a (possibly compressed) pickle or joblib file."""
    with open(path, "rb") as file:
        what = describe_file(file.read(HEAD_BYTES))
    return what is not None and ("pickle" in what or "compressed" in what)


def not_a_model_error(path, reason):
    return ValueError(
        f"{path!r} is not a sklearn-measattn model file: {reason}. Give a file written by "
        "sklearn_measattn.save_model (or measattn fit --save MODEL.safetensors). Nothing in the file was run."
    )


def read_state(path, *, expected=FORMAT_NAME):
    """``(tensors, metadata)`` of a file written by :func:`write_state`, checked before anything is read.

    Only JSON is parsed and tensors copied: nothing in the file can run. The
    content is checked against its recorded :func:`content_digest` (a file
    written before digests were recorded has none, and is not checked).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No model file at {path!r}.")
    with open(path, "rb") as file:
        payload = file.read()
    what = describe_file(payload[:HEAD_BYTES])
    if what is not None:
        advice = (" Pickles can run code when loaded: load it with load_model(..., allow_pickle=True) only if you "
                  "trust its source, then save it again with sklearn_measattn.save_model") if "pickle" in what else ""
        raise not_a_model_error(path, f"it is {what}, not a safetensors file.{advice}".rstrip("."))
    if len(payload) < 8:
        raise not_a_model_error(path, f"it has {len(payload)} bytes, fewer than a safetensors header")
    header_size = int.from_bytes(payload[:8], "little")
    if header_size > min(_MAX_HEADER_BYTES, len(payload) - 8):
        raise not_a_model_error(
            path, f"its first 8 bytes announce a {header_size}-byte header in a {len(payload)}-byte file "
            "(a truncated file, or another format)"
        )
    try:
        header = json.loads(payload[8:8 + header_size])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise not_a_model_error(path, "its header is not JSON (a truncated file, or another format)") from None
    if not isinstance(header, dict):
        raise not_a_model_error(path, "its header is not a safetensors header")
    data_end = max((int(entry["data_offsets"][1]) for key, entry in header.items()
                    if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry), default=0)
    if 8 + header_size + data_end > len(payload):
        raise not_a_model_error(
            path, f"it is truncated: its header describes {8 + header_size + data_end} bytes but the file has "
            f"{len(payload)}. Copy or download it again"
        )
    stored = header.get("__metadata__") or {}
    raw = stored.get(_METADATA_KEY)
    if raw is None:
        raise not_a_model_error(path, "it is a safetensors file without sklearn-measattn metadata (tensors only)")
    try:
        metadata = json.loads(raw)
    except json.JSONDecodeError:
        raise not_a_model_error(path, "its sklearn-measattn metadata is not valid JSON") from None
    kind = metadata.get("format") if isinstance(metadata, dict) else None
    if kind != expected:
        names = {FORMAT_NAME: "a model file", CHECKPOINT_FORMAT: "a training checkpoint"}
        raise not_a_model_error(path, f"it is {names.get(kind, repr(kind))}, where {names.get(expected, expected)} "
                                 "was expected")
    version = metadata.get("format_version")
    if not isinstance(version, Integral) or version < 1:
        raise not_a_model_error(path, f"its format version {version!r} is not a version number")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{path!r} was written by sklearn-measattn {metadata.get('package_version', '(unknown)')} in model-file "
            f"format {version}; this is sklearn-measattn {_package_version()}, which reads formats up to "
            f"{FORMAT_VERSION}. Upgrade: pip install --upgrade sklearn-measattn. Nothing in the file was run."
        )
    try:
        tensors = load(payload)
    except SafetensorError as exc:
        raise not_a_model_error(path, f"safetensors could not read its tensors ({exc})") from None
    _check_digest(path, stored.get(_DIGEST_KEY), tensors, metadata, expected)
    return tensors, metadata


def warn_other_version(metadata):
    saved = metadata.get("package_version")
    if saved is not None and major_minor(saved) != major_minor(_package_version()):
        warnings.warn(
            f"The model file was written by sklearn-measattn {saved}; this is {_package_version()}. Its format "
            "is read exactly, but the network's code may differ between versions: check its predictions.",
            UserWarning,
            stacklevel=3,
        )
