"""The private random streams of one fit, each by name, all derived from the one seed that the fit draws.

A fit draws one integer seed from ``random_state`` (the same on every process of
a data-parallel fit); every source of randomness in training and inference
takes its own stream from it by name, so that none of them touches torch's
global generator (shared by every thread) and none depends on another's draws.
"""

from __future__ import annotations

import torch

__all__ = ["RandomStreams"]


class RandomStreams:
    """The named random streams of a fitted network, from its ``seed``.

    Parameters
    ----------
    seed : int
        The seed the fit drew (recorded with the network in model files and checkpoints).

    Notes
    -----
    Each name maps to the seed of its stream. The mapping is fixed: models and
    checkpoints saved by earlier versions record only ``seed``, and must draw
    the same streams when loaded (the same context subsample at inference, the
    same shuffling when a fit resumes), so the derivation below is the one they
    were written with.
    """

    #: Stream name -> what is added to the fit's seed to seed it.
    DERIVATION = {
        "weights": 0,  # the module's initialisation and its dropout masks
        "shuffling": 0,  # the order of the measures in each epoch (and the validation loader's base seed)
        "validation_split": 0,  # the measures held out for early stopping
        "loss_projections": 1,  # the sliced loss's random directions
        "inference_context": 3,  # the fixed subsample of each measure that predict and transport attend to
        "training_context": 4,  # the fresh subsample of each measure at every training step
        "validation_context": 5,  # the subsample of each held-out measure, the same at every epoch
    }

    def __init__(self, seed):
        self.seed = int(seed)

    def seed_of(self, name):
        """The integer seed of the stream ``name`` (one of :attr:`DERIVATION`)."""
        try:
            return self.seed + self.DERIVATION[name]
        except KeyError:
            raise ValueError(f"No random stream named {name!r}; the streams are {sorted(self.DERIVATION)}.") from None

    def generator(self, name):
        """A fresh CPU ``torch.Generator`` at the start of the stream ``name``.

        On the CPU whatever the device: a CUDA generator would not unpickle without CUDA.
        """
        return torch.Generator().manual_seed(self.seed_of(name))
