"""torch.compile under streamrt.torch: a compiled call waits for the queued writes to its inputs
(and a compiled module's parameters), and for their queued reads when it may write them, inside a
stream context and outside one; its results are ordinary tensors that stream work can use. Each
queued access is held behind a gate that opens a little later, so a call that did not wait would
see the old values."""

import pytest

from helpers import RENDEZVOUS_S
from torch_streams_util import (  # noqa: F401  (fixture)
    Gate, held_write, installed, on_another_thread, srt, torch)

if not hasattr(torch, "compile"):
    pytest.skip("torch 1.13 has no torch.compile", allow_module_level=True)

@pytest.fixture(scope="module")
def affine():
    """One compiled function for the module's tests (compiling takes seconds)."""
    return lambda: torch.compile(lambda x, y: x * 2 + y)


@pytest.mark.parametrize("where", ["inside a context", "outside contexts", "another thread"])
def test_a_compiled_call_waits_for_its_inputs_writers(installed, affine, where):
    f = affine()
    x, y = torch.zeros(1000), torch.ones(1000)
    f(x, y)  # compiled outside any stream work
    held_write(srt.Stream(), x, 5.0).open_later()
    if where == "inside a context":
        with torch.cpu.StreamContext(srt.Stream()):
            out = f(x, y)
    elif where == "outside contexts":
        out = f(x, y)
    else:
        thread, got = on_another_thread(lambda: f(x, y))
        thread.join(RENDEZVOUS_S)
        assert not thread.is_alive() and "error" not in got, got.get("error")
        out = got["value"]
    assert torch.equal(out, torch.full((1000,), 11.0))


def test_a_compiled_call_that_writes_its_input_waits_for_its_readers(installed):
    @torch.compile
    def scale_(x):
        x.mul_(3)
        return x.sum()

    x = torch.ones(1000)
    scale_(torch.ones(1000))
    s = srt.Stream()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        before = x.sum()  # a queued read of x
    gate.open_later()
    assert scale_(x).item() == 3000.0
    assert before.item() == 1000.0, "the compiled call wrote x before its queued reader read it"


def test_a_compiled_module_waits_for_its_parameters(installed):
    lin = torch.nn.Linear(8, 8)
    compiled = torch.compile(lin)
    x = torch.ones(2, 8)
    compiled(x)
    s = srt.Stream()
    gate = Gate().hold(s)
    with torch.no_grad(), torch.cpu.StreamContext(s):
        lin.weight.zero_()
        lin.bias.fill_(7)
    gate.open_later()
    with torch.no_grad():
        assert torch.equal(compiled(x), torch.full((2, 8), 7.0))
    assert isinstance(compiled, torch.nn.Module) and compiled.training


def test_compiled_results_feed_stream_work(installed, affine):
    f = affine()
    x, y = torch.ones(64), torch.ones(64)
    with torch.cpu.StreamContext(srt.Stream()):
        z = f(x, y)
        w = z * z
    assert torch.equal(w, torch.full((64,), 9.0))


def test_uninstall_gives_torch_its_own_compile_back():
    import streamrt.torch as st

    original = torch.compile
    st.install()
    try:
        assert torch.compile is not original
    finally:
        st.uninstall()
    assert torch.compile is original
