"""Names torch users type work, or fail with a message saying why; messages
use Python spelling, not the C++ library's."""

import re

import pytest

import streamrt
from streamrt import cpu


def test_event_accepts_torch_constructor_arguments():
    e = streamrt.Event(enable_timing=True, blocking=False, interprocess=False, device="cpu")
    assert e.enable_timing
    e.record()
    e.synchronize()
    assert streamrt.Event(device=0).state == "not_recorded"
    assert streamrt.Event(device=streamrt.Device("cpu")).state == "not_recorded"


def test_interprocess_events_are_refused_saying_why():
    with pytest.raises(streamrt.Error, match="interprocess.*one\\s+process.*multiprocessing"):
        streamrt.Event(interprocess=True)


def test_an_event_on_a_device_without_a_backend_is_refused():
    with pytest.raises(streamrt.Error, match="cuda"):
        streamrt.Event(device="cuda")


def test_record_stream_is_accepted_and_needs_nothing():
    s = streamrt.Stream()
    with s:
        x = streamrt.ones(3)
    x.record_stream(s)
    other = streamrt.Stream()
    with other:
        y = x + 1  # tracking orders it after x's writer without record_stream
    assert y.numpy().tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError, match="streamrt.Stream"):
        x.record_stream("not a stream")


def test_int_device_indices():
    assert streamrt.Device(0) == "cpu:0"
    streamrt.synchronize(0)
    cpu.synchronize(0)
    assert streamrt.current_stream(0) == streamrt.current_stream()
    assert streamrt.default_stream(0).id == 0
    assert streamrt.Stream(0).device == "cpu"
    with pytest.raises(ValueError, match="out of range; it must be from 0 to"):
        streamrt.synchronize(-1)
    with pytest.raises(streamrt.Error, match="index"):
        streamrt.synchronize(5)  # a device that does not exist


def test_cpu_set_device():
    cpu.set_device("cpu")
    cpu.set_device(0)
    cpu.set_device(streamrt.Device("cpu:0"))
    with pytest.raises(ValueError, match="one CPU device"):
        cpu.set_device(1)
    with pytest.raises(ValueError, match="CPU device"):
        cpu.set_device("cuda")


def test_stream_attributes_torch_names():
    s = streamrt.Stream()
    assert s.stream_id == s.id
    assert s.device_index == 0
    assert s.device_type == 0  # torch's DeviceType number for the CPU


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", streamrt.__version__)


def test_messages_use_python_spelling():
    ints = streamrt.arange(4)
    with pytest.raises(ValueError) as info:
        streamrt.mean(ints)
    msg = str(info.value)
    assert "streamrt.float64" in msg and "DType::" not in msg, msg
    start, end = streamrt.Event(), streamrt.Event()
    start.record()
    end.record()
    with pytest.raises(streamrt.Error) as info:
        start.elapsed_time(end)
    msg = str(info.value)
    assert "Event(enable_timing=True)" in msg and "EventOptions" not in msg, msg
    with pytest.raises(streamrt.Error) as info:
        streamrt.zeros(2, device="cuda")
    msg = str(info.value)
    assert '"cpu"' in msg and "Device{" not in msg and "DeviceType::" not in msg, msg
    s = streamrt.Stream()
    s.launch(lambda: streamrt.current_stream().synchronize())
    with pytest.raises(streamrt.Error) as info:
        s.synchronize()
    msg = str(info.value)
    assert "Stream.synchronize()" in msg and "::" not in msg, msg
