"""Disassembly and resource usage of a cubin, through NVIDIA's cuobjdump / nvdisasm (no GPU needed)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .toolchain import find_tool


def _run(tool: str, args: list[str], cubin: bytes) -> str:
    with tempfile.TemporaryDirectory(prefix="gemmlab-") as d:
        path = Path(d) / "kernel.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([find_tool(tool), *args, str(path)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


@dataclass(frozen=True)
class Resources:
    registers: int
    shared_static: int     # bytes
    local: int             # bytes of local memory per thread (stack frame / spills)
    constant: int          # bytes of constant bank 0 (parameters) — informational
    spill_stores: int      # bytes, from NVRTC's ptxas report when present, else derived from local
    spill_loads: int
    texture: int = 0
    sampler: int = 0


_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)(?:\s+CONSTANT\[0\]:(\d+))?(?:.*?TEXTURE:(\d+))?(?:.*?SAMPLER:(\d+))?")


def resource_usage(cubin: bytes) -> Resources:
    """Registers, static shared memory and local memory of the (single) kernel in ``cubin``."""
    out = _run("cuobjdump", ["--dump-resource-usage"], cubin)
    m = _RES.search(out)
    if not m:
        raise RuntimeError(f"could not read cuobjdump's resource usage:\n{out}")
    reg, stack, shared, local = (int(m.group(i)) for i in range(1, 5))
    const = int(m.group(5) or 0)
    # cuobjdump reports the per-thread stack frame (STACK) and local memory (LOCAL); a kernel
    # that spills has a non-zero frame. Spill bytes in/out are not split by cuobjdump, so both
    # are reported as the frame size (the guard is "zero", which this captures exactly).
    local_total = max(stack, local)
    return Resources(reg, shared, local_total, const, local_total, local_total,
                     int(m.group(6) or 0), int(m.group(7) or 0))


def sass(cubin: bytes) -> str:
    """SASS text of the cubin (cuobjdump -sass)."""
    return _run("cuobjdump", ["-sass"], cubin)


_OPCODE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)", re.M)


def opcodes(sass_text: str) -> list[str]:
    """Full opcodes with modifiers (e.g. ``LDG.E.128.CONSTANT``) in program order."""
    return _OPCODE.findall(sass_text)


def has_opcode(sass_text: str, claim: str) -> bool:
    """True if some instruction's opcode matches ``claim``: the claim's dot-separated parts all
    appear, in order, among the opcode's parts (``LDG.E.128`` matches ``LDG.E.128.CONSTANT`` and
    ``LDG.E.EL.128``; ``TEX`` matches ``TEX.SCR.LL`` but not ``TEXDEPBAR``)."""
    want = claim.split(".")
    for op in set(opcodes(sass_text)):
        parts = op.split(".")
        if parts[0] != want[0]:
            continue
        it = iter(parts[1:])
        if all(any(p == w for p in it) for w in want[1:]):
            return True
    return False
