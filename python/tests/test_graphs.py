"""Capture and replay from Python (docs/graphs.md): streamrt.graph as torch.cuda.graph, replay into
the captured tensors, Python callables replayed, refused calls, fork/join, reset."""

import threading

import numpy as np
import pytest

import streamrt
from helpers import RENDEZVOUS_S, Recorder, nested_capture


def test_capture_records_and_replay_runs_into_the_same_tensors():
    x = streamrt.full((4, 4), 2.0)
    w = streamrt.full((4, 4), 0.5)
    out = streamrt.zeros((4, 4))
    g = streamrt.Graph()
    with streamrt.graph(g):
        assert streamrt.is_current_stream_capturing()
        out.copy_(streamrt.matmul(x, w) + 1.0)
    assert not streamrt.is_current_stream_capturing()
    assert g.num_nodes >= 2
    np.testing.assert_array_equal(out.numpy(), np.zeros((4, 4), np.float32))  # not run
    g.replay()
    np.testing.assert_array_equal(out.numpy(), np.full((4, 4), 5.0, np.float32))
    x.copy_(streamrt.full((4, 4), 4.0))  # new inputs go into the captured tensor
    g.replay()
    np.testing.assert_array_equal(out.numpy(), np.full((4, 4), 9.0, np.float32))


def test_python_callables_are_replayed():
    seen = Recorder()
    g = streamrt.Graph()
    s = streamrt.Stream()
    with streamrt.graph(g, stream=s):
        s.launch(seen, "a")
        s.launch(seen, "b")
    assert seen.items == []
    for _ in range(3):
        g.replay(s)
    s.synchronize()
    assert seen.items == ["a", "b"] * 3


def test_a_failing_node_fails_the_replay_and_the_stream_recovers():
    def boom():
        raise KeyError("node")

    g = streamrt.Graph()
    s = streamrt.Stream()
    with streamrt.graph(g, stream=s):
        s.launch(boom)
    g.replay(s)
    with pytest.raises(KeyError):
        s.synchronize()
    s.synchronize()


def test_fork_join_across_streams_and_unjoined_stream_named():
    s, side = streamrt.Stream(), streamrt.Stream()
    seen = Recorder()
    g = streamrt.Graph()
    with streamrt.graph(g, stream=s):
        side.wait_stream(s)
        assert side.is_capturing()
        side.launch(seen, "side")
        s.launch(seen, "main")
        s.wait_stream(side)
    g.replay(s)
    s.synchronize()
    assert sorted(seen.items) == ["main", "side"]

    g2 = streamrt.Graph()
    with pytest.raises(streamrt.Error, match=f"stream {side.id}"):
        with streamrt.graph(g2, stream=s):
            side.wait_stream(s)
            side.launch(seen, "unjoined")
    assert not side.is_capturing()


def test_uncapturable_calls_raise_and_invalidate():
    s = streamrt.Stream()
    g = streamrt.Graph()
    with pytest.raises(streamrt.Error, match="cannot be captured"):
        with streamrt.graph(g, stream=s):
            s.synchronize()
    assert not s.is_capturing()
    assert g.num_nodes == 0
    # A host read of a tensor written during the capture.
    a = streamrt.ones(8)
    with pytest.raises(streamrt.Error, match="cannot be captured"):
        with streamrt.graph(streamrt.Graph(), stream=s):
            b = a + a
            b.numpy()


def test_capture_modes():
    s = streamrt.Stream()
    with pytest.raises(ValueError, match="capture_error_mode"):
        with streamrt.graph(streamrt.Graph(), stream=s, capture_error_mode="loose"):
            pass
    errors = []

    def sync_elsewhere():
        try:
            streamrt.synchronize()
        except streamrt.Error as e:
            errors.append(e)

    g = streamrt.Graph()
    with streamrt.graph(g, stream=s, capture_error_mode="thread_local"):
        t = threading.Thread(target=sync_elsewhere)
        t.start()
        t.join(RENDEZVOUS_S)
        s.launch(lambda: None)
    assert errors == []
    assert g.num_nodes == 1


def test_reset_and_errors_of_misuse():
    g = streamrt.Graph()
    with pytest.raises(streamrt.Error, match="nothing captured"):
        g.replay()
    s = streamrt.Stream()
    with streamrt.graph(g, stream=s):
        s.launch(lambda: None)
    with pytest.raises(streamrt.Error, match="reset"):
        with streamrt.graph(g, stream=s):
            pass
    g.reset()
    assert g.num_nodes == 0
    with streamrt.graph(g, stream=s):
        s.launch(lambda: None)
    assert g.num_nodes == 1
    assert "digraph" in g.to_dot()
    with pytest.raises(TypeError):
        streamrt.graph(object())
    with pytest.raises(streamrt.Error, match="nested"):
        nested_capture(s)


def test_event_recorded_in_a_capture_stands_for_the_latest_replay():
    gate = threading.Event()
    s = streamrt.Stream()
    g = streamrt.Graph()
    with streamrt.graph(g, stream=s):
        s.launch(lambda: gate.wait(RENDEZVOUS_S))
        e = s.record_event()
    e.synchronize()  # never replayed: nothing to wait for
    streamrt.wait_all([e])
    g.replay(s)
    assert not e.query()  # the replay is held at the gate
    gate.set()
    e.synchronize()
    streamrt.wait_all([e])
    assert e.query()


def test_memory_of_a_tensor_written_in_a_failed_capture_is_released():
    s = streamrt.Stream()
    a = streamrt.ones(1 << 16)
    with pytest.raises(streamrt.Error, match="cannot be captured"):
        with streamrt.graph(streamrt.Graph(), stream=s):
            b = a + a
            b.numpy()
    del b
    s.synchronize()
    streamrt.empty_cache()
    assert streamrt.memory_stats()["bytes_cached"] == 0
