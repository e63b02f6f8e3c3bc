"""torch 2.x: streamrt's ops do not import torch._dynamo (eager's do not either), and once the
user loads it, torch.compile traces as before. Each case runs in a fresh interpreter: the test
process may have loaded torch._dynamo already."""

import pytest
import torch

from helpers import run_python

if not hasattr(torch, "compile"):
    pytest.skip("torch 1.x has no torch._dynamo", allow_module_level=True)

CHILD_TIMEOUT_S = 300  # a hang fails; each case takes seconds


def run_script(body):
    proc = run_python(body, CHILD_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


# Ops reaching both of streamrt's paths: the fast path's first calls and the dispatch mode's
# (an aliasing argument and a wrapped number), a product whose meta kernel is a Python
# decomposition, a fused layer taught by its first run, and autograd.
_WORK = """
    import sys
    import torch
    import streamrt.torch as srt
    srt.install()
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128).eval()
    x = torch.randn(16, 2, 64)
    w = torch.randn(64, 64, requires_grad=True)
    with torch.cpu.stream(torch.cpu.Stream()):
        with torch.no_grad():
            y = layer(x)
        z = torch.addmm(x[0], x[0], w.detach()) + x[0] * 2 + x[0]
        loss = torch.nn.functional.gelu(x[0] @ w).sum()
        loss.backward()
    torch.cpu.synchronize()
    with torch.no_grad():
        assert torch.equal(y, layer(x))
    assert torch.equal(z, torch.addmm(x[0], x[0], w.detach()) + x[0] * 2 + x[0])
    assert w.grad is not None
"""


def test_ops_on_streams_leave_torch_dynamo_unloaded():
    out = run_script(_WORK + """
    print("dynamo loaded:", "torch._dynamo" in sys.modules)
    """)
    assert "dynamo loaded: False" in out, out


def test_once_dynamo_is_loaded_a_forwarder_hands_over_to_dynamos_wrapper():
    out = run_script(_WORK + """
    import torch._dynamo
    from streamrt import _torch_dynamo_defer as defer
    a = torch.randn(8, 8)
    with torch.cpu.stream(torch.cpu.Stream()):
        b = torch.addmm(a, a, a) * 2
    torch.cpu.synchronize()
    assert torch.equal(b, torch.addmm(a, a, a) * 2)
    real = [fn for fn in defer._filled if not isinstance(getattr(fn, "__dynamo_disable"),
                                                         defer._DisableOnceLoaded)]
    print("real", len(real))
    """)
    words = out.split()
    assert int(words[words.index("real") + 1]) > 0, out


def test_compile_takes_the_forwarders_out_before_dynamo_traces():
    out = run_script(_WORK + """
    from streamrt import _torch_dynamo_defer as defer
    fns = list(defer._filled)
    f = torch.compile(lambda a: torch.addmm(a, a, a) * 2, backend="eager")
    left = sum(isinstance(getattr(fn, "__dynamo_disable", None), defer._DisableOnceLoaded)
               for fn in fns)
    a = torch.randn(8, 8)
    assert torch.equal(f(a), torch.addmm(a, a, a) * 2)
    print("left", left, "of", len(fns))
    """)
    words = out.split()
    assert words[words.index("left") + 1] == "0" and int(words[-1]) > 0, out


def test_uninstall_takes_the_forwarders_out():
    out = run_script("""
    import torch
    import streamrt.torch as srt
    from streamrt import _torch_dynamo_defer as defer
    srt.install()
    fns = list(defer._filled)
    srt.uninstall()
    print("left", sum(hasattr(fn, "__dynamo_disable") for fn in fns), "of", len(fns))
    """)
    words = out.split()
    assert words[words.index("left") + 1] == "0" and int(words[-1]) > 0, out
