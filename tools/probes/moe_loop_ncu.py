"""The moe suite's 8-expert up projection (bench/moe.py's routing) through gemmlab.grouped_mm at the
rule's configuration and through the loop of torch.matmul over the experts (bench --suite moe's
peer), each twice, for Nsight Compute: the tensor pipe's busy cycles each issues (the rows it
multiplies and throws away), its clock and its DRAM bytes.

    ncu --clock-control none --csv --metrics METRICS python tools/probes/moe_loop_ncu.py

The operands' random fills run first (their kernels are in the profile too, named as torch names
them); then rung 26's ``gemm`` twice, then the loop's cuBLAS kernels twice over."""
from __future__ import annotations

import torch

import gemmlab
from gemmlab.bench.moe import route

G, T, N, K = 8, 4096, 14336, 4096

if __name__ == "__main__":
    counts = route(torch, T, G)
    ends = torch.tensor(counts).cumsum(0).to(torch.int32).cuda()
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    starts = [0] + ends.tolist()[:-1]
    for _ in range(2):
        gemmlab.grouped_mm(a, b, ends, out=out, check=False)
    for _ in range(2):
        for g, (s, e) in enumerate(zip(starts, ends.tolist())):
            if e > s:
                torch.matmul(a[s:e], b[g], out=out[s:e])
    torch.cuda.synchronize()
    print("counts", counts)
