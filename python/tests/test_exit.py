"""Interpreter exit with pending work: the work (Python callables and callbacks included)
finishes, nothing crashes or hangs. Each scenario runs in a fresh interpreter."""

import os
import subprocess
import sys
import textwrap

EXIT_TIMEOUT_S = 120  # a hang fails the test; a normal run takes well under a second or two


def run_script(body):
    script = "import streamrt, sys, threading, time\n" + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        env=dict(os.environ),
    )
    return proc


def test_pending_python_work_finishes_at_exit():
    proc = run_script(
        """
        s = streamrt.Stream()
        main_done = threading.Event()
        def work(i):
            assert main_done.wait(30)  # held until the main thread is about to exit
            time.sleep(0.02)
            sys.stdout.write(f"work {i}\\n")
        for i in range(5):
            s.launch(work, i)
        e = s.record_event()
        e.add_done_callback(lambda ev: sys.stdout.write(f"callback {ev.completed}\\n"))
        sys.stdout.write("main exits\\n")
        sys.stdout.flush()
        main_done.set()
        # no synchronize: exit with all five items pending
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["main exits"] + [f"work {i}" for i in range(5)] + [
        "callback True"
    ], (proc.stdout, proc.stderr)


def test_work_queued_by_callbacks_during_exit_also_runs():
    proc = run_script(
        """
        a, b = streamrt.Stream(), streamrt.Stream()
        a.launch(time.sleep, 0.05)
        e = a.record_event()
        def chain(ev):
            b.launch(time.sleep, 0.05)
            b.launch(print, "chained work ran", flush=True)
        e.add_done_callback(chain)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["chained work ran"]


def test_unsynchronized_failure_is_reported_at_exit_with_its_traceback():
    proc = run_script(
        """
        s = streamrt.Stream()
        def failing_job():
            raise LookupError("nobody synchronized on me")
        s.launch(failing_job)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "never synchronized" in proc.stderr
    assert "failing_job" in proc.stderr
    assert "LookupError: nobody synchronized on me" in proc.stderr


def test_every_unsynchronized_failure_is_reported_at_exit_repeats_counted():
    # Two failures in a row with the same text once ended the report: the third stream's
    # KeyError was never printed.
    proc = run_script(
        """
        streams = [streamrt.Stream() for _ in range(4)]
        def divide():
            return 1 / 0
        def look_up():
            return {}["k"]
        def divide_again():
            return 1 / 0
        for s, job in zip(streams, [divide, divide, look_up, divide_again]):
            s.launch(job)
        for s in streams:
            s.launch(time.sleep, 0)  # skipped: the stream failed before it
        """
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "KeyError: 'k'" in err, err
    assert "look_up" in err, err
    # One traceback per kind of failure, and a count of the three ZeroDivisionErrors.
    assert err.count("ZeroDivisionError: division by zero\n") == 1, err
    assert "ZeroDivisionError: division by zero x3" in err, err
    assert "KeyError: 'k' x" not in err, err


def test_daemon_thread_launching_during_exit_neither_crashes_nor_hangs():
    # A daemon thread keeps launching Python work while the interpreter exits: work submitted
    # before streamrt's exit handler runs; later work cannot (the interpreter is going) and is
    # reported, never run on a dead interpreter.
    proc = run_script(
        """
        s = streamrt.Stream()
        ran = []
        started = threading.Event()
        def spam():
            while True:
                s.launch(ran.append, 1)
                started.set()
                time.sleep(0.0005)
        threading.Thread(target=spam, daemon=True).start()
        started.wait(10)
        time.sleep(0.05)
        print("exiting", flush=True)
        """
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.strip() == "exiting"
    assert "Fatal Python error" not in proc.stderr


def test_exit_while_a_callable_is_running():
    proc = run_script(
        """
        s = streamrt.Stream()
        started = threading.Event()
        def slow():
            started.set()
            time.sleep(0.2)
            print("slow finished", flush=True)
        s.launch(slow)
        started.wait(10)
        sys.exit(3)
        """
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines() == ["slow finished"]


def test_python_work_submitted_after_the_exit_handler_is_refused_not_run():
    # An atexit handler registered before importing streamrt runs after streamrt's own: Python
    # work it launches cannot run any more (the interpreter is going), so the launch is refused
    # at the call with a clear error instead of touching a finalizing interpreter.
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(
            """
            import atexit
            def late():
                s = streamrt.Stream()
                try:
                    s.launch(print, "must not run")
                except RuntimeError as e:
                    print("refused:", e, flush=True)
                s.synchronize()
                e = s.record_event()
                try:
                    e.add_done_callback(lambda ev: print("callback must not run"))
                except RuntimeError as e:
                    print("refused:", e, flush=True)
            atexit.register(late)
            import streamrt
            """
        )],
        capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    assert "must not run" not in proc.stdout
    assert proc.stdout.splitlines() == [
        "refused: Stream.launch: the interpreter is exiting, so Python work can no longer be "
        "queued on streams (is a daemon thread still launching work? join it before the program "
        "ends)",
        "refused: Event.add_done_callback: the interpreter is exiting, so Python work can no "
        "longer be queued on streams (is a daemon thread still launching work? join it before "
        "the program ends)",
    ], proc.stdout
