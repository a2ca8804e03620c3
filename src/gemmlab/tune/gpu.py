"""The real evaluator: candidates compiled by NVRTC in worker processes (``core.precompile.
CompilePool``), verified against the float64 reference (``measure.verify``), and timed by the one
timing engine (``measure.timing``) on one GPU, beside the peers (cuBLAS, Triton) timed by the same
engine on the same operands at the start of the run.

The operands are made once per run: fresh random A and B of the tuned shape and layout and a C
poisoned with NaN before every verification, so each candidate is checked on data it did not see
before it wrote C. The compile pool builds the very variant the launch will pick (the layouts and
vector-access flags of these operands), so nothing compiles while the GPU is being timed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..analysis import environment
from ..core import api, driver
from ..core.precompile import CompilePool
from ..core.problem import make_problem
from ..core.registry import get
from ..core.variant import FP8_DEFAULT_OUT, SpillError, Variant, resolve
from ..measure import arrays, gpu_timing, peers as peer_lib, timing
from ..measure.verify import check as verify_check
from .evaluate import Outcome


@dataclass(frozen=True)
class GpuFactory:
    """``EvaluatorFactory`` of ``GpuEvaluator`` (picklable: a worker process per device)."""

    rung: str
    dtype: str
    shape: tuple[int, int, int]
    layout: str = "rr"
    settings: timing.Settings = timing.Settings()
    lib: str | None = None
    peers: tuple[str, ...] | None = None     # None: every peer usable here (cuBLAS always)
    processes: int | None = None             # compile workers per device (None: CPUs / devices)
    precision: str | None = None             # None: the rung's own default for the dtype

    def identity(self, device: int) -> dict:
        return machine_identity(device)

    def create(self, device: int) -> "GpuEvaluator":
        return GpuEvaluator(self, device)


def compile_configs(pool: CompilePool, arch: str, configs: Sequence[dict], variant_of) -> list[Outcome | None]:
    """Build the variant ``variant_of(cfg)`` of every configuration in the pool (in parallel), each
    as the launch will load it; per configuration None when it compiled, else its failure
    ("compile_error", "spill"; a ValueError of ``variant_of`` is a compile error too)."""
    variants, errors = [], {}
    for i, cfg in enumerate(configs):
        try:
            variants.append((i, variant_of(cfg)))
        except ValueError as exc:
            errors[i] = f"ValueError: {exc}"
    pool.build([v for _, v in variants], arch,
               lambda v, hit, err: errors.__setitem__(next(i for i, w in variants if w is v), err))
    out: list[Outcome | None] = []
    for i in range(len(configs)):
        err = errors.get(i)
        if err is None:
            out.append(None)
        else:
            status = "spill" if err.startswith("SpillError") else "compile_error"
            out.append(Outcome(status, reason=err.strip().splitlines()[0]))
    return out


def timed(engine: timing.Engine, quick: timing.Engine, fn, cutoff_ms: float | None, rel: float | None) -> Outcome:
    """A verified candidate ``fn`` timed by ``engine``; past ``cutoff_ms`` on ``quick``'s three samples,
    that short estimate only (the 3x rule)."""
    cand = timing.Candidate("candidate", fn)
    engine.warm_up([cand])
    if cutoff_ms is not None:
        q = quick.measure([cand]).samples["candidate"]
        if q.median > cutoff_ms:
            return Outcome("ok", q.median, detail={"estimate": True, "samples": q.n, "rel_error": rel})
    s = engine.measure([cand]).samples["candidate"]
    return Outcome("ok", s.median, detail={"samples": s.n, "noise": s.noise, "min_ms": s.minimum,
                                           "stop_reason": s.stop_reason, "throttled_samples": sum(s.throttled),
                                           "rel_error": rel})


def machine_identity(device: int) -> dict:
    """The study key's machine part of GPU ``device`` (``EvaluatorFactory.identity``)."""
    env = environment.collect(device)
    return {"gpu_name": env.get("gpu_name"), "arch": env.get("arch"), "driver": env.get("driver_version"),
            "nvrtc": env.get("nvrtc_version"), "gemmlab": env.get("gemmlab_version"), "sm_count": env.get("sm_count")}


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


class GpuEvaluator:
    def __init__(self, f: GpuFactory, device: int):
        self.f = f
        self.rung = get(f.rung)
        self.L = arrays.Lib(arrays.choose_lib(f.lib, f.dtype, arrays.available_libs()))
        if self.L.name == "torch":
            self.L.xp.cuda.set_device(device)
        else:
            self.L.xp.cuda.Device(device).use()
        self.info = driver.device_info(device)
        self.device = f"GPU {device} ({environment.collect(device).get('pci_bus_id') or self.info.name})"
        self.pool = CompilePool(f.processes, start_method="forkserver")
        M, N, K = f.shape
        # FP8 operands write a bf16 C (gemmlab.gemm's and verify's default output for them)
        self.ops = arrays.make_operands(self.L, M, N, K, f.dtype, a_col=f.layout[0] == "c", b_col=f.layout[1] == "c",
                                        beta_nonzero=False, out=FP8_DEFAULT_OUT if f.dtype == "fp8" else None)
        self.kv = make_problem(self.ops.a, self.ops.b, self.ops.c).kernel_view()
        st = f.settings
        self.dev = gpu_timing.CudaDevice(self.L, device, self.info.l2_bytes, flush=st.l2 == "cold", spin=st.spin)
        clocks = gpu_timing.NvmlClocks(device) if environment.max_sm_clock_mhz(device) else None
        self.engine = timing.Engine(self.dev, st, clocks)
        # the 3x rule's short estimate: three samples, no noise target
        self.quick = timing.Engine(self.dev, replace(st, min_samples=3, max_samples=3, warmup=0), None)

    def _variant(self, cfg: dict) -> Variant:
        """The variant the plan of ``cfg`` runs (after its copies, in its geometry)."""
        return resolve(self.rung, self.f.dtype, self.kv, cfg, self.f.precision, self.info.sm_count).variant

    def compile(self, configs: Sequence[dict]) -> list[Outcome | None]:
        return compile_configs(self.pool, self.info.arch, configs, self._variant)

    def _verified(self, plan, cfg: dict) -> tuple[Outcome | None, float | None]:
        L, ops = self.L, self.ops
        L.fill_nan(ops.c)
        plan.run(self.dev.stream)
        L.synchronize()
        vr = verify_check(ops, 1.0, 0.0, f"{self.rung.slug} {cfg}", self.rung.precision_for(self.f.dtype, self.f.precision))
        if vr.ok:
            return None, vr.rel_error
        return Outcome("wrong", reason=(f"rel. error {vr.rel_error:.2e} (tol {vr.tol:.1e}), max scaled "
                                        f"{vr.max_scaled:.2e} (tol {vr.elem_tol:.1e}), {vr.nonfinite} non-finite"),
                       detail={"rel_error": vr.rel_error, "max_scaled": vr.max_scaled}), vr.rel_error

    def measure(self, config: dict, cutoff_ms: float | None) -> Outcome:
        try:
            plan = api.plan(self.ops.a, self.ops.b, self.ops.c, kernel=self.rung.slug, config=config,
                            precision=self.f.precision)
        except SpillError as exc:
            return Outcome("spill", reason=first_line(exc))
        except Exception as exc:  # noqa: BLE001 - CompileError, resources ...
            return Outcome("compile_error", reason=first_line(exc))
        bad, rel = self._verified(plan, config)
        if bad is not None:
            return bad
        return timed(self.engine, self.quick, lambda: plan.run(self.dev.stream), cutoff_ms, rel)

    def _scaled_mm_peer(self) -> timing.Candidate | None:
        """FP8's peer: torch._scaled_mm (cuBLASLt) on the same operands with unit tensor-wise scales,
        into bf16, with fast accumulation where the tune's precision has it; None where this PyTorch
        has none or refuses these operands (no plain-GEMM peer takes FP8: measure/peers.py)."""
        torch = self.L.xp
        if self.L.name != "torch" or not hasattr(torch, "_scaled_mm"):
            return None
        one = torch.ones((), device=self.ops.a.device)
        fast = self.rung.precision_for(self.f.dtype, self.f.precision) == "fp8_fast"
        a, b = self.ops.a, self.ops.b
        call = lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16, use_fast_accum=fast)  # noqa: E731
        try:
            call()
        except RuntimeError:
            return None
        return timing.Candidate("torch._scaled_mm", call)

    def peers(self) -> dict[str, float]:
        cands = []
        for peer in peer_lib.peers(self.f.peers, self.f.dtype, self.L.name,
                                   self.rung.precision_for(self.f.dtype, self.f.precision)):
            ok, _why = peer.available(self.f.dtype)
            if ok:
                cands.append(timing.Candidate(peer.name, peer.prepare(self.ops, self.f.dtype)))
        if self.f.dtype == "fp8":
            cands += [c for c in (self._scaled_mm_peer(),) if c is not None]
        if not cands:
            return {}
        self.engine.warm_up(cands)
        run = self.engine.measure(cands)
        return {name: s.median for name, s in run.samples.items() if s.median}

    def close(self) -> None:
        self.pool.close()
