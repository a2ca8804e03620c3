"""The workload suites of ``gemmlab bench``: what a model calls beyond one plain 2-D GEMM, timed
against what PyTorch gives a user for the same call, on the one timing engine (cold L2, the GPU
kept busy before each launch, candidates interleaved in balanced rounds, clocks sampled).

* ``--suite batched`` (core/shapes.py, BATCHED_SUITE): ``gemmlab.matmul`` on (B, M, K) @ (B, K, N)
  against ``torch.bmm``: the batch in one launch (core/batched.py).
* ``--suite epilogue`` (EPILOGUE_SUITE): act(a @ b + bias) fused into the GEMM's stores against the
  plain gemmlab GEMM, ``torch._addmm_activation`` (cuBLASLt's fused bias + GELU or ReLU epilogue),
  ``torch.matmul`` and the unfused PyTorch sequence (matmul, + bias, activation).
* ``--suite fp8`` (FP8_SUITE; bench/fp8.py): ``gemmlab.scaled_mm`` against ``torch._scaled_mm`` with
  tensor-wise and row-wise scales, promoted and fast accumulation, beside bf16 ``torch.matmul``.
* ``--suite moe`` (MOE_SUITE; bench/moe.py): ``gemmlab.grouped_mm`` on mixture-of-experts layers
  against ``torch._grouped_mm``, a loop of ``torch.matmul`` over the experts and a Triton grouped
  GEMM, with the memory bound and the masked form beside them (bf16 unless --dtype fp16). With
  --dtype fp8 (bench/moe_fp8.py): ``gemmlab.scaled_grouped_mm`` against ``torch._scaled_grouped_mm``
  and a loop of ``torch._scaled_mm``, with row-wise and block scales.
* ``--suite out_dtype`` (OUT_DTYPE_SUITE): an FP32 result of 16-bit operands,
  ``gemmlab.matmul(a, b, out_dtype=float32)``, against ``torch.mm(a, b, out_dtype=float32)``
  (cuBLAS writing FP32 itself), the unfused ``torch.matmul(a, b).float()`` and gemmlab's own 16-bit
  result (what writing twice the bytes costs).

Every gemmlab result is verified against float64 first (``measure.verify.tolerance``); one that
fails is reported and not timed. The result is a dict (``--json``) with ``kind``, ``env``,
``settings``, ``results`` (a record per shape: medians in ms, TFLOP/s, the ratios, the plan that
ran) and ``summary`` (geomean ratios).
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone

from ..core.version import __version__
from ..analysis import environment as envinfo
from ..core import activations, driver
from ..core.deps import require
from ..core.shapes import BATCHED_SUITE, EPILOGUE_ACTIVATION, EPILOGUE_SUITE, OUT_DTYPE_SUITE
from ..measure import gpu_timing, timing
from ..measure.arrays import Lib
from ..measure.verify import tolerance
from . import fp8 as _fp8
from . import moe as _moe
from . import moe_fp8 as _moe_fp8

WORKLOADS = ("batched", "epilogue", "out_dtype", "fp8", "moe")
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def engine(ordinal: int, settings: timing.Settings) -> timing.Engine:
    """The timing engine on PyTorch's arrays of device ``ordinal`` (the L2 flushed before each sample
    unless ``settings.l2`` is "hot", the SM clock sampled where NVML reads it), as the workload
    suites and the tools beside them (tools/batched_sweep.py, tools/epilogue_autograd.py) time."""
    info = driver.device_info(ordinal)
    device = gpu_timing.CudaDevice(Lib("torch"), ordinal, info.l2_bytes, flush=settings.l2 == "cold", spin=settings.spin)
    clocks = gpu_timing.NvmlClocks(ordinal) if envinfo.max_sm_clock_mhz(ordinal) else None
    return timing.Engine(device, settings, clocks)


def _rel_error(got, want) -> float:
    return float((got.double() - want).norm() / max(float(want.norm()), 1e-300))


def _geomean(values) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _medians(run: timing.Run) -> dict:
    return {name: s.median for name, s in run.samples.items()}


def _batched_record(torch, eng, shape, dtype: str) -> dict:
    import gemmlab
    from ..core import api

    B, M, N, K = shape
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    a = torch.randn(B, M, K, device="cuda", dtype=tdt)
    b = torch.randn(B, K, N, device="cuda", dtype=tdt)
    out, peer_out = torch.empty(B, M, N, device="cuda", dtype=tdt), torch.empty(B, M, N, device="cuda", dtype=tdt)
    rec = {"B": B, "M": M, "N": N, "K": K, "dtype": dtype, "flops": 2 * B * M * N * K}
    gemmlab.matmul(a, b, out=out)
    rec["rel_error"] = _rel_error(out, torch.bmm(a.double(), b.double()))
    rec["tol"] = tolerance(dtype, K)
    rec["verified"] = rec["rel_error"] <= rec["tol"]
    plan = next((p for p in reversed(api.batch_plans()) if p.problem.batch == B and p.problem.K == K), None)
    rec["plan"] = repr(plan) if plan is not None else "one launch per element (no batched rung serves this call)"
    if not rec["verified"]:
        return rec
    run = eng.measure([timing.Candidate("gemmlab", lambda: gemmlab.matmul(a, b, out=out)),
                       timing.Candidate("torch.bmm", lambda: torch.bmm(a, b, out=peer_out))])
    med = _medians(run)
    rec["median_ms"] = med
    rec["tflops"] = {k: rec["flops"] / (v * 1e-3) / 1e12 for k, v in med.items()}
    rec["vs_torch_bmm"] = med["torch.bmm"] / med["gemmlab"]
    rec["samples"] = {k: s.as_dict() for k, s in run.samples.items()}
    return rec


def _epilogue_record(torch, eng, shape, dtype: str, activation: str) -> dict:
    import gemmlab

    M, N, K = shape
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    bias = torch.randn(N, device="cuda", dtype=tdt)
    c, plain = torch.empty(M, N, device="cuda", dtype=tdt), torch.empty(M, N, device="cuda", dtype=tdt)
    act = activations.get(activation).forward_torch   # PyTorch's own kernel: the unfused peer
    rec = {"M": M, "N": N, "K": K, "dtype": dtype, "activation": activation, "flops": 2 * M * N * K}
    gemmlab.gemm(a, b, c, bias=bias, activation=activation)
    rec["rel_error"] = _rel_error(c, act(a.double() @ b.double() + bias.double()))
    rec["tol"] = tolerance(dtype, K)
    rec["verified"] = rec["rel_error"] <= rec["tol"]
    rec["plan"] = repr(gemmlab.plan(a, b, c, bias=bias, activation=activation))
    if not rec["verified"]:
        return rec
    fused = f"gemmlab+bias+{activation}"
    cands = [timing.Candidate("gemmlab", lambda: gemmlab.gemm(a, b, plain)),
             timing.Candidate(fused, lambda: gemmlab.gemm(a, b, c, bias=bias, activation=activation)),
             timing.Candidate("torch.matmul", lambda: torch.matmul(a, b, out=plain)),
             timing.Candidate("unfused torch", lambda: act(torch.matmul(a, b) + bias))]
    if activation in ("gelu_tanh", "relu"):   # cuBLASLt's epilogues: GELU (tanh) and ReLU
        cands.append(timing.Candidate("torch._addmm_activation",
                                      lambda: torch._addmm_activation(bias, a, b, use_gelu=activation == "gelu_tanh")))
    run = eng.measure(cands)
    med = _medians(run)
    rec["median_ms"] = med
    rec["fused_vs_plain"] = med[fused] / med["gemmlab"]
    rec["unfused_torch_vs_fused"] = med["unfused torch"] / med[fused]
    if "torch._addmm_activation" in med:
        rec["addmm_activation_vs_fused"] = med["torch._addmm_activation"] / med[fused]
    rec["samples"] = {k: s.as_dict() for k, s in run.samples.items()}
    return rec


def _out_dtype_record(torch, eng, shape, dtype: str) -> dict:
    import gemmlab

    M, N, K = shape
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    c, plain = torch.empty(M, N, device="cuda", dtype=torch.float32), torch.empty(M, N, device="cuda", dtype=tdt)
    rec = {"M": M, "N": N, "K": K, "dtype": dtype, "out_dtype": "fp32", "flops": 2 * M * N * K}
    gemmlab.matmul(a, b, out=c)
    rec["rel_error"] = _rel_error(c, a.double() @ b.double())
    rec["tol"] = tolerance("fp32", K)
    rec["verified"] = rec["rel_error"] <= rec["tol"]
    rec["plan"] = repr(gemmlab.plan(a, b, c))
    if not rec["verified"]:
        return rec
    mine = "gemmlab -> fp32"
    run = eng.measure([timing.Candidate(mine, lambda: gemmlab.matmul(a, b, out_dtype=torch.float32)),
                       timing.Candidate("torch.mm out_dtype", lambda: torch.mm(a, b, out_dtype=torch.float32)),
                       timing.Candidate("unfused torch", lambda: torch.matmul(a, b).float()),
                       timing.Candidate(f"gemmlab -> {dtype}", lambda: gemmlab.matmul(a, b, out=plain))])
    med = _medians(run)
    rec["median_ms"] = med
    rec["tflops"] = {k: rec["flops"] / (v * 1e-3) / 1e12 for k, v in med.items()}
    rec["vs_torch_mm"] = med["torch.mm out_dtype"] / med[mine]
    rec["unfused_torch_vs_fp32"] = med["unfused torch"] / med[mine]
    rec["fp32_vs_16_bit"] = med[mine] / med[f"gemmlab -> {dtype}"]
    rec["samples"] = {k: s.as_dict() for k, s in run.samples.items()}
    return rec


def run_workload(name: str, dtype: str, settings: timing.Settings | None = None, *, shapes=None,
                 activation: str | None = None, progress: bool = True) -> dict:
    """Time the workload suite ``name`` (``WORKLOADS``) in ``dtype`` (``shapes``: its shapes
    instead of the suite's: (B, M, N, K) for batched, (M, N, K) for the others; ``activation`` of
    the epilogue suite, default EPILOGUE_ACTIVATION) and return the result dict. Needs PyTorch (the
    peers) and a GPU (driver.NoGPUError without one); ValueError for an unknown name or dtype."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload suite {name!r}; workload suites: {', '.join(WORKLOADS)}")
    if name == "fp8":
        dtype = "fp8"
    elif name == "moe":
        dtype = dtype if dtype in ("fp16", "bf16", "fp8") else "bf16"   # bf16 unless fp16 or fp8 is asked for
    elif dtype not in TORCH_DTYPES:
        raise ValueError(f"dtype {dtype!r}: the batched, epilogue and out_dtype suites run fp32, fp16 and bf16 "
                         f"(fp8: --suite fp8)")
    if name == "out_dtype" and dtype == "fp32":
        raise ValueError("the out_dtype suite writes FP32 from 16-bit operands: --dtype fp16 or bf16")
    activation = activation or EPILOGUE_ACTIVATION
    torch = require("torch")
    driver.cuda()
    if not driver.gpu_available():
        raise driver.NoGPUError("no NVIDIA GPU/driver: the workload suites time kernels on a GPU")
    settings = settings or timing.Settings()
    ordinal = int(torch.cuda.current_device())
    started, t0 = datetime.now(timezone.utc), time.perf_counter()
    env = envinfo.collect(ordinal)
    env["clocks_before"] = envinfo.clocks(ordinal)
    eng = engine(ordinal, settings)
    shapes = list(shapes or {"batched": BATCHED_SUITE, "epilogue": EPILOGUE_SUITE, "out_dtype": OUT_DTYPE_SUITE,
                             "fp8": _fp8.SHAPES, "moe": _moe.SHAPES}[name])
    copy = _moe.copy_bandwidth() if name == "moe" else None
    records = []
    torch.manual_seed(0)
    for i, shape in enumerate(shapes):
        recs = (_fp8.fp8_records(torch, eng, shape) if name == "fp8"
                else _moe_fp8.records(torch, eng, shape, copy["dram_bw_Bps"]) if name == "moe" and dtype == "fp8"
                else _moe.moe_records(torch, eng, shape, dtype, copy["dram_bw_Bps"]) if name == "moe"
                else [_batched_record(torch, eng, shape, dtype)] if name == "batched"
                else [_epilogue_record(torch, eng, shape, dtype, activation)] if name == "epilogue"
                else [_out_dtype_record(torch, eng, shape, dtype)])
        records += recs
        if progress:
            for rec in recs:
                print(f"  [{i + 1}/{len(shapes)}] {describe(rec)}", flush=True)
    env["clocks_after"] = envinfo.clocks(ordinal)
    key = {"batched": "vs_torch_bmm", "epilogue": "fused_vs_plain", "out_dtype": "vs_torch_mm", "fp8": "vs_scaled_mm",
           "moe": "vs_grouped_mm"}[name]
    summary = {"verified": all(r["verified"] for r in records), f"geomean_{key}": _geomean(r.get(key) for r in records)}
    if name == "fp8":
        for scaling in _fp8.SCALINGS:
            for k in ("vs_scaled_mm", "vs_scaled_mm_fast"):
                summary[f"geomean_{k}_{scaling}"] = _geomean(r.get(k) for r in records if r["scaling"] == scaling)
                summary[f"min_{k}_{scaling}"] = min((r[k] for r in records if r["scaling"] == scaling and k in r),
                                                    default=None)
    if name == "moe" and dtype == "fp8":
        summary = {"verified": summary["verified"], **_moe_fp8.summary(records, _geomean)}
    elif name == "moe":
        for k in ("vs_loop", "vs_triton", "masked_vs_contiguous"):
            summary[f"geomean_{k}"] = _geomean(r.get(k) for r in records)
        summary["min_vs_grouped_mm"] = min((r["vs_grouped_mm"] for r in records if "vs_grouped_mm" in r), default=None)
    if name == "epilogue":
        summary["geomean_addmm_activation_vs_fused"] = _geomean(r.get("addmm_activation_vs_fused") for r in records)
        summary["geomean_unfused_torch_vs_fused"] = _geomean(r.get("unfused_torch_vs_fused") for r in records)
    if name == "out_dtype":
        summary["geomean_unfused_torch_vs_fp32"] = _geomean(r.get("unfused_torch_vs_fp32") for r in records)
        summary["geomean_fp32_vs_16_bit"] = _geomean(r.get("fp32_vs_16_bit") for r in records)
    return {"gemmlab_version": __version__, "kind": name, "timestamp": started.isoformat(timespec="seconds"),
            "duration_s": round(time.perf_counter() - t0, 3), "env": env,
            "settings": {"dtype": dtype, "activation": activation if name == "epilogue" else None,
                         "timing": settings.as_dict(), **({"copy_bandwidth": copy} if copy else {})},
            "results": records, "summary": summary}


def _shape(rec: dict) -> str:
    return "x".join(str(rec[k]) for k in ("B", "G", "T", "M", "N", "K") if k in rec)


def describe(rec: dict) -> str:
    """One line of a record: the shape, the verification and the ratios."""
    if "G" in rec and rec["dtype"] == "fp8":
        return _moe_fp8.describe(rec)
    if rec["dtype"] == "fp8":
        return _fp8.describe(rec)
    if "G" in rec:
        return _moe.describe(rec)
    shape = _shape(rec)
    if not rec["verified"]:
        return f"{shape} {rec['dtype']}: FAILED verification, rel. error {rec['rel_error']:.2e} > {rec['tol']:.1e}"
    med = rec["median_ms"]
    if "out_dtype" in rec:
        return (f"{shape} {rec['dtype']} -> fp32: gemmlab {med['gemmlab -> fp32'] * 1e3:.1f} us, torch.mm out_dtype "
                f"{med['torch.mm out_dtype'] * 1e3:.1f} us: {rec['vs_torch_mm']:.3f}x; unfused torch "
                f"{rec['unfused_torch_vs_fp32']:.3f}x; fp32 / {rec['dtype']} output {rec['fp32_vs_16_bit']:.3f}x")
    if "B" in rec:
        return (f"{shape} {rec['dtype']}: gemmlab {med['gemmlab'] * 1e3:.1f} us, torch.bmm {med['torch.bmm'] * 1e3:.1f} us: "
                f"{rec['vs_torch_bmm']:.3f}x torch.bmm")
    text = (f"{shape} {rec['dtype']} bias+{rec['activation']}: fused {rec['fused_vs_plain']:.3f}x the plain GEMM's time, "
            f"unfused torch {rec['unfused_torch_vs_fused']:.3f}x the fused time")
    if "addmm_activation_vs_fused" in rec:
        text += f", torch._addmm_activation {rec['addmm_activation_vs_fused']:.3f}x"
    return text


def _row(r: dict) -> list[str]:
    """A verified record's cells in its suite's table (``_COLUMNS``)."""
    if "G" in r and r["dtype"] == "fp8":
        return _moe_fp8.row(r)
    if r["dtype"] == "fp8":
        return _fp8.row(r)
    if "G" in r:
        return _moe.row(r)
    m = r["median_ms"]
    if "B" in r:
        return [f"{m['gemmlab'] * 1e3:.1f}", f"{m['torch.bmm'] * 1e3:.1f}", f"{r['vs_torch_bmm']:.3f}x",
                f"{r['tflops']['gemmlab']:.0f}"]
    if "out_dtype" in r:
        return [f"{m['gemmlab -> fp32'] * 1e3:.1f}", f"{m['torch.mm out_dtype'] * 1e3:.1f}", f"{r['vs_torch_mm']:.3f}x",
                f"{r['unfused_torch_vs_fp32']:.3f}x", f"{r['fp32_vs_16_bit']:.3f}x"]
    fused = m[f"gemmlab+bias+{r['activation']}"]
    addmm = r.get("addmm_activation_vs_fused")
    return [f"{m['gemmlab'] * 1e3:.1f}", f"{fused * 1e3:.1f}", f"{r['fused_vs_plain']:.3f}x",
            "" if addmm is None else f"{addmm:.3f}x", f"{r['unfused_torch_vs_fused']:.3f}x"]


_COLUMNS = {"batched": ["B x M x N x K", "gemmlab us", "torch.bmm us", "vs torch.bmm", "gemmlab TFLOP/s"],
            "epilogue": ["M x N x K", "plain us", "fused us", "fused / plain", "_addmm_activation / fused",
                         "unfused torch / fused"],
            "out_dtype": ["M x N x K", "gemmlab -> fp32 us", "torch.mm out_dtype us", "vs torch.mm",
                          "unfused torch / gemmlab", "fp32 / 16-bit output"],
            "fp8": _fp8.COLUMNS, "moe": _moe.COLUMNS}


def render(result: dict) -> None:
    """The suite's table (rich) and its summary."""
    from rich.console import Console
    from rich.table import Table

    kind, dtype = result["kind"], result["settings"]["dtype"]
    what = {"batched": dtype, "epilogue": f"{dtype}, bias + {result['settings']['activation']}",
            "out_dtype": f"{dtype} -> fp32", "fp8": "e4m3 -> bf16",
            "moe": f"{'e4m3 -> bf16' if dtype == 'fp8' else dtype}, weights K-major"}[kind]
    t = Table(title=f"gemmlab bench --suite {kind} ({what}) on {result['env'].get('gpu_name') or 'this GPU'}")
    cols = _moe_fp8.COLUMNS if kind == "moe" and dtype == "fp8" else _COLUMNS[kind]
    for col in cols:
        t.add_column(col, justify="right")
    for r in result["results"]:
        t.add_row(_shape(r), *(_row(r) if r["verified"] else ["FAILED"] + [""] * (len(cols) - 2)))
    console = Console()
    console.print(t)
    for k, v in result["summary"].items():
        console.print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")


def exit_code(result: dict) -> int:
    """0 when every gemmlab result verified, else 1."""
    return 0 if result["summary"]["verified"] else 1
