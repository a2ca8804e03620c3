"""WGSKIP (a consumer warpgroup whose rows of a tile all lie past its group's end sits the tile out)
against the rule's configuration with the switch flipped, on mixture-of-experts layers, in bf16
(rung 26) and FP8 (rung 27: promoted and fast accumulation, row-wise scales), timed together per
layer by the one timing engine (cold L2, NVML clocks), the tokens routed as bench --suite moe routes
them (bench/moe.py, ``route``):

    python tools/probes/moe_wgskip.py OUT.json [GxTxNxK ...]
    python tools/probes/moe_wgskip.py OUT.json --random COUNT [--seed S]

What the rules' WGSKIP rests on (core/families/hopper.py: ``GROUPED_WGSKIP_ROWS`` for rung 26, the
registry's default for rung 27). ``--random``: a held-out sample of layers (moe_tiles.py's draw).
One JSON, TFLOP/s per candidate: "<dtype> auto" is the rule's choice, "<dtype> flipped" the same
with WGSKIP flipped.

    ncu --clock-control none -k regex:gemm --csv --metrics METRICS python tools/probes/moe_wgskip.py --ncu

runs the suite's 8-expert up projection with WGSKIP=1, then 0, each twice, for Nsight Compute."""
from __future__ import annotations

import json
import sys

import torch

import gemmlab
from gemmlab.bench.moe import route
from gemmlab.core import grouped, scaled_grouped
from gemmlab.core.driver import device_info
from gemmlab.core.families.hopper import grouped_config
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from moe_tiles import SHAPES, engine_and_doc, layers, record  # noqa: E402


def layer(shape: str):
    G, T, N, K = (int(x) for x in shape.split("x"))
    counts = route(torch, T, G)
    ends = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32).cuda()
    return G, T, N, K, counts, ends


def calls(shape: str):
    """(label, call(config), the plans list it appends to) for each dtype and accumulation."""
    G, T, N, K, counts, ends = layer(shape)
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    a8 = (torch.randn(T, K, device="cuda") * 2).to(torch.float8_e4m3fn)
    b8 = (torch.randn(G, N, K, device="cuda") * 2).to(torch.float8_e4m3fn).transpose(-2, -1)
    sa, sb = torch.rand(T, device="cuda") + 0.5, torch.rand(G, N, device="cuda") + 0.5
    out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    yield "bf16", lambda cfg: gemmlab.grouped_mm(a, b, ends, out=out, config=cfg, check=False), grouped.plans
    for fast in (False, True):
        yield ("fp8 fast" if fast else "fp8"), (lambda cfg, fast=fast: scaled_grouped.scaled_grouped_mm(
            a8, b8, sa, sb, ends, out=out, config=cfg, use_fast_accum=fast, check=False, check_finite=False)), \
            scaled_grouped.plans


def main(out_path: str, shapes: list[str]) -> None:
    engine, doc = engine_and_doc()
    for shape in shapes:
        cands, plans = [], {}
        for label, call, made in calls(shape):
            call(None)
            rule = made()[-1].variant.cfg
            flipped = {**rule, "WGSKIP": 1 - rule["WGSKIP"]}
            plans[f"{label} auto"] = repr(made()[-1])
            cands.append(Candidate(f"{label} auto", lambda call=call: call(None)))
            cands.append(Candidate(f"{label} flipped", lambda call=call, cfg=flipped: call(cfg)))
            cands[-1].fn()
        record(engine, doc, shape, layer(shape)[4], cands, plans)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


def for_ncu() -> None:
    G, T, N, K, counts, ends = layer(SHAPES[0])
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    rule, _ = grouped_config(T, N, K, G, device_info(0).sm_count)
    for skip in (1, 0):
        for _ in range(2):
            gemmlab.grouped_mm(a, b, ends, out=out, config={**rule, "WGSKIP": skip}, check=False)
    torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ncu"]:
        for_ncu()
    else:
        main(sys.argv[1], layers(sys.argv[2:], SHAPES)[0])
