"""``gemmlab profile``: one rung (and cuBLAS) under Nsight Compute, read by metric name.

How a measurement is made
-------------------------
``ncu`` launches ``python -m gemmlab.measure.ncu_target``, which builds the operands, runs the measured
call once outside the profiled range (module loading, cuBLAS heuristics), then runs it once more
between ``cuProfilerStart`` and ``cuProfilerStop``. ncu runs with ``--profile-from-start off``, so
it sees exactly the kernels of that one call, whatever their names (cuBLAS may launch more than
one: a split-K GEMM and its reduction) and whatever the array library launched before it (random
number generation, NaN poisoning). ``--clock-control none`` leaves the clocks as the benchmark
sees them; ``--cache-control all`` flushes the caches before every replay pass, so byte counters
are those of a cold start.

How it is read
--------------
``--csv --page raw --print-units base`` prints one header row of column names (the launch columns,
then one column per metric), one row of units and one row per profiled kernel. Everything is
looked up by column *name* (never position), values lose their thousands separators, units are
normalized to seconds / bytes / bytes per second / hertz, and "n/a" becomes ``None``.

The metrics live in one table, ``METRICS``: our key, the Nsight Compute metric name (plus older or
newer spellings of the same counter), its unit after normalization and what it means. A metric that
this ncu does not know is dropped (ncu refuses a whole run for one unknown name; we retry without
it) and reported as missing, never fatal.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

# =============================================================================================
# The metric table
# =============================================================================================


@dataclass(frozen=True)
class Metric:
    key: str                   # our name, the key in summarize()'s "counters"
    name: str                  # Nsight Compute metric name (Hopper, ncu 2023+)
    unit: str                  # unit after normalization
    meaning: str
    alt: tuple[str, ...] = ()  # other spellings of the same counter in other ncu versions


# Stall reasons: ncu's "warp cycles per issued instruction" split by reason (WarpStateStats). The
# value is the average number of cycles a warp spent in that state between two of its issued
# instructions; divided by their sum it is the reason's share of the time between issues.
STALL_REASONS: tuple[tuple[str, str, str], ...] = (
    # (reason, display label, what it means)
    ("long_scoreboard", "long scoreboard", "waiting for data from L1TEX: global, local or texture memory"),
    ("mio_throttle", "MIO throttle", "the memory input/output queue is full: too many shared-memory (or special-math) instructions"),
    ("short_scoreboard", "short scoreboard", "waiting for data from the MIO: shared-memory loads, special math"),
    ("wait", "wait", "a fixed-latency dependency (e.g. an FFMA waiting for the previous one)"),
    ("barrier", "barrier", "waiting at __syncthreads for the other warps of the block"),
    ("not_selected", "not selected", "eligible, but the scheduler issued another warp (no loss)"),
    ("selected", "selected", "issuing an instruction (the productive state)"),
    ("math_pipe_throttle", "math pipe throttle", "the math pipe the instruction needs is busy"),
    ("lg_throttle", "LG throttle", "the local/global memory instruction queue is full"),
    ("tex_throttle", "TEX throttle", "the texture unit's queue is full"),
    ("dispatch_stall", "dispatch stall", "the dispatcher could not take the instruction"),
    ("no_instruction", "no instruction", "instruction cache miss or not yet fetched"),
    ("branch_resolving", "branch resolving", "waiting for a branch target"),
    ("drain", "drain", "waiting for memory stores to drain at exit"),
    ("membar", "membar", "waiting at a memory barrier"),
    ("sleeping", "sleeping", "sleeping (nanosleep or all threads yielded)"),
    ("imc_miss", "IMC miss", "immediate constant cache miss"),
    ("gmma", "GMMA", "waiting for warpgroup MMA (wgmma) to complete (Hopper)"),
    ("misc", "misc", "other reasons"),
)
STALL_LABEL = {r: label for r, label, _ in STALL_REASONS}
STALL_MEANING = {r: meaning for r, _, meaning in STALL_REASONS}


def _stall_metric(reason: str) -> Metric:
    return Metric(
        f"stall_{reason}",
        f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",
        "cycles/issue",
        f"stall '{STALL_LABEL[reason]}': {STALL_MEANING[reason]}",
    )


METRICS: tuple[Metric, ...] = (
    # ---- time, clocks, launch ----------------------------------------------------------------
    Metric("duration", "gpu__time_duration.sum", "s", "GPU time of the kernel(s)"),
    Metric("sm_clock", "sm__cycles_elapsed.avg.per_second", "Hz", "SM clock during the kernel"),
    Metric("dram_clock", "dram__cycles_elapsed.avg.per_second", "Hz", "DRAM clock during the kernel"),
    Metric("elapsed_cycles", "gpc__cycles_elapsed.max", "cycles", "elapsed GPC cycles"),
    Metric("registers", "launch__registers_per_thread", "regs", "registers per thread"),
    Metric("smem_static", "launch__shared_mem_per_block_static", "B", "static shared memory per block"),
    Metric("smem_dynamic", "launch__shared_mem_per_block_dynamic", "B", "dynamic shared memory per block"),
    Metric("waves", "launch__waves_per_multiprocessor", "waves", "blocks per SM over what fits at once"),
    # ---- speed of light ------------------------------------------------------------------------
    Metric("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%",
           "compute (SM) throughput, % of peak"),
    Metric("mem_throughput_pct", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%",
           "memory throughput (busiest unit), % of peak"),
    # ---- occupancy and issue -----------------------------------------------------------------
    Metric("achieved_occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", "%",
           "achieved occupancy: active warps / maximum warps per SM (nvprof achieved_occupancy)"),
    Metric("theoretical_occupancy", "sm__maximum_warps_per_active_cycle_pct", "%",
           "theoretical occupancy from the launch's resources"),
    Metric("ipc", "sm__inst_executed.avg.per_cycle_active", "inst/cycle",
           "instructions executed per active cycle per SM (nvprof ipc)"),
    Metric("issued_ipc", "sm__inst_issued.avg.per_cycle_active", "inst/cycle",
           "instructions issued per active cycle per SM (nvprof issued_ipc)"),
    Metric("inst_executed", "smsp__inst_executed.sum", "inst", "warp instructions executed"),
    # ---- shared memory -------------------------------------------------------------------------
    Metric("bank_conflicts_ld", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "count",
           "shared-memory bank conflicts of loads (extra wavefronts)"),
    Metric("bank_conflicts_st", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "count",
           "shared-memory bank conflicts of stores (extra wavefronts)"),
    Metric("shared_ld_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "count",
           "shared-memory load wavefronts (one per bank pass)"),
    Metric("shared_st_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "count",
           "shared-memory store wavefronts"),
    Metric("shared_ld_inst", "smsp__sass_inst_executed_op_shared_ld.sum", "inst", "shared load instructions (LDS) executed"),
    Metric("shared_st_inst", "smsp__sass_inst_executed_op_shared_st.sum", "inst", "shared store instructions (STS) executed"),
    Metric("shared_ld_bytes", "smsp__sass_data_bytes_mem_shared_op_ld.sum", "B", "bytes read from shared memory"),
    Metric("shared_st_bytes", "smsp__sass_data_bytes_mem_shared_op_st.sum", "B", "bytes written to shared memory"),
    # ---- global memory, caches, DRAM -----------------------------------------------------------
    Metric("global_ld_inst", "smsp__sass_inst_executed_op_global_ld.sum", "inst", "global load instructions (LDG) executed"),
    Metric("global_st_inst", "smsp__sass_inst_executed_op_global_st.sum", "inst", "global store instructions (STG) executed"),
    Metric("l1_throughput_pct", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "%", "L1/TEX cache throughput, % of peak"),
    Metric("l2_throughput_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "%", "L2 cache throughput, % of peak"),
    Metric("dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "DRAM throughput, % of peak",
           alt=("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",)),
    Metric("l1_bytes", "l1tex__t_bytes.sum", "B", "bytes requested from L1/TEX (all memory spaces but shared)"),
    Metric("l2_bytes", "lts__t_bytes.sum", "B", "bytes moved through L2"),
    Metric("dram_read_bytes", "dram__bytes_read.sum", "B", "bytes read from DRAM", alt=("dram__bytes_op_read.sum",)),
    Metric("dram_write_bytes", "dram__bytes_write.sum", "B", "bytes written to DRAM", alt=("dram__bytes_op_write.sum",)),
    Metric("l1_hit_rate", "l1tex__t_sector_hit_rate.pct", "%", "L1/TEX sector hit rate"),
    Metric("l2_hit_rate", "lts__t_sector_hit_rate.pct", "%", "L2 sector hit rate"),
    # ---- math ----------------------------------------------------------------------------------
    Metric("ffma_count", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "thread-inst",
           "FP32 fused multiply-adds executed (per thread; 2 FLOPs each)"),
    Metric("fadd_count", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "thread-inst", "FP32 adds executed (per thread)"),
    Metric("fmul_count", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "thread-inst", "FP32 multiplies executed (per thread)"),
    Metric("hfma_count", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "thread-inst", "FP16 fused multiply-adds executed (per thread)"),
    Metric("tensor_hmma_inst", "sm__inst_executed_pipe_tensor_op_hmma.sum", "inst",
           "tensor-core HMMA warp instructions (mma.sync, WMMA); also counts the HFMA2.MMA register moves "
           "compilers emit (about one per warp in FP32 kernels on the H100)"),
    Metric("tensor_gmma_inst", "sm__inst_executed_pipe_tensor_op_gmma.sum", "inst", "tensor-core warpgroup MMA instructions (wgmma, Hopper)"),
    Metric("tensor_active_pct", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "%",
           "tensor pipe busy, % of active cycles"),
    Metric("fma_pipe_pct", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "%", "FMA pipe busy, % of active cycles"),
) + tuple(_stall_metric(r) for r, _, _ in STALL_REASONS)

METRIC_BY_KEY = {m.key: m for m in METRICS}


def metric_names(metrics: Iterable[Metric] = METRICS) -> list[str]:
    """Every ncu name to request, alternatives included, in table order, without repeats."""
    out: list[str] = []
    for m in metrics:
        for n in (m.name, *m.alt):
            if n not in out:
                out.append(n)
    return out


# =============================================================================================
# Parsing ncu's raw CSV
# =============================================================================================

class NcuError(RuntimeError):
    """ncu ran but produced no usable measurement."""


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

# Launch columns ncu writes before the metric columns (not metrics themselves).
_INFO_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                 "Block Size", "Grid Size", "Device", "CC", "Function Name", "Demangled Name", "Mangled Name",
                 "Kernel Time", "Section Name", "Metric Name", "Metric Unit", "Metric Value"}

_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_TIME = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
         "second": 1.0, "s": 1.0, "sec": 1.0}
_FREQ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def parse_value(text: str | None) -> float | None:
    """'1,234,567' -> 1234567.0; '4.0e-05' -> 4e-05; 'n/a', '' -> None. Never raises."""
    if text is None:
        return None
    t = text.strip().replace(",", "").replace("\u202f", "").replace("\xa0", "")
    if not t or t.lower() in ("n/a", "na", "nan", "-", "(n/a)"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _scale_word(word: str) -> tuple[float, str] | None:
    """(factor, kind) of one unit word: 'Mbyte' -> (1e6, 'byte'); 'usecond' -> (1e-6, 'time')."""
    if word in _TIME:
        return _TIME[word], "time"
    if word.lower() in _FREQ:
        return _FREQ[word.lower()], "freq"
    for p, f in _BIN.items():
        if word.startswith(p) and word[len(p):] in ("B", "byte"):
            return f, "byte"
    for p in ("K", "M", "G", "T", "P", ""):
        if word.startswith(p) and word[len(p):] in ("byte", "B"):
            return _SI[p], "byte"
    # counts with an SI prefix: 'Kinst', 'Msector', 'Gcycle', 'Kwarp' (an uppercase prefix then a word)
    m = re.fullmatch(r"([KMGTP])([a-z][a-z_]*)", word)
    if m:
        return _SI[m.group(1)], "count"
    return None


def normalize(value: float | None, unit: str) -> tuple[float | None, str]:
    """A value and ncu's unit -> (value in base units, canonical unit).

    Canonical units: 's' (time), 'B' (bytes), 'B/s' (byte rates), 'Hz', '%', or the count word
    ncu gave ('inst', 'sector', 'cycle', ...). Unknown units pass through unchanged.
    """
    u = (unit or "").strip()
    if value is None:
        return None, u
    if u in ("%", "", "pct"):
        return value, "%" if u in ("%", "pct") else ""
    if "/" in u:
        num, den = u.split("/", 1)
        a, b = _scale_word(num), _scale_word(den)
        if b and b[1] == "time":
            if a is None and re.fullmatch(r"[a-z_]+", num):
                a = (1.0, "count")             # 'cycle/nsecond', 'inst/second'
                word = num
            else:
                word = num[1:] if a and a[1] == "count" else num
            if a:
                canon = "B/s" if a[1] == "byte" else ("Hz" if word == "cycle" else f"{word}/s")
                return value * a[0] / b[0], canon
        if a and a[1] == "count" and not b:
            return value * a[0], f"{num[1:]}/{den}"
        return value, u
    s = _scale_word(u)
    if s:
        factor, kind = s
        canon = {"time": "s", "byte": "B", "freq": "Hz"}.get(kind, u[1:] if kind == "count" else u)
        return value * factor, canon
    return value, u


def _csv_lines(text: str) -> list[str]:
    """The CSV part of ncu's output: drop its ==PROF==/==WARNING== lines and anything unquoted."""
    return [ln for ln in text.splitlines() if ln.startswith('"')]


@dataclass
class KernelRecord:
    id: str
    kernel: str
    info: dict[str, str]                 # launch columns (Block Size, Grid Size, Device, CC, ...)
    values: dict[str, float | None]      # metric name -> normalized value (None for n/a)
    units: dict[str, str]                # metric name -> canonical unit
    raw: dict[str, str]                  # metric name -> the text ncu printed


def parse_ncu_rows(text: str) -> list[KernelRecord]:
    """Every profiled kernel of ncu's ``--csv --page raw`` output, columns looked up by name."""
    rows = list(csv.reader(io.StringIO("\n".join(_csv_lines(text)))))
    hdr_i = next((i for i, r in enumerate(rows) if "ID" in r and "Kernel Name" in r), None)
    if hdr_i is None:
        raise NcuError("no ncu raw CSV header (a row with 'ID' and 'Kernel Name') in the output")
    header = rows[hdr_i]
    col = {name: i for i, name in enumerate(header)}
    metric_cols = [name for name in header if name not in _INFO_COLUMNS and name]
    units: dict[str, str] = {}
    body = rows[hdr_i + 1:]
    if body and not body[0][col["ID"]].strip():          # the units row: launch columns empty
        urow = body[0]
        units = {name: (urow[col[name]] if col[name] < len(urow) else "") for name in metric_cols}
        body = body[1:]
    out: list[KernelRecord] = []
    for r in body:
        if len(r) != len(header) or not r[col["ID"]].strip().isdigit():
            continue
        info = {name: r[col[name]] for name in header if name in _INFO_COLUMNS}
        values, cunits, raw = {}, {}, {}
        for name in metric_cols:
            raw[name] = r[col[name]]
            v, cu = normalize(parse_value(r[col[name]]), units.get(name, ""))
            values[name], cunits[name] = v, cu
        out.append(KernelRecord(r[col["ID"]], r[col["Kernel Name"]], info, values, cunits, raw))
    return out


def _aggregate_kind(name: str) -> str:
    """How to combine one metric over several kernels of one call."""
    if name.startswith("launch__"):
        return "max"
    if name.endswith(".sum"):
        return "sum"
    if name.endswith(".max"):
        return "max"
    if name.endswith(".min"):
        return "min"
    return "wavg"  # averages, ratios, percentages, rates: weighted by each kernel's duration


def aggregate(records: Sequence[KernelRecord]) -> dict[str, float | None]:
    """One value per metric for a call that launched ``records``: counts add up, rates and
    percentages are averaged weighted by duration, so a tiny reduction kernel weighs little."""
    if not records:
        return {}
    if len(records) == 1:
        return dict(records[0].values)
    dur = [r.values.get("gpu__time_duration.sum") or 0.0 for r in records]
    names = []
    for r in records:
        names += [n for n in r.values if n not in names]
    out: dict[str, float | None] = {}
    for n in names:
        vals = [(r.values.get(n), d) for r, d in zip(records, dur)]
        present = [(v, d) for v, d in vals if v is not None]
        if not present:
            out[n] = None
            continue
        kind = _aggregate_kind(n)
        if kind == "sum":
            out[n] = sum(v for v, _ in present)
        elif kind == "max":
            out[n] = max(v for v, _ in present)
        elif kind == "min":
            out[n] = min(v for v, _ in present)
        else:
            w = sum(d for _, d in present)
            out[n] = sum(v * d for v, d in present) / w if w > 0 else sum(v for v, _ in present) / len(present)
    return out


def parse_ncu_csv(text: str) -> dict[str, float | None]:
    """ncu ``--csv --page raw`` output -> {metric name: value in base units (None for n/a)}.

    Several kernels (one call that launched more than one) are combined by ``aggregate``.
    """
    return aggregate(parse_ncu_rows(text))


# =============================================================================================
# Our summary
# =============================================================================================

def _first(raw: Mapping[str, float | None], m: Metric) -> float | None:
    for n in (m.name, *m.alt):
        v = raw.get(n)
        if v is not None:
            return v
    return None


def _div(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def summarize(raw: Mapping[str, float | None], flops: float | None = None,
              kernels: Sequence[str] = ()) -> dict:
    """ncu metrics (by name, base units) -> the report's keys.

    ``flops`` is the useful work of the call (2*M*N*K); ``tflops`` and the arithmetic intensity
    (FLOPs per DRAM byte, as measured by the counters) are derived from it.
    """
    c = {m.key: _first(raw, m) for m in METRICS}
    missing = [m.key for m in METRICS if c[m.key] is None]
    dur = c["duration"]
    dram = None
    if c["dram_read_bytes"] is not None or c["dram_write_bytes"] is not None:
        dram = (c["dram_read_bytes"] or 0.0) + (c["dram_write_bytes"] or 0.0)
    stall_vals = {r: c[f"stall_{r}"] for r, _, _ in STALL_REASONS if c[f"stall_{r}"] is not None}
    total = sum(stall_vals.values())
    stalls = sorted(
        ({"reason": r, "label": STALL_LABEL[r], "cycles_per_issue": v, "share": (v / total if total > 0 else 0.0)}
         for r, v in stall_vals.items()),
        key=lambda s: -s["cycles_per_issue"],
    )
    real_stalls = [s for s in stalls if s["reason"] not in ("selected", "not_selected")]
    tensor = None
    if c["tensor_hmma_inst"] is not None or c["tensor_gmma_inst"] is not None:
        tensor = (c["tensor_hmma_inst"] or 0.0) + (c["tensor_gmma_inst"] or 0.0)
    out = {
        "kernels": list(kernels),
        "duration_s": dur,
        "flops": flops,
        "tflops": (flops / dur / 1e12) if flops and dur else None,
        "sm_clock_hz": c["sm_clock"],
        "achieved_occupancy": c["achieved_occupancy"],
        "theoretical_occupancy": c["theoretical_occupancy"],
        "ipc": c["ipc"],
        "issued_ipc": c["issued_ipc"],
        "sm_throughput_pct": c["sm_throughput_pct"],
        "mem_throughput_pct": c["mem_throughput_pct"],
        "stalls": stalls,
        "top_stall": real_stalls[0]["reason"] if real_stalls else None,
        "warp_cycles_per_issue": total if stall_vals else None,
        "bank_conflicts_ld": c["bank_conflicts_ld"],
        "bank_conflicts_st": c["bank_conflicts_st"],
        "shared_ld_wavefronts": c["shared_ld_wavefronts"],
        "shared_st_wavefronts": c["shared_st_wavefronts"],
        "shared_ld_inst": c["shared_ld_inst"],
        "shared_st_inst": c["shared_st_inst"],
        "shared_ld_bytes": c["shared_ld_bytes"],
        "shared_st_bytes": c["shared_st_bytes"],
        "shared_ld_throughput": _div(c["shared_ld_bytes"], dur),   # B/s (nvprof shared_load_throughput)
        "shared_st_throughput": _div(c["shared_st_bytes"], dur),   # B/s (nvprof shared_store_throughput)
        "global_ld_inst": c["global_ld_inst"],
        "global_st_inst": c["global_st_inst"],
        "l1_throughput_pct": c["l1_throughput_pct"],
        "l2_throughput_pct": c["l2_throughput_pct"],
        "dram_throughput_pct": c["dram_throughput_pct"],
        "l1_bytes": c["l1_bytes"],
        "l2_bytes": c["l2_bytes"],
        "dram_read_bytes": c["dram_read_bytes"],
        "dram_write_bytes": c["dram_write_bytes"],
        "dram_bytes": dram,
        "l1_hit_rate": c["l1_hit_rate"],
        "l2_hit_rate": c["l2_hit_rate"],
        "l2_throughput_Bps": _div(c["l2_bytes"], dur),
        "dram_throughput_Bps": _div(dram, dur),
        "ffma_count": c["ffma_count"],
        "hfma_count": c["hfma_count"],
        "tensor_inst_count": tensor,
        "tensor_active_pct": c["tensor_active_pct"],
        "fma_pipe_pct": c["fma_pipe_pct"],
        "inst_executed": c["inst_executed"],
        "registers": c["registers"],
        "arithmetic_intensity": _div(flops, dram),
        "counters": c,
        "missing": missing,
    }
    return out


# =============================================================================================
# Running ncu
# =============================================================================================

def find_ncu(path: str | None = None) -> str:
    """Path to ncu: the one given, $GEMMLAB_NCU, PATH, or the CUDA install (toolchain.find_tool)."""
    from ..core.toolchain import ToolNotFoundError, find_tool

    for cand in (path, os.environ.get("GEMMLAB_NCU")):
        if cand:
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
            raise ToolNotFoundError(f"ncu not found at {cand!r}")
    try:
        return find_tool("ncu")
    except ToolNotFoundError as exc:
        import glob

        # stand-alone Nsight Compute installs, and CUDA installs under a versioned name
        for pattern in ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda-*/bin/ncu",
                        "/usr/local/NVIDIA-Nsight-Compute*/ncu"):
            found = sorted(p for p in glob.glob(pattern) if os.access(p, os.X_OK))
            if found:
                return found[-1]
        raise ToolNotFoundError(
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


def _check_output(text: str) -> None:
    if "ERR_NVGPUCTRPERM" in text:
        raise NcuPermissionError(PERMISSION_HELP)


# Metrics this process has learned the installed ncu does not know (saves a retry per rung).
_REJECTED: set[str] = set()


def run_ncu(target: Sequence[str], metrics: Sequence[str] | None = None, *, ncu: str | None = None,
            timeout: float = 900, env: Mapping[str, str] | None = None) -> tuple[list[KernelRecord], list[str], str]:
    """Profile ``target`` (an argv) under ncu; (kernel records, metrics ncu rejected, CSV text).

    Unknown metric names are dropped and the run retried; ERR_NVGPUCTRPERM raises
    NcuPermissionError; no profiled kernel raises NcuError with ncu's and the target's output.
    """
    exe = find_ncu(ncu)
    wanted = [m for m in (metrics or metric_names()) if m not in _REJECTED]
    rejected = [m for m in (metrics or metric_names()) if m in _REJECTED]
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
        _check_output(everything)
        bad = unknown_metrics(everything, wanted)
        if bad:
            _REJECTED.update(bad)
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
                cublas: bool = False) -> list[str]:
    argv = [sys.executable, "-m", "gemmlab.measure.ncu_target", "--shape", "x".join(map(str, shape)), "--dtype", dtype]
    if cublas:
        argv.append("--cublas")
    else:
        argv += ["--rung", str(rung)]
    if config:
        argv += ["--config", json.dumps(dict(config))]
    if lib:
        argv += ["--lib", lib]
    return argv


def _target_env() -> dict[str, str]:
    """The child must import this very gemmlab, installed or from a source tree (PYTHONPATH=src)."""
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../src
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _profile_one(kind: str, rung: str | None, shape, dtype: str, *, config=None, lib=None, ncu=None,
                 timeout: float = 900, keep_csv: str | None = None) -> dict:
    M, N, K = shape
    flops = 2.0 * M * N * K
    records, rejected, text = run_ncu(target_argv(rung, shape, dtype, config=config, lib=lib, cublas=kind == "cublas"),
                                      ncu=ncu, timeout=timeout, env=_target_env())
    if keep_csv:
        os.makedirs(keep_csv, exist_ok=True)
        with open(os.path.join(keep_csv, f"ncu_{rung or 'cublas'}_{dtype}_{M}x{N}x{K}.csv"), "w") as fh:
            fh.write(text)
    s = summarize(aggregate(records), flops, [r.kernel for r in records])
    s.update(kernel=rung if kind == "rung" else "cublas", shape=[M, N, K], dtype=dtype,
             config=dict(config) if config else None,
             rejected_metrics=rejected,
             launch={k: records[0].info.get(k) for k in ("Block Size", "Grid Size", "Device", "CC") if records})
    return s


def profile_cublas(shape: tuple[int, int, int], dtype: str = "fp32", *, lib: str | None = None, ncu: str | None = None,
                   timeout: float = 900, keep_csv: str | None = None) -> dict:
    """cuBLAS (the array library's matmul) at ``shape`` under ncu; same keys as profile_rung."""
    return _profile_one("cublas", None, tuple(shape), dtype, lib=lib, ncu=ncu, timeout=timeout, keep_csv=keep_csv)


def profile_rung(rung: str, shape: tuple[int, int, int], dtype: str = "fp32", vs_cublas: bool = False, *,
                 config=None, lib: str | None = None, ncu: str | None = None, timeout: float = 900,
                 keep_csv: str | None = None) -> dict:
    """One launch of ``rung`` at ``shape`` under Nsight Compute -> summarize()'s dict plus
    kernel, shape, dtype, config, ncu (version), rejected_metrics; with ``vs_cublas`` also the
    key "cublas": the same for cuBLAS at the same shape.

    Raises ToolNotFoundError (no ncu), NcuPermissionError (ERR_NVGPUCTRPERM), NcuError,
    NoGPUError (no GPU, checked before ncu starts), ValueError (unknown rung / unsupported dtype).
    """
    from ..core.driver import NoGPUError, cuda, gpu_available
    from ..core.registry import get

    r = get(rung)
    r.require(dtype)
    config = r.config(config) if config is not None else None  # resolved here: the child gets JSON
    cuda()  # the child launches the kernel: cuda-python's extra is named before ncu or the GPU
    exe = find_ncu(ncu)
    if not gpu_available():
        raise NoGPUError("gemmlab profile needs an NVIDIA GPU and driver")
    out = _profile_one("rung", r.slug, tuple(shape), dtype, config=config, lib=lib, ncu=exe, timeout=timeout,
                       keep_csv=keep_csv)
    out["ncu"] = ncu_version(exe)
    if vs_cublas:
        out["cublas"] = profile_cublas(shape, dtype, lib=lib, ncu=exe, timeout=timeout, keep_csv=keep_csv)
    return out
