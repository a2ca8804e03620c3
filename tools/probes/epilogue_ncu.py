"""Rung 21 at 4096^3 in bf16 (DEFER=1, no stream-K tail) with each epilogue, for Nsight Compute: plain,
bias + GELU (tanh), a bias alone, bias + ReLU; two launches each. What the fused epilogue adds to the
consumers' instructions and to the kernel's time:

    ncu --clock-control none --kernel-name gemm --csv --metrics gpu__time_duration.sum,\
smsp__inst_executed.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_xu.sum,\
sm__inst_executed_pipe_alu.sum,sm__cycles_elapsed.avg.per_second python tools/probes/epilogue_ncu.py

(benchmarks/profiles/h200_ncu_epilogue_fused_4096.csv.gz). Another shape and configuration:
``python tools/probes/epilogue_ncu.py 128x14336x4096 BN=128,CLUSTER=1,DEFER=0,STAGES=5`` (the epilogue
suite's plan there; benchmarks/profiles/h200_ncu_epilogue_fused_128x14336x4096.csv.gz)."""
import sys

import torch

import gemmlab

M, N, K = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "4096x4096x4096").split("x"))
CONFIG = (dict((k, int(v)) for k, v in (kv.split("=") for kv in sys.argv[2].split(",")))
          if len(sys.argv) > 2 else {"STREAMK": 0, "DEFER": 1})
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
for kw in ({}, {"bias": bias, "activation": "gelu_tanh"}, {"bias": bias}, {"bias": bias, "activation": "relu"}):
    for _ in range(2):
        gemmlab.matmul(a, b, kernel="wgmma_ws", config=CONFIG, **kw)
torch.cuda.synchronize()
