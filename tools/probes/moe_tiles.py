"""Rung 26's tiles and switches on mixture-of-experts layers, beside torch._grouped_mm, timed together
per shape by the one timing engine (cold L2, NVML clocks), the tokens routed as bench --suite moe
routes them (bench/moe.py, ``route``):

    python tools/probes/moe_tiles.py OUT.json [GxTxNxK ...]

What the grouped rule's tile choice rests on (core/families/hopper.py, ``grouped_config``): the
suite's shapes and others nobody tuned on. One JSON, TFLOP/s per configuration."""
from __future__ import annotations

import json
import sys

import torch

import gemmlab
from gemmlab.analysis import environment
from gemmlab.bench.moe import route
from gemmlab.core import grouped
from gemmlab.core.driver import device_info
from gemmlab.measure.arrays import Lib
from gemmlab.measure.gpu_timing import CudaDevice, NvmlClocks
from gemmlab.measure.timing import Candidate, Engine, Settings

SHAPES = ["8x4096x14336x4096", "8x4096x4096x14336", "64x8192x2048x7168", "128x4096x768x2048",
          # not in the suite: a smaller Mixtral-like layer, many experts of mid size, few tokens each
          "8x1024x14336x4096", "16x8192x2816x2048", "32x2048x5120x1536", "256x8192x2048x7168"]
CONFIGS = {"128x256": "128x256", "128x256_d0": {"DEFER": 0}, "128x256_c2": "128x256_cluster", "128x128": "128x128",
           "128x128_s4": {"BN": 128, "STAGES": 4, "DEFER": 0}, "128x64": "128x64",
           "128x256_sk": {"DEFER": 0, "STREAMK": 1}, "128x128_sk": {"BN": 128, "STAGES": 6, "DEFER": 0, "STREAMK": 1}}


def main(out_path: str, shapes: list[str]) -> None:
    info = device_info(0)
    st = Settings(l2="cold", max_samples=30, time_cap_s=1.5)
    engine = Engine(CudaDevice(Lib("torch"), 0, info.l2_bytes, flush=True, spin=st.spin), st, NvmlClocks(0))
    doc = {"gpu": info.name, "environment": environment.collect(0), "settings": st.as_dict(), "runs": []}
    for shape in shapes:
        G, T, N, K = (int(x) for x in shape.split("x"))
        counts = route(torch, T, G)
        ends = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32).cuda()
        a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
        out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
        cands, plans = [], {}
        for name, cfg in {**CONFIGS, "auto": None}.items():
            try:
                gemmlab.grouped_mm(a, b, ends, out=out, config=cfg, check=False)
            except ValueError as exc:   # a configuration the shape's launch refuses
                plans[name] = f"refused: {exc}"
                continue
            plans[name] = repr(grouped.plans()[-1])
            cands.append(Candidate(name, lambda cfg=cfg: gemmlab.grouped_mm(a, b, ends, out=out, config=cfg, check=False)))
        cands.append(Candidate("torch_grouped_mm", lambda: torch._grouped_mm(a, b, offs=ends)))
        engine.warm_up(cands)
        run = engine.measure(cands)
        flop = 2.0 * T * N * K
        res = {n: s.as_dict() for n, s in run.samples.items()}
        tflops = {n: flop / (s["median_ms"] / 1e3) / 1e12 for n, s in res.items() if s.get("median_ms")}
        doc["runs"].append({"shape": [G, T, N, K], "counts": counts, "tflops": tflops, "plans": plans, "samples": res})
        print(shape, {k: round(v) for k, v in sorted(tflops.items(), key=lambda kv: -kv[1])}, flush=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or SHAPES)
