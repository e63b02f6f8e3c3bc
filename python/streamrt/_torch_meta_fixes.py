"""Where a torch version's meta kernel describes an op's outputs other than its CPU kernel makes
them, found by comparing ops inside stream contexts with eager torch (python/tests/
test_torch_2x_ops.py, test_torch_streams_async.py): the outputs' layout and dtype are corrected to
the CPU kernel's before the op is queued, so results have eager's strides and dtypes (a dtype the
CPU kernel does not expect is an error when it fills the outputs).
"""

import torch

from . import _torch_compat as _compat

_CHANNELS_LAST = torch.channels_last


def _dense_permuted(t):
    # Not row-major but dense: a transposed or permuted tensor, whose layout unary kernels keep.
    return (isinstance(t, torch.Tensor) and not t.is_contiguous()
            and t.is_non_overlapping_and_dense())


def _keep_input_layout(args, r):
    """torch 1.13's abs and logical_not meta kernels make row-major outputs; the CPU kernels keep a
    dense input's layout, as every other unary op does (empty_like)."""
    x = args[0] if args else None
    if _dense_permuted(x) and isinstance(r, torch.Tensor) and r.shape == x.shape:
        return torch.empty_like(x, dtype=r.dtype, device=r.device)
    return r


def _conv_channels_last(args, r):
    """torch 2.x's convolution meta kernel makes a row-major output for a channels_last input; the
    CPU kernel's output is channels_last, as its input."""
    x = args[0] if args else None
    if (isinstance(x, torch.Tensor) and isinstance(r, torch.Tensor) and x.dim() == 4
            and r.dim() == 4 and not x.is_contiguous()
            and x.is_contiguous(memory_format=_CHANNELS_LAST)):
        return r.contiguous(memory_format=_CHANNELS_LAST)
    return r


def _layer_norm_stats_dtype(args, r):
    """torch 2.x's native_layer_norm meta kernel gives float32 mean and rstd for a bfloat16 or
    float16 input; the CPU kernel gives them the input's dtype."""
    x = args[0] if args else None
    if isinstance(x, torch.Tensor) and x.dtype in (torch.bfloat16, torch.float16):
        out, mean, rstd = r
        if mean.dtype != x.dtype:
            return out, mean.to(x.dtype), rstd.to(x.dtype)
    return r


_FIXES_1_13 = {"aten::abs": _keep_input_layout, "aten::logical_not": _keep_input_layout}
_FIXES_2X = {
    "aten::convolution": _conv_channels_last,
    "aten::native_layer_norm": _layer_norm_stats_dtype,
}
_FIXES = _FIXES_1_13 if _compat.VERSION < (2, 0) else _FIXES_2X


def correct(func, meta_args, r):
    """`r` (the meta kernel's outputs for `func` on `meta_args`), corrected to what the CPU kernel
    makes on this torch version."""
    fix = _FIXES.get(func._schema.name)
    return r if fix is None else fix(meta_args, r)
