"""Where the network runs: a ``device`` parameter resolved and checked against this machine, in one place."""

from __future__ import annotations

import torch

from ._distributed import distributed_device

__all__ = ["resolve_device", "training_device"]


def resolve_device(device):
    """The torch device a ``device`` parameter names (a string), checked against this machine.

    Takes the strings ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` and the
    equivalent :class:`torch.device` objects, as skorch does; the estimator's
    ``fit`` and :func:`~sklearn_measattn.load_model` resolve their ``device``
    with it, so a caller can check a device before any work.

    Parameters
    ----------
    device : str or torch.device
        The ``device`` parameter.

    Returns
    -------
    str
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises
    ------
    ValueError
        For a name that is not a CPU or CUDA device, or a GPU this machine
        lacks.

    Examples
    --------
    >>> from sklearn_measattn.estimator import resolve_device
    >>> resolve_device("cpu")
    'cpu'
    """
    given = device
    if isinstance(device, torch.device):
        device = str(device)
    valid = "'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device of type cpu or cuda"
    if not isinstance(device, str):
        raise ValueError(f"device must be {valid}, got {given!r}.")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda") or (parsed.type == "cpu" and parsed.index):
        raise ValueError(f"device must be {valid}, got {given!r}.")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was requested but CUDA is not available on this machine "
                f"(torch {torch.__version__}); use device='cpu' or device='auto'."
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r} names GPU {parsed.index}, but this machine has "
                f"{torch.cuda.device_count()} (cuda:0 to cuda:{torch.cuda.device_count() - 1})."
            )
    return "cpu" if parsed.type == "cpu" else str(parsed)


def training_device(device, *, distributed):
    """The device a fresh fit trains on: the resolved ``device``; a data-parallel fit joins its process
    group here and takes its process's GPU."""
    return distributed_device(device) if distributed else device
