"""The energy distance's backends: one record each, and "auto" as an ordered preference."""

import pytest
import torch

from sklearn_measattn._distances import _energy


def _clouds(dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 7, 3, generator=generator, dtype=dtype)
    y = torch.randn(2, 5, 3, generator=generator, dtype=dtype)
    return x, torch.full((2, 7), 1 / 7, dtype=dtype), y, torch.full((2, 5), 1 / 5, dtype=dtype)


def test_every_name_but_auto_is_a_record_and_auto_prefers_in_order():
    assert _energy.BACKENDS == ("auto", *_energy._RECORDS)
    assert set(_energy.AUTO_PREFERENCE) <= set(_energy._RECORDS)
    x = _clouds()[0]
    expected = "fused" if _energy._RECORDS["fused"].unavailable() is None else "chunked"
    assert _energy.resolve_backend("auto", x) == expected
    # a dtype the compiled kernels do not take falls through to the next preference
    assert _energy.resolve_backend("auto", x.to(torch.bfloat16)) == "chunked"


def test_an_explicit_backend_that_cannot_run_the_tensors_says_why():
    x = _clouds()[0].to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"backend='fused' runs float32 or float64 tensors on the CPU, got torch.bfloat16"):
        _energy.resolve_backend("fused", x)
    with pytest.raises(ValueError, match="backend must be one of"):
        _energy.resolve_backend("dense", x)


@pytest.mark.parametrize("backend", ["chunked", "reference"])
def test_each_backend_agrees_with_the_reference(backend):
    x, a, y, b = _clouds()
    value = _energy.energy_distance(x, a, y, b, 1.0, backend=backend)
    torch.testing.assert_close(value, _energy.reference_energy_distance(x, a, y, b, 1.0))
