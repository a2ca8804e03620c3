"""Rung 25 at one shape (default 4096^3) with tensor-wise, row-wise and block-wise scales, promoted, two
launches each, for Nsight Compute: what the row-wise and block-wise scales add to the kernel

    ncu --clock-control none --kernel-name gemm --csv --metrics gpu__time_duration.sum,\\
smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\\
smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio python tools/probes/fp8_ncu.py [MxNxK]"""
import sys

import torch

import gemmlab

M, N, K = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "4096x4096x4096").split("x"))
a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
kb, nb = -(-K // 128), -(-N // 128)
scales = {"tensor": (torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")),
          "row": (torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5),
          "block": (torch.rand(kb, M, device="cuda").t() + 0.5, torch.rand(kb, nb, device="cuda") + 0.5)}
for name, (sa, sb) in scales.items():
    for _ in range(2):
        gemmlab.scaled_mm(a, b, sa, sb, check_finite=False)
torch.cuda.synchronize()
