"""Errors the C++ library raises name the Python API, never the C++ one: the library keeps the
names a message mentions apart from its text, and the binding spells each the Python way
(Stream::synchronize -> Stream.synchronize, DType::Float64 -> streamrt.float64,
EventOptions{.enable_timing = true} -> Event(enable_timing=True), Device::parse("cpu") -> "cpu",
Stream::end_capture -> Graph.capture_end, CaptureMode::Relaxed -> capture_error_mode="relaxed")."""

import numpy as np
import pytest

import streamrt


def message(exc_type, call):
    with pytest.raises(exc_type) as info:
        call()
    text = str(info.value)
    assert "::" not in text and "Options{" not in text, text
    return text


def test_dtype_names_are_streamrt_dtypes():
    text = message(ValueError, lambda: streamrt.mean(streamrt.arange(4)))
    assert "to(streamrt.float64)" in text, text
    text = message(ValueError, lambda: streamrt.softmax(streamrt.arange(4), 0))
    assert "to(streamrt.float32)" in text, text


def test_event_options_are_event_arguments():
    start, end = streamrt.Event(), streamrt.Event()
    start.record()
    end.record()
    text = message(streamrt.Error, lambda: start.elapsed_time(end))
    assert text.startswith("Event.elapsed_time: "), text
    assert "(Event(enable_timing=True))" in text, text


def test_devices_are_device_strings():
    text = message(streamrt.Error, lambda: streamrt.Event(device="cuda"))
    assert text.endswith('use "cpu"'), text


def test_calls_are_python_calls():
    s = streamrt.Stream()
    s.launch(lambda: streamrt.current_stream().synchronize())
    text = message(streamrt.Error, s.synchronize)
    assert text.startswith("Stream.synchronize() called from work running on"), text
    s.launch(streamrt.synchronize)
    text = message(streamrt.Error, s.synchronize)
    assert text.startswith("streamrt.synchronize() called from work running on"), text


def test_capture_calls_are_graph_calls():
    s = streamrt.Stream()

    def capture(body, **kwargs):
        def run():
            with streamrt.graph(streamrt.Graph(), stream=s, **kwargs):
                body()
        return run

    text = message(streamrt.Error, capture(s.synchronize))
    assert "Stream.synchronize on a capturing stream" in text, text
    assert "Graph.capture_end" in text and "end_capture" not in text, text
    text = message(streamrt.Error, capture(streamrt.synchronize))
    assert "streamrt.synchronize(device) during a capture in global mode" in text, text
    assert 'use capture_error_mode="relaxed" to allow it' in text, text
    assert not s.is_capturing()



def test_imports_name_the_python_call():
    # Rows that overlap: the C++ check is from_blob's, the message names the call made.
    data = np.arange(10.0)
    windows = np.lib.stride_tricks.as_strided(data, (4, 3), (16, 8))
    for call, name in [(lambda: streamrt.from_numpy(windows), "from_numpy"),
                       (lambda: streamrt.from_dlpack(windows), "from_dlpack"),
                       (lambda: streamrt.asarray(windows, copy=False), "asarray")]:
        text = message(ValueError, call)
        assert text.startswith(name + ": "), text
        assert "distinct elements of the layout" in text, text
        assert "from_blob" not in text, text
