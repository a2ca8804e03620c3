"""``gemmlab inspect``: what the compiler made of a rung, without a GPU.

For one rung (dtype, tile configuration, layouts) compiled for a target architecture:

* the PTX (from NVRTC) and the SASS (nvdisasm, else cuobjdump, from NVIDIA's wheels);
* resources: registers per thread, static and dynamic shared memory, local memory, spills;
* theoretical occupancy on that architecture (``gemmlab.occupancy``), with the limiting factor;
* the hot loop: the innermost SASS loop with the most FFMA/HMMA/HGMMA, found from the branch
  targets (``gemmlab.disasm.hot_loop``), and its instruction mix: math share, loads and stores by
  kind and width, barriers, address arithmetic.

``inspect_rung`` returns it all as a JSON-able dict; the CLI prints a short table, ``--json``,
``--ptx`` or ``--sass``.
"""

from __future__ import annotations

import json
from typing import Mapping

from . import disasm
from .occupancy import occupancy
from .registry import Rung, get
from .toolchain import arch_number, normalize_arch
from .variant import Variant

# problem size used to ask a rung for its launch geometry (only the dynamic shared memory is read;
# it does not depend on the size for any rung so far)
_PROBE = 4096


def _resolve_config(rung: Rung, config) -> Mapping[str, int] | str | None:
    """A preset name, a mapping, or a list of ``KEY=VALUE`` / preset strings (the CLI's form)."""
    if config is None or isinstance(config, (str, Mapping)):
        if isinstance(config, str) and "=" in config:
            config = [config]
        else:
            return config
    merged: dict[str, int] = {}
    overrides: dict[str, int] = {}
    for item in config:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                if part not in rung.presets:
                    raise ValueError(f"rung {rung.slug!r} has no preset {part!r}; presets: {sorted(rung.presets) or 'none'} "
                                     "(or give KEY=VALUE)")
                merged.update(rung.presets[part])
                continue
            k, v = (s.strip() for s in part.split("=", 1))
            try:
                overrides[k.upper() if k.upper() in rung.params else k] = int(v, 0)
            except ValueError:
                raise ValueError(f"--config {part!r}: the value must be an integer") from None
    merged.update(overrides)
    return merged


def analyze_sass(listing: str, function: str | None = None) -> dict:
    """Kernel-wide counts and the hot loop of one SASS listing (nvdisasm or cuobjdump), for
    ``function`` (default: the listing's first function)."""
    funcs = disasm.parse_sass_functions(listing)
    if not funcs:
        raise ValueError("no SASS instructions found in the listing")
    insns = funcs.get(function) if function in funcs else next(iter(funcs.values()))
    loops = disasm.find_loops(insns)
    hot = disasm.hot_loop(insns)
    hot_info = None
    if hot is not None:
        body = hot.body(insns)
        hot_info = {"start": hot.start, "end": hot.end, "start_hex": f"0x{hot.start:04x}", "end_hex": f"0x{hot.end:04x}",
                    "back_edges": list(hot.back_edges),
                    "nested_loops": sum(1 for lp in loops if hot.contains(lp))}
        hot_info.update(disasm.instruction_mix(body))
    kernel_mix = disasm.instruction_mix(insns)
    return {
        "instructions": kernel_mix["n_instructions"],
        "loops": [{"start": lp.start, "end": lp.end, "n_instructions": sum(1 for i in lp.body(insns) if i.base != "NOP"),
                   "math": sum(1 for i in lp.body(insns) if disasm.classify(i)[0] == "math")} for lp in loops],
        "kernel_mix": {k: kernel_mix[k] for k in ("ffma", "hmma", "hgmma", "other_mma", "math", "global_loads", "shared_loads",
                                                  "texture_loads", "global_stores", "shared_stores", "local_accesses",
                                                  "barriers")},
        "stl_instructions": sum(kernel_mix["stores"]["STL"].values()),
        "ldl_instructions": sum(kernel_mix["loads"]["LDL"].values()),
        "hot_loop": hot_info,
    }


def inspect_rung(rung: Rung | str, dtype: str | None = None, arch: str = "sm_90a", config=None,
                 a_col: bool = False, b_col: bool = False, *, with_text: bool = False) -> dict:
    """Everything ``gemmlab inspect`` reports for one rung, as a JSON-able dict.

    ``config``: None (defaults), a preset name, a mapping, or a list of ``KEY=VALUE`` / preset
    strings. ``with_text=True`` adds the ``ptx`` and ``sass`` listings.
    """
    rung = get(rung) if not isinstance(rung, Rung) else rung
    arch = normalize_arch(arch)
    if arch_number(arch) < rung.min_arch:
        raise ValueError(f"rung {rung.slug!r} needs sm_{rung.min_arch} or newer; {arch} was asked for")
    dtype = dtype or rung.dtypes[0]
    variant = Variant.make(rung, dtype, a_col=a_col, b_col=b_col, config=_resolve_config(rung, config))
    cfg = variant.cfg
    ck = variant.compile(arch)
    res = disasm.resource_usage(ck.cubin)
    listing = disasm.sass_listing(ck.cubin)
    analysis = analyze_sass(listing, rung.kernel)
    threads = rung.threads(cfg)
    dyn = rung.launch(_PROBE, _PROBE, cfg).smem
    out = {
        "rung": rung.slug,
        "number": rung.number,
        "title": rung.title,
        "variant": variant.describe(),
        "dtype": dtype,
        "arch": arch,
        "config": cfg,
        "a_col": bool(a_col),
        "b_col": bool(b_col),
        "threads_per_block": threads,
        "resources": {
            "registers": res.registers,
            "shared_static": res.shared_static,
            "shared_dynamic": dyn,
            "local": res.local,
            # bytes of local memory the kernel spills to (cuobjdump does not split stores/loads)
            "spill_stores": res.spill_stores,
            "spill_loads": res.spill_loads,
            # local-memory instructions in the whole kernel (spills or local arrays)
            "stl_instructions": analysis["stl_instructions"],
            "ldl_instructions": analysis["ldl_instructions"],
            "constant": res.constant,
        },
        "occupancy": occupancy(arch, threads, res.registers, res.shared_static + dyn),
        "hot_loop": analysis["hot_loop"],
        "loops": analysis["loops"],
        "kernel_mix": analysis["kernel_mix"],
        "ptx_lines": len(ck.ptx.splitlines()),
        "sass_lines": analysis["instructions"],
    }
    if with_text:
        out["ptx"] = ck.ptx
        out["sass"] = listing
    return out


# ---- CLI ---------------------------------------------------------------------------------------
def register(sub) -> None:
    p = sub.add_parser("inspect", help="PTX, SASS, resources, occupancy and hot-loop instruction mix of a rung (no GPU needed)",
                       description="Compile a rung for a target architecture and show what the compiler made of it: "
                                   "registers, shared memory, spills, theoretical occupancy with its limiting factor, and "
                                   "the instruction mix of the hot loop (the innermost SASS loop with the most FFMA/HMMA).")
    p.add_argument("rung", help="rung slug or number (see `gemmlab list`)")
    p.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default=None, help="default: the rung's first dtype")
    p.add_argument("--arch", default="sm_90a", help="target architecture (default sm_90a)")
    p.add_argument("--config", action="append", default=None, metavar="KEY=VALUE|PRESET",
                   help="tile parameter override (repeatable, e.g. --config BM=64 --config BK=16) or a preset name (e.g. 64x64)")
    p.add_argument("--a-col", action="store_true", help="A stored column-major")
    p.add_argument("--b-col", action="store_true", help="B stored column-major")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--ptx", action="store_true", help="print the PTX")
    g.add_argument("--sass", action="store_true", help="print the SASS")
    g.add_argument("--json", action="store_true", help="print everything as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    info = inspect_rung(args.rung, dtype=args.dtype, arch=args.arch, config=args.config,
                        a_col=args.a_col, b_col=args.b_col, with_text=args.ptx or args.sass)
    if args.ptx:
        print(info["ptx"])
        return 0
    if args.sass:
        print(info["sass"])
        return 0
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    render(info)
    return 0


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
    t = Table(title=f"hot loop {h['start_hex']}-{h['end_hex']} ({n} instr.)", title_justify="left",
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
