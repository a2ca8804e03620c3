"""The GPU run of ``gemmlab bench``: time the rungs of the ladder beside cuBLAS, on the same
inputs, in the same run (``run_bench``).

How a figure is measured
------------------------
For each problem shape the benchmark allocates fresh random A and B (never zeros or ones) and one
C, and uses these very operands for every rung and for cuBLAS:

1. Verify (unless ``--no-verify``): C is poisoned with NaN, the rung runs once, and
   ``verify.check`` compares C with a float64 cuBLAS reference. A rung that fails is reported as
   FAILED and is not timed. cuBLAS is checked the same way (it is timed regardless; a failure
   there means, e.g., that TF32 is on, and the note says so).
2. Estimate: one run timed with CUDA events. Then the warm-up runs (``--warmup`` in all,
   counting this one).
3. Time, interleaved: ``repeats`` rounds; in each round cuBLAS runs first, then every rung in
   ladder order, each run preceded by an L2 flush (a memset of a buffer of twice the device's
   L2 size, outside the timed events) and bracketed by two CUDA events on the current stream.
   Interleaving exposes cuBLAS and the rungs to the same clock and thermal drift. The host
   synchronizes once per round; each round starts with two extra flushes so the GPU is busy
   while the host enqueues the first timed launch, and the flush before every timed run keeps
   the host's launch overhead out of the events (with ``--no-flush`` on tiny shapes it is not).
4. Report the median of the repeats (min and max and every repeat go to the JSON), TFLOP/s =
   2*M*N*K / median, the ratio to cuBLAS's median at the same shape from the same run (> 1 means
   faster than cuBLAS), and % of the device's peak (``envinfo.peaks``: FP32 CUDA-core peak for
   fp32, dense tensor-core peak for fp16/bf16). See ``stats``.

cuBLAS is ``Lib.matmul(a, b, out=c)`` on the same operands, through PyTorch (the default when it
has CUDA) or CuPy (``--lib``). For fp32 it is kept on true FP32 SGEMM: PyTorch's TF32 switch is
turned off for the run (``fp32_precision = "ieee"``, or ``allow_tf32 = False`` on older
versions) and CuPy's float32 compute type is set to DEFAULT (CUBLAS_COMPUTE_32F), which
overrides ``CUPY_TF32=1``; both are restored afterwards and recorded in the JSON.

Which shapes, and how many repeats a slow entry gets: ``schedule``. The result dict and its JSON:
``results``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from .. import __version__
from ..analysis import environment as envinfo
from ..core import api, driver, launch
from ..core.arch import peak_for_dtype, peak_kind
from ..core.registry import Rung
from ..core.shapes import Shape, fmt_shape
from ..measure import arrays
from ..measure.progress import Progress
from ..measure.verify import check as verify_check
from . import schedule as sched  # the method's constants (SLOW_RUN_MS, ...) are read from it when used
from .schedule import (DEFAULT_REPEATS, DEFAULT_SHAPE, DEFAULT_WARMUP, REDUCED_SHAPE, Group, Job, as_shapes, schedule,
                       select_rungs, slow_repeats)
from .stats import add_note, blank_record, summarize

FLUSH_FACTOR = 2            # the flush buffer is this many times the L2 size


# ---- arguments ---------------------------------------------------------------------------------
def _check_arguments(rungs, shapes, dtype: str, repeats, warmup, lib: str | None,
                     config) -> tuple[list[Rung], list[Shape] | None]:
    """The rungs and shapes to run; ValueError for anything invalid (no GPU touched)."""
    rung_list = select_rungs(rungs, dtype)
    shape_list = as_shapes(shapes)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    if config is not None:
        if len(rung_list) != 1:
            raise ValueError("--config applies to one rung: name exactly one rung "
                             f"(got {len(rung_list)}: {', '.join(r.slug for r in rung_list)})")
        rung_list[0].config(config)  # raises ValueError naming the problem
    if lib is not None and lib not in arrays.LIBS:
        raise ValueError(f"unknown library {lib!r}; use one of {', '.join(arrays.LIBS)}")
    if lib == "cupy" and dtype == "bf16":
        raise ValueError("CuPy has no bfloat16 arrays: bf16 needs --lib torch")
    return rung_list, shape_list


def _no_gpu_reason() -> str:
    """Why there is no GPU, for the one no-GPU message of the CLI (cli/app.py)."""
    try:
        driver.init()
    except Exception as exc:  # NoGPUError, ImportError of cuda-python ...
        return str(exc)
    return "no usable NVIDIA GPU"


# ---- the run's state ---------------------------------------------------------------------------
class _Flusher:
    """Writes a buffer of FLUSH_FACTOR x the L2 size (a memset), evicting A, B and C from L2."""

    def __init__(self, L, l2_bytes: int, enabled: bool):
        self.nbytes = FLUSH_FACTOR * max(int(l2_bytes), 1 << 20) if enabled else 0
        self.buf = None
        if enabled:
            if L.name == "torch":
                self.buf = L.xp.empty(self.nbytes, dtype=L.xp.uint8, device="cuda")
                self._zero = self.buf.zero_
            else:
                self.buf = L.xp.empty(self.nbytes, dtype=L.xp.uint8)
                self._zero = lambda: self.buf.fill(0)

    def __call__(self) -> None:
        if self.buf is not None:
            self._zero()


@dataclass
class _Run:
    """What every step of one benchmark run shares: the options, the device and the library, the
    environment read at the start, the L2 flusher and the progress bar."""

    dtype: str
    repeats: int
    warmup: int
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
    flush: _Flusher
    precision: arrays.TrueFP32 | None = None   # set once entered, around the groups


@dataclass
class _Entry:
    job: Job
    rec: dict
    fn: Callable[[], None] | None = None
    reps: int = 0
    events: tuple = ()


def _start(*, dtype: str, repeats: int, warmup: int, verify: bool, config, lib: str | None, flush_l2: bool,
           progress: bool, n_entries: int) -> _Run:
    """The array library, the device, the environment before the run, the progress bar and the
    flush buffer (in this order)."""
    L = arrays.Lib(arrays.choose_lib(lib, dtype, arrays.available_libs()))
    ordinal = int(L.xp.cuda.current_device()) if L.name == "torch" else int(L.xp.cuda.runtime.getDevice())
    info = driver.device_info(ordinal)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    clocks_before = envinfo.clocks(ordinal)
    env = envinfo.collect(ordinal)
    peak = peak_for_dtype(env["peaks"], dtype)
    prog = Progress(n_entries * (1 + repeats), enabled=progress)
    flush = _Flusher(L, info.l2_bytes, flush_l2)
    return _Run(dtype, repeats, warmup, verify, config, L, ordinal, info, started, t0, clocks_before, env, peak,
                prog, flush)


# ---- one entry: plan, verify, estimate, warm up ------------------------------------------------
def _verify_summary(vr) -> str:
    return (f"rel. error {vr.rel_error:.2e} (tol {vr.tol:.1e}), max scaled {vr.max_scaled:.2e} "
            f"(tol {vr.elem_tol:.1e}), {vr.nonfinite} non-finite")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _callable(run: _Run, job: Job, rec: dict, ops, stream) -> Callable[[], None] | None:
    """The call to time for ``job`` (cuBLAS, or the rung's plan), its config recorded in ``rec``;
    None, with the status and a note in ``rec``, when the rung is skipped or cannot be planned."""
    L = run.L
    if job.rung is None:
        rec["config"] = {"lib": L.name, "call": f"{L.name}.matmul(a, b, out=c)", **run.precision.settings}
        return lambda: L.matmul(ops.a, ops.b, out=ops.c)
    r = job.rung
    try:
        r.require(arch=run.info.arch)
    except ValueError as exc:
        rec["status"] = "skipped"
        add_note(rec, str(exc))
        return None
    try:
        p = api.plan(ops.a, ops.b, ops.c, kernel=r.slug, config=run.config)
    except Exception as exc:  # CompileError, invalid config, missing source ...
        rec["status"] = "error"
        add_note(rec, f"{exc.__class__.__name__}: {_first_line(str(exc))}")
        return None
    rec["config"] = dict(p.variant.cfg)
    rec["variant"] = p.variant.describe()
    return lambda p=p: p.run(stream)


def _verify(run: _Run, e: _Entry, ops, tag: str) -> bool:
    """Run the entry once on NaN-poisoned C and check C; False when a rung failed (not timed).
    A cuBLAS failure is noted, and cuBLAS is timed regardless."""
    job, rec, L = e.job, e.rec, run.L
    run.prog.update(f"{tag}: verifying {job.slug}")
    L.fill_nan(ops.c)
    e.fn()
    L.synchronize()
    vr = verify_check(ops, 1.0, 0.0, f"{job.slug} {run.dtype} {tag}")
    rec["verified"], rec["rel_error"], rec["max_scaled_error"] = vr.ok, vr.rel_error, vr.max_scaled
    if not vr.ok:
        if job.rung is not None:
            rec["status"] = "failed"
            rec["verify_message"] = vr.message()
            add_note(rec, "FAILED verification: " + _verify_summary(vr))
            return False
        rec["verify_message"] = vr.message()
        add_note(rec, f"cuBLAS misses the {run.dtype} tolerance (TF32 on?): " + _verify_summary(vr))
    return True


def _estimate_and_warm_up(run: _Run, e: _Entry) -> None:
    """The estimate run (also the first warm-up run), the repeats it allows, then the rest of the
    warm-up (none for a slow entry)."""
    L, rec, flush = run.L, e.rec, run.flush
    e.events = arrays.event_pair(L)
    flush()
    e.events[0].record()
    e.fn()
    e.events[1].record()
    e.events[1].synchronize()
    est = arrays.elapsed_ms(L, *e.events)
    rec["first_run_ms"] = est
    e.reps = slow_repeats(est, run.repeats)
    if e.reps < run.repeats or est > sched.SLOW_RUN_MS:
        rec["warmup"] = 1
        add_note(rec, f"{e.reps} repeats: one run takes {est:.0f} ms (> {sched.SLOW_RUN_MS:.0f} ms)")
    else:
        rec["warmup"] = max(run.warmup, 1)
        for _ in range(run.warmup - 1):
            flush()
            e.fn()
    L.synchronize()


def _prepare(run: _Run, job: Job, rec: dict, ops, stream, tag: str) -> _Entry | None:
    """Plan, verify, estimate and warm up one entry; None when it is not timed (skipped, error,
    failed verification)."""
    e = _Entry(job, rec)
    run.prog.update(f"{tag}: {'compiling ' if job.rung else ''}{job.slug}")
    e.fn = _callable(run, job, rec, ops, stream)
    if e.fn is None:
        run.prog.update(advance=1 + run.repeats)
        return None
    try:
        if run.verify and not _verify(run, e, ops, tag):
            run.prog.update(advance=1 + run.repeats)
            return None
        _estimate_and_warm_up(run, e)
    except Exception as exc:
        raise RuntimeError(f"{job.slug} at {tag}: {exc}") from exc
    rec["repeats"] = e.reps
    run.prog.update(advance=1, total_delta=e.reps - run.repeats)
    return e


# ---- one group: operands, entries, interleaved timing ------------------------------------------
def _time_rounds(run: _Run, entries: list[_Entry], tag: str) -> tuple[int, list[int]]:
    """Time, interleaved: each round runs cuBLAS then every rung once, each after an L2 flush and
    between two events; one host synchronization per round. (rounds, SM clocks seen after each)."""
    L, flush = run.L, run.flush
    rounds = max((e.reps for e in entries), default=0)
    sm_mhz: list[int] = []
    for rnd in range(rounds):
        run.prog.update(f"{tag}: timing, round {rnd + 1}/{rounds}")
        flush()
        flush()  # pre-roll: the GPU stays busy while the host enqueues the first timed launch
        live = [e for e in entries if rnd < e.reps]
        for e in live:
            flush()
            e.events[0].record()
            e.fn()
            e.events[1].record()
        L.synchronize()
        for e in live:
            e.rec["times_ms"].append(arrays.elapsed_ms(L, *e.events))
        c = envinfo.clocks(run.ordinal).get("sm_mhz")
        if c is not None:
            sm_mhz.append(c)
        run.prog.update(advance=len(live))
    return rounds, sm_mhz


def _time_group(run: _Run, g: Group, records: list[dict]) -> dict:
    """Fresh operands for the group, every entry prepared one after the other, then the timing
    rounds; the records go to ``records``, the group's facts are returned. The operands are freed
    on return, before the next group allocates its own."""
    M, N, K = g.shape
    tag = fmt_shape(g.shape)
    seed = int.from_bytes(os.urandom(4), "little")
    run.prog.update(f"{tag}: random operands")
    ops = arrays.make_operands(run.L, M, N, K, run.dtype, seed=seed, beta_nonzero=False)
    stream = launch.current_stream(run.L.name, run.ordinal)
    entries: list[_Entry] = []
    for job in g.jobs:
        rec = blank_record(job, run.dtype)
        records.append(rec)
        e = _prepare(run, job, rec, ops, stream, tag)
        if e is not None:
            entries.append(e)
    rounds, sm_mhz = _time_rounds(run, entries, tag)
    return {"shape": list(g.shape), "seed": seed, "rounds": rounds, "kernels": [j.slug for j in g.jobs],
            "sm_mhz_min": min(sm_mhz) if sm_mhz else None, "sm_mhz_max": max(sm_mhz) if sm_mhz else None}


# ---- the run -----------------------------------------------------------------------------------
def _settings(run: _Run, *, flush_l2: bool, shape_list: list[Shape] | None, rung_list: list[Rung]) -> dict:
    """The JSON's ``settings``: the options, the constants of the method and the peak used."""
    return {
        "dtype": run.dtype, "repeats": run.repeats, "warmup": run.warmup, "flush_l2": flush_l2, "lib": run.L.name,
        "verify": run.verify, "shapes": [list(s) for s in shape_list] if shape_list else None,
        "default_shape": list(DEFAULT_SHAPE) if shape_list is None else None,
        "reduced_shape": list(REDUCED_SHAPE) if shape_list is None else None,
        "rungs": [r.slug for r in rung_list], "config": run.config,
        "flush_bytes": run.flush.nbytes, "slow_run_ms": sched.SLOW_RUN_MS, "slow_budget_ms": sched.SLOW_BUDGET_MS,
        "min_repeats": sched.MIN_REPEATS,
        "timing": "CUDA events on the current stream, median of repeats, cuBLAS and rungs interleaved per round",
        "peak_tflops": run.peak, "peak_kind": peak_kind(run.dtype),
        "precision": run.precision.settings,
    }


def run_bench(rungs=None, shapes=None, dtype: str = "fp32", repeats: int = DEFAULT_REPEATS,
              warmup: int = DEFAULT_WARMUP, flush_l2: bool = True, verify: bool = True, lib: str | None = None,
              progress: bool = True, config=None) -> dict:
    """Time ``rungs`` (slugs or numbers; default all that support ``dtype``) and cuBLAS at ``shapes``
    (None: the default shape and rule of ``gemmlab.bench.schedule``; a "4096,127x4097x1023" string
    or (M, N, K) tuples) and return the result dict described in ``gemmlab.bench.results``.

    ``config`` (a dict of tile parameters or a preset name) needs exactly one rung. Raises
    ``driver.NoGPUError`` without a GPU, ValueError for invalid arguments (checked first, without
    touching the GPU)."""
    rung_list, shape_list = _check_arguments(rungs, shapes, dtype, repeats, warmup, lib, config)
    groups = schedule(rung_list, shape_list)
    if not driver.gpu_available():
        raise driver.NoGPUError(_no_gpu_reason())

    run = _start(dtype=dtype, repeats=repeats, warmup=warmup, verify=verify, config=config, lib=lib,
                 flush_l2=flush_l2, progress=progress, n_entries=sum(len(g.jobs) for g in groups))
    records: list[dict] = []
    group_info: list[dict] = []
    with run.prog, arrays.TrueFP32(run.L) as precision:
        run.precision = precision
        for g in groups:
            group_info.append(_time_group(run, g, records))

    summarize(records, run.peak)
    env = run.env
    env["clocks_before"] = run.clocks_before
    env["clocks_after"] = envinfo.clocks(run.ordinal)
    settings = _settings(run, flush_l2=flush_l2, shape_list=shape_list, rung_list=rung_list)
    return {"gemmlab_version": __version__, "timestamp": run.started.isoformat(timespec="seconds"),
            "duration_s": round(time.perf_counter() - run.t0, 3), "env": env, "settings": settings,
            "groups": group_info, "results": records}
