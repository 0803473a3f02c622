"""The training home: it turns what an estimator asks for into a trained network, and runs it.

The estimator owns its hyper-parameters and says what to train in a
:class:`TrainingPlan`; :func:`prepare_training` checks the data against it and
:meth:`Training.run` trains, returning a :class:`FittedNetwork` (the network,
its fitted transforms, feature counts, device, batch size and named random
streams) through which inference, inspection, model files and checkpoints go.
This package knows skorch and torch's training loop; it never reads the
estimator.

Inside: the net and its loop (``_net``), interrupts and non-finite values
(``_guards``), callbacks and the learning-rate schedule (``_callbacks``), the
loss probe (``_loss``), parameter snapshots (``_params``), random streams
(``_streams``), the device (``_device``), checkpoints, context subsampling,
data-parallel training and batched inference.
"""

from ._callbacks import check_callbacks
from ._checkpoint import check_checkpoint_dir
from ._device import resolve_device
from ._fit import CheckpointPlan, Training, TrainingPlan, prepare_training, restore_network
from ._fitted import FittedNetwork
from ._guards import StopTraining
from ._inference import normalized_point_weights
from ._loss import probe_loss
from ._params import freeze_params, same_params

__all__ = [
    "check_callbacks",
    "check_checkpoint_dir",
    "CheckpointPlan",
    "FittedNetwork",
    "freeze_params",
    "normalized_point_weights",
    "prepare_training",
    "probe_loss",
    "resolve_device",
    "restore_network",
    "same_params",
    "StopTraining",
    "Training",
    "TrainingPlan",
]
