"""Fused bias + activation against the plain GEMM and PyTorch's peers, on the timing engine
(cold L2, spin, peers interleaved in one run): gemmlab's plain GEMM, gemmlab's fused call,
torch._addmm_activation (cuBLASLt's GELU epilogue: the tanh GELU), torch.matmul, and the unfused
PyTorch sequence matmul + bias + gelu(tanh). Every gemmlab result is verified against float64 first.

    python tools/bench_epilogue.py --dtype bf16 --shapes 4096x14336x4096,128x14336x4096,8192x8192x8192 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import gemmlab
from gemmlab.analysis import environment
from gemmlab.core.driver import device_info
from gemmlab.measure import timing
from gemmlab.measure.arrays import Lib


def _shape(s: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in s.lower().split("x"))
    return m, n, k


def measure(M: int, N: int, K: int, dtype: str, activation: str, engine) -> dict:
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    bias = torch.randn(N, device="cuda", dtype=tdt)
    c = torch.empty(M, N, device="cuda", dtype=tdt)
    act_t = {"gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
             "gelu": torch.nn.functional.gelu, "relu": torch.relu, "silu": torch.nn.functional.silu}[activation]
    # correctness first: the fused call against float64
    gemmlab.gemm(a, b, c, bias=bias, activation=activation)
    want = act_t(a.double() @ b.double() + bias.double())
    err = float((c.double() - want).norm() / want.norm())
    plain_c = torch.empty_like(c)
    cands = [
        timing.Candidate("gemmlab", lambda: gemmlab.gemm(a, b, plain_c)),
        timing.Candidate(f"gemmlab+bias+{activation}", lambda: gemmlab.gemm(a, b, c, bias=bias, activation=activation)),
        timing.Candidate("torch.matmul", lambda: torch.matmul(a, b, out=plain_c)),
        timing.Candidate("unfused torch", lambda: act_t(torch.matmul(a, b) + bias)),
    ]
    if activation == "gelu_tanh":
        cands.append(timing.Candidate("torch._addmm_activation",
                                      lambda: torch._addmm_activation(bias, a, b, use_gelu=True)))
    elif activation == "relu":
        cands.append(timing.Candidate("torch._addmm_activation",
                                      lambda: torch._addmm_activation(bias, a, b, use_gelu=False)))
    run = engine.measure(cands)
    med = {name: s.median for name, s in run.samples.items()}
    return {"M": M, "N": N, "K": K, "dtype": dtype, "activation": activation, "rel_error_vs_fp64": err,
            "median_ms": med, "samples": {n: s.as_dict() for n, s in run.samples.items()},
            "plan": repr(gemmlab.plan(a, b, c, bias=bias, activation=activation))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--activation", default="gelu_tanh")
    p.add_argument("--shapes", default="4096x14336x4096,128x14336x4096,8192x8192x8192")
    p.add_argument("--json")
    args = p.parse_args(argv)
    info = device_info(0)
    L = Lib("torch")
    st = timing.Settings()
    dev = timing.CudaDevice(L, 0, info.l2_bytes, flush=True, spin=st.spin)
    clocks = timing.NvmlClocks(0) if environment.max_sm_clock_mhz(0) else None
    engine = timing.Engine(dev, st, clocks)
    rows = []
    for s in args.shapes.split(","):
        r = measure(*_shape(s), args.dtype, args.activation, engine)
        m = r["median_ms"]
        fused = m[f"gemmlab+bias+{args.activation}"]
        print(f"{s} {args.dtype}: plain {m['gemmlab']:.4f} ms, fused {fused:.4f} ms ({fused / m['gemmlab']:.3f}x plain), "
              f"torch.matmul {m['torch.matmul']:.4f}, unfused torch {m['unfused torch']:.4f}"
              + (f", _addmm_activation {m['torch._addmm_activation']:.4f} (fused is {m['torch._addmm_activation'] / fused:.3f}x faster)"
                 if "torch._addmm_activation" in m else "") + f"; rel. error {r['rel_error_vs_fp64']:.2e}", flush=True)
        rows.append(r)
    if args.json:
        env = environment.collect() if hasattr(environment, "collect") else {}
        with open(args.json, "w") as f:
            json.dump({"env": env, "settings": st.as_dict(), "results": rows}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
