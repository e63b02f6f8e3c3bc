"""Shared fixtures for the streamrt Python tests.

Run with Debian's interpreter against the built package, e.g.
``PYTHONPATH=build/python /usr/bin/python3 -m pytest python/tests`` (``make test-python``).
"""

import faulthandler
import os
import sys

import pytest

import streamrt

# A test that hangs (a deadlock would) is turned into a failure with every thread's stack printed,
# instead of blocking the run forever. Far above any test's normal duration.
# STREAMRT_TEST_HANG_S overrides it (e.g. shorter when checking that a broken build hangs).
HANG_TIMEOUT_S = float(os.environ.get("STREAMRT_TEST_HANG_S", "240"))


_REAL_STDERR_FD = None


def pytest_configure(config):
    # pytest captures fd 2 while tests run, and a hang dump ends the process before the capture
    # is printed: keep a descriptor of the real stderr for the dump.
    global _REAL_STDERR_FD
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.suspend_global_capture(in_=False)
    try:
        _REAL_STDERR_FD = os.dup(sys.stderr.fileno())
    finally:
        if capman is not None:
            capman.resume_global_capture()


@pytest.fixture(autouse=True)
def _fail_on_hang(request):
    out = _REAL_STDERR_FD if _REAL_STDERR_FD is not None else sys.stderr
    faulthandler.dump_traceback_later(HANG_TIMEOUT_S, exit=True, file=out)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def workers():
    """set_num_threads(n) for the test; the previous worker count is restored afterwards."""
    before = streamrt.get_num_threads()

    def set_workers(n):
        streamrt.set_num_threads(n)
        assert streamrt.get_num_threads() == n

    yield set_workers
    streamrt.synchronize()
    streamrt.set_num_threads(before)

