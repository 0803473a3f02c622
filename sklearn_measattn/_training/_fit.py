"""The training home's entry point: a :class:`TrainingPlan` and checked data in, a :class:`FittedNetwork` out.

``prepare_training(plan, data, network=None).run(epochs=...)``.

The estimator says what to train (:class:`TrainingPlan`: the network's keyword
arguments, skorch's and the training options, the transform, the seed source,
the device, the checkpoint); this module fits the transforms, draws the seed,
builds or updates the net, resumes from a checkpoint, trains and returns the
fitted network. It never reads the estimator.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from .._persistence import load_network, restored_transforms
from .._validation import check_float32_range
from ..preprocessing import fit_transform_points, make_transform, transform_points
from ._checkpoint import checkpoint_writer, data_fingerprint, find_checkpoint, resumed_transforms
from ._device import training_device
from ._distributed import broadcast_seed, check_same_data
from ._fitted import FittedNetwork
from ._net import as_batch, build_net, train_net, update_net

__all__ = ["CheckpointPlan", "Training", "TrainingPlan", "prepare_training", "restore_network"]



class CheckpointPlan(NamedTuple):
    """Where a fit checkpoints, and what identifies it."""

    #: The directory (created if missing).
    directory: object
    #: The fit's parameters as data (what the checkpoint records and a resume compares).
    params: dict
    #: The parameters a resumed fit may change.
    free_to_change: tuple = ()


class TrainingPlan(NamedTuple):
    """What an estimator asks the training home to train, all of it explicit.

    ``module_params`` are the keyword arguments of the
    :class:`~sklearn_measattn.transformer.MeasureTransformer` besides its
    feature counts and seed, passed through as they are; ``net_params`` are
    skorch's own (``criterion__*``, ``lr``, ``optimizer__*``, ``batch_size``,
    ``max_epochs``, ``iterator_train__*``, ``verbose``) and the training options
    ``callbacks``, ``lr_schedule``, ``early_stopping`` (None or ``{"patience",
    "validation_fraction"}``) and ``context_size``.
    """

    module_params: dict
    net_params: dict
    #: The ``transform`` parameter: None, "symlog" or a transformer (cloned and fitted here).
    transform: object
    #: Seeds the fit's random streams: an int, a RandomState or None.
    random_state: object
    #: The resolved device.
    device: str
    distributed: bool = False
    checkpoint: CheckpointPlan | None = None

    def all_net_params(self):
        """The keyword arguments the net is built from: the module's as ``module__*``, then the rest."""
        return {**{f"module__{name}": value for name, value in self.module_params.items()}, **self.net_params}


class Training(NamedTuple):
    """A fit ready to run: the net, its transforms and the data as the network sees it, every check passed.

    Preparing it changes nothing of a fitted network that it continues;
    :meth:`run` trains.
    """

    plan: TrainingPlan
    net: object
    transform_X: object
    transform_y: object
    inputs: dict
    y_model: np.ndarray
    n_features_in: int
    n_features_out: int
    continued: bool = False
    resume: object = None  # (tensors, metadata) of the checkpoint a fresh fit resumes from

    def run(self, *, epochs=None):
        """Train for ``epochs`` more epochs (None: ``max_epochs``); the :class:`FittedNetwork` it ends with.

        A continued net is trained in place. An interrupt raises
        ``KeyboardInterrupt`` saying at which epoch; a non-finite value raises
        ``FloatingPointError``.
        """
        plan = self.plan
        if self.continued:
            update_net(self.net, plan.all_net_params())
        net = train_net(self.net, self.inputs, self.y_model, epochs=epochs, max_epochs=plan.net_params["max_epochs"],
                        continued=self.continued, resume=self.resume)
        return _fitted(plan, net, self.transform_X, self.transform_y, self.n_features_in, self.n_features_out)


def _model_data(transform_X, transform_y, data, transform, *, fit):
    """``(inputs, y_model)``: the checked data through the transforms (fitted on it when ``fit``), float32-safe."""
    X, x_weights, y, y_weights = data
    if fit:
        X_model = fit_transform_points(transform_X, X, x_weights)
        y_model = fit_transform_points(transform_y, y, y_weights)
    else:
        X_model = transform_points(transform_X, X, "transform")
        y_model = transform_points(transform_y, y, "transform")
    check_float32_range(X_model, "X", transform)
    check_float32_range(y_model, "y", transform)
    return as_batch(X_model, x_weights, y_weights), y_model.astype(np.float32)


def _fresh(plan, data):
    """A new net and transforms (or those of the checkpoint this fit resumes from)."""
    device = training_device(plan.device, distributed=plan.distributed)
    X, x_weights, y, y_weights = data
    n_features_in, n_features_out = X.shape[-1], y.shape[-1]
    fingerprint = resume = None
    if plan.checkpoint is not None:
        fingerprint = data_fingerprint(X, x_weights, y, y_weights)
        resume = find_checkpoint(plan.checkpoint.directory, plan.checkpoint.params, fingerprint,
                                 free_to_change=plan.checkpoint.free_to_change)
    if resume is None:
        transform_X, transform_y = make_transform(plan.transform), make_transform(plan.transform)
    else:
        transform_X, transform_y = resumed_transforms(resume)
    inputs, y_model = _model_data(transform_X, transform_y, data, plan.transform, fit=resume is None)
    seed = check_random_state(plan.random_state).randint(np.iinfo(np.int32).max)
    if plan.distributed:
        check_same_data(X, y)
        seed = broadcast_seed(seed)  # random_state=None draws one seed per process
    checkpoint = None
    if plan.checkpoint is not None:
        if resume is not None:
            seed = resume[1]["seed"]  # the resumed fit's streams, whatever random_state=None draws now
        record = {"params": plan.checkpoint.params, "transform_X": transform_X, "transform_y": transform_y,
                  "n_features_in": n_features_in, "n_features_out": n_features_out, "data": fingerprint}
        checkpoint = checkpoint_writer(plan.checkpoint.directory, record, resume=resume,
                                       max_epochs=plan.net_params["max_epochs"], distributed=plan.distributed)
    net = build_net(plan.all_net_params(), n_features_in, n_features_out, device, seed,
                    distributed=plan.distributed, checkpoint=checkpoint)
    return Training(plan, net, transform_X, transform_y, inputs, y_model, n_features_in, n_features_out, resume=resume)


def _continued(plan, data, network):
    """The fitted ``network``'s net and transforms, on this data (its net is updated when the training runs)."""
    inputs, y_model = _model_data(network.transform_X, network.transform_y, data, plan.transform, fit=False)
    return Training(plan, network.net, network.transform_X, network.transform_y, inputs, y_model,
                    network.n_features_in, network.n_features_out, continued=True)


def _fitted(plan, net, transform_X, transform_y, n_features_in, n_features_out):
    return FittedNetwork(net, transform_X=transform_X, transform_y=transform_y, n_features_in=n_features_in,
                         n_features_out=n_features_out, transform=plan.transform,
                         batch_size=plan.net_params["batch_size"], context_size=plan.net_params.get("context_size"))


def prepare_training(plan, data, *, network=None):
    """A :class:`Training` of a network as ``plan`` says on checked ``data``, ready to :meth:`~Training.run`.

    ``data`` is ``(X, x_weights, y, y_weights)`` as the measure checks return
    them. ``network``: a fitted :class:`FittedNetwork` to continue (keeping
    its transforms; nothing of it changes until the training runs); None
    prepares a fresh one, resumed from the plan's checkpoint when there is one
    of this fit. Every check that can refuse the data or the checkpoint runs
    here, before any training.
    """
    return _fresh(plan, data) if network is None else _continued(plan, data, network)


def restore_network(plan, tensors, metadata):
    """The :class:`FittedNetwork` a model file's ``(tensors, metadata)`` hold, built as ``plan`` says on its device."""
    net = build_net(plan.all_net_params(), metadata["n_features_in"], metadata["n_features_out"], plan.device,
                    metadata["seed"])
    net.initialize()
    load_network(net, tensors, metadata)
    transform_X, transform_y = restored_transforms(tensors, metadata)
    return _fitted(plan, net, transform_X, transform_y, metadata["n_features_in"], metadata["n_features_out"])
