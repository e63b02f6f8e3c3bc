"""An op that runs on the host inside a stream context is named once by a HostOpWarning, at the
line that called it; random-number ops (on the host by design) are not; Python's warning filters
turn it off."""

import warnings

import pytest

from torch_streams_util import installed, srt, torch  # noqa: F401  (fixture)
from streamrt import _torch_mode


@pytest.fixture
def fresh(installed):
    _torch_mode._host_ops_warned.clear()
    yield installed


def test_a_host_op_in_a_context_is_named_once_at_its_line(fresh):
    x = torch.randn(100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.cpu.StreamContext(srt.Stream()):
            for _ in range(3):
                x.nonzero()  # the line named
            torch.randn(3)
    named = [w for w in caught if issubclass(w.category, srt.HostOpWarning)]
    assert len(named) == 1, [str(w.message) for w in caught]
    assert "aten::nonzero ran on the host inside a stream context" in str(named[0].message)
    assert named[0].filename == __file__
    with open(__file__) as f:
        assert "# the line named" in f.read().splitlines()[named[0].lineno - 1]


def test_outside_contexts_no_host_op_is_named(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.randn(100).nonzero()
    assert not [w for w in caught if issubclass(w.category, srt.HostOpWarning)]


def test_the_warning_filter_turns_it_off(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=srt.HostOpWarning)
        with torch.cpu.StreamContext(srt.Stream()):
            torch.randn(100).nonzero()
    assert not [w for w in caught if issubclass(w.category, srt.HostOpWarning)]
