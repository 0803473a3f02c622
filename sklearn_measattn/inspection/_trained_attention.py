"""The attention of a fitted estimator, measured on new measures.

The queries and keys come from the fitted network (after the fitted input
transform); the weights and their effective sample size come from the same
functions as the random-projection diagnostics, so that both faces of attention
collapse use one definition.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._param_validation import validate_parameter_constraints
from .._training import normalized_point_weights
from .._validation import POSITIVE_INT, is_ragged
from ..attention import attention_weight_blocks, log_point_weights, query_ess_fractions

_MAX_WEIGHT_BYTES = 2**31


def trained_attention_ess(network, X, *, layer=0, max_queries=None, random_state=0, batch_size=None):
    """ESS / n of a fitted ``network``'s attention in block ``layer``, shape (n_samples, n_heads)."""
    batches, n_heads, kernel = _attention_inputs(network, X, layer, batch_size, "attention_ess")
    validate_parameter_constraints(
        {"max_queries": [None, POSITIVE_INT]}, {"max_queries": max_queries},
        caller_name=f"{network.owner}.attention_ess",
    )
    rng = check_random_state(random_state)
    out = []
    for q, k, a in batches:
        for i in range(q.shape[0]):
            queries = np.flatnonzero(a[i] > 0)
            if max_queries is not None and len(queries) > max_queries:
                queries = np.sort(rng.choice(queries, max_queries, replace=False))
            a_i = torch.as_tensor(a[i], dtype=torch.float64)
            queries = torch.as_tensor(queries)
            fractions = query_ess_fractions(q[i][:, queries], k[i], kernel, a_i)  # (heads, n_queries drawn)
            query_weights = a_i[queries]
            out.append(((fractions * query_weights).sum(dim=-1) / query_weights.sum()).numpy())
    return np.stack(out).reshape(-1, n_heads)


def trained_attention_weights(network, X, *, layer=0, batch_size=None):
    """A fitted ``network``'s attention weights in block ``layer``, (n_samples, n_heads, n, n) or a list."""
    ragged = is_ragged(X)
    n_samples = len(X) if ragged else np.shape(X)[0]
    n_points = max(np.shape(m)[0] for m in X) if ragged else np.shape(X)[1]
    n_heads = network.module.blocks[0].attention.n_heads
    size = 8 * n_samples * n_heads * n_points * n_points
    if size > _MAX_WEIGHT_BYTES:
        raise ValueError(
            f"attention_weights would hold {size / 2**30:.1f} GiB ({n_samples} measures x {n_heads} heads x "
            f"{n_points}^2 points); pass fewer or smaller measures, or use attention_ess, which never "
            "materialises the weights."
        )
    batches, _, kernel = _attention_inputs(network, X, layer, batch_size, "attention_weights")
    blocks = []
    for q, k, a in batches:
        log_a = log_point_weights(torch.as_tensor(a, dtype=torch.float64))
        blocks.append(torch.cat([w for _, _, w in attention_weight_blocks(q, k, kernel, log_a)], dim=2))
    weights = torch.cat(blocks).numpy()
    if ragged:
        lengths = [np.shape(m)[0] for m in X]
        return [weights[i, :, :n, :n] for i, n in enumerate(lengths)]
    return weights


def _attention_inputs(network, X, layer, batch_size, method):
    """Validate; return a generator of float64 ``(q, k, a)`` per batch, the head count and the kernel.

    ``a`` holds the point weights normalised to sum 1 per measure (0 at padding); ``method`` names
    the estimator's method in error messages.
    """
    module = network.module
    n_layers = len(module.blocks)
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < n_layers:
        raise ValueError(f"layer must be an integer in [0, {n_layers}) for this {n_layers}-block model, got {layer!r}.")
    batch_size = network.checked_batch_size(batch_size, method=method)
    X, x_weights, X_model = network.inputs(X)
    weights = normalized_point_weights(X, x_weights)
    attention = module.blocks[layer].attention

    def attention_batches():
        with network.evaluation():
            for start, stop, (xb, wb) in network.batches(batch_size, X_model, x_weights):
                q, k, _ = module.attention_inputs(xb, wb, layer=int(layer))
                if not (bool(torch.isfinite(q).all()) and bool(torch.isfinite(k).all())):
                    raise FloatingPointError(
                        f"The queries or keys of layer {layer} overflowed float32 on measures "
                        f"{start}..{stop - 1}, so their attention weights are undefined. Train "
                        "with transform='symlog' so that the network sees a logarithmic scale."
                    )
                yield q.double().cpu(), k.double().cpu(), weights[start:stop]

    return attention_batches(), attention.n_heads, attention.kernel
