"""``gemmlab profile``: hardware counters of a rung (and cuBLAS) under Nsight Compute."""

from __future__ import annotations

import json

from ..analysis.ncu import STALL_LABEL, STALL_MEANING, reason_by_opcode
from ..measure.ncu_profile import profile_rung, profile_source
from ..core.config import parse_config
from ..core.registry import get
from ..core.shapes import PROFILE_SHAPE, fmt_shape, parse_shape
from .common import UsageError, add_config, add_dtype, add_lib, add_precision, checked


def register(sub) -> None:
    p = sub.add_parser("profile", help="hardware counters of one rung (and cuBLAS) under Nsight Compute (GPU + ncu)")
    p.add_argument("rung", help="rung slug or number (see `gemmlab list`)")
    p.add_argument("--shape", default=fmt_shape(PROFILE_SHAPE), type=checked(parse_shape), help=f"N, N^3 or MxNxK (default {fmt_shape(PROFILE_SHAPE)})")
    add_dtype(p, None, "default: the rung's first dtype")
    add_precision(p)
    add_config(p)
    p.add_argument("--vs-cublas", action="store_true",
                   help="profile cuBLAS at the same shape too (with TF32 for --precision tf32, else exact)")
    add_lib(p)
    p.add_argument("--ncu", default=None, help="path to ncu (default: $GEMMLAB_NCU, PATH, the CUDA install)")
    p.add_argument("--keep-csv", default=None, metavar="DIR", help="also save ncu's raw CSV output in DIR")
    p.add_argument("--source", action="store_true",
                   help="per-instruction warp-state sampling instead of the counters: where each stall reason "
                        "sits, by opcode and at the hottest SASS instructions")
    p.add_argument("--top", type=int, default=12, help="with --source: how many of the hottest instructions to list")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "s":
        return f"{v * 1e3:.3f} ms" if v >= 1e-3 else f"{v * 1e6:.1f} us"
    if unit == "B":
        for div, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if abs(v) >= div:
                return f"{v / div:.2f} {name}"
        return f"{v:.0f} B"
    if unit == "B/s":
        return f"{v / 1e9:.1f} GB/s"
    if unit == "Hz":
        return f"{v / 1e9:.3f} GHz"
    if unit == "ratio":
        return f"{v:.2f}"
    if abs(v) >= 1e6:
        return f"{v:.3g}"
    return f"{v:,.2f}" if v != int(v) else f"{int(v):,}"


# (summary key, label, unit) rows of the CLI table, in the order the seeds discuss them
TABLE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("duration_s", "duration", "s"),
    ("tflops", "achieved TFLOP/s", "ratio"),
    ("sm_clock_hz", "SM clock", "Hz"),
    ("achieved_occupancy", "achieved occupancy", "%"),
    ("ipc", "IPC (executed)", "ratio"),
    ("issued_ipc", "IPC (issued)", "ratio"),
    ("sm_throughput_pct", "SM throughput", "%"),
    ("bank_conflicts_ld", "shared ld bank conflicts", ""),
    ("bank_conflicts_st", "shared st bank conflicts", ""),
    ("shared_ld_throughput", "shared load throughput", "B/s"),
    ("shared_st_throughput", "shared store throughput", "B/s"),
    ("l1_throughput_pct", "L1/TEX throughput", "%"),
    ("l2_throughput_pct", "L2 throughput", "%"),
    ("dram_throughput_pct", "DRAM throughput", "%"),
    ("l1_bytes", "L1/TEX bytes", "B"),
    ("l2_bytes", "L2 bytes", "B"),
    ("l2_sm_read_sectors", "L2 sectors read by the SMs", ""),
    ("l2_fabric_sectors", "L2 sectors across its fabric", ""),
    ("dram_bytes", "DRAM bytes (read+write)", "B"),
    ("arithmetic_intensity", "FLOPs per DRAM byte", "ratio"),
    ("ffma_count", "FFMA (thread instructions)", ""),
    ("tensor_inst_count", "tensor instructions", ""),
    ("registers", "registers per thread", ""),
)


def run(args) -> int:
    rung = get(args.rung)
    dtype = args.dtype or rung.dtypes[0]
    shape = parse_shape(args.shape)
    if args.source:
        if args.keep_csv:
            raise ValueError("--keep-csv saves the counters' CSV; --source has none (use --json)")
        if args.top < 1:
            raise UsageError(f"--top must be at least 1, got {args.top}")
        res = profile_source(rung.slug, shape, dtype, args.vs_cublas, config=parse_config(args.config), lib=args.lib,
                             ncu=args.ncu, precision=args.precision, top=args.top)
        if args.json:
            print(json.dumps(res, indent=2, default=str))
        else:
            render_source(res)
        return 0
    res = profile_rung(rung.slug, shape, dtype, args.vs_cublas, config=parse_config(args.config), lib=args.lib,
                       ncu=args.ncu, keep_csv=args.keep_csv, precision=args.precision)
    if args.json:
        print(json.dumps(res, indent=2, default=str))
        return 0
    from rich.console import Console

    con = Console()
    # a call of several kernels: the whole call, then each of its kernels (then cuBLAS)
    cols = [(rung.slug, res)] + [(f"{rung.slug}: {k['kernel']}", k) for k in res.get("per_kernel", [])]
    cols += [("cuBLAS", res["cublas"])] if res.get("cublas") else []
    as_ = f" as {res['precision']}" if res.get("precision") and res["precision"] != dtype else ""
    title = f"gemmlab profile {rung.slug} {dtype}{as_} {'x'.join(map(str, shape))}  (ncu {res.get('ncu', '?')})"
    con.print(_counter_table(title, cols))
    for name, r in cols:
        con.print(_stall_table(name, r))
    missing = sorted(set(res["missing"]) | set((res.get("cublas") or {}).get("missing", [])))
    if missing:
        con.print(f"[dim]not available from this ncu/GPU: {', '.join(missing)}[/dim]")
    return 0


def _counter_table(title: str, cols: list[tuple[str, dict]]):
    """The TABLE_ROWS counters, one column per profiled kernel (the rung, then cuBLAS)."""
    from rich.table import Table

    t = Table(title=title)
    t.add_column("counter")
    for name, _ in cols:
        t.add_column(name, justify="right")
    for key, label, unit in TABLE_ROWS:
        t.add_row(label, *[_fmt(r.get(key), unit) for _, r in cols])
    return t


def _stall_table(name: str, r: dict, top: int = 6):
    """The ``top`` warp stall reasons of one profiled kernel, with their share and meaning."""
    from rich.table import Table

    st = Table(title=f"top warp stalls: {name}  ({_fmt(r.get('warp_cycles_per_issue'), 'ratio')} cycles between issues)")
    st.add_column("reason")
    st.add_column("cycles/issue", justify="right")
    st.add_column("share", justify="right")
    st.add_column("meaning")
    for s in r["stalls"][:top]:
        st.add_row(s["label"], f"{s['cycles_per_issue']:.2f}", f"{100 * s['share']:.0f}%", STALL_MEANING[s["reason"]])
    return st


def render_source(res: dict, console=None) -> None:
    """``--source``: for each profiled kernel, its stall reasons, where the largest ones sit (by
    opcode) and the hottest instructions."""
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    kernels = [("", name, s) for name, s in res["kernels"].items()]
    kernels += [("cuBLAS: ", name, s) for name, s in (res.get("cublas") or {}).get("kernels", {}).items()]
    for who, name, s in kernels:
        short = name if len(name) <= 70 else name[:67] + "..."
        t = Table(title=f"{who}{short}: {s['samples']:,.0f} warp samples", title_justify="left")
        t.add_column("reason")
        t.add_column("share", justify="right")
        t.add_column("where (share of the reason's samples by opcode)")
        for reason, share in list(s["reasons"].items())[:6]:
            where = ", ".join(f"{op} {100 * v:.0f}%" for op, v in list(reason_by_opcode(s, reason).items())[:4])
            t.add_row(STALL_LABEL.get(reason, reason), f"{100 * share:.1f}%", where)
        con.print(t)
        h = Table(title="hottest instructions", title_justify="left")
        for col, kw in (("address", {}), ("SASS", {"overflow": "fold"}), ("executed", {"justify": "right"}),
                        ("samples", {"justify": "right"}), ("largest reasons", {})):
            h.add_column(col, **kw)
        for i in s["hottest"]:
            rs = ", ".join(f"{STALL_LABEL.get(k, k)} {v:.0f}" for k, v in i["reasons"].items())
            h.add_row(i["address"], i["sass"], f"{i['executed']:,.0f}", f"{i['samples']:,.0f}", rs)
        con.print(h)
