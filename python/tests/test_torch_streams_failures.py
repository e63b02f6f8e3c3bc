"""Failures of enqueued torch ops: a shape or dtype error is raised at the call, as eager torch
raises it; a failure inside a kernel follows the stream's failure rules (raised at the next host
read or synchronize of what it affects, not sticky: later work goes on)."""

import pytest

import streamrt
from torch_streams_util import installed, srt, torch  # noqa: F401  (fixture)


def eager_error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


@pytest.mark.parametrize(
    "bad",
    [
        lambda: torch.ones(3) + torch.ones(4),
        lambda: torch.mm(torch.ones(2, 3), torch.ones(4, 5)),
        lambda: torch.ones(2, 2).add_(torch.ones(3, 3)),
        lambda: torch.ones(3, dtype=torch.int64).add_(torch.ones(3) * 0.5),
        lambda: torch.cat([torch.ones(2, 3), torch.ones(2, 4)]),
        lambda: torch.ones(3).view(2, 2),
    ],
    ids=["broadcast", "mm shapes", "in-place shape", "in-place dtype", "cat", "view"],
)
def test_errors_found_by_inference_are_raised_at_the_call_as_eager(installed, bad):
    expected = eager_error(bad)
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        with pytest.raises(type(expected)) as info:
            bad()
    assert str(info.value) == str(expected)
    s.synchronize()  # nothing was enqueued that fails


def test_an_error_the_meta_kernel_misses_is_a_kernel_failure(installed):
    # torch 1.13's meta kernel of mm does not compare dtypes; the CPU kernel does, on the worker:
    # the error follows the failure rules below (docs/torch.md, "Failures").
    expected = eager_error(lambda: torch.mm(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64)))
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        r = torch.mm(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64))
    with pytest.raises(type(expected)) as info:
        r.tolist()
    assert str(info.value) == str(expected)


def test_a_kernel_failure_is_raised_by_the_read_of_what_it_affects(installed):
    s = torch.cpu.Stream()
    x = torch.arange(5.0)
    with torch.cpu.StreamContext(s):
        bad = torch.index_select(x, 0, torch.tensor([1, 50]))  # out of range: fails on a worker
        after = bad * 2  # depends on the failed op: skipped
        fine = x + 1  # does not, but is on the failed stream
    with pytest.raises(IndexError, match="out of range"):
        after.tolist()
    # The read reported the failure: new work on the stream runs (rule 10), old work stays failed.
    with torch.cpu.StreamContext(s):
        later = x * 10
    assert later.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0]
    with pytest.raises(IndexError):
        bad.sum().item()
    with pytest.raises(IndexError):
        fine.tolist()  # submitted before the report: skipped with the stream


def test_a_kernel_failure_is_raised_by_synchronize_once(installed):
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        torch.index_select(torch.ones(3), 0, torch.tensor([7]))
    with pytest.raises(IndexError):
        s.synchronize()
    s.synchronize()  # reported: not sticky
    with torch.cpu.StreamContext(s):
        y = torch.ones(3) * 2
    assert y.tolist() == [2.0] * 3


def test_a_failure_flows_to_readers_on_other_streams(installed):
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    with torch.cpu.StreamContext(s1):
        bad = torch.index_select(torch.ones(3), 0, torch.tensor([9]))
    with torch.cpu.StreamContext(s2):
        consumer = bad + 1
    with pytest.raises(IndexError):
        consumer.item()
    with pytest.raises(IndexError):
        s1.synchronize()


def test_a_streamrt_error_is_not_raised_for_torch_ops(installed):
    # torch's own exception types reach the host: a reader sees IndexError, not streamrt.Error.
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        bad = torch.ones(2)[torch.tensor([5])]
    with pytest.raises(IndexError) as info:
        bad.tolist()
    assert not isinstance(info.value, streamrt.Error)
