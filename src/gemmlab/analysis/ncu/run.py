"""Running Nsight Compute: finding ``ncu``, its command line, the retry without the metrics it does
not know, the permission error, and profiling one rung or cuBLAS (``profile_rung``,
``profile_cublas``).

``ncu`` launches ``python -m gemmlab.measure.ncu_target``, which builds the operands, runs the
measured call once outside the profiled range, then once more between ``cuProfilerStart`` and
``cuProfilerStop`` (see the package docstring). A metric that this ncu does not know is dropped
(ncu refuses a whole run for one unknown name; we retry without it) and reported as missing,
never fatal.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Mapping, Sequence

from ...core import driver, toolchain
from ...core.registry import get
from .metrics import metric_names
from .parse import KernelRecord, NcuError, aggregate, parse_ncu_rows, summarize


class NcuPermissionError(NcuError):
    """The GPU performance counters are restricted to administrators (ERR_NVGPUCTRPERM)."""


PERMISSION_HELP = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): the driver restricts them "
    "to administrators. Run as root (sudo -E env PATH=$PATH gemmlab profile ...), give the process "
    "CAP_SYS_ADMIN (or CAP_PERFMON with driver R565+), or allow all users: "
    "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/ and reload the driver. "
    "In a container the host must allow it (docker run --cap-add=SYS_ADMIN). "
    "See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


def find_ncu(path: str | None = None) -> str:
    """Path to ncu: the one given, $GEMMLAB_NCU, PATH, or the CUDA install (toolchain.find_tool)."""
    for cand in (path, os.environ.get("GEMMLAB_NCU")):
        if cand:
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
            raise toolchain.ToolNotFoundError(f"ncu not found at {cand!r}")
    try:
        return toolchain.find_tool("ncu")
    except toolchain.ToolNotFoundError as exc:
        # stand-alone Nsight Compute installs, and CUDA installs under a versioned name
        for pattern in ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda-*/bin/ncu",
                        "/usr/local/NVIDIA-Nsight-Compute*/ncu"):
            found = sorted(p for p in glob.glob(pattern) if os.access(p, os.X_OK))
            if found:
                return found[-1]
        raise toolchain.ToolNotFoundError(
            f"{exc}. gemmlab profile needs Nsight Compute's command-line profiler; it comes with the CUDA toolkit "
            "(e.g. /usr/local/cuda/bin/ncu) or as the 'nsight-compute' package; or pass --ncu PATH / set GEMMLAB_NCU."
        ) from None


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.search(r"Version\s+([\w.\-() ]+)", out)
    return m.group(1).strip() if m else (out.strip().splitlines() or ["unknown"])[-1]


def ncu_command(ncu: str, metrics: Sequence[str], target: Sequence[str], log_file: str) -> list[str]:
    return [
        ncu,
        "--clock-control", "none",          # the clocks the benchmark sees, not ncu's base clock
        "--cache-control", "all",           # flush caches before every replay pass: cold, repeatable bytes
        "--profile-from-start", "off",      # only the measured call, between cuProfilerStart/Stop
        "--target-processes", "all",
        "--csv", "--page", "raw", "--print-units", "base",
        "--log-file", log_file,
        "--metrics", ",".join(metrics),
        *target,
    ]


_FAILED_METRIC = re.compile(r"Failed to find metric\s+(\S+)", re.I)


def unknown_metrics(output: str, requested: Sequence[str]) -> list[str]:
    """The requested metrics that ncu's error lines reject ('Failed to find metric regex:^x\\.sum$')."""
    bad: list[str] = []
    for m in _FAILED_METRIC.finditer(output):
        s = m.group(1)
        s = s[len("regex:"):] if s.startswith("regex:") else s
        s = re.sub(r"\\(.)", r"\1", s).strip("^$\"'.,")
        s = s.split("(")[0].rstrip(".$")
        base = s.split(".")[0]
        for name in requested:
            if name in bad:
                continue
            if name == s or (s == base and name.split(".")[0] == base):
                bad.append(name)
    return bad


def check_permission(text: str) -> None:
    """Raise NcuPermissionError, with what to do, when ncu's output says that the GPU performance
    counters are restricted to administrators."""
    if "ERR_NVGPUCTRPERM" in text:
        raise NcuPermissionError(PERMISSION_HELP)


# Metrics this process has learned the installed ncu does not know (saves a retry per rung).
REJECTED_METRICS: set[str] = set()


def run_ncu(target: Sequence[str], metrics: Sequence[str] | None = None, *, ncu: str | None = None,
            timeout: float = 900, env: Mapping[str, str] | None = None) -> tuple[list[KernelRecord], list[str], str]:
    """Profile ``target`` (an argv) under ncu; (kernel records, metrics ncu rejected, CSV text).

    Unknown metric names are dropped and the run retried; ERR_NVGPUCTRPERM raises
    NcuPermissionError; no profiled kernel raises NcuError with ncu's and the target's output.
    """
    exe = find_ncu(ncu)
    wanted = [m for m in (metrics or metric_names()) if m not in REJECTED_METRICS]
    rejected = [m for m in (metrics or metric_names()) if m in REJECTED_METRICS]
    run_env = dict(os.environ if env is None else env)
    for _attempt in range(16):
        with tempfile.TemporaryDirectory(prefix="gemmlab-ncu-") as tmp:
            log = os.path.join(tmp, "ncu.csv")
            cmd = ncu_command(exe, wanted, target, log)
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=run_env)
            except subprocess.TimeoutExpired:
                raise NcuError(f"ncu did not finish in {timeout:.0f} s: {' '.join(cmd)}") from None
            text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
        everything = "\n".join((text, proc.stdout or "", proc.stderr or ""))
        check_permission(everything)
        bad = unknown_metrics(everything, wanted)
        if bad:
            REJECTED_METRICS.update(bad)
            rejected += bad
            wanted = [m for m in wanted if m not in bad]
            if not wanted:
                break
            continue
        records: list[KernelRecord] = []
        for candidate in (text, proc.stdout or ""):   # the CSV is in the log file; older ncu may print it
            try:
                records = parse_ncu_rows(candidate)
            except NcuError:
                continue
            if records:
                text = candidate
                break
        if not records:
            tail = "\n".join(everything.strip().splitlines()[-25:])
            hint = ""
            if "No kernels were profiled" in everything:
                hint = " (ncu saw no kernel between cuProfilerStart and cuProfilerStop)"
            raise NcuError(f"ncu produced no measurement{hint} (exit code {proc.returncode}). Command:\n"
                           f"  {' '.join(cmd)}\nLast lines of its output:\n{tail}")
        return records, rejected, text
    raise NcuError(f"ncu rejected the metrics again and again; last rejected: {rejected[-5:]}")


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
    # .../src/gemmlab/analysis/ncu/run.py -> .../src, the directory that holds the gemmlab package
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
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
    source.summarize_source(...)}, "cublas": {"kernels": {...}}}. Errors as for profile_rung."""
    from .source import record_source, summarize_source

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
