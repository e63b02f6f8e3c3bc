"""Interop with PyTorch through DLPack, zero-copy both ways. Skipped (with the reason printed by
pytest -rs) when torch is not importable."""

import threading
import time

import numpy as np
import pytest

import streamrt
from helpers import RENDEZVOUS_S, held_stream

torch = pytest.importorskip(
    "torch", reason="torch is not importable here (Debian: apt-get install python3-torch), so torch <-> "
    "streamrt interop is untested"
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


# ---- zero-copy both ways: addresses, and writes seen on both sides ----------------------------

DTYPES = [
    (torch.float32, streamrt.float32),
    (torch.float64, streamrt.float64),
    (torch.int32, streamrt.int32),
    (torch.int64, streamrt.int64),
]


@pytest.mark.parametrize("torch_dtype, dtype", DTYPES)
def test_from_dlpack_of_a_torch_tensor_is_the_same_memory(torch_dtype, dtype):
    t = torch.arange(6, dtype=torch_dtype).reshape(2, 3)
    s = streamrt.from_dlpack(t)
    assert s.dtype == dtype and s.shape == (2, 3)
    assert s.data_ptr() == t.data_ptr()
    s.fill_(7)  # streamrt writes (on a stream) ...
    s.wait()
    assert t.tolist() == [[7, 7, 7]] * 2  # ... torch sees it
    t[0, 1] = 3  # torch writes ...
    assert s.numpy()[0, 1] == 3  # ... streamrt sees it


@pytest.mark.parametrize("torch_dtype, dtype", DTYPES)
def test_torch_from_dlpack_of_a_streamrt_tensor_is_the_same_memory(torch_dtype, dtype):
    s = streamrt.zeros(2, 3, dtype=dtype)
    t = torch.from_dlpack(s)  # waits for the fill first (__dlpack__ waits for writers)
    assert t.dtype == torch_dtype and tuple(t.shape) == (2, 3)
    assert t.data_ptr() == s.data_ptr()
    t[1, 2] = 5
    assert s.numpy()[1, 2] == 5
    s.fill_(2)
    s.wait()
    assert t.tolist() == [[2, 2, 2]] * 2


def test_asarray_and_from_numpy_of_a_torch_tensors_numpy_view_share_memory():
    t = torch.arange(8, dtype=torch.float64)
    view = t.numpy()  # torch's zero-copy numpy view
    for s in (streamrt.asarray(view), streamrt.from_numpy(view), streamrt.asarray(t)):
        assert s.data_ptr() == t.data_ptr()
    s = streamrt.from_numpy(view)
    s.fill_(1.5)
    s.wait()
    assert t.tolist() == [1.5] * 8
    t.add_(1)
    assert s.numpy().tolist() == [2.5] * 8


def test_ops_on_torch_inputs_write_into_memory_torch_reads():
    a = torch.full((4, 4), 2.0)
    out = streamrt.add(a, a)
    as_torch = torch.from_dlpack(out)
    assert torch.equal(as_torch, torch.full((4, 4), 4.0))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(12.0).reshape(3, 4).t(),  # transposed
        lambda: torch.arange(12.0).reshape(3, 4)[:, ::2],  # strided columns
        lambda: torch.arange(12.0)[::3],  # strided 1-D
        lambda: torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1)[1:, :, ::2],  # offset too
        lambda: torch.arange(4.0).reshape(4, 1).expand(4, 3),  # broadcast: stride 0
    ],
    ids=["transposed", "every-other-column", "strided-1d", "permuted-sliced", "expanded"],
)
def test_non_contiguous_torch_views_are_shared_with_their_strides(make):
    t = make()
    assert not t.is_contiguous()
    for s in (streamrt.from_dlpack(t), streamrt.asarray(t)):
        assert s.data_ptr() == t.data_ptr()  # the same memory, no copy
        assert s.shape == tuple(t.shape) and s.stride() == t.stride()
        assert s.numpy().tolist() == t.tolist()
        np.testing.assert_array_equal((s * 2).numpy(), (t * 2).numpy())
    if 0 not in t.stride():
        # Writes through the streamrt view land in torch's tensor, element for element.
        s = streamrt.from_dlpack(t)
        s.copy_(streamrt.arange(t.numel()).reshape(*t.shape).to(streamrt.float32))
        s.wait()
        assert t.tolist() == torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape).tolist()
    else:
        with pytest.raises(ValueError, match="expanded"):
            streamrt.from_dlpack(t).fill_(1.0)


def test_overlapping_torch_strides_are_refused_clearly_or_copied():
    base = torch.arange(10.0)
    windows = base.as_strided((4, 3), (2, 1))  # rows overlap: [0,1,2], [2,3,4], ...
    with pytest.raises(ValueError, match="share memory.*asarray"):
        streamrt.from_dlpack(windows)
    copied = streamrt.asarray(windows)
    assert copied.data_ptr() != base.data_ptr()
    assert copied.numpy().tolist() == windows.tolist()


def test_a_torch_view_with_an_offset_shares_the_offset_memory():
    base = torch.arange(12.0)
    t = base[4:10]  # contiguous, starts 4 elements in
    s = streamrt.from_dlpack(t)
    assert s.data_ptr() == t.data_ptr() == base.data_ptr() + 4 * 4
    s.fill_(-1.0)
    s.wait()
    assert base[3].item() == 3.0 and base[4].item() == -1.0 and base[9].item() == -1.0
    assert base[10].item() == 10.0


# (torch cannot export bool through DLPack at all: its own __dlpack__ raises.)
@pytest.mark.parametrize("torch_dtype", [torch.float16, torch.uint8, torch.int8, torch.complex64])
def test_unsupported_torch_dtypes_are_refused_naming_the_supported_ones(torch_dtype):
    t = torch.zeros(3, dtype=torch_dtype)
    with pytest.raises(TypeError, match="not supported.*float32"):
        streamrt.from_dlpack(t)


def test_a_tensor_on_another_device_is_a_streamrt_error():
    class FakeCuda:  # what a torch cuda tensor reports (DLPack device type 2)
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):
            raise AssertionError("must not be exported")

    with pytest.raises(streamrt.Error, match="cuda.*not supported"):
        streamrt.from_dlpack(FakeCuda())
    with pytest.raises(streamrt.Error, match="not supported"):
        streamrt.zeros(2, device="cuda")


# ---- torch ops in launched work run concurrently on two streams -------------------------------


def test_torch_ops_in_launched_work_overlap_on_two_streams(workers):
    # Each callable runs torch matmuls and records each one's (start, end). Both keep going until
    # an interval of one stream overlaps an interval of the other. The times are taken with the
    # GIL held, so if torch kept the GIL inside its kernels (or the streams ran one after the
    # other) no two intervals could overlap and the test would fail at the rendezvous time-out.
    workers(2)
    # One OpenBLAS thread per call, as install() sets it: OpenBLAS's own pool would make the two
    # streams' products queue for it (docs/python.md, "Cores").
    blas = streamrt._blas_threads()
    if blas is not None:
        streamrt._set_blas_threads(1)
    try:
        run_products_on_two_streams()
    finally:
        if blas is not None:
            streamrt._set_blas_threads(blas)


def run_products_on_two_streams():
    a = torch.randn(400, 400)
    intervals = {1: [], 2: []}
    lock = threading.Lock()
    deadline = time.monotonic() + RENDEZVOUS_S

    def overlapped():
        return any(
            s1 < e2 and s2 < e1 for s1, e1 in intervals[1] for s2, e2 in intervals[2]
        )

    def run(key):
        while time.monotonic() < deadline:
            start = time.monotonic()
            torch.matmul(a, a)
            end = time.monotonic()
            with lock:
                intervals[key].append((start, end))
                if overlapped():
                    return
        raise AssertionError(f"no overlap of torch ops on two streams: {intervals}")

    s1, s2 = streamrt.Stream(), streamrt.Stream()
    s1.launch(run, 1)
    s2.launch(run, 2)
    s1.synchronize()
    s2.synchronize()
    assert overlapped()


@pytest.mark.parametrize("make", ["tensor", "as_tensor"])
def test_torch_constructors_of_a_streamrt_tensor_without_install(make):
    # torch 2.x takes it (through the array interface: after its pending writer, held here until
    # a little later); torch 1.13 walks it as a sequence and fails, with a message saying what
    # works instead.
    x = streamrt.zeros([4])
    s, gate = held_stream()
    with streamrt.StreamContext(s):
        x.fill_(2.0)
    threading.Timer(0.2, gate.set).start()
    if torch.__version__.startswith("1."):
        with pytest.raises(TypeError, match=r"torch\.from_dlpack\(t\).*streamrt\.torch\.install"):
            getattr(torch, make)(x)
        s.synchronize()
    else:
        assert getattr(torch, make)(x).tolist() == [2.0] * 4
