"""Reading Nsight Compute's raw CSV, and our summary of it.

``--csv --page raw --print-units base`` prints one header row of column names (the launch columns,
then one column per metric), one row of units and one row per profiled kernel. Everything is
looked up by column *name* (never position), values lose their thousands separators, units are
normalized to seconds / bytes / bytes per second / hertz, and "n/a" becomes ``None``. Several
kernels of one call (cuBLAS may launch a split-K GEMM and its reduction) are combined by
``aggregate``; ``summarize`` turns the metrics into the report's keys (``metrics.METRICS``).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .metrics import METRICS, STALL_LABEL, STALL_REASONS, Metric


class NcuError(RuntimeError):
    """ncu ran but produced no usable measurement (raised here when its output holds no raw CSV)."""


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



# ---- our summary --------------------------------------------------------------------------------
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
        "l2_sm_read_sectors": c["l2_sm_read_sectors"],
        "l2_sm_read_miss_sectors": c["l2_sm_read_miss_sectors"],
        "l2_fabric_sectors": c["l2_fabric_sectors"],
        "l2_fabric_read_sectors": c["l2_fabric_read_sectors"],
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

