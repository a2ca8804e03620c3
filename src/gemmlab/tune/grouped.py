"""The evaluator of the grouped rungs (26 and 27, ``gemmlab tune wgmma_grouped --shape GxTxNxK``, and
``wgmma_grouped_fp8`` with ``--dtype fp8``): a mixture-of-experts layer of G experts, T tokens and
N x K weights, its tokens routed unevenly as ``bench --suite moe`` routes them
(``bench.moe.route``), the weights K-major (layout ``rc``: ``w.transpose(-2, -1)`` of (G, N, K)
weights) or, in 16 bits, row-major (``rr``).

Each candidate is the call a user makes, ``gemmlab.grouped_mm(a, b, offs, config=...)`` (FP8:
``gemmlab.scaled_grouped_mm`` with row-wise scales, bf16 out, fast accumulation in precision
fp8_fast): compiled ahead in the compile pool (``tuning_variant``: the build the call loads), then
run on a NaN-filled output and compared with per-group float64 products (of the dequantized
operands; measure.verify's tolerance), then timed by the timing engine, as ``tune.gpu`` does for
one product. The peer is ``torch._grouped_mm`` (``torch._scaled_grouped_mm``) on the same operands
where this PyTorch has it. Operands are PyTorch tensors (bf16 and FP8 need them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..analysis import environment
from ..core import driver, grouped as grouped_core, scaled_grouped
from ..core.deps import require
from ..core.precompile import CompilePool
from ..core.variant import SpillError
from ..measure import arrays, gpu_timing, timing
from ..measure.verify import tolerance
from .evaluate import Outcome
from .gpu import compile_configs, first_line, machine_identity, timed

DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn"}


@dataclass(frozen=True)
class GroupedFactory:
    """``EvaluatorFactory`` of ``GroupedEvaluator`` (picklable: a worker process per device)."""

    dtype: str
    shape: tuple[int, int, int, int]          # G, T, N, K
    layout: str = "rc"                        # the tokens row-major; the weights K-major (c) or row-major (r)
    settings: timing.Settings = timing.Settings()
    processes: int | None = None              # compile workers per device (None: CPUs / devices)
    seed: int = 0                             # the routing's
    precision: str | None = None              # FP8's: "fp8" (promoted, the default) or "fp8_fast"

    def identity(self, device: int) -> dict:
        return machine_identity(device)

    def create(self, device: int) -> "GroupedEvaluator":
        return GroupedEvaluator(self, device)


class GroupedEvaluator:
    def __init__(self, f: GroupedFactory, device: int):
        from ..bench.moe import route

        torch = self.torch = require("torch")
        if f.dtype not in DTYPES:
            raise ValueError(f"the grouped rungs tune fp16, bf16 or fp8, not {f.dtype}")
        torch.cuda.set_device(device)
        self.f = f
        self.fp8 = f.dtype == "fp8"
        self.precision = (f.precision or "fp8") if self.fp8 else None
        G, T, N, K = f.shape
        at = f"cuda:{device}"
        self.counts = route(torch, T, G, f.seed)
        self.ends = torch.tensor(self.counts, dtype=torch.int64).cumsum(0).to(torch.int32).to(at)
        if self.fp8:   # e4m3 codes of values about N(0, 4), row-wise scales of 0.5 to 1.5, bf16 out
            dt, out_dt = torch.float8_e4m3fn, torch.bfloat16
            self.a = (torch.randn(T, K, device=at) * 2).to(dt)
            w = (torch.randn(G, N, K, device=at) * 2).to(dt)
            self.sa, self.sb = torch.rand(T, device=at) + 0.5, torch.rand(G, N, device=at) + 0.5
        else:
            dt = out_dt = getattr(torch, DTYPES[f.dtype])
            self.a = torch.randn(T, K, device=at, dtype=dt)
            w = torch.randn(G, N, K, device=at, dtype=dt)
        self.b = w.transpose(-2, -1) if f.layout[1] == "c" else w.transpose(-2, -1).contiguous()
        self.out = torch.empty(T, N, device=at, dtype=out_dt)
        self.ref = self._reference()
        self.tol = tolerance("bf16", K, self.precision) if self.fp8 else tolerance(f.dtype, K)
        self.info = driver.device_info(device)
        self.device = f"GPU {device} ({environment.collect(device).get('pci_bus_id') or self.info.name})"
        self.pool = CompilePool(f.processes, start_method="forkserver")
        st = f.settings
        self.dev = gpu_timing.CudaDevice(arrays.Lib("torch"), device, self.info.l2_bytes, flush=st.l2 == "cold",
                                         spin=st.spin)
        clocks = gpu_timing.NvmlClocks(device) if environment.max_sm_clock_mhz(device) else None
        self.engine = timing.Engine(self.dev, st, clocks)
        self.quick = timing.Engine(self.dev, replace(st, min_samples=3, max_samples=3, warmup=0), None)

    def _reference(self):
        """Per-group float64 products (of the dequantized operands), row block by row block."""
        torch = self.torch
        ref = torch.zeros(self.out.shape, dtype=torch.float64, device=self.a.device)
        start = 0
        for g, c in enumerate(self.counts):
            if c:
                x, w = self.a[start:start + c].double(), self.b[g].double()
                if self.fp8:
                    x, w = x * self.sa[start:start + c].double()[:, None], w * self.sb[g].double()[None, :]
                ref[start:start + c] = x @ w
            start += c
        return ref

    def _call(self, config: dict) -> None:
        if self.fp8:
            scaled_grouped.scaled_grouped_mm(self.a, self.b, self.sa, self.sb, self.ends, out=self.out, config=config,
                                             use_fast_accum=self.precision == "fp8_fast", check=False,
                                             check_finite=False)
        else:
            grouped_core.grouped_mm(self.a, self.b, self.ends, out=self.out, config=config, check=False)

    def _variant(self, cfg: dict):
        if self.fp8:
            return scaled_grouped.tuning_variant(self.a, self.b, self.sa, self.sb, self.out, cfg, self.precision)
        return grouped_core.tuning_variant(self.a, self.b, self.out, cfg)

    def compile(self, configs: Sequence[dict]) -> list[Outcome | None]:
        return compile_configs(self.pool, self.info.arch, configs, self._variant)

    def measure(self, config: dict, cutoff_ms: float | None) -> Outcome:
        self.out.fill_(float("nan"))
        try:
            self._call(config)
        except SpillError as exc:
            return Outcome("spill", reason=first_line(exc))
        except Exception as exc:  # noqa: BLE001 - CompileError, resources, a refused configuration ...
            return Outcome("compile_error", reason=first_line(exc))
        self.torch.cuda.synchronize()
        diff = self.out.double() - self.ref
        nonfinite = int((~self.torch.isfinite(self.out)).sum())
        rel = float(diff.nan_to_num(float("inf")).norm() / self.ref.norm().clamp(min=1e-300))
        if nonfinite or not rel <= self.tol:
            return Outcome("wrong", reason=f"rel. error {rel:.2e} (tol {self.tol:.1e}), {nonfinite} non-finite",
                           detail={"rel_error": rel})
        return timed(self.engine, self.quick, lambda: self._call(config), cutoff_ms, rel)

    def peers(self) -> dict[str, float]:
        torch = self.torch
        if self.fp8 and hasattr(torch, "_scaled_grouped_mm"):
            cand = timing.Candidate("torch._scaled_grouped_mm", lambda: torch._scaled_grouped_mm(
                self.a, self.b, self.sa, self.sb, offs=self.ends, out_dtype=torch.bfloat16,
                use_fast_accum=self.precision == "fp8_fast"))
        elif not self.fp8 and hasattr(torch, "_grouped_mm"):
            cand = timing.Candidate("torch._grouped_mm", lambda: torch._grouped_mm(self.a, self.b, offs=self.ends))
        else:
            return {}
        try:
            self.engine.warm_up([cand])
        except RuntimeError:   # this PyTorch's grouped GEMM refuses the layout or the GPU
            return {}
        run = self.engine.measure([cand])
        return {name: s.median for name, s in run.samples.items() if s.median}

    def close(self) -> None:
        self.pool.close()
