"""``gemmlab tune auto``: measure the selection menu (core/selection.py) on a tuning sample of shapes
and write the measurements ``kernel="auto"`` predicts from (``data/selection_sm<NN>.json``).

The tuning sample (``tuning_sample``): N shapes drawn log-uniformly from a seed
(core.shapes.random_shapes: M in [1, 12288], N and K in [16, 12288]); every second shape has N
and K rounded up to whole 16-byte vectors (the aligned shapes real models have: the draw alone
makes 7 in 8 of them unaligned); the layouts alternate between row- and column-major B by pairs;
then the dtype's named suites (llm and decode for 16-bit, fp32 for FP32), row-major. The held-out
sample of the benchmark (``bench --suite random:48@1``) is drawn from another seed and never
measured here.

For each shape: fresh random operands; every option of the menu that applies, planned, verified
on NaN-poisoned C against the float64 reference, then timed with the one timing engine beside
cuBLAS (the bench's cold-L2 rounds with fewer samples: the model needs the ranking and the size of
the gaps, not the last percent). Every variant the options need is compiled first, in parallel
(core.precompile.CompilePool). An option that fails verification is recorded as failed and never
chosen.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import datetime, timezone

from ..core.version import __version__
from ..analysis import environment as envinfo
from ..core import driver, selection
from ..core.dtypes import get as get_dtype
from ..core.launch import Plan
from ..core.precompile import CompilePool, helpers_for, job_key
from ..core.problem import ArrayInfo, GemmProblem, make_problem
from ..core.progress import Progress
from ..core.shapes import SUITES, random_shapes
from ..core.variant import resolve
from ..measure import arrays, gpu_timing, timing
from ..measure.verify import check as verify_check

SUITES_FOR = {"16bit": ("llm", "decode"), "fp32": ("fp32",)}
SETTINGS = timing.Settings(min_samples=5, max_samples=15, target_error=0.01, time_cap_s=0.3, spin_us=200.0)


def tuning_sample(dtype: str, n: int, seed: int, suites: bool = True) -> list[tuple[tuple[int, int, int], str]]:
    """The tuning sample's (shape, layout) pairs (module docstring)."""
    vec = get_dtype(dtype).vector_elements
    out = []
    for i, (M, N, K) in enumerate(random_shapes(n, seed)):
        if i % 2:
            N, K = -(-N // vec) * vec, -(-K // vec) * vec
        out.append(((M, N, K), "rr" if (i // 2) % 2 == 0 else "rc"))
    fam = selection.family(dtype, None)
    for name in SUITES_FOR.get(fam, ()) if suites else ():
        out += [(tuple(s), "rr") for s in SUITES[name] if (tuple(s), "rr") not in out]
    return out


def stand_in(M: int, N: int, K: int, dtype: str, layout: str, ordinal: int) -> GemmProblem:
    """The problem of dense operands in ``layout`` at 256-byte-aligned addresses (what the
    libraries allocate), without arrays: the options and variants are known before any allocation."""
    def info(rows, cols, col):
        return ArrayInfo(1 << 20, rows, cols, rows if col else cols, col, dtype, ordinal, "torch")

    return GemmProblem(M, N, K, dtype, info(M, K, layout[0] == "c"), info(K, N, layout[1] == "c"),
                       info(M, N, False), 1.0, 0.0)


def _variants(items, dtype: str, info) -> list:
    """Every variant the options of ``items`` need (with the store twins their plans load), once."""
    out, seen = [], set()
    for (M, N, K), layout in items:
        prob = stand_in(M, N, K, dtype, layout, info.ordinal)
        kp = prob.kernel_view()
        for choice in selection.options(prob, info).values():
            try:
                res = resolve(choice.rung, dtype, kp, choice.config, None, info.sm_count)
            except ValueError:
                continue
            for v in (res.variant, res.variant.store_twin(res.kp.N)):
                if v is not None and job_key(v) not in seen:
                    seen.add(job_key(v))
                    out.append(v)
    return out


def compile_ahead(items, dtype: str, info, processes: int | None = None, progress: bool = True) -> list[str]:
    """Compile every variant the items' options need into the disk cache, in parallel; the errors."""
    todo = _variants(items, dtype, info)
    errors: list[str] = []
    bar = Progress(len(todo), enabled=progress, label="compile")

    def done(v, hit, err):
        if err:
            errors.append(f"{v.describe()}: {err.splitlines()[0]}")
        bar.update(v.describe(), advance=1)

    with bar, CompilePool(processes or os.cpu_count(), start_method="forkserver") as pool:   # CUDA is up here
        pool.build(todo, info.arch, done)
    for v in todo:   # the helpers (reduction, copies) are few: in this process, from the cache
        helpers_for(v, info.arch)
    return errors


def _measure_one(L, engine, dev, info, shape, layout: str, dtype: str) -> dict:
    M, N, K = shape
    ops = arrays.make_operands(L, M, N, K, dtype, a_col=layout[0] == "c", b_col=layout[1] == "c",
                               seed=int.from_bytes(os.urandom(4), "little"), beta_nonzero=False)
    prob = make_problem(ops.a, ops.b, ops.c)
    kp = prob.kernel_view()
    rec = {"dtype": dtype, "shape": [kp.M, kp.N, kp.K], "layout": ("c" if kp.a_col else "r") + ("c" if kp.b_col else "r"),
           "vec": [int(kp.vec_a), int(kp.vec_b)], "ms": {}, "tiles": {}, "configs": {}, "failed": {}}
    cands, by_key = [], {}
    for name, choice in selection.options(prob, info).items():
        key = (choice.rung.slug, tuple(sorted(choice.config.items())))
        rec["tiles"][name] = selection.tile_of(choice)
        rec["configs"][name] = {"rung": choice.rung.slug, **choice.config}
        if key in by_key:           # the same configuration as another option: timed once
            by_key[key].append(name)
            continue
        try:
            plan = Plan(prob, choice.rung, choice.config, stream=dev.stream, choice=choice)
        except Exception as exc:  # noqa: BLE001 - resources, spills: recorded, never chosen
            rec["failed"][name] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            continue
        L.fill_nan(ops.c)
        plan.run(dev.stream)
        L.synchronize()
        vr = verify_check(ops, 1.0, 0.0, f"{name} {shape}")
        if not vr.ok:
            rec["failed"][name] = f"wrong result: rel. error {vr.rel_error:.2e}, max scaled {vr.max_scaled:.2e}"
            continue
        by_key[key] = [name]
        cands.append(timing.Candidate(name, lambda p=plan: p.run(dev.stream)))
    cands.append(timing.Candidate("cublas", lambda: L.matmul(ops.a, ops.b, out=ops.c)))
    engine.warm_up(cands)
    samples = engine.measure(cands).samples
    for (slug, _), names in by_key.items():
        for name in names:
            rec["ms"][name] = samples[names[0]].median
    rec["cublas_ms"] = samples["cublas"].median
    for name in list(rec["tiles"]):
        if name not in rec["ms"]:
            rec["tiles"].pop(name)
    if not rec["failed"]:
        rec.pop("failed")
    return rec


def collect(dtype: str, items, *, settings: timing.Settings = SETTINGS, lib: str | None = None,
            processes: int | None = None, progress: bool = True, on_record=None) -> dict:
    """Measure the menu at every (shape, layout) of ``items`` on GPU 0 (module docstring): the
    selection file's document (``records`` and where they come from)."""
    if selection.family(dtype, None) is None:
        raise ValueError(f"{dtype} has no selection menu")
    driver.cuda()
    if not driver.gpu_available():
        raise driver.NoGPUError("no usable NVIDIA GPU")
    L = arrays.Lib(arrays.choose_lib(lib, dtype, arrays.available_libs()))
    ordinal = int(L.xp.cuda.current_device()) if L.name == "torch" else int(L.xp.cuda.runtime.getDevice())
    info = driver.device_info(ordinal)
    t0 = time.perf_counter()
    compile_errors = compile_ahead(items, dtype, info, processes, progress)
    compiled_s = time.perf_counter() - t0
    dev = gpu_timing.CudaDevice(L, ordinal, info.l2_bytes, flush=settings.l2 == "cold", spin=settings.spin)
    engine = timing.Engine(dev, settings, gpu_timing.NvmlClocks(ordinal) if envinfo.max_sm_clock_mhz(ordinal) else None)
    records = []
    bar = Progress(len(items), enabled=progress, label=f"tune auto {dtype}")
    with bar, arrays.Fp32Mode(L, tf32=False):
        for shape, layout in items:
            bar.update(f"{'x'.join(map(str, shape))} {layout}")
            rec = _measure_one(L, engine, dev, info, shape, layout, dtype)
            records.append(rec)
            if on_record is not None:
                on_record(rec)
            bar.update(advance=1)
    return {"format": 1, "gemmlab_version": __version__, "git_commit": os.environ.get("GEMMLAB_GIT_COMMIT"),
            "gpu_name": info.name, "arch": info.arch,
            "sm_count": info.sm_count, "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "source": "gemmlab tune auto (tune/selection.py): the selection menu timed on a tuning sample",
            "timing": {**settings.as_dict(), "engine": "gemmlab.measure.timing", "peer": "cuBLAS, same rounds"},
            "compile_s": round(compiled_s, 1), "compile_errors": compile_errors,
            "duration_s": round(time.perf_counter() - t0, 1), "records": records}


RUN_KEYS = ("gemmlab_version", "git_commit", "measured", "sample", "timing", "duration_s")


def compact(doc: dict) -> dict:
    """What the selection file keeps of a run's document: per record its dtype, kernel-view shape,
    layout, 16-byte access, cuBLAS's and each option's median (5 significant digits), tile and
    rung; the run's provenance in ``runs``."""
    recs = [{"dtype": r["dtype"], "shape": r["shape"], "layout": r["layout"], "vec": r["vec"],
             "cublas_ms": float(f"{r['cublas_ms']:.5g}"), "ms": {k: float(f"{v:.5g}") for k, v in r["ms"].items()},
             "tiles": r["tiles"], "rungs": {k: r["configs"][k]["rung"] for k in r["tiles"]}}
            for r in doc["records"]]
    dtypes_ = sorted({r["dtype"] for r in recs})
    runs = doc.get("runs") or [{"dtypes": dtypes_, **{k: doc.get(k) for k in RUN_KEYS}}]
    return {"format": 1, "gpu_name": doc["gpu_name"], "arch": doc["arch"], "sm_count": doc["sm_count"],
            "source": "gemmlab tune auto (tune/selection.py): the selection menu (core/selection.py) timed on "
                      "tuning samples beside cuBLAS", "runs": runs, "records": recs}


def merge(existing: dict, new: dict) -> dict:
    """``new``'s records (compacted) over ``existing``'s (same dtype, shape and layout replaced)
    when both come from the same GPU model and SM count; ``new`` alone otherwise."""
    new = compact(new) if "configs" in (new.get("records") or [{}])[0] else new
    if not existing or (existing.get("gpu_name"), existing.get("sm_count")) != (new.get("gpu_name"), new.get("sm_count")):
        return new
    keys = {(r["dtype"], tuple(r["shape"]), r["layout"]) for r in new["records"]}
    kept = [r for r in existing["records"] if (r["dtype"], tuple(r["shape"]), r["layout"]) not in keys]
    return {**new, "runs": existing.get("runs", []) + new["runs"], "records": kept + new["records"]}


def replay(records: list[dict], sm_count: int, test: list[dict] | None = None) -> list[dict]:
    """The option the model picks for each record of ``test`` from ``records`` (None: leave-one-out
    over ``records``, each predicted from all the others), by their stored tiles, and its measured
    time against the best measured option's and cuBLAS's. ``tune auto`` prints the leave-one-out
    after a run; the held-out benchmark is the figure that counts."""
    if not records:
        return []
    model = selection.Model(records, get_dtype(records[0]["dtype"]).itemsize, sm_count)
    out = []
    for i, r in enumerate(records if test is None else test):
        preds = []
        dist = model.distances(r["shape"], r["layout"], r["vec"])
        for name, tile in r.get("tiles", {}).items():
            p = model.predict(name, selection.rung_of(r, name), tile, r["shape"], r["layout"], r["vec"], dist,
                              exclude=i if test is None else None)
            if p is not None and name in r["ms"]:
                preds.append((p.seconds, name))
        if not preds:
            continue
        pick = min(preds)[1]
        best = min(r["ms"], key=r["ms"].get)
        out.append({"shape": r["shape"], "layout": r["layout"], "pick": pick, "best": best,
                    "regret": r["ms"][pick] / r["ms"][best], "vs_cublas": r["cublas_ms"] / r["ms"][pick],
                    "best_vs_cublas": r["cublas_ms"] / r["ms"][best]})
    return out


def summary(rows: list[dict]) -> dict:
    """Geomeans over ``replay``'s rows: picked and best option against cuBLAS, and the regret (NaN
    without rows)."""
    def geo(xs):
        return statistics.geometric_mean(xs) if xs else float("nan")

    return {"shapes": len(rows), "geomean_vs_cublas": geo([r["vs_cublas"] for r in rows]),
            "oracle_vs_cublas": geo([r["best_vs_cublas"] for r in rows]),
            "geomean_regret": geo([r["regret"] for r in rows]),
            "below_0_9": sum(r["vs_cublas"] < 0.9 for r in rows)}

