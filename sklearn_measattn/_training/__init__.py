"""The training home: the skorch net and its callbacks, the checks that run before training,
warm starts, checkpoints, context subsampling, distributed training and batched inference.

The estimator owns its hyper-parameters; this package knows skorch and torch's
training loop, and turns what the estimator gives it into a net.
"""

from ._checkpoint import (
    CheckpointEveryEpoch,
    announce_resume,
    check_checkpoint_dir,
    checkpoint_path,
    data_fingerprint,
    find_checkpoint,
    remove_stale_writes,
    resumed_transforms,
)
from ._context import ContextSubsample, subsampled_context
from ._distributed import broadcast_seed, check_same_data, distributed_device
from ._inference import (
    batches,
    evaluation,
    inference_batch_size,
    network_inputs,
    normalized_point_weights,
    targets_from_network,
)
from ._net import (
    OneCycleSchedule,
    StopTraining,
    TrainingInterrupted,
    as_batch,
    build_net,
    check_callbacks,
    check_float32_range,
    check_paired_counts,
    check_validation_split,
    finish_training,
    fit_transform_points,
    freeze_params,
    make_transform,
    probe_loss,
    resolve_device,
    restore_checkpoint,
    same_params,
    schedule_epochs,
    train_net,
    transform_points,
    update_net,
)

__all__ = [
    "announce_resume",
    "as_batch",
    "batches",
    "broadcast_seed",
    "build_net",
    "check_callbacks",
    "check_checkpoint_dir",
    "check_float32_range",
    "check_paired_counts",
    "check_same_data",
    "check_validation_split",
    "checkpoint_path",
    "CheckpointEveryEpoch",
    "ContextSubsample",
    "data_fingerprint",
    "distributed_device",
    "evaluation",
    "find_checkpoint",
    "finish_training",
    "fit_transform_points",
    "freeze_params",
    "inference_batch_size",
    "make_transform",
    "network_inputs",
    "normalized_point_weights",
    "OneCycleSchedule",
    "probe_loss",
    "remove_stale_writes",
    "resolve_device",
    "restore_checkpoint",
    "resumed_transforms",
    "same_params",
    "schedule_epochs",
    "StopTraining",
    "subsampled_context",
    "targets_from_network",
    "TrainingInterrupted",
    "train_net",
    "transform_points",
    "update_net",
]


def __getattr__(name):
    # Pickles of models fitted when training was a single module name its private
    # classes (``_MeasureNet``, ``_StopOnNonFinite``, ...) at this path.
    from . import _net

    if name.startswith("_") and hasattr(_net, name):
        return getattr(_net, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
