"""What the probes that time candidates share: the one timing engine (cold L2, a spin before every
launch, NVML clocks sampled while the GPU works) with its result document, one round of candidates
timed together, as TFLOP/s of a product of ``flop`` operations, and for the FP8 probes their random
shapes, their operands and their loop over shapes into one JSON document."""
from __future__ import annotations

import json
import math
import random

import torch

from gemmlab.analysis import environment
from gemmlab.core.driver import device_info
from gemmlab.core.rules import FP8_TILE_ROWS
from gemmlab.measure.arrays import Lib
from gemmlab.measure.gpu_timing import CudaDevice, NvmlClocks
from gemmlab.measure.timing import Engine, Settings


def engine_and_doc(max_samples: int = 30, time_cap_s: float = 1.5):
    """The timing engine on GPU 0 and the result document a probe fills (its ``runs`` empty)."""
    info = device_info(0)
    st = Settings(l2="cold", max_samples=max_samples, time_cap_s=time_cap_s)
    engine = Engine(CudaDevice(Lib("torch"), 0, info.l2_bytes, flush=True, spin=st.spin), st, NvmlClocks(0))
    return engine, {"gpu": info.name, "environment": environment.collect(0), "settings": st.as_dict(), "runs": []}


def measure(engine, cands: list, flop: float) -> tuple[dict, dict]:
    """The candidates warmed up and timed together: (each one's samples as a dict, its TFLOP/s)."""
    engine.warm_up(cands)
    run = engine.measure(cands)
    res = {n: s.as_dict() for n, s in run.samples.items()}
    return res, {n: flop / (s["median_ms"] / 1e3) / 1e12 for n, s in res.items() if s.get("median_ms")}


def draw(count: int, seed: int, m: tuple[int, int]) -> list[str]:
    """``count`` FP8 shapes "MxNxK" from ``seed``: M in ``m``, N and K in 1024-16384, log-uniform; N a
    multiple of 16 and K of 32, as torch._scaled_mm and aligned rows take."""
    rng = random.Random(seed)

    def lu(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    return [f"{lu(*m)}x{lu(1024, 16384) // 16 * 16}x{lu(1024, 16384) // 32 * 32}" for _ in range(count)]


def fp8_operands(M: int, N: int, K: int):
    """Random e4m3 a (M, K) row-major and b (K, N) column-major on the GPU, and a tensor-wise scale
    pair: the FP8 probes' operands."""
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
    return a, b, (torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda"))


def fp8_scalings(M: int, N: int, K: int):
    """Random e4m3 operands (``fp8_operands``) with each scaling's scales: (a, b, tensor-wise,
    row-wise (M, 1) and (1, N), block-wise (M, ceil(K/128)) and (ceil(K/128), ceil(N/128))), all
    within [0.5, 1.5), and a bf16 output (M, N)."""
    a, b, st = fp8_operands(M, N, K)
    sr = (torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5)
    kb = -(-K // 128)
    sk = (torch.rand(M, kb, device="cuda") + 0.5, torch.rand(kb, -(-N // 128), device="cuda") + 0.5)
    return a, b, st, sr, sk, torch.empty(M, N, device="cuda", dtype=torch.bfloat16)


def run_shapes(out_path: str, shapes: list[str], candidates, show: tuple[str, ...], **doc_extra) -> None:
    """Each shape "MxNxK" timed over ``candidates(M, N, K, plans)`` (which fills ``plans`` with the
    plans of the named candidates), printed (with why the plans in ``show`` chose what they did) and
    written to ``out_path`` as one JSON document (``doc_extra`` added to it)."""
    engine, doc = engine_and_doc(20, 1.0)
    doc.update(doc_extra)
    for shape in shapes:
        M, N, K = (int(x) for x in shape.split("x"))
        plans: dict = {}
        cands = candidates(M, N, K, plans)
        res, tflops = measure(engine, cands, 2.0 * M * N * K)
        doc["runs"].append({"shape": [M, N, K], "tflops": tflops, "plans": {k: repr(v) for k, v in plans.items()},
                            "samples": res})
        print(shape, {k: round(v) for k, v in sorted(tflops.items(), key=lambda kv: -kv[1])}, flush=True)
        for k in show:
            print(f"   {k}:", repr(plans[k]).split("]; ")[-1][:300], flush=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


# rung 25's tile geometry beside a configuration's BN, STAGES and switches (the FP8 probes' configs)
RUNG25_TILE = FP8_TILE_ROWS


def scaled_calls(a, b, out, plans: dict):
    """``call(name, scales, cfg=None, fast=False)``: a Candidate of gemmlab.scaled_mm(a, b, *scales,
    out=out) on rung 25 with ``cfg`` (its tile geometry added) or "auto" (None), its plan put in
    ``plans[name]``."""
    import gemmlab
    from gemmlab.measure.timing import Candidate

    def call(name, s, cfg=None, fast=False):
        kernel = "auto" if cfg is None else "wgmma_fp8"
        cfg = None if cfg is None else {**RUNG25_TILE, **cfg}
        _, plans[name] = gemmlab.scaled_mm(a, b, *s, out=out, kernel=kernel, config=cfg, use_fast_accum=fast,
                                           return_plan=True)
        return Candidate(name, lambda: gemmlab.scaled_mm(a, b, *s, out=out, kernel=kernel, config=cfg,
                                                         use_fast_accum=fast, check_finite=False))
    return call


def cli(main, shapes: list[str], m: tuple[int, int]) -> None:
    """A probe's command line: OUT.json [MxNxK ...] (``shapes`` by default), or OUT.json --random
    COUNT [--seed S] [--m LO-HI] (``draw``, M in ``m`` by default)."""
    import sys
    args = sys.argv[1:]
    if args[1:2] == ["--random"]:
        if "--m" in args:
            m = tuple(int(x) for x in args[args.index("--m") + 1].split("-"))
        main(args[0], draw(int(args[2]), int(args[args.index("--seed") + 1]) if "--seed" in args else 0, m))
    else:
        main(args[0], args[1:] or shapes)
