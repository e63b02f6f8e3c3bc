"""streamrt.torch.CPUGraph (docs/torch.md, "Graphs: capture and replay"): a block's ops on a
stream, captured as they run, are enqueued again by replay() as one work item on the same
tensors; a replay waits for the queued work it depends on, and reads of what it writes wait for
it, as for any op."""

import pytest

from streamrt import _torch_mode, _torch_submit
from torch_streams_util import (  # noqa: F401  (fixture)
    Gate, installed, on_another_thread, srt, torch)
from helpers import RENDEZVOUS_S

pytestmark = pytest.mark.skipif(
    _torch_submit.native() is None,
    reason="streamrt._streamrt_torch is not built here: capture needs its fast path")


@pytest.fixture
def fast(installed):
    if _torch_mode.path().guard is None:
        pytest.skip("capture records the fast path's work items")
    yield


def mlp():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def warmed_up(fn, stream, times=2):
    """Runs fn() on `stream` and waits, `times` times: the ops' first runs teach the fast path."""
    for _ in range(times):
        with torch.cpu.StreamContext(stream):
            fn()
        stream.synchronize()


def captured(fn, stream):
    """A CPUGraph of fn() on `stream` (warmed up first) and what the captured run returned."""
    warmed_up(fn, stream)
    g = srt.CPUGraph()
    with srt.graph(g, stream=stream):
        out = fn()
    return g, out


def test_a_replay_computes_the_block_on_the_inputs_new_values(fast):
    net, s = mlp(), torch.cpu.Stream()
    x = torch.randn(16, 32)
    with torch.no_grad():
        g, out = captured(lambda: net(x), s)
        assert g.num_ops >= 3
        assert torch.equal(out, net(x))  # the captured run ran
        for seed in range(3):
            x.copy_(torch.randn(16, 32, generator=torch.Generator().manual_seed(seed)))
            g.replay()
            s.synchronize()
            with torch.cpu.StreamContext(s):
                expected = net(x)  # the same ops on the same stream, not captured
            assert torch.equal(out, expected)


def test_a_captured_training_step_replays_as_the_step_itself(fast):
    nets = [mlp(), mlp()]
    opts = [torch.optim.SGD(n.parameters(), lr=0.1) for n in nets]
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    s0, s1 = torch.cpu.Stream(), torch.cpu.Stream()

    def step(i):
        opts[i].zero_grad()
        torch.nn.functional.mse_loss(nets[i](x), y).backward()
        opts[i].step()

    warmed_up(lambda: step(0), s0)
    g = srt.CPUGraph()
    with srt.graph(g, stream=s0):
        step(0)  # the third step
    for _ in range(4):
        g.replay()
    for _ in range(2 + 1 + 4):
        with torch.cpu.StreamContext(s1):
            step(1)
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        assert torch.equal(a, b)


def test_a_replay_waits_for_the_queued_writer_of_its_input(fast):
    s, writer = torch.cpu.Stream(), torch.cpu.Stream()
    x = torch.ones(1000)
    g, out = captured(lambda: x * 3, s)
    gate = Gate().hold(writer)
    with torch.cpu.StreamContext(writer):
        x.fill_(5)
    g.replay()
    assert not srt.ready(out)
    gate.open()
    assert out.tolist() == [15.0] * 1000


def test_a_write_after_a_replay_waits_for_the_replay_to_read(fast):
    s, writer = torch.cpu.Stream(), torch.cpu.Stream()
    x = torch.full((1000,), 2.0)
    g, out = captured(lambda: x * 3, s)
    gate = Gate().hold(s)
    g.replay()  # reads x: held
    with torch.cpu.StreamContext(writer):
        x.fill_(7)  # must not land before the replay read x
    gate.open_later()
    assert out.tolist() == [6.0] * 1000
    assert x.tolist() == [7.0] * 1000


def test_a_tensor_the_block_reads_then_writes_is_written_by_the_replay(fast):
    s, reader = torch.cpu.Stream(), torch.cpu.Stream()
    x = torch.full((1000,), 2.0)

    def block():
        y = x * 3  # reads x first
        x.add_(1)  # then writes it
        return y

    g, out = captured(block, s)  # three runs: x is 5 once they are done
    gate = Gate().hold(s)
    g.replay()  # x becomes 6: held
    with torch.cpu.StreamContext(reader):
        seen = x * 1  # must wait for the replay's write, not only for its read
    gate.open_later()
    assert seen.tolist() == [6.0] * 1000
    assert out.tolist() == [15.0] * 1000


def test_reads_of_a_replayed_output_wait_for_the_replay(fast):
    s = torch.cpu.Stream()
    x = torch.full((1000,), 2.0)
    g, out = captured(lambda: x + 1, s)
    s.synchronize()
    # An op on the output with nothing pending drops the mark the captured run left on it.
    t, result = on_another_thread(lambda: torch.mul(out, 1).tolist())
    t.join(RENDEZVOUS_S)
    assert result.get("value") == [3.0] * 1000, result
    x.fill_(10)
    gate = Gate().hold(s)
    g.replay()
    # A thread that never entered a stream context runs an op on the output: it waits for the
    # replay.
    gate.open_later()
    t, result = on_another_thread(lambda: torch.mul(out, 1).tolist())
    t.join(RENDEZVOUS_S)
    assert result.get("value") == [11.0] * 1000, result


def test_a_replay_outside_contexts_runs_on_the_capture_stream_and_inside_on_the_current(fast):
    s, other = torch.cpu.Stream(), torch.cpu.Stream()
    x = torch.ones(100)
    g, out = captured(lambda: x * 2, s)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(other):
        g.replay()
    other.synchronize(timeout=RENDEZVOUS_S)  # ran on `other` while `s` is held
    assert srt.ready(out)
    g.replay()
    assert not srt.ready(out)  # queued behind the gate on `s`
    gate.open()
    s.synchronize()
    assert out.tolist() == [2.0] * 100


def test_a_failing_replay_raises_what_eager_raises_naming_the_op(fast):
    s = torch.cpu.Stream()
    a, idx = torch.ones(4, 3), torch.tensor([0, 2])
    g, out = captured(lambda: torch.index_select(a, 0, idx), s)
    idx.fill_(50)
    g.replay()
    with pytest.raises(IndexError, match=r"index_select \(captured op 1 of 1\).*out of range"):
        s.synchronize()


def test_a_host_read_in_the_block_cannot_be_captured(fast):
    s = torch.cpu.Stream()
    x = torch.ones(10)
    warmed_up(lambda: x + 1, s)
    g = srt.CPUGraph()
    with pytest.raises(RuntimeError, match="cannot be captured.*warm-up"):
        with srt.graph(g, stream=s):
            y = x + 1
            y.sum().item()
    assert g.num_ops == 0
    assert srt.current_stream() != s  # the block's context was left
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()


def test_ops_of_another_stream_cannot_be_captured(fast):
    s, other = torch.cpu.Stream(), torch.cpu.Stream()
    x = torch.ones(10)
    warmed_up(lambda: x + 1, other)
    g = srt.CPUGraph()
    with pytest.raises(RuntimeError, match="another stream than the capture's"):
        with srt.graph(g, stream=s):
            with torch.cpu.StreamContext(other):
                x + 1
    assert g.num_ops == 0


def test_capture_misuse_raises_naming_the_fix(fast):
    s = torch.cpu.Stream()
    x = torch.ones(10)
    g = srt.CPUGraph()
    with pytest.raises(RuntimeError, match="recorded no op"):
        with srt.graph(g, stream=s):
            pass
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()
    g2, _ = captured(lambda: x + 1, s)
    with pytest.raises(RuntimeError, match="reset"):
        with srt.graph(g2, stream=s):
            x + 1
    g2.reset()
    with srt.graph(g2, stream=s):
        out = x + 2
    g2.replay()
    assert out.tolist() == [3.0] * 10
    with pytest.raises(RuntimeError, match="inside a stream context"):
        srt.CPUGraph().capture_begin()  # no context
    with pytest.raises(TypeError, match="CPUGraph"):
        srt.graph(object())


def test_a_replay_inside_a_capture_is_refused(fast):
    s = torch.cpu.Stream()
    x = torch.ones(10)
    g, _ = captured(lambda: x + 1, s)
    outer = srt.CPUGraph()
    with pytest.raises(RuntimeError, match="would not be captured"):
        with srt.graph(outer, stream=s):
            x + 1
            g.replay()
    assert outer.num_ops == 0


def test_a_replay_after_uninstall_says_to_install(fast):
    s = torch.cpu.Stream()
    x = torch.ones(10)
    g, _ = captured(lambda: x + 1, s)
    srt.uninstall()
    try:
        with pytest.raises(RuntimeError, match="install"):
            g.replay()
    finally:
        srt.install()


def test_graph_needs_install():
    srt.uninstall()
    with pytest.raises(RuntimeError, match="install"):
        with srt.graph(srt.CPUGraph()):
            pass


BIG = 256 * 1024  # floats: blocks this large may be handed on to later outputs


def test_a_temporary_of_the_block_lends_its_memory_to_a_later_output(fast):
    s = torch.cpu.Stream()
    x = torch.randn(BIG)

    def block():
        t = x * 2  # a temporary: dropped once the next op holds it
        u = t + 1
        del t
        return u * 3  # may take t's memory, in the captured run and in every replay

    warmed_up(block, s)
    before = _torch_submit.native().output_cache_stats()["reused"]
    gate = Gate().hold(s)  # the captured run's ops stay queued: only they and the graph hold t
    g, out = captured_once(block, s)
    gate.open()
    assert _torch_submit.native().output_cache_stats()["reused"] == before + 1
    for seed in range(3):
        x.copy_(torch.randn(BIG, generator=torch.Generator().manual_seed(seed)))
        g.replay()
        assert torch.equal(out, (x * 2 + 1) * 3)


def test_memory_from_before_the_capture_is_never_handed_on(fast):
    s = torch.cpu.Stream()
    inputs = []

    def block():
        u = inputs.pop() * 2  # the input's last reference goes with its op's arguments
        return u + 1  # of the input's size: must not take its memory (a replay reads it again)

    def new_input(value):  # on the memory stream outputs get (that may be handed on)
        with torch.cpu.StreamContext(s):
            inputs.append(torch.full((BIG,), value) * 1)

    for _ in range(2):
        new_input(1.0)
        warmed_up(block, s, times=1)
    new_input(5.0)
    gate = Gate().hold(s)  # queued, the input's op is its only holder but for the graph
    g, out = captured_once(block, s)
    gate.open()
    for _ in range(3):
        g.replay()
        assert out.tolist()[:3] == [11.0] * 3 and torch.equal(out, torch.full((BIG,), 11.0))


def captured_once(fn, stream):
    g = srt.CPUGraph()
    with srt.graph(g, stream=stream):
        out = fn()
    return g, out


def test_a_capture_with_an_op_it_could_not_record_ends_with_an_error(fast):
    s = torch.cpu.Stream()
    x = torch.ones(100)
    warmed_up(lambda: x + 1, s)
    g = srt.CPUGraph()
    with pytest.raises(RuntimeError, match="could not be recorded"):
        with srt.graph(g, stream=s):
            _torch_submit.native()._fail_next_capture_record()
            try:
                x + 1
            except (MemoryError, RuntimeError):
                pass  # a block that goes on after the failure
            x + 1
    assert g.num_ops == 0
    with pytest.raises(RuntimeError, match="nothing captured"):
        with torch.cpu.StreamContext(s):
            g.replay()
    g2, out = captured(lambda: x + 1, s)  # a later capture is not affected
    assert g2.num_ops == 1
