"""Type stubs of streamrt.distributed's native part (built when MPI is found; docs/distributed.md)."""

from typing import Optional

from ._streamrt import Event, Stream, Tensor

class ReduceOp:
    """Reduction operators (torch.distributed.ReduceOp)."""

    SUM: "ReduceOp"
    PRODUCT: "ReduceOp"
    MIN: "ReduceOp"
    MAX: "ReduceOp"
    AVG: "ReduceOp"
    def __init__(self, value: int) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

def init() -> None:
    """Initialises MPI with MPI_THREAD_MULTIPLE unless it is already initialised (then checks the
    level). Blocks: collective the first time."""

def initialized() -> bool:
    """True while MPI is initialised."""

def in_flight() -> int:
    """Operations in flight in MPI now."""

def abort(code: int) -> None:
    """Ends every rank of the job with `code` (MPI_Abort), when MPI is initialised."""

class Communicator:
    """A duplicate of an MPI communicator whose operations run on streams."""

    def __init__(self) -> None:
        """A duplicate of MPI_COMM_WORLD. Blocks: collective."""
    @staticmethod
    def from_handle(handle: int) -> "Communicator":
        """A duplicate of the MPI communicator with this handle (mpi4py: MPI._handleof(comm)).
        Blocks: collective."""
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def handle(self) -> int: ...
    def all_reduce(
        self, tensor: Tensor, op: ReduceOp = ..., stream: Optional[Stream] = None
    ) -> Event: ...
    def broadcast(self, tensor: Tensor, root: int, stream: Optional[Stream] = None) -> Event: ...
    def all_gather(self, output: Tensor, input: Tensor, stream: Optional[Stream] = None) -> Event: ...
    def reduce_scatter(
        self, output: Tensor, input: Tensor, op: ReduceOp = ..., stream: Optional[Stream] = None
    ) -> Event: ...
    def all_to_all(self, output: Tensor, input: Tensor, stream: Optional[Stream] = None) -> Event: ...
    def send(self, tensor: Tensor, dst: int, tag: int = 0, stream: Optional[Stream] = None) -> Event: ...
    def recv(self, tensor: Tensor, src: int, tag: int = 0, stream: Optional[Stream] = None) -> Event: ...
    def barrier(self, stream: Optional[Stream] = None) -> Event: ...
