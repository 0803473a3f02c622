import inspect
import re

import numpy as np
import ot
import pytest
import scipy.stats
import torch
from numpy.testing import assert_allclose
from scipy.spatial.distance import cdist

from sklearn_measattn._validation import parameter_constraints
from sklearn_measattn.losses import (
    LOSSES,
    MeasureLoss,
    energy_loss,
    get_loss,
    mse_loss,
    quantile_loss,
    sinkhorn_loss,
    sliced_wasserstein_loss,
)
from sklearn_measattn.metrics import energy_distance, wasserstein_distance


def _t(a):
    return torch.as_tensor(np.asarray(a), dtype=torch.float64)


def _t_or_none(a):
    return None if a is None else _t(a)


def _np_energy(x, y, a=None, b=None, beta=1.0):
    a = np.full(len(x), 1 / len(x)) if a is None else a / a.sum()
    b = np.full(len(y), 1 / len(y)) if b is None else b / b.sum()
    d = lambda u, v: cdist(u, v) ** beta  # noqa: E731
    return 2 * a @ d(x, y) @ b - a @ d(x, x) @ a - b @ d(y, y) @ b


@pytest.fixture
def clouds():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 2))
    y = rng.standard_t(3, size=(3, 5, 2)) + 0.5
    xw = rng.uniform(0.1, 2.0, size=(3, 7))
    yw = rng.uniform(0.1, 2.0, size=(3, 5))
    return x, y, xw, yw


# --------------------------------------------------------------------------- energy
@pytest.mark.parametrize("beta", [1.0, 0.5, 1.5, 1.99])
@pytest.mark.parametrize("weighted", [False, True])
def test_energy_matches_numpy(clouds, beta, weighted):
    x, y, xw, yw = clouds
    if not weighted:
        xw = yw = None
    got = energy_loss(_t(x), _t(y), _t_or_none(xw), _t_or_none(yw), beta=beta, reduction="none")
    expected = [_np_energy(x[i], y[i], None if xw is None else xw[i], None if yw is None else yw[i], beta)
                for i in range(3)]
    assert got.dtype == torch.float64
    assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-14)
    mean = energy_loss(_t(x), _t(y), _t_or_none(xw), _t_or_none(yw), beta=beta)
    assert_allclose(float(mean), np.mean(expected), rtol=1e-12)
    # the metric computes the same value (at unit scale, block by block)
    metric = energy_distance(y, x, weights_true=yw, weights_pred=xw, beta=beta, multioutput="raw_values")
    assert np.all(metric > 0)
    assert_allclose(got.numpy(), metric, rtol=1e-12)


def test_energy_matches_scipy_1d():
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=9), rng.normal(size=4) + 1
    uw, vw = rng.uniform(size=9), rng.uniform(size=4)
    got = energy_loss(_t(u[None, :, None]), _t(v[None, :, None]), _t(uw[None]), _t(vw[None]))
    assert_allclose(float(got), scipy.stats.energy_distance(u, v, uw, vw) ** 2, rtol=1e-10)


def test_energy_zero_symmetric_and_monotone(clouds):
    x, y, _, _ = clouds
    assert float(energy_loss(_t(x), _t(x))) == 0.0
    assert_allclose(float(energy_loss(_t(x), _t(y))), float(energy_loss(_t(y), _t(x))), rtol=1e-12)
    values = [float(energy_loss(_t(x + s * (1.0 - x)), _t(np.ones_like(x)))) for s in (0.0, 0.3, 0.6, 0.9)]
    assert all(v0 > v1 for v0, v1 in zip(values, values[1:]))


ENERGY_BACKENDS = ["fused", "chunked"]


@pytest.fixture
def small_blocks(monkeypatch):
    """Chunked blocks of a few rows, so that a small test crosses block edges."""
    from sklearn_measattn._distances import _energy

    monkeypatch.setattr(_energy, "BLOCK_ELEMENTS", 64)


@pytest.mark.parametrize("backend", ENERGY_BACKENDS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 1.5])
def test_energy_backends_equal_the_dense_v_statistic_and_its_gradient(backend, beta, small_blocks):
    """Value and gradients (x and y) to 1e-8 relative in float64, with weights,
    absent points (zero weight, far away), coincident points and ragged sizes."""
    rng = np.random.default_rng(11)
    x, y = rng.standard_t(1.5, size=(3, 37, 3)), rng.normal(size=(3, 29, 3)) * 2
    x[0, 3] = x[0, 4]  # coincident points within x, and across x and y
    y[1, 2] = x[1, 5]
    x[:, -4:] = 1e6  # absent points: zero weight, far from everything
    a, b = rng.uniform(0.1, 2.0, size=(3, 37)), rng.uniform(0.1, 2.0, size=(3, 29))
    a[:, -4:] = 0.0
    b[2, :10] = 0.0
    weights = torch.arange(1.0, 4.0, dtype=torch.float64)

    def value_and_grads(backend):
        xt, yt = _t(x).requires_grad_(True), _t(y).requires_grad_(True)
        value = energy_loss(xt, yt, _t(a), _t(b), beta=beta, reduction="none", backend=backend)
        (value * weights).sum().backward()
        return value.detach(), xt.grad, yt.grad

    expected = value_and_grads("reference")
    got = value_and_grads(backend)
    assert_allclose(got[0].numpy(), [_np_energy(x[i], y[i], a[i], b[i], beta) for i in range(3)], rtol=1e-8)
    for g, e in zip(got, expected):
        assert_allclose(g.numpy(), e.numpy(), rtol=1e-8, atol=1e-8 * float(e.abs().max()))
    assert float(got[1][:, -4:].abs().max()) == 0.0  # absent points get no gradient


@pytest.mark.parametrize("backend", ENERGY_BACKENDS)
def test_energy_backends_float32_close_to_float64(backend, small_blocks):
    rng = np.random.default_rng(12)
    x, y = rng.normal(size=(2, 50, 2)), rng.normal(size=(2, 40, 2)) + 0.3
    exact = energy_loss(_t(x), _t(y), reduction="none", backend="reference")
    xt = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    got = energy_loss(xt, torch.tensor(y, dtype=torch.float32), reduction="none", backend=backend)
    got.sum().backward()
    assert got.dtype == torch.float32
    assert_allclose(got.detach().numpy(), exact.numpy(), rtol=1e-4)
    assert torch.all(torch.isfinite(xt.grad))


@pytest.mark.parametrize("backend", ENERGY_BACKENDS)
def test_energy_backends_propagate_non_finite_predictions(backend):
    """An overflowed prediction must reach the loss (the training guard sees it)."""
    x = torch.zeros(1, 4, 2)
    x[0, 1, 0] = float("nan")
    assert torch.isnan(energy_loss(x, torch.ones(1, 3, 2), backend=backend))


def test_energy_backend_is_checked():
    with pytest.raises(ValueError, match="'backend' parameter of energy_loss must be a str among {'auto', 'fused'"):
        energy_loss(torch.zeros(1, 2, 1), torch.zeros(1, 2, 1), backend="cuda")
    with pytest.raises(ValueError, match="'backend' parameter of energy_loss must be a str among {'auto', 'fused'"):
        get_loss("energy", backend="fast")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("backend", ["auto", "fused", "chunked", "reference"])
def test_energy_loss_compares_half_precision_clouds_in_float32(dtype, backend):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 6, 3, generator=generator).to(dtype).requires_grad_()
    y = torch.randn(2, 5, 3, generator=generator).to(dtype)
    loss = energy_loss(x, y, backend=backend)
    assert loss.dtype == torch.float32
    expected = energy_loss(x.detach().float(), y.float(), backend="reference")
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    loss.backward()
    assert x.grad.dtype == dtype and bool(torch.isfinite(x.grad).all())


def test_energy_reference_backend_is_twice_differentiable():
    x = torch.randn(1, 5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    y = torch.randn(1, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (grad,) = torch.autograd.grad(energy_loss(x, y, backend="reference"), x, create_graph=True)
    (second,) = torch.autograd.grad(grad.square().sum(), x)
    assert torch.all(torch.isfinite(second))
    (fast,) = torch.autograd.grad(energy_loss(x, y), x)
    assert_allclose(fast.numpy(), grad.detach().numpy(), rtol=1e-10)


# --------------------------------------------------------------------------- gradients
LOSS_FUNCS = [
    pytest.param(lambda x, y, *w: energy_loss(x, y, *w), id="energy"),
    pytest.param(lambda x, y, *w: energy_loss(x, y, *w, beta=0.5), id="energy-beta0.5"),
    pytest.param(lambda x, y, *w: sliced_wasserstein_loss(x, y, *w, generator=0), id="sliced"),
    pytest.param(lambda x, y, *w: sliced_wasserstein_loss(x, y, *w, p=1, generator=0), id="sliced-p1"),
    pytest.param(lambda x, y, *w: sinkhorn_loss(x, y, *w), id="sinkhorn"),
    pytest.param(lambda x, y, *w: sinkhorn_loss(x, y, *w, p=1), id="sinkhorn-p1"),
    pytest.param(lambda x, y, *w: mse_loss(x, y, *w), id="mse"),
    # levels need equally weighted predictions: only the targets' weights
    pytest.param(lambda x, y, *w: quantile_loss(x[..., :1], y[..., :1], None, *w[1:]), id="quantile"),
]


@pytest.mark.parametrize("loss", LOSS_FUNCS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradients_finite_duplicates_and_identical(loss, dtype):
    base = torch.tensor([[[0.0, 1.0], [0.0, 1.0], [2.0, -1.0], [2.0, -1.0]]], dtype=dtype)
    for y in (base.clone(), base + 0.5):  # identical clouds, then shifted ones
        x = base.clone().requires_grad_(True)
        value = loss(x, y)
        value.backward()
        assert torch.isfinite(value)
        assert value.dtype == dtype
        assert torch.all(torch.isfinite(x.grad)), x.grad
    # zero weights too
    x = base.clone().requires_grad_(True)
    w = torch.tensor([[1.0, 0.0, 2.0, 0.0]], dtype=dtype)
    loss(x, base + 0.5, w, w).backward()
    assert torch.all(torch.isfinite(x.grad))


@pytest.mark.parametrize("loss", LOSS_FUNCS[:-1])
def test_identical_clouds_near_zero(loss):
    x = torch.randn(2, 6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert abs(float(loss(x, x.clone()))) < 1e-6


# --------------------------------------------------------------------------- weights
WEIGHTED_LOSSES = [
    pytest.param(lambda x, y, a, b: energy_loss(x, y, a, b), 1e-12, id="energy"),
    pytest.param(lambda x, y, a, b: sliced_wasserstein_loss(x, y, a, b, generator=3), 1e-10, id="sliced"),
    pytest.param(lambda x, y, a, b: sliced_wasserstein_loss(x, y, a, b, p=1, generator=3), 1e-10,
                 id="sliced-p1"),
    pytest.param(lambda x, y, a, b: sinkhorn_loss(x, y, a, b), 1e-3, id="sinkhorn"),
]


@pytest.mark.parametrize("loss, rtol", WEIGHTED_LOSSES)
def test_zero_weights_equal_deleting_points(loss, rtol):
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(1, 6, 2)), rng.normal(size=(1, 5, 2)) + 1
    xw = np.array([[1.0, 0.0, 1.0, 1.0, 0.0, 1.0]])
    yw = np.array([[0.0, 1.0, 1.0, 1.0, 1.0]])
    full = loss(_t(x), _t(y), _t(xw), _t(yw))
    deleted = loss(_t(x[:, xw[0] > 0]), _t(y[:, yw[0] > 0]), None, None)
    assert_allclose(float(full), float(deleted), rtol=rtol)


@pytest.mark.parametrize("loss, rtol", WEIGHTED_LOSSES)
def test_integer_weights_equal_repeating_points(loss, rtol):
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(1, 4, 2)), rng.normal(size=(1, 3, 2)) - 1
    xw, yw = np.array([[1, 3, 2, 1]]), np.array([[2, 1, 4]])
    weighted = loss(_t(x), _t(y), _t(xw.astype(float)), _t(yw.astype(float)))
    repeated = loss(_t(np.repeat(x, xw[0], axis=1)), _t(np.repeat(y, yw[0], axis=1)), None, None)
    assert_allclose(float(weighted), float(repeated), rtol=rtol)


# --------------------------------------------------------------------------- sliced
def test_sliced_unequal_sizes_matches_scipy_in_1d():
    rng = np.random.default_rng(4)
    u, v = rng.normal(size=11), rng.exponential(size=6)
    uw, vw = rng.uniform(size=11), rng.uniform(size=6)
    got = sliced_wasserstein_loss(_t(u[None, :, None]), _t(v[None, :, None]), _t(uw[None]), _t(vw[None]),
                                  p=1, n_projections=3, generator=0)
    assert_allclose(float(got), scipy.stats.wasserstein_distance(u, v, uw, vw), rtol=1e-10)
    got = sliced_wasserstein_loss(_t(u[None, :, None]), _t(v[None, :, None]), p=2, n_projections=3, generator=0)
    expected = ot.wasserstein_1d(u, v, p=2)
    assert_allclose(float(got), float(expected), rtol=1e-10)


def test_sliced_sort_and_quantile_paths_agree():
    x = torch.randn(2, 9, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.randn(2, 9, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    fast = sliced_wasserstein_loss(x, y, generator=5)
    ones = torch.ones(2, 9, dtype=torch.float64)
    quantile = sliced_wasserstein_loss(x, y, ones, ones, generator=5)
    assert_allclose(float(fast), float(quantile), rtol=1e-12)


def test_sliced_translate_expected_value():
    d, t = 3, torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64)  # |t|^2 = 9
    x = torch.randn(1, 40, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = sliced_wasserstein_loss(x, x + t, n_projections=4000, generator=1)
    # per direction theta, W_2^2 of a translate is <theta, t>^2, whose mean is |t|^2 / d
    assert_allclose(float(got), 9.0 / d, rtol=0.05)
    got_unequal = sliced_wasserstein_loss(x, (x + t)[:, ::2], n_projections=8, generator=1)
    assert torch.isfinite(got_unequal) and float(got_unequal) > 0


def test_sliced_generator_reproducible():
    x, y = torch.randn(2, 5, 2), torch.randn(2, 5, 2)
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    assert float(sliced_wasserstein_loss(x, y, generator=g1)) == float(sliced_wasserstein_loss(x, y, generator=g2))
    with pytest.raises(TypeError, match="generator"):
        sliced_wasserstein_loss(x, y, generator="seed")


# --------------------------------------------------------------------------- sinkhorn
@pytest.mark.slow
def test_sinkhorn_close_to_exact_ot():
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(8, 2)), rng.normal(size=(10, 2)) + [1.0, 0.0]
    a, b = rng.uniform(0.5, 1.5, 8), rng.uniform(0.5, 1.5, 10)
    exact = ot.emd2(a / a.sum(), b / b.sum(), ot.dist(x, y))  # squared Euclidean cost
    args = (_t(x[None]), _t(y[None]), _t(a[None]), _t(b[None]))
    errors = {}
    for reg, debias in [(0.002, True), (0.002, False), (0.01, False)]:
        value = float(sinkhorn_loss(*args, reg=reg, debias=debias, max_iter=3000))
        errors[reg, debias] = abs(value - exact) / exact
    assert errors[0.002, True] < 0.01 and errors[0.002, False] < 0.02
    assert errors[0.002, False] < errors[0.01, False]  # the entropic bias shrinks with reg
    absolute = float(sinkhorn_loss(*args, reg=0.002, normalize=None, debias=False, max_iter=3000))
    assert_allclose(absolute, exact, rtol=0.02)
    largest = float(sinkhorn_loss(*args, reg=0.002, normalize="max", max_iter=3000))
    assert_allclose(largest, exact, rtol=0.02)


def test_sinkhorn_gradient_matches_plan_direction():
    x = torch.tensor([[[0.0], [1.0]]], dtype=torch.float64, requires_grad=True)
    sinkhorn_loss(x, x.detach() + 2.0, reg=0.01).backward()
    # moving x toward y (to the right) lowers the loss: both gradients negative
    assert torch.all(x.grad < 0)


# --------------------------------------------------------------------------- mse
def test_mse_values_and_mismatch():
    x, y = torch.zeros(2, 3, 2), torch.ones(2, 3, 2)
    y[1] = 3.0
    assert_allclose(mse_loss(x, y, reduction="none").numpy(), [1.0, 9.0], rtol=1e-6)
    w = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    y[0, 0] = 2.0
    assert_allclose(mse_loss(x, y, w, reduction="none").numpy(), [4.0, 9.0], rtol=1e-6)
    with pytest.raises(ValueError, match="mse loss needs paired targets.*got 3 and 4.*energy"):
        mse_loss(x, torch.ones(2, 4, 2))


# --------------------------------------------------------------------------- quantile
def test_quantile_loss_is_half_the_crps_against_one_point():
    generator = torch.Generator().manual_seed(3)
    x, y = torch.randn(6, 25, 1, generator=generator), torch.randn(6, 1, 1, generator=generator) * 2
    # the CRPS of an ensemble against one point is half its energy distance to the point
    assert_allclose(quantile_loss(x, y, reduction="none").numpy(),
                    (energy_loss(x, y, reduction="none") / 4).numpy(), rtol=1e-5)
    assert not np.allclose(quantile_loss(x, y, level_offset=0.0, reduction="none").numpy(),
                           quantile_loss(x, y, reduction="none").numpy())


def test_quantile_loss_minimised_at_the_quantiles_of_the_target_law():
    # N points fitted by gradient descent to 20000 draws of an exponential law sit at its quantiles
    generator = torch.Generator().manual_seed(0)
    targets = torch.empty(1, 20000, 1).exponential_(generator=generator)
    n = 4
    for offset in (0.0, 0.3, 0.5):
        x = torch.zeros(1, n, 1, requires_grad=True)
        optimiser = torch.optim.Adam([x], lr=0.05)
        for _ in range(600):
            optimiser.zero_grad()
            quantile_loss(x, targets, level_offset=offset).backward()
            optimiser.step()
        levels = (np.arange(1, n + 1) - offset) / (n + 1 - 2 * offset)
        assert_allclose(np.sort(x.detach().numpy().ravel()), -np.log1p(-levels), atol=0.05)


def test_quantile_loss_target_weights_and_bad_input():
    x, y = torch.tensor([[[0.0], [1.0]]]), torch.tensor([[[0.0], [5.0]]])
    w = torch.tensor([[1.0, 0.0]])
    assert_allclose(float(quantile_loss(x, y, None, w)), float(quantile_loss(x, y[:, :1])))
    with pytest.raises(ValueError, match="one-dimensional points.*got 2 features"):
        quantile_loss(torch.zeros(1, 3, 2), torch.zeros(1, 1, 2))
    with pytest.raises(ValueError, match="equally weighted.*x_weights=None"):
        quantile_loss(x, y, torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="level_offset"):
        get_loss("quantile", level_offset=1.0)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("loss", [energy_loss, sliced_wasserstein_loss, sinkhorn_loss, mse_loss])
def test_input_validation(loss):
    x, y = torch.zeros(2, 3, 2), torch.ones(2, 3, 2)
    with pytest.raises(ValueError, match="3-D"):
        loss(x[0], y)
    with pytest.raises(ValueError, match="samples"):
        loss(x, y[:1])
    with pytest.raises(ValueError, match="features"):
        loss(x, y[..., :1])
    with pytest.raises(ValueError, match=r"x_weights must have shape"):
        loss(x, y, torch.ones(2, 4))
    with pytest.raises(ValueError, match=">= 0"):
        loss(x, y, None, -torch.ones(2, 3))
    with pytest.raises(ValueError, match="sums to 0"):
        loss(x, y, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="reduction"):
        loss(x, y, reduction="avg")
    assert loss(x, y, reduction="none").shape == (2,)


@pytest.mark.parametrize(
    "name, params, error, match",
    [
        ("energy", {"beta": 0.0}, ValueError, "beta"),
        ("energy", {"beta": 2.5}, ValueError, "beta"),
        ("energy", {"beta": 2.0}, ValueError, r"\(0\.0, 2\.0\): .*at beta=2 it compares means only"),
        ("sliced", {"n_projections": 0}, ValueError, "n_projections"),
        ("sliced", {"p": 0.5}, ValueError, r"'p' parameter of sliced_wasserstein_loss must be .*\[1\.0, inf\)"),
        ("sinkhorn", {"reg": -1.0}, ValueError, "reg"),
        ("sinkhorn", {"p": 0.5}, ValueError, r"'p' parameter of sinkhorn_loss must be .*\[1\.0, inf\): W_p is not"),
        ("sinkhorn", {"normalize": "mean"}, ValueError, r"'normalize' .* {'median', 'max'} or None"),
        ("sinkhorn", {"tol": float("inf")}, ValueError, r"'tol' .* \(0\.0, inf\)"),
        ("sliced", {"generator": True}, TypeError, "None, an int seed or a torch.Generator"),
        ("energy", {"n_projections": 3}, TypeError, r"unexpected keyword argument\(s\) \['n_projections'\]; "
                                                    "for energy_loss the keyword arguments it takes are beta, "),
    ],
)
def test_get_loss_invalid_params(name, params, error, match):
    with pytest.raises(error, match=match):
        get_loss(name, **params)


def test_get_loss_registry_and_callables():
    with pytest.raises(ValueError, match=r"'name' parameter of get_loss must be a str among {'energy', 'sliced', "
                                         r"'sinkhorn', 'mse', 'quantile'} or a callable loss\(x, y, .*Got 'wasserstein'"):
        get_loss("wasserstein")
    with pytest.raises(TypeError, match="'name' parameter of get_loss"):
        get_loss(3)
    assert set(LOSSES) == {"energy", "sliced", "sinkhorn", "mse", "quantile"}
    assert get_loss("energy") is energy_loss
    x, y = torch.zeros(1, 2, 1), torch.ones(1, 3, 1)
    assert_allclose(float(get_loss("energy", beta=1.5)(x, y)), float(energy_loss(x, y, beta=1.5)))

    def user_loss(x, y, x_weights=None, y_weights=None, *, scale=1.0):
        return scale * (x.mean() - y.mean()) ** 2

    assert get_loss(user_loss) is user_loss
    assert_allclose(float(get_loss(user_loss, scale=2.0)(x, y)), 2.0)


# --------------------------------------------------------------------------- module
def test_measure_loss_call_conventions():
    criterion = MeasureLoss("energy")
    y_pred = torch.randn(2, 4, 2, requires_grad=True)
    y_true = torch.randn(2, 6, 2, dtype=torch.float64)  # cast to y_pred's dtype
    loss = criterion(y_pred, y_true)
    loss.backward()
    assert loss.shape == () and y_pred.grad is not None
    w = torch.tensor([[1.0, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    expected = energy_loss(y_pred, y_true, None, w)
    for call in (
        lambda: criterion(y_pred, y_true, None, w),
        lambda: criterion(y_pred, y_true, true_weights=w),
        lambda: criterion(y_pred, (y_true, w)),
        lambda: criterion(y_pred, {"points": y_true, "weights": w}),
        lambda: criterion((y_pred, None), {"points": y_true, "weights": w}),
    ):
        assert_allclose(call().item(), expected.item(), rtol=1e-6)
    with pytest.raises(ValueError, match="once"):
        criterion(y_pred, (y_true, w), true_weights=w)
    with pytest.raises(ValueError, match="keys"):
        criterion(y_pred, {"target": y_true})
    assert "beta=1.5" in repr(MeasureLoss("energy", beta=1.5))
    with pytest.raises(ValueError, match="'name' parameter of get_loss"):
        MeasureLoss("l2")


def test_measure_loss_pickles():
    import pickle

    criterion = MeasureLoss("sliced", n_projections=4, generator=0)
    x, y = torch.randn(1, 3, 2), torch.randn(1, 5, 2)
    restored = pickle.loads(pickle.dumps(criterion))
    assert restored(x, y).item() == criterion(x, y).item()


@pytest.mark.slow
def test_measure_loss_as_skorch_criterion():
    skorch = pytest.importorskip("skorch")

    class Pointwise(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, X):
            return self.lin(X)

    rng = np.random.default_rng(0)
    X = rng.normal(size=(16, 5, 2)).astype(np.float32)
    y = (2.0 * X + 1.0)[:, :4]
    net = skorch.NeuralNetRegressor(
        Pointwise, criterion=MeasureLoss, criterion__name="sliced", criterion__n_projections=8,
        max_epochs=3, lr=0.05, batch_size=8, train_split=None, verbose=0,
    )
    net.fit(X, y)
    losses = net.history[:, "train_loss"]
    assert len(losses) == 3 and all(np.isfinite(losses))


@pytest.mark.slow
def test_gradient_descent_moves_cloud_toward_target():
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(2, 30, 2, generator=gen) * 0.5 + torch.tensor([3.0, -2.0])
    x = torch.randn(2, 20, 2, generator=gen).requires_grad_(True)
    first = None
    for _ in range(40):  # plain gradient descent; per-point gradients scale as 1 / n_points
        x.grad = None
        loss = energy_loss(x, target)
        loss.backward()
        with torch.no_grad():
            x -= 0.5 * x.shape[1] * x.grad
        first = loss.item() if first is None else first
    final = energy_loss(x, target).item()
    assert final < 0.5 * first
    assert torch.allclose(x.detach().mean(1), target.mean(1), atol=0.5)


# --------------------------------------------------------------------------- agreement with the metrics
def _ragged_and_padded(rng, lengths, n_features=2, shift=0.0, pad_value=123.0):
    """Ragged clouds, and the same clouds padded (far away) with zero weights."""
    ragged = [rng.standard_t(3, size=(n, n_features)) + shift for n in lengths]
    padded = np.full((len(lengths), max(lengths), n_features), pad_value)
    weights = np.zeros(padded.shape[:2])
    for i, cloud in enumerate(ragged):
        padded[i, : len(cloud)], weights[i, : len(cloud)] = cloud, 1.0
    return ragged, padded, weights


def test_energy_loss_on_padded_equals_metric_on_ragged():
    rng = np.random.default_rng(11)
    pred, pred_padded, pred_w = _ragged_and_padded(rng, [4, 9, 6])
    true, true_padded, true_w = _ragged_and_padded(rng, [7, 3, 8], shift=1.0)
    loss = energy_loss(_t(pred_padded), _t(true_padded), _t(pred_w), _t(true_w), beta=1.3, reduction="none")
    assert_allclose(loss.numpy(), energy_distance(true, pred, beta=1.3, multioutput="raw_values"), rtol=1e-12)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_sliced_loss_is_pth_power_of_sliced_metric_in_1d(p):
    """In 1-D every direction is +-1, so both are exact and must agree to rounding."""
    rng = np.random.default_rng(12)
    pred, pred_padded, pred_w = _ragged_and_padded(rng, [5, 11, 8], n_features=1)
    true, true_padded, true_w = _ragged_and_padded(rng, [9, 4, 8], n_features=1, shift=0.5)
    metric = wasserstein_distance(true, pred, p=p, method="sliced", n_projections=3, random_state=0,
                                  multioutput="raw_values")
    padded = sliced_wasserstein_loss(_t(pred_padded), _t(true_padded), _t(pred_w), _t(true_w), p=p,
                                     n_projections=3, generator=0, reduction="none")
    assert_allclose(padded.numpy() ** (1 / p), metric, rtol=1e-10)
    # the uniform, equal-size sample takes the sorting path on both sides
    uniform = sliced_wasserstein_loss(_t(np.array(pred[2])[None]), _t(np.array(true[2])[None]), p=p,
                                      n_projections=3, generator=0)
    assert_allclose(float(uniform) ** (1 / p), metric[2], rtol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("p", [1, 2])
def test_sliced_loss_and_metric_estimate_the_same_distance(clouds, p):
    x, y, xw, yw = clouds
    loss = sliced_wasserstein_loss(_t(x), _t(y), _t(xw), _t(yw), p=p, n_projections=4000, generator=0,
                                   reduction="none")
    metric = wasserstein_distance(y, x, weights_true=yw, weights_pred=xw, p=p, method="sliced",
                                  n_projections=4000, random_state=0, multioutput="raw_values")
    assert_allclose(loss.numpy() ** (1 / p), metric, rtol=0.03)


@pytest.mark.parametrize("uniform", [False, True])
def test_shared_sliced_core_gives_the_same_value_on_both_backends(uniform):
    from sklearn_measattn._distances import sliced_wasserstein_batch

    rng = np.random.default_rng(13)
    x, y = rng.normal(size=(3, 6, 2)), rng.normal(size=(3, 6, 2)) + 1.0
    a = np.full((3, 6), 1 / 6) if uniform else rng.dirichlet(np.ones(6), size=3)
    b = np.full((3, 6), 1 / 6) if uniform else rng.dirichlet(np.ones(6), size=3)
    theta = rng.normal(size=(2, 7))
    theta /= np.linalg.norm(theta, axis=0)
    for root in (False, True):
        on_numpy = sliced_wasserstein_batch(x, a, y, b, theta, 2.5, root=root)
        on_torch = sliced_wasserstein_batch(_t(x), _t(a), _t(y), _t(b), _t(theta), 2.5, root=root)
        assert isinstance(on_numpy, np.ndarray) and torch.is_tensor(on_torch)
        assert_allclose(on_torch.numpy(), on_numpy, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_sinkhorn_loss_and_metric_share_the_entropic_plan(clouds, p, weighted):
    """Without debiasing and with an absolute reg the loss is <P, C> + reg KL(P | a b^T)
    for the metric's plan P, whose cost <P, C> the metric returns (as its p-th root);
    0 <= KL <= log(min(N, M))."""
    x, y, xw, yw = clouds
    if not weighted:
        xw = yw = None
    reg = 0.05
    loss = sinkhorn_loss(_t(x), _t(y), _t_or_none(xw), _t_or_none(yw), p=p, reg=reg, normalize=None, debias=False,
                         max_iter=5000, tol=1e-9, reduction="none")
    metric = wasserstein_distance(y, x, weights_true=yw, weights_pred=xw, p=p, method="sinkhorn", reg=reg,
                                  multioutput="raw_values")
    entropic_term = loss.numpy() - metric**p
    assert np.all(entropic_term >= -1e-9)
    assert np.all(entropic_term <= reg * np.log(min(x.shape[1], y.shape[1])) + 1e-9)


def test_sinkhorn_loss_on_padded_matches_metric_on_ragged():
    rng = np.random.default_rng(14)
    pred, pred_padded, pred_w = _ragged_and_padded(rng, [5, 8, 6])
    true, true_padded, true_w = _ragged_and_padded(rng, [7, 4, 8], shift=1.0)
    reg = 2.0  # absolute, for costs |x - y|^2 up to ~300
    loss = sinkhorn_loss(_t(pred_padded), _t(true_padded), _t(pred_w), _t(true_w), reg=reg, normalize=None,
                         debias=False, max_iter=5000, tol=1e-9, reduction="none")
    metric = wasserstein_distance(true, pred, p=2, method="sinkhorn", reg=reg, multioutput="raw_values")
    entropic_term = loss.numpy() - metric**2
    assert np.all(entropic_term >= -1e-9) and np.all(entropic_term <= reg * np.log(8))
    exact = wasserstein_distance(true, pred, p=2, multioutput="raw_values")
    assert np.all(metric > exact)  # the entropic plan is not optimal for the cost
    assert_allclose(metric, exact, rtol=0.1)


@pytest.mark.parametrize(
    "name, value, loss_call, metric_call",
    [
        ("beta", 2.0, lambda v: energy_loss(torch.zeros(1, 2, 1), torch.ones(1, 2, 1), beta=v),
         lambda v: energy_distance(np.zeros((1, 2, 1)), np.ones((1, 2, 1)), beta=v)),
        ("beta", 0.0, lambda v: get_loss("energy", beta=v), lambda v: energy_distance(np.zeros((1, 2, 1)),
                                                                                      np.ones((1, 2, 1)), beta=v)),
        ("p", 0.5, lambda v: get_loss("sliced", p=v), lambda v: wasserstein_distance(
            np.zeros((1, 2, 1)), np.ones((1, 2, 1)), p=v, method="sliced")),
        ("p", 0.5, lambda v: get_loss("sinkhorn", p=v), lambda v: wasserstein_distance(
            np.zeros((1, 2, 1)), np.ones((1, 2, 1)), p=v, method="sinkhorn")),
        ("n_projections", 0, lambda v: get_loss("sliced", n_projections=v), lambda v: wasserstein_distance(
            np.zeros((1, 2, 1)), np.ones((1, 2, 1)), n_projections=v, method="sliced")),
        ("reg", -1.0, lambda v: get_loss("sinkhorn", reg=v), lambda v: wasserstein_distance(
            np.zeros((1, 2, 1)), np.ones((1, 2, 1)), reg=v, method="sinkhorn")),
    ],
)
def test_loss_and_metric_share_each_parameter_range(name, value, loss_call, metric_call):
    """One domain, stated once: the same message but for the function it names."""
    with pytest.raises(ValueError) as from_loss:
        loss_call(value)
    with pytest.raises(ValueError) as from_metric:
        metric_call(value)
    loss_message, metric_message = (re.sub(r"parameter of \w+ must", "parameter of ... must", str(error.value))
                                    for error in (from_loss, from_metric))
    assert loss_message == metric_message
    assert f"The {name!r} parameter of" in loss_message


def test_sinkhorn_loss_accepts_every_order_the_metric_accepts():
    x = torch.tensor([[[0.0], [1.0]]], dtype=torch.float64)
    value = sinkhorn_loss(x, x + 2.0, p=3, reg=1e-3, normalize=None, debias=False, max_iter=5000)
    expected = wasserstein_distance(np.array([[[0.0], [1.0]]]), np.array([[[2.0], [3.0]]]), p=3) ** 3
    assert_allclose(float(value), expected, rtol=1e-3)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_each_loss_has_one_table_of_its_keyword_parameters(name):
    """Every keyword parameter of a loss is in its table; the clouds and their weights are checked by prepare_clouds."""
    loss = LOSSES[name]
    parameters = inspect.signature(loss).parameters
    assert set(parameter_constraints(loss)) == {p for p in parameters if parameters[p].kind is inspect.Parameter.KEYWORD_ONLY}
    assert [p for p in parameters if parameters[p].kind is not inspect.Parameter.KEYWORD_ONLY] == [
        "x", "y", "x_weights", "y_weights"
    ]


@pytest.mark.parametrize(
    "name, params",
    [("energy", {"beta": 2.0}), ("energy", {"backend": "gpu"}), ("sliced", {"p": 0.9}), ("sliced", {"generator": "0"}),
     ("sinkhorn", {"max_iter": 0}), ("sinkhorn", {"debias": "yes"}), ("mse", {"reduction": "avg"})],
)
def test_get_loss_checks_its_parameters_with_the_loss_table(name, params):
    """get_loss fails at once with the error the loss itself raises at its first call."""
    with pytest.raises(ValueError) as from_get_loss:
        get_loss(name, **params)
    with pytest.raises(ValueError) as from_call:
        LOSSES[name](torch.zeros(1, 2, 1), torch.ones(1, 2, 1), **params)
    assert str(from_get_loss.value) == str(from_call.value)
    assert f"The {next(iter(params))!r} parameter of {LOSSES[name].__name__} must be" in str(from_call.value)
