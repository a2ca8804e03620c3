"""``tune``: one tuning run -- the space from the registry, the study from the database, the
strategy, and one worker per device (in this process for one device, else one process each).

Before the workers start: the stale trials of crashed workers are failed and every configuration
whose evaluation crashed or was interrupted is queued again (``search.retry_failed``), so a run
interrupted by Ctrl-C or a crash resumes where it stopped; nothing already recorded is measured
again. Workers on several devices share the study: the database hands each candidate to one.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from ..core import dispatch
from ..core.families.hopper import grouped_config, grouped_fp8_config
from ..core.groups import Groups
from ..core.precision import label as precision_label
from ..core.progress import Progress
from ..core.registry import get
from ..core.shapes import fmt_shape
from .evaluate import EvaluatorFactory
from .search import Job, Stats, enqueue_starts, retry_failed, search
from .space import Space
from .store import (GRACE_S, HEARTBEAT_S, MEMORY, fail_stale, open_storage, open_study, optuna, recorded_space,
                    study_document, study_key, study_name)
from .strategies import resolve, sampler


@dataclass(frozen=True)
class TuneSpec:
    rung: str
    shape: tuple[int, ...]              # M, N, K; the grouped rung's G, T, N, K (tune/grouped.py)
    dtype: str | None = None            # None: the rung's first dtype
    layout: str = "rr"                  # A and B as the kernel sees them (C row-major)
    strategy: str = "auto"
    budget: int | None = None
    seconds: float | None = None
    batch: int | None = None            # None: the CPU count per device, at most 8
    seed: int | None = None
    storage: str | None = None          # None: SQLite in the cache folder
    devices: tuple[int, ...] = (0,)
    heartbeat: tuple[int, int] = (HEARTBEAT_S, GRACE_S)
    target: float | None = None         # stop once a candidate reaches this many TFLOP/s
    precision: str | None = None        # None: the rung's own default for the dtype
    warm_start: bool = True             # measure ``starting_points`` first (off: the strategy replays)
    starts: tuple = ()                  # the caller's own configurations (presets, KEY=VALUE text or dicts),
                                        # measured first, before the built-in starting points

    @property
    def key_dtype(self) -> str:
        """The study key's dtype: the dtype, with the precision when it is not the dtype's own
        ("fp32:3xtf32"): results of different precisions never share a study."""
        return precision_label(self.dtype, self.precision)

    def checked(self) -> "TuneSpec":
        """The spec with its defaults filled; ValueError naming what is wrong."""
        rung = get(self.rung)
        dtype = self.dtype or rung.dtypes[0]
        rung.require(dtype, precision=self.precision)
        dims, what = (4, "G, T, N, K (experts, tokens, N, K)") if rung.grouped else (3, "M, N, K")
        if len(self.shape) != dims or any(not isinstance(x, int) or x < 1 for x in self.shape):
            raise ValueError(f"shape must be {dims} positive integers {what} for rung {rung.slug!r}, got {self.shape!r}")
        if rung.grouped:
            Groups(self.shape[0], 8)   # ValueError beyond the groups the kernel's table takes
        # the grouped rungs: the tokens row-major; FP8 operands K-major only (wgmma reads no other FP8
        # layout: the calls copy others to it first, which a tune would time with the kernel)
        layouts = ("rc",) if dtype == "fp8" else ("rr", "rc") if rung.grouped else ("rr", "rc", "cr", "cc")
        if self.layout not in layouts:
            raise ValueError(f"layout must be one of {', '.join(layouts)} (A then B; r row-major) for rung "
                             f"{rung.slug!r}, got {self.layout!r}")
        for name in ("budget", "batch"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"the time limit must be positive, got {self.seconds!r}")
        if not self.devices or len(set(self.devices)) != len(self.devices):
            raise ValueError(f"devices must be distinct GPU ordinals, got {self.devices!r}")
        if self.storage == MEMORY and len(self.devices) > 1:
            raise ValueError("an in-memory storage lives in one process: several devices need a database URL")
        batch = self.batch or max(1, min(8, (os.cpu_count() or 1) // len(self.devices)))
        precision = rung.precision_for(dtype, self.precision)
        starts = []
        for c in self.starts:   # each one whole and legal, else the error names it (rung.config's reasons)
            try:
                starts.append(rung.config(c, precision))
            except ValueError as exc:
                raise ValueError(f"starting configuration {c!r}: {exc}") from None
        return replace(self, rung=rung.slug, dtype=dtype, batch=batch, precision=precision, starts=tuple(starts))


def fixed_params(spec: TuneSpec) -> dict | None:
    """Parameters a run holds at one value: the grouped rung's table capacity, the least power of two
    that holds G groups (the plan sets it so; the space's shared-memory check must count it), and
    its groups of rows (GROUP_K=0: the layer's forward)."""
    if not get(spec.rung).grouped:
        return None
    return {"GROUP_CAP": (Groups(spec.shape[0], 8).cap,), "GROUP_K": (0,)}


def _machine(spec: TuneSpec, factory: EvaluatorFactory) -> dict:
    """The machine part of the key, the same for every device (else ValueError: a study holds one GPU)."""
    ids = {d: factory.identity(d) for d in spec.devices}
    first = ids[spec.devices[0]]
    for d, m in ids.items():
        if m != first:
            raise ValueError(f"GPU {spec.devices[0]} and GPU {d} differ ({first} vs {m}): a study holds one kind of "
                             "GPU; tune them in separate runs")
    return first


def starting_points(space: Space, spec: TuneSpec, machine: dict) -> list[dict]:
    """What a run measures before its strategy proposes anything: the caller's ``spec.starts``
    (``--start``; ValueError for one the constraints refuse), the rung's defaults and presets,
    the dispatch rule's configuration for the shape (given the machine's SM count), and the nearest
    entries of this rung in the tuned and the shipped tables (core/dispatch.py), once each, as far
    as the constraints accept them. So the best of a run is never worse than what ``kernel="auto"``
    ran before it, however small the budget. A point may lie outside the space's grid (the shipped
    SPLITK=64 at 256x256x65536): ``tune`` widens the space by them (``Space.widened``)."""
    rung = space.rung
    mine = [space.point(c) for c in spec.starts]
    for cfg in mine:   # the caller's own: refused by name, not dropped in silence
        reasons = space.check(cfg)
        if reasons:
            raise ValueError(f"starting configuration {space.key(cfg)} is outside what the rung accepts on "
                             f"{machine.get('arch')}: {'; '.join(reasons)}")
    cands = mine + [space.point({})] + [space.point(p) for p in rung.presets_for(space.precision).values()]
    if machine.get("sm_count") and rung.grouped:   # the groups of rows' rule (core/families/hopper.py)
        G, T, N, K = spec.shape
        rule = (grouped_fp8_config(T, N, K, G, int(machine["sm_count"]), space.precision) if spec.dtype == "fp8"
                else grouped_config(T, N, K, G, int(machine["sm_count"])))
        cands.append(space.point(rule[0]))
    elif machine.get("sm_count"):
        M, N, K = spec.shape
        cands.append(space.point(dispatch.rule_config(rung, M, N, K, int(machine["sm_count"]), space.precision)[0]))
    arch = machine.get("arch")
    tables = [dispatch.tuned_path()] + ([dispatch.defaults_path(arch)] if arch else [])
    for path in tables if not rung.grouped else ():
        hit = dispatch.nearest(dispatch.read_table(path), spec.dtype, spec.layout, spec.shape, {rung.slug: rung},
                               machine.get("gpu_name"))
        if hit is not None:
            cands.append(space.point(hit[0].get("config") or {}))
    fixed = {k: v[0] for k, v in (fixed_params(spec) or {}).items()}   # the plan's own, whatever a point says
    out, seen = [], set()
    for cfg in ({**c, **fixed} for c in cands):
        key = space.key(cfg)
        if key not in seen and not space.check(cfg):
            seen.add(key)
            out.append(cfg)
    return out


def _public_url(url: str | None) -> str:
    from .store import default_url

    url = url or default_url()
    if url == MEMORY:
        return url
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given to the error that follows
        return url


def _worker_main(factory, device: int, spec: TuneSpec, key: dict, job: Job, seed: int | None,
                 params: dict) -> None:
    """A worker process: its own storage connection, sampler and evaluator on one device, on the
    space the parent resolved (``params``: its value lists, widened and aligned)."""
    try:
        storage = open_storage(spec.storage, *spec.heartbeat)
        space = Space.of(key["rung"], key["arch"], fixed_params(spec), precision=spec.precision).aligned(params)
        study = open_study(storage, key, sampler(job.strategy, space.params, seed))
        ev = factory.create(device)
        try:
            search(study, storage, space, ev, job)
        finally:
            ev.close()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - one line for the parent's summary, not a traceback
        print(f"gemmlab tune: worker on device {device}: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)


def _run_workers(factory, spec: TuneSpec, key: dict, job: Job, study, space: Space, bar: Progress) -> list[str]:
    """One process per device; this process follows the study for the progress bar. Returns
    the workers' failures (one line each)."""
    seen = [0]
    ctx = multiprocessing.get_context("spawn")   # CUDA in a worker must not inherit a parent's state
    procs = []
    for i, d in enumerate(spec.devices):
        wjob = replace(job, stripe=(i, len(spec.devices)))
        seed = None if spec.seed is None else spec.seed + i   # differing proposals per worker
        p = ctx.Process(target=_worker_main, args=(factory, d, spec, key, wjob, seed, space.params), name=f"gemmlab-tune-{d}")
        p.start()
        procs.append((d, p))
    try:
        while any(p.is_alive() for _, p in procs):
            _poll_progress(study, job.run, bar, seen)
            time.sleep(1.0)
    finally:
        for _, p in procs:
            p.join()
    _poll_progress(study, job.run, bar, seen)
    return [f"worker on device {d} exited with code {p.exitcode}" for d, p in procs if p.exitcode not in (0, None)]


def _poll_progress(study, run: str, bar: Progress, seen: list[int]) -> None:
    """Move the bar by the records this run added since the last look (``seen[0]``)."""
    doc = study_document(study)
    done = sum(1 for r in doc["records"] if r["run"] == run)
    best = next((r for r in doc["records"] if r["status"] == "ok"), None)
    bar.update(_bar_text(best), advance=max(0, done - seen[0]))
    seen[0] = done


def _bar_text(best: dict | None) -> str:
    if not best or not best.get("tflops"):
        return "no candidate measured yet"
    cfg = ",".join(f"{k}={v}" for k, v in best["config"].items())
    return f"best {best['tflops']:.1f} TFLOP/s ({cfg})"


def _on_result(bar: Progress):
    def on_result(rec: dict, stats: Stats) -> None:
        bar.update(_bar_text(stats.best), advance=1)
    return on_result


def tune(spec: TuneSpec, factory: EvaluatorFactory, *, progress: bool = False) -> dict:
    """Run the tuner (see the module docstring) and return its summary: the study, the strategy,
    what this run evaluated, why it stopped, the best configuration and the study's records."""
    opt = optuna()
    spec = spec.checked()
    machine = _machine(spec, factory)
    key = study_key(machine, spec.rung, spec.key_dtype, spec.layout, spec.shape)
    storage = open_storage(spec.storage, *spec.heartbeat)
    base = Space.of(spec.rung, machine.get("arch"), fixed_params(spec), precision=spec.precision)
    starts = starting_points(base, spec, machine)
    space = base.widened(starts).aligned(recorded_space(storage, key))
    cands = space.candidates()
    if not cands:
        raise ValueError(f"no configuration of {space.describe()} passes the constraints")
    strategy = resolve(spec.strategy, len(cands), spec.budget)
    study = open_study(storage, key, sampler(strategy, space.params, spec.seed), space.params)
    fail_stale(study)
    retried = retry_failed(study, space)
    if spec.warm_start and strategy != "exhaustive":
        enqueue_starts(study, space, starts)
    run = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    job = Job(strategy, run, spec.budget, spec.seconds, spec.batch, target=spec.target)
    t0 = time.perf_counter()
    failures: list[str] = []
    stopped = ""
    with Progress(spec.budget or len(cands), enabled=progress, label=f"tune {spec.rung}") as bar:
        if len(spec.devices) == 1:
            ev = factory.create(spec.devices[0])
            try:
                stopped = search(study, storage, space, ev, job, _on_result(bar)).stopped
            finally:
                ev.close()
        else:
            failures = _run_workers(factory, spec, key, job, study, space, bar)
    doc = study_document(opt.load_study(study_name=study_name(key), storage=storage))
    mine = [r for r in doc["records"] if r["run"] == run]
    return {"study": doc["study"], "key": key, "storage": _public_url(spec.storage), "run": run,
            "strategy": strategy, "requested_strategy": spec.strategy, "shape": fmt_shape(spec.shape),
            "space": {k: list(v) for k, v in space.params.items()}, "space_size": space.size,
            "candidates": len(cands), "retried": retried, "evaluated": len(mine),
            "counts": {s: sum(r["status"] == s for r in mine) for s in sorted({r["status"] for r in mine})},
            "stopped": stopped or ("; ".join(failures) if failures else "every worker finished"),
            "worker_failures": failures, "seconds": round(time.perf_counter() - t0, 3),
            "best": next((r for r in doc["records"] if r["status"] == "ok"), None), "document": doc}
