"""streamrt.distributed: MPI communication as stream work, in the shape of ``torch.distributed``.

Start the program with ``mpirun -np N python3 prog.py``; ``init_process_group()`` reads the rank and
world size from MPI. Every operation is enqueued on a stream (``stream=None``: the current stream)
and returns at once with a ``Work``; it runs in stream order with the ops around it, and tensors
take part in dependency tracking, so an op that reads the result on another stream waits for the
communication. ``Work.wait()`` blocks the host until it is done; ``Work.is_completed()`` polls.
Unlike torch's CPU backends, ``async_op=False`` does not block either (as NCCL on CUDA streams):
wait on the returned ``Work``, synchronize the stream, or read the tensor (``numpy()``, ``item()``
wait for it). Tensors may be streamrt tensors, torch CPU tensors or numpy arrays, as for every op:
the ones a communication writes are shared (DLPack), never copied. Reading a torch tensor through
torch waits for the communication only after ``streamrt.torch.install()``; without it, wait on the
``Work`` first (docs/torch.md). See docs/distributed.md.
"""

import streamrt as _streamrt_package

from . import _streamrt

# Seconds exit waits for queued work in an MPI rank when STREAMRT_EXIT_TIMEOUT is unset.
_EXIT_TIMEOUT_UNDER_MPI = 60.0

try:
    from . import _streamrt_mpi as _mpi
except ImportError as _e:  # built without MPI
    _mpi = None
    _import_error = _e

__all__ = [
    "ReduceOp",
    "Work",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "isend",
    "recv",
    "reduce_scatter_tensor",
    "send",
]

ReduceOp = _mpi.ReduceOp if _mpi is not None else None

_world = None


def is_available():
    """True when streamrt was built with MPI (streamrt.distributed can be used)."""
    return _mpi is not None


def _need_mpi():
    if _mpi is None:
        raise RuntimeError(
            "streamrt.distributed is not available: streamrt was built without MPI "
            f"({_import_error}); install libopenmpi-dev and rebuild"
        )


class Work:
    """A communication enqueued on a stream (torch.distributed's Work)."""

    __slots__ = ("_event", "_keep")

    def __init__(self, event, keep=()):
        self._event = event
        self._keep = keep

    def wait(self, timeout=None):
        """Blocks (GIL released) until the communication is done and returns True; raises
        streamrt.Error with MPI's message if it (or earlier work on its stream) failed. With
        ``timeout`` (seconds): returns False when not done by then (nothing changes)."""
        done = self._event.synchronize(timeout=timeout)
        return True if done is None else done

    def is_completed(self):
        """True when the communication is done (or failed). Never blocks."""
        return self._event.query()

    @property
    def event(self):
        """The streamrt.Event recorded after the communication: other streams can wait on it."""
        return self._event


def init_process_group(backend="mpi", init_method=None, world_size=-1, rank=-1, *, comm=None):
    """Starts streamrt.distributed from the MPI environment (mpirun). ``comm``: an mpi4py
    communicator to use instead of MPI_COMM_WORLD (duplicated). ``world_size``/``rank``, when
    given, must match MPI's. Blocks: collective over the communicator."""
    global _world
    _need_mpi()
    if backend not in ("mpi", None):
        raise ValueError(f"streamrt.distributed supports backend='mpi' only, not {backend!r}")
    if init_method not in (None, "env://", "mpi://"):
        raise ValueError("streamrt.distributed takes the rank and size from MPI: pass no init_method")
    if _world is not None:
        raise RuntimeError("init_process_group() was already called; call destroy_process_group() first")
    if comm is not None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise TypeError("comm= needs mpi4py (python3-mpi4py)") from e
        if not isinstance(comm, MPI.Comm):
            raise TypeError(f"comm must be an mpi4py communicator, not {type(comm).__name__}")
        _mpi.init()
        world = _mpi.Communicator.from_handle(MPI._handleof(comm))
    else:
        world = _mpi.Communicator()
    if world_size not in (-1, None) and world_size != world.size:
        raise ValueError(f"world_size={world_size} but MPI has {world.size} ranks")
    if rank not in (-1, None) and rank != world.rank:
        raise ValueError(f"rank={rank} but this MPI process is rank {world.rank}")
    _world = world
    # A rank waiting at exit for a peer that will never come (a collective the others skipped)
    # has no terminal for Ctrl-C: exit waits a bounded time, then aborts the whole job.
    if _streamrt_package._exit_default_timeout is None:
        _streamrt_package._exit_default_timeout = _EXIT_TIMEOUT_UNDER_MPI
    if _mpi.abort not in _streamrt_package._leave_hooks:
        _streamrt_package._leave_hooks.append(_mpi.abort)


def is_initialized():
    """True between init_process_group() and destroy_process_group()."""
    return _world is not None


def destroy_process_group(group=None):
    """Forgets the process group (MPI itself is finalised at exit)."""
    global _world
    _world = None


def _group(group):
    if group is not None:
        return group
    if _world is None:
        raise RuntimeError("call streamrt.distributed.init_process_group() first")
    return _world


def get_rank(group=None):
    """This process's rank."""
    return _group(group).rank


def get_world_size(group=None):
    """Number of ranks."""
    return _group(group).size


def _op(op):
    return ReduceOp.SUM if op is None else op


def _written(t, what):
    """A tensor a communication writes, as a streamrt tensor on the same memory (a torch tensor
    or numpy array is shared through DLPack, never copied: the result must land in it)."""
    if isinstance(t, _streamrt.Tensor):
        return t
    if hasattr(t, "__dlpack__"):
        return _streamrt.from_dlpack(t)
    raise TypeError(f"streamrt.distributed.{what}: expected a streamrt.Tensor, a torch tensor or "
                    f"a numpy array, got {type(t).__module__}.{type(t).__name__}")


def _read(t, what):
    """A tensor a communication only reads: as every op takes its operands (shared when the
    layout allows, else copied)."""
    if isinstance(t, _streamrt.Tensor):
        return t
    return _streamrt.asarray(t)


def all_reduce(tensor, op=None, group=None, async_op=False, stream=None):
    """In-place reduction of ``tensor`` over all ranks, enqueued on ``stream``. Returns a Work."""
    t = _written(tensor, "all_reduce")
    return Work(_group(group).all_reduce(t, _op(op), stream), (tensor, t))


def broadcast(tensor, src, group=None, async_op=False, stream=None):
    """Copies rank ``src``'s tensor into ``tensor`` on every rank. Returns a Work."""
    t = _written(tensor, "broadcast")
    return Work(_group(group).broadcast(t, src, stream), (tensor, t))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False, stream=None):
    """Concatenates every rank's ``input_tensor`` into ``output_tensor``. Returns a Work."""
    out, inp = _written(output_tensor, "all_gather_into_tensor"), _read(input_tensor, "")
    return Work(_group(group).all_gather(out, inp, stream), (output_tensor, input_tensor, out, inp))


def reduce_scatter_tensor(output, input, op=None, group=None, async_op=False, stream=None):
    """Reduces ``input`` over all ranks; block ``rank`` goes to ``output``. Returns a Work."""
    out, inp = _written(output, "reduce_scatter_tensor"), _read(input, "")
    return Work(_group(group).reduce_scatter(out, inp, _op(op), stream), (output, input, out, inp))


def all_to_all_single(output, input, group=None, async_op=False, stream=None):
    """Block j of ``input`` goes to rank j; block i of ``output`` comes from rank i."""
    out, inp = _written(output, "all_to_all_single"), _read(input, "")
    return Work(_group(group).all_to_all(out, inp, stream), (output, input, out, inp))


def send(tensor, dst, group=None, tag=0, stream=None):
    """Sends ``tensor`` to rank ``dst``. Returns a Work (does not block)."""
    t = _read(tensor, "send")
    return Work(_group(group).send(t, dst, tag, stream), (tensor, t))


def recv(tensor, src, group=None, tag=0, stream=None):
    """Receives into ``tensor`` from rank ``src``. Returns a Work (does not block)."""
    t = _written(tensor, "recv")
    return Work(_group(group).recv(t, src, tag, stream), (tensor, t))


isend = send
irecv = recv


def barrier(group=None, async_op=False, stream=None):
    """Completes when every rank's stream has reached it. Returns a Work."""
    return Work(_group(group).barrier(stream))
