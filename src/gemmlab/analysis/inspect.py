"""``gemmlab inspect``: what the compiler made of a rung, without a GPU.

For one rung (dtype, tile configuration, layouts) compiled for a target architecture:

* the PTX (from NVRTC) and the SASS (nvdisasm, else cuobjdump, from NVIDIA's wheels);
* resources: registers per thread, static and dynamic shared memory, local memory, spills;
* theoretical occupancy on that architecture (``gemmlab.occupancy``), with the limiting factor;
* the hot loop: the innermost SASS loop with the most FFMA/HMMA/HGMMA, found from the branch
  targets (``gemmlab.disasm.hot_loop``), and its instruction mix: math share, loads and stores by
  kind and width, barriers, address arithmetic; and from the control codes ptxas wrote into each
  instruction (Volta and newer), the cycles one warp needs to issue a trip and the fixed stalls
  in them (``gemmlab.analysis.hotpath.issue_schedule``).

``inspect_rung`` returns it all as a JSON-able dict; the CLI prints a short table, ``--json``,
``--ptx`` or ``--sass``.
"""

from __future__ import annotations

import re

from ..core.arch import limits, normalize_arch
from ..core.compile import check_arch
from ..core.config import ConfigLike
from ..core.packing import kernel_layout
from ..core.registry import Rung, get
from ..core.variant import Variant
from . import disasm, hotpath
from .occupancy import occupancy


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
        path = hotpath.hot_path(insns, hot)
        on_path = {i.offset for i in path}
        edge = [i for i in body if i.offset not in on_path]
        hot_info = {"start": hot.start, "end": hot.end, "start_hex": f"0x{hot.start:04x}", "end_hex": f"0x{hot.end:04x}",
                    "back_edges": list(hot.back_edges),
                    "nested_loops": sum(1 for lp in loops if hot.contains(lp)),
                    "path_offsets": sorted(on_path)}
        # the mix of one trip on the interior path; the loop's edge-handling code apart
        hot_info.update(disasm.instruction_mix(path))
        edge_mix = disasm.instruction_mix(edge)
        hot_info["edge"] = {k: edge_mix[k] for k in ("n_instructions", "math", "loads", "stores", "load_instructions",
                                                     "store_instructions", "control")}
        hot_info["body_instructions"] = disasm.instruction_mix(body)["n_instructions"]
        # the control codes on that path: one warp's issue cycles per trip, the fixed stalls in them
        hot_info["schedule"] = hotpath.issue_schedule(path)
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


def inspect_rung(rung: Rung | str, dtype: str | None = None, arch: str = "sm_90a", config: ConfigLike = None,
                 a_col: bool = False, b_col: bool = False, *, with_text: bool = False) -> dict:
    """Everything ``gemmlab inspect`` reports for one rung, as a JSON-able dict.

    ``config``: any form of ``core.config`` (None for the defaults). ``with_text=True`` adds the ``ptx`` and ``sass`` listings.
    """
    rung = get(rung) if not isinstance(rung, Rung) else rung
    arch = normalize_arch(arch)
    check_arch(arch)
    dtype = dtype or rung.dtypes[0]
    rung.require(dtype, arch)
    c_col = False
    if rung.k_major:   # its kernel sees the layouts its plans make: copies, and rung 22's transposed problem
        a_col, b_col, c_col = kernel_layout(a_col, b_col, True, rung.reads_register_a())
    variant = Variant.make(rung, dtype, a_col=a_col, b_col=b_col, config=config, c_col=c_col)
    cfg = variant.cfg
    lim = limits(arch)
    rung.check_resources(cfg, lim, variant.precision)
    ck = variant.compile(arch)
    res = disasm.resource_usage(ck.cubin, ck.log)
    listing = disasm.sass_listing(ck.cubin)
    analysis = analyze_sass(listing, rung.kernel)
    threads = rung.threads(cfg)
    dyn = variant.smem   # a 3xTF32 stage holds two planes
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
        "c_col": bool(c_col),
        "threads_per_block": threads,
        "resources": {
            "registers": res.registers,
            "shared_static": res.shared_static,
            "shared_dynamic": dyn,
            "local": res.local,
            # ptxas's own report (NVRTC log): bytes spilled to and reloaded from local memory
            "spill_stores": res.spill_stores,
            "spill_loads": res.spill_loads,
            "stack_frame": res.stack_frame,
            # local-memory instructions in the whole kernel (spills or local arrays)
            "stl_instructions": analysis["stl_instructions"],
            "ldl_instructions": analysis["ldl_instructions"],
            "constant": res.constant,
        },
        "occupancy": occupancy(lim, threads, res.registers, res.shared_static + dyn),
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


_OFFSET = re.compile(r"/\*([0-9a-fA-F]{4,})\*/")


def hot_loop_listing(listing: str, hot: dict | None, function: str | None = None) -> str:
    """The SASS lines of the hot loop, each marked: ``>`` on the interior path (one steady-state
    trip), ``.`` edge-handling code; the loop's first and last lines are named."""
    if not hot:
        return "(no loop with math instructions in this kernel)"
    on_path = set(hot.get("path_offsets") or ())
    out = [f"// hot loop {hot['start_hex']}-{hot['end_hex']}: '>' interior path "
           f"({hot['n_instructions']} instructions), '.' edge code ({hot['edge']['n_instructions']})"]
    inside = function is None
    for line in listing.splitlines():
        if function is not None and (f".text.{function}:" in line or f"Function : {function}" in line):
            inside = True
        m = _OFFSET.search(line)
        if not inside or not m:
            continue
        off = int(m.group(1), 16)
        if hot["start"] <= off <= hot["end"]:
            mark = ">" if off in on_path else "."
            tag = "   <- loop start" if off == hot["start"] else "   <- back-edge" if off in hot["back_edges"] else ""
            out.append(f"{mark} {line.strip()}{tag}")
        elif off > hot["end"] and len(out) > 1:
            break
    return "\n".join(out)
