"""The poly kernel whose degree is learnt: one positive degree per layer and head."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.attention import kernel_attention, run_attention
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.kernels import get_kernel, poly_at_degree
from sklearn_measattn.transformer import KernelMultiheadAttention, MeasureTransformer

LEARN = {"kernel": "poly", "kernel_params": {"degree": "learn"}}


@pytest.fixture(scope="module")
def small_params(tiny_network):
    """The tiny network two blocks deep (a degree per block), batches of four, seeded."""
    return {**tiny_network, "n_layers": 2, "batch_size": 4, "random_state": 0}


def learned_poly_attention(q, k, v, degree, log_weights, backend, chunk_size=None):
    """Attention with the learnt-degree kernel at ``degree`` (one per head), as the transformer runs it."""
    kernel = poly_at_degree(get_kernel("learned_poly"), degree[:, None, None])
    return run_attention(q, k, v, kernel, log_weights, backend, chunk_size=chunk_size)


@pytest.fixture(scope="module")
def fitted(small_params):
    X, y = make_matrix_inverse(n_samples=8, n_points=16, tail="pareto", tail_index=0.7, random_state=0)
    model = MeasureTransformerRegressor(**LEARN, **small_params, transform="symlog", max_epochs=3, lr=0.05).fit(X, y)
    return model, X, y


def test_the_kernel_spelling_and_its_refusals():
    kernel = get_kernel("poly", degree="learn")
    assert kernel.params == {"degree": "learn"} and kernel.min_tail_index is None
    with pytest.raises(TypeError, match="'learn'"):
        get_kernel("poly", degree="learnt")
    q = k = v = torch.randn(1, 2, 5, 4)
    with pytest.raises(ValueError, match="holds the learnt degrees"):
        kernel_attention(q, k, v, kernel)
    with pytest.raises(ValueError, match="runs on backend"):
        KernelMultiheadAttention(8, 2, kernel="poly", kernel_params={"degree": "learn"}, backend="fused")(
            torch.randn(1, 4, 8)
        )


def test_one_positive_degree_per_layer_and_head_starting_at_one():
    model = MeasureTransformer(2, 2, d_model=8, n_heads=4, n_layers=3, **LEARN, random_state=0)
    degrees = [block.attention.degree() for block in model.blocks]
    assert [tuple(d.shape) for d in degrees] == [(4,)] * 3
    torch.testing.assert_close(torch.stack(degrees).detach(), torch.ones(3, 4))
    attention = model.blocks[0].attention
    with torch.no_grad():
        attention.degree_raw.copy_(torch.tensor([-80.0, -5.0, 3.0, 1e4]))
    degree = attention.degree().detach()
    assert bool((degree > 0).all()) and float(degree.max()) <= 1e3  # positive whatever the raw value
    assert MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=1).blocks[0].attention.degree() is None


@pytest.mark.slow
def test_forward_equals_poly_attention_at_each_heads_degree_and_gradients_reach_the_degrees():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 20, 4, generator=g, dtype=torch.float64) for _ in range(3))
    degree = torch.tensor([0.5, 1.0, 3.7], dtype=torch.float64, requires_grad=True)
    weights = torch.ones(2, 20, dtype=torch.float64)
    weights[1, 15:] = 0.0
    out = learned_poly_attention(q, k, v, degree, torch.log(weights), "chunked", chunk_size=7)
    for h, p in enumerate(degree.tolist()):
        head = slice(h, h + 1)
        expected = kernel_attention(q[:, head], k[:, head], v[:, head], get_kernel("poly", degree=p), weights=weights,
                                    backend="naive")
        torch.testing.assert_close(out[:, h:h + 1], expected)
    naive = learned_poly_attention(q, k, v, degree, torch.log(weights), "naive")
    (grad_chunked,) = torch.autograd.grad(out.sum(), degree)
    (grad_naive,) = torch.autograd.grad(naive.sum(), degree)
    torch.testing.assert_close(grad_chunked, grad_naive)
    assert bool((grad_chunked != 0).all())
    assert torch.autograd.gradcheck(
        lambda p, q: learned_poly_attention(q, k[:, :, :6], v[:, :, :6], p, None, "chunked", chunk_size=2),
        (degree.detach().clone().requires_grad_(True), q[:, :, :5].clone().requires_grad_(True)),
    )


@pytest.mark.slow
def test_fit_exposes_the_learnt_degrees_and_training_moves_them(fitted, small_params):
    model, X, _ = fitted
    degree = model.learned_kernel_params_["degree"]
    assert degree.shape == (2, 2) and bool((degree > 0).all())
    assert not np.allclose(degree, 1.0)  # trained, not left at the initial value
    assert model.net_.module_.resolve_attention_backends() == ["chunked", "chunked"]
    fixed = MeasureTransformerRegressor(kernel="poly", **{**small_params, "n_layers": 1}, max_epochs=1).fit(X[:4], X[:4])
    assert fixed.learned_kernel_params_ == {}
    with pytest.raises(NotFittedError):
        MeasureTransformerRegressor(**LEARN).learned_kernel_params_  # noqa: B018


def test_the_trained_attention_diagnostics_use_the_learnt_degrees(fitted):
    model, X, _ = fitted
    attention = model.net_.module_.blocks[0].attention
    scores = torch.randn(1, 2, 3, 5, dtype=torch.float64)
    degree = torch.as_tensor(model.learned_kernel_params_["degree"][0])
    for h in range(2):
        expected = get_kernel("poly", degree=float(degree[h]))(scores[:, h])
        torch.testing.assert_close(attention.kernel(scores)[:, h], expected)
    ess = model.attention_ess(X)
    assert ess.shape == (8, 2) and np.all((ess > 0) & (ess <= 1))


@pytest.mark.slow
def test_pickles_and_clones(fitted):
    model, X, _ = fitted
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(restored.predict(X), model.predict(X))
    np.testing.assert_array_equal(restored.learned_kernel_params_["degree"], model.learned_kernel_params_["degree"])
    twin = clone(model)
    assert twin.get_params()["kernel_params"] == {"degree": "learn"} and not hasattr(twin, "net_")
    refit = twin.fit(X, X[..., ::-1].copy())
    assert refit.learned_kernel_params_["degree"].shape == (2, 2)


def test_the_learned_poly_name_runs_in_compare_like_the_other_kernels():
    from sklearn_measattn.experiments import compare_kernels

    kernel = get_kernel("learned_poly")
    assert kernel.name == "learned_poly" and kernel.params == {"degree": "learn"}
    assert get_kernel("poly", degree="learn").name == "learned_poly"
    from sklearn_measattn import MeasureTransformerRegressor

    template = MeasureTransformerRegressor(max_epochs=1, d_model=8, n_heads=2, n_layers=1, batch_size=16)
    rows = compare_kernels(kernels=["learned_poly"], transforms=[None], n_samples=8, n_points=16, n_test=4,
                           estimator=template)
    fit = next(row for row in rows if row["kernel"] == "learned_poly")
    assert fit["status"] == "ok" and 0 < fit["attention_ess"] <= 1


def test_diagnose_lists_the_learnt_degree_kernel_with_an_unknown_divergence_rule():
    from sklearn_measattn.experiments import diagnose_measures

    X = np.random.default_rng(0).standard_cauchy(size=(8, 64, 2))
    rows = {k["kernel"]: k for k in diagnose_measures(X, kernels=["log", "learned_poly"]).kernels}
    learnt = rows["learned_poly"]  # its degree, hence where its integrals diverge, is known only after a fit
    assert learnt["min_tail_index"] is None and learnt["integrals"] == "unknown"
    assert 0 < learnt["ess_none"] <= 1


def test_a_pickled_layer_keeps_its_kernel_and_decides_its_backend_again():
    layer = KernelMultiheadAttention(8, 2, kernel="log")
    restored = pickle.loads(pickle.dumps(layer))
    assert restored.kernel.name == layer.kernel.name and restored._resolved_backends == {}
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(restored(x), layer(x))
