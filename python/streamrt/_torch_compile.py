"""torch.compile under streamrt.torch (installed by install() where torch has it).

A compiled function's generated code reads and writes tensor memory itself (inductor's C++ kernels
take data pointers), not through aten ops, so streamrt cannot see its accesses op by op, and the
shapes of its outputs are known only to the compiled graph, so its work cannot be queued with
tracked outputs either. A compiled call therefore runs on the calling thread, as eager torch,
after waiting for every queued access to its tensors (arguments, and a compiled module's
parameters and buffers): writes, and reads too, since the compiled code may write its inputs. Its
outputs are ordinary finished tensors. Inside a stream context this blocks the calling thread for
the call (docs/torch.md, "torch.compile and torch.func").
"""

import contextlib
import functools

import torch
from torch.utils import _pytree

from . import _torch_dynamo_defer
from . import _torch_compat as _compat
from . import _torch_mode as _mode


def _tensors(args, kwargs, module):
    leaves, _ = _pytree.tree_flatten((args, kwargs))
    found = [x for x in leaves if isinstance(x, torch.Tensor)]
    if module is not None:
        found.extend(module.parameters())
        found.extend(module.buffers())
    return found


@contextlib.contextmanager
def _eager_here():
    """No stream context intercepts this thread's ops meanwhile (the fast path's fallback and the
    dispatch mode are taken off and put back), so dynamo and inductor see plain eager torch."""
    tls = _mode.tls
    fast = tls.active
    mode = tls.armed and tls.guard is None and not tls.mode_off
    if fast is not None:
        fast.set_active(False)
    if mode:
        _compat.pop_mode(_mode.MODE)
    try:
        yield
    finally:
        if mode:
            _compat.push_mode(_mode.MODE)
        if fast is not None:
            fast.set_active(True)


def _waiting(call, module):
    @functools.wraps(call)
    def run(*args, **kwargs):
        _mode.wait_for((t, True) for t in _tensors(args, kwargs, module))
        with _eager_here():
            return call(*args, **kwargs)

    return run


def wrap_compile(compile_fn):
    """torch.compile, whose results wait for their tensors' stream work before each call."""

    @functools.wraps(compile_fn)
    def compile(model=None, **options):
        if model is None:  # @torch.compile(mode=...): a decorator with options
            return lambda m: compile(m, **options)
        compiled = compile_fn(model, **options)
        # Dynamo is loaded now and traces at the first call: it must find its own disabled
        # wrappers in their caches, not streamrt's forwarders (which would only replace
        # themselves when called outside a trace).
        _torch_dynamo_defer.restore()
        if isinstance(compiled, torch.nn.Module):
            # OptimizedModule calls self.forward (dynamo's wrapper of the module's call).
            compiled.forward = _waiting(compiled.forward, compiled)
            return compiled
        return _waiting(compiled, model if isinstance(model, torch.nn.Module) else None)

    return compile
