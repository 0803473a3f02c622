import math

import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn.attention import BACKENDS, kernel_attention
from sklearn_measattn.kernels import KERNEL_NAMES


def backends_for(kernel):
    """The backends that run ``kernel`` with gradients on this machine."""
    names = ["chunked"]
    if kernel == "softmax":
        names.append("sdpa")
    return names


CASES = [(kernel, backend) for kernel in KERNEL_NAMES for backend in backends_for(kernel)]


# gradcheck takes a second or more a case on a 2-core CPU; the gradients stay in the fast loop
# through the comparisons with naive below.
@pytest.mark.slow
@pytest.mark.parametrize("kernel, backend", CASES)
@pytest.mark.parametrize("with_weights", [False, True])
def test_gradcheck_against_naive(kernel, backend, with_weights, qkv):
    # few elements (gradcheck differentiates numerically through each), queries in three blocks (2, 2, 1)
    q, k, v = qkv((1, 2, 5, 3), n_keys=6, dtype=torch.float64, requires_grad=True)
    weights = torch.rand(1, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) if with_weights else None

    def attention(q, k, v):
        return kernel_attention(q, k, v, kernel, weights=weights, backend=backend, chunk_size=2)

    assert torch.autograd.gradcheck(attention, (q, k, v))
    expected = kernel_attention(q, k, v, kernel, weights=weights, backend="naive")
    torch.testing.assert_close(attention(q, k, v), expected)


@pytest.mark.parametrize("kernel, backend", CASES)
def test_float32_agrees_with_naive_on_larger_shapes(kernel, backend, qkv):
    q, k, v = qkv((2, 4, 300, 16), seed=3, requires_grad=True)
    weights = torch.rand(2, 300, generator=torch.Generator().manual_seed(4))
    grad_out = torch.randn(2, 4, 300, 16, generator=torch.Generator().manual_seed(5))
    results = []
    for name in (backend, "naive"):
        out = kernel_attention(q, k, v, kernel, weights=weights, backend=name, chunk_size=64)
        grads = torch.autograd.grad(out, (q, k, v), grad_out)
        results.append((out, *grads))
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, rtol=2e-4, atol=2e-5)


def extreme_qkv(qkv, magnitude, dtype=torch.float32):
    q, k, v = qkv((1, 2, 16, 8), seed=7, dtype=dtype, requires_grad=True)
    with torch.no_grad():
        scores = q @ k.transpose(-1, -2) / math.sqrt(8)
        factor = math.sqrt(magnitude / scores.abs().max().item())
    return [(t.detach() * factor).requires_grad_(True) for t in (q, k)] + [v]


@pytest.mark.parametrize("kernel, backend", CASES + [(kernel, "naive") for kernel in KERNEL_NAMES])
def test_extreme_scores_stay_finite(kernel, backend, qkv):
    q, k, v = extreme_qkv(qkv, 1e4)
    scores = q @ k.transpose(-1, -2) / math.sqrt(8)
    assert scores.abs().max().item() == pytest.approx(1e4, rel=1e-3)
    weights = torch.ones(1, 16)
    weights[:, 3] = 0.0
    out = kernel_attention(q, k, v, kernel, weights=weights, backend=backend)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("kernel, backend", CASES + [(kernel, "naive") for kernel in KERNEL_NAMES])
def test_zero_weight_equals_deleting_points(kernel, backend, qkv):
    q, k, v = qkv((2, 2, 10, 4), seed=11, dtype=torch.float64, requires_grad=True)
    keep = torch.tensor([0, 1, 2, 4, 5, 8])
    weights = torch.zeros(2, 10, dtype=torch.float64)
    weights[:, keep] = 1.0
    with_zeros = kernel_attention(q, k, v, kernel, weights=weights, backend=backend, chunk_size=3)
    deleted = kernel_attention(q, k[:, :, keep], v[:, :, keep], kernel, backend=backend, chunk_size=3)
    torch.testing.assert_close(with_zeros, deleted)


@pytest.mark.parametrize("kernel, backend", CASES + [(kernel, "naive") for kernel in KERNEL_NAMES])
def test_integer_weight_equals_repeating_points(kernel, backend, qkv):
    q, k, v = qkv((1, 2, 6, 4), seed=12, dtype=torch.float64, requires_grad=True)
    counts = torch.tensor([1, 3, 1, 2, 1, 4])
    weighted = kernel_attention(q, k, v, kernel, weights=counts[None].double(), backend=backend)
    index = torch.repeat_interleave(torch.arange(6), counts)
    repeated = kernel_attention(q, k[:, :, index], v[:, :, index], kernel, backend=backend)
    torch.testing.assert_close(weighted, repeated)


def test_kernels_differ(qkv):
    q, k, v = qkv((1, 1, 20, 4), seed=13, dtype=torch.float64, requires_grad=True)
    outs = [kernel_attention(q, k, v, name, backend="naive") for name in KERNEL_NAMES]
    for i in range(len(outs)):
        for j in range(i + 1, len(outs)):
            assert not torch.allclose(outs[i], outs[j])


def test_auto_backend_choice_matches_naive(qkv):
    q, k, v = qkv((2, 3, 9, 4), seed=14, dtype=torch.float64, requires_grad=True)
    for kernel in KERNEL_NAMES:
        torch.testing.assert_close(
            kernel_attention(q, k, v, kernel), kernel_attention(q, k, v, kernel, backend="naive")
        )


def test_chunked_keeps_memory_linear(qkv):
    """The chunked backward saves only O(N d) tensors, never the N x N scores."""
    q, k, v = qkv((1, 1, 512, 8), seed=15, requires_grad=True)
    saved = []

    def pack(tensor):
        saved.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = kernel_attention(q, k, v, "log", backend="chunked", chunk_size=32)
    assert max(saved) <= 512 * 8
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        kernel_attention(q, k, v, "log", backend="naive")
    assert max(saved) >= 512 * 512
    assert torch.isfinite(out).all()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"backend": "fast"}, ValueError, "'backend' parameter of kernel_attention must be a str among"),
        ({"backend": "sdpa", "kernel": "log"}, ValueError, "softmax attention only"),
        ({"kernel": "nope"}, ValueError, "Unknown attention kernel"),
        ({"weights": -torch.ones(2, 9, dtype=torch.float64)}, ValueError, ">= 0"),
        ({"weights": torch.zeros(2, 9, dtype=torch.float64)}, ValueError, "sum to 0"),
        ({"weights": torch.full((2, 9), math.nan, dtype=torch.float64)}, ValueError, "finite"),
        ({"weights": torch.ones(2, 8, dtype=torch.float64)}, ValueError, "shape"),
        ({"weights": [[1.0] * 9] * 2}, TypeError, "torch.Tensor"),
        ({"chunk_size": 0, "backend": "chunked"}, ValueError, "chunk_size"),
    ],
)
def test_invalid_arguments(kwargs, error, match, qkv):
    q, k, v = qkv((2, 3, 9, 4), dtype=torch.float64, requires_grad=True)
    kwargs = {"kernel": "log", **kwargs}
    kernel = kwargs.pop("kernel")
    with pytest.raises(error, match=match):
        kernel_attention(q, k, v, kernel, **kwargs)


def test_invalid_tensors(qkv):
    q, k, v = qkv((2, 3, 9, 4), dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="4-D"):
        kernel_attention(q[0], k[0], v[0], "log")
    with pytest.raises(ValueError, match="dtype"):
        kernel_attention(q.float(), k, v, "log")
    with pytest.raises(ValueError, match="d_head"):
        kernel_attention(q[..., :3], k, v, "log")
    with pytest.raises(ValueError, match="agree"):
        kernel_attention(q, k, v[:, :, :5], "log")
    with pytest.raises(TypeError, match="torch.Tensor"):
        kernel_attention(q.detach().numpy(), k, v, "log")
    assert set(BACKENDS) == {"auto", "sdpa", "flex", "fused", "chunked", "naive"}


def test_flex_refuses_cpu_training(qkv):
    q, k, v = qkv((2, 3, 9, 4), requires_grad=True)
    with pytest.raises(ValueError, match="no backward on CPU"):
        kernel_attention(q, k, v, "log", backend="flex")


@pytest.mark.slow
def test_flex_forward_on_cpu_compiles_once_per_bucket(qkv):
    """Compiled FlexAttention (forward) matches naive on CPU, with absent points
    (a whole key tile, scattered points, the padding) removed by its block mask,
    and point counts in one padding bucket reuse the compiled kernel."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        for n_points in (200, 250):
            q, k, v = qkv((2, 2, n_points, 16), seed=n_points)
            weights = torch.rand(2, n_points, generator=torch.Generator().manual_seed(n_points))
            weights[0, :140] = 0.0  # the first key tile entirely absent, the second in part
            weights[1, ::3] = 0.0
            out = kernel_attention(q, k, v, "log", weights=weights, backend="flex")
            expected = kernel_attention(q, k, v, "log", weights=weights, backend="naive")
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    assert counters["stats"]["unique_graphs"] == 1


def test_flex_block_mask_keeps_exactly_the_present_keys():
    """The block mask lists empty key tiles nowhere, full ones as unmasked and
    mixed ones as masked, and its dense form is the presence pattern."""
    from sklearn_measattn.attention._flex import _key_block_mask

    present = torch.ones(2, 384, dtype=torch.bool)
    present[0, :128] = False  # tile 0 empty
    present[0, 200:210] = False  # tile 1 mixed, tile 2 full
    present[1, 300:] = False  # tiles 0, 1 full, tile 2 mixed
    mask = _key_block_mask(present, 256)
    assert mask.kv_num_blocks[:, 0, 0].tolist() == [1, 1]
    assert mask.full_kv_num_blocks[:, 0, 0].tolist() == [1, 2]
    assert mask.kv_indices[0, 0, 0, 0].item() == 1 and mask.full_kv_indices[0, 0, 0, 0].item() == 2
    tiles = mask.to_dense()  # (batch, 1, query tiles, key tiles): 1 where a tile is computed
    assert tiles.shape == (2, 1, 2, 3)
    assert tiles[0, 0].tolist() == [[0, 1, 1]] * 2 and tiles[1, 0].tolist() == [[1, 1, 1]] * 2
    kept = torch.stack([mask.mask_mod(b, 0, 0, torch.arange(384)) for b in range(2)])
    assert torch.equal(kept, present)


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 2e-3), (torch.bfloat16, 3e-2)])
def test_flex_on_cuda_matches_naive(kernel, dtype, tolerance, qkv):
    q, k, v = qkv((2, 4, 300, 16), seed=21, device="cuda")
    q, k, v = (t.detach().to(dtype).requires_grad_(True) for t in (q, k, v))
    weights = torch.rand(2, 300, device="cuda")
    results = []
    for backend in ("flex", "naive"):
        out = kernel_attention(q, k, v, kernel, weights=weights, backend=backend)
        grads = torch.autograd.grad(out.float().square().sum(), (q, k, v))
        results.append((out, *grads))
    for got, expected in zip(*results):
        torch.testing.assert_close(got.float(), expected.float(), rtol=tolerance, atol=tolerance)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["log", "softmax"])
def test_chunked_on_cuda_matches_naive(kernel, qkv):
    q, k, v = qkv((2, 2, 200, 8), seed=22, dtype=torch.float64, requires_grad=True, device="cuda")
    out = kernel_attention(q, k, v, kernel, backend="chunked", chunk_size=64)
    torch.testing.assert_close(out, kernel_attention(q, k, v, kernel, backend="naive"))


def _cpu_backends(kernel):
    """Every backend that runs ``kernel`` on float32 CPU tensors here."""
    from sklearn_measattn._extension import _loader as _fused

    names = ["auto", "naive", "chunked"] + (["sdpa"] if kernel == "softmax" else [])
    if kernel != "softmax" and _fused.fused_unavailable_reason() is None:
        names.append("fused")
    return names


BOUNDARY_CASES = [(kernel, backend) for kernel in ("softmax", "log") for backend in _cpu_backends(kernel)]


@pytest.mark.parametrize("kernel, backend", BOUNDARY_CASES)
@pytest.mark.parametrize(
    "shapes, kwargs, match",
    [
        (((1, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 0)), {}, "d_value = 0"),
        (((1, 2, 8, 0), (1, 2, 8, 0), (1, 2, 8, 3)), {}, "d_head = 0"),
        (((1, 2, 8, 4), (1, 2, 0, 4), (1, 2, 0, 3)), {}, "0 points"),
        (((1, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 3)), {"chunk_size": 2.5}, "chunk_size"),
    ],
    ids=["value-dim-0", "head-dim-0", "no-keys", "fractional-chunk"],
)
def test_every_backend_refuses_degenerate_tensors_before_running(kernel, backend, shapes, kwargs, match):
    """A size the kernels cannot run (an empty feature axis, no keys, a bad
    block) is refused by one check at the op's entry, on every backend: no
    division by zero, no BLAS error, no hang inside compiled code."""
    q, k, v = (torch.randn(shape) for shape in shapes)
    with pytest.raises(ValueError, match=match):
        kernel_attention(q, k, v, kernel, backend=backend, **kwargs)


@pytest.mark.parametrize("kernel, backend", BOUNDARY_CASES)
@pytest.mark.parametrize("empty_axis", [0, 1, 2])
def test_empty_batch_heads_or_queries_give_an_empty_output(kernel, backend, empty_axis):
    shape = [2, 2, 5, 4]
    shape[empty_axis] = 0
    q = torch.randn(shape)
    kv_shape = list(shape)
    kv_shape[2] = 6
    k, v = torch.randn(kv_shape), torch.randn(kv_shape[:3] + [3])
    out = kernel_attention(q, k, v, kernel, backend=backend)
    assert out.shape == (*shape[:3], 3)


@pytest.mark.parametrize("kernel, backend", BOUNDARY_CASES)
def test_a_chunk_size_beyond_the_queries_is_cut_to_them(kernel, backend, qkv):
    """A huge block size (larger than any buffer could be) runs as one block of all queries."""
    q, k, v = qkv((2, 3, 9, 4), requires_grad=True)
    reference = kernel_attention(q, k, v, kernel, backend="naive")
    out = kernel_attention(q, k, v, kernel, backend=backend, chunk_size=2**40)
    torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)


@pytest.mark.fused
def test_fused_refuses_a_tile_too_large_for_memory():
    """Sizes against memory: a block of queries whose tiles would take gigabytes
    per thread is refused with the largest usable value, before the C++ kernels
    try (and fail) to allocate it."""
    q = torch.randn(1, 1, 40_000, 1)
    with pytest.raises(ValueError, match=r"use chunk_size <= \d+"):
        kernel_attention(q, q, q, "log", backend="fused", chunk_size=40_000)


@pytest.mark.parametrize(
    "kwargs, name, reason",
    [
        ({"backend": "cuda"}, "backend", "'auto', 'sdpa'"),
        ({"chunk_size": 0, "backend": "chunked"}, "chunk_size", r"\[1, inf\)"),
        ({"chunk_size": 16.0}, "chunk_size", r"\[1, inf\)"),
        ({"chunk_size": True}, "chunk_size", r"\[1, inf\)"),
    ],
)
def test_bad_arguments_raise_invalid_parameter_error(kwargs, name, reason, qkv):
    q, k, v = qkv((1, 1, 4, 2))
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of kernel_attention must be .*{reason}"):
        kernel_attention(q, k, v, "log", **kwargs)


def test_the_kernel_is_still_checked_inside_kernel_attention(qkv):
    q, k, v = qkv((1, 1, 4, 2))
    with pytest.raises(ValueError, match="Unknown attention kernel"):
        kernel_attention(q, k, v, "cosine", chunk_size=8)
