"""The batched suite's shapes (core/shapes.py, BATCHED_SUITE) for Nsight Compute: gemmlab.matmul on
(B, M, K) @ (B, K, N) and torch.bmm on the same operands, bf16 and fp32, two calls each, with an
NVTX range per call so the CSV says which kernels each launched. What separates the two calls on a
batch of small products: the kernels' durations, grid, clock and DRAM bytes:

    ncu --clock-control none --nvtx --print-nvtx-rename kernel --csv --metrics gpu__time_duration.sum,\
launch__grid_size,launch__block_size,launch__registers_per_thread,sm__cycles_elapsed.avg.per_second,\
dram__bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed python tools/probes/batched_ncu.py

(benchmarks/profiles/h200_ncu_batched.csv.gz). Each shape's plan (rung, configuration, why) is
printed after its calls, on stdout."""
import torch

import gemmlab
from gemmlab.core import api
from gemmlab.core.shapes import BATCHED_SUITE

for dtype in (torch.bfloat16, torch.float32):
    for batch, m, n, k in BATCHED_SUITE:
        a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
        b = torch.randn(batch, k, n, device="cuda", dtype=dtype)
        c = torch.empty(batch, m, n, device="cuda", dtype=dtype)
        name = f"{str(dtype).split('.')[-1]} {batch}x{m}x{n}x{k}"
        for peer in ("gemmlab", "torch.bmm"):
            for _ in range(2):
                with torch.cuda.nvtx.range(f"{peer} {name}"):
                    if peer == "gemmlab":
                        gemmlab.matmul(a, b, out=c)
                    else:
                        torch.bmm(a, b, out=c)
        torch.cuda.synchronize()
        print(name, "gemmlab:", api.batch_plans()[-1], flush=True)
