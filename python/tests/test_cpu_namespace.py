"""streamrt.cpu mirrors torch.cpu (Stream, StreamContext, stream, current_stream, synchronize,
Event, ...), with streams that really run."""

import threading

import pytest

import streamrt
from streamrt import cpu
from helpers import RENDEZVOUS_S


def test_names_of_torch_cpu_are_there():
    for name in ("Stream", "StreamContext", "stream", "current_stream", "synchronize", "Event",
                 "is_available", "device_count", "current_device", "default_stream"):
        assert hasattr(cpu, name), name
    assert cpu.is_available() and cpu.device_count() == 1 and cpu.current_device() == "cpu"
    assert cpu.Stream is streamrt.Stream and cpu.Event is streamrt.Event


def test_cpu_stream_context_and_synchronize():
    s = cpu.Stream()
    assert s.device == "cpu"
    with cpu.StreamContext(s):
        assert cpu.current_stream() == s
    with cpu.stream(s):
        assert cpu.current_stream() == s
    assert cpu.current_stream() == cpu.default_stream() == streamrt.default_stream()
    gate = threading.Event()
    done = []
    s.launch(lambda: (gate.wait(RENDEZVOUS_S), done.append(True)))
    threading.Timer(0.02, gate.set).start()
    cpu.synchronize()
    assert done == [True]


def test_cpu_functions_reject_other_devices():
    with pytest.raises(ValueError, match="expected a CPU device"):
        cpu.synchronize("cuda")
    with pytest.raises(ValueError, match="expected a CPU device"):
        cpu.current_stream("cuda:0")
    with pytest.raises(ValueError, match="invalid device string"):
        cpu.synchronize("gpu")
