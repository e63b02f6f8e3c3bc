"""An op with no out= kernel of its own (a convolution, relu, a dtype conversion, a flip)
computes its result straight into the output handed out at its call, where it allocates that
result first (docs/torch.md, "Memory"): no copy, and the result exactly eager's. The output's
memory goes to the op's first allocation of exactly its bytes; whatever the op does with it, the
output ends up holding the result, or the op fails loudly."""

import subprocess
import sys

import pytest

from helpers import RENDEZVOUS_S
from streamrt import _torch_mode, _torch_submit
from torch_streams_util import installed, srt, torch  # noqa: F401  (fixture)

native = _torch_submit.native()
pytestmark = pytest.mark.skipif(
    native is None, reason="streamrt._streamrt_torch is not built here: every op is copied")


@pytest.fixture
def fast(installed):
    if _torch_mode.path().guard is None:
        pytest.skip("only the fast path runs functional ops natively")
    assert native.handover_available()
    yield
    native._use_handover(True)


def stats():
    return native.handover_stats()


def cached_output(shape, dtype=torch.float32):
    """An output as a stream op gets it: on the output cache's memory."""
    t = torch.empty(shape, dtype=dtype)
    return native.empty_output(list(t.shape), list(t.stride()), dtype)


FUNCTIONAL = {
    "conv2d, one channel": lambda x, w: torch.nn.functional.conv2d(
        x.view(-1, 1, 32, 32), w[:1, :1], padding=1),
    "conv2d with bias": lambda x, w: torch.nn.functional.conv2d(x, w, w[0, 0, 0], padding=1),
    "relu": lambda x, w: torch.relu(x),
    "to double": lambda x, w: x.double(),
    "flip": lambda x, w: x.flip(0),
    "ones_like": lambda x, w: torch.ones_like(x),
    "sum": lambda x, w: x.sum(),
}


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_ops_compute_in_their_outputs(fast, name):
    fn = FUNCTIONAL[name]
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(8, 3, 32, 32, generator=g), torch.randn(3, 3, 3, 3, generator=g)
    s = torch.cpu.Stream()
    with torch.no_grad():
        for _ in range(2):  # the first calls are checked and teach the fast path
            with torch.cpu.StreamContext(s):
                fn(x, w)
            s.synchronize()
        before = stats()
        with torch.cpu.StreamContext(s):
            outs = [fn(x, w) for _ in range(5)]
        s.synchronize()
        after = stats()
        expected = fn(x, w)
    for out in outs:
        assert torch.equal(out, expected)
        assert out.stride() == expected.stride()
    assert after["in_place"] - before["in_place"] == 5
    assert after["copied"] == before["copied"]


@pytest.mark.parametrize("on, counted", [(True, "in_place"), (False, "copied")])
def test_the_output_takes_the_first_allocation_of_its_size_unless_switched_off(fast, on, counted):
    native._use_handover(on)
    out = cached_output((64, 64))
    before = stats()
    native._handover_run(out, lambda: torch.empty(64, 64).fill_(3.0))
    assert torch.equal(out, torch.full((64, 64), 3.0))
    assert stats()[counted] == before[counted] + 1


def test_a_temporary_on_the_outputs_memory_is_not_the_result(fast):
    out = cached_output((64, 64))
    before = stats()

    def op():
        temporary = torch.empty(64, 64).fill_(7.0)  # takes the output's memory
        return torch.full((64, 64), 2.0) + temporary * 0

    native._handover_run(out, op)
    assert torch.equal(out, torch.full((64, 64), 2.0))
    assert stats()["copied"] == before["copied"] + 1


def test_a_result_on_the_outputs_memory_with_another_layout_is_copied_first(fast):
    src = torch.arange(64 * 64, dtype=torch.float32).view(64, 64)
    out = cached_output((64, 64))

    def op():
        t = torch.empty(64, 64)  # takes the output's memory
        t.copy_(src)
        return t.t()  # the result lies there, transposed

    native._handover_run(out, op)
    assert torch.equal(out, src.t())


def test_an_op_that_keeps_the_outputs_memory_fails_loudly(fast):
    out = cached_output((64, 64)).fill_(1.0)
    kept = []

    def op():
        kept.append(torch.empty(64, 64).fill_(9.0))  # takes the output's memory, and keeps it
        return torch.full((64, 64), 2.0)

    with pytest.raises(RuntimeError, match="kept a tensor of its own"):
        native._handover_run(out, op)
    assert torch.equal(kept[0], torch.full((64, 64), 9.0))  # what it kept is untouched


RAW = """
import torch, streamrt.torch as srt
from streamrt import _torch_submit
srt.install()
native = _torch_submit.native()
assert native.handover_available()
out = native.empty_output([64, 64], [64, 1], torch.float32)
def op():
    native._raw_roundtrip(64 * 64 * 4)  # raw_allocate() takes its memory; raw_deallocate()
    return torch.full((64, 64), 4.0)
native._handover_run(out, op)
assert torch.equal(out, torch.full((64, 64), 4.0))
native._raw_roundtrip(64 * 64 * 4)  # torch's own memory, given back to torch's allocator
print("ok")
"""


def test_raw_allocations_may_take_the_outputs_memory(fast):
    # In a process of its own: a raw_deallocate() that freed the output's memory as malloc's
    # would abort it.
    out = subprocess.run([sys.executable, "-c", RAW], capture_output=True, text=True,
                         timeout=RENDEZVOUS_S)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_other_sizes_and_memory_not_from_the_cache_are_not_handed_over(fast):
    before = stats()
    out = cached_output((64, 64))
    native._handover_run(out, lambda: torch.empty(64, 65)[:, :64].fill_(1.0))
    plain = torch.empty(64, 64)  # torch's memory, not an output's
    native._handover_run(plain, lambda: torch.empty(64, 64).fill_(2.0))
    assert torch.equal(out, torch.ones(64, 64)) and torch.equal(plain, torch.full((64, 64), 2.0))
    after = stats()
    assert (after["in_place"], after["copied"]) == (before["in_place"], before["copied"] + 2)


def test_a_result_of_other_sizes_fails_naming_them(fast):
    out = cached_output((64, 64))
    with pytest.raises(RuntimeError, match="returned a result of sizes"):
        native._handover_run(out, lambda: torch.zeros(8))


def test_results_of_an_op_with_several_outputs_of_other_sizes_fail_naming_them(fast):
    outs = [cached_output((3,)), cached_output((2,))]
    # The second result would broadcast into its output: a silent wrong value without the check.
    with pytest.raises(RuntimeError, match=r"returned a result of sizes \[1\]"):
        native._copy_results(outs, lambda: (torch.ones(3), torch.ones(1)))
    with pytest.raises(RuntimeError, match="dtype"):
        native._copy_results(outs, lambda: (torch.ones(3), torch.ones(2, dtype=torch.float64)))
    native._copy_results(outs, lambda: (torch.full((3,), 2.0), torch.full((2,), 5.0)))
    assert outs[0].tolist() == [2.0] * 3 and outs[1].tolist() == [5.0] * 2
