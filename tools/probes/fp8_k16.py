"""Operand rows 16-byte but not 32-byte aligned (K % 32 == 16 for K-major FP8, 8 mod 16 elements
for 16-bit operands) beside aligned rows, timed together per shape by the one timing engine (cold
L2, NVML clocks):

    python tools/probes/fp8_k16.py OUT.json [MxNxK | bf16:MxNxK ...]
    python tools/probes/fp8_k16.py OUT.json --random COUNT [--seed S]
    ncu --clock-control none -k regex:gemm --csv --metrics METRICS python tools/probes/fp8_k16.py --ncu

Per FP8 shape (rung 25): the rule's choice ("auto"; "fast", "block": fast accumulation, block
scales), tiles of 128x128 and 128x192 with the L2 promotion at 128 bytes (the copy engine's default
is 256) and clusters of 2, the operands copied first into rows of a 32-byte multiple ("pad32":
copies timed with the product), and torch._scaled_mm (tensor-wise; "torch fast" with fast
accumulation). Per bf16 shape: ``auto`` beside its own configuration at each promotion, with A
read from rows of 16-byte and of 32-byte multiples ("a16", "a32": the product alone on such
copies), and torch.matmul. ``--random``: COUNT FP8 shapes of K % 32 == 16 and COUNT bf16 shapes,
log-uniform M, N, K (a held-out sample, seed S).

What the rules for such rows rest on (core/rules.py, ``misaligned_rows``); one JSON, TFLOP/s per
candidate."""
from __future__ import annotations

import json
import math
import random
import sys

import torch

import gemmlab
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = ["7152x6544x5072", "7152x6544x5088", "2384x8544x1648", "2384x8544x1664",
          "2096x6848x5488", "10784x1712x1168", "1536x1904x6544", "1472x4464x1104",
          "bf16:4096x4096x4104", "bf16:4096x4096x4112", "bf16:7152x6544x5064", "bf16:2384x8544x1640"]
TILE = {"BM": 128, "BK": 128, "WM": 64}
PROMOTED = {"128x128_p128": {"BN": 128, "STAGES": 6, "L2PROMO": 128},
            "128x128_c2_p128": {"BN": 128, "STAGES": 6, "CLUSTER": 2, "L2PROMO": 128},
            "128x192_p128": {"BN": 192, "STAGES": 5, "L2PROMO": 128},
            "128x192_c2_p128": {"BN": 192, "STAGES": 5, "CLUSTER": 2, "L2PROMO": 128},
            "128x192_c2": {"BN": 192, "STAGES": 5, "CLUSTER": 2, "L2PROMO": 256}}
FAST = {"fast 128x256_p128": {"BN": 256, "STAGES": 4, "DEFER": 1, "L2PROMO": 128},
        "fast 128x256_c2_p128": {"BN": 256, "STAGES": 4, "DEFER": 1, "CLUSTER": 2, "L2PROMO": 128},
        "fast 128x128_c2_p128": {"BN": 128, "STAGES": 6, "DEFER": 0, "CLUSTER": 2, "L2PROMO": 128}}
BLOCK = {"block 128x128_p128": {"BN": 128, "STAGES": 6, "L2PROMO": 128},
         "block 128x128_c2_p128": {"BN": 128, "STAGES": 6, "CLUSTER": 2, "L2PROMO": 128}}


def draw(count: int, seed: int) -> list[str]:
    """COUNT FP8 shapes of K % 32 == 16 and COUNT bf16 shapes, M of 64-16384, N and K of 256-16384
    (log-uniform; FP8's N a multiple of 16, as torch._scaled_mm takes)."""
    rng = random.Random(seed)

    def lu(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    fp8 = [f"{lu(64, 16384)}x{lu(256, 16384) // 16 * 16}x{lu(256, 16384) // 32 * 32 + 16}" for _ in range(count)]
    return fp8 + [f"bf16:{lu(64, 16384)}x{lu(256, 16384)}x{lu(256, 16384)}" for _ in range(count)]


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

    def call(name, s, t, cfg=None, fast=False, x=a, y=b):
        kernel = "auto" if cfg is None else "wgmma_fp8"
        cfg = None if cfg is None else {**TILE, **cfg}
        _, plans[name] = gemmlab.scaled_mm(x, y, s, t, out=out, kernel=kernel, config=cfg, use_fast_accum=fast,
                                           return_plan=True)
        return Candidate(name, lambda: gemmlab.scaled_mm(x, y, s, t, out=out, kernel=kernel, config=cfg,
                                                         use_fast_accum=fast, check_finite=False))

    def padded():
        ap.copy_(a)
        bp.copy_(b.t())
        gemmlab.scaled_mm(ap, bp.t(), sa, sb, out=out, check_finite=False)

    return ([call("auto", sa, sb), call("fast", sa, sb, fast=True), call("block", ba, bb)]
            + [call(n, sa, sb, cfg) for n, cfg in PROMOTED.items()]
            + [call(n, sa, sb, cfg, fast=True) for n, cfg in FAST.items()]
            + [call(n, ba, bb, cfg) for n, cfg in BLOCK.items()]
            + [Candidate("pad32", padded),
               Candidate("torch", lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)),
               Candidate("torch fast", lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16,
                                                                use_fast_accum=True))])


def bf16_candidates(M: int, N: int, K: int, plans: dict) -> list:
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    p = plans["auto"] = gemmlab.plan(a, b, c)
    slug, cfg = p.choice.rung.slug, p.choice.rung.config(p.choice.config, "bf16")
    cands = [Candidate("auto", lambda: gemmlab.gemm(a, b, c)),
             Candidate("torch", lambda: torch.matmul(a, b, out=c))]
    for promo in ((256, 128) if "L2PROMO" in cfg else ()):   # a rung with tensor maps
        own = {**cfg, "L2PROMO": promo}
        plans[f"auto_p{promo}"] = gemmlab.plan(a, b, c, kernel=slug, config=own)
        cands.append(Candidate(f"auto_p{promo}", lambda own=own: gemmlab.gemm(a, b, c, kernel=slug, config=own)))
    for row in (16, 32):   # A in rows of a 16-byte multiple that is not a 32-byte one, and of a 32-byte one
        ld = -(-K // 8) * 8
        ld += 8 if (ld % 16 == 0) == (row == 16) else 0
        ap = torch.empty(M, ld, device="cuda", dtype=a.dtype)[:, :K]
        ap.copy_(a)
        plans[f"a{row}"] = gemmlab.plan(ap, b, c)
        cands.append(Candidate(f"a{row}", lambda ap=ap: gemmlab.gemm(ap, b, c)))
    return cands


def main(out_path: str, shapes: list[str]) -> None:
    engine, doc = timed.engine_and_doc(20, 1.0)
    for shape in shapes:
        dtype, _, dims = shape.rpartition(":")
        M, N, K = (int(x) for x in dims.split("x"))
        plans: dict = {}
        cands = (bf16_candidates if dtype == "bf16" else fp8_candidates)(M, N, K, plans)
        res, tflops = timed.measure(engine, cands, 2.0 * M * N * K)
        doc["runs"].append({"shape": [M, N, K], "dtype": dtype or "fp8", "tflops": tflops,
                            "plans": {k: repr(v) for k, v in plans.items()}, "samples": res})
        print(shape, {k: round(v) for k, v in sorted(tflops.items(), key=lambda kv: -kv[1])}, flush=True)
        for k in ("auto", "fast", "block"):
            if k in plans:
                print(f"   {k}:", repr(plans[k]).split("]; ")[-1][:400], flush=True)
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
    args = sys.argv[1:]
    if args[:1] == ["--ncu"]:
        for_ncu()
    elif args[1:2] == ["--random"]:
        main(args[0], draw(int(args[2]), int(args[args.index("--seed") + 1]) if "--seed" in args else 0))
    else:
        main(args[0], args[1:] or SHAPES)
