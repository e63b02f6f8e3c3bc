"""What streamrt.torch's compatibility module (_torch_compat.py) says about the torch it runs
beside, checked against that torch: the tests of one major version run under it and skip under
the other, so `make test`, which runs the suite under torch 1.13 and under torch 2.x, checks both
sides of every difference."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable here: streamrt.torch is untested")

from streamrt import _torch_compat as compat  # noqa: E402  (needs torch)

torch_1 = pytest.mark.skipif(compat.VERSION >= (2, 0), reason="torch 1.13's behaviour")
torch_2 = pytest.mark.skipif(compat.VERSION < (2, 0), reason="torch 2.x's behaviour")


class _Recorder(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the ops it sees, set and cleared as streamrt.torch's mode is."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        if compat.MODE_STAYS_SET_IN_DISPATCH:
            compat.pop_mode(self)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            if compat.MODE_STAYS_SET_IN_DISPATCH:
                compat.push_mode(self)


def test_the_version_is_the_imported_torchs():
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    assert compat.VERSION == (major, minor) and compat.VERSION >= compat.OLDEST


def test_push_and_pop_leave_the_thread_as_it_was():
    mode = _Recorder()
    assert not compat.other_modes_active()
    x = torch.ones(2)
    compat.push_mode(mode)
    try:
        assert x.add(1).tolist() == [2.0, 2.0]
    finally:
        compat.pop_mode(mode)
    seen = len(mode.seen)
    assert seen > 0, "the pushed mode saw no op"
    x.add(1)
    assert len(mode.seen) == seen, "the popped mode still sees ops"
    assert not compat.other_modes_active()


def test_a_users_mode_counts_as_another_mode():
    with _Recorder():
        assert compat.other_modes_active()
    assert not compat.other_modes_active()


def test_the_tensor_base_and_storage_are_the_c_ones():
    t = torch.arange(6.0)[2:]
    assert isinstance(t, compat.TensorBase)
    assert compat.TensorBase.data_ptr(t) == t.data_ptr()
    assert compat.untyped_storage(t).nbytes() == 6 * 4


def test_the_work_item_keys_are_this_torchs():
    assert torch._C.DispatchKey.Python in compat.WORK_ITEM_EXCLUDED_KEYS
    assert all(isinstance(k, torch._C.DispatchKey) for k in compat.WORK_ITEM_EXCLUDED_KEYS)


@torch_1
def test_torch_1_has_one_mode_slot_beside_the_stack():
    # The slot is set directly, so other_modes_active() (the stack) stays False while it is set.
    assert compat.MODE_STAYS_SET_IN_DISPATCH
    mode = _Recorder()
    compat.push_mode(mode)
    try:
        assert torch._C._len_torch_dispatch_stack() == 0 and not compat.other_modes_active()
        torch.ones(2).add(1)
    finally:
        compat.pop_mode(mode)
    assert mode.seen


@torch_1
def test_torch_1_names_its_base_class_and_storage_the_old_way():
    assert compat.TensorBase is torch._C._TensorBase
    assert compat.untyped_storage is torch._C._TensorBase._storage


@torch_1
def test_torch_1_reallocates_only_the_losses_it_is_known_for():
    assert "aten::mse_loss" in compat.REALLOCATING_OUT
    assert "aten::binary_cross_entropy" not in compat.REALLOCATING_OUT


@torch_1
def test_torch_1_has_no_pre_dispatch_keys():
    names = {k.name for k in compat.WORK_ITEM_EXCLUDED_KEYS}
    assert names.isdisjoint({"PythonDispatcher", "PreDispatch"})


@torch_2
def test_torch_2_has_a_mode_stack_that_pops_the_running_mode():
    assert not compat.MODE_STAYS_SET_IN_DISPATCH
    mode, other = _Recorder(), _Recorder()
    compat.push_mode(mode)
    try:
        assert torch._C._len_torch_dispatch_stack() == 1
        compat.pop_mode(other)  # not on top: left as it is
        assert torch._C._len_torch_dispatch_stack() == 1
    finally:
        compat.pop_mode(mode)
    assert torch._C._len_torch_dispatch_stack() == 0


@torch_2
def test_torch_2_names_its_base_class_and_storage_the_new_way():
    assert compat.TensorBase is torch._C.TensorBase
    assert compat.untyped_storage is torch._C.TensorBase.untyped_storage


@torch_2
def test_torch_2_runs_binary_cross_entropy_functionally_too():
    assert {"aten::mse_loss", "aten::binary_cross_entropy"} <= compat.REALLOCATING_OUT


@torch_2
def test_torch_2_excludes_its_pre_dispatch_keys_from_work_items():
    names = {k.name for k in compat.WORK_ITEM_EXCLUDED_KEYS}
    assert {"PythonDispatcher", "PreDispatch", "AutocastCPU"} <= names
