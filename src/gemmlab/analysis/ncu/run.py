"""Running Nsight Compute: finding ``ncu``, its command line, the retry without the metrics it does
not know, and the permission error. ``run_ncu`` profiles any target program (an argv); what runs a
rung or cuBLAS under it is the measure layer's (measure/ncu_profile.py, whose target is
measure/ncu_target.py). A metric that this ncu does not know is dropped (ncu refuses a whole run
for one unknown name; we retry without it) and reported as missing, never fatal.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import tempfile
from typing import Mapping, Sequence

from ...core import toolchain
from .metrics import metric_names
from .parse import KernelRecord, NcuError, parse_ncu_rows


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
