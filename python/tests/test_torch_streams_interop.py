"""Torch's constructors on streamrt tensors (after streamrt.torch.install()): torch.as_tensor and
torch.asarray share the memory, torch.tensor copies it, each after waiting for the tensor's
pending writer; torch work on the shared memory is then tracked with the streamrt tensor."""

import pytest

import streamrt
from torch_streams_util import Gate, installed, srt, torch  # noqa: F401  (fixture)


def held_streamrt_write(value):
    s = streamrt.Stream()
    x = streamrt.zeros(2, 3)
    x.wait()
    gate = Gate().hold(s)
    with streamrt.cpu.StreamContext(s):
        x.fill_(value)
    gate.open_later()
    return x


@pytest.mark.parametrize(
    "make", [lambda x: torch.as_tensor(x), lambda x: torch.asarray(x)], ids=["as_tensor", "asarray"]
)
def test_as_tensor_and_asarray_share_after_waiting(installed, make):
    x = held_streamrt_write(4.0)
    t = make(x)
    assert t.shape == (2, 3) and t.dtype == torch.float32
    assert torch._C._TensorBase.data_ptr(t) == x.data_ptr()  # shared
    assert t.tolist() == [[4.0] * 3] * 2
    t.add_(1)  # torch writes, streamrt sees it
    assert x.numpy().tolist() == [[5.0] * 3] * 2


def test_tensor_copies_after_waiting(installed):
    x = held_streamrt_write(2.0)
    t = torch.tensor(x, dtype=torch.float64)
    assert t.dtype == torch.float64 and t.tolist() == [[2.0] * 3] * 2
    t.add_(1)
    assert x.numpy().tolist() == [[2.0] * 3] * 2  # a copy
    r = torch.tensor(x, requires_grad=True)
    assert r.requires_grad and r.dtype == torch.float32


def test_as_tensor_with_a_dtype_converts(installed):
    x = streamrt.arange(6, dtype=streamrt.int64)
    t = torch.as_tensor(x, dtype=torch.float32)
    assert t.dtype == torch.float32 and t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_other_arguments_still_go_to_torch(installed):
    assert torch.as_tensor([1, 2]).tolist() == [1, 2]
    assert torch.tensor([[1.0]]).shape == (1, 1)
    assert torch.asarray([3]).tolist() == [3]
