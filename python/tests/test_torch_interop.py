"""Interop with PyTorch through DLPack, zero-copy both ways. Skipped (with the reason printed by
pytest -rs) when torch is not importable."""

import numpy as np
import pytest

import streamrt

torch = pytest.importorskip(
    "torch", reason="torch is not importable here, so torch <-> streamrt DLPack interop is untested"
)


def test_torch_tensor_to_streamrt_shares_memory():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    s = streamrt.from_dlpack(t)
    assert s.data_ptr() == t.data_ptr()
    assert s.shape == (3, 4) and s.dtype == streamrt.float32
    s.fill_(2.0)
    s.wait()
    assert bool((t == 2.0).all())


def test_streamrt_tensor_to_torch_shares_memory():
    s = streamrt.arange(5, dtype="int64")
    t = torch.from_dlpack(s)
    assert t.data_ptr() == s.data_ptr()
    assert t.tolist() == [0, 1, 2, 3, 4]


def test_ops_accept_torch_tensors():
    a = torch.randn(8, 8, dtype=torch.float64)
    out = streamrt.matmul(a, a)
    np.testing.assert_allclose(out.numpy(), (a @ a).numpy(), rtol=1e-10)
    assert streamrt.asarray(a).data_ptr() == a.data_ptr()
