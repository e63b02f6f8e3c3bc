"""The torch dispatch mode of streamrt.torch and the state of its threads (docs/torch.md, "How it
works").

While streamrt.torch is installed, a thread that entered a stream context has this mode set
(torch's dispatch-mode slot, which is per thread), or, with the fast path, the fast path's C++
fallback, which hands this module the ops it does not enqueue itself. Every aten op of the thread
then reaches ``dispatch()`` below autograd, and:

* inside a stream context, the op is *enqueued*: planned (_torch_plan.py: its outputs' shapes,
  strides and dtypes come from running it on meta tensors, cached per op and argument layout) and
  submitted by the path in use (_torch_submit.py): the outputs are allocated at once, and a work
  item that runs the real kernel into them (its ``out=`` overload when it has one) goes to the
  current stream after the tracked writers (and, for what it writes, readers) of its tensors on
  other streams. The call returns the outputs at once.
* ops that cannot be enqueued (random numbers, data-dependent results such as ``item()`` or
  ``nonzero``, ops without a meta kernel, metadata changes such as ``resize_``) run on the calling
  thread after waiting for the pending work on their tensors: *host ops*.
* outside a stream context every op is a host op: it waits for the pending work on its tensors
  (never reading them early), then runs as eager torch does. Views (metadata only) never wait.

Which path submits is chosen by use() (install() takes the best one available where none was
chosen), never at import.
"""

import os
import threading
import time
import warnings

import torch

from . import _streamrt as _C
from . import _torch_compat as _compat
from . import _torch_plan as _plan
from . import _torch_submit as _submit
from . import _torch_tracking as _tracking

# Failures of torch ops run on streams name the user's line, not torch's Python wrappers
# (torch.nn.functional, torch._tensor) that called the op.
for _path in {torch.__file__, os.path.abspath(torch.__file__)}:
    _C._add_origin_skip(os.path.join(os.path.dirname(_path), ""))

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_strided = torch.strided
_plans = _plan.plans
_plan_of = _plan.plan_of


class _Local(threading.local):
    depth = 0  # stream contexts entered on this thread since install()
    armed = False  # whether the thread is guarded (by the mode or the fast path's fallback)
    mode_off = False  # armed, but the mode is off while the fast path takes the thread's ops
    guard = None  # the native module guarding this thread (arm() with the fast path), or None
    active = None  # the native module whose fast path takes this thread's context ops, or None


tls = _Local()
installed = False  # set by streamrt.torch.install()
_path = None  # the submission path (_torch_submit): chosen by use(), or by install()


def path():
    """The submission path in use (a _torch_submit path object), or None before one is chosen."""
    return _path


def use(name=None):
    """Makes path `name` ("fast", "runner" or "python"; None: the best available here) the one
    that submits torch ops, from now on if streamrt.torch is installed, else from install() on:
    the tests and the benchmark run each. Not while stream contexts are open; threads already
    inside one take it from their next outermost context. Returns the path object."""
    global _path
    new = _submit.make(_submit.best() if name is None else name)
    _tracking.use_native(new.native)  # (hands the tracker registry over)
    _path = new
    _sync_fast_path()
    return new


def _sync_fast_path():
    # The fast path runs while installed, on the fast path. The calling thread's guard follows
    # the switch at once (arm() picks the fast path's or the mode); other guarded threads at their
    # next arm().
    module = _submit.loaded()
    if module is not None:
        module.set_enabled(installed and _path.guard is not None)
    if tls.armed and tls.depth == 0 and tls.guard is not _path.guard:
        disarm()
        arm()


# ------------------------------------------------------------------------------------------------
# Dispatch


def wait_for(accesses):
    """Waits for the pending work on the CPU strided tensors of `accesses` ((tensor, written)
    pairs): their writers, and for those written, their readers too."""
    if _tracking.tracked():
        for t, written in accesses:
            if t.is_cpu and t.layout is _strided:
                _tracking.wait_host(t, written)


def host_op(func, plan, args, kwargs):
    """Runs `func` now on this thread, after the pending work on its tensors (writers; for the
    tensors it writes, readers too)."""
    wait_for(_plan.tensors_of(plan, args, kwargs))
    return func(*args, **kwargs)


class HostOpWarning(UserWarning):
    """An op inside a stream context ran on the calling thread: it waited there for the stream
    work on its tensors and blocked the thread while it ran (docs/torch.md, "Host ops"). Once per
    op; `warnings.filterwarnings("ignore", category=streamrt.torch.HostOpWarning)` turns it off."""


_host_ops_warned = set()


def _warn_host_op(func, why):
    name = func.name()
    if name in _host_ops_warned:
        return
    if _plan.is_random(func):
        return  # random numbers: on the host by design (eager's generator order), and cheap
    _host_ops_warned.add(name)
    origin = _C._launch_origin_here() or ":0"
    path, _, line = origin.rpartition(":")
    warnings.warn_explicit(
        f"streamrt.torch: {name} ran on the host inside a stream context ({why}): this thread "
        "waited for the stream work on its tensors, then ran it, so nothing overlapped with it. "
        "Once per op; see docs/torch.md, \"Host ops\"", HostOpWarning, path or "<unknown>",
        int(line) if line.isdigit() else 0)


_WHY_HOST = "data-dependent results, not an aten op, or non-tensor results"
_WHY_UNSUPPORTED = "arguments that are not CPU strided tensors"
_WHY_NO_META = "no meta kernel to know its outputs ahead"
_WHY_LEARNING = ("no meta kernel: this first call with these argument layouts teaches its outputs' "
                 "layouts, and later calls with them are stream work")


def _host_op_in_context(func, plan, args, kwargs, why):
    out = host_op(func, plan, args, kwargs)
    _warn_host_op(func, why)
    return out


def enqueue(func, args, kwargs):
    """An op of a thread inside a stream context: submitted as stream work where it can be, else
    run as a host op. Teaches the fast path what it was where the fast path missed it."""
    plan = _plans.get(id(func)) or _plan_of(func)
    kind = plan.kind
    submit = _path
    teach = submit.missed()
    if kind <= _plan.ALLOC:  # a view or an allocation: metadata only
        if teach:
            submit.teach_kind(func, _plan.ALLOC)
        return func(*args, **kwargs)
    if kind == _plan.HOST:
        deterministic = _plan.dropout_deterministic_plan(func, args, kwargs)
        if deterministic is None:
            if teach:
                submit.teach_kind(func, _plan.HOST)
            return _host_op_in_context(func, plan, args, kwargs, _WHY_HOST)
        # Stream work; the fast path is not taught it, as it would take the calls with dropout.
        plan, teach = deterministic, False
    try:
        tensors, key = _plan.scan(plan, args, kwargs)
    except _plan.Unsupported:
        return _host_op_in_context(func, plan, args, kwargs, _WHY_UNSUPPORTED)
    outputs = _plan.outputs_of(func, plan, args, kwargs, key)
    if outputs is _plan.HOST_RESULT:
        return _host_op_in_context(func, plan, args, kwargs, _WHY_NO_META)
    if outputs is _plan.LEARN:
        out = _host_op_in_context(func, plan, args, kwargs, _WHY_LEARNING)
        _plan.learn(key, plan, out)
        return out
    # (learned outputs hold for this argument layout and these values only: the fast path, which
    # would take every later call of the op, is not taught them)
    outs = submit.submit(func, plan, args, kwargs, tensors, outputs, key,
                         teach and not outputs.learned)
    return _plan.result(plan, args, kwargs, outs)


def dispatch(func, args, kwargs):
    """An op of this thread, below autograd: enqueued inside a stream context, else a host op
    that waits for the pending work on its tensors (views and allocations never wait)."""
    if tls.depth > 0 and installed and _enter_enqueue():
        try:
            return enqueue(func, args, kwargs)
        finally:
            _leave_enqueue()
    plan = _plans.get(id(func)) or _plan_of(func)
    if plan.kind <= _plan.ALLOC or not _tracking.tracked():
        return func(*args, **kwargs)
    return host_op(func, plan, args, kwargs)


_submit.on_fast_path_miss(dispatch)


class Mode(torch.utils._python_dispatch.TorchDispatchMode):
    """streamrt.torch's dispatch mode (set per thread; see the module's doc)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _compat.MODE_STAYS_SET_IN_DISPATCH:
            _compat.pop_mode(self)
        try:
            if kwargs is None:
                kwargs = {}
            for t in types:
                if t not in _PLAIN:
                    # Another subclass (a fake tensor...): its own __torch_dispatch__ decides.
                    return func(*args, **kwargs)
            return dispatch(func, args, kwargs)
        finally:
            if tls.armed:
                self._after_dispatch()

    def _after_dispatch(self):
        # Where torch keeps the mode set while it runs, it was cleared above: set it again.
        if installed:
            if _compat.MODE_STAYS_SET_IN_DISPATCH:
                _compat.push_mode(self)
        elif _compat.MODE_STAYS_SET_IN_DISPATCH:
            # Uninstalled from another thread: not pushed back, so this thread is left.
            # (Where torch keeps the mode set, it stays until the thread leaves its context:
            # context_left.)
            tls.armed = False


MODE = Mode()

# ------------------------------------------------------------------------------------------------
# install() and uninstall()

# Python-path enqueues under way (uninstall() waits for them before it synchronizes: one that
# checked `installed` before the switch may release the GIL before its work is queued).
_in_flight = threading.Condition()
_in_flight_count = 0


def _enter_enqueue():
    # Counts an enqueue in; False when streamrt.torch was uninstalled meanwhile.
    global _in_flight_count
    with _in_flight:
        if not installed:
            return False
        _in_flight_count += 1
        return True


def _leave_enqueue():
    global _in_flight_count
    with _in_flight:
        _in_flight_count -= 1
        if _in_flight_count == 0:
            _in_flight.notify_all()


def set_installed(on):
    """Switches `installed` (streamrt.torch.install and uninstall), under the lock that counts
    enqueues in, so none starts after the switch off (after use())."""
    global installed
    with _in_flight:
        installed = on
    _sync_fast_path()


def quiesce(timeout_s):
    """After set_installed(False): waits until no enqueue that started before is under way (the
    Python path's and the fast path's). False after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    with _in_flight:
        if not _in_flight.wait_for(lambda: _in_flight_count == 0, timeout_s):
            return False
    module = _submit.loaded()
    if module is not None:
        return module.quiesce(max(0.0, deadline - time.monotonic()))
    return True


# ------------------------------------------------------------------------------------------------
# Threads: guarded, and inside stream contexts


def context_entered():
    """A stream context was entered on this thread (after arm())."""
    tls.depth += 1
    fast = _path.guard
    if tls.depth == 1 and fast is not None:
        # The fast path's fallback takes every op of the context; the mode stays off meanwhile.
        fast.set_active(True)
        tls.active = fast
        if tls.armed and tls.guard is None:
            _compat.pop_mode(MODE)
            tls.mode_off = True


def context_left():
    """A stream context of this thread was left."""
    if tls.depth > 0:
        tls.depth -= 1
        if tls.depth == 0 and tls.active is not None:
            tls.active.set_active(False)
            tls.active = None
        if tls.depth == 0 and tls.mode_off:
            tls.mode_off = False
            if tls.armed and installed:
                _compat.push_mode(MODE)
        if tls.depth == 0 and not installed:
            disarm()  # uninstalled from another thread meanwhile: no mode left on this thread


def arm():
    """Guards this thread (streamrt.torch is installed and the thread installed it or entered a
    context): with the fast path, its fallback waits for the pending work of every op's tensors
    outside contexts (no dispatch mode at all); without it, the dispatch mode does."""
    if not tls.armed:
        if _compat.other_modes_active():
            raise RuntimeError(
                "streamrt.torch: a torch dispatch mode (a `with SomeMode():` block) is active on "
                "this thread; enter the stream context outside it")
        tls.armed = True
        tls.guard = _path.guard
        if tls.guard is not None:
            tls.guard.set_guarded(True)
        else:
            _compat.push_mode(MODE)


def disarm():
    """Stops guarding this thread."""
    if tls.armed:
        tls.armed = False
        if tls.guard is not None:
            tls.guard.set_guarded(False)
            tls.guard = None
        else:
            _compat.pop_mode(MODE)
