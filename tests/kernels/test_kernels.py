import math

import pytest
import torch
import torch.nn.functional as F

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.attention import kernel_attention
from sklearn_measattn.kernels import KERNEL_NAMES, AttentionKernel, get_kernel

# kappa(s) for s >= 0 of each built-in kernel; e^s below 0 except where noted.
REFERENCE_KAPPA = {
    "softmax": lambda s: torch.exp(s),
    "poly": lambda s: torch.where(s < 0, torch.exp(s), (1 + s.clamp(min=0)) ** 1),
    "log": lambda s: torch.where(s < 0, torch.exp(s), 1 + torch.log1p(s.clamp(min=0))),
    "sigmoid": lambda s: torch.sigmoid(s),
    "softplus": lambda s: F.softplus(s),
}


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_log_weight_matches_kappa(name):
    s = torch.linspace(-20, 20, 2001, dtype=torch.float64)
    kernel = get_kernel(name)
    torch.testing.assert_close(kernel.kappa(s), REFERENCE_KAPPA[name](s), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("degree", [0.5, 2.0, 7.0])
def test_poly_degree_matches_formula(degree):
    s = torch.linspace(0, 30, 301, dtype=torch.float64)
    torch.testing.assert_close(get_kernel("poly", degree=degree).kappa(s), (1 + s / degree) ** degree)


def test_poly_tends_to_softmax_as_degree_grows():
    s = torch.linspace(-5, 5, 101, dtype=torch.float64)
    gaps = [(get_kernel("poly", degree=p)(s) - s).abs().max().item() for p in (1, 10, 1000)]
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.02


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_positive_increasing_c1_and_finite_at_extremes(name):
    kernel = get_kernel(name)
    s = torch.linspace(-30, 30, 6001, dtype=torch.float64, requires_grad=True)
    g = kernel(s)
    (slope,) = torch.autograd.grad(g.sum(), s)
    assert torch.all(slope > 0)
    # C^1: no jump in the derivative anywhere, in particular at s = 0.
    assert (slope[1:] - slope[:-1]).abs().max() < 0.02
    zero = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    (slope_at_zero,) = torch.autograd.grad(kernel(zero).sum(), zero)
    left = torch.tensor([-1e-7], dtype=torch.float64, requires_grad=True)
    (slope_left,) = torch.autograd.grad(kernel(left).sum(), left)
    assert slope_at_zero.item() == pytest.approx(slope_left.item(), abs=1e-6)
    extreme = torch.tensor([-1e4, -1e3, 1e3, 1e4], dtype=torch.float32, requires_grad=True)
    values = kernel(extreme)
    (grads,) = torch.autograd.grad(values.sum(), extreme)
    assert torch.isfinite(values).all() and torch.isfinite(grads).all()


def test_growth_and_tail_documentation():
    assert get_kernel("softmax").min_tail_index == math.inf
    assert get_kernel("poly", degree=3).min_tail_index == 4.0
    assert get_kernel("log").growth == "logarithmic"
    assert get_kernel("sigmoid").growth == "bounded"
    assert get_kernel("softplus").min_tail_index == 2.0


def test_slower_kernels_grow_slower():
    s = torch.tensor([50.0], dtype=torch.float64)
    values = [get_kernel(n).kappa(s).item() for n in ("softmax", "poly", "softplus", "log", "sigmoid")]
    # softplus and poly(1) are both ~linear: only require the overall ordering of classes.
    assert values[0] > values[1] >= values[2] * 0.99 > values[3] > values[4]


def test_user_callable():
    kernel = get_kernel(lambda s: 0.5 * s)
    assert kernel.growth == "user" and kernel.min_tail_index is None
    assert kernel(torch.tensor([2.0])).item() == 1.0
    assert get_kernel(kernel) is kernel


def test_unknown_name_lists_choices():
    with pytest.raises(ValueError, match="'softmax', 'poly', 'log', 'sigmoid', 'softplus'"):
        get_kernel("gaussian")


@pytest.mark.parametrize("degree, error", [(0, ValueError), (-1.0, ValueError), (math.inf, ValueError), ("2", TypeError), (True, TypeError)])
def test_bad_degree(degree, error):
    with pytest.raises(error, match="degree"):
        get_kernel("poly", degree=degree)


def test_unexpected_params():
    with pytest.raises(ValueError, match="accepts no parameters"):
        get_kernel("log", degree=2)
    with pytest.raises(ValueError, match="callable"):
        get_kernel(lambda s: s, degree=2)
    with pytest.raises(TypeError, match="kernel must be"):
        get_kernel(3)
    with pytest.raises(ValueError, match="already built"):
        get_kernel(get_kernel("log"), degree=1)


def test_kernels_pickle():
    import pickle

    kernel = pickle.loads(pickle.dumps(get_kernel("poly", degree=2.5)))
    assert isinstance(kernel, AttentionKernel)
    assert kernel.kappa(torch.tensor([5.0], dtype=torch.float64)).item() == pytest.approx(3.0**2.5)


# --------------------------------------------------------------------------- #
# kernels known by what they compute
# --------------------------------------------------------------------------- #
def _doubled(s):
    return 2.0 * s


def softmax(s):  # a user kernel that reuses the built-in name
    return torch.nn.functional.logsigmoid(s)


@pytest.mark.parametrize("kernel", [AttentionKernel("softmax", _doubled), softmax])
def test_a_kernel_named_softmax_runs_as_written(kernel):
    kernel = get_kernel(kernel)
    assert kernel.name == "softmax" and not kernel.is_softmax
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 12, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    expected = torch.softmax(kernel.log_weight(q @ k.transpose(-1, -2) / 2.0), dim=-1) @ v
    plain = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1) @ v
    for backend in ("auto", "naive", "chunked"):
        out = kernel_attention(q, k, v, kernel=kernel, backend=backend)
        torch.testing.assert_close(out, expected)
        assert not torch.allclose(out, plain)
    assert get_kernel("softmax").is_softmax


# --------------------------------------------------------------------------- #
# extreme parameters
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("degree", [1e39, 1e-40, 1e4, 1e-4])
def test_poly_degrees_outside_the_float32_range_are_refused(degree):
    with pytest.raises(ValueError, match=r"degree must be a number in \[0.001, 1000\]"):
        get_kernel("poly", degree=degree)


@pytest.mark.parametrize("degree", [1e-3, 0.37, 7.0, 1e3])
def test_poly_degrees_in_range_are_finite_in_float32(degree):
    kernel = get_kernel("poly", degree=degree)
    s = torch.linspace(-1e4, 1e4, 4001).requires_grad_()
    g = kernel(s)
    g.sum().backward()
    assert torch.isfinite(g).all() and torch.isfinite(s.grad).all()
    assert torch.isfinite(kernel.derivative(s.detach())).all()


# --------------------------------------------------------------------------- #
# user kernels, checked once before any work
# --------------------------------------------------------------------------- #
class _KernelClass(torch.nn.Module):
    def forward(self, s):
        return s


@pytest.mark.parametrize(
    "kernel, error, match",
    [
        (lambda s: s.sum(), ValueError, r"returned shape \(\)"),
        (lambda s: 1.0, TypeError, "returned float"),
        (lambda s: s.long(), TypeError, "dtype torch.int64"),
        (lambda s: s / 0.0, ValueError, "non-finite log-weights"),
        (lambda s: torch.log(s), ValueError, "non-finite log-weights"),
        (lambda s: s.numpy(), TypeError, "returned ndarray"),
        (lambda s, t: s, ValueError, "raised TypeError"),
        (_KernelClass, TypeError, r"is the class _KernelClass.*_KernelClass\(\)"),
    ],
)
def test_bad_user_kernels_fail_when_built(data, kernel, error, match, tiny_params):
    with pytest.raises(error, match=match):
        get_kernel(kernel)
    X, y = data
    with pytest.raises(error, match=match):
        MeasureTransformerRegressor(**tiny_params, kernel=kernel).fit(X, y)


@pytest.mark.slow
def test_a_module_instance_is_a_valid_kernel(data, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, kernel=_KernelClass()).fit(X, y)
    s = torch.linspace(-5.0, 5.0, 11)
    for block in model.net_.module_.blocks:  # every layer attends with the module's log-weights g(s) = s
        torch.testing.assert_close(block.attention.kernel.log_weight(s), s)
    assert model.predict(X).shape == y.shape
