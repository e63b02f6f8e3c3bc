"""Every example of the two seed articles (docs/seeds.md: torch.cpu.StreamContext, and
torch.mps.Event), translated to streamrt: the import changed, the wrong APIs corrected (see
docs/python.md for each correction), and each result checked."""

import threading

import numpy as np
import pytest

import streamrt
from streamrt import cpu
from helpers import (
    RENDEZVOUS_S, ArticleEvent, ops_under_one_event, polled_product, product_then_wait,
    product_signalling, products_then_wait_all, timed)

N = 1000  # the articles' 1000 x 1000 matrices


def reference_matmul(a, b):
    return a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)


# --- Article 1: torch.cpu.StreamContext ----------------------------------------------------


def article_products(stream1, stream2, A, B):
    """The article's example: the same product in a context on each stream, then both
    synchronized."""
    with cpu.StreamContext(stream1):
        C1 = streamrt.matmul(A, B)
    with cpu.StreamContext(stream2):
        C2 = streamrt.matmul(A, B)
    stream1.synchronize()
    stream2.synchronize()
    return C1, C2


def test_two_streams_matmul_and_allclose():
    # Seed: stream1 = torch.cuda.Stream() (a CUDA stream given to a CPU context: corrected to
    # cpu.Stream()); torch.randn / torch.matmul / torch.allclose -> streamrt.
    stream1 = cpu.Stream()
    stream2 = cpu.Stream()
    A = streamrt.randn(N, N)
    B = streamrt.randn(N, N)
    C1, C2 = article_products(stream1, stream2, A, B)
    assert streamrt.allclose(C1, C2)
    # And the product is right, not just equal on both streams.
    np.testing.assert_allclose(C1.numpy(), reference_matmul(A, B), rtol=1e-3, atol=1e-3)


def test_two_streams_matmul_run_on_the_streams_given(tmp_path):
    # The same example under the profiler: each matmul ran on the stream of its context.
    stream1, stream2 = cpu.Stream(), cpu.Stream()
    A = streamrt.randn(N, N, seed=1)
    B = streamrt.randn(N, N, seed=2)
    A.wait()
    B.wait()
    with streamrt.profile() as prof:
        C1, C2 = article_products(stream1, stream2, A, B)
    assert streamrt.allclose(C1, C2)
    streams_of_matmul = {r.stream_id for r in prof.records() if r.label == "matmul"}
    assert {stream1.id, stream2.id} <= streams_of_matmul
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    assert path.stat().st_size > 0


def test_data_movement_between_streams():
    # Seed example 2 moves data CPU <-> GPU on two streams (x.cpu(), x.cuda()). There is one CPU
    # device here: the streamrt version moves data between streams and host memory: a tensor
    # produced on stream1 is copied on stream1 and on stream2 (stream2 waits for the producer by
    # itself), and exported to numpy without a copy.
    stream1 = cpu.Stream()
    stream2 = cpu.Stream()
    with cpu.StreamContext(stream1):
        x = streamrt.randn(N, N, seed=3)
        y1 = x.clone()
    with cpu.StreamContext(stream2):
        y2 = streamrt.empty(N, N)
        y2.copy_(x)
    stream1.synchronize()
    stream2.synchronize()
    assert streamrt.allclose(y1, y2)
    host = y2.numpy()
    assert host.__array_interface__["data"][0] == y2.data_ptr()
    np.testing.assert_array_equal(host, x.numpy())


def test_event_timing_on_a_stream():
    # Seed example 3 calls event.elapsed_time(stream): elapsed_time takes an end *event*.
    # Corrected: record a start and an end event around the work.
    A = streamrt.randn(N, N, seed=4)
    C, elapsed_time = timed(lambda: streamrt.matmul(A, A), cpu.Stream())
    print(f"経過時間: {elapsed_time} ms")
    assert elapsed_time > 0.0
    np.testing.assert_allclose(C.numpy(), reference_matmul(A, A), rtol=1e-3, atol=1e-3)


def test_explicit_stream_management():
    # Seed: with torch.cuda.stream(stream): ...; stream.synchronize() -> streamrt.cpu.stream.
    stream = cpu.Stream()
    x = streamrt.randn(N, N, seed=5)
    with cpu.stream(stream):
        y = x + x
        assert streamrt.current_stream() == stream
    stream.synchronize()
    np.testing.assert_array_equal(y.numpy(), 2 * x.numpy())


def test_device_attribute_then_device_synchronize():
    # Seed: x = torch.randn(..., device=device); y = x + x; torch.cuda.synchronize(device).
    device = streamrt.Device("cpu")
    x = streamrt.randn(N, N, device=device)
    y = x + x
    cpu.synchronize(device)
    assert y.ready()
    np.testing.assert_array_equal(y.numpy(), 2 * x.numpy())


def test_synchronize_all_streams():
    # Seed: torch.cuda.synchronize() waits for every stream -> streamrt.synchronize().
    streams = [cpu.Stream() for _ in range(3)]
    outs = []
    for i, s in enumerate(streams):
        with cpu.StreamContext(s):
            outs.append(streamrt.full((64, 64), float(i)) @ streamrt.ones(64, 64))
    streamrt.synchronize()
    assert all(s.query() for s in streams)
    assert all(o.ready() for o in outs)
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o.numpy(), np.full((64, 64), 64.0 * i))


# --- Article 2: torch.mps.Event --------------------------------------------------------------
# torch.mps.matmul does not exist: streamrt.matmul. event.record(output) takes a stream, not an
# op: record() right after the op marks it. event.wait() in the article blocks the host: in
# streamrt (as in torch) wait() is stream-side and synchronize() blocks the host.


@pytest.fixture
def operands():
    a = streamrt.randn(N, N, seed=10)
    b = streamrt.randn(N, N, seed=11)
    return a, b


def test_wait_for_an_op_to_complete(operands):
    a, b = operands
    output = streamrt.matmul(a, b)
    event = streamrt.Event()
    event.record()
    event.synchronize()  # the article's event.wait()
    assert event.completed and output.ready()
    np.testing.assert_allclose(output.numpy(), reference_matmul(a, b), rtol=1e-3, atol=1e-3)


def test_synchronize_several_ops_with_wait_all(operands):
    a, b = operands
    c = streamrt.randn(N, N, seed=12)
    d = streamrt.randn(N, N, seed=13)
    (output1, output2), (event1, event2) = products_then_wait_all([(a, b), (c, d)])
    assert event1.completed and event2.completed
    assert output1.ready() and output2.ready()
    np.testing.assert_allclose(output1.numpy(), reference_matmul(a, b), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(output2.numpy(), reference_matmul(c, d), rtol=1e-3, atol=1e-3)


def test_op_performance_with_events(operands):
    # The article's event.time_elapsed() (in microseconds) does not exist: elapsed_time(end)
    # between two timing events, in milliseconds.
    a, b = operands
    output, time_elapsed = timed(lambda: streamrt.matmul(a, b))
    print(f"Time elapsed: {time_elapsed} ms")
    assert time_elapsed > 0.0
    assert output.ready()


def test_poll_until_complete(operands):
    # The article's event.poll() is query() (and the `completed` property).
    a, b = operands
    output, event, _ = polled_product(a, b)
    assert event.completed
    np.testing.assert_allclose(output.numpy(), reference_matmul(a, b), rtol=1e-3, atol=1e-3)


def test_reset_event(operands):
    a, b = operands
    output, event = product_then_wait(a, b)
    assert event.completed
    event.reset()
    print(event.completed)
    assert event.completed is False
    assert output.ready()


def test_one_event_for_several_ops(operands):
    # "An event can be associated with several ops": recorded after them, it covers them all.
    a, b = operands
    first, second = ops_under_one_event(a, b)
    assert first.ready() and second.ready()
    np.testing.assert_array_equal(second.numpy(), np.maximum(first.numpy(), 0))


def test_device_synchronize_alternative(operands):
    # The article's torch.cuda.synchronize() for MPS work -> streamrt.synchronize().
    a, b = operands
    output = streamrt.matmul(a, b)
    streamrt.synchronize()
    assert output.ready()
    np.testing.assert_allclose(output.numpy(), reference_matmul(a, b), rtol=1e-3, atol=1e-3)


def test_threading_event_with_completion_callback(operands):
    # The article's output.add_completion_callback(on_complete) does not exist on tensors:
    # record an event after the op and use Event.add_done_callback.
    a, b = operands
    event = threading.Event()
    output = product_signalling(a, b, event)
    assert event.wait(RENDEZVOUS_S)
    assert output.ready()
    np.testing.assert_allclose(output.numpy(), reference_matmul(a, b), rtol=1e-3, atol=1e-3)


def test_custom_event_class(operands):
    a, b = operands
    event = ArticleEvent()  # the article's MyEvent (helpers.py)
    output = product_signalling(a, b, event)
    event.wait()
    assert output.ready()
    np.testing.assert_allclose(output.numpy(), reference_matmul(a, b), rtol=1e-3, atol=1e-3)
