"""Errors raised to Python name the Python calls (Graph.capture_end, Stream.synchronize, ...), never
the C++ ones they come from (end_capture, begin_capture, Class::member, exec.launch())."""

import re

import pytest

import streamrt
import helpers

CPP_NAMES = re.compile(r"::|\bend_capture\b|\bbegin_capture\b|\bexec\.launch\b|GraphExec|instantiate")


def invalidated_by_synchronize():
    g = streamrt.Graph()
    g.capture_begin()
    try:
        streamrt.current_stream().synchronize()
    finally:
        g.capture_end()


def nested_capture():
    helpers.nested_capture(streamrt.Stream())


def unjoined_stream():
    s, s2 = streamrt.Stream(), streamrt.Stream()
    g = streamrt.Graph()
    g.capture_begin(s)
    e = streamrt.Event()
    e.record(s)
    s2.wait_event(e)
    with s2:
        streamrt.zeros(3)
    g.capture_end()


def host_read_in_capture():
    with streamrt.graph(streamrt.Graph()):
        streamrt.ones(3).numpy()


def event_query_in_capture():
    with streamrt.graph(streamrt.Graph()):
        e = streamrt.Event()
        e.record()
        e.query()


def elapsed_time_of_captured_events():
    with streamrt.graph(streamrt.Graph()):
        a, b = streamrt.Event(enable_timing=True), streamrt.Event(enable_timing=True)
        a.record()
        b.record()
    a.elapsed_time(b)


def synchronize_from_stream_work():
    s = streamrt.Stream()
    s.launch(s.synchronize)
    s.synchronize()


CASES = [invalidated_by_synchronize, nested_capture, unjoined_stream, host_read_in_capture,
         event_query_in_capture, elapsed_time_of_captured_events, synchronize_from_stream_work]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_messages_name_python_calls(case):
    with pytest.raises(streamrt.Error) as info:
        case()
    message = str(info.value)
    assert not CPP_NAMES.search(message), message
    streamrt.synchronize()  # nothing left failed behind


def test_the_capture_end_after_an_invalidated_capture_names_python_calls():
    g = streamrt.Graph()
    g.capture_begin()
    with pytest.raises(streamrt.Error):
        streamrt.current_stream().synchronize()
    with pytest.raises(streamrt.Error, match=r"^Graph\.capture_end: the capture was invalidated") as info:
        g.capture_end()
    assert not CPP_NAMES.search(str(info.value))
