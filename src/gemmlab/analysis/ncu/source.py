"""Per-instruction warp-state sampling (``gemmlab profile --source``): which SASS instructions the
warps were stalled at, and why.

Nsight Compute's SourceCounters section samples, every few cycles, the program counter of one warp
per scheduler and the state it is in (issuing, not selected, stalled on a dispatch stall, on a
short scoreboard ...). ``--page source --csv --print-source sass`` exports one row per SASS
instruction: its address, its text, the sample counts by reason (``stall_dispatch``,
``stall_short_sb`` ...) and how many times it ran. The kernel-wide stall table of ``gemmlab
profile`` says *how much* time a reason takes; this says *where*: by opcode (are the dispatch
stalls on the FFMAs or on the LDS?) and at which instructions.

The measurement is one launch, as for the counters (``python -m gemmlab.measure.ncu_target``
between cuProfilerStart and cuProfilerStop), written to an ncu report and exported from it.
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import tempfile
from typing import Mapping, Sequence

from .parse import NcuError
from .run import check_permission

# ncu's source-page column suffix -> our stall reason (metrics.STALL_REASONS)
SOURCE_STALLS: dict[str, str] = {
    "long_sb": "long_scoreboard", "mio": "mio_throttle", "short_sb": "short_scoreboard", "wait": "wait",
    "barrier": "barrier", "not_selected": "not_selected", "selected": "selected", "math": "math_pipe_throttle",
    "lg": "lg_throttle", "tex": "tex_throttle", "dispatch": "dispatch_stall", "no_inst": "no_instruction",
    "branch_resolving": "branch_resolving", "drain": "drain", "membar": "membar", "sleep": "sleeping",
    "imc": "imc_miss", "gmma": "gmma", "misc": "misc",
}
SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
_PRED = re.compile(r"^@!?U?P[T0-9]+\s+")


def record_command(ncu: str, target: Sequence[str], report: str) -> list[str]:
    """ncu writing the SourceCounters (per-instruction sampling) of the measured call to ``report``."""
    return [ncu, "--clock-control", "none", "--cache-control", "all", "--profile-from-start", "off",
            "--target-processes", "all", "--section", "SourceCounters", "--section", "WarpStateStats",
            "-f", "-o", report, *target]


def export_command(ncu: str, report: str) -> list[str]:
    """ncu exporting a report's source page: one CSV row per SASS instruction."""
    return [ncu, "-i", report, "--page", "source", "--csv", "--print-source", "sass"]


def parse_source_csv(text: str) -> dict[str, list[dict]]:
    """ncu's source-page CSV -> {kernel name: rows}. Each kernel's block starts with a
    ``"Kernel Name","<name>"`` line and its own header row; rows are dicts by column name."""
    out: dict[str, list[dict]] = {}
    name, header = None, None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            name, header = (row[1] if len(row) > 1 else ""), None
            out.setdefault(name, [])
            continue
        if name is None:
            continue
        if header is None:
            header = row
            continue
        if len(row) == len(header):
            out[name].append(dict(zip(header, row)))
    if not any(out.values()):
        raise NcuError("ncu's source page held no instruction rows (no SourceCounters in the report?)")
    return out


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def _opcode(sass: str) -> str:
    return _PRED.sub("", sass.strip()).split(" ", 1)[0].split(".", 1)[0]


def summarize_source(rows: list[dict], top: int = 12) -> dict:
    """One kernel's rows -> where its warps spent their sampled time.

    ``samples``: all samples; ``reasons``: each reason's share of them (summed over the
    instructions), largest first; ``by_opcode``: per opcode, its instructions executed, its samples
    and the samples of each reason; ``hottest``: the ``top`` instructions by samples, with their
    address, SASS, executions and three largest reasons."""
    stall_cols = {c: SOURCE_STALLS[c[len("stall_"):]] for c in (rows[0] if rows else {})
                  if c.startswith("stall_") and "(" not in c and c[len("stall_"):] in SOURCE_STALLS}
    total = sum(_num(r.get(SAMPLES, "0")) for r in rows)
    reasons: dict[str, float] = {}
    by_op: dict[str, dict] = {}
    for r in rows:
        op = _opcode(r.get("Source", ""))
        if not op:
            continue
        e = by_op.setdefault(op, {"executed": 0.0, "samples": 0.0, "reasons": {}})
        e["executed"] += _num(r.get(EXECUTED, "0"))
        e["samples"] += _num(r.get(SAMPLES, "0"))
        for col, reason in stall_cols.items():
            v = _num(r[col])
            if v:
                reasons[reason] = reasons.get(reason, 0.0) + v
                e["reasons"][reason] = e["reasons"].get(reason, 0.0) + v
    ordered = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
    hottest = []
    for r in sorted(rows, key=lambda r: -_num(r.get(SAMPLES, "0")))[:top]:
        rs = {reason: _num(r[col]) for col, reason in stall_cols.items() if _num(r[col])}
        hottest.append({"address": r.get("Address", ""), "sass": r.get("Source", "").strip(),
                        "executed": _num(r.get(EXECUTED, "0")), "samples": _num(r.get(SAMPLES, "0")),
                        "reasons": dict(sorted(rs.items(), key=lambda kv: -kv[1])[:3])})
    return {
        "samples": total,
        "reasons": {k: round(v / total, 4) if total else 0.0 for k, v in ordered.items()},
        "by_opcode": dict(sorted(by_op.items(), key=lambda kv: -kv[1]["samples"])),
        "hottest": hottest,
    }


def reason_by_opcode(summary: dict, reason: str) -> dict[str, float]:
    """The share of ``reason``'s samples at each opcode, largest first (where a stall sits)."""
    total = sum(e["reasons"].get(reason, 0.0) for e in summary["by_opcode"].values())
    shares = {op: e["reasons"].get(reason, 0.0) / total for op, e in summary["by_opcode"].items()
              if total and e["reasons"].get(reason)}
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def record_source(ncu: str, target: Sequence[str], *, timeout: float = 900,
                  env: Mapping[str, str] | None = None) -> dict[str, list[dict]]:
    """Run ``target`` under ncu with SourceCounters and export the source page: {kernel: rows}."""
    with tempfile.TemporaryDirectory(prefix="gemmlab-ncu-src-") as tmp:
        report = os.path.join(tmp, "source")
        cmd = record_command(ncu, target, report)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise NcuError(f"ncu did not finish in {timeout:.0f} s: {' '.join(cmd)}") from None
        out = "\n".join((proc.stdout or "", proc.stderr or ""))
        check_permission(out)
        path = report + ".ncu-rep"
        if not os.path.exists(path):
            tail = "\n".join(out.strip().splitlines()[-25:])
            raise NcuError(f"ncu wrote no report (exit code {proc.returncode}). Command:\n  {' '.join(cmd)}\n"
                           f"Last lines of its output:\n{tail}")
        exp = subprocess.run(export_command(ncu, path), capture_output=True, text=True, timeout=timeout)
        if exp.returncode != 0:
            raise NcuError(f"ncu could not export the source page ({exp.returncode}): {exp.stderr.strip()[-2000:]}")
        return parse_source_csv(exp.stdout)
