"""Rung 27's tiles and switches on FP8 mixture-of-experts layers (row-wise scales, bf16 out), beside
torch._scaled_grouped_mm, timed together per shape by the one timing engine (cold L2, NVML clocks),
the tokens routed as bench --suite moe routes them (bench/moe.py, ``route``):

    python tools/probes/moe_fp8_tiles.py OUT.json [GxTxNxK ...]
    python tools/probes/moe_fp8_tiles.py OUT.json --random COUNT [--seed S]

What the FP8 grouped rule's tile choice rests on (core/families/hopper.py, ``grouped_fp8_config``),
in each accumulation: promoted (precision fp8) and fast (fp8_fast). ``--random``: a held-out sample
of layers (tools/probes/moe_tiles.py's draw) the rule was not set on. One JSON, TFLOP/s per
configuration; "auto" is the rule's choice in each precision."""
from __future__ import annotations

import json
import sys

import torch

from gemmlab.bench.moe import route
from gemmlab.core import scaled_grouped
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from moe_tiles import SHAPES, engine_and_doc, layers, record  # noqa: E402

FP8_SHAPES = SHAPES[:5]   # the suite's layers and a smaller Mixtral-like one
PROMOTED = {"128x128": {"BN": 128, "STAGES": 6}, "128x64": {"BN": 64, "STAGES": 8},
            "128x128_sk": {"BN": 128, "STAGES": 6, "STREAMK": 1}}
FAST = {"128x256": {"BN": 256, "STAGES": 4, "DEFER": 1}, "128x256_d0": {"BN": 256, "STAGES": 4, "DEFER": 0},
        "128x128": {"BN": 128, "STAGES": 6, "DEFER": 0},
        "256x128": {"BM": 256, "WM": 128, "BN": 128, "STAGES": 4, "DEFER": 0},
        "128x256_sk": {"BN": 256, "STAGES": 4, "DEFER": 0, "STREAMK": 1}}


def main(out_path: str, shapes: list[str]) -> None:
    engine, doc = engine_and_doc()
    for shape in shapes:
        G, T, N, K = (int(x) for x in shape.split("x"))
        counts = route(torch, T, G)
        ends = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32).cuda()
        a = (torch.randn(T, K, device="cuda") * 2).to(torch.float8_e4m3fn)
        b = (torch.randn(G, N, K, device="cuda") * 2).to(torch.float8_e4m3fn).transpose(-2, -1)
        sa, sb = torch.rand(T, device="cuda") + 0.5, torch.rand(G, N, device="cuda") + 0.5
        out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
        cands, plans = [], {}
        for fast, configs in ((False, PROMOTED), (True, FAST)):
            for name, cfg in {**configs, "auto": None}.items():
                label = ("fast " if fast else "") + name
                call = lambda cfg=cfg, fast=fast: scaled_grouped.scaled_grouped_mm(
                    a, b, sa, sb, ends, out=out, config=cfg, use_fast_accum=fast, check=False, check_finite=False)
                try:
                    call()
                except ValueError as exc:   # a configuration the shape's launch refuses
                    plans[label] = f"refused: {exc}"
                    continue
                plans[label] = repr(scaled_grouped.plans()[-1])
                cands.append(Candidate(label, call))
        cands.append(Candidate("torch_scaled_grouped_mm", lambda: torch._scaled_grouped_mm(
            a, b, sa, sb, offs=ends, out_dtype=torch.bfloat16)))
        record(engine, doc, shape, counts, cands, plans)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], layers(sys.argv[2:], FP8_SHAPES)[0])
