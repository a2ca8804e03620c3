# Nsight Compute probe of rung 24's two rings (registers, ASYNC=0; shared memory by cp.async,
# ASYNC=1), bf16, one launch each after a read of 512 MB, compiled before the profiled range.
#   default: 1x4096x14336 split 4 in a cluster, B row-major (the ring's copies in k-row order) and
#            column-major (benchmarks/profiles/h200_ncu_decode_ring.csv.gz);
#   m32:     32x14336x4096, B row-major, the 32-column tile with each ring
#            (h200_ncu_decode_ring_m32.csv.gz: its first two launches; the others split M=32 into
#            thinner tiles, reading B more than once).
# Run under ncu, e.g.
#   ncu --profile-from-start off --kernel-name gemm --metrics <list> --csv --page raw \
#       python tools/probes/decode_ring_ncu.py [m32]
# (the metrics list is in the profiles' manifest entries).
import sys

import torch

import gemmlab

if sys.argv[1:] == ["m32"]:
    (M, N, K), split = (32, 14336, 4096), 1
    runs = [(0, dict(BM=32, DEPTH=2, ASYNC=0, L2PF=0)), (0, dict(BM=32, DEPTH=3, ASYNC=1, L2PF=0)),
            (0, dict(BM=16, DEPTH=2, ASYNC=0, L2PF=0)), (0, dict(BM=16, DEPTH=3, ASYNC=1, L2PF=0)),
            (0, dict(BM=8, DEPTH=3, ASYNC=1, L2PF=0))]
else:
    (M, N, K), split = (1, 4096, 14336), 4
    runs = [(0, dict(DEPTH=3, ASYNC=0, L2PF=0)), (0, dict(DEPTH=4, ASYNC=1, L2PF=0)),
            (0, dict(DEPTH=6, ASYNC=1, L2PF=0)), (1, dict(DEPTH=3, ASYNC=0, L2PF=1)),
            (1, dict(DEPTH=4, ASYNC=1, L2PF=1))]
base = {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "SPLITK": split, "SKCLUSTER": int(split > 1)}
flush = torch.ones(128 * 2**20, dtype=torch.float32, device="cuda")
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
bs = {0: torch.randn(K, N, device="cuda", dtype=torch.bfloat16),
      1: torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()}
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
for b_col, extra in runs:
    gemmlab.gemm(a, bs[b_col], c, kernel="decode", config=dict(base, **extra))
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for b_col, extra in runs:
    flush.sum()
    gemmlab.gemm(a, bs[b_col], c, kernel="decode", config=dict(base, **extra))
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
