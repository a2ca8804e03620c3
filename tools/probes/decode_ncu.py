# Nsight Compute probe of rung 24 (decode) on thin fp16 shapes: one launch each of an aligned one
# (8x14336x4096) and of 6x11694x4846 with B row- and column-major (no 16-byte access), at the rung's
# rule configuration for aligned operands, compiled before the profiled range. Run under ncu, e.g.
#   ncu --profile-from-start off --kernel-name gemm --metrics <list> --csv --page raw \
#       python tools/probes/decode_ncu.py
# (benchmarks/profiles/h200_ncu_decode_*.csv.gz: the metrics list is in their manifest entries).
import torch
import gemmlab
from gemmlab.core import decode
from gemmlab.core.driver import device_info

info = device_info(0)
runs = []
for M, N, K, b_col in [(8, 14336, 4096, 0), (6, 11694, 4846, 0), (6, 11694, 4846, 1)]:
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = (torch.randn(N, K, device="cuda", dtype=torch.float16).t() if b_col
         else torch.randn(K, N, device="cuda", dtype=torch.float16))
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    kp = gemmlab.plan(a, b, c).problem.kernel_view()
    cfg, _ = decode.rule(kp.M, kp.N, kp.K, info.sm_count, info.arch, kp.a_col, kp.b_col)
    gemmlab.gemm(a, b, c, kernel="decode", config=cfg)
    runs.append((a, b, c, cfg))
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for a, b, c, cfg in runs:
    gemmlab.gemm(a, b, c, kernel="decode", config=cfg)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
