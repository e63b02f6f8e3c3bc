"""A new output of stream work takes the memory of an output that only an op queued earlier on the
same stream, by the same thread, still holds (docs/torch.md, "Memory"): never while anything else
holds it (the caller, a view, another op), never across streams or threads, and the results are
eager's. Streams are held by a gate so that the earlier op is still queued."""

import threading
import warnings

import pytest

from helpers import RENDEZVOUS_S
from streamrt import _torch_mode, _torch_plan, _torch_submit
from torch_streams_util import Gate, installed, srt, torch  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(
    _torch_submit.native() is None,
    reason="streamrt._streamrt_torch is not built here: outputs are torch's own")

SHAPE = (512, 256)  # float32 outputs large enough to be handed on (the first test checks)


def _address(t):
    # (the C method: the installed one waits for the pending work, as a host access)
    return _torch_submit._data_ptr(t)


def _big(seed):
    return torch.randn(*SHAPE, generator=torch.Generator().manual_seed(seed))


def _queue_and_drop(a, b):
    # Queues a + b on this thread's current stream (held) and drops the caller's tensor: only the
    # queued op holds its output. The output's address.
    first = a + b
    return _address(first)


def _native_only():
    if _torch_mode.path().native is None:
        pytest.skip("the Python path's own work items hold the caller's tensors: not listed")


def _reused():
    return srt.cache_stats()["reused"]


def test_a_dropped_queued_output_gives_its_memory_to_the_next_output(installed):
    _native_only()
    s = torch.cpu.Stream()
    a, b = _big(1), _big(2)
    assert a.numel() * a.element_size() >= _torch_submit.native().reusable_from_nbytes
    before = _reused()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        address = _queue_and_drop(a, b)
        second = a * b
    assert _address(second) == address
    assert _reused() == before + 1
    gate.open()
    s.synchronize()
    assert torch.equal(second, a * b)  # written after the first op's write


def test_an_output_the_caller_holds_is_never_handed_on(installed):
    s = torch.cpu.Stream()
    a, b = _big(3), _big(4)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        first = a + b
        second = a * b
    assert _address(second) != _address(first)
    gate.open()
    s.synchronize()
    assert torch.equal(first, a + b) and torch.equal(second, a * b)


def test_an_output_a_view_holds_is_never_handed_on(installed):
    s = torch.cpu.Stream()
    a, b = _big(5), _big(6)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        first = a + b
        row = first[3]
        address = _address(first)
        del first
        second = a * b
    assert _address(second) != address
    gate.open()
    s.synchronize()
    assert torch.equal(row, (a + b)[3]) and torch.equal(second, a * b)


def test_an_output_queued_on_another_stream_is_never_handed_on(installed):
    held, free = torch.cpu.Stream(), torch.cpu.Stream()
    a, b = _big(7), _big(8)
    gate = Gate().hold(held)
    with torch.cpu.StreamContext(held):
        address = _queue_and_drop(a, b)
    with torch.cpu.StreamContext(free):
        second = a * b  # runs now, before the held op writes its output
    free.synchronize()
    assert _address(second) != address
    gate.open()
    held.synchronize()
    assert torch.equal(second, a * b)


def test_an_output_another_thread_queued_is_never_handed_on(installed):
    s = torch.cpu.Stream()
    a, b = _big(9), _big(10)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        address = _queue_and_drop(a, b)
    got = {}

    def other_thread():
        with torch.cpu.StreamContext(s):
            got["second"] = a * b

    t = threading.Thread(target=other_thread)
    t.start()
    t.join(RENDEZVOUS_S)
    assert not t.is_alive()
    assert _address(got["second"]) != address
    gate.open()
    s.synchronize()
    assert torch.equal(got["second"], a * b)


def test_an_output_its_queued_readers_also_hold_is_handed_on_after_them(installed):
    _native_only()
    s = torch.cpu.Stream()
    a, b = _big(11), _big(12)
    with torch.cpu.StreamContext(s):
        _ = (a + b) * 2 - a  # (first runs are Python work items, whose inputs are not listed)
    s.synchronize()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        first = a + b
        address = _address(first)
        second = first * 2  # reads `first` later, on the stream
        third = first - a  # and so does this
        del first  # now only the three queued ops hold it
        fourth = a - b  # takes it, and writes it after both reads
    assert _address(fourth) == address
    gate.open()
    s.synchronize()
    first = a + b
    assert torch.equal(second, first * 2) and torch.equal(third, first - a)
    assert torch.equal(fourth, a - b)


def test_an_output_a_queued_op_of_another_stream_reads_is_never_handed_on(installed):
    s, other = torch.cpu.Stream(), torch.cpu.Stream()
    a, b = _big(17), _big(18)
    gate, other_gate = Gate().hold(s), Gate().hold(other)
    with torch.cpu.StreamContext(s):
        first = a + b
        address = _address(first)
    with torch.cpu.StreamContext(other):
        second = first * 2  # reads `first` on the other stream, after its op
    del first
    with torch.cpu.StreamContext(s):
        third = a - b  # would run before the other stream's read
    assert _address(third) != address
    gate.open()
    other_gate.open()
    s.synchronize()
    other.synchronize()
    assert torch.equal(second, (a + b) * 2) and torch.equal(third, a - b)


def test_an_input_dropped_while_its_reader_is_queued_is_handed_on(installed):
    _native_only()
    s = torch.cpu.Stream()
    a, b = _big(13), _big(14)
    with torch.cpu.StreamContext(s):
        first = a + b  # (on the output cache's memory)
    s.synchronize()  # no op holds it
    address = _address(first)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        second = first * 2  # the queued reader
        del first  # only that op holds it now
        third = a - b  # takes it, and writes it after the reader read it
    assert _address(third) == address
    gate.open()
    s.synchronize()
    assert torch.equal(second, (a + b) * 2) and torch.equal(third, a - b)


# A fused op without a meta kernel: learned once, then stream work whose result is copied into
# the outputs (a Python work item on either path).
_masked_softmax = torch.ops.aten._masked_softmax.default


@pytest.fixture
def learned(installed):
    _torch_plan._meta_cache.clear()
    x, mask = _big(15), torch.rand(*SHAPE, generator=torch.Generator().manual_seed(16)) < 0.3
    with warnings.catch_warnings(), torch.cpu.StreamContext(torch.cpu.Stream()):
        warnings.simplefilter("ignore")  # (the host op's warning: its own tests check it)
        _masked_softmax(x, mask, 1, 2)  # the host call that teaches its outputs' layouts
    yield x, mask
    _torch_plan._meta_cache.clear()


def test_a_learned_op_s_dropped_output_gives_its_memory_to_the_next(learned):
    # (on torch 2.x, the Python path's tracker registry makes a Python storage object of each
    # output, which keeps a reference of its own: nothing is handed on there)
    _native_only()
    x, mask = learned
    x2 = x * 2
    s = torch.cpu.Stream()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        first = _masked_softmax(x, mask, 1, 2)
        address = _address(first)
        del first
        second = _masked_softmax(x2, mask, 1, 2)
    assert _address(second) == address
    gate.open()
    s.synchronize()
    assert torch.equal(second, _masked_softmax(x2, mask, 1, 2))


def test_a_learned_op_s_output_the_caller_holds_is_never_handed_on(learned):
    x, mask = learned
    x2 = x * 2
    s = torch.cpu.Stream()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        first = _masked_softmax(x, mask, 1, 2)
        second = _masked_softmax(x2, mask, 1, 2)
    assert _address(second) != _address(first)
    gate.open()
    s.synchronize()
    assert torch.equal(first, _masked_softmax(x, mask, 1, 2))
    assert torch.equal(second, _masked_softmax(x2, mask, 1, 2))


def _program(seed, inputs, steps=60):
    """A random program over large tensors that drops outputs as it goes (most of them while
    their ops are queued), reads and writes what it keeps, and returns what is left."""
    rng = torch.Generator().manual_seed(seed)
    live = list(inputs)

    def pick():
        return live[int(torch.randint(len(live), (1,), generator=rng))]

    for _ in range(steps):
        kind = int(torch.randint(6, (1,), generator=rng))
        if kind == 0 and len(live) > 2:
            del live[int(torch.randint(len(live), (1,), generator=rng))]
        elif kind == 1:
            live.append(pick() + pick())
        elif kind == 2:
            live.append(pick() * 0.5 - pick())
        elif kind == 3:
            live.append(torch.relu(pick()))
        elif kind == 4:
            half = pick()[:, ::2].contiguous()  # (a smaller output: not handed on)
            live.append(torch.cat([half, half], dim=1))
        else:
            t = pick()
            if all(t is not x for x in inputs):
                t.mul_(1.5)
    return live


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_programs_on_held_streams_of_two_threads_equal_eager(installed, seed):
    inputs = [_big(100 + seed), _big(200 + seed)]
    expected = [_program(seed * 10 + k, inputs) for k in range(2)]
    streams = [torch.cpu.Stream(), torch.cpu.Stream()]
    gates = [Gate().hold(s) for s in streams]  # everything queues up first
    got = [None, None]
    before = _reused()

    def thread(k):
        with torch.cpu.StreamContext(streams[k]):
            got[k] = _program(seed * 10 + k, inputs)

    threads = [threading.Thread(target=thread, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(RENDEZVOUS_S)
        assert not t.is_alive()
    for g in gates:
        g.open()
    for s in streams:
        s.synchronize()
    for k in range(2):
        assert len(got[k]) == len(expected[k])
        for a, b in zip(got[k], expected[k]):
            assert torch.equal(a, b)
    if _torch_mode.path().native is not None:
        assert _reused() > before  # (the programs exercised the reuse)


def test_an_output_a_queued_learned_op_reads_is_handed_on_after_the_read(learned):
    # (a Python work item holds the inputs it only reads through tensors of its own, listed)
    _native_only()
    x, mask = learned
    s = torch.cpu.Stream()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        first = x + 1
        address = _address(first)
        second = _masked_softmax(first, mask, 1, 2)
        del first  # held by its op and by the learned op's item
        third = x - 1
    assert _address(third) == address
    gate.open()
    s.synchronize()
    assert torch.equal(second, _masked_softmax(x + 1, mask, 1, 2))
    assert torch.equal(third, x - 1)


def test_a_keyword_input_of_a_python_item_the_caller_holds_is_never_handed_on(installed):
    # (the item holds keyword arguments through the caller's tensors: they are not listed)
    _native_only()
    n = SHAPE[0] * SHAPE[1]
    seq, vals = torch.arange(n, dtype=torch.float32), torch.rand(n) * n
    idx = torch.arange(n)
    s = torch.cpu.Stream()
    with warnings.catch_warnings(), torch.cpu.StreamContext(s):
        warnings.simplefilter("ignore")  # (a host op's warning, if any: its own tests check it)
        torch.searchsorted(seq, vals, sorter=idx.clone())  # teaches the op
    s.synchronize()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        sorter = idx.clone()
        found = torch.searchsorted(seq, vals, sorter=sorter)
        other = idx * 2
    assert _address(other) != _address(sorter)
    gate.open()
    s.synchronize()
    assert torch.equal(sorter, idx) and torch.equal(other, idx * 2)
    assert torch.equal(found, torch.searchsorted(seq, vals, sorter=idx))
