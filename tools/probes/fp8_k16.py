"""Rows 16-byte but not 32-byte aligned (K % 32 == 16 for K-major FP8, K % 16 == 8 for K-major
16-bit operands) beside aligned K, timed together per shape by the one timing engine (cold L2, NVML
clocks):

    python tools/probes/fp8_k16.py OUT.json [MxNxK ...]
    ncu --clock-control none -k regex:gemm --csv --metrics METRICS python tools/probes/fp8_k16.py --ncu

Per FP8 shape (rung 25, tensor-wise scales unless named): the L2 promotion (128 or 64 bytes against
the default 256), a cluster of 2, the 128x192 tile, the rule's choice ("auto"), fast accumulation and
block scales in the rule's tile with the promotion at 256 and at 128 bytes, the operands copied first into rows of a
32-byte multiple ("pad32", copies timed with the product; "pad32 gemm" the product alone on such
copies), and torch._scaled_mm. Per bf16 shape (prefix ``bf16:``): ``auto`` against its own
configuration with the 128-byte promotion, and torch.matmul.

What the rule's L2 promotion for such rows rests on (core/rules.py, ``fp8_promotion``); one JSON,
TFLOP/s per candidate. The default shapes: two pairs of K % 32 == 16 and 0, four random shapes of
K % 32 == 16 the rule was not set on (log-uniform M, N of 1024-16384, seed 13), and three bf16
pairs."""
from __future__ import annotations

import json
import sys

import torch

import gemmlab
from gemmlab.analysis import environment
from gemmlab.core.driver import device_info
from gemmlab.measure.arrays import Lib
from gemmlab.measure.gpu_timing import CudaDevice, NvmlClocks
from gemmlab.measure.timing import Candidate, Engine, Settings

SHAPES = ["7152x6544x5072", "7152x6544x5088", "2384x8544x1648", "2384x8544x1664",
          "2096x6848x5488", "10784x1712x1168", "1536x1904x6544", "1472x4464x1104",
          "bf16:4096x4096x4104", "bf16:4096x4096x4112", "bf16:7152x6544x5064", "bf16:2384x8544x1640"]
CONFIGS = {"128x128": {}, "128x128_p128": {"L2PROMO": 128}, "128x128_p64": {"L2PROMO": 64},
           "128x128_c2": {"CLUSTER": 2}, "128x128_c2_p128": {"CLUSTER": 2, "L2PROMO": 128},
           "128x192": {"BN": 192, "STAGES": 5}, "128x192_p128": {"BN": 192, "STAGES": 5, "L2PROMO": 128},
           "128x192_c2_p128": {"BN": 192, "STAGES": 5, "CLUSTER": 2, "L2PROMO": 128}}


def fp8_candidates(M: int, N: int, K: int, plans: dict) -> list:
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
    sa, sb = torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")
    kb = -(-K // 128)
    ba, bb = torch.rand(M, kb, device="cuda") + 0.5, torch.rand(kb, -(-N // 128), device="cuda") + 0.5
    Kp = -(-K // 32) * 32
    ap = torch.empty(M, Kp, device="cuda", dtype=a.dtype)[:, :K]
    bp = torch.empty(N, Kp, device="cuda", dtype=a.dtype)[:, :K]
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def call(x, y, s, t, cfg=None, fast=False, plan_as=None):
        kernel = "auto" if cfg is None else "wgmma_fp8"
        if plan_as:
            _, plans[plan_as] = gemmlab.scaled_mm(x, y, s, t, out=out, kernel=kernel, config=cfg, use_fast_accum=fast,
                                                  return_plan=True)
        return lambda: gemmlab.scaled_mm(x, y, s, t, out=out, kernel=kernel, config=cfg, use_fast_accum=fast,
                                         check_finite=False)

    def padded():
        ap.copy_(a)
        bp.copy_(b.t())
        gemmlab.scaled_mm(ap, bp.t(), sa, sb, out=out, check_finite=False)

    cands = [Candidate(n, call(a, b, sa, sb, cfg, plan_as=n)) for n, cfg in CONFIGS.items()]
    cands.append(Candidate("auto", call(a, b, sa, sb, plan_as="auto")))
    for name, s, t, fast in (("fast", sa, sb, True), ("block", ba, bb, False)):
        call(a, b, s, t, fast=fast, plan_as=name)
        choice = plans.pop(name).choice
        for promo in (256, 128):
            cfg = {**choice.rung.config(choice.config, "fp8_fast" if fast else "fp8"), "L2PROMO": promo}
            cands.append(Candidate(f"{name}_p{promo}", call(a, b, s, t, cfg, fast, plan_as=f"{name}_p{promo}")))
    cands += [Candidate("pad32", padded), Candidate("pad32 gemm", call(ap, bp.t(), sa, sb, plan_as="pad32 gemm")),
              Candidate("torch_scaled_mm", lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16))]
    return cands


def bf16_candidates(M: int, N: int, K: int, plans: dict) -> list:
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    p = plans["auto"] = gemmlab.plan(a, b, c)
    slug, cfg = p.choice.rung.slug, {**p.choice.rung.config(p.choice.config, "bf16"), "L2PROMO": 128}
    plans["auto_p128"] = gemmlab.plan(a, b, c, kernel=slug, config=cfg)
    return [Candidate("auto", lambda: gemmlab.gemm(a, b, c)),
            Candidate("auto_p128", lambda: gemmlab.gemm(a, b, c, kernel=slug, config=cfg)),
            Candidate("torch_matmul", lambda: torch.matmul(a, b, out=c))]


def main(out_path: str, shapes: list[str]) -> None:
    info = device_info(0)
    st = Settings(l2="cold", max_samples=20, time_cap_s=1.0)
    engine = Engine(CudaDevice(Lib("torch"), 0, info.l2_bytes, flush=True, spin=st.spin), st, NvmlClocks(0))
    doc = {"gpu": info.name, "environment": environment.collect(0), "settings": st.as_dict(), "runs": []}
    for shape in shapes:
        dtype, _, dims = shape.rpartition(":")
        M, N, K = (int(x) for x in dims.split("x"))
        plans: dict = {}
        cands = (bf16_candidates if dtype == "bf16" else fp8_candidates)(M, N, K, plans)
        engine.warm_up(cands)
        run = engine.measure(cands)
        res = {n: s.as_dict() for n, s in run.samples.items()}
        tflops = {n: 2.0 * M * N * K / (s["median_ms"] / 1e3) / 1e12 for n, s in res.items() if s.get("median_ms")}
        doc["runs"].append({"shape": [M, N, K], "dtype": dtype or "fp8", "tflops": tflops,
                            "plans": {k: repr(v) for k, v in plans.items()}, "samples": res})
        print(shape, {k: round(v) for k, v in sorted(tflops.items(), key=lambda kv: -kv[1])}, flush=True)
        print("   auto:", repr(plans["auto"]), flush=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


def for_ncu() -> None:
    """The rule's choice at 7152x6544x5072 with the promotion at 256 and 128 bytes, at 7152x6544x5088,
    and torch._scaled_mm at 5072, two launches each."""
    for K in (5072, 5088):
        a = torch.randn(7152, K, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(6544, K, device="cuda").to(torch.float8_e4m3fn).t()
        sa, sb = torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")
        _, plan = gemmlab.scaled_mm(a, b, sa, sb, return_plan=True)
        cfg = plan.choice.rung.config(plan.choice.config, "fp8")
        for promo in ((256, 128) if K % 32 else (256,)):
            for _ in range(2):
                gemmlab.scaled_mm(a, b, sa, sb, kernel="wgmma_fp8", config={**cfg, "L2PROMO": promo})
        if K % 32:
            for _ in range(2):
                torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ncu"]:
        for_ncu()
    else:
        main(sys.argv[1], sys.argv[2:] or SHAPES)
