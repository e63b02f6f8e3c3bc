"""Failures that say where they came from (docs/reliability.md): a failure of stream work raised
by a later wait names the failed work and the line of Python that launched it, keeping the
exception's type; launch-blocking mode (STREAMRT_LAUNCH_BLOCKING=1, set_launch_blocking) raises
it at that line instead."""

import os
import sys

import pytest

import streamrt
from helpers import run_python

HERE = os.path.basename(__file__)
CHILD_TIMEOUT_S = 120  # a hang fails the test; a normal run takes a second or two


def where(e):
    """The exception's text and notes, as a traceback shows them."""
    return "\n".join([str(e)] + list(getattr(e, "__notes__", [])))


def line_after():
    """The line number after the caller's line (the call under test is put there)."""
    return sys._getframe(1).f_lineno + 1


def test_an_op_failure_raised_later_names_the_op_and_the_line():
    s = streamrt.Stream()
    a = streamrt.zeros(4)
    with s:
        line = line_after()
        b = a[streamrt.tensor([7])]  # out of range: fails on a worker
    with pytest.raises(streamrt.Error, match="out of range") as info:
        s.synchronize()
    text = where(info.value)
    assert "'index_select'" in text, text
    assert f"{HERE}:{line}" in text, text
    del b


def test_a_callable_failure_keeps_its_type_and_names_the_launch_line():
    s = streamrt.Stream()
    line = line_after()
    s.launch(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError) as info:
        s.synchronize()
    assert f"{HERE}:{line}" in where(info.value), where(info.value)


def test_the_line_is_the_callers_not_a_helper_in_streamrt():
    # A launch from a function of this file names the line inside it that called streamrt.
    s = streamrt.Stream()

    def launch_it():
        s.launch(lambda: {}["k"])  # the line named

    launch_line = launch_it.__code__.co_firstlineno + 1
    launch_it()
    with pytest.raises(KeyError) as info:
        s.synchronize()
    assert f"{HERE}:{launch_line}" in where(info.value), where(info.value)


@pytest.fixture
def launch_blocking():
    streamrt.set_launch_blocking(True)
    try:
        yield
    finally:
        streamrt.set_launch_blocking(False)


def test_set_launch_blocking_raises_at_the_launch(launch_blocking):
    assert streamrt.get_launch_blocking()
    s = streamrt.Stream()
    with pytest.raises(ZeroDivisionError):
        s.launch(lambda: 1 / 0)
    a = streamrt.zeros(4)
    with s:
        with pytest.raises(streamrt.Error, match="out of range"):
            a[streamrt.tensor([7])]
        assert (a + 1).numpy().tolist() == [1.0] * 4  # the stream goes on
    s.synchronize()  # nothing left to report


def run_script(body, env=None):
    return run_python(body, CHILD_TIMEOUT_S, env)


SCRIPT = """
    import streamrt, traceback
    s = streamrt.Stream()
    try:
        s.launch(lambda: 1 / 0)  # line 5
        s.synchronize()  # line 6
    except ZeroDivisionError as e:
        print("raised at line", traceback.extract_tb(e.__traceback__)[0].lineno)
"""


@pytest.mark.parametrize("value, line", [("1", 5), ("0", 6)])
def test_the_environment_variable_raises_a_failure_at_its_launch(value, line):
    proc = run_script(SCRIPT, {"STREAMRT_LAUNCH_BLOCKING": value})
    assert proc.returncode == 0, proc.stderr
    assert f"raised at line {line}\n" in proc.stdout, proc.stdout + proc.stderr


def test_a_bad_value_of_the_variable_is_a_clear_error():
    proc = run_script("import streamrt; streamrt.Stream()", {"STREAMRT_LAUNCH_BLOCKING": "yes"})
    assert proc.returncode != 0
    assert "STREAMRT_LAUNCH_BLOCKING='yes' is not a switch" in proc.stderr, proc.stderr
