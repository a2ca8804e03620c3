"""The moe suite's 8-expert down projection (bench/moe.py's routing) with 128x256 tiles: a stream-K
tail, then none with DEFER 0 and 1, twice each, for Nsight Compute to profile the second round
(what the tail changes in time, DRAM bytes and the SMs' clock):

    ncu --clock-control none -k regex:gemm --launch-skip 3 --launch-count 3 --csv \\
        --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,\\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed python tools/probes/moe_streamk_ncu.py"""
import torch
import gemmlab
from gemmlab.bench.moe import route
G, T, N, K = 8, 4096, 4096, 14336
counts = route(torch, T, G)
ends = torch.tensor(counts).cumsum(0).to(torch.int32).cuda()
a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
for _ in range(2):
    for cfg in ({"DEFER": 0, "STREAMK": 1}, {"DEFER": 0}, {"DEFER": 1}):
        gemmlab.grouped_mm(a, b, ends, out=out, config=cfg, check=False)
torch.cuda.synchronize()
