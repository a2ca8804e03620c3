"""Measuring the ladder on a GPU for the report: the benchmark of every rung at one shape beside
cuBLAS, a size sweep of a few rungs, ``inspect`` of every rung, Nsight Compute counters of every
rung and of cuBLAS at a smaller shape, and the device's ceilings. ``collect`` returns the results
document that ``gemmlab.report.render.build`` turns into the page (see ``gemmlab.report``)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..core.version import __version__
from ..analysis import environment
from ..analysis.inspect import inspect_rung
from ..measure.ncu_profile import profile_cublas, profile_rung
from ..bench.runner import run_bench
from ..core import driver
from ..core.deps import require_all
from ..core.dtypes import DTYPES
from ..core.registry import Rung, get, kernels, landmarks
from ..core.shapes import BENCH_SHAPE, CEILING_SHAPE, PROFILE_SHAPE, SWEEP_SIZES
from ..measure.ceilings import measure_bandwidth, measure_cublas
from ..core.progress import Progress
from .model import dig
from .tuning import collect_tuning


@dataclass
class CollectPlan:
    """What a collection measures on this device."""

    info: driver.DeviceInfo
    dtype: str                          # the report's dtype
    main: list[Rung]                    # the rungs that take it
    other: dict[str, list[Rung]]        # {a rung's first dtype: rungs that do not take the report's}
    sweepers: list[str]                 # slugs of the size sweep

    @property
    def dtypes(self) -> list[str]:
        """The report's dtype, then the dtypes of the other rungs (each with its cuBLAS)."""
        return [self.dtype] + list(self.other)

    def each(self) -> list[tuple[Rung, str]]:
        """(rung, the dtype it is measured in) for every rung, the report's dtype first."""
        return [(r, self.dtype) for r in self.main] + [(r, dt) for dt, rs in self.other.items() for r in rs]


def _known(slug: str) -> bool:
    try:
        get(slug)
        return True
    except ValueError:
        return False


def plan(dtype: str, rungs: Sequence[str] | None, sweep_rungs: Sequence[str] | None, other_dtypes: bool) -> CollectPlan:
    """The rungs this device runs (the whole ladder by default), split by dtype, and the sweep's
    rungs (the registry's landmarks by default) among those that take ``dtype``."""
    info = driver.device_info(0)
    arch_num = info.cc[0] * 10 + info.cc[1]
    chosen = [get(s) for s in rungs] if rungs else list(kernels())
    chosen = [r for r in chosen if r.runs_on(arch_num)]
    # the report measures exact precisions (a dtype's own, the benchmark's default); the TF32 rung
    # is benchmarked with `gemmlab bench --precision tf32|3xtf32`
    main = [r for r in chosen if dtype in r.precisions]
    other: dict[str, list[Rung]] = {}
    if other_dtypes:
        for r in chosen:
            if dtype not in r.dtypes and r.dtypes[0] in r.precisions:
                other.setdefault(r.dtypes[0], []).append(r)
    if sweep_rungs is None:
        sweep_rungs = [r.slug for r in landmarks()]
    sweepers = [get(s).slug for s in sweep_rungs if _known(s) and dtype in get(s).precisions
                and get(s).runs_on(arch_num)]
    return CollectPlan(info, dtype, main, other, sweepers)


class _Failures:
    """The errors of a collection by what failed ("profile smem": "NcuError: ..."); each is also
    passed to ``on_error``."""

    def __init__(self, on_error: Callable[[str, Exception], None] | None):
        self.errors: dict[str, str] = {}
        self.on_error = on_error

    def __call__(self, what: str, exc: Exception) -> str:
        msg = self.errors[what] = f"{type(exc).__name__}: {exc}"
        if self.on_error:
            self.on_error(what, exc)
        return msg


def _run_bench(slugs: Sequence[str], shapes: Sequence[tuple[int, int, int]], dtype: str, lib, timing) -> dict:
    return run_bench(rungs=list(slugs), shapes=[tuple(s) for s in shapes], dtype=dtype, lib=lib,
                     timing_settings=timing, progress=False)


def bench_part(p: CollectPlan, shape, sweep_sizes: Sequence[int], lib, timing, prog: Progress,
               fail: _Failures) -> tuple[dict, dict]:
    """(the benchmark at ``shape``, every dtype's rungs in one document; the size sweep)."""
    prog.step("benchmark: the ladder at " + "x".join(map(str, shape)))
    bench_doc = _run_bench([r.slug for r in p.main], [shape], p.dtype, lib, timing)
    for dt, rs in p.other.items():
        prog.step(f"benchmark: {dt} rungs")
        try:
            extra = _run_bench([r.slug for r in rs], [shape], dt, lib, timing)
            bench_doc.setdefault("results", []).extend(extra.get("results", []))
        except Exception as exc:  # noqa: BLE001
            fail(f"bench {dt}", exc)
    prog.step("benchmark: size sweep")
    try:
        sweep_doc = _run_bench(p.sweepers, [(n, n, n) for n in sweep_sizes], p.dtype, lib, timing) if p.sweepers else {}
    except Exception as exc:  # noqa: BLE001
        fail("sweep", exc)
        sweep_doc = {}
    return bench_doc, sweep_doc


def inspect_part(p: CollectPlan, prog: Progress, fail: _Failures) -> dict[str, dict]:
    """``inspect`` of every rung for this device's architecture; {"error": ...} where it fails."""
    insp: dict[str, dict] = {}
    for r, dt in p.each():
        prog.step(f"inspect {r.slug}")
        try:
            insp[r.slug] = inspect_rung(r.slug, dtype=dt, arch=p.info.arch)
        except Exception as exc:  # noqa: BLE001
            insp[r.slug] = {"error": fail(f"inspect {r.slug}", exc)}
    return insp


def profile_part(p: CollectPlan, profile_shape, lib, ncu: str | None, prog: Progress, fail: _Failures) -> dict[str, dict]:
    """Nsight Compute profiles of every rung and of cuBLAS in each dtype ("cublas", "cublas_fp16")."""
    prof: dict[str, dict] = {}
    for r, dt in p.each():
        prog.step(f"profile {r.slug} (ncu)")
        try:
            prof[r.slug] = profile_rung(r.slug, profile_shape, dt, lib=lib, ncu=ncu)
        except Exception as exc:  # noqa: BLE001
            prof[r.slug] = {"error": fail(f"profile {r.slug}", exc), "dtype": dt}
    for dt in p.dtypes:
        key = "cublas" if dt == p.dtype else f"cublas_{dt}"
        prog.step(f"profile cuBLAS {dt} (ncu)")
        try:
            prof[key] = profile_cublas(profile_shape, dt, lib=lib, ncu=ncu)
        except Exception as exc:  # noqa: BLE001
            fail(f"profile {key}", exc)
    return prof


def _peaks(bench_doc: Mapping) -> dict:
    """The peaks the benchmark compared with (its env: ``environment.collect()``); for a dtype it
    lacks, this device's, from ``environment.collect()``."""
    peaks = dict(dig(bench_doc, "env", "peak_tflops", default={}) or {})
    if any(d not in peaks for d in DTYPES):
        for d, v in environment.collect()["peak_tflops"].items():
            if v:
                peaks.setdefault(d, v)
    return peaks


def ceilings_part(p: CollectPlan, bench_doc: Mapping, lib, prog: Progress, fail: _Failures) -> dict[str, Any]:
    """Copy bandwidth, the peaks and cuBLAS at ``CEILING_SHAPE`` in each dtype."""
    prog.step("ceilings: copy bandwidth, cuBLAS at 8192^3")
    ceilings: dict[str, Any] = {}
    try:
        ceilings.update(measure_bandwidth(lib))
    except Exception as exc:  # noqa: BLE001
        fail("bandwidth", exc)
    ceilings["peak_tflops"] = _peaks(bench_doc)
    ceilings["cublas_shape"] = list(CEILING_SHAPE)
    ceilings["cublas_tflops"] = {}
    for dt in p.dtypes:
        try:
            ceilings["cublas_tflops"][dt] = measure_cublas(dt, CEILING_SHAPE, lib)
        except Exception as exc:  # noqa: BLE001
            fail(f"cublas ceiling {dt}", exc)
    return ceilings


def _env(info: driver.DeviceInfo, prof: Mapping[str, dict], profile_shape) -> dict:
    env = {"gpu_name": info.name, "sm_count": info.sm_count, "cc": f"{info.cc[0]}.{info.cc[1]}", "arch": info.arch,
           "gemmlab_version": __version__, "profile_shape": list(profile_shape)}
    ncu_v = next((p.get("ncu") for p in prof.values() if p.get("ncu")), None)
    if ncu_v:
        env["ncu"] = ncu_v
    return env


def collect(dtype: str = "fp32", shape: tuple[int, int, int] = BENCH_SHAPE,
            sweep_sizes: Sequence[int] = SWEEP_SIZES, rungs: Sequence[str] | None = None,
            sweep_rungs: Sequence[str] | None = None,
            profile_shape: tuple[int, int, int] = PROFILE_SHAPE, *, lib: str | None = None,
            timing=None, do_inspect: bool = True, do_profile: bool = True,
            other_dtypes: bool = True, ncu: str | None = None, progress: bool = True,
            on_error: Callable[[str, Exception], None] | None = None, tune_storage: str | None = None) -> dict:
    """Measure the ladder on this GPU -> the results document ``build`` reads.

    Rungs that do not take ``dtype`` (WMMA at fp32) run in their own first dtype with cuBLAS of
    that dtype beside them (``other_dtypes``). A rung that fails to inspect or profile is recorded
    with {"error": message} and the run goes on. ``timing``: the timing engine's settings
    (``measure.timing.Settings``; None for its defaults), for every benchmark of the report.
    ``tune_storage``: the tuning database to read the tuning section from (default gemmlab tune's).
    """
    # every extra the run needs, in one line, before the GPU question and before any measuring
    require_all("cuda.bindings.driver", "matplotlib.figure")
    if not driver.gpu_available():
        raise driver.NoGPUError("gemmlab report measures on a GPU; without one, rebuild a page with --from-json")
    p = plan(dtype, rungs, sweep_rungs, other_dtypes)
    fail = _Failures(on_error)
    n_rungs = len(p.each())
    total = (2 + len(p.other) + (n_rungs if do_inspect else 0)
             + ((n_rungs + 1 + len(p.other)) if do_profile else 0) + 1)
    with Progress(total, enabled=progress, label="report", transient=False) as prog:
        bench_doc, sweep_doc = bench_part(p, shape, sweep_sizes, lib, timing, prog, fail)
        insp = inspect_part(p, prog, fail) if do_inspect else {}
        prof = profile_part(p, profile_shape, lib, ncu, prog, fail) if do_profile else {}
        ceilings = ceilings_part(p, bench_doc, lib, prog, fail)
    return {"dtype": dtype, "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "bench": bench_doc, "sweep": sweep_doc, "inspect": insp, "profile": prof, "ceilings": ceilings,
            "env": _env(p.info, prof, profile_shape), "errors": fail.errors,
            "tuning": _tuning(p.info.name, tune_storage, fail)}


def _tuning(gpu_name: str, storage: str | None, fail: _Failures) -> list[dict]:
    try:
        return collect_tuning(gpu_name, storage)
    except Exception as exc:  # noqa: BLE001 - an unreadable database costs the section, not the report
        fail("tuning results", exc)
        return []
