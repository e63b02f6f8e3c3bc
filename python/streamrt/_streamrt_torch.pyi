"""Type stubs for streamrt._streamrt_torch: streamrt.torch's kernel runner on torch's C++ API
(built where Debian's libtorch-dev is installed; private)."""

from typing import Any

runner: Any  # a capsule holding the TorchRunner of torch_runner.hpp
abi: int
