"""``streamrt.cpu``: the ``torch.cpu`` stream API, backed by real CPU streams.

``torch.cpu.Stream`` and friends do nothing (every method is a no-op); these run work
concurrently. Code written for ``torch.cpu`` needs only its import changed::

    from streamrt import cpu
    s = cpu.Stream()
    with cpu.stream(s):
        ...
    cpu.synchronize()

``streamrt.cpu.Partition(workers)`` (or ``Partition(cores=[...])``, pinned) reserves CPU workers
for the streams created in it (``p.new_stream()`` or ``streamrt.Stream(partition=p)``): other
streams' work never runs there.
"""

from typing import Optional, Union

from ._streamrt import Device, Event, Partition, Stream, StreamContext
from ._streamrt import current_stream as _current_stream
from ._streamrt import default_stream as _default_stream
from ._streamrt import synchronize as _synchronize

__all__ = [
    "Event",
    "Partition",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device_count",
    "is_available",
    "set_device",
    "stream",
    "synchronize",
]

_DeviceLike = Union[str, int, Device, None]


def _cpu(device: _DeviceLike, what: str) -> Device:
    d = Device("cpu") if device is None else Device(device)
    if d.type != "cpu":
        raise ValueError(f"streamrt.cpu.{what}: expected a CPU device, got '{d}'")
    return d


def is_available() -> bool:
    """True: the CPU backend is always there."""
    return True


def device_count() -> int:
    """Number of CPU devices (1)."""
    return 1


def current_device() -> str:
    """'cpu', as torch.cpu.current_device()."""
    return "cpu"


def set_device(device: _DeviceLike) -> None:
    """As torch.cpu.set_device: there is one CPU device, so this only checks ``device`` ('cpu',
    'cpu:0', 0 or a CPU streamrt.Device; ValueError otherwise)."""
    d = _cpu(device, "set_device")
    if d.index != 0:
        raise ValueError(f"streamrt.cpu.set_device: there is one CPU device (cpu:0), got '{d}'")


def current_stream(device: _DeviceLike = None) -> Stream:
    """This thread's current CPU stream (the default stream until set)."""
    return _current_stream(_cpu(device, "current_stream"))


def default_stream(device: _DeviceLike = None) -> Stream:
    """The CPU default stream."""
    return _default_stream(_cpu(device, "default_stream"))


def stream(stream: Optional[Stream]) -> StreamContext:
    """``with streamrt.cpu.stream(s):`` makes ``s`` current for the block (None: no-op)."""
    if stream is not None and stream.device.type != "cpu":
        raise ValueError(f"streamrt.cpu.stream: expected a CPU stream, got one on '{stream.device}'")
    return StreamContext(stream)


def synchronize(device: _DeviceLike = None) -> None:
    """Blocks until all work on every CPU stream has finished; re-raises the first failure."""
    _synchronize(_cpu(device, "synchronize"))
