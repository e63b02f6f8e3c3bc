"""Shared pieces of the streamrt.torch tests (test_torch_streams_*.py): the install fixture, a gate
that holds a stream, and a host read started while the work it needs is held back."""

import threading

import pytest

import streamrt
from helpers import RENDEZVOUS_S

torch = pytest.importorskip(
    "torch", reason="torch is not importable here (Debian: apt-get install python3-torch): "
    "streamrt.torch is untested"
)
import streamrt.torch as srt  # noqa: E402  (needs torch)


from streamrt import _torch_mode, _torch_submit  # noqa: E402

# Ops are submitted through _streamrt_torch (its kernel runner and fast path) where it was built
# (torch's C++ API), and through Python otherwise: tests that take `installed` run both ways.
PATHS = ["native", "python"] if _torch_submit.native() is not None else ["python"]


def use_path(name):
    """Submits through `name` (a PATHS entry; "native": the best native path) from install() on."""
    path = _torch_mode.use(None if name == "native" else name)
    assert (path.native is not None) == (name == "native"), path.name
    return path


@pytest.fixture(params=PATHS)
def installed(workers, request):
    """streamrt.torch installed for the test (with 4 workers: gates hold some), uninstalled after,
    also when the test failed; once per way of running work items (PATHS)."""
    workers(4)
    use_path(request.param)
    srt.install()
    try:
        yield srt
    finally:
        _torch_mode.use()
        Gate.open_all()  # a failed test may leave one closed
        try:
            streamrt.synchronize()
        except Exception:  # a test's deliberate failure, already checked by the test
            pass
        srt.uninstall()


class Gate:
    """Holds the streams it is put on (one worker each) until open()."""

    _all = []

    def __init__(self):
        self._event = threading.Event()
        Gate._all.append(self)

    @classmethod
    def open_all(cls):
        for gate in cls._all:
            gate.open()
        cls._all.clear()

    def hold(self, stream):
        stream.launch(self._wait)
        return self

    def _wait(self):
        if not self._event.wait(RENDEZVOUS_S):
            raise AssertionError("a gate was never opened")

    def open(self):
        self._event.set()

    def open_later(self, delay_s=0.2):
        """Opens the gate from another thread after `delay_s`: a host read that does not wait for
        the held work runs before that and sees the old values."""
        timer = threading.Timer(delay_s, self.open)
        timer.daemon = True
        timer.start()
        return timer


def run_per_seed(run, seeds):
    """Calls run(seed) for every seed, each on its own thread, all at once; joins them
    (RENDEZVOUS_S each at most: the caller checks what they produced)."""
    threads = [threading.Thread(target=run, args=(seed,)) for seed in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(RENDEZVOUS_S)


def assert_same_results(expected, got, seeds):
    """Each seed's tensors in `got` equal those in `expected` (float rounding aside)."""
    assert set(got) == set(seeds)
    for seed in seeds:
        for e, r in zip(expected[seed], got[seed]):
            assert torch.allclose(e, r, rtol=1e-5, atol=1e-6)


def on_another_thread(fn):
    """Runs fn() on a new thread that never entered a stream context; returns the thread and a dict
    that gets fn's result ("value") or exception ("error")."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001  (reported by the caller)
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


def held_write(stream, tensor, value):
    """Holds `stream` behind a gate and enqueues `tensor.fill_(value)` on it; returns the gate."""
    gate = Gate().hold(stream)
    with torch.cpu.StreamContext(stream):
        tensor.fill_(value)
    return gate


def first_then_second(s1, s2, gate, first, second):
    """Calls first() in a context on s1 (held by `gate`) and then second() in one on s2, checks
    that second's result is still pending (its work must wait for s1's), opens the gate and
    returns both results: the two-stream shape of the hazard tests."""
    with torch.cpu.StreamContext(s1):
        a = first()
    with torch.cpu.StreamContext(s2):
        b = second()
    assert not srt.ready(b)
    gate.open()
    return a, b
