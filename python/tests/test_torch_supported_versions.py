"""What a user whose torch streamrt.torch cannot use sees: a torch older than the supported range
is refused at import with a message that says what to do, and without the fast path (a torch
without C++ headers, so no _streamrt_torch) streamrt.torch still works through Python. Each case
runs in a subprocess: the torch version is faked, or the extension hidden, before streamrt.torch is
imported."""

import os
import subprocess
import sys
import textwrap

import pytest

import streamrt

pytest.importorskip("torch", reason="torch is not importable here: streamrt.torch is untested")

# The package under test, wherever the subprocess runs.
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(
    streamrt.__file__))))


def run(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env=ENV)


def test_a_torch_older_than_supported_is_refused_with_what_to_do():
    r = run("""
        import torch
        torch.__version__ = "1.12.1"
        try:
            import streamrt.torch
        except ImportError as e:
            print(e)
        else:
            raise SystemExit("streamrt.torch imported beside torch 1.12.1")
        # The rest of streamrt does not need torch.
        import numpy as np, streamrt
        y = streamrt.ones(4, 4) @ streamrt.ones(4, 4)
        assert np.array_equal(y.numpy(), np.full((4, 4), 4.0, np.float32))
        """)
    assert r.returncode == 0, r.stdout + r.stderr
    message = r.stdout.strip()
    assert "torch 1.12.1" in message, message
    assert "supports torch 1.13 and 2.x" in message, message
    assert "pip install 'torch>=2'" in message, message


def test_without_the_fast_path_streamrt_torch_runs_through_python():
    # As after `pip install .` beside a torch without C++ headers: no _streamrt_torch file.
    r = run("""
        import sys

        class NoTorchExtension:
            def find_spec(self, name, path=None, target=None):
                if name == "streamrt._streamrt_torch":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoTorchExtension())
        import torch
        import streamrt.torch, streamrt._torch_submit as s
        assert s.native() is None and s.unavailable("runner"), s.unavailable("runner")
        assert s.best() == "python", s.best()
        streamrt.torch.install()
        a, b = torch.randn(200, 200), torch.randn(200, 200)
        s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
        with torch.cpu.StreamContext(s1):
            c1 = torch.matmul(a, b)
        with torch.cpu.StreamContext(s2):
            c2 = torch.matmul(a, b) + 1
        s1.synchronize()
        s2.synchronize()
        expected = torch.matmul(a, b)
        assert torch.allclose(c1, expected) and torch.allclose(c2, expected + 1)
        streamrt.torch.uninstall()
        """)
    assert r.returncode == 0, r.stdout + r.stderr
