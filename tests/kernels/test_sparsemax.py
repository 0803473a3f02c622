"""Bounded-support kernels: compact (a fixed threshold) and sparsemax (a threshold per query)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.attention import kernel_attention, resolve_backend
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.experiments import diagnose_measures, format_diagnosis
from sklearn_measattn.kernels import SPARSE_KERNEL_NAMES, get_kernel

KERNELS = [("compact", {}), ("compact", {"threshold": 0.3, "degree": 2.0}), ("sparsemax", {})]


# The q, k, v most tests draw (the qkv fixture): 9 queries, 11 keys (as _weights), 3-d values, float64.
QKV = {"shape": (2, 2, 9, 4), "n_keys": 11, "d_value": 3, "dtype": torch.float64}


def _weights(dtype=torch.float64):
    w = torch.ones(2, 11, dtype=dtype)
    w[0, 8:] = 0.0  # absent points
    w[1, :3] = 2.5
    return w


def _scores(q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def test_registry_entries_say_growth_support_and_where_the_integral_diverges():
    compact = get_kernel("compact", degree=2)
    assert (compact.growth, compact.min_tail_index, compact.support) == ("polynomial", 3.0, "bounded")
    assert compact.params == {"threshold": 0.0, "degree": 2.0}
    sparsemax = get_kernel("sparsemax")
    assert (sparsemax.growth, sparsemax.min_tail_index, sparsemax.support) == ("linear", 2.0, "bounded")
    assert get_kernel("log").support == "full"
    assert set(SPARSE_KERNEL_NAMES) == {"compact", "sparsemax"}
    # kappa is zero below the threshold: g = -inf there
    g = compact(torch.tensor([-1.0, 0.0, 2.0]))
    assert torch.isneginf(g[:2]).all() and g[2] == pytest.approx(2 * math.log(2.0))


@pytest.mark.parametrize(
    "params, error, match",
    [({"degree": 0}, ValueError, "degree"), ({"threshold": "a"}, TypeError, "threshold"),
     ({"threshold": math.inf}, TypeError, "threshold"), ({"width": 1}, ValueError, "unknown parameter")],
)
def test_compact_rejects_bad_parameters(params, error, match):
    with pytest.raises(error, match=match):
        get_kernel("compact", **params)


def test_compact_weights_are_a_truncated_power_of_the_scores(qkv):
    q, k, v = qkv(**QKV)
    w = _weights()
    out = kernel_attention(q, k, v, "compact", weights=w, backend="naive")
    kappa = torch.relu(_scores(q, k)) * w[:, None, None, :]
    expected = (kappa / kappa.sum(-1, keepdim=True)) @ v
    live = kappa.sum(-1) > 0
    assert live.any()
    torch.testing.assert_close(out[live], expected[live])


def test_a_query_with_every_key_outside_the_support_attends_uniformly_to_the_measure(qkv):
    q, k, v = qkv(**QKV)
    w = _weights()
    for backend in ("chunked", "naive"):
        out = kernel_attention(q, k, v, get_kernel("compact", threshold=1e3), weights=w, backend=backend)
        mean = (w[:, None, :, None] * v).sum(2, keepdim=True) / w.sum(1)[:, None, None, None]
        torch.testing.assert_close(out, mean.expand_as(out))


def _sparsemax_by_bisection(scores, a):
    """Threshold tau with sum_j a_j (s_j - tau)_+ = 1, by bisection (float64)."""
    low, high = scores.min() - 2.0 / a.sum(), scores.max()
    for _ in range(200):
        mid = (low + high) / 2
        if (a * np.maximum(scores - mid, 0)).sum() > 1:
            low = mid
        else:
            high = mid
    return a * np.maximum(scores - low, 0)


def test_sparsemax_weights_solve_the_measure_threshold_equation(qkv):
    q, k, v = qkv(**QKV)
    w = _weights()
    scores = _scores(q, k).numpy()
    a = (w / w.sum(1, keepdim=True)).numpy()
    out = kernel_attention(q, k, v, "sparsemax", weights=w, backend="naive").numpy()
    for b in range(2):
        for h in range(2):
            probs = np.stack([_sparsemax_by_bisection(scores[b, h, i], a[b]) for i in range(scores.shape[2])])
            np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-9)
            assert (probs == 0).any()  # sparse: some keys get no weight at all
            np.testing.assert_allclose(out[b, h], probs @ v[b, h].numpy(), atol=1e-8)


def test_sparsemax_of_a_measure_counts_a_duplicated_point_like_a_double_weight(qkv):
    q, k, v = qkv(**QKV)
    w = torch.ones(2, 11, dtype=torch.float64)
    w[:, 0] = 2.0
    weighted = kernel_attention(q, k, v, "sparsemax", weights=w, backend="chunked")
    duplicated = kernel_attention(
        q, torch.cat([k[:, :, :1], k], dim=2), torch.cat([v[:, :, :1], v], dim=2), "sparsemax", backend="chunked"
    )
    torch.testing.assert_close(weighted, duplicated)


@pytest.mark.parametrize("name, params", KERNELS)
@pytest.mark.parametrize("with_weights", [False, True])
def test_chunked_matches_the_naive_reference_with_gradients(name, params, with_weights, qkv):
    kernel = get_kernel(name, **params)
    w = _weights() if with_weights else None
    results = []
    for backend in ("chunked", "naive"):
        q, k, v = qkv(**QKV, requires_grad=True)
        out = kernel_attention(q, k, v, kernel, weights=w, backend=backend, chunk_size=4)
        grads = torch.autograd.grad((out * torch.linspace(-1, 1, 3, dtype=out.dtype)).sum(), (q, k, v))
        results.append((out.detach(), grads))
    (out_c, grads_c), (out_n, grads_n) = results
    torch.testing.assert_close(out_c, out_n)
    for gc, gn in zip(grads_c, grads_n):
        assert torch.isfinite(gc).all()
        torch.testing.assert_close(gc, gn)


@pytest.mark.slow
@pytest.mark.parametrize("name, params", KERNELS)
def test_chunked_backward_passes_gradcheck(name, params, qkv):
    kernel = get_kernel(name, **params)
    q, k, v = qkv((2, 2, 5, 4), n_keys=6, d_value=3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: kernel_attention(q, k, v, kernel, backend="chunked", chunk_size=2), (q, k, v)
    )


@pytest.mark.parametrize("name", SPARSE_KERNEL_NAMES)
def test_auto_resolves_to_chunked_and_other_backends_refuse_clearly(name):
    kernel = get_kernel(name)
    cpu = torch.empty(0)
    assert resolve_backend("auto", kernel, cpu) == "chunked"
    assert resolve_backend("auto", kernel, torch.empty(0, device="meta")) == "chunked"  # any device
    for backend in ("sdpa", "flex", "fused"):
        if backend in kernel.backends:  # flex runs the fixed-threshold kernel (compact), not sparsemax
            assert resolve_backend(backend, kernel, cpu) == backend
            continue
        with pytest.raises(ValueError, match=f"runs on backend {' or '.join(map(repr, kernel.backends))} only"):
            resolve_backend(backend, kernel, cpu)
    cuda = SimpleNamespace(device=torch.device("cuda"), dtype=torch.float32)  # only its device is read
    assert resolve_backend("auto", kernel, cuda) == ("flex" if name == "compact" else "chunked")
    with pytest.raises(ValueError, match="attention_backend='fused' cannot run here"):
        MeasureTransformerRegressor(kernel=name, attention_backend="fused").fit(np.ones((3, 4, 2)), np.ones((3, 4, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("name", SPARSE_KERNEL_NAMES)
def test_bounded_support_kernels_train_on_cpu(name, tiny_network):
    X, y = make_matrix_inverse(n_samples=8, n_points=16, tail="pareto", tail_index=0.7, random_state=0)
    model = MeasureTransformerRegressor(
        kernel=name, transform="symlog", **tiny_network, batch_size=4, max_epochs=3, lr=1e-2, random_state=0,
    )
    before = MeasureTransformerRegressor(**{**model.get_params(), "max_epochs": 1}).fit(X, y)
    model.fit(X, y)
    assert model.net_.module_.resolve_attention_backends() == ["chunked"]
    losses = model.history_[:, "train_loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    first = before.net_.module_.blocks[0].attention.in_proj.weight
    assert not torch.equal(first, model.net_.module_.blocks[0].attention.in_proj.weight)
    assert np.all(np.isfinite(model.predict(X)))
    ess = model.attention_ess(X)
    assert ess.shape == (8, 2) and np.all((ess > 0) & (ess <= 1))


def test_diagnose_lists_bounded_support_kernels_with_their_divergence_rule_but_recommends_full_support():
    rng = np.random.default_rng(0)
    X = rng.standard_cauchy(size=(8, 64, 2))
    diagnosis = diagnose_measures(X, kernels=["softmax", "log", "compact", "sparsemax"])
    rows = {k["kernel"]: k for k in diagnosis.kernels}
    assert rows["compact"]["support"] == rows["sparsemax"]["support"] == "bounded"
    assert rows["compact"]["min_tail_index"] == rows["sparsemax"]["min_tail_index"] == 2.0
    assert rows["sparsemax"]["integrals"] in ("diverge", "borderline")
    assert diagnosis.kernel in ("softmax", "log")
    text = format_diagnosis(diagnosis)
    assert "sparsemax (bounded support)" in text and "compact (bounded support)" in text
    only_sparse = diagnose_measures(rng.normal(size=(8, 64, 2)), kernels=["compact", "sparsemax"])
    assert only_sparse.kernel in SPARSE_KERNEL_NAMES


def test_sparsemax_keeps_its_weights_at_huge_scores_in_float32(qkv):
    scores = torch.tensor([[1e10, 1e10 - 4096.0, -3e10, 5.0]], dtype=torch.float32)
    weights = get_kernel("sparsemax").normalizer(scores, None)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1))
    assert weights[0, 0] > 0 and weights[0, 2] == 0
    q, k, v = (t.float().requires_grad_(True) for t in qkv(**QKV))
    out = kernel_attention(q * 1e5, k * 1e5, v, "sparsemax", backend="chunked")
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert all(bool(torch.isfinite(g).all()) for g in grads)
