"""``gemmlab bench --suite fp8``: ``gemmlab.scaled_mm`` against ``torch._scaled_mm`` (cuBLASLt) on e4m3
operands with tensor-wise and row-wise scales, in both accumulations (promoted into FP32 every 128
of K, and PyTorch's ``use_fast_accum``), and with block-wise scales (1x128 of a, 128x128 of b;
promoted only), with bf16 ``torch.matmul`` of the same values beside them: one record per shape and
scaling (bench/workloads.py's suites and engine). With tensor-wise and row-wise scales an FP8 Triton
matmul (measure/triton_fp8.py) is timed beside them where Triton is installed; its tl.dot sums FP8
as use_fast_accum does, so it is compared with gemmlab's fast accumulation. Where this PyTorch's ``torch._scaled_mm`` refuses
block scales, the record says why and times gemmlab alone beside the bf16 matmul.

Before timing, each FP8 result is compared with the float64 product of the dequantized operands:
gemmlab's relative error must be within 10% of cuBLASLt's (or below the bf16 output's rounding), the
accuracy the FP8 issue asks for. B is K-major (``w.t()`` of a row-major (N, K) weight), as
torch._scaled_mm requires."""

from __future__ import annotations

from ..core.deps import MissingDependencyError
from ..core.shapes import FP8_SUITE
from ..measure import timing

ACCURACY_MARGIN = 1.1     # gemmlab's relative error may be at most this times cuBLASLt's ...
ACCURACY_FLOOR = 2.0**-8  # ... or below a bf16 output's rounding
SCALINGS = ("tensor", "row", "block")


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
        sa, sb = _scales(torch, scaling, M, N, K)
        rec = {"M": M, "N": N, "K": K, "dtype": "fp8", "scaling": scaling, "flops": 2 * M * N * K, "plans": {},
               "rel_error": {}}
        ref = _reference(a, b, sa, sb, scaling)
        cands, tags = [], ("", "_fast") if scaling != "block" else ("",)
        for tag in tags:
            fast = bool(tag)
            _, plan = gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast, out=ours, return_plan=True)
            rec["rel_error"]["gemmlab" + tag] = _rel(ours, ref)
            rec["plans"]["gemmlab" + tag] = repr(plan)
            cands.append(timing.Candidate("gemmlab" + tag, lambda fast=fast: gemmlab.scaled_mm(
                a, b, sa, sb, use_fast_accum=fast, out=ours, check_finite=False)))
            try:
                theirs = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
            except (RuntimeError, ValueError) as exc:   # block scales where this PyTorch has none
                rec["peer_refused"] = f"torch._scaled_mm: {str(exc).splitlines()[0][:200]}"
                continue
            rec["rel_error"]["torch._scaled_mm" + tag] = _rel(theirs, ref)
            cands.append(timing.Candidate("torch._scaled_mm" + tag, lambda fast=fast: torch._scaled_mm(
                a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)))
        if scaling != "block":   # the FP8 Triton peer (tensor-wise and row-wise scales)
            peer = _triton_fp8(rec)
            if peer is not None:
                tout = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                peer.scaled_mm(a, b, sa, sb, tout)   # its autotuner times its tiles here, untimed
                rec["rel_error"]["triton"] = _rel(tout, ref)
                cands.append(timing.Candidate("triton", lambda: peer.scaled_mm(a, b, sa, sb, tout)))
        del ref
        err = rec["rel_error"]
        rec["verified"] = all(err["gemmlab" + t] <= max(ACCURACY_MARGIN * err.get("torch._scaled_mm" + t, 0.0),
                                                         ACCURACY_FLOOR) for t in tags)   # the peers' own: recorded
        if rec["verified"]:
            cands.append(timing.Candidate("torch.matmul bf16", lambda: torch.matmul(a16, b16, out=c16)))
            run = eng.measure(cands)
            med = {name: s.median for name, s in run.samples.items()}
            rec["median_ms"] = med
            rec["tflops"] = {k: rec["flops"] / (v * 1e-3) / 1e12 for k, v in med.items()}
            for tag in tags:
                if "torch._scaled_mm" + tag in med:
                    rec["vs_scaled_mm" + tag] = med["torch._scaled_mm" + tag] / med["gemmlab" + tag]
            rec["vs_bf16_matmul"] = med["torch.matmul bf16"] / med["gemmlab"]
            if "triton" in med:   # tl.dot accumulates FP8 as use_fast_accum does (its error is the fast ones')
                rec["fast_vs_triton"] = med["triton"] / med["gemmlab_fast"]
            rec["samples"] = {k: s.as_dict() for k, s in run.samples.items()}
        out.append(rec)
    return out


def _triton_fp8(rec: dict):
    """measure/triton_fp8.py where Triton is installed, else None (the record says why)."""
    try:
        from ..measure import triton_fp8
    except (ImportError, MissingDependencyError) as exc:
        rec["triton_unavailable"] = str(exc).splitlines()[0][:200]
        return None
    return triton_fp8


def _scales(torch, scaling: str, M: int, N: int, K: int):
    if scaling == "tensor":
        return torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")
    if scaling == "row":
        return torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5
    kb, nb = -(-K // 128), -(-N // 128)   # DeepGEMM's layouts: a's scales M-major, b's per 128x128 block
    return torch.rand(kb, M, device="cuda").t() + 0.5, torch.rand(kb, nb, device="cuda") + 0.5


def _reference(a, b, sa, sb, scaling: str):
    """The float64 product of the dequantized operands (block scales: expanded over their blocks)."""
    if scaling != "block":
        return (a.double() * sa.double()) @ (b.double() * sb.double())
    K, N = b.shape
    ea = sa.double().repeat_interleave(128, dim=1)[:, :K]
    eb = sb.double().repeat_interleave(128, dim=0)[:K].repeat_interleave(128, dim=1)[:, :N]
    return (a.double() * ea) @ (b.double() * eb)


def describe(rec: dict) -> str:
    shape = f"{rec['M']}x{rec['N']}x{rec['K']} fp8 {rec['scaling']}-wise"
    err = rec["rel_error"]
    if not rec["verified"]:
        return f"{shape}: FAILED accuracy: " + ", ".join(f"{k} {v:.2e}" for k, v in err.items())
    t, text = rec["tflops"], f"{shape}: "
    for tag in ("", "_fast"):
        if "gemmlab" + tag in t:
            text += f"gemmlab{tag} {t['gemmlab' + tag]:.0f} TFLOP/s"
            ratio = rec.get("vs_scaled_mm" + tag)
            text += f" ({ratio:.3f}x torch._scaled_mm{tag}); " if ratio else " (torch._scaled_mm refused); "
    return text + f"{rec['vs_bf16_matmul']:.2f}x bf16 matmul"


def _cell(x, fmt: str) -> str:
    return "" if x is None else format(x, fmt)


def row(r: dict) -> list[str]:
    t = r["tflops"]
    return [r["scaling"], _cell(t.get("gemmlab"), ".0f"), _cell(t.get("torch._scaled_mm"), ".0f"),
            _cell(r.get("vs_scaled_mm"), ".3f"), _cell(t.get("gemmlab_fast"), ".0f"),
            _cell(t.get("torch._scaled_mm_fast"), ".0f"), _cell(r.get("vs_scaled_mm_fast"), ".3f"),
            _cell(r.get("fast_vs_triton"), ".3f"), f"{r['vs_bf16_matmul']:.2f}x"]


COLUMNS = ["M x N x K", "scales", "gemmlab TFLOP/s", "_scaled_mm", "vs _scaled_mm", "fast", "_scaled_mm fast",
           "fast vs fast", "fast vs triton", "vs bf16 matmul"]
SHAPES = FP8_SUITE
