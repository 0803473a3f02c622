import math
import pickle

import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn.kernels import KERNEL_NAMES, get_kernel
from sklearn_measattn.transformer import KernelMultiheadAttention, MeasureTransformer


def small_model(**kwargs):
    torch.manual_seed(0)
    params = dict(d_model=16, n_heads=2, n_layers=2, dim_feedforward=32)
    params.update(kwargs)
    return MeasureTransformer(3, 2, **params).double()


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("norm_first", [False, True])
def test_permutation_equivariant(kernel, norm_first):
    model = small_model(kernel=kernel, norm_first=norm_first)
    X = torch.randn(2, 30, 3, dtype=torch.float64)
    permutation = torch.randperm(30)
    torch.testing.assert_close(model(X)[:, permutation], model(X[:, permutation]))


@pytest.mark.slow
def test_any_number_of_points_and_shapes():
    model = small_model()
    for n_points in (1, 7, 64):
        assert model(torch.randn(3, n_points, 3, dtype=torch.float64)).shape == (3, n_points, 2)


def test_post_norm_is_default_and_outputs_are_normalised():
    model = small_model(n_layers=1)
    captured = {}
    model.blocks[0].norm_feedforward.register_forward_hook(lambda m, i, o: captured.setdefault("h", o))
    model(torch.randn(2, 10, 3, dtype=torch.float64))
    hidden = captured["h"]
    # Post-norm: the residual stream leaving a block is LayerNorm-ed.
    torch.testing.assert_close(hidden.mean(-1), torch.zeros_like(hidden.mean(-1)), atol=1e-10, rtol=0)
    assert isinstance(small_model(norm_first=True).final_norm, torch.nn.LayerNorm)
    assert isinstance(model.final_norm, torch.nn.Identity)


@pytest.mark.slow
def test_zero_weights_equal_deleting_points():
    model = small_model(kernel="poly")
    X = torch.randn(2, 12, 3, dtype=torch.float64)
    weights = torch.ones(2, 12, dtype=torch.float64)
    weights[:, 8:] = 0
    torch.testing.assert_close(model(X, weights)[:, :8], model(X[:, :8]))


@pytest.mark.slow
def test_backends_agree_and_train():
    X = torch.randn(2, 20, 3, dtype=torch.float64)
    outputs = []
    for backend in ("naive", "chunked"):
        model = small_model(kernel="log", attention_backend=backend)
        out = model(X)
        out.square().sum().backward()
        outputs.append((out, model.embedding.weight.grad))
    torch.testing.assert_close(outputs[0][0], outputs[1][0])
    torch.testing.assert_close(outputs[0][1], outputs[1][1])


def test_user_kernel_and_kernel_params():
    model = small_model(kernel="poly", kernel_params={"degree": 3})
    assert model.blocks[0].attention.kernel.params == {"degree": 3.0}
    attention = KernelMultiheadAttention(8, 2, kernel=torch.tanh)
    assert attention(torch.randn(1, 5, 8)).shape == (1, 5, 8)


def test_pickles():
    model = small_model(kernel="poly", kernel_params={"degree": 2})
    X = torch.randn(1, 5, 3, dtype=torch.float64)
    torch.testing.assert_close(pickle.loads(pickle.dumps(model))(X), model(X))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_heads": 3}, ValueError, "must divide d_model"),
        ({"d_model": 0}, ValueError, "d_model"),
        ({"n_layers": 1.5}, TypeError, "n_layers"),
        ({"dropout": 1.0}, ValueError, "dropout"),
        ({"activation": "swish"}, ValueError, "activation"),
        ({"kernel": "cosine"}, ValueError, "Unknown attention kernel"),
        ({"attention_backend": "cuda"}, ValueError, "backend"),
    ],
)
def test_invalid_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        small_model(**kwargs)


def test_invalid_inputs():
    model = small_model()
    with pytest.raises(ValueError, match="3-D"):
        model(torch.randn(10, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="weights must have shape"):
        model(torch.randn(1, 10, 3, dtype=torch.float64), torch.ones(1, 9, dtype=torch.float64))


def test_backend_is_resolved_once_per_device_and_dtype(monkeypatch):
    """The forward pass decides its attention backend at the first call for a
    device and dtype, not at every call (deciding may build the fused kernels)."""
    from sklearn_measattn import transformer

    calls = []
    original = transformer.resolve_backend

    def counting(backend, kernel, tensor):
        calls.append((backend, tensor.dtype))
        return original(backend, kernel, tensor)

    monkeypatch.setattr(transformer, "resolve_backend", counting)
    model = MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=2, kernel="log", attention_backend="chunked")
    X = torch.randn(3, 20, 2)
    for _ in range(3):
        model(X).sum().backward()
    assert len(calls) == 2  # one per block
    model.double()(X.double())
    assert len(calls) == 4 and calls[-1] == ("chunked", torch.float64)
    assert model.resolve_attention_backends(device="cpu") == ["chunked", "chunked"]
    assert len(calls) == 4


def test_resolved_backend_follows_a_changed_kernel_and_is_not_pickled():
    model = MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=1, kernel="softmax")
    assert model.resolve_attention_backends() == ["sdpa"]
    attention = model.blocks[0].attention
    attention.kernel = get_kernel("log")
    assert model.resolve_attention_backends() != ["sdpa"]
    restored = pickle.loads(pickle.dumps(model))
    assert restored.blocks[0].attention._resolved_backends == {}
    torch.testing.assert_close(restored(torch.ones(1, 4, 2)), model(torch.ones(1, 4, 2)))


def test_seeded_module_is_reproducible_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a = MeasureTransformer(2, 2, d_model=8, n_heads=2, random_state=5)
    b = MeasureTransformer(2, 2, d_model=8, n_heads=2, random_state=torch.Generator().manual_seed(5))
    assert torch.equal(state, torch.get_rng_state())
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name
        assert p.device.type == "cpu" and torch.isfinite(p).all()
    c = MeasureTransformer(2, 2, d_model=8, n_heads=2, random_state=6)
    assert not torch.equal(a.embedding.weight, c.embedding.weight)
    # default initialisation statistics: nn.Linear's bound 1/sqrt(fan_in) on the biases
    assert float(a.embedding.bias.detach().abs().max()) <= 1 / math.sqrt(2)
    with pytest.raises(TypeError, match="random_state"):
        MeasureTransformer(2, 2, random_state="seed")


@pytest.mark.parametrize(
    "build, name, reason",
    [
        (lambda: MeasureTransformer(0, 2), "n_features_in", r"\[1, inf\)"),
        (lambda: MeasureTransformer(2, 2.0), "n_features_out", r"\[1, inf\)"),
        (lambda: MeasureTransformer(2, 2, d_model=True), "d_model", r"\[1, inf\)"),
        (lambda: MeasureTransformer(2, 2, n_layers=-1), "n_layers", r"\[0, inf\)"),
        (lambda: MeasureTransformer(2, 2, dim_feedforward=0), "dim_feedforward", r"\[1, inf\)"),
        (lambda: MeasureTransformer(2, 2, dropout=1.0), "dropout", r"\[0.0, 1.0\)"),
        (lambda: MeasureTransformer(2, 2, activation="swish"), "activation", "'gelu', 'relu', 'tanh'"),
        (lambda: MeasureTransformer(2, 2, attention_backend="cuda"), "attention_backend", "'auto', 'sdpa'"),
        (lambda: MeasureTransformer(2, 2, random_state=-1), "random_state", "a non-negative int seed"),
        (lambda: KernelMultiheadAttention(0, 1), "d_model", r"\[1, inf\)"),
        (lambda: KernelMultiheadAttention(8, 2.0), "n_heads", r"\[1, inf\)"),
        (lambda: KernelMultiheadAttention(8, 2, backend="cuda"), "backend", "'auto', 'sdpa'"),
    ],
)
def test_bad_arguments_raise_invalid_parameter_error(build, name, reason):
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of \w+ must be .*{reason}"):
        build()


def test_an_empty_stack_of_blocks_is_allowed():
    model = MeasureTransformer(2, 3, d_model=8, n_heads=2, n_layers=0, random_state=0)
    assert len(model.blocks) == 0 and model(torch.randn(1, 5, 2)).shape == (1, 5, 3)
