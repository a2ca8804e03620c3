"""``gemmlab bench``: time the rungs of the ladder beside cuBLAS, on the same inputs, in the same run.

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
   fp32, dense tensor-core peak for fp16/bf16).

cuBLAS is ``Lib.matmul(a, b, out=c)`` on the same operands, through PyTorch (the default when it
has CUDA) or CuPy (``--lib``). For fp32 it is kept on true FP32 SGEMM: PyTorch's TF32 switch is
turned off for the run (``fp32_precision = "ieee"``, or ``allow_tf32 = False`` on older
versions) and CuPy's float32 compute type is set to DEFAULT (CUBLAS_COMPUTE_32F), which
overrides ``CUPY_TF32=1``; both are restored afterwards and recorded in the JSON.

Keeping the default run bounded (a few minutes on an H100, most of it compiling)
---------------------------------------------------------------------------------
* Without ``--shape`` the shape is 4096^3, except for the naive rungs -- those without a K tile
  (no ``BK`` parameter: every thread reads A and B straight from global memory, rungs 1-3 today),
  which reach 0.5-7 TFLOP/s -- timed at 2048^3, with a note in the table and the JSON; cuBLAS is
  timed at 2048^3 too, so their ratio compares like with like. A shape given with ``--shape`` is
  used for every rung as given.
* Any entry whose estimate run takes more than ``SLOW_RUN_MS`` (200 ms) skips the remaining
  warm-up and is timed ``min(repeats, max(3, SLOW_BUDGET_MS // estimate))`` times (a ~2 s
  budget, never fewer than 3 repeats); the table's note says so.

The JSON (``--json FILE``, also the return value of ``run_bench``) has the keys
``gemmlab_version``, ``timestamp`` (ISO UTC), ``env`` (``envinfo.collect()`` plus
``clocks_before`` / ``clocks_after``), ``settings`` and ``results``: one entry per (kernel, shape)
with kernel, number (0 for cuBLAS), dtype, M, N, K, ms (median), ms_min, ms_max, times_ms,
tflops, vs_cublas, pct_peak, verified, rel_error, config, note -- and more (status,
requested_shape, repeats, ...). ``report`` reads it.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ..analysis import environment as envinfo
from ..core import driver
from ..core.arch import peak_for_dtype, peak_kind
from ..core.dtypes import get as get_dtype
from ..core.registry import Rung, for_dtype, get
from ..core.shapes import BENCH_SHAPE as DEFAULT_SHAPE
from ..core.shapes import REDUCED_SHAPE, Shape, fmt_shape, parse_shapes
from ..measure.arrays import LIBS

DEFAULT_REPEATS = 50
DEFAULT_WARMUP = 5
SLOW_RUN_MS = 200.0
SLOW_BUDGET_MS = 2000.0
MIN_REPEATS = 3
FLUSH_FACTOR = 2            # the flush buffer is this many times the L2 size
STATUSES = ("ok", "failed", "error", "skipped")


# ---- what to run -------------------------------------------------------------------------------
def is_naive(rung: Rung) -> bool:
    """A naive rung has no K tile (no BK): it reads every operand from global memory per FMA."""
    return "BK" not in rung.params


def select_rungs(names: Iterable[str | Rung] | None, dtype: str) -> list[Rung]:
    """Rungs by slug or number, in ladder order; default: every rung that supports ``dtype``."""
    get_dtype(dtype)
    if not names:
        rungs = list(for_dtype(dtype))
        if not rungs:
            raise ValueError(f"no rung supports dtype {dtype}")
        return rungs
    rungs = []
    for n in names:
        r = get(n)
        if not r.supports(dtype):
            raise ValueError(f"rung {r.slug!r} does not support dtype {dtype}; it supports "
                             f"{', '.join(r.dtypes)} (use --dtype {r.dtypes[0]})")
        if r not in rungs:
            rungs.append(r)
    return sorted(rungs, key=lambda r: r.number)


def _as_shapes(shapes) -> list[Shape] | None:
    if shapes is None:
        return None
    if isinstance(shapes, str):
        out = parse_shapes(shapes)
    else:
        out = [tuple(int(d) for d in s) for s in shapes]
    for s in out:
        if len(s) != 3 or min(s) < 1:
            raise ValueError(f"shape {s!r} must be three positive sizes (M, N, K)")
    dedup: list[Shape] = []
    for s in out:
        if s not in dedup:
            dedup.append(s)  # type: ignore[arg-type]
    if not dedup:
        raise ValueError("no shape given")
    return dedup


@dataclass(frozen=True)
class Job:
    """One kernel timed at one shape; ``rung`` None is cuBLAS."""

    rung: Rung | None
    requested: Shape
    shape: Shape
    note: str = ""

    @property
    def slug(self) -> str:
        return self.rung.slug if self.rung else "cublas"


@dataclass
class Group:
    """Everything timed on one set of operands: cuBLAS first, then the rungs in ladder order."""

    shape: Shape
    jobs: list[Job] = field(default_factory=list)


def schedule(rungs: Sequence[Rung], shapes: Sequence[Shape] | None = None) -> list[Group]:
    """The groups to time. ``shapes`` None means the default shape, where naive rungs move to
    ``REDUCED_SHAPE`` (see the module docstring); given shapes apply to every rung."""
    groups: dict[Shape, Group] = {}

    def add(requested: Shape, shape: Shape, rung: Rung | None, note: str):
        g = groups.get(shape)
        if g is None:
            g = groups[shape] = Group(shape)
        if not any(j.rung is rung for j in g.jobs):
            g.jobs.append(Job(rung, requested, shape, note))

    if shapes is None:
        reduced_note = f"naive rung: timed at {fmt_shape(REDUCED_SHAPE)} to keep the run bounded"
        full = [r for r in rungs if not is_naive(r)]
        naive = [r for r in rungs if is_naive(r)]
        if full:
            add(DEFAULT_SHAPE, DEFAULT_SHAPE, None, "")
            for r in full:
                add(DEFAULT_SHAPE, DEFAULT_SHAPE, r, "")
        if naive:
            add(DEFAULT_SHAPE, REDUCED_SHAPE, None,
                f"the reference of the naive rungs at {fmt_shape(REDUCED_SHAPE)}" if full else "")
            for r in naive:
                add(DEFAULT_SHAPE, REDUCED_SHAPE, r, reduced_note)
    else:
        for s in shapes:
            add(s, s, None, "")
            for r in rungs:
                add(s, s, r, "")
    for g in groups.values():
        g.jobs.sort(key=lambda j: j.rung.number if j.rung else 0)
    return list(groups.values())


def slow_repeats(estimate_ms: float, repeats: int) -> int:
    """Repeats for an entry whose one run takes ``estimate_ms`` (the dynamic bound of the docstring)."""
    if estimate_ms <= SLOW_RUN_MS:
        return repeats
    return min(repeats, max(MIN_REPEATS, int(SLOW_BUDGET_MS // estimate_ms)))


# ---- statistics and records --------------------------------------------------------------------
def _blank(job: Job, dtype: str) -> dict:
    M, N, K = job.shape
    return {
        "kernel": job.slug, "number": job.rung.number if job.rung else 0,
        "title": job.rung.title if job.rung else "cuBLAS", "dtype": dtype, "M": M, "N": N, "K": K,
        "requested_shape": list(job.requested), "ms": None, "ms_min": None, "ms_max": None, "times_ms": [],
        "tflops": None, "vs_cublas": None, "pct_peak": None, "verified": None, "rel_error": None,
        "max_scaled_error": None, "config": {}, "note": job.note, "status": "ok", "repeats": 0, "warmup": 0,
        "first_run_ms": None,
    }


def _add_note(rec: dict, text: str) -> None:
    rec["note"] = f"{rec['note']}; {text}" if rec["note"] else text


def summarize(records: list[dict], peak_tflops: float | None) -> None:
    """Fill ms / ms_min / ms_max / tflops / vs_cublas / pct_peak from times_ms, in place.

    vs_cublas compares with the cuBLAS record of the same M, N, K in ``records``."""
    for rec in records:
        t = rec["times_ms"]
        if rec["status"] != "ok" or not t:
            continue
        rec["ms"] = statistics.median(t)
        rec["ms_min"], rec["ms_max"] = min(t), max(t)
        rec["tflops"] = 2.0 * rec["M"] * rec["N"] * rec["K"] / (rec["ms"] * 1e-3) / 1e12
        rec["pct_peak"] = 100.0 * rec["tflops"] / peak_tflops if peak_tflops else None
    ref = {(r["M"], r["N"], r["K"]): r for r in records if r["kernel"] == "cublas" and r.get("tflops")}
    for rec in records:
        c = ref.get((rec["M"], rec["N"], rec["K"]))
        if rec.get("tflops") and c:
            rec["vs_cublas"] = rec["tflops"] / c["tflops"]


# ---- the GPU side ------------------------------------------------------------------------------
def _no_gpu_message() -> str:
    reason = "no usable NVIDIA GPU"
    try:
        driver.init()
    except Exception as exc:  # NoGPUError, ImportError of cuda-python ...
        reason = str(exc)
    return (f"benchmarking needs an NVIDIA GPU, and this machine has none usable ({reason}).\n"
            "Without a GPU you can still run `gemmlab list` (the ladder) and "
            "`gemmlab inspect RUNG --arch sm_90a` (compile a rung and read its SASS).")


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
class _Entry:
    job: Job
    rec: dict
    fn: Callable[[], None] | None = None
    reps: int = 0
    events: tuple = ()


class _Progress:
    def __init__(self, enabled: bool, total: int):
        self.p = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                              console=Console(stderr=True), transient=True)
            self.p.start()
            self.task = self.p.add_task("bench", total=total)

    def update(self, description: str | None = None, advance: int = 0, total_delta: int = 0) -> None:
        if self.p is None:
            return
        kw = {}
        if description is not None:
            kw["description"] = description
        if total_delta:
            kw["total"] = self.p.tasks[0].total + total_delta
        self.p.update(self.task, advance=advance, **kw)

    def stop(self) -> None:
        if self.p is not None:
            self.p.stop()


def _verify_summary(vr) -> str:
    return (f"rel. error {vr.rel_error:.2e} (tol {vr.tol:.1e}), max scaled {vr.max_scaled:.2e} "
            f"(tol {vr.elem_tol:.1e}), {vr.nonfinite} non-finite")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def run_bench(rungs=None, shapes=None, dtype: str = "fp32", repeats: int = DEFAULT_REPEATS,
              warmup: int = DEFAULT_WARMUP, flush_l2: bool = True, verify: bool = True, lib: str | None = None,
              progress: bool = True, config=None) -> dict:
    """Time ``rungs`` (slugs or numbers; default all that support ``dtype``) and cuBLAS at ``shapes``
    (None: the default shape and rule of the module docstring; a "4096,127x4097x1023" string or
    (M, N, K) tuples) and return the result dict described in the module docstring.

    ``config`` (a dict of tile parameters or a preset name) needs exactly one rung. Raises
    ``driver.NoGPUError`` without a GPU, ValueError for invalid arguments (checked first, without
    touching the GPU)."""
    from .. import __version__

    # -- arguments, checked before any GPU work
    rung_list = select_rungs(rungs, dtype)
    shape_list = _as_shapes(shapes)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    if config is not None:
        if len(rung_list) != 1:
            raise ValueError("--config applies to one rung: name exactly one rung "
                             f"(got {len(rung_list)}: {', '.join(r.slug for r in rung_list)})")
        rung_list[0].config(config)  # raises ValueError naming the problem
    if lib is not None and lib not in LIBS:
        raise ValueError(f"unknown library {lib!r}; use one of {', '.join(LIBS)}")
    if lib == "cupy" and dtype == "bf16":
        raise ValueError("CuPy has no bfloat16 arrays: bf16 needs --lib torch")
    groups = schedule(rung_list, shape_list)

    # -- the GPU: cuda-python first (a base install gets the extra to install, not "no GPU")
    driver.cuda()
    if not driver.gpu_available():
        raise driver.NoGPUError(_no_gpu_message())
    from ..core import api
    from ..core.launch import current_stream
    from ..measure.arrays import Lib, TrueFP32, available_libs, choose_lib, elapsed_ms, event_pair, make_operands
    from ..measure.verify import check as verify_check

    L = Lib(choose_lib(lib, dtype, available_libs()))
    ordinal = int(L.xp.cuda.current_device()) if L.name == "torch" else int(L.xp.cuda.runtime.getDevice())
    info = driver.device_info(ordinal)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    clocks_before = envinfo.clocks(ordinal)
    env = envinfo.collect(ordinal)
    peak = peak_for_dtype(env["peaks"], dtype)

    records: list[dict] = []
    group_info: list[dict] = []
    n_entries = sum(len(g.jobs) for g in groups)
    prog = _Progress(progress, n_entries * (1 + repeats))
    flush = _Flusher(L, info.l2_bytes, flush_l2)
    try:
        with TrueFP32(L) as precision:
            for g in groups:
                M, N, K = g.shape
                tag = fmt_shape(g.shape)
                seed = int.from_bytes(os.urandom(4), "little")
                prog.update(f"{tag}: random operands")
                ops = make_operands(L, M, N, K, dtype, seed=seed, beta_nonzero=False)
                stream = current_stream(L.name, ordinal)
                entries: list[_Entry] = []

                # -- prepare: plan, verify, estimate, warm up (one entry after the other)
                for job in g.jobs:
                    rec = _blank(job, dtype)
                    records.append(rec)
                    e = _Entry(job, rec)
                    prog.update(f"{tag}: {'compiling ' if job.rung else ''}{job.slug}")
                    if job.rung is None:
                        rec["config"] = {"lib": L.name, "call": f"{L.name}.matmul(a, b, out=c)", **precision.settings}
                        e.fn = lambda: L.matmul(ops.a, ops.b, out=ops.c)
                    else:
                        r = job.rung
                        try:
                            r.require(arch=info.arch)
                        except ValueError as exc:
                            rec["status"] = "skipped"
                            _add_note(rec, str(exc))
                        else:
                            try:
                                p = api.plan(ops.a, ops.b, ops.c, kernel=r.slug, config=config)
                            except Exception as exc:  # CompileError, invalid config, missing source ...
                                rec["status"] = "error"
                                _add_note(rec, f"{exc.__class__.__name__}: {_first_line(str(exc))}")
                            else:
                                rec["config"] = dict(p.variant.cfg)
                                rec["variant"] = p.variant.describe()
                                e.fn = (lambda p=p: p.run(stream))
                    if e.fn is None:
                        prog.update(advance=1 + repeats)
                        continue
                    try:
                        if verify:
                            prog.update(f"{tag}: verifying {job.slug}")
                            L.fill_nan(ops.c)
                            e.fn()
                            L.synchronize()
                            vr = verify_check(ops, 1.0, 0.0, f"{job.slug} {dtype} {tag}")
                            rec["verified"], rec["rel_error"], rec["max_scaled_error"] = vr.ok, vr.rel_error, vr.max_scaled
                            if not vr.ok:
                                if job.rung is not None:
                                    rec["status"] = "failed"
                                    rec["verify_message"] = vr.message()
                                    _add_note(rec, "FAILED verification: " + _verify_summary(vr))
                                    prog.update(advance=1 + repeats)
                                    continue
                                rec["verify_message"] = vr.message()
                                _add_note(rec, f"cuBLAS misses the {dtype} tolerance (TF32 on?): " + _verify_summary(vr))
                        # the estimate run, which is also the first warm-up run
                        e.events = event_pair(L)
                        flush()
                        e.events[0].record()
                        e.fn()
                        e.events[1].record()
                        e.events[1].synchronize()
                        est = elapsed_ms(L, *e.events)
                        rec["first_run_ms"] = est
                        e.reps = slow_repeats(est, repeats)
                        if e.reps < repeats or est > SLOW_RUN_MS:
                            rec["warmup"] = 1
                            _add_note(rec, f"{e.reps} repeats: one run takes {est:.0f} ms (> {SLOW_RUN_MS:.0f} ms)")
                        else:
                            rec["warmup"] = max(warmup, 1)
                            for _ in range(warmup - 1):
                                flush()
                                e.fn()
                        L.synchronize()
                    except Exception as exc:
                        raise RuntimeError(f"{job.slug} at {tag}: {exc}") from exc
                    rec["repeats"] = e.reps
                    prog.update(advance=1, total_delta=e.reps - repeats)
                    entries.append(e)

                # -- time, interleaved: each round runs cuBLAS then every rung once
                rounds = max((e.reps for e in entries), default=0)
                sm_mhz: list[int] = []
                for rnd in range(rounds):
                    prog.update(f"{tag}: timing, round {rnd + 1}/{rounds}")
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
                        e.rec["times_ms"].append(elapsed_ms(L, *e.events))
                    c = envinfo.clocks(ordinal).get("sm_mhz")
                    if c is not None:
                        sm_mhz.append(c)
                    prog.update(advance=len(live))
                group_info.append({"shape": list(g.shape), "seed": seed, "rounds": rounds,
                                   "kernels": [j.slug for j in g.jobs],
                                   "sm_mhz_min": min(sm_mhz) if sm_mhz else None,
                                   "sm_mhz_max": max(sm_mhz) if sm_mhz else None})
                del ops, entries
    finally:
        prog.stop()

    summarize(records, peak)
    env["clocks_before"] = clocks_before
    env["clocks_after"] = envinfo.clocks(ordinal)
    settings = {
        "dtype": dtype, "repeats": repeats, "warmup": warmup, "flush_l2": flush_l2, "lib": L.name,
        "verify": verify, "shapes": [list(s) for s in shape_list] if shape_list else None,
        "default_shape": list(DEFAULT_SHAPE) if shape_list is None else None,
        "reduced_shape": list(REDUCED_SHAPE) if shape_list is None else None,
        "rungs": [r.slug for r in rung_list], "config": config,
        "flush_bytes": flush.nbytes, "slow_run_ms": SLOW_RUN_MS, "slow_budget_ms": SLOW_BUDGET_MS,
        "min_repeats": MIN_REPEATS, "timing": "CUDA events on the current stream, median of repeats, "
                                              "cuBLAS and rungs interleaved per round",
        "peak_tflops": peak, "peak_kind": peak_kind(dtype),
        "precision": precision.settings,
    }
    return {"gemmlab_version": __version__, "timestamp": started.isoformat(timespec="seconds"),
            "duration_s": round(time.perf_counter() - t0, 3), "env": env, "settings": settings,
            "groups": group_info, "results": records}


# ---- output ------------------------------------------------------------------------------------
def _clean(x):
    """JSON-safe copy: non-finite floats become None (strict JSON for every reader)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def write_json(result: dict, path: str | os.PathLike) -> Path:
    """Write the result dict as strict JSON (atomically: a temporary file then a rename)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(result), indent=2, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


def _fmt_tflops(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _ordered(result: dict) -> list[dict]:
    """Rows in table order: per requested shape, cuBLAS first (requested shape first), then the ladder."""
    recs = result.get("results", [])

    def req(r):
        return tuple(r.get("requested_shape") or (r["M"], r["N"], r["K"]))

    order: list[tuple] = []
    for r in recs:
        if req(r) not in order:
            order.append(req(r))

    def key(r):
        shape = (r["M"], r["N"], r["K"])
        return (order.index(req(r)), 0 if r["kernel"] == "cublas" else 1, r.get("number", 0), shape != req(r))

    return sorted(recs, key=key)


def build_table(result: dict):
    """The results as a rich Table (pure: reads only the result dict)."""
    from rich.table import Table

    settings = result.get("settings", {})
    env = result.get("env", {})
    dtype = settings.get("dtype", "")
    title = f"gemmlab bench -- {env.get('gpu_name') or 'GPU'}, {dtype}"
    t = Table(title=title, caption=_caption(result), caption_justify="left")
    fixed = {"no_wrap": True}
    right = {"justify": "right", "no_wrap": True}
    for col, kw in (("#", right), ("rung", fixed), ("shape", fixed), ("ms", right), ("TFLOP/s", right),
                    ("vs cuBLAS", right), ("% peak", right), ("check", fixed), ("note", {"overflow": "fold", "min_width": 20})):
        t.add_column(col, **kw)
    prev_req = None
    for r in _ordered(result):
        req = tuple(r.get("requested_shape") or (r["M"], r["N"], r["K"]))
        if prev_req is not None and req != prev_req:
            t.add_section()
        prev_req = req
        status = r.get("status", "ok")
        if status == "failed" or r.get("verified") is False and r["kernel"] != "cublas":
            check, ms = "[red]FAILED[/red]", "[red]FAILED[/red]"
        elif status in ("error", "skipped"):
            check, ms = f"[yellow]{status}[/yellow]", "-"
        else:
            check = {True: "[green]ok[/green]", False: "[red]FAILED[/red]", None: "-"}[r.get("verified")]
            ms = f"{r['ms']:.3f}" if r.get("ms") is not None else "-"
        v = r.get("vs_cublas")
        vs = "-" if v is None else f"{v:.2f}x" if v >= 0.1 else f"{v:.3f}x"
        pct = f"{r['pct_peak']:.1f}%" if r.get("pct_peak") is not None else "-"
        name = "cuBLAS" if r["kernel"] == "cublas" else r["kernel"]
        num = "" if r["kernel"] == "cublas" else str(r.get("number", ""))
        t.add_row(num, name, fmt_shape((r["M"], r["N"], r["K"])), ms, _fmt_tflops(r.get("tflops")), vs, pct, check,
                  r.get("note") or "")
    return t


def _caption(result: dict) -> str:
    s = result.get("settings", {})
    env = result.get("env", {})
    peaks = env.get("peaks") or {}
    parts = []
    if s.get("peak_tflops"):
        if s.get("dtype") == "fp32":
            how = (f"{peaks.get('sm_count')} SMs x {peaks.get('fp32_fma_per_clk_sm')} FMA/clk x 2 x "
                   f"{peaks.get('clock_mhz'):.0f} MHz" if peaks.get("clock_mhz") else "")
        else:
            how = (f"{peaks.get('sm_count')} SMs x {peaks.get('tensor_flop_per_clk_sm')} flop/clk x "
                   f"{peaks.get('clock_mhz'):.0f} MHz" if peaks.get("clock_mhz") else "")
        parts.append(f"% peak: of {s['peak_tflops']:.1f} TFLOP/s ({s.get('peak_kind', '')}{': ' + how if how else ''})")
    parts.append(f"median of {s.get('repeats')} repeats after {s.get('warmup')} warm-up runs, "
                 f"L2 {'flushed' if s.get('flush_l2') else 'NOT flushed'} before each run, "
                 f"cuBLAS via {s.get('lib')} interleaved with the rungs")
    return "\n".join(parts)


def summary_lines(result: dict) -> list[str]:
    """Header lines: device, clocks before and after, versions."""
    env = result.get("env", {})
    lib = env.get("libraries") or {}
    cb, ca = env.get("clocks_before") or {}, env.get("clocks_after") or {}

    def clk(c):
        if c.get("sm_mhz") is None:
            return "n/a"
        extra = f", {c['temperature_c']} C" if c.get("temperature_c") is not None else ""
        extra += f", {c['power_w']:.0f} W" if c.get("power_w") is not None else ""
        return f"SM {c['sm_mhz']} MHz, mem {c.get('mem_mhz')} MHz{extra}"

    mhz = env.get("max_sm_clock_mhz")
    lines = [
        f"{env.get('gpu_name')} ({env.get('arch')}, {env.get('sm_count')} SMs, max SM clock "
        f"{f'{mhz:.0f}' if mhz is not None else 'n/a'} MHz, L2 {((env.get('l2_bytes') or 0) / 2**20):.0f} MiB)",
        f"driver {env.get('driver_version')}, CUDA {env.get('cuda_driver_version')}, NVRTC {env.get('nvrtc_version')}, "
        f"torch {lib.get('torch')}, cupy {lib.get('cupy')}, gemmlab {result.get('gemmlab_version')}"
        + (f" ({env['git_commit'][:10]}{'+dirty' if env.get('git_dirty') else ''})" if env.get("git_commit") else ""),
        f"clocks before: {clk(cb)}; after: {clk(ca)}",
    ]
    if cb.get("sm_mhz") is None and cb.get("error"):
        lines.append(f"(no NVML clocks: {cb['error']})")
    return lines


def render(result: dict, console=None) -> None:
    import sys

    from rich.console import Console

    # a log file gets a wide table; a terminal gets its own width
    con = console or (Console() if sys.stdout.isatty() else Console(width=200))
    for line in summary_lines(result):
        con.print(line, highlight=False, markup=False)
    con.print(build_table(result))


def exit_code(result: dict) -> int:
    """0 when every rung verified (or verification was off) and ran; 1 when one failed or errored."""
    return 1 if any(r.get("status") in ("failed", "error") for r in result.get("results", [])) else 0
