"""The backend table: what each backend runs, what "auto" picks, and the kernels FlexAttention gained."""

from types import SimpleNamespace

import pytest
import torch

from sklearn_measattn.attention import AUTO_PREFERENCE, BACKENDS, kernel_attention, resolve_backend, run_attention
from sklearn_measattn.kernels import KERNEL_NAMES, SPARSE_KERNEL_NAMES, get_kernel, poly_at_degree
from sklearn_measattn.transformer import KernelMultiheadAttention

ALL_KERNELS = (*KERNEL_NAMES, *SPARSE_KERNEL_NAMES)
CPU32 = torch.empty(0)
CPU64 = torch.empty(0, dtype=torch.float64)
CUDA32 = SimpleNamespace(device=torch.device("cuda"), dtype=torch.float32)  # resolve_backend reads device and dtype


@pytest.mark.parametrize("kernel_name", ALL_KERNELS)
@pytest.mark.parametrize("tensor", [CPU32, CPU64, CUDA32], ids=["cpu32", "cpu64", "cuda32"])
def test_auto_picks_the_first_preferred_backend_that_accepts(kernel_name, tensor):
    kernel = get_kernel(kernel_name)
    accepted = []
    for name in BACKENDS[1:]:
        try:
            accepted.append(resolve_backend(name, kernel, tensor))
        except ValueError as error:
            assert "Use backend='auto'" in str(error)  # every refusal says what to do
    assert "chunked" in accepted and "naive" in accepted  # the pure-PyTorch backends run everything
    preferred = [name for name in AUTO_PREFERENCE if name in accepted and (name != "flex" or tensor is CUDA32)]
    assert resolve_backend("auto", kernel, tensor) == preferred[0]


def test_the_table_decides_each_backend_and_auto_order():
    softmax, log, sparsemax = get_kernel("softmax"), get_kernel("log"), get_kernel("sparsemax")
    assert BACKENDS == ("auto", "sdpa", "flex", "fused", "chunked", "naive")
    assert resolve_backend("auto", softmax, CUDA32) == "sdpa"
    assert resolve_backend("auto", log, CUDA32) == "flex"
    assert resolve_backend("auto", log, CPU64) == "chunked"  # fused runs float32 only
    assert resolve_backend("auto", sparsemax, CUDA32) == "chunked"  # no elementwise score_mod for a per-query threshold
    with pytest.raises(ValueError, match="softmax attention only"):
        resolve_backend("sdpa", log, CPU32)
    with pytest.raises(ValueError, match="float32 CPU tensors only"):
        resolve_backend("fused", log, CPU64)
    with pytest.raises(ValueError, match="Unknown attention backend 'bogus'"):
        resolve_backend("bogus", log, CPU32)


def test_the_learnt_degree_runs_on_flex_chunked_and_naive_only():
    module = KernelMultiheadAttention(8, 2, kernel="learned_poly")
    kernel = module.kernel
    assert resolve_backend("auto", kernel, CUDA32) == "flex"
    assert resolve_backend("auto", kernel, CPU32) == "chunked"
    for name in ("sdpa", "fused"):
        with pytest.raises(ValueError, match="runs on backend 'flex' or 'chunked' or 'naive' only"):
            resolve_backend(name, kernel, CPU32)


def test_auto_steps_off_a_recomputing_backend_when_scores_are_huge(qkv):
    q, k, v = qkv((2, 2, 24, 4), scale=1e6)
    q, k = q.requires_grad_(), k.requires_grad_()
    out = run_attention(q, k, v, get_kernel("softmax"), None, "sdpa", auto=True)
    (grad_q,) = torch.autograd.grad(out.sum(), q)
    assert bool(torch.isfinite(grad_q).all())
    reference = kernel_attention(q, k, v, "softmax", backend="chunked")
    torch.testing.assert_close(out, reference)


@pytest.mark.slow
def test_flex_runs_the_compact_kernel_with_the_empty_support_rule(qkv):
    """Compiled FlexAttention (forward, CPU) equals naive for the fixed-threshold
    kernel, including queries whose keys all lie outside the support (they
    attend uniformly to the present points) and absent points."""
    q, k, v = qkv((2, 2, 128, 8), seed=3)
    q[0, :, :40] = -q[0, :, :40].abs() - 1.0  # with k >= 0 below, these scores are all negative
    k[0] = k[0].abs()
    kernel = get_kernel("compact", threshold=0.5, degree=1.5)
    weights = torch.rand(2, 128, generator=torch.Generator().manual_seed(0))
    weights[1, :50] = 0.0
    with torch.no_grad():
        out = kernel_attention(q, k, v, kernel, weights=weights, backend="flex")
        expected = kernel_attention(q, k, v, kernel, weights=weights, backend="naive")
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    uniform = (weights[0, :, None] * v[0]).sum(dim=1) / weights[0].sum()
    torch.testing.assert_close(out[0, :, :40], uniform[:, None].expand(2, 40, 8), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_flex_runs_a_degree_per_head(qkv):
    """The learnt-degree kernel on FlexAttention (forward, CPU): head h uses degree h."""
    q, k, v = qkv((2, 3, 128, 8), seed=4)
    degree = torch.tensor([0.5, 1.0, 3.7])
    kernel = poly_at_degree(get_kernel("learned_poly"), degree[:, None, None])
    log_weights = torch.log(torch.rand(2, 128, generator=torch.Generator().manual_seed(1)))
    with torch.no_grad():
        out = run_attention(q, k, v, kernel, log_weights, "flex")
    for h, p in enumerate(degree.tolist()):
        heads = slice(h, h + 1)
        expected = kernel_attention(q[:, heads], k[:, heads], v[:, heads], get_kernel("poly", degree=p),
                                    weights=log_weights.exp(), backend="naive")
        torch.testing.assert_close(out[:, heads], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_flex_recompiles_for_new_kernel_parameters(qkv):
    """After flex compiled one kernel, another with other parameters compiles too (dynamo
    would pass changed float parameters as scalar tensors, which CPU flex cannot lower)."""
    q, k, v = qkv((1, 2, 128, 8), seed=5)
    layer = KernelMultiheadAttention(8, 2, kernel="learned_poly", backend="flex")
    with torch.no_grad():
        layer(torch.randn(1, 128, 8))
        for threshold in (0.5, 0.25):
            kernel = get_kernel("compact", threshold=threshold, degree=1.5)
            out = kernel_attention(q, k, v, kernel, backend="flex")
            torch.testing.assert_close(out, kernel_attention(q, k, v, kernel, backend="naive"), rtol=1e-4, atol=1e-5)


def test_resolve_backend_refuses_what_is_not_a_kernel_or_a_tensor():
    assert resolve_backend("auto", "log", CPU64) == "chunked"  # a kernel by name, like kernel_attention
    with pytest.raises(TypeError, match="tensor must be a torch.Tensor"):
        resolve_backend("auto", "log", None)
    with pytest.raises(ValueError, match="Unknown attention kernel 'bogus'"):
        resolve_backend("auto", "bogus", CPU32)
