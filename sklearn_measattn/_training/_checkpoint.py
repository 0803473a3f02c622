"""Checkpoints of a fit in progress, written every epoch and resumed by the next fit of the same model.

A checkpoint is one safetensors file in ``checkpoint_dir`` (data only, like a
model file): the network, the optimiser's state, the history, the state of
every private random stream (shuffling, dropout, sliced-loss projections), the
early-stopping state, the fitted transforms, the parameters and a fingerprint
of the data. It is written atomically at the end of every epoch, so a fit
killed at any moment leaves the last completed epoch on disk, and a fit with
the same parameters and data continues from it to the same model an
uninterrupted fit ends with. Like a model file it records the SHA-256 digest
of its content (:func:`~sklearn_measattn._persistence.content_digest`); a
checkpoint damaged on disk is refused, naming the file to delete to start
afresh, instead of being resumed.
"""

from __future__ import annotations

import glob
import hashlib
import os
import sys

import numpy as np
import torch
from skorch.callbacks import Callback

from .._persistence import (
    CHECKPOINT_FORMAT,
    load_network,
    network_state,
    read_state,
    restored_transforms,
    write_state,
)
from ._context import ContextSubsample
from ._distributed import is_first_process

CHECKPOINT_FILE = "checkpoint.safetensors"


def checkpoint_path(directory):
    """The checkpoint file in ``directory``."""
    return os.path.join(os.fspath(directory), CHECKPOINT_FILE)


def check_checkpoint_dir(directory):
    """Refuse a ``checkpoint_dir`` that is a file or cannot be written, before any work.

    The estimator's ``fit`` checks its ``checkpoint_dir`` with it; a caller
    can check one before loading any data.

    Parameters
    ----------
    directory : str or path-like
        The directory (created when the fit writes its first checkpoint).

    Raises
    ------
    ValueError
        When it is a file or cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> from sklearn_measattn.estimator import check_checkpoint_dir
    >>> check_checkpoint_dir(tempfile.mkdtemp())
    """
    directory = os.fspath(directory)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"checkpoint_dir={directory!r} is a file; give a directory (it is created if missing).")
    existing = directory
    while existing and not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing or ".", os.W_OK):
        raise ValueError(f"checkpoint_dir={directory!r} cannot be written ({existing or '.'!r} is not writable); "
                         "give a directory you can write to.")


def data_fingerprint(X, x_weights, y, y_weights):
    """Shapes and SHA-256 digests of the training measures (as checked and padded) and their weights."""
    def digest(values, weights):
        sha = hashlib.sha256(np.ascontiguousarray(values, dtype=np.float64).tobytes())
        if weights is not None:
            sha.update(np.ascontiguousarray(weights, dtype=np.float64).tobytes())
        return {"shape": list(values.shape), "weighted": weights is not None, "sha256": sha.hexdigest()}

    return {"X": digest(X, x_weights), "y": digest(y, y_weights)}


def find_checkpoint(directory, params, fingerprint, *, free_to_change):
    """``(tensors, metadata)`` of the checkpoint of this fit in ``directory``, or None.

    ``params`` are the fit's parameters as data (as a checkpoint records them)
    and ``fingerprint`` its data's :func:`data_fingerprint`. A checkpoint of
    another fit (other parameters, except those named in ``free_to_change``,
    or other data) raises a ``ValueError`` that names the differences: a
    resume never mixes two fits. So does a damaged checkpoint (its content
    differs from its recorded digest), before any of it is used.
    """
    path = checkpoint_path(directory)
    if not os.path.exists(path):
        return None
    tensors, metadata = read_state(path, expected=CHECKPOINT_FORMAT)

    def comparable(params):
        return {name: value for name, value in params.items() if name not in free_to_change}

    saved, now = comparable(metadata["params"]), comparable(params)
    differences = [f"{name}={saved.get(name)!r} in the checkpoint, {now.get(name)!r} now"
                   for name in sorted(set(saved) | set(now)) if saved.get(name) != now.get(name)]
    for name in ("X", "y"):
        before, after = metadata["data"][name], fingerprint[name]
        if before != after:
            detail = (f"shape {tuple(before['shape'])} in the checkpoint, {tuple(after['shape'])} now"
                      if before["shape"] != after["shape"] else "same shape, different values or weights")
            differences.append(f"the {name} data differ ({detail})")
    if differences:
        raise ValueError(
            f"{path!r} holds the checkpoint of a different fit: {'; '.join(differences)}. A fit resumes only "
            "with the parameters and data it started with. Fit with those, give another checkpoint_dir, or "
            "delete the checkpoint file to start afresh."
        )
    return tensors, metadata


def announce_resume(path, metadata, max_epochs):
    """Say on stderr that a fit resumes (or that it had finished)."""
    done = len(metadata["history"])
    if metadata["finished"]:
        message = (f"Resumed from {path}: that fit had finished ({done} epochs); loaded it without training.")
    else:
        message = f"Resumed from {path}: {done} of {max_epochs} epochs were done; training the remaining {max_epochs - done}."
    print(message, file=sys.stderr, flush=True)


def remove_stale_writes(directory):
    """Delete the temporary files of writes that a crash interrupted."""
    for stale in glob.glob(os.path.join(os.fspath(directory), f".{CHECKPOINT_FILE}.*.tmp")):
        try:
            os.unlink(stale)
        except OSError:
            pass


# ----------------------------------------------------------------- training state
def _optimizer_state(optimizer, tensors):
    saved = optimizer.state_dict()
    state = {}
    for index, entries in saved["state"].items():
        state[str(index)] = {}
        for key, value in entries.items():
            if torch.is_tensor(value):
                name = f"optimizer.{index}.{key}"
                tensors[name] = value.detach().cpu().contiguous().clone()
                state[str(index)][key] = {"tensor": name}
            else:
                state[str(index)][key] = {"value": value}
    return {"state": state, "param_groups": saved["param_groups"]}


def _restore_optimizer(optimizer, saved, tensors):
    state = {
        int(index): {key: tensors[value["tensor"]] if "tensor" in value else value["value"]
                     for key, value in entries.items()}
        for index, entries in saved["state"].items()
    }
    groups = [{key: tuple(value) if key == "betas" else value for key, value in group.items()}
              for group in saved["param_groups"]]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def _dropout_modules(net):
    # the network's dropout layers that draw their masks from a generator of their own
    return [module for module in net.module_.modules() if isinstance(module, torch.nn.Dropout) and hasattr(module, "generator")]


def _random_streams(net, tensors):
    """Save every private generator's state; the metadata says which module shares which."""
    streams = {"loaders": [], "dropout": [], "criterion": False}
    for prefix, generator in sorted(net.__dict__.get("_loader_generators", {}).items()):
        tensors[f"rng.{prefix}"] = generator.get_state()
        streams["loaders"].append(prefix)
    groups = {}
    for module in _dropout_modules(net):
        if module.generator is None:
            streams["dropout"].append(None)
            continue
        group = groups.setdefault(id(module.generator), len(groups))
        tensors[f"rng.dropout.{group}"] = module.generator.get_state()
        streams["dropout"].append({"group": group, "device": str(module.generator.device)})
    generator = net.criterion_.params.get("generator")
    if isinstance(generator, torch.Generator):
        tensors["rng.criterion"] = generator.get_state()
        streams["criterion"] = True
    collate = getattr(net, "iterator_train__collate_fn", None)
    streams["context"] = isinstance(collate, ContextSubsample)
    if streams["context"]:
        tensors["rng.context"] = collate.generator.get_state()
    return streams


def _restore_random_streams(net, streams, tensors):
    for prefix in streams["loaders"]:
        net.get_params_for(prefix)  # creates the private generator
        net._loader_generators[prefix].set_state(tensors[f"rng.{prefix}"])
    rebuilt = {}
    for module, saved in zip(_dropout_modules(net), streams["dropout"]):
        if saved is None:
            continue
        state = tensors[f"rng.dropout.{saved['group']}"]
        if module.generator is not None and str(module.generator.device) == saved["device"]:
            module.generator.set_state(state)  # in place: modules sharing it keep sharing it
        elif saved["group"] in rebuilt:
            module.generator = rebuilt[saved["group"]]
        else:
            generator = torch.Generator(device=saved["device"])
            generator.set_state(state)
            module.generator = rebuilt[saved["group"]] = generator
    if streams["criterion"]:
        net.criterion_.params["generator"].set_state(tensors["rng.criterion"])
    if streams.get("context"):
        net.iterator_train__collate_fn.generator.set_state(tensors["rng.context"])


def _early_stopping(net):
    return dict(net.callbacks_).get("early_stopping")


def _early_stopping_state(net, tensors):
    callback = _early_stopping(net)
    if callback is None or not hasattr(callback, "misses_"):
        return None
    best = callback.best_model_weights_
    for key, value in (best or {}).items():
        tensors[f"early_stopping.{key}"] = value.detach().cpu().contiguous().clone()
    return {"misses": int(callback.misses_), "dynamic_threshold": float(callback.dynamic_threshold_),
            "best_epoch": int(callback.best_epoch_), "best_weights": list(best) if best is not None else None}


def _restore_early_stopping(net, saved, tensors):
    callback = _early_stopping(net)
    if callback is None or saved is None:
        return
    callback.misses_ = saved["misses"]
    callback.dynamic_threshold_ = saved["dynamic_threshold"]
    callback.best_epoch_ = saved["best_epoch"]
    if saved["best_weights"] is not None:
        device = next(net.module_.parameters()).device
        callback.best_model_weights_ = {key: tensors[f"early_stopping.{key}"].to(device)
                                        for key in saved["best_weights"]}


class CheckpointEveryEpoch(Callback):
    """Write the fit's checkpoint at the end of every epoch and when training ends; restore it at the start.

    Placed last among the net's callbacks, so that it records the state the
    others (early stopping among them) leave at the end of an epoch. In a
    data-parallel fit only the first process writes.
    """

    def __init__(self, path, record, resume=None):
        self.path = path
        self.record = record
        self.resume = resume

    def restore(self, net):
        """Load the checkpoint's network, optimiser, history and random streams into the initialised ``net``."""
        tensors, metadata = self.resume
        load_network(net, tensors, metadata)
        _restore_optimizer(net.optimizer_, metadata["optimizer"], tensors)
        _restore_random_streams(net, metadata["random_streams"], tensors)

    def on_train_begin(self, net, **kwargs):
        # Early stopping resets itself when training begins; its saved state goes back after that.
        if self.resume is not None:
            tensors, metadata = self.resume
            _restore_early_stopping(net, metadata["early_stopping"], tensors)
            self.resume = None

    def on_epoch_end(self, net, **kwargs):
        self._write(net, finished=False)

    def on_train_end(self, net, **kwargs):
        self._write(net, finished=True)

    def _write(self, net, *, finished):
        if not is_first_process(net.distributed):
            return
        record = self.record
        tensors, metadata = network_state(
            net, params=record["params"], transform_X=record["transform_X"], transform_y=record["transform_y"],
            n_features_in=record["n_features_in"], n_features_out=record["n_features_out"], kind=CHECKPOINT_FORMAT,
        )
        metadata.update(
            finished=finished,
            data=record["data"],
            optimizer=_optimizer_state(net.optimizer_, tensors),
            random_streams=_random_streams(net, tensors),
            early_stopping=_early_stopping_state(net, tensors),
        )
        write_state(self.path, tensors, metadata)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["resume"] = None
        return state


def resumed_transforms(resume):
    """The fitted transforms a checkpoint holds."""
    tensors, metadata = resume
    return restored_transforms(tensors, metadata)


def checkpoint_writer(directory, record, *, resume, max_epochs, distributed):
    """The callback that writes a fit's checkpoint in ``directory`` every epoch (and restores ``resume``).

    ``record`` is what every checkpoint of the fit holds besides the training
    state (``params``, ``transform_X``, ``transform_y``, ``n_features_in``,
    ``n_features_out``, ``data``). The first process prepares the directory
    and says when the fit resumes.
    """
    directory = os.fspath(directory)
    path = checkpoint_path(directory)
    if is_first_process(distributed):
        os.makedirs(directory, exist_ok=True)
        remove_stale_writes(directory)
        if resume is not None:
            announce_resume(path, resume[1], max_epochs)
    return CheckpointEveryEpoch(path, record, resume=resume)
