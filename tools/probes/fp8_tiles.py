"""Rung 25's tiles and switches at the FP8 issue's shapes, beside torch._scaled_mm, tensor-wise scales,
timed together per shape and precision by the one timing engine (cold L2, NVML clocks):

    python tools/probes/fp8_tiles.py OUT.json [--promoted] [MxNxK ...]

What the rule's tile choice for rung 25 rests on (core/rules.py); one JSON, TFLOP/s per configuration."""
from __future__ import annotations

import json
import sys

import torch

import gemmlab
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = ["4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "128x14336x4096", "1024x4096x14336",
          "4096x7168x16384", "128x4096x4096"]
CONFIGS = {
    "fp8": {"128x128": {}, "128x128_c2": {"CLUSTER": 2}, "128x128_s5": {"STAGES": 5},
            "128x128_g8": {"GROUP": 8}, "128x128_defer": {"DEFER": 1}, "128x64": {"BN": 64, "STAGES": 8},
            "128x128_sk": {"STREAMK": 1}, "128x192": {"BN": 192, "STAGES": 5}, "128x192_s4": {"BN": 192, "STAGES": 4}},
    "fp8_fast": {"128x256": {}, "128x128": "128x128", "256x128": "256x128", "128x256_c2": {"CLUSTER": 2},
                 "128x256_sk": {"STREAMK": 1}, "128x256_g8": {"GROUP": 8}},
}


def main(out_path: str, shapes: list[str]) -> None:
    engine, doc = timed.engine_and_doc(30, 1.5)
    for shape in shapes:
        M, N, K = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(N, K, device="cuda", generator=g).to(torch.float8_e4m3fn).t()
        sa, sb = torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")
        for precision, configs in CONFIGS.items():
            fast = precision == "fp8_fast"
            out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            cands, plans = [], {}
            for name, cfg in configs.items():
                try:
                    _, plans[name] = gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast, out=out, kernel="wgmma_fp8",
                                                       config=cfg, return_plan=True)
                except ValueError as exc:   # a configuration the shape's launch refuses
                    plans[name] = f"refused: {exc}"
                    continue
                cands.append(Candidate(name, lambda cfg=cfg: gemmlab.scaled_mm(
                    a, b, sa, sb, use_fast_accum=fast, out=out, kernel="wgmma_fp8", config=cfg, check_finite=False)))
            _, plans["auto"] = gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast, out=out, return_plan=True)
            cands.append(Candidate("auto", lambda: gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast, out=out,
                                                                     check_finite=False)))
            cands.append(Candidate("torch_scaled_mm", lambda: torch._scaled_mm(
                a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)))
            res, tflops = timed.measure(engine, cands, 2.0 * M * N * K)
            doc["runs"].append({"shape": [M, N, K], "precision": precision, "tflops": tflops,
                                "plans": {k: repr(v) for k, v in plans.items()}, "samples": res})
            print(shape, precision, {k: round(v) for k, v in sorted(tflops.items(), key=lambda kv: -kv[1])}, flush=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    args = sys.argv[2:]
    if args[:1] == ["--promoted"]:   # precision fp8 only
        CONFIGS.pop("fp8_fast")
        args = args[1:]
    main(sys.argv[1], args or SHAPES)
