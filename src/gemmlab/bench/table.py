"""The benchmark's result on the terminal: header lines (device, clocks, versions) and a rich
table, cuBLAS first then the ladder per requested shape, with its caption (what % peak is of,
how it was timed). Pure: reads only the result dict."""

from __future__ import annotations

import sys

from ..core.shapes import fmt_shape
from ..measure.timing import describe_order


def _fmt_tflops(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _ordered(result: dict) -> list[dict]:
    """Rows in table order: per requested shape, the peers first (cuBLAS leading), then the ladder."""
    recs = result.get("results", [])

    def req(r):
        return tuple(r.get("requested_shape") or (r["M"], r["N"], r["K"]))

    order: list[tuple] = []
    for r in recs:
        if req(r) not in order:
            order.append(req(r))

    def key(r):
        shape = (r["M"], r["N"], r["K"])
        peer = r.get("peer", r["kernel"] == "cublas")
        return (order.index(req(r)), 0 if peer else 1, 0 if r["kernel"] == "cublas" else 1, r["kernel"] == "auto",
                r.get("number", 0), shape != req(r))

    return sorted(recs, key=key)


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x" if v >= 0.1 else f"{v:.3f}x"


def _status_cells(r: dict) -> tuple[str, str]:
    status = r.get("status", "ok")
    if status == "failed" or r.get("verified") is False and r["kernel"] != "cublas":
        return "[red]FAILED[/red]", "[red]FAILED[/red]"
    if status in ("error", "skipped"):
        return f"[yellow]{status}[/yellow]", "-"
    check = {True: "[green]ok[/green]", False: "[red]FAILED[/red]", None: "-"}[r.get("verified")]
    return check, f"{r['ms']:.3f}" if r.get("ms") is not None else "-"


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _energy_cells(r: dict) -> list[str]:
    """Sustained mode's columns: board power, SM clock, energy per call, GFLOP/J, energy against cuBLAS."""
    return [_num(r.get("watts"), ".0f"), _num(r.get("sm_mhz"), ".0f"), _num(r.get("mj"), ".4g"),
            _num(r.get("gflop_per_j"), ".0f"), _ratio(r.get("energy_vs_cublas"))]


ENERGY_COLUMNS = ("W", "MHz", "mJ/call", "GFLOP/J", "energy vs cuBLAS")


BANDWIDTH_COLUMNS = ("GB/s", "% copy BW")


def _bandwidth_cells(r: dict) -> list[str]:
    return [_num(r.get("gbps"), ".0f"), _num(r.get("pct_copy_bw"), ".1f")]


def has_bandwidth(result: dict) -> bool:
    """Whether the run measured the copy bandwidth (bench's ``bandwidth``: a memory-bound suite)."""
    return bool(result.get("settings", {}).get("copy_bandwidth"))


def _row(r: dict, sustained: bool = False, bandwidth: bool = False) -> list[str]:
    check, ms = _status_cells(r)
    noise = r.get("noise")
    pct = f"{r['pct_peak']:.1f}%" if r.get("pct_peak") is not None else "-"
    peer = r.get("peer", r["kernel"] == "cublas")
    name = {"cublas": "cuBLAS", "triton": "Triton"}.get(r["kernel"], r["kernel"]) if peer else r["kernel"]
    num = "" if peer else str(r.get("number", ""))
    return [num, name, fmt_shape((r["M"], r["N"], r["K"])), ms, "-" if noise is None else f"{100 * noise:.1f}%",
            str(r.get("samples") or len(r.get("times_ms") or [])), _fmt_tflops(r.get("tflops")),
            _ratio(r.get("vs_cublas")), _ratio(r.get("vs_best_peer")), pct,
            *(_bandwidth_cells(r) if bandwidth else []), *(_energy_cells(r) if sustained else []), check,
            r.get("note") or ""]


def is_sustained(result: dict) -> bool:
    """Whether the result was timed in the engine's sustained mode (blocks of back-to-back launches)."""
    tm = result.get("settings", {}).get("timing")
    return isinstance(tm, dict) and (tm.get("sustained_s") or 0) > 0


def build_table(result: dict):
    """The results as a rich Table (pure: reads only the result dict)."""
    from rich.table import Table

    settings = result.get("settings", {})
    env = result.get("env", {})
    sustained = is_sustained(result)
    bandwidth = has_bandwidth(result)
    title = (f"gemmlab bench{' --sustained' if sustained else ''} -- {env.get('gpu_name') or 'GPU'}, "
             f"{settings.get('dtype', '')}{_precision_text(settings)}")
    t = Table(title=title, caption=_caption(result), caption_justify="left")
    fixed = {"no_wrap": True}
    right = {"justify": "right", "no_wrap": True}
    cols = [("#", right), ("rung", fixed), ("shape", fixed), ("ms", right), ("noise", right), ("n", right),
            ("TFLOP/s", right), ("vs cuBLAS", right), ("vs best peer", right), ("% peak", right)]
    cols += [(c, right) for c in BANDWIDTH_COLUMNS] if bandwidth else []
    cols += [(c, right) for c in ENERGY_COLUMNS] if sustained else []
    cols += [("check", fixed), ("note", {"overflow": "fold", "min_width": 20})]
    for col, kw in cols:
        t.add_column(col, **kw)
    prev_req = None
    for r in _ordered(result):
        req = tuple(r.get("requested_shape") or (r["M"], r["N"], r["K"]))
        if prev_req is not None and req != prev_req:
            t.add_section()
        prev_req = req
        t.add_row(*_row(r, sustained, bandwidth))
    return t


def _precision_text(s: dict) -> str:
    """", computed as tf32 (cuBLAS: tf32)" when the rungs do not compute in the dtype's own
    precision; nothing otherwise (and for a JSON from before precisions)."""
    prec, dtype = s.get("compute_precision"), s.get("dtype")
    if not prec or prec == dtype:
        return ""
    return f", computed as {prec} (cuBLAS baseline: {s.get('baseline_precision') or dtype})"


def _peak_text(result: dict) -> str | None:
    s, peaks = result.get("settings", {}), (result.get("env", {}).get("peaks") or {})
    if not s.get("peak_tflops"):
        missing = ", ".join(peaks.get("unknown") or []) or "unknown"
        return f"% peak: no peak for this device ({missing})"
    if not peaks.get("clock_mhz"):
        return f"% peak: of {s['peak_tflops']:.1f} TFLOP/s ({s.get('peak_kind', '')})"
    rate = (f"{peaks.get('fp32_fma_per_clk_sm')} FMA/clk x 2" if s.get("peak_kind") == "fp32 CUDA cores"
            else f"{peaks.get('tensor_flop_per_clk_sm')} flop/clk")
    return (f"% peak: of {s['peak_tflops']:.1f} TFLOP/s ({s.get('peak_kind', '')}: {peaks.get('sm_count')} SMs x "
            f"{rate} x {peaks['clock_mhz']:.0f} MHz, the {peaks.get('clock_source') or 'maximum SM clock'})")


def _timing_text(s: dict) -> str:
    tm = s.get("timing")
    if not isinstance(tm, dict):  # a JSON from before the timing engine
        return (f"median of {s.get('repeats')} repeats after {s.get('warmup')} warm-up runs, "
                f"L2 {'flushed' if s.get('flush_l2') else 'NOT flushed'} before each run, "
                f"cuBLAS via {s.get('lib')} interleaved with the rungs")
    if (tm.get("sustained_s") or 0) > 0:
        return (f"sustained: median of {tm.get('sustained_rounds')} blocks of back-to-back launches, about "
                f"{tm.get('sustained_s')} s of GPU time each, in serpentine order after one untimed block each "
                f"(no flush, nothing between a block's launches: the GPU at its steady state, for a large "
                f"tensor-core GEMM the power cap); power from the slope of NVML's energy counter in each block, "
                f"energy per call = power x time per call; cuBLAS via {s.get('lib')}; clocks: {tm.get('clocks', 'n/a')}")
    return (f"median of {tm.get('min_samples')}-{tm.get('max_samples')} samples (until the median's standard error "
            f"is <= {100 * tm.get('target_error', 0):.1f}% or {tm.get('time_cap_s')} s) after {tm.get('warmup')} "
            f"warm-up runs; L2 {'flushed' if tm.get('l2') == 'cold' else 'NOT flushed (hot)'} and a "
            f"{tm.get('spin_us'):.0f} us spin before every timed launch; "
            f"rounds in {describe_order(tm.get('order'))}; "
            f"cuBLAS via {s.get('lib')}; clocks: {tm.get('clocks', 'n/a')}")


def _caption(result: dict) -> str:
    """The table's caption: what % peak is a percentage of, how the figures were timed, and the
    self-check's verdict."""
    s = result.get("settings", {})
    parts = [p for p in (_peak_text(result), _timing_text(s)) if p]
    copy = s.get("copy_bandwidth")
    if copy:
        parts.append(f"GB/s: A and B read once and C written once per median; % copy BW: of {copy['dram_bw_Bps'] / 1e9:.0f} "
                     f"GB/s, a device-to-device copy of {copy['copy_bytes'] / 2**20:.0f} MiB measured in this run")
    check = result.get("self_check")
    if check:
        verdict = {True: "self-check OK: ", False: "SELF-CHECK FAILED: ", None: "self-check: "}[check.get("ok")]
        parts.append(verdict + check.get("message", ""))
    throttled = sum(r.get("throttled_samples") or 0 for r in result.get("results", []))
    if throttled:
        parts.append(f"{throttled} samples were taken at throttled SM clocks (see the notes)")
    return "\n".join(parts)


def summary_lines(result: dict) -> list[str]:
    """Header lines: device, clocks before and after, versions."""
    env = result.get("env", {})
    lib = env.get("libraries") or {}
    cb, ca = env.get("clocks_before") or {}, env.get("clocks_after") or {}

    def clk(c):
        if c.get("sm_mhz") is None:
            return "n/a"
        extra = f", {c['temperature_c']} C" if c.get("temperature_c") is not None else ""
        extra += f", {c['power_w']:.0f} W" if c.get("power_w") is not None else ""
        return f"SM {c['sm_mhz']} MHz, mem {c.get('mem_mhz')} MHz{extra}"

    mhz = env.get("max_sm_clock_mhz")
    lines = [
        f"{env.get('gpu_name')} ({env.get('arch')}, {env.get('sm_count')} SMs, max SM clock "
        f"{f'{mhz:.0f}' if mhz is not None else 'n/a'} MHz, L2 {((env.get('l2_bytes') or 0) / 2**20):.0f} MiB)",
        f"driver {env.get('driver_version')}, CUDA {env.get('cuda_driver_version')}, NVRTC {env.get('nvrtc_version')}, "
        f"torch {lib.get('torch')}, cupy {lib.get('cupy')}, gemmlab {result.get('gemmlab_version')}"
        + (f" ({env['git_commit'][:10]}{'+dirty' if env.get('git_dirty') else ''})" if env.get("git_commit") else ""),
        f"clocks before: {clk(cb)}; after: {clk(ca)}",
    ]
    if cb.get("sm_mhz") is None and cb.get("error"):
        lines.append(f"(no NVML clocks: {cb['error']})")
    return lines


def suite_lines(result: dict) -> list[str]:
    """Per kernel timed at several shapes: the geometric mean of its ratios to cuBLAS and the
    shapes below the floor (bench's ``summary``), the dispatch (auto) first."""
    summary = result.get("summary") or {}
    lines = []
    for name in sorted(summary, key=lambda n: (n != "auto", n)):
        s = summary[name]
        below = ", ".join(f"{fmt_shape(b['shape'])} ({_ratio(b['vs_cublas'])})" for b in s["below_floor"]) or "none"
        lines.append(f"{name}: geomean {_ratio(s['geomean_vs_cublas'])} cuBLAS over {s['shapes']} shapes; "
                     f"shapes below {s['floor']}x: {below}")
    return lines


def render(result: dict, console=None) -> None:
    """Print the header lines, the table, and a suite's summary lines (to ``console``, default stdout)."""
    from rich.console import Console

    # a log file gets a wide table; a terminal gets its own width
    con = console or (Console() if sys.stdout.isatty() else Console(width=200))
    for line in summary_lines(result):
        con.print(line, highlight=False, markup=False)
    con.print(build_table(result))
    for line in suite_lines(result):
        con.print(line, highlight=False, markup=False)
