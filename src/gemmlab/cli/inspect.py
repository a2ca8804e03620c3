"""``gemmlab inspect``: what the compiler made of a rung, without a GPU (see ``analysis.inspect``)."""

from __future__ import annotations

import json
from typing import Mapping

from ..analysis.inspect import hot_loop_listing, inspect_rung
from ..core.arch import OFFLINE_ARCH
from ..core.registry import get, kernels
from .common import UsageError, add_config, add_dtype


def register(sub) -> None:
    p = sub.add_parser("inspect", help="PTX, SASS, resources, occupancy and hot-loop instruction mix of a rung (no GPU needed)",
                       description="Compile a rung for a target architecture and show what the compiler made of it: "
                                   "registers, shared memory, spills, theoretical occupancy with its limiting factor, and "
                                   "the instruction mix of the hot loop (the innermost SASS loop with the most "
                                   "FFMA/HMMA) on its interior path, with the loop's edge-handling code counted apart.")
    p.add_argument("rung", nargs="?", help="rung slug or number (see `gemmlab list`)")
    add_dtype(p, None, "default: the rung's first dtype")
    p.add_argument("--arch", default=OFFLINE_ARCH, help=f"target architecture (default {OFFLINE_ARCH})")
    add_config(p)
    p.add_argument("--a-col", action="store_true", help="A stored column-major")
    p.add_argument("--b-col", action="store_true", help="B stored column-major")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--all", action="store_true", help="every rung side by side (its default dtype and config)")
    g.add_argument("--ptx", action="store_true", help="print the PTX")
    g.add_argument("--sass", action="store_true", help="print the hot loop's SASS, the interior path marked")
    g.add_argument("--sass-all", action="store_true", help="print the whole kernel's SASS")
    g.add_argument("--json", action="store_true", help="print everything as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.all:
        if args.rung or args.config:
            raise ValueError("--all inspects every rung in its default configuration: give no rung or --config")
        render_all([inspect_rung(r.slug, dtype=args.dtype if args.dtype in r.dtypes else None, arch=args.arch)
                    for r in kernels() if r.runs_on(args.arch)])
        return 0
    if not args.rung:
        raise UsageError("name a rung (see `gemmlab list`), or give --all")
    text = args.ptx or args.sass or args.sass_all
    info = inspect_rung(args.rung, dtype=args.dtype, arch=args.arch, config=args.config,
                        a_col=args.a_col, b_col=args.b_col, with_text=text)
    if args.ptx:
        print(info["ptx"])
    elif args.sass:
        print(hot_loop_listing(info["sass"], info["hot_loop"], get(args.rung).kernel))
    elif args.sass_all:
        print(info["sass"])
    elif args.json:
        print(json.dumps(info, indent=2))
    else:
        render(info)
    return 0


def _loads_text(h: Mapping) -> str:
    parts = [f"{kind} {_widths(d)}" for kind, d in h["loads"].items() if sum(d.values())]
    return "; ".join(parts) or "-"


def render_all(infos: list[dict], console=None) -> None:
    """The rungs side by side: registers, occupancy, hot-loop math share and load widths."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"gemmlab inspect --all ({infos[0]['arch'] if infos else ''}; interior path of each hot loop)")
    for col, kw in (("#", {"justify": "right"}), ("rung", {}), ("dtype", {}), ("regs", {"justify": "right"}),
                    ("smem", {"justify": "right"}), ("occupancy", {"justify": "right"}), ("limited by", {}),
                    ("math share", {"justify": "right"}), ("math", {}), ("loads (count x width)", {"overflow": "fold"}),
                    ("edge instr.", {"justify": "right"})):
        t.add_column(col, **kw)
    for info in infos:
        r, o, h = info["resources"], info["occupancy"], info["hot_loop"]
        math = "-" if not h else ", ".join(f"{k.upper()} {h[k]}" for k in ("ffma", "hmma", "hgmma", "other_mma") if h[k])
        t.add_row(str(info["number"]), info["rung"], info["dtype"], str(r["registers"]),
                  f"{r['shared_static'] + r['shared_dynamic']}", f"{o['occupancy_pct']:.0f}%", o["limiter"],
                  "-" if not h else f"{h['math_share']:.3f}", math or "-", "-" if not h else _loads_text(h),
                  "-" if not h else str(h["edge"]["n_instructions"]))
    import sys

    (console or (Console() if sys.stdout.isatty() else Console(width=180))).print(t)


_SHORT = {"threads": "threads", "blocks": "blocks", "registers": "regs", "shared memory": "smem"}


def _widths(d: Mapping[str, int]) -> str:
    parts = [f"{n}x{w}b" for w, n in d.items() if n]
    return " ".join(parts) if parts else "-"


def render(info: dict, console=None) -> None:
    """The compact, readable view of ``inspect_rung``'s dict."""
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    cfg = " ".join(f"{k}={v}" for k, v in info["config"].items())
    con.print(f"[bold]{info['number']:02d} {info['rung']}[/bold] [dim]{info['dtype']} {info['arch']} {cfg}, "
              f"{info['threads_per_block']} threads/block[/dim]")
    r, o = info["resources"], info["occupancy"]

    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="cyan")
    t.add_column(justify="right")
    t.add_column(style="dim")
    t.add_row("registers", str(r["registers"]), f"per thread ({o['regs_per_warp_allocated']} per warp allocated)")
    t.add_row("shared memory", f"{r['shared_static'] + r['shared_dynamic']} B",
              f"static {r['shared_static']}, dynamic {r['shared_dynamic']}; {o['smem_per_block_allocated']} B allocated")
    spilled = r["local"] or r["stl_instructions"] or r["ldl_instructions"]
    t.add_row("local/spills", f"{r['local']} B" if spilled else "none",
              f"{r['stl_instructions']} STL, {r['ldl_instructions']} LDL" if spilled else "")
    lim = o["limits"]
    t.add_row("occupancy", f"{o['occupancy_pct']:.1f}%",
              f"{o['blocks_per_sm']} blocks, {o['warps_per_sm']}/{o['max_warps_per_sm']} warps per SM")
    t.add_row("limited by", f"[bold]{o['limiter']}[/bold]",
              "blocks/SM by " + ", ".join(f"{_SHORT[k]} {v}" for k, v in lim.items()))
    if not o["fits"]:
        t.add_row("[red]no launch[/red]", "", o["reason"])
    con.print(t)

    h = info["hot_loop"]
    if h is None:
        con.print("[yellow]no loop with math instructions found in the SASS[/yellow]")
        return
    n = h["n_instructions"]
    t = Table(title=f"hot loop {h['start_hex']}-{h['end_hex']}, interior path: {n} instructions per trip "
                    f"(edge code beside it: {h['edge']['n_instructions']})", title_justify="left",
              box=None, pad_edge=False)
    t.add_column("class", style="cyan")
    t.add_column("count", justify="right")
    t.add_column("share", justify="right")
    t.add_column("detail", style="dim")

    def row(name, count, detail=""):
        if count or name == "math":
            t.add_row(name, str(count), f"{100 * count / n:.1f}%" if n else "-", detail)

    row("math", h["math"], ", ".join(f"{k.upper()} {h[k]}" for k in ("ffma", "hmma", "hgmma", "other_mma") if h[k]) or "-")
    for kind, d in h["loads"].items():
        row(kind, sum(d.values()), _widths(d))
    for kind, d in h["stores"].items():
        row(kind, sum(d.values()), _widths(d))
    row("barriers", h["barriers"])
    row("sync", h["sync"])
    row("address/int", h["address_arith"])
    row("other float", h["fp_other"])
    row("control", h["control"])
    row("other", h["other"])
    con.print(t)
    seed = ("" if not h["ffma"] else f", FFMA/(FFMA+LDS) {h['ffma_lds_share']:.3f}" if h["shared_loads"]
            else f", FFMA/(FFMA+loads) {h['ffma_load_share']:.3f}")
    con.print(f"FFMA share {h['ffma_share']:.3f}, math share {h['math_share']:.3f}{seed}"
              + (f"; contains {h['nested_loops']} loop(s) without math" if h["nested_loops"] else ""))
    s = h.get("schedule")
    if s:
        where = ", ".join(f"{op} {c}" for op, c in list(s["stalls_by_opcode"].items())[:5]) or "none"
        con.print(f"issue (control codes): {s['issue_cycles']} cycles per trip for one warp, "
                  f"{s['fixed_stall_cycles']} of them fixed-latency stalls ({where}); "
                  f"math per issue cycle {s['math_per_issue_cycle']:.3f}")
