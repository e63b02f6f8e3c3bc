"""streamrt.cpu.Partition: CPU workers reserved for the streams created in it."""

import os
import threading

import pytest

import streamrt
from helpers import RENDEZVOUS_S
from streamrt import cpu


def _allowed():
    return sorted(os.sched_getaffinity(0))


def test_properties_and_streams(workers):
    workers(4)
    p = cpu.Partition(2)
    assert p.num_workers == 2
    assert p.cores == []
    assert "workers=2" in repr(p)
    s = streamrt.Stream(partition=p)
    assert s.device.type == "cpu"
    urgent = streamrt.Stream(priority=-1, partition=p)
    assert urgent.priority == -1
    assert p.new_stream(priority=-2).priority == -2
    assert s.launch(lambda: 7).result() == 7
    # The partition's workers count in the total.
    assert streamrt.get_num_threads() == 4


def test_argument_errors(workers):
    workers(4)
    with pytest.raises(TypeError, match="exactly one of workers"):
        cpu.Partition()
    with pytest.raises(TypeError, match="exactly one of workers"):
        cpu.Partition(1, cores=[_allowed()[0]])
    with pytest.raises(ValueError, match="workers"):
        cpu.Partition(0)
    with pytest.raises(TypeError, match="workers"):
        cpu.Partition("two")
    with pytest.raises(ValueError, match="cores"):
        cpu.Partition(cores=[-1])
    with pytest.raises(ValueError, match="named twice"):
        cpu.Partition(cores=[_allowed()[0]] * 2)
    with pytest.raises(ValueError, match="at least one core"):
        cpu.Partition(cores=[])
    with pytest.raises(TypeError, match="sequence of core ids"):
        cpu.Partition(cores="0")
    with pytest.raises(TypeError, match="streamrt.cpu.Partition"):
        streamrt.Stream(partition=3)
    with pytest.raises(ValueError, match="out of range"):
        cpu.Partition(1).new_stream(priority=5)


def test_state_errors(workers):
    workers(4)
    with pytest.raises(streamrt.Error, match="at most 3"):
        cpu.Partition(4)
    outside = next(c for c in range(1023, -1, -1) if c not in _allowed())
    with pytest.raises(streamrt.Error, match="affinity mask"):
        cpu.Partition(cores=[outside])
    c = _allowed()[0]
    first = cpu.Partition(cores=[c])
    assert first.cores == [c]
    with pytest.raises(streamrt.Error, match="already pinned by another live partition"):
        cpu.Partition(cores=[c])
    held = cpu.Partition(2)
    with pytest.raises(streamrt.Error, match="at least 4"):
        streamrt.set_num_threads(3)
    assert isinstance(held, cpu.Partition)
    assert issubclass(streamrt.Error, RuntimeError)


def test_pinned_worker_runs_on_its_core(workers):
    workers(2)
    c = _allowed()[-1]
    p = cpu.Partition(cores=[c])
    s = p.new_stream()
    assert s.launch(lambda: os.sched_getaffinity(0)).result() == {c}


def test_foreign_items_never_run_on_partition_threads(workers):
    workers(4)
    p = cpu.Partition(2)
    lock = threading.Lock()
    mine, theirs = set(), set()

    def note(into):
        with lock:
            into.add(threading.get_ident())

    meet = threading.Barrier(2, timeout=RENDEZVOUS_S)

    def first():  # two items that meet run on two threads: the partition's two workers
        note(mine)
        meet.wait()

    own = [p.new_stream() for _ in range(2)]
    for s in own:
        s.launch(first)
    bulk = [streamrt.Stream() for _ in range(8)]
    for _ in range(20):
        for s in bulk:
            s.launch(note, theirs)
        for s in own:
            s.launch(note, mine)
    for s in bulk + own:
        s.synchronize()
    main = threading.get_ident()
    mine.discard(main)
    theirs.discard(main)
    assert len(mine) == 2
    assert not mine & theirs


def test_workers_come_back_when_the_partition_is_gone(workers):
    workers(2)
    p = cpu.Partition(1)
    s = p.new_stream()
    ran = []
    for i in range(50):
        s.launch(ran.append, i)
    del p  # the stream keeps the partition, and its queued work runs
    s.synchronize()
    assert ran == list(range(50))
    del s
    # Both workers are the shared pool's again: two shared items meet.
    meet = threading.Barrier(2, timeout=RENDEZVOUS_S)
    a, b = streamrt.Stream(), streamrt.Stream()
    ha, hb = a.launch(meet.wait), b.launch(meet.wait)
    ha.result()
    hb.result()
    assert cpu.Partition(1).num_workers == 1


def test_workers_come_back_whatever_its_streams_leave_behind(workers):
    # A tensor allocated and written on the partition's stream, memory freed into the cache from
    # there, an event and a launch handle of that stream: none of them keeps the workers once the
    # partition and its stream are dropped.
    workers(2)
    p = cpu.Partition(1)
    s = p.new_stream()
    with streamrt.StreamContext(s):
        kept = streamrt.ones(4) + 1
        freed = streamrt.ones(1024) * 2
        handle = s.launch(lambda: 3)
    del freed
    event = s.record_event()
    s.synchronize()
    del p, s
    again = cpu.Partition(1)  # waits for the workers on their way back, refused if they never come
    assert again.num_workers == 1
    assert event.query() and handle.result() == 3
    assert kept.numpy().tolist() == [2.0, 2.0, 2.0, 2.0]
