"""The depth face of collapse: how alike the hidden states of one measure become.

Attention averages the values of a measure, so with depth the hidden states of
the points of one ensemble may become alike (rank collapse). Measured as the
mean pairwise cosine similarity of the hidden states of the points of each
measure, after the embedding and after each block of the fitted network.
"""

from __future__ import annotations

import numpy as np
import torch

from .._training import normalized_point_weights

__all__ = ["mean_pairwise_cosine", "trained_hidden_similarity"]


def mean_pairwise_cosine(hidden, a):
    """Weighted mean of ``cos(h_i, h_j)`` over pairs of distinct points, per measure.

    ``hidden`` is a ``(batch, n_points, d)`` float64 tensor, ``a`` the
    ``(batch, n_points)`` point weights, summing to 1 per measure, 0 at absent
    points. With unit vectors ``u_i = h_i / |h_i|`` the mean over ordered pairs
    ``i != j`` weighted by ``a_i a_j`` is
    ``(|sum_i a_i u_i|^2 - sum_i a_i^2 |u_i|^2) / (1 - sum_i a_i^2)``, computed in
    O(n d) without the n x n matrix. ``nan`` for a measure with one point.
    """
    norms = hidden.norm(dim=-1, keepdim=True)
    units = hidden / torch.clamp(norms, min=torch.finfo(hidden.dtype).tiny)
    mean_unit = (a[..., None] * units).sum(dim=1)
    self_terms = (a * a * (units * units).sum(dim=-1)).sum(dim=1)
    pair_mass = 1.0 - (a * a).sum(dim=1)
    similarity = ((mean_unit * mean_unit).sum(dim=-1) - self_terms) / pair_mass
    return torch.where(pair_mass > 1e-12, similarity, torch.full_like(similarity, float("nan")))


def trained_hidden_similarity(network, X, *, batch_size=None):
    """Mean pairwise cosine similarity per measure and depth, shape (n_samples, n_layers + 1), of a
    fitted network (a ``FittedNetwork``).

    See :meth:`sklearn_measattn.MeasureTransformerRegressor.hidden_similarity`.
    """
    batch_size = network.checked_batch_size(batch_size, method="hidden_similarity")
    X, x_weights, X_model = network.inputs(X)
    weights = normalized_point_weights(X, x_weights)
    out = []
    with network.evaluation() as module:
        for start, stop, (xb, wb) in network.batches(batch_size, X_model, x_weights):
            a = torch.as_tensor(weights[start:stop], dtype=torch.float64)
            depth = []
            for layer, hidden in enumerate(module.hidden_states(xb, wb)):
                hidden = hidden.double().cpu()
                if not bool(torch.isfinite(hidden).all()):
                    where = "the embedding" if layer == 0 else f"block {layer - 1}"
                    raise FloatingPointError(
                        f"The hidden states after {where} overflowed float32 on measures {start}..{stop - 1}, "
                        "so their similarity is undefined. Train with transform='symlog' so that the "
                        "network sees a logarithmic scale."
                    )
                depth.append(mean_pairwise_cosine(hidden, a))
            out.append(torch.stack(depth, dim=1).numpy())
    return np.concatenate(out)
