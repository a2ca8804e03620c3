"""The GPU run of ``gemmlab bench``: time the rungs of the ladder beside cuBLAS and the peers a
user would pick instead (Triton), on the same inputs, in the same run (``run_bench``).

How a figure is measured
------------------------
For each problem shape the benchmark allocates fresh random A and B (never zeros or ones) and one
C, and uses these very operands for every rung, for cuBLAS and for every peer:

1. Verify (unless ``--no-verify``): C is poisoned with NaN, the entry runs once, and
   ``verify.check`` compares C with a float64 cuBLAS reference. A rung or peer that fails is
   reported as FAILED and is not timed. cuBLAS is checked the same way (it is timed regardless;
   a failure there means, e.g., that TF32 is on, and the note says so).
2. Time with the one timing engine (``gemmlab.measure.timing``): warm-up runs, then interleaved
   rounds in a balanced order (each entry right after each other equally often), each timed
   launch preceded by an L2 flush (cold-L2 mode, the default) and a spin kernel that keeps host
   latency out of the interval, until each entry's stopping rule is met; NVML clocks read during
   the rounds mark throttled samples.
3. Self-check: cuBLAS is timed once more on its own (back to back); when that median and the
   interleaved one differ by more than 3 %, the table and the JSON say so in plain words.
4. Report the median of the samples (min, max, noise and every sample go to the JSON), TFLOP/s =
   2*M*N*K / median, the ratio to cuBLAS's median at the same shape from the same run (> 1 means
   faster than cuBLAS), the ratio to the best peer, and % of the device's peak
   (``core.arch.peaks``). See ``stats``.

Sustained mode (``Settings.sustained_s``, ``bench --sustained``): step 2 times blocks of back-to-back
launches instead (the engine's sustained mode: the GPU at its steady state, for a large tensor-core
GEMM the power cap), and each record also gets the energy per call, the board's power and the SM
clock of its blocks (NVML), GFLOP per joule and its energy against cuBLAS's; there is no self-check.

cuBLAS is ``Lib.matmul(a, b, out=c)`` on the same operands, through PyTorch (the default when it
has CUDA) or CuPy (``--lib``). For fp32 it is kept on true FP32 SGEMM: PyTorch's TF32 switch is
turned off for the run (``fp32_precision = "ieee"``, or ``allow_tf32 = False`` on older
versions) and CuPy's float32 compute type is set to DEFAULT (CUBLAS_COMPUTE_32F), which
overrides ``CUPY_TF32=1``; both are restored afterwards and recorded in the JSON. With
``precision="tf32"`` (the rungs round the operands to TF32) cuBLAS runs with TF32 instead
(``fp32_precision = "tf32"`` / ``allow_tf32 = True``; CuPy's COMPUTE_TYPE_TF32); "3xtf32" is
FP32-accurate and is compared with strict SGEMM. The baseline's precision is in every cuBLAS
record and in the settings. The peers are ``gemmlab.measure.peers`` (the Triton peer keeps
``input_precision="ieee"`` for fp32 whatever the precision: the table's note says so).

Which shapes: ``schedule``. The result dict and its JSON: ``results``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from ..core.version import __version__
from ..analysis import environment as envinfo
from ..core import api, driver
from ..core.arch import peak_for_dtype, peak_kind
from ..core.precision import resolve as resolve_precision
from ..core.config import ConfigSpec
from ..core.dtypes import get as get_dtype
from ..core.registry import Rung
from ..core.variant import FP8_DEFAULT_OUT
from ..core.shapes import Shape, fmt_shape
from ..measure import arrays, gpu_timing, peers as peer_lib, timing
from ..core.progress import Progress
from ..measure.ceilings import measure_bandwidth
from ..measure.verify import check as verify_check
from .schedule import DEFAULT_SHAPE, REDUCED_SHAPE, Group, Job, as_shapes, schedule, select_rungs, wants_auto
from .stats import MIN_UNTHROTTLED, add_note, blank_record, suite_summary, summarize


# ---- arguments ---------------------------------------------------------------------------------
def _check_arguments(rungs, shapes, dtype: str, lib: str | None, config, peers, precision=None):
    """Everything that can be refused without a GPU, before looking for one."""
    rung_list = select_rungs(rungs, dtype, precision)
    shape_list = as_shapes(shapes)
    if config is not None:
        if len(rung_list) != 1:   # (auto chooses its own)
            raise ValueError("--config applies to one rung: name exactly one rung "
                             f"(got {len(rung_list)}: {', '.join(r.slug for r in rung_list)})")
        rung_list[0].config(config)  # raises ValueError naming the problem
    if lib is not None and lib not in arrays.LIBS:
        raise ValueError(f"unknown library {lib!r}; use one of {', '.join(arrays.LIBS)}")
    if lib == "cupy" and dtype == "bf16":
        raise ValueError("CuPy has no bfloat16 arrays: bf16 needs --lib torch")
    # unknown names are refused here; whether a named peer can run is asked on the GPU
    peer_names = [p.name for p in peer_lib.peers(peers, dtype, lib or "torch")] if peers is not None else None
    return rung_list, shape_list, peer_names


def _no_gpu_reason() -> str:
    """Why there is no GPU, for the one no-GPU message of the CLI (cli/app.py)."""
    try:
        driver.init()
    except Exception as exc:  # NoGPUError, ImportError of cuda-python ...
        return str(exc)
    return "no usable NVIDIA GPU"


# ---- the run's state ---------------------------------------------------------------------------
@dataclass
class _Run:
    """What every step of one benchmark run shares: the options, the device and the library, the
    environment read at the start, the timing engine and the progress bar."""

    dtype: str
    verify: bool
    config: object
    L: arrays.Lib
    ordinal: int
    info: driver.DeviceInfo
    started: datetime
    t0: float
    clocks_before: dict
    env: dict
    peak: float | None
    prog: Progress
    engine: timing.Engine
    device: gpu_timing.CudaDevice
    peers: dict = field(default_factory=dict)      # name -> measure.peers.Peer
    precision: str = ""                            # what the rungs compute in (core.precision)
    cublas_mode: arrays.Fp32Mode | None = None     # set once entered, around the groups


def _start(*, dtype: str, verify: bool, config, lib: str | None, settings: timing.Settings, progress: bool,
           peer_names, precision: str) -> _Run:
    """The array library, the device, the environment before the run, the timing engine, the
    peers and the progress bar (in this order; the bar's total, the groups, is set once they are
    scheduled)."""
    L = arrays.Lib(arrays.choose_lib(lib, dtype, arrays.available_libs()))
    ordinal = int(L.xp.cuda.current_device()) if L.name == "torch" else int(L.xp.cuda.runtime.getDevice())
    info = driver.device_info(ordinal)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    clocks_before = envinfo.clocks(ordinal)
    env = envinfo.collect(ordinal)
    peak = peak_for_dtype(env["peaks"], dtype, precision)
    flush = settings.l2 == "cold" and not settings.sustained    # sustained blocks run back to back, unflushed
    device = gpu_timing.CudaDevice(L, ordinal, info.l2_bytes, flush=flush, spin=settings.spin)
    clocks = gpu_timing.NvmlClocks(ordinal) if envinfo.max_sm_clock_mhz(ordinal) else None
    energy = gpu_timing.NvmlEnergy(ordinal) if settings.sustained and envinfo.total_energy_mj(ordinal) is not None else None
    engine = timing.Engine(device, settings, clocks, energy)
    peers = {p.name: p for p in peer_lib.peers(peer_names, dtype, L.name, precision)}
    prog = Progress(0, enabled=progress, label="bench")
    return _Run(dtype, verify, config, L, ordinal, info, started, t0, clocks_before, env, peak, prog, engine,
                device, peers, precision)


# ---- one entry: the call, verified -------------------------------------------------------------
def _verify_summary(vr) -> str:
    return (f"rel. error {vr.rel_error:.2e} (tol {vr.tol:.1e}), max scaled {vr.max_scaled:.2e} "
            f"(tol {vr.elem_tol:.1e}), {vr.nonfinite} non-finite")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _peer_callable(run: _Run, job: Job, rec: dict, ops) -> Callable[[], None] | None:
    peer = run.peers[job.peer]
    ok, why = peer.available(run.dtype)
    if not ok:
        rec["status"] = "skipped"
        add_note(rec, why)
        return None
    fn = peer.prepare(ops, run.dtype)
    rec["config"] = peer.describe(run.dtype)
    rec["precision"] = _baseline_precision(run) if job.peer == "cublas" else run.dtype
    if job.peer != "cublas" and run.precision != run.dtype:
        add_note(rec, f"the {job.peer} peer computes {run.dtype} exactly (input_precision ieee), not in {run.precision}")
    return fn


def _callable(run: _Run, job: Job, rec: dict, ops) -> Callable[[], None] | None:
    """The call to time for ``job`` (a peer, or the rung's plan), its config recorded in ``rec``;
    None, with the status and a note in ``rec``, when it is skipped or cannot be planned."""
    if job.rung is None and not job.auto:
        try:
            return _peer_callable(run, job, rec, ops)
        except Exception as exc:  # a peer that cannot run here (compile error, missing backend ...)
            rec["status"] = "error"
            add_note(rec, f"{exc.__class__.__name__}: {_first_line(str(exc))}")
            return None
    r = job.rung
    if r is not None:
        try:
            r.require(arch=run.info.arch)
        except ValueError as exc:
            rec["status"] = "skipped"
            add_note(rec, str(exc))
            return None
    try:
        p = api.plan(ops.a, ops.b, ops.c, kernel=r.slug, config=run.config, precision=run.precision) if r else \
            api.plan(ops.a, ops.b, ops.c, kernel="auto", precision=run.precision)
    except Exception as exc:  # CompileError, invalid config, missing source ...
        rec["status"] = "error"
        add_note(rec, f"{exc.__class__.__name__}: {_first_line(str(exc))}")
        return None
    rec["config"] = dict(p.variant.cfg)
    rec["variant"] = p.variant.describe()
    if job.auto:   # what the dispatch chose, and why
        rec["number"] = p.rung.number
        rec["dispatch"] = p.choice.as_dict()
        add_note(rec, f"{p.rung.slug} ({p.choice.source}: {p.choice.reason})")
    elif p.packs:  # the time includes the copies
        add_note(rec, f"{', '.join(map(str, p.packs))} packed first (PACK=1), inside the timed call")
    rec["precision"] = p.variant.precision
    return lambda p=p: p.run(run.device.stream)


def _verify(run: _Run, job: Job, rec: dict, fn, ops, tag: str) -> bool:
    """Run the entry once on NaN-poisoned C and check C; False when a rung or peer failed (not
    timed). A cuBLAS failure is noted, and cuBLAS is timed regardless."""
    L = run.L
    L.fill_nan(ops.c)
    fn()
    L.synchronize()
    vr = verify_check(ops, 1.0, 0.0, f"{job.slug} {run.dtype} {tag}", run.precision)
    rec["verified"], rec["rel_error"], rec["max_scaled_error"] = vr.ok, vr.rel_error, vr.max_scaled
    if vr.ok:
        return True
    rec["verify_message"] = vr.message()
    if job.slug == "cublas":
        add_note(rec, f"cuBLAS misses the {run.precision} tolerance (TF32 on?): " + _verify_summary(vr))
        return True
    rec["status"] = "failed"
    add_note(rec, "FAILED verification: " + _verify_summary(vr))
    return False


def _prepare(run: _Run, job: Job, rec: dict, ops, tag: str) -> timing.Candidate | None:
    """Plan (or prepare the peer) and verify one entry; None when it is not timed."""
    run.prog.update(f"{tag}: {'compiling ' if job.rung else 'preparing '}{job.slug}")
    fn = _callable(run, job, rec, ops)
    if fn is None:
        return None
    try:
        if run.verify:
            run.prog.update(f"{tag}: verifying {job.slug}")
            if not _verify(run, job, rec, fn, ops, tag):
                return None
    except Exception as exc:
        raise RuntimeError(f"{job.slug} at {tag}: {exc}") from exc
    return timing.Candidate(job.slug, fn)


# ---- one group: operands, entries, timing, self-check ------------------------------------------
def _record_samples(rec: dict, s: timing.Samples) -> None:
    d = s.as_dict()
    rec["times_ms"] = d["times_ms"]
    rec["samples"], rec["noise"], rec["median_error"] = d["n"], d["noise"], d["median_error"]
    rec["stop_reason"], rec["throttled_samples"] = d["stop_reason"], d["throttled_samples"]
    rec["throttled"] = list(s.throttled)
    if s.blocks:   # sustained mode: each sample's launches, energy, power and clock
        rec["blocks"] = d["blocks"]
        if any(b.host_bound for b in s.blocks):
            add_note(rec, "host-bound: a call costs the host more than the GPU, so back to back the GPU "
                          "waits for the host (the time is the launch rate)")
    if d["throttled_samples"]:
        add_note(rec, f"{d['throttled_samples']} of {d['n']} samples at throttled clocks"
                      + (" (left out of the median)" if d["n"] - d["throttled_samples"] >= MIN_UNTHROTTLED else ""))


def _time_group(run: _Run, g: Group, records: list[dict]) -> dict:
    """Fresh operands for the group, every entry prepared and verified, then the engine's rounds
    and the self-check; the records go to ``records``, the group's facts are returned. The
    operands are freed on return, before the next group allocates its own."""
    M, N, K = g.shape
    tag = fmt_shape(g.shape)
    seed = int.from_bytes(os.urandom(4), "little")
    run.prog.update(f"{tag}: random operands")
    # FP8 operands write C in bf16, as gemmlab.gemm and scaled_mm do by default (verify's choice too)
    out = FP8_DEFAULT_OUT if run.dtype == "fp8" else None
    ops = arrays.make_operands(run.L, M, N, K, run.dtype, seed=seed, beta_nonzero=False, out=out)
    recs, cands = {}, []
    for job in g.jobs:
        rec = recs[job.slug] = blank_record(job, run.dtype)
        records.append(rec)
        c = _prepare(run, job, rec, ops, tag)
        if c is not None:
            cands.append(c)
    run.prog.update(f"{tag}: warm-up")
    run.engine.warm_up(cands)

    def on_round(info, samples):
        run.prog.update(f"{tag}: timing, round {info.index + 1}, "
                        f"{sum(1 for s in samples.values() if not s.stop_reason)} of {len(samples)} still sampling")

    measured = run.engine.measure(cands, on_round)
    for name, s in measured.samples.items():
        _record_samples(recs[name], s)
    check = None
    base = next((c for c in cands if c.name == "cublas"), None)
    if base is not None and run.engine.settings.sustained:
        check = {"ok": None, "message": "no self-check in sustained mode: every sample is a block of back-to-back "
                                        "launches, and the serpentine order weighs a drifting clock on all alike"}
    elif base is not None:
        run.prog.update(f"{tag}: self-check, cuBLAS alone")
        alone = run.engine.isolated(base)
        check = timing.self_check(measured.samples["cublas"], alone, run.engine.settings.self_check_tolerance)
        if check["ok"] is False:
            add_note(recs["cublas"], "SELF-CHECK: " + check["message"])
    run.prog.update(advance=1)
    return {"shape": list(g.shape), "seed": seed, "kernels": [j.slug for j in g.jobs],
            "timing_seed": measured.seed, "rounds": [r.as_dict() for r in measured.rounds], "self_check": check}


# ---- the run -----------------------------------------------------------------------------------
def _settings(run: _Run, *, shape_list: list[Shape] | None, rung_list: list[Rung]) -> dict:
    """The JSON's ``settings``: the options, the timing engine's settings and the peak used."""
    st = run.engine.settings
    return {
        "dtype": run.dtype, "lib": run.L.name, "verify": run.verify,
        "shapes": [list(s) for s in shape_list] if shape_list else None,
        "default_shape": list(DEFAULT_SHAPE) if shape_list is None else None,
        "reduced_shape": list(REDUCED_SHAPE) if shape_list is None else None,
        "rungs": [r.slug for r in rung_list], "peers": list(run.peers),
        "config": run.config.as_dict() if isinstance(run.config, ConfigSpec) else run.config,
        "flush_l2": st.l2 == "cold" and not st.sustained, "flush_bytes": run.device.flush_bytes,
        "flush": timing.FLUSH_KIND if st.l2 == "cold" and not st.sustained else None,
        "timing": {**st.as_dict(), "engine": "gemmlab.measure.timing",
                   "clocks": "NVML during every round" if run.engine.clocks else "NVML unavailable: not sampled"},
        "peak_tflops": run.peak, "peak_kind": peak_kind(run.dtype, run.precision),
        "precision": run.cublas_mode.settings,          # cuBLAS's float32 mode as set for the run
        "compute_precision": run.precision, "baseline_precision": _baseline_precision(run),
    }


def _baseline_precision(run: _Run) -> str:
    """What the cuBLAS baseline computes in: TF32 beside "tf32" rungs, the dtype's own otherwise."""
    return "tf32" if run.cublas_mode is not None and run.cublas_mode.tf32 else run.dtype


def self_check_summary(groups: list[dict]) -> dict:
    """Every group's self-check folded into one verdict for the JSON and the table."""
    checks = [g["self_check"] for g in groups if g.get("self_check") and g["self_check"].get("ok") is not None]
    bad = [c for c in checks if c.get("ok") is False]
    if not checks:
        skipped = next((g["self_check"]["message"] for g in groups if g.get("self_check")), None)
        return {"ok": None, "message": skipped or "no self-check (cuBLAS was not timed)"}
    if bad:
        return {"ok": False, "message": "; ".join(c["message"] for c in bad)}
    worst = max(checks, key=lambda c: abs(c.get("difference") or 0))
    return {"ok": True, "message": "cuBLAS interleaved and alone agree at every shape; largest difference: "
                                   + worst["message"]}


def run_bench(rungs=None, shapes=None, dtype: str = "fp32", *, timing_settings: timing.Settings | None = None,
              verify: bool = True, lib: str | None = None, progress: bool = True, config=None,
              peers=None, precision: str | None = None, bandwidth: bool = False) -> dict:
    """Time ``rungs`` (slugs or numbers, and ``auto``: the dispatch's choice; default all that
    support ``dtype``), cuBLAS and the peers
    at ``shapes`` (None: the default shape and rule of ``gemmlab.bench.schedule``; a
    "4096,127x4097x1023" string or (M, N, K) tuples) and return the result dict described in
    ``gemmlab.bench.results``.

    ``peers``: names from ``measure.peers`` (None: every peer usable here; cuBLAS always).
    ``precision``: what the rungs compute in (None: the dtype's exact one; see the module
    docstring for the cuBLAS baseline it implies).
    ``config`` (a dict of tile parameters or a preset name) needs exactly one rung.
    ``bandwidth``: also measure the device's copy bandwidth once (measure.ceilings) and give every
    record its GB/s and share of it (memory-bound suites: ``--suite decode``). Raises
    ``driver.NoGPUError`` without a GPU, ValueError for invalid arguments (checked first, without
    touching the GPU)."""
    settings = timing_settings or timing.Settings()
    precision = resolve_precision(dtype, precision)
    rung_list, shape_list, peer_names = _check_arguments(rungs, shapes, dtype, lib, config, peers, precision)
    driver.cuda()  # cuda-python first: a base install gets the extra to install, not "no GPU"
    if not driver.gpu_available():
        raise driver.NoGPUError(_no_gpu_reason())
    run = _start(dtype=dtype, verify=verify, config=config, lib=lib, settings=settings, progress=progress,
                 peer_names=peer_names, precision=precision)
    groups = schedule(rung_list, shape_list, list(run.peers), auto=wants_auto(rungs))
    run.prog.update(total_delta=len(groups))
    records: list[dict] = []
    group_info: list[dict] = []
    with run.prog, arrays.Fp32Mode(run.L, tf32=precision == "tf32") as mode:
        run.cublas_mode = mode
        for g in groups:
            group_info.append(_time_group(run, g, records))

    copy = measure_bandwidth(run.L.name) if bandwidth else None
    summarize(records, run.peak, get_dtype(dtype).itemsize, copy["dram_bw_Bps"] if copy else None)
    env = run.env
    env["clocks_before"] = run.clocks_before
    env["clocks_after"] = envinfo.clocks(run.ordinal)
    settings_doc = _settings(run, shape_list=shape_list, rung_list=rung_list)
    if copy:
        settings_doc["copy_bandwidth"] = copy
    return {"gemmlab_version": __version__, "timestamp": run.started.isoformat(timespec="seconds"),
            "duration_s": round(time.perf_counter() - run.t0, 3), "env": env,
            "settings": settings_doc,
            "self_check": self_check_summary(group_info), "groups": group_info, "results": records,
            "summary": suite_summary(records)}
