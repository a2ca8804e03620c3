"""The moe suite's 128-expert layer (bench/moe.py's routing) through gemmlab.grouped_mm and through
gemmlab.grouped_mm_masked on the same tokens, each twice, for Nsight Compute to profile the second
pair (what the masked form reads beyond the contiguous one):

    ncu --clock-control none -k regex:gemm --launch-skip 2 --launch-count 2 --csv \\
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_bytes.sum \\
        python tools/probes/moe_ncu.py"""
import torch

import gemmlab
from gemmlab.bench.moe import route

G, T, N, K = 128, 4096, 768, 2048


def layer():
    """The layer's operands: counts, their cumulative ends, tokens a (T, K), weights b (G, K, N)
    K-major, and the masked form's padded buffer (G, max count, K) of the same tokens with the counts
    on the device."""
    counts = route(torch, T, G)
    ends = torch.tensor(counts).cumsum(0).to(torch.int32).cuda()
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    am = torch.zeros(G, max(counts), K, device="cuda", dtype=torch.bfloat16)
    start = 0
    for g, c in enumerate(counts):
        am[g, :c] = a[start:start + c]
        start += c
    return counts, ends, a, b, am, torch.tensor(counts, dtype=torch.int32, device="cuda")


if __name__ == "__main__":
    counts, ends, a, b, am, cnt = layer()
    for _ in range(2):
        gemmlab.grouped_mm(a, b, ends, check=False)
        gemmlab.grouped_mm_masked(am, b, cnt, check=False)
    torch.cuda.synchronize()
    print("rows per group", am.shape[1], "activation bytes", a.numel() * a.element_size(), "padded buffer bytes",
          am.numel() * am.element_size())
