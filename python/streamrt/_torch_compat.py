"""What differs between the torch versions streamrt.torch supports (docs/torch.md, "Versions").

Everything in the torch path that depends on the torch version goes through this module, so that
the rest reads the same on every version. Supported: Debian's torch 1.13 and torch 2.x from the
oldest 2.x that `make test` runs (python/torch2-requirements.txt) on.
"""

import torch

VERSION = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
#: The oldest torch this package is tested with; older ones are refused at import.
OLDEST = (1, 13)

if VERSION < OLDEST:
    raise ImportError(
        f"streamrt.torch supports torch 1.13 and 2.x; this is torch {torch.__version__}: "
        "upgrade torch (pip install 'torch>=2')")

# torch 1.13 has one dispatch-mode slot per thread, set directly; the mode stays set while its
# __torch_dispatch__ runs, so the mode clears it around the op it runs. torch 2.x has a stack of
# modes per thread and pops the running mode itself for the duration of __torch_dispatch__.
if hasattr(torch._C, "_set_torch_dispatch_mode"):
    _set_slot = torch._C._set_torch_dispatch_mode
    MODE_STAYS_SET_IN_DISPATCH = True

    def push_mode(mode):
        """Makes `mode` this thread's dispatch mode."""
        _set_slot(mode)

    def pop_mode(mode):
        """Removes `mode` from this thread's dispatch modes."""
        _set_slot(None)

    def other_modes_active():
        """Whether a dispatch mode other than streamrt's is active on this thread."""
        return torch._C._len_torch_dispatch_stack() > 0

else:
    MODE_STAYS_SET_IN_DISPATCH = False
    _push = torch._C._push_on_torch_dispatch_stack
    _pop = torch._C._pop_torch_dispatch_stack
    _depth = torch._C._len_torch_dispatch_stack
    _at = torch._C._get_dispatch_stack_at

    def push_mode(mode):
        """Pushes `mode` on this thread's dispatch-mode stack."""
        _push(mode)

    def pop_mode(mode):
        """Pops `mode` off this thread's stack, where it is on top (it is pushed last, and arm()
        refuses to push it over other modes)."""
        n = _depth()
        if n > 0 and _at(n - 1) is mode:
            _pop(None)  # (None: not an infra mode such as FakeTensorMode)

    def other_modes_active():
        """Whether a dispatch mode is active on this thread (streamrt's is not pushed yet)."""
        return _depth() > 0


# The C methods of tensors, beneath the Python ones that install() wraps (torch 2.x renamed the
# class; 1.13 has only the old name).
TensorBase = getattr(torch._C, "TensorBase", None) or torch._C._TensorBase

#: A tensor's untyped storage, from the C method (1.13 names it _storage, 2.x untyped_storage).
untyped_storage = getattr(TensorBase, "untyped_storage", None) or TensorBase._storage

# Functional ops whose out= overload reallocates the output it is given (it uses it as scratch of
# another shape, then resizes it back): the tensor handed out at the call would change memory under
# the host, so they run functionally and their results are copied.
REALLOCATING_OUT = frozenset(
    "aten::" + n
    for n in ("mse_loss smooth_l1_loss huber_loss soft_margin_loss"
              + (" binary_cross_entropy" if VERSION >= (2, 0) else "")).split()
)

# Op tags that make an op a host op (random numbers, data-dependent results, metadata changes),
# those this torch has. (dynamic_output_shape is not among them: it marks aten::index, whose meta
# kernel infers the result for integer indices and refuses boolean masks, which then run as host
# ops.)
HOST_TAGS = tuple(
    getattr(torch.Tag, n)
    for n in ("nondeterministic_seeded", "data_dependent_output", "inplace_view")
    if hasattr(torch.Tag, n)
)

#: The quantized dtypes this torch has (quint2x4 is newer than 1.13's first releases).
QUANTIZED_DTYPES = frozenset(
    getattr(torch, n) for n in ("quint8", "qint8", "qint32", "quint4x2", "quint2x4")
    if hasattr(torch, n))

#: The dispatch keys a work item excludes besides those excluded where its op was called:
#: autocast (applied on the host already), and the Python keys and the fake-tensor ones, so that an
#: item run on a thread that has a dispatch mode set never reaches Python. 2.x added some
#: (PythonDispatcher, PreDispatch); those this torch has.
WORK_ITEM_EXCLUDED_KEYS = tuple(
    getattr(torch._C.DispatchKey, n)
    for n in ("AutocastCPU", "AutocastCUDA", "AutocastXPU", "Python", "PythonTLSSnapshot",
              "PythonDispatcher", "PreDispatch", "Fake", "DeferredInit")
    if getattr(torch._C.DispatchKey, n, None) is not None
)
