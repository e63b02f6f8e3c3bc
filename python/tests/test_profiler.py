"""The profiler from Python: records of ops and launched callables per stream, Chrome trace and
SVG timeline export."""

import json

import pytest

import streamrt


def test_profile_records_ops_and_launches_per_stream(tmp_path):
    s1, s2 = streamrt.Stream(), streamrt.Stream()
    a = streamrt.randn(64, 64, seed=1)
    a.wait()

    def python_step():
        pass

    with streamrt.profile() as p:
        assert p.running
        p.name_stream(s1, "matmul stream")
        with s1:
            streamrt.matmul(a, a)
        with s2:
            streamrt.relu(a)
        s2.launch(python_step)
        streamrt.synchronize()
    assert not p.running
    records = p.records()
    by_label = {}
    for r in records:
        by_label.setdefault(r.label, set()).add(r.stream_id)
        assert r.start_ns <= r.end_ns
    assert s1.id in by_label["matmul"]
    assert s2.id in by_label["relu"]
    labels = [label for label in by_label if label.endswith("python_step")]
    assert labels and s2.id in by_label[labels[0]]
    assert "TraceRecord(label=" in repr(records[0])

    trace = tmp_path / "trace.json"
    p.export_chrome_trace(trace)
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e.get("name") for e in events}
    assert {"matmul", "relu"} <= names
    assert "matmul stream" in trace.read_text()
    svg = tmp_path / "timeline.svg"
    p.export_timeline_svg(str(svg), title="test")
    assert svg.read_text().lstrip().startswith(("<svg", "<?xml"))


def test_only_one_profiler_at_a_time():
    with streamrt.profile():
        with pytest.raises(streamrt.Error):
            streamrt.Profiler().start()
