"""torch 2.x's own stream surfaces after install(): `torch.get_device_module("cpu")` hands out
streamrt's streams and events with 2.x's signatures, device-agnostic code gets real overlap, and
uninstall() gives torch its stubs back. `torch.Stream`/`torch.Event` and `torch.accelerator` stay
torch's (docs/torch.md, "torch 2.x's stream surfaces"): these tests pin what they do."""

import pathlib
import subprocess
import sys

import pytest

import streamrt
from helpers import RENDEZVOUS_S
from torch_streams_util import Gate, torch

NAMES = ["Stream", "Event", "StreamContext", "stream", "current_stream", "synchronize"]

needs_2x = pytest.mark.skipif(
    not hasattr(torch, "get_device_module"), reason="torch 1.13 has no get_device_module"
)


@pytest.fixture
def stubs():
    """torch.cpu's own objects, before install(); installed for the test, uninstalled after."""
    import streamrt.torch as st

    before = {name: getattr(torch.cpu, name, None) for name in NAMES}
    st.install()
    yield before
    st.uninstall()
    Gate.open_all()


@needs_2x
@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_get_device_module_hands_out_streamrt_and_uninstall_restores(stubs, device):
    import streamrt.torch as st

    mod = torch.get_device_module(device)
    assert isinstance(mod.Stream(), streamrt.Stream)
    assert isinstance(mod.Event(), streamrt.Event)
    assert isinstance(mod.current_stream(), streamrt.Stream)
    st.uninstall()
    assert all(getattr(torch.cpu, name) is stubs[name] for name in NAMES)
    st.install()


@needs_2x
def test_the_2x_signatures_work_and_do_real_work(stubs):
    mod = torch.get_device_module("cpu")
    s = mod.Stream(priority=-1)
    assert mod.current_stream(None) is not None and mod.current_stream("cpu") is not None
    assert mod.current_stream(torch.device("cpu")) == mod.current_stream()
    x = torch.zeros(1000)
    gate = Gate().hold(s)
    with mod.stream(s):
        x.add_(1)
        event = s.record_event()  # no argument: a new event, as torch.cuda's
    assert not event.query() and not s.query()
    other = mod.Stream()
    other.wait_event(event)
    other.wait_stream(s)
    gate.open()
    event.synchronize()
    assert event.query() and x[0].item() == 1.0
    mod.synchronize(None)
    mod.synchronize("cpu")
    mod.synchronize(0)


@needs_2x
def test_device_agnostic_code_runs_its_two_streams_apart(stubs):
    """A stream held at a gate does not hold the other: the stubs would run both in order."""
    mod = torch.get_device_module(torch.device("cpu"))
    compute, handoff = mod.current_stream(), mod.Stream()
    gate = Gate().hold(handoff)
    a = torch.ones(64, 64)
    with mod.stream(handoff):
        b = a * 2
        ready = handoff.record_event()
    with mod.stream(compute):
        c = a @ a
    assert compute.synchronize() is None  # returns while the hand-off is still held
    assert not ready.query()
    gate.open()
    compute.wait_event(ready)
    assert torch.equal(b + c, a * 2 + a @ a)


@needs_2x
def test_torch_stream_and_event_stay_torchs_no_op_handles(stubs):
    s = torch.Stream(device="cpu")
    assert not isinstance(s, streamrt.Stream)
    assert s.query() is True and s.synchronize() is None
    with pytest.raises(RuntimeError, match="cpu backend doesn't support events"):
        s.record_event()
    e = torch.Event(device="cpu")
    assert not isinstance(e, streamrt.Event)
    with pytest.raises(TypeError, match="torch.cpu.Stream"):
        torch.cpu.StreamContext(s)


@needs_2x
def test_torch_accelerator_is_left_as_torch_has_it(stubs):
    import streamrt.torch as st

    st.uninstall()
    before = torch.accelerator.current_accelerator()
    st.install()
    assert torch.accelerator.current_accelerator() == before
    if before is None or before.type != "cpu":
        with pytest.raises((ValueError, RuntimeError)):
            torch.accelerator.synchronize("cpu")


def test_the_device_agnostic_example_matches_in_order_results():
    examples = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
    example = examples / "device_agnostic_streams.py"
    proc = subprocess.run(
        [sys.executable, str(example), "--layers", "3", "--width", "64", "--batch", "32",
         "--reps", "1"],
        capture_output=True, text=True, timeout=RENDEZVOUS_S * 10,
    )
    assert proc.returncode == 0, proc.stderr
    assert "matches the in-order result: True" in proc.stdout, proc.stdout
