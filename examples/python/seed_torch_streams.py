"""Seed article 1's torch code (torch.cpu.StreamContext), unchanged but for one added line.

In torch, torch.cpu.StreamContext does nothing and torch.cuda.Stream() fails on a machine without
CUDA. The added line makes both real: the two products below are enqueued on two CPU streams and
run at the same time on streamrt's workers (docs/torch.md).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/seed_torch_streams.py
"""

import torch
import streamrt.torch; streamrt.torch.install(cuda=True)  # noqa: E401,E702  the added line

# ストリームを作成
stream1 = torch.cuda.Stream()
stream2 = torch.cuda.Stream()

# 行列を作成
A = torch.randn(1000, 1000)
B = torch.randn(1000, 1000)

# ストリーム 1 で行列の掛け算を実行
with torch.cpu.StreamContext(stream1):
    C1 = torch.matmul(A, B)

# ストリーム 2 で行列の掛け算を実行
with torch.cpu.StreamContext(stream2):
    C2 = torch.matmul(A, B)

# ストリームの同期
stream1.synchronize()
stream2.synchronize()

# 結果を比較
assert torch.allclose(C1, C2)
