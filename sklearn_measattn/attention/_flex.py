"""FlexAttention backend: ``score_mod = g``, absent points through a block mask."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ._trainable import has_tensor_parameters

# FlexAttention pads point counts to a multiple of this (its tile size).
_FLEX_BLOCK = 128
# Compiled variants of flex_attention allowed (kernels x dtypes x shape buckets).
_FLEX_RECOMPILE_LIMIT = 64

_compiled_flex = None


def kernel_flex_attention(q, k, v, kernel, log_weights, scale):
    """FlexAttention with ``score_mod = g (+ log w)``, compiled once per bucket.

    Point counts are padded to a multiple of the flex tile. Absent keys (zero
    weight, and the padding) are removed by a ``BlockMask``: key tiles with no
    present point are skipped, tiles with only present points run unmasked, and
    the others apply the mask inside the tile; the weights of present points
    enter ``score_mod`` as ``+ log w``. Padded queries are dropped. The compiled
    function may specialise on a few buckets then turns dynamic; hitting the
    recompile limit raises (where the torch version can) instead of silently
    running the eager flex path, which materialises the full score matrix.

    A kernel with one parameter per head (the learnt poly degree, a tensor of
    shape ``(heads, 1, 1)``) is applied per head through its ``head(index)``;
    the tensor is captured by ``score_mod``, so its gradient comes from flex's
    backward. For a bounded-support kernel, a query whose keys all lie outside
    the support gets the weighted mean of the values, the package's rule for
    such queries; the values get one extra channel of ones to find those rows
    (on CUDA, flex rounds the value dimension up to a power of two, so with
    ``d_head = 16`` the value side does twice the work; CPU flex cannot return
    the log-normaliser, which would find them for free).
    """
    global _compiled_flex
    from torch.nn.attention.flex_attention import flex_attention

    if not q.is_cuda and torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise ValueError(
            "FlexAttention has no backward on CPU; use backend='chunked' for training on CPU "
            "(backend='auto' does this)."
        )
    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention)
    bounded = kernel.support == "bounded"
    if bounded:
        # A channel of ones: its output is the row's total weight, 1 or, for a
        # query with no key in the support, exactly 0 (flex zeroes such rows).
        v_in = v
        v = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
    n_queries, n_keys = q.shape[2], k.shape[2]
    padded_q, padded_k = _round_up(n_queries), _round_up(n_keys)
    if padded_k != n_keys:
        k = F.pad(k, (0, 0, 0, padded_k - n_keys))
        v = F.pad(v, (0, 0, 0, padded_k - n_keys))
    if padded_q != n_queries:
        q = F.pad(q, (0, 0, 0, padded_q - n_queries))
    block_mask = None
    if log_weights is not None or padded_k != n_keys:
        if log_weights is None:
            present = torch.ones(k.shape[0], n_keys, dtype=torch.bool, device=k.device)
        else:
            present = log_weights > -torch.inf
        present = F.pad(present, (0, padded_k - n_keys), value=False)
        block_mask = _key_block_mask(present, padded_q)

    g = _per_head_log_weight(kernel)
    if log_weights is None:

        def score_mod(score, batch, head, q_idx, kv_idx):
            return g(score, head)

    else:
        # Absent keys are masked; their log weight -inf is replaced by 0 so that no
        # -inf enters the arithmetic of a tile (the mask removes them).
        key_log_weights = F.pad(torch.where(log_weights > -torch.inf, log_weights, 0.0), (0, padded_k - n_keys))
        key_log_weights = key_log_weights.to(torch.float32)

        def score_mod(score, batch, head, q_idx, kv_idx):
            return g(score, head) + key_log_weights[batch, kv_idx]

    with _recompile_limit():
        out = _compiled_flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)[:, :, :n_queries]
    if not bounded:
        return out
    out, total = out[..., :-1], out[..., -1:]
    if log_weights is None:
        mean = v_in.mean(dim=2, keepdim=True)
    else:
        mean = (torch.softmax(log_weights.to(v_in.dtype), dim=-1)[:, None, :, None] * v_in).sum(dim=2, keepdim=True)
    return torch.where(total == 0, mean.expand_as(out), out)


def _per_head_log_weight(kernel):
    """``g(score, head)``: the kernel's ``g``, taken at the head's parameter when it holds one per head."""
    log_weight = kernel.log_weight
    if has_tensor_parameters(kernel):
        return lambda score, head: log_weight.head(head)(score)
    return lambda score, head: log_weight(score)


def _key_block_mask(present, n_queries, block=_FLEX_BLOCK):
    """A ``BlockMask`` keeping the keys where ``present`` (batch, n_keys) is True.

    Built from its per-tile lists directly, O(batch * tiles^2) small integers;
    ``create_block_mask`` would evaluate the mask on every (query, key) pair.
    """
    from torch.nn.attention.flex_attention import BlockMask

    batch, n_keys = present.shape
    n_query_tiles = n_queries // block
    counts = present.view(batch, n_keys // block, block).sum(dim=-1)
    full = counts == block
    partial = (counts > 0) & ~full

    def tile_lists(chosen):
        number = chosen.sum(dim=-1, dtype=torch.int32)
        # Indices of the chosen tiles first (a stable sort keeps their order).
        order = torch.argsort((~chosen).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return (
            number[:, None, None].expand(batch, 1, n_query_tiles).contiguous(),
            order[:, None, None, :].expand(batch, 1, n_query_tiles, order.shape[-1]).contiguous(),
        )

    def mask_mod(batch_index, head, q_idx, kv_idx):
        return present[batch_index, kv_idx]

    partial_number, partial_index = tile_lists(partial)
    full_number, full_index = tile_lists(full)
    return BlockMask.from_kv_blocks(partial_number, partial_index, full_number, full_index, BLOCK_SIZE=block,
                                    mask_mod=mask_mod)


def _recompile_limit():
    """Allow ``_FLEX_RECOMPILE_LIMIT`` compiled variants, failing when it is hit.

    Each kernel's score_mod (and each dtype) is a separate compiled entry of the
    one flex_attention code object: dynamo's default limit of 8 is hit by a study
    of five kernels in two dtypes. The settings are private to dynamo and were
    renamed across torch versions (``cache_size_limit`` became
    ``recompile_limit``), so each is set only where this torch has it. Float
    parameters of a kernel are compiled in as constants.
    """
    config = torch._dynamo.config
    options = {}
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            options[name] = _FLEX_RECOMPILE_LIMIT
            break
    if hasattr(config, "fail_on_recompile_limit_hit"):
        options["fail_on_recompile_limit_hit"] = True
    if hasattr(config, "specialize_float"):
        # A kernel's float parameters (the compact threshold) stay constants: after a
        # recompile dynamo would otherwise pass them as float64 scalar tensors, which
        # the CPU lowering of flex_attention fails on (torch 2.13: "unbacked_bindings").
        options["specialize_float"] = True
    return config.patch(**options) if options else contextlib.nullcontext()


def _round_up(n, block=_FLEX_BLOCK):
    return -(-n // block) * block
