"""Closed-form kernel derivatives and factorisations used by the chunked backend."""

import math

import pytest
import torch

from sklearn_measattn.attention import kernel_attention
from sklearn_measattn.kernels import KERNEL_NAMES, get_kernel

KERNELS = [("softmax", {}), ("poly", {}), ("poly", {"degree": 2}), ("poly", {"degree": 3}), ("poly", {"degree": 4}),
           ("poly", {"degree": 2.5}), ("log", {}), ("sigmoid", {}), ("softplus", {})]


def grid(dtype=torch.float64):
    return torch.cat([torch.linspace(-40, 40, 4001, dtype=dtype), torch.tensor([0.0, -1e-9, 1e-9], dtype=dtype)])


@pytest.mark.parametrize("name, params", KERNELS)
def test_derivative_matches_autograd(name, params):
    kernel = get_kernel(name, **params)
    s = grid().requires_grad_(True)
    (expected,) = torch.autograd.grad(kernel(s).sum(), s)
    torch.testing.assert_close(kernel.derivative(s.detach()), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, params", [kp for kp in KERNELS if get_kernel(kp[0], **kp[1]).factorization])
def test_factorization_matches_kappa_and_slope(name, params):
    kernel = get_kernel(name, **params)
    factorization = kernel.factorization
    s = grid().requires_grad_(True)
    kappa = kernel.kappa(s)
    (slope,) = torch.autograd.grad(kappa.sum(), s)
    s = s.detach()
    base = torch.exp(torch.clamp(s, max=0.0))
    torch.testing.assert_close(base * factorization.phi(s), kappa.detach(), rtol=1e-12, atol=1e-300)
    torch.testing.assert_close(base * factorization.psi(s), slope, rtol=1e-12, atol=1e-300)
    torch.testing.assert_close(factorization.derivative(s), kernel.derivative(s), rtol=1e-12, atol=1e-14)
    phi_psi = factorization.phi_psi_(s.clone())
    torch.testing.assert_close(phi_psi[0], factorization.phi(s))


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_fast_paths_finite_at_extremes(name):
    kernel = get_kernel(name)
    s = torch.tensor([-1e4, -1e3, -100.0, 0.0, 100.0, 1e3, 1e4])
    assert torch.isfinite(kernel.derivative(s)).all()
    if kernel.factorization is not None:
        phi, psi = kernel.factorization.phi(s), kernel.factorization.psi(s)
        assert torch.isfinite(phi).all() and (phi > 0).all() and torch.isfinite(psi).all()


def test_poly_high_degree_uses_log_domain():
    assert get_kernel("poly", degree=20).factorization is None
    assert get_kernel("poly", degree=2).factorization is not None


@pytest.mark.slow
@pytest.mark.parametrize("name, params", KERNELS + [("user", {})])
def test_chunked_matches_naive_float64(name, params):
    kernel = get_kernel((lambda s: torch.tanh(s) + 0.1 * s) if name == "user" else name, **params)
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 37, 8, generator=generator, dtype=torch.float64, requires_grad=True) for _ in range(3))
    weights = torch.rand(2, 37, generator=generator, dtype=torch.float64)
    weights[:, 5] = 0.0
    grad_out = torch.randn(2, 3, 37, 8, generator=generator, dtype=torch.float64)
    results = []
    for backend, chunk in (("chunked", 5), ("chunked", None), ("naive", None)):
        out = kernel_attention(q, k, v, kernel, weights=weights, backend=backend, chunk_size=chunk)
        results.append((out, *torch.autograd.grad(out, (q, k, v), grad_out)))
    for got_a, got_b, expected in zip(*results):
        torch.testing.assert_close(got_a, expected, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(got_b, expected, rtol=1e-10, atol=1e-12)


def test_chunked_accepts_non_contiguous_inputs():
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(2, 20, 3, 8, generator=generator, dtype=torch.float64, requires_grad=True)
    q = k = v = x.transpose(1, 2)  # (batch, heads, n, d), not contiguous
    out = kernel_attention(q, k, v, "log", backend="chunked", chunk_size=6)
    expected = kernel_attention(q, k, v, "log", backend="naive")
    torch.testing.assert_close(out, expected)
    (grad,) = torch.autograd.grad(out.square().sum(), x)
    (expected_grad,) = torch.autograd.grad(expected.square().sum(), x)
    torch.testing.assert_close(grad, expected_grad)


def test_default_chunk_keeps_blocks_near_one_million_scores():
    from sklearn_measattn.attention._chunked import default_chunk

    q = torch.empty(2, 4, 4096, 16)
    chunk = default_chunk(q, q)
    assert 2 * 4 * chunk * 4096 <= 2**20 + 2 * 4 * 4096 and chunk >= 16
    assert math.isfinite(chunk)
