"""Keeps torch 2.x from importing torch._dynamo for streamrt's own work (docs/torch.md, "Memory").

torch 2.x wraps its Python shape functions (torch._refs, the decompositions used as meta
kernels) and every TorchDispatchMode's ``__torch_dispatch__`` in ``torch._disable_dynamo``, whose
first call imports torch._dynamo (and with it triton and sympy) only to make the function opaque
to dynamo's tracing. Eager torch never calls those functions, but streamrt does: its dispatch
mode handles ops inside contexts and its shape inference runs ops on meta tensors. The import
costs a fresh process about 150 MB of resident memory and most of a second.

While torch._dynamo is not loaded no frame can be being compiled, so the disabling is a no-op and
calling the function directly is the same. This module fills each such wrapper's own cache (the
function attribute ``__dynamo_disable`` that ``torch._disable_dynamo`` reads before importing)
with a forwarder that calls the function directly until torch._dynamo is loaded, and from then on
puts dynamo's real wrapper in the cache and calls that: a user's ``torch.compile`` sees the
functions disabled exactly as before."""

import gc
import sys
import types

_CACHE_ATTR = "__dynamo_disable"  # the attribute torch._disable_dynamo's wrapper caches in

# The modules whose wrapped functions streamrt's ops reach and eager's do not: shape functions
# and decompositions (meta kernels written in Python) and dispatch modes (streamrt's own).
_MODULE_PREFIXES = ("torch._refs", "torch._decomp", "torch._prims", "torch._prims_common",
                    "torch._meta_registrations", "torch.utils._python_dispatch", "streamrt.")

_filled = []  # the functions whose cache holds a forwarder, for restore()


class _DisableOnceLoaded:
    """Calls the function directly while torch._dynamo is not loaded (nothing can be compiling),
    then replaces itself in the function's cache with dynamo's own disabled wrapper."""

    __slots__ = ("fn_", "recursive_")

    def __init__(self, fn, recursive):
        self.fn_ = fn
        self.recursive_ = recursive

    def __call__(self, *args, **kwargs):
        dynamo = sys.modules.get("torch._dynamo")
        spec = getattr(dynamo, "__spec__", None)
        if dynamo is None or getattr(spec, "_initializing", False):
            return self.fn_(*args, **kwargs)
        real = dynamo.disable(self.fn_, self.recursive_, wrapping=False)
        setattr(self.fn_, _CACHE_ATTR, real)
        return real(*args, **kwargs)


def _wrapper_code(torch):
    """The code object of torch._disable_dynamo's wrapper, or None where torch has none (1.x) or
    its wrapper is not the shape this module knows."""
    make = getattr(getattr(torch, "_compile", None), "_disable_dynamo", None)
    if make is None:
        return None
    code = make(lambda: None).__code__
    return code if code.co_freevars == ("fn", "recursive") else None


def _in_scope(wrapper):
    module = getattr(wrapper, "__module__", None) or ""
    return module.startswith(_MODULE_PREFIXES)


def defer(torch):
    """Fills the caches of the wrappers loaded now in the modules above; returns how many.
    Does nothing once torch._dynamo is loaded (the import is paid already). Not thread-safe
    against itself: install() calls it under its lock."""
    code = _wrapper_code(torch)
    if code is None or "torch._dynamo" in sys.modules:
        return 0
    count = 0
    for obj in gc.get_objects():
        if type(obj) is not types.FunctionType or obj.__code__ is not code or not _in_scope(obj):
            continue
        try:
            cells = dict(zip(code.co_freevars, (c.cell_contents for c in obj.__closure__)))
        except ValueError:  # (an empty cell: not a wrapper made by the decorator)
            continue
        fn = cells["fn"]
        if getattr(fn, _CACHE_ATTR, None) is not None:
            continue
        try:
            setattr(fn, _CACHE_ATTR, _DisableOnceLoaded(fn, cells["recursive"]))
        except (AttributeError, TypeError):
            continue  # not a plain function: its wrapper imports dynamo as before
        _filled.append(fn)
        count += 1
    return count


def restore():
    """Takes the forwarders out again (uninstall(), torch.compile); caches dynamo has filled
    meanwhile stay."""
    for fn in _filled:
        if isinstance(getattr(fn, _CACHE_ATTR, None), _DisableOnceLoaded):
            delattr(fn, _CACHE_ATTR)
    _filled.clear()
