"""One rung, or cuBLAS, under Nsight Compute (``gemmlab profile`` and the report): the target program
ncu launches (``python -m gemmlab.measure.ncu_target``: it builds the operands, runs the measured call
once outside the profiled range, then once more between ``cuProfilerStart`` and ``cuProfilerStop``),
run through the analysis layer's ``run_ncu`` (counters) or ``record_source`` (per-instruction
sampling), and read by its parser. It lives in the measure layer because its target does."""

from __future__ import annotations

import json
import os
import sys

from ..analysis.ncu.parse import aggregate, summarize
from ..analysis.ncu.run import find_ncu, ncu_version, run_ncu
from ..analysis.ncu.source import record_source, summarize_source
from ..core import driver
from ..core.registry import get


def target_argv(rung: str | None, shape: tuple[int, int, int], dtype: str, *, config=None, lib: str | None = None,
                cublas: bool = False, precision: str | None = None) -> list[str]:
    argv = [sys.executable, "-m", "gemmlab.measure.ncu_target", "--shape", "x".join(map(str, shape)), "--dtype", dtype]
    if cublas:
        argv.append("--cublas")
    else:
        argv += ["--rung", str(rung)]
    if config:
        argv += ["--config", json.dumps(dict(config))]
    if lib:
        argv += ["--lib", lib]
    if precision:
        argv += ["--precision", precision]
    return argv


def _target_env() -> dict[str, str]:
    """The child must import this very gemmlab, installed or from a source tree (PYTHONPATH=src)."""
    env = dict(os.environ)
    # .../src/gemmlab/measure/ncu_profile.py -> .../src, the directory that holds the gemmlab package
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _profile_one(kind: str, rung: str | None, shape, dtype: str, *, config=None, lib=None, ncu=None,
                 timeout: float = 900, keep_csv: str | None = None, precision: str | None = None) -> dict:
    M, N, K = shape
    flops = 2.0 * M * N * K
    records, rejected, text = run_ncu(target_argv(rung, shape, dtype, config=config, lib=lib, cublas=kind == "cublas",
                                                  precision=precision),
                                      ncu=ncu, timeout=timeout, env=_target_env())
    if keep_csv:
        os.makedirs(keep_csv, exist_ok=True)
        with open(os.path.join(keep_csv, f"ncu_{rung or 'cublas'}_{dtype}_{M}x{N}x{K}.csv"), "w") as fh:
            fh.write(text)
    s = summarize(aggregate(records), flops, [r.kernel for r in records])
    if len(records) > 1:   # a call of several kernels (packs, split-K's reduction, stream-K's tail): each alone too
        s["per_kernel"] = [dict(summarize(r.values, None, [r.kernel]), kernel=r.kernel) for r in records]
    s.update(kernel=rung if kind == "rung" else "cublas", shape=[M, N, K], dtype=dtype, precision=precision or dtype,
             config=dict(config) if config else None,
             rejected_metrics=rejected,
             launch={k: records[0].info.get(k) for k in ("Block Size", "Grid Size", "Device", "CC") if records})
    return s


def profile_cublas(shape: tuple[int, int, int], dtype: str = "fp32", *, lib: str | None = None, ncu: str | None = None,
                   timeout: float = 900, keep_csv: str | None = None, precision: str | None = None) -> dict:
    """cuBLAS (the array library's matmul) at ``shape`` under ncu; same keys as profile_rung.
    ``precision`` "tf32": cuBLAS with TF32 (the baseline a tf32 rung is compared with); any other
    float32 precision: exact SGEMM, as the benchmark compares 3xtf32."""
    return _profile_one("cublas", None, tuple(shape), dtype, lib=lib, ncu=ncu, timeout=timeout, keep_csv=keep_csv,
                        precision=precision)


def _prepare(rung: str, dtype: str, precision: str | None, config, ncu: str | None):
    """(rung, its precision for ``dtype``, the resolved config or None, the ncu executable) for a
    profile of ``rung``; the input checked, the GPU before ncu (without one, where ncu is does not
    matter)."""
    r = get(rung)
    r.require(dtype, precision=precision)
    precision = r.precision_for(dtype, precision)    # the rung's own for the dtype when None (rung 22: tf32)
    config = r.config(config, precision) if config is not None else None  # resolved here: the child gets JSON
    driver.require_gpu()
    return r, precision, config, find_ncu(ncu)


def profile_rung(rung: str, shape: tuple[int, int, int], dtype: str = "fp32", vs_cublas: bool = False, *,
                 config=None, lib: str | None = None, ncu: str | None = None, timeout: float = 900,
                 keep_csv: str | None = None, precision: str | None = None) -> dict:
    """One launch of ``rung`` at ``shape`` under Nsight Compute -> summarize()'s dict plus
    kernel, shape, dtype, config, ncu (version), rejected_metrics; with ``vs_cublas`` also the
    key "cublas": the same for cuBLAS at the same shape.

    Raises ToolNotFoundError (no ncu), NcuPermissionError (ERR_NVGPUCTRPERM), NcuError,
    NoGPUError (no GPU, checked before ncu starts), ValueError (unknown rung / unsupported dtype).
    """
    r, precision, config, exe = _prepare(rung, dtype, precision, config, ncu)
    out = _profile_one("rung", r.slug, tuple(shape), dtype, config=config, lib=lib, ncu=exe, timeout=timeout,
                       keep_csv=keep_csv, precision=precision)
    out["ncu"] = ncu_version(exe)
    if vs_cublas:
        out["cublas"] = profile_cublas(shape, dtype, lib=lib, ncu=exe, timeout=timeout, keep_csv=keep_csv,
                                       precision=precision)
    return out


def profile_source(rung: str, shape: tuple[int, int, int], dtype: str = "fp32", vs_cublas: bool = False, *,
                   config=None, lib: str | None = None, ncu: str | None = None, timeout: float = 900,
                   precision: str | None = None, top: int = 12) -> dict:
    """Per-instruction warp-state sampling of one launch of ``rung`` (and of cuBLAS with
    ``vs_cublas``): {"kernel", "shape", "dtype", "precision", "config", "ncu", "kernels": {name:
    analysis.ncu.source.summarize_source(...)}, "cublas": {"kernels": {...}}}. Errors as for profile_rung."""
    r, precision, config, exe = _prepare(rung, dtype, precision, config, ncu)
    shape = tuple(shape)

    def one(cublas: bool) -> dict:
        target = target_argv(None if cublas else r.slug, shape, dtype, config=None if cublas else config, lib=lib,
                             cublas=cublas, precision=precision)
        kernels = record_source(exe, target, timeout=timeout, env=_target_env())
        return {name: summarize_source(rows, top) for name, rows in kernels.items() if rows}

    out = {"kernel": r.slug, "shape": list(shape), "dtype": dtype, "precision": precision,
           "config": dict(config) if config else None, "ncu": ncu_version(exe), "kernels": one(False)}
    if vs_cublas:
        out["cublas"] = {"kernels": one(True)}
    return out
