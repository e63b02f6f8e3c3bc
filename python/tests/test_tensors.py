"""Tensors and ops from Python: creation like torch, results against numpy, zero-copy exchange
with numpy (arrays, buffer protocol, DLPack), host reads that wait for pending writes, argument
errors, and dependency tracking across streams."""

import array
import gc
import threading
import time
import weakref

import numpy as np
import pytest

import streamrt
from helpers import held_stream, RENDEZVOUS_S


def address(a):
    return a.__array_interface__["data"][0]


# --- creation ------------------------------------------------------------------------------


def test_sizes_as_in_torch():
    assert streamrt.randn(2, 3).shape == (2, 3)
    assert streamrt.randn((2, 3)).shape == (2, 3)
    assert streamrt.zeros([4]).shape == (4,)
    assert streamrt.ones(np.int64(2), 2).shape == (2, 2)
    assert streamrt.zeros(()).shape == ()
    t = streamrt.empty(2, 3, 4)
    assert (t.ndim, t.numel(), t.size(), t.size(-1), len(t)) == (3, 24, (2, 3, 4), 4, 2)
    assert t.nbytes == 96 and t.itemsize == 4


def test_dtypes_accept_streamrt_and_numpy_spellings():
    for spelling in (streamrt.float64, np.float64, "float64", np.dtype("f8"), float):
        assert streamrt.zeros(2, dtype=spelling).dtype == streamrt.float64
    assert streamrt.ones(2, dtype=np.int32).dtype == streamrt.int32
    assert streamrt.zeros(2).dtype == streamrt.float32  # torch's default
    assert streamrt.arange(3).dtype == streamrt.int64
    assert repr(streamrt.float32) == "streamrt.float32"
    assert streamrt.float32 == np.float32 and streamrt.float32 != np.float64
    assert streamrt.int64.itemsize == 8 and streamrt.float64.is_floating_point
    assert streamrt.float32.numpy == np.dtype("float32")


def test_creation_values():
    np.testing.assert_array_equal(streamrt.zeros(2, 3).numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(streamrt.ones(3, dtype="int32").numpy(), np.ones(3, np.int32))
    np.testing.assert_array_equal(streamrt.full((2, 2), 7.5).numpy(), np.full((2, 2), 7.5))
    np.testing.assert_array_equal(streamrt.arange(5).numpy(), np.arange(5))
    u = streamrt.rand(10000, seed=3).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0 and 0.45 < u.mean() < 0.55
    n = streamrt.randn(100000, seed=4, dtype="float64").numpy()
    assert abs(n.mean()) < 0.02 and 0.98 < n.std() < 1.02


def test_seeded_numbers_do_not_depend_on_the_stream():
    a = streamrt.randn(64, 64, seed=11)
    with streamrt.Stream():
        b = streamrt.randn(64, 64, seed=11)
    assert streamrt.equal(a, b)
    assert not streamrt.equal(a, streamrt.randn(64, 64, seed=12))


def test_generators_and_manual_seed():
    g = streamrt.Generator(5)
    first = streamrt.randn(8, generator=g)
    assert g.offset >= 8 and g.seed == 5
    second = streamrt.randn(8, generator=g)
    assert not streamrt.equal(first, second)  # the offset moved on
    g.manual_seed(5)
    assert streamrt.equal(streamrt.randn(8, generator=g), first)
    streamrt.manual_seed(9)
    x = streamrt.rand(8)
    streamrt.manual_seed(9)
    assert streamrt.equal(streamrt.rand(8), x)
    with pytest.raises(ValueError, match="not both"):
        streamrt.randn(2, seed=1, generator=g)


def test_bad_creation_arguments():
    with pytest.raises(ValueError, match="size=-1 is out of range; it must be from 0 to"):
        streamrt.zeros(-1)
    with pytest.raises(TypeError, match="sizes as integers"):
        streamrt.zeros(2.5)
    with pytest.raises(TypeError, match="sizes must be integers, got str"):
        streamrt.zeros((2, "3"))
    with pytest.raises(TypeError, match="dtype float16 is not supported"):
        streamrt.zeros(2, dtype="float16")
    with pytest.raises(TypeError, match="expected a dtype"):
        streamrt.zeros(2, dtype="bogus")
    with pytest.raises(ValueError, match="not a floating type"):
        streamrt.randn(2, dtype=streamrt.int64)
    with pytest.raises(ValueError, match="invalid device string"):
        streamrt.zeros(2, device="gpu")


# --- ops against numpy -------------------------------------------------------------------------


def test_ops_match_numpy():
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((37, 53)).astype(np.float32)
    b_np = rng.standard_normal((53, 29)).astype(np.float32)
    c_np = rng.standard_normal((37, 53)).astype(np.float32)
    a, b, c = (streamrt.from_numpy(x) for x in (a_np, b_np, c_np))
    close = dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose((a @ b).numpy(), a_np @ b_np, **close)
    np.testing.assert_allclose(streamrt.matmul(a, b).numpy(), a_np @ b_np, **close)
    np.testing.assert_allclose((a + c).numpy(), a_np + c_np, **close)
    np.testing.assert_allclose((a - c).numpy(), a_np - c_np, **close)
    np.testing.assert_allclose((a * c).numpy(), a_np * c_np, **close)
    np.testing.assert_allclose((a / (c * c + 1)).numpy(), a_np / (c_np * c_np + 1), **close)
    np.testing.assert_allclose((2 * a + 1).numpy(), 2 * a_np + 1, **close)
    np.testing.assert_allclose((1 - a).numpy(), 1 - a_np, **close)
    np.testing.assert_allclose((3 / (a * a + 1)).numpy(), 3 / (a_np * a_np + 1), **close)
    np.testing.assert_allclose((-a).numpy(), -a_np)
    np.testing.assert_allclose(streamrt.relu(a).numpy(), np.maximum(a_np, 0))
    assert streamrt.sum(a).item() == pytest.approx(float(a_np.astype(np.float64).sum()), rel=1e-5)
    assert float(streamrt.mean(a)) == pytest.approx(float(a_np.astype(np.float64).mean()), rel=1e-5)
    assert int(streamrt.sum(streamrt.arange(10))) == 45
    assert streamrt.allclose(a, streamrt.from_numpy(a_np.copy()))
    assert not streamrt.allclose(a, a + 1)
    assert streamrt.allclose(a, a + 1e-7, rtol=0, atol=1e-6)
    assert streamrt.equal(a, a.clone())
    assert not streamrt.equal(a, b)  # different shapes: False, as torch


def test_ops_accept_numpy_arrays_and_buffer_objects():
    a_np = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = streamrt.from_numpy(a_np.copy())
    # numpy on the left hands the operation to the tensor (not to numpy's own __array__ path).
    result = a_np + t
    assert isinstance(result, streamrt.Tensor)
    np.testing.assert_array_equal(result.numpy(), 2 * a_np)
    np.testing.assert_array_equal(streamrt.add(a_np, a_np).numpy(), 2 * a_np)
    np.testing.assert_allclose(streamrt.matmul(a_np, a_np.T).numpy(), a_np @ a_np.T)
    np.testing.assert_array_equal((t @ a_np.T.copy()).numpy(), a_np @ a_np.T)
    buf = array.array("d", [1.0, -2.0, 3.0])  # the buffer protocol
    np.testing.assert_array_equal(streamrt.relu(buf).numpy(), [1.0, 0.0, 3.0])
    np.testing.assert_array_equal(streamrt.relu(memoryview(buf)).numpy(), [1.0, 0.0, 3.0])
    readonly = np.ones(3)
    readonly.setflags(write=False)
    assert streamrt.sum(readonly).item() == 3.0  # read-only inputs are fine for ops
    assert streamrt.allclose([1.0, 2.0], streamrt.tensor([1.0, 2.0]))


def test_op_argument_errors_name_both_shapes():
    with pytest.raises(ValueError, match=r"shapes \[2, 3\] and \[2, 3\] cannot be multiplied"):
        streamrt.zeros(2, 3) @ streamrt.zeros(2, 3)
    with pytest.raises(ValueError, match=r"\[2, 3\] and \[3, 2\]"):
        streamrt.zeros(2, 3) + streamrt.zeros(3, 2)
    # Mixed dtypes promote (torch's rule, docs/ops.md) instead of failing.
    assert (streamrt.zeros(2) + streamrt.zeros(2, dtype="float64")).dtype == streamrt.float64
    with pytest.raises(ValueError, match=r"allclose: shapes \[2\] and \[3\] cannot be broadcast"):
        streamrt.allclose(streamrt.zeros(2), streamrt.zeros(3))
    with pytest.raises(ValueError, match="floating dtype"):
        streamrt.mean(streamrt.zeros(2, dtype="int32"))
    with pytest.raises(ValueError, match="only a one-element tensor"):
        streamrt.zeros(2).item()
    with pytest.raises(TypeError, match="got str"):
        streamrt.matmul(streamrt.zeros(2, 2), "x")
    with pytest.raises(TypeError):
        streamrt.zeros(2) + "x"


# --- zero-copy ----------------------------------------------------------------------------------


def test_from_numpy_shares_memory_both_ways():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = streamrt.from_numpy(x)
    assert t.data_ptr() == address(x)
    view = t.numpy()
    assert address(view) == address(x)
    assert view.base is t  # the array keeps the tensor (and so the memory) alive
    t.fill_(3.0)  # a stream writes the shared memory
    np.testing.assert_array_equal(t.numpy(), np.full((3, 4), 3.0))
    assert (x == 3.0).all()
    x[0, 0] = -1.0  # and the host writes are seen by the next op
    assert streamrt.sum(t).item() == pytest.approx(3.0 * 11 - 1.0)


def test_buffer_protocol_and_array_interface_are_zero_copy():
    t = streamrt.arange(6, dtype="float64").reshape(2, 3)
    m = memoryview(t)
    assert (m.format, m.shape, m.strides, m.readonly) == ("d", (2, 3), (24, 8), False)
    a = np.asarray(t)
    assert address(a) == t.data_ptr()
    np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3))
    copied = np.array(t, dtype=np.float32)
    assert copied.dtype == np.float32 and address(copied) != t.data_ptr()


# bytes() tries __index__ before the buffer protocol: a one-element integer tensor gave that many
# zero bytes, a longer one a TypeError. Each sample is nonzero, so zeros cannot pass for it.
BYTES_DTYPES = ["float32", "float64", "int32", "int64", "bool"]
BYTES_SAMPLES = {
    "0-d": lambda d: streamrt.tensor(np.array(5).astype(d)),
    "one element": lambda d: streamrt.tensor(np.array([5]).astype(d)),
    "empty": lambda d: streamrt.tensor(np.zeros((0, 3)).astype(d)),
    "2-d": lambda d: streamrt.tensor(np.arange(1, 7).reshape(2, 3).astype(d)),
    "transposed": lambda d: streamrt.tensor(np.arange(1, 7).reshape(2, 3).astype(d)).T,
    "stepped": lambda d: streamrt.tensor(np.arange(1, 9).astype(d))[::3],
}


@pytest.mark.parametrize("dtype", BYTES_DTYPES)
@pytest.mark.parametrize("sample", list(BYTES_SAMPLES))
def test_bytes_are_the_elements_in_c_order_for_every_dtype_and_shape(dtype, sample):
    t = BYTES_SAMPLES[sample](dtype)
    assert bytes(t) == t.numpy().tobytes()
    assert bytes(t) == np.ascontiguousarray(t.numpy()).tobytes()


@pytest.mark.parametrize("dtype", BYTES_DTYPES)
def test_bytes_wait_for_the_pending_writer(dtype):
    s, gate = held_stream()
    with streamrt.StreamContext(s):
        one = streamrt.full((1,), 7, dtype=dtype)
        four = streamrt.full((4,), 7, dtype=dtype)
    assert not one.ready() and not four.ready()
    threading.Timer(0.05, gate.set).start()
    expected = np.full(4, 7).astype(dtype)
    assert bytes(one) == expected[:1].tobytes()
    assert bytes(four) == expected.tobytes()


def test_dlpack_exchange_with_numpy_is_zero_copy():
    t = streamrt.arange(5, dtype="int32")
    from_ours = np.from_dlpack(t)
    assert address(from_ours) == t.data_ptr()
    np.testing.assert_array_equal(from_ours, np.arange(5, dtype=np.int32))
    assert t.__dlpack_device__() == (1, 0)
    x = np.linspace(0, 1, 7)
    ours = streamrt.from_dlpack(x)
    assert ours.data_ptr() == address(x) and ours.dtype == streamrt.float64
    assert streamrt.from_dlpack(ours) is not None
    capsule = x.__dlpack__()
    streamrt.from_dlpack(capsule)
    with pytest.raises(ValueError, match="already consumed"):
        streamrt.from_dlpack(capsule)
    strided = np.arange(16.0).reshape(4, 4)[:, ::2]  # shared with its strides
    assert streamrt.from_dlpack(strided).data_ptr() == address(strided)
    with pytest.raises(TypeError, match="DLPack dtype"):
        streamrt.from_dlpack(np.zeros(3, dtype=np.float16))
    with pytest.raises(ValueError, match="stream must be None"):
        t.__dlpack__(stream=1)


def test_asarray_shares_when_it_can_and_copies_when_asked():
    x = np.ones((2, 2), dtype=np.float32)
    assert streamrt.asarray(x).data_ptr() == address(x)
    assert streamrt.asarray(x, copy=True).data_ptr() != address(x)
    converted = streamrt.asarray(x, dtype="float64")
    assert converted.dtype == streamrt.float64 and converted.data_ptr() != address(x)
    strided = np.ones((4, 4))[:, ::2]
    assert streamrt.asarray(strided).shape == (4, 2)
    assert streamrt.asarray(strided, copy=False).data_ptr() == address(strided)  # a view
    overlapping = np.lib.stride_tricks.as_strided(np.arange(6.0), (3, 3), (16, 8))
    assert streamrt.asarray(overlapping).data_ptr() != address(overlapping)  # copied
    np.testing.assert_array_equal(streamrt.asarray(overlapping).numpy(), overlapping)
    with pytest.raises(ValueError, match="copy=False.*share memory"):
        streamrt.asarray(overlapping, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        streamrt.asarray([1.0, 2.0], copy=False)
    assert streamrt.asarray([1.5, 2.5]).dtype == streamrt.float32  # torch's default float
    assert streamrt.asarray([1, 2]).dtype == streamrt.int64
    t = streamrt.zeros(2)
    assert streamrt.asarray(t).shares_storage(t)
    assert not streamrt.asarray(t, copy=True).shares_storage(t)
    assert streamrt.tensor(x).data_ptr() != address(x)
    with pytest.raises(TypeError, match="not supported"):
        streamrt.asarray(np.zeros(2, dtype=np.float16))
    assert streamrt.asarray(np.zeros(2, dtype=np.float16), dtype="float32").dtype == np.float32


def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(ValueError, match="share memory.*asarray"):
        streamrt.from_numpy(np.lib.stride_tricks.as_strided(np.zeros(6), (3, 3), (16, 8)))
    packed = np.zeros(4, dtype=[("x", "<f8"), ("flag", "i1")])["x"]  # 9-byte strides
    with pytest.raises(ValueError, match="not aligned"):
        streamrt.from_numpy(packed)
    np.testing.assert_array_equal(streamrt.asarray(packed).numpy(), packed)  # copied
    ro = np.zeros(3)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        streamrt.from_numpy(ro)
    with pytest.raises(TypeError, match="numpy dtype float16 is not supported"):
        streamrt.from_numpy(np.zeros(3, dtype=np.float16))
    with pytest.raises(TypeError, match="expected a numpy.ndarray, got list"):
        streamrt.from_numpy([1.0])


def test_shared_numpy_memory_outlives_python_references():
    # The tensor keeps the array alive while queued work uses it, and lets it go afterwards
    # (the reference is dropped on a worker thread, without the GIL: deferred, never lost).
    s, gate = held_stream()
    x = np.arange(1000, dtype=np.float64)
    alive = weakref.ref(x)
    with streamrt.StreamContext(s):
        total = streamrt.sum(streamrt.from_numpy(x) * 2)
    del x
    gc.collect()
    assert alive() is not None  # queued work still needs it
    gate.set()
    assert total.item() == 2 * sum(range(1000))
    deadline = time.monotonic() + RENDEZVOUS_S
    while alive() is not None:
        assert time.monotonic() < deadline, "the numpy array was never released"
        time.sleep(0.001)
        gc.collect()


# --- host reads wait; streams order themselves ------------------------------------------------


def held_fill(shape, value):
    """A tensor of `shape` filled with `value` on a held stream: (stream, gate, tensor), the
    tensor still pending."""
    s, gate = held_stream()
    with streamrt.StreamContext(s):
        t = streamrt.full(shape, value)
    assert not t.ready()
    return s, gate, t


def test_numpy_waits_for_pending_writes_with_the_gil_released():
    s, gate, t = held_fill((3,), 4.0)
    # The gate is opened by another Python thread: numpy() must wait without holding the GIL.
    threading.Timer(0.05, gate.set).start()
    np.testing.assert_array_equal(t.numpy(), [4.0, 4.0, 4.0])
    assert t.ready()


def test_writable_numpy_also_waits_for_pending_readers():
    t = streamrt.ones(4)
    t.wait()
    s, gate = held_stream()
    with streamrt.StreamContext(s):
        y = t * 2  # a pending read of t
    ro = t.numpy(writable=False)  # only writes matter for reading: returns while y is held
    assert not ro.flags.writeable
    assert not y.ready()
    threading.Timer(0.05, gate.set).start()
    rw = t.numpy()  # the host may write: waits for the pending read first
    assert rw.flags.writeable
    assert y.ready()
    np.testing.assert_array_equal(y.numpy(), np.full(4, 2.0))


def test_item_waits_for_the_writer():
    s, gate = held_stream()
    with streamrt.StreamContext(s):
        total = streamrt.sum(streamrt.ones(100))
    threading.Timer(0.05, gate.set).start()
    assert total.item() == 100.0


def test_cross_stream_dependencies_are_tracked_automatically():
    producer, gate = held_stream()
    consumer = streamrt.Stream()
    with streamrt.StreamContext(producer):
        x = streamrt.full((256,), 2.0)
    with streamrt.StreamContext(consumer):
        y = x * 3  # must wait for the producer's write, with no manual sync
    gate.set()
    np.testing.assert_array_equal(y.numpy(), np.full(256, 6.0))
    assert streamrt.dependency_tracking()
    with streamrt.DependencyTracking(False):
        assert not streamrt.dependency_tracking()
    assert streamrt.dependency_tracking()


def failing_division(s):
    """An integer division by zero on stream `s`: the op fails when it runs, not at the call."""
    with streamrt.StreamContext(s):
        return streamrt.div(streamrt.ones(4, dtype="int32"), streamrt.zeros(4, dtype="int32"))


def test_failed_op_is_reported_by_synchronize():
    s = streamrt.Stream()
    q = failing_division(s)
    with pytest.raises(streamrt.Error, match="division by zero"):
        s.synchronize()
    del q


def test_repr_shows_the_values_as_torch_does():
    assert repr(streamrt.zeros(2, 3)) == (
        "streamrt.tensor([[0., 0., 0.],\n                 [0., 0., 0.]])")
    assert str(streamrt.arange(3)) == "streamrt.tensor([0, 1, 2])"  # int64: torch's default
    assert repr(streamrt.sum(streamrt.ones(4))) == "streamrt.tensor(4.)"
    assert repr(streamrt.ones(2, dtype="float64")) == (
        "streamrt.tensor([1., 1.], dtype=streamrt.float64)")
    assert repr(streamrt.zeros(0, 3)) == "streamrt.tensor([], size=(0, 3))"
    assert "..." in repr(streamrt.zeros(100, 100))  # summarised, as numpy and torch do


def test_print_of_a_pending_tensor_waits_for_its_writer():
    s, gate, t = held_fill((2,), 4.0)
    # Opened by another Python thread: repr must wait with the GIL released.
    threading.Timer(0.05, gate.set).start()
    assert repr(t) == "streamrt.tensor([4., 4.])"
    assert t.ready()


def test_print_of_a_tensor_whose_writer_failed_raises_the_failure():
    s = streamrt.Stream()
    q = failing_division(s)
    with pytest.raises(streamrt.Error, match="division by zero"):
        print(q)


def test_basic_indexing_and_operators_do_not_import_numpy():
    # numpy is looked up only for operands and indices that may be numpy objects: the common
    # cases (ints, slices, None, ..., integer tensors, Python numbers) must not pay for it, nor
    # need it.
    import subprocess
    import sys

    script = (
        "import sys, streamrt\n"
        "t = streamrt.ones(4, 4)\n"
        "t[1]; t[1:3]; t[:, 2]; t[None, ..., ::-1]; t[streamrt.arange(2)]; (t + t) * 2 - 1.5\n"
        "t[0] = 3.0\n"
        "assert 'numpy' not in sys.modules, 'numpy was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
