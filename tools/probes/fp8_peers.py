"""gemmlab.scaled_mm (rung 25, promoted and fast accumulation) against torch._scaled_mm (cuBLASLt, with
and without fast accumulation) and bf16 torch.matmul, timed together by the one timing engine (cold
L2, interleaved balanced rounds, NVML clocks sampled), tensor-wise and row-wise scales, at the FP8
issue's shapes or those named:

    python tools/probes/fp8_peers.py OUT.json [MxNxK ...]

Writes one JSON: per shape and scaling, each candidate's samples and TFLOP/s, the plan gemmlab ran,
and the relative error of each FP8 result against the float64 product of the dequantized operands."""
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

SHAPES = ["4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "128x14336x4096", "1024x4096x14336",
          "4096x7168x16384", "128x4096x4096"]


def main(out_path: str, shapes: list[str]) -> None:
    info = device_info(0)
    st = Settings(l2="cold", max_samples=40, time_cap_s=2.0)
    engine = Engine(CudaDevice(Lib("torch"), 0, info.l2_bytes, flush=True, spin=st.spin), st, NvmlClocks(0))
    doc = {"gpu": info.name, "environment": environment.collect(0), "settings": st.as_dict(), "runs": []}
    for shape in shapes:
        M, N, K = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
        w = torch.randn(N, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
        b = w.t()
        a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
        for mode in ("tensor", "row"):
            if mode == "tensor":
                sa, sb = torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")
            else:
                sa = torch.rand(M, 1, device="cuda", generator=g) + 0.5
                sb = torch.rand(1, N, device="cuda", generator=g) + 0.5
            outs = {}
            plans = {}

            def ours(fast):
                out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                _, plans[fast] = gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast, out=out, return_plan=True)
                outs[f"gemmlab{'_fast' if fast else ''}"] = out
                return lambda: gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast, out=out, check_finite=False)

            def theirs(fast):
                outs[f"torch_scaled_mm{'_fast' if fast else ''}"] = torch._scaled_mm(
                    a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
                return lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)

            cands = [Candidate("gemmlab", ours(False)), Candidate("gemmlab_fast", ours(True)),
                     Candidate("torch_scaled_mm", theirs(False)), Candidate("torch_scaled_mm_fast", theirs(True))]
            if mode == "tensor":
                c16 = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                cands.append(Candidate("torch_matmul_bf16", lambda: torch.matmul(a16, b16, out=c16)))
            torch.cuda.synchronize()
            ref = (a.double() * sa.double()) @ (b.double() * sb.double())
            errors = {k: float((v.double() - ref).norm() / ref.norm()) for k, v in outs.items()}
            del ref
            engine.warm_up(cands)
            run = engine.measure(cands)
            flop = 2.0 * M * N * K
            res = {name: s.as_dict() for name, s in run.samples.items()}
            tflops = {name: flop / (s["median_ms"] / 1e3) / 1e12 for name, s in res.items() if s.get("median_ms")}
            entry = {"shape": [M, N, K], "scaling": mode, "tflops": tflops, "rel_error": errors,
                     "plans": {("fast" if f else "promoted"): repr(p) for f, p in plans.items()}, "samples": res}
            doc["runs"].append(entry)
            print(shape, mode, {k: round(v, 1) for k, v in tflops.items()},
                  {k: f"{v:.2e}" for k, v in errors.items()}, flush=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or SHAPES)
