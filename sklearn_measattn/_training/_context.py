"""Subsampled contexts: attention's integral against a measure, estimated from a random subset of its points.

The network's attention is an integral against the input measure; a uniform
random subsample of ``context_size`` of its points gives an unbiased Monte
Carlo estimate of each of its weighted sums, at O(context_size) keys per query
instead of O(n_points). In training, every measure of every step gets a fresh
subsample (and its target a matching one), so a step costs O(context_size^2)
whatever the ensemble size; at inference every point of the measure is a query
against one fixed subsample.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["ContextSubsample", "subsampled_context"]


def _chosen(n_real, k, generator):
    """Indices of ``k`` of ``n_real`` points, uniformly without replacement (all of them when ``n_real <= k``)."""
    if n_real <= k:
        return torch.arange(n_real)
    return torch.randperm(n_real, generator=generator)[:k].sort().values


def _pad(rows, weights, width, n_features):
    """Stack variable-length ``rows`` into ``(B, width, n_features)`` with zero-weight padding."""
    values = torch.zeros(len(rows), width, n_features, dtype=torch.float32)
    padded_weights = torch.zeros(len(rows), width, dtype=torch.float32)
    for i, (row, weight) in enumerate(zip(rows, weights)):
        values[i, : len(row)] = row
        padded_weights[i, : len(row)] = weight
    return values, padded_weights


class ContextSubsample:
    """A ``DataLoader`` ``collate_fn`` that keeps ``context_size`` random real points per measure and target.

    Parameters
    ----------
    context_size : int
        Points kept per measure (all of a measure with fewer).
    seed : int
        Seed of the private generator.
    paired : bool, default=False
        Targets paired point by point with the inputs (``loss="mse"``): the
        target keeps the same indices.
    fresh : bool, default=True
        A new subsample at every call (training); ``False`` draws the same
        subsample at every call (validation, whose losses are compared across
        epochs).
    """

    def __init__(self, context_size, seed, *, paired=False, fresh=True):
        self.context_size = int(context_size)
        self.seed = int(seed)
        self.paired = paired
        self.fresh = fresh
        self.generator = torch.Generator().manual_seed(self.seed)

    def __call__(self, samples):
        generator = self.generator if self.fresh else torch.Generator().manual_seed(self.seed)
        x_rows, x_weights, y_rows, y_weights = [], [], [], []
        weighted = False
        for features, target in samples:
            x = torch.as_tensor(features["X"], dtype=torch.float32)
            y = torch.as_tensor(target, dtype=torch.float32)
            xw = features.get("weights")
            yw = features.get("y_weights")
            x_real = torch.arange(len(x)) if xw is None else torch.nonzero(torch.as_tensor(xw) > 0).flatten()
            y_real = torch.arange(len(y)) if yw is None else torch.nonzero(torch.as_tensor(yw) > 0).flatten()
            x_index = x_real[_chosen(len(x_real), self.context_size, generator)]
            y_index = x_index if self.paired else y_real[_chosen(len(y_real), self.context_size, generator)]
            x_rows.append(x[x_index])
            y_rows.append(y[y_index])
            x_weights.append(torch.ones(len(x_index)) if xw is None else torch.as_tensor(xw, dtype=torch.float32)[x_index])
            y_weights.append(torch.ones(len(y_index)) if yw is None else torch.as_tensor(yw, dtype=torch.float32)[y_index])
            weighted = weighted or xw is not None or yw is not None
        x_width, y_width = max(len(r) for r in x_rows), max(len(r) for r in y_rows)
        X, X_weights = _pad(x_rows, x_weights, x_width, x_rows[0].shape[-1])
        Y, Y_weights = _pad(y_rows, y_weights, y_width, y_rows[0].shape[-1])
        batch = {"X": X}
        if weighted or any(len(r) != x_width for r in x_rows):
            batch["weights"] = X_weights
        if weighted or any(len(r) != y_width for r in y_rows):
            batch["y_weights"] = Y_weights
        return batch, Y


def subsampled_context(X, x_weights, context_size, seed):
    """At most ``context_size`` real points of each measure of ``X``, drawn uniformly once (seeded).

    Returns ``(X_context, context_weights)``: a ``(n_samples, width, n_features)``
    array and its point weights (``None`` when every measure kept the same
    number of equally weighted points). Measures with at most ``context_size``
    points are kept whole.
    """
    generator = torch.Generator().manual_seed(int(seed))
    rows, weights = [], []
    for i in range(len(X)):
        real = np.arange(X.shape[1]) if x_weights is None else np.flatnonzero(x_weights[i] > 0)
        index = real[_chosen(len(real), context_size, generator).numpy()]
        rows.append(X[i, index])
        weights.append(np.ones(len(index)) if x_weights is None else x_weights[i, index])
    width = max(len(r) for r in rows)
    X_context = np.zeros((len(X), width, X.shape[-1]))
    context_weights = np.zeros((len(X), width))
    for i, (row, weight) in enumerate(zip(rows, weights)):
        X_context[i, : len(row)] = row
        context_weights[i, : len(row)] = weight
    uniform = x_weights is None and all(len(r) == width for r in rows)
    return X_context, None if uniform else context_weights
