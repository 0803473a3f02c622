"""Data-parallel training on the process group a launcher sets up (torchrun, accelerate, Slurm).

Every process holds a full replica of the model and the full data; each epoch,
each process trains on its shard of the measures (``DistributedSampler``: a
seeded permutation split into ``world_size`` interleaved parts, the same on
every process), and after each backward pass the gradients are averaged over
the processes before the optimiser step, so the replicas stay identical. That
is what ``DistributedDataParallel`` does; here it is a skorch callback, which
keeps the trained module a plain ``MeasureTransformer`` (it pickles, predicts
and is inspected exactly as after a single-process fit) and needs no wrapper
module whose parameter names would change.

The checks that can stop training (a non-finite output, loss or gradient) are
agreed between the processes before any of them raises, so that a failure on
one process stops all of them with the same error instead of leaving the others
waiting forever in a collective.
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torch.distributed as dist
from skorch.callbacks import Callback
from torch.utils.data import DataLoader, DistributedSampler

_LAUNCH_HELP = (
    "distributed=True trains on the process group of a launcher. Start the script with e.g. "
    "`torchrun --standalone --nproc_per_node 2 train.py` (one node), `torchrun --nnodes N --nproc_per_node K "
    "--rdzv_backend c10d --rdzv_endpoint HOST:PORT train.py` (several nodes), `accelerate launch train.py`, or "
    "under Slurm `srun` with MASTER_ADDR and MASTER_PORT exported; or call "
    "torch.distributed.init_process_group yourself before fit. For a single process, use distributed=False."
)


def _environment_rank():
    """``(rank, world_size, local_rank)`` from a launcher's environment, or ``None``."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun, accelerate, mpirun wrappers
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:  # srun
        return int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", 0))
    return None


def check_launch():
    """Raise a ``ValueError`` saying how to launch when there is no process group and no launcher."""
    if dist.is_available() and dist.is_initialized():
        return
    if not dist.is_available():
        raise ValueError("distributed=True needs torch.distributed, which this torch build lacks. " + _LAUNCH_HELP)
    found = _environment_rank()
    if found is None:
        raise ValueError("distributed=True but no process group is set up and no launcher environment "
                         "(RANK and WORLD_SIZE, or SLURM_PROCID and SLURM_NTASKS) was found. " + _LAUNCH_HELP)
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise ValueError("distributed=True found a launcher environment without MASTER_ADDR and MASTER_PORT "
                         "(Slurm does not set them: export the first node's host name and a free port). "
                         + _LAUNCH_HELP)


def process_group(device_type):
    """Join (or reuse) the process group; return ``(rank, world_size, local_rank)``.

    ``gloo`` on the CPU, ``nccl`` on CUDA, when this function creates the group.
    """
    check_launch()
    if not dist.is_initialized():
        rank, world_size, local_rank = _environment_rank()
        os.environ.setdefault("RANK", str(rank))
        os.environ.setdefault("WORLD_SIZE", str(world_size))
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo", init_method="env://",
                                rank=rank, world_size=world_size)
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", dist.get_rank())))
    return dist.get_rank(), dist.get_world_size(), local_rank


def distributed_device(device):
    """Join the process group for a fit on ``device`` (a resolved device string); return this process's device.

    On CUDA each process takes the GPU of its local rank (``cuda:LOCAL_RANK``)
    unless the device names one.
    """
    kind = torch.device(device).type
    _, _, local_rank = process_group(kind)
    if kind == "cuda" and torch.device(device).index is None:
        torch.cuda.set_device(local_rank)
        return f"cuda:{local_rank}"
    return device


def _collective_device():
    """Where the collectives' small tensors live: CUDA for nccl, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_seed(seed):
    """Rank 0's seed on every process (a ``random_state=None`` fit draws one per process)."""
    value = torch.tensor([int(seed)], dtype=torch.int64, device=_collective_device())
    dist.broadcast(value, src=0)
    return int(value.item())


def _data_checksums(X, y):
    """Sizes and sums that equal data give on every process (NaN-free: checked before)."""
    def parts(batch):
        measures = [np.asarray(m, dtype=np.float64) for m in batch]
        return [len(measures), float(sum(m.size for m in measures)), float(sum(m.sum() for m in measures)),
                float(sum(np.abs(m).sum() for m in measures))]
    return torch.tensor(parts(X) + parts(y), dtype=torch.float64, device=_collective_device())


def check_same_data(X, y):
    """Every process must pass the same measures: the shards are taken inside ``fit``."""
    mine = _data_checksums(X, y)
    lowest, highest = mine.clone(), mine.clone()
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    if not torch.equal(lowest, highest):
        raise ValueError(
            "distributed=True needs the same X and y on every process (the same full data set, as the "
            "single-process script loads it); fit splits the measures between the processes itself, each "
            "epoch. These processes passed different data."
        )


def is_first_process(distributed):
    """Whether this process speaks for the fit: always in one process, rank 0 in a data-parallel one.

    The first process alone prints progress, announces a resume and writes checkpoints.
    """
    return not (distributed and dist.get_rank() != 0)


def agree(ok):
    """``True`` on every process only if ``ok`` is ``True`` on all of them."""
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=_collective_device())
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def sharded_loader(dataset, kwargs, *, shuffle, seed, epoch):
    """A ``DataLoader`` over this process's shard of ``dataset``.

    ``epoch`` is a function returning the current epoch: skorch builds the
    loader once per fit, and the shards are reshuffled at each pass from the
    seed and the epoch it returns then (so a resumed fit shuffles as the
    uninterrupted one did).
    """
    kwargs = {key: value for key, value in kwargs.items() if key not in ("shuffle", "generator", "sampler")}
    sampler = _EpochSampler(dataset, epoch, shuffle=shuffle, seed=seed, drop_last=False)
    return DataLoader(dataset, sampler=sampler, **kwargs)


class _EpochSampler(DistributedSampler):
    """``DistributedSampler`` that asks for the epoch at each pass (``set_epoch`` is never called by skorch)."""

    def __init__(self, dataset, epoch, **kwargs):
        super().__init__(dataset, **kwargs)
        self.epoch_of = epoch

    def __iter__(self):
        self.set_epoch(self.epoch_of())
        return super().__iter__()


class DistributedTraining(Callback):
    """Keeps the replicas identical: same start, averaged gradients, averaged logged losses.

    Placed first among the net's callbacks, so that the other callbacks (the
    non-finite guards among them) see the averaged gradients, which are the
    same on every process.
    """

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        with torch.no_grad():
            for tensor in [*net.module_.parameters(), *net.module_.buffers()]:
                dist.broadcast(tensor.data, src=0)

    def on_grad_computed(self, net, named_parameters, X=None, y=None, training=False, **kwargs):
        world_size = dist.get_world_size()
        grads = [p.grad for _, p in named_parameters if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world_size
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def on_batch_end(self, net, batch=None, training=None, **kwargs):
        if not training:
            return  # every process scores the whole validation set: the same losses already
        key = "train_loss"
        batch_entry = net.history[-1]["batches"][-1]
        loss = torch.tensor([float(batch_entry[key])], dtype=torch.float64, device=_collective_device())
        dist.all_reduce(loss)
        batch_entry[key] = float(loss.item()) / dist.get_world_size()
