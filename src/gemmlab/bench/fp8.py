"""``gemmlab bench --suite fp8``: ``gemmlab.scaled_mm`` against ``torch._scaled_mm`` (cuBLASLt) on e4m3
operands with tensor-wise and row-wise scales, in both accumulations (promoted into FP32 every 128
of K, and PyTorch's ``use_fast_accum``), with bf16 ``torch.matmul`` of the same values beside them:
one record per shape and scaling (bench/workloads.py's suites and engine).

Before timing, each FP8 result is compared with the float64 product of the dequantized operands:
gemmlab's relative error must be within 10% of cuBLASLt's (or below the bf16 output's rounding), the
accuracy the FP8 issue asks for. B is K-major (``w.t()`` of a row-major (N, K) weight), as
torch._scaled_mm requires."""

from __future__ import annotations

from ..core.shapes import FP8_SUITE
from ..measure import timing

ACCURACY_MARGIN = 1.1     # gemmlab's relative error may be at most this times cuBLASLt's ...
ACCURACY_FLOOR = 2.0**-8  # ... or below a bf16 output's rounding
SCALINGS = ("tensor", "row")


def _rel(x, ref) -> float:
    return float((x.double() - ref).norm() / max(float(ref.norm()), 1e-300))


def fp8_records(torch, eng, shape) -> list[dict]:
    """The suite's records of one shape (M, N, K): one per scaling."""
    import gemmlab

    M, N, K = shape
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    ours, c16 = torch.empty(M, N, device="cuda", dtype=torch.bfloat16), torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    out = []
    for scaling in SCALINGS:
        if scaling == "tensor":
            sa, sb = torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")
        else:
            sa, sb = torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5
        rec = {"M": M, "N": N, "K": K, "dtype": "fp8", "scaling": scaling, "flops": 2 * M * N * K, "plans": {},
               "rel_error": {}}
        ref = (a.double() * sa.double()) @ (b.double() * sb.double())
        cands = []
        for fast in (False, True):
            tag = "_fast" if fast else ""
            _, plan = gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast, out=ours, return_plan=True)
            rec["rel_error"]["gemmlab" + tag] = _rel(ours, ref)
            rec["plans"]["gemmlab" + tag] = repr(plan)
            rec["rel_error"]["torch._scaled_mm" + tag] = _rel(
                torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast), ref)
            cands += [timing.Candidate("gemmlab" + tag, lambda fast=fast: gemmlab.scaled_mm(
                          a, b, sa, sb, use_fast_accum=fast, out=ours, check_finite=False)),
                      timing.Candidate("torch._scaled_mm" + tag, lambda fast=fast: torch._scaled_mm(
                          a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast))]
        del ref
        err = rec["rel_error"]
        rec["verified"] = all(err["gemmlab" + t] <= max(ACCURACY_MARGIN * err["torch._scaled_mm" + t], ACCURACY_FLOOR)
                              for t in ("", "_fast"))
        if rec["verified"]:
            cands.append(timing.Candidate("torch.matmul bf16", lambda: torch.matmul(a16, b16, out=c16)))
            run = eng.measure(cands)
            med = {name: s.median for name, s in run.samples.items()}
            rec["median_ms"] = med
            rec["tflops"] = {k: rec["flops"] / (v * 1e-3) / 1e12 for k, v in med.items()}
            rec["vs_scaled_mm"] = med["torch._scaled_mm"] / med["gemmlab"]
            rec["vs_scaled_mm_fast"] = med["torch._scaled_mm_fast"] / med["gemmlab_fast"]
            rec["vs_bf16_matmul"] = med["torch.matmul bf16"] / med["gemmlab"]
            rec["samples"] = {k: s.as_dict() for k, s in run.samples.items()}
        out.append(rec)
    return out


def describe(rec: dict) -> str:
    shape = f"{rec['M']}x{rec['N']}x{rec['K']} fp8 {rec['scaling']}-wise"
    err = rec["rel_error"]
    if not rec["verified"]:
        return (f"{shape}: FAILED accuracy: gemmlab {err['gemmlab']:.2e} / fast {err['gemmlab_fast']:.2e} against "
                f"torch._scaled_mm {err['torch._scaled_mm']:.2e} / {err['torch._scaled_mm_fast']:.2e}")
    t = rec["tflops"]
    return (f"{shape}: gemmlab {t['gemmlab']:.0f} TFLOP/s, {rec['vs_scaled_mm']:.3f}x torch._scaled_mm; fast "
            f"{t['gemmlab_fast']:.0f}, {rec['vs_scaled_mm_fast']:.3f}x; {rec['vs_bf16_matmul']:.2f}x bf16 matmul")


def row(r: dict) -> list[str]:
    t = r["tflops"]
    return [r["scaling"], f"{t['gemmlab']:.0f}", f"{t['torch._scaled_mm']:.0f}", f"{r['vs_scaled_mm']:.3f}x",
            f"{t['gemmlab_fast']:.0f}", f"{t['torch._scaled_mm_fast']:.0f}", f"{r['vs_scaled_mm_fast']:.3f}x",
            f"{r['vs_bf16_matmul']:.2f}x"]


COLUMNS = ["M x N x K", "scales", "gemmlab TFLOP/s", "_scaled_mm", "vs _scaled_mm", "fast", "_scaled_mm fast",
           "fast vs fast", "vs bf16 matmul"]
SHAPES = FP8_SUITE
