"""The seed examples again (test_seeds.py has the streamrt-only versions), with real torch tensors
as inputs and outputs: torch tensors go into streamrt ops without a copy (DLPack), results come
back as torch tensors sharing streamrt's memory (torch.from_dlpack), and torch ops also run as
launched work on the streams. Checked against torch's own results. Skipped, with the reason,
where torch is not importable."""

import threading

import pytest

import streamrt
from streamrt import cpu
from helpers import (
    RENDEZVOUS_S, ArticleEvent, ops_under_one_event, polled_product, product_then_wait,
    product_signalling, products_then_wait_all, timed)

torch = pytest.importorskip(
    "torch", reason="torch is not importable here: the torch versions of the seed examples need it"
)

N = 1000  # the articles' 1000 x 1000 matrices


def as_torch(t):
    """The streamrt tensor as a torch tensor on the same memory (waits for its writer first)."""
    t.wait()
    out = torch.from_dlpack(t)
    assert out.data_ptr() == t.data_ptr()
    return out


def close(actual, expected):
    assert torch.allclose(actual.double(), expected.double(), rtol=1e-3, atol=1e-3)


def randn(*size, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*size, generator=g)


# --- Article 1: torch.cpu.StreamContext ----------------------------------------------------


def test_two_streams_matmul_and_allclose():
    stream1, stream2 = cpu.Stream(), cpu.Stream()
    A, B = randn(N, N, seed=1), randn(N, N, seed=2)
    with cpu.StreamContext(stream1):
        C1 = streamrt.matmul(A, B)  # torch inputs, no copy
    with cpu.StreamContext(stream2):
        C2 = streamrt.matmul(A, B)
    stream1.synchronize()
    stream2.synchronize()
    C1, C2 = as_torch(C1), as_torch(C2)
    assert torch.allclose(C1, C2)
    close(C1, torch.matmul(A, B))


def test_two_streams_of_torch_matmuls_as_launched_work():
    # The seed's code itself: torch.matmul, run on two streamrt streams (launched callables).
    stream1, stream2 = cpu.Stream(), cpu.Stream()
    A, B = randn(N, N, seed=3), randn(N, N, seed=4)
    out = {}

    def matmul_into(key):
        out[key] = torch.matmul(A, B)

    stream1.launch(matmul_into, 1)
    stream2.launch(matmul_into, 2)
    stream1.synchronize()
    stream2.synchronize()
    assert torch.allclose(out[1], out[2])


def test_data_movement_between_streams():
    stream1, stream2 = cpu.Stream(), cpu.Stream()
    x = randn(N, N, seed=5)
    with cpu.StreamContext(stream1):
        y1 = streamrt.asarray(x).clone()
    with cpu.StreamContext(stream2):
        y2 = streamrt.empty(N, N)
        y2.copy_(x)
    stream1.synchronize()
    stream2.synchronize()
    y1, y2 = as_torch(y1), as_torch(y2)
    assert torch.equal(y1, x) and torch.equal(y2, x)
    assert y1.data_ptr() != x.data_ptr()  # copies, not views of x


def test_event_timing_on_a_stream():
    A = randn(N, N, seed=6)
    C, elapsed = timed(lambda: streamrt.matmul(A, A), cpu.Stream())
    assert elapsed > 0.0
    close(as_torch(C), A @ A)


def test_explicit_stream_management():
    stream = cpu.Stream()
    x = randn(N, N, seed=7)
    with cpu.stream(stream):
        y = streamrt.add(x, x)
    stream.synchronize()
    assert torch.equal(as_torch(y), x + x)


def test_device_attribute_then_device_synchronize():
    device = streamrt.Device("cpu")
    x = randn(N, N, seed=8)
    y = streamrt.add(x, x)
    cpu.synchronize(device)
    assert y.ready()
    assert torch.equal(as_torch(y), x + x)


def test_synchronize_all_streams():
    streams = [cpu.Stream() for _ in range(3)]
    outs = []
    ones = torch.ones(64, 64)
    for i, s in enumerate(streams):
        with cpu.StreamContext(s):
            outs.append(streamrt.matmul(torch.full((64, 64), float(i)), ones))
    streamrt.synchronize()
    assert all(s.query() for s in streams)
    for i, o in enumerate(outs):
        assert torch.equal(as_torch(o), torch.full((64, 64), 64.0 * i))


# --- Article 2: torch.mps.Event --------------------------------------------------------------


@pytest.fixture
def operands():
    return randn(N, N, seed=10), randn(N, N, seed=11)


def test_wait_for_an_op_to_complete(operands):
    a, b = operands
    output, event = product_then_wait(a, b)
    assert event.completed and output.ready()
    close(as_torch(output), a @ b)


def test_synchronize_several_ops_with_wait_all(operands):
    a, b = operands
    c, d = randn(N, N, seed=12), randn(N, N, seed=13)
    (output1, output2), _ = products_then_wait_all([(a, b), (c, d)])
    close(as_torch(output1), a @ b)
    close(as_torch(output2), c @ d)


def test_op_performance_with_events(operands):
    a, b = operands
    output, elapsed = timed(lambda: streamrt.matmul(a, b))
    assert elapsed > 0.0
    close(as_torch(output), a @ b)


def test_poll_until_complete(operands):
    a, b = operands
    output, _, _ = polled_product(a, b)
    close(as_torch(output), a @ b)


def test_reset_event(operands):
    a, b = operands
    output, event = product_then_wait(a, b)
    event.reset()
    assert event.completed is False
    close(as_torch(output), a @ b)


def test_one_event_for_several_ops(operands):
    a, b = operands
    first, second = map(as_torch, ops_under_one_event(a, b))
    assert torch.equal(second, torch.relu(first))


def test_device_synchronize_alternative(operands):
    a, b = operands
    output = streamrt.matmul(a, b)
    streamrt.synchronize()
    close(as_torch(output), a @ b)


def test_threading_event_with_completion_callback(operands):
    a, b = operands
    s = cpu.Stream()
    result = {}
    s.launch(lambda: result.setdefault("out", torch.matmul(a, b)))  # a torch op as stream work
    done = threading.Event()
    marker = s.record_event()
    marker.add_done_callback(lambda ev: done.set())
    assert done.wait(RENDEZVOUS_S)
    close(result["out"], a @ b)


def test_custom_event_class(operands):
    a, b = operands
    event = ArticleEvent()  # the article's MyEvent (helpers.py)
    output = product_signalling(a, b, event)
    event.wait()
    close(as_torch(output), a @ b)
