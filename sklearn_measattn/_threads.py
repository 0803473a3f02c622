"""Torch's intra-op thread count for a block of work."""

from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["torch_threads"]


@contextmanager
def torch_threads(n_threads):
    """Run the block with ``n_threads`` torch intra-op threads (``None``: unchanged), then restore them.

    Small tensors on a busy CPU run many times faster on one thread than on
    several that wait for each other.
    """
    previous_threads = torch.get_num_threads()
    if n_threads is not None:
        torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous_threads)
