"""Disassembly and resource usage of a cubin, through NVIDIA's cuobjdump / nvdisasm (no GPU needed)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..core.compile import ptxas_report
from ..core.toolchain import find_tool


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
    local: int             # bytes of local memory per thread (stack frame / local arrays / spills)
    constant: int          # bytes of constant bank 0 (parameters) — informational
    spill_stores: int | None  # bytes, from ptxas's report in NVRTC's log (None: no report)
    spill_loads: int | None
    stack_frame: int | None = None  # bytes, from ptxas's report
    texture: int = 0
    sampler: int = 0


_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)(?:\s+CONSTANT\[0\]:(\d+))?(?:.*?TEXTURE:(\d+))?(?:.*?SAMPLER:(\d+))?")
def resource_usage(cubin: bytes, log: str = "") -> Resources:
    """Registers, static shared memory and local memory of the (single) kernel in ``cubin``
    (cuobjdump), and the spill bytes from ptxas's report in the compile ``log``."""
    out = _run("cuobjdump", ["--dump-resource-usage"], cubin)
    m = _RES.search(out)
    if not m:
        raise RuntimeError(f"could not read cuobjdump's resource usage:\n{out}")
    reg, stack, shared, local = (int(m.group(i)) for i in range(1, 5))
    const = int(m.group(5) or 0)
    rep = ptxas_report(log) or {}
    # The kernel's own static shared memory: ptxas's figure. On sm_90 cuobjdump's SHARED also
    # holds the 1 KB the driver reserves per block (smem rung: 9216 = 8192 + 1024; Nsight
    # Compute splits it the same way), which the occupancy calculator adds by itself.
    shared = rep.get("smem", shared)
    return Resources(reg, shared, max(stack, local), const, rep.get("spill_stores"), rep.get("spill_loads"),
                     rep.get("stack_frame"), int(m.group(6) or 0), int(m.group(7) or 0))


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


# ================================================================================================
# SASS as data: instructions, control flow, loops, instruction mix (what `gemmlab inspect` reads)
# ================================================================================================
#
# Both listings are accepted by ``parse_sass``:
#   nvdisasm -c:      ``.L_x_4:`` label lines and ``@P1 BRA `(.L_x_4) ;``
#   cuobjdump -sass:  ``@P1 BRA 0x340 ;`` (absolute offset inside the function) and encoding comments
# Instruction lines look alike in both: ``/*0730*/   [@!P0] OPCODE.MODS operands ;``.

@dataclass(frozen=True)
class Instruction:
    offset: int                 # byte offset inside the function
    opcode: str                 # with modifiers, e.g. "LDG.E.128.CONSTANT"
    operands: str = ""          # raw operand text, e.g. "R44, desc[UR6][R44.64]"
    predicate: str = ""         # "@P0", "@!P1", "@UP0" ... or ""
    target: int | None = None   # offset a branch / BSSY / CALL refers to, when it names one
    control: int | None = None  # the 23 scheduling bits ptxas wrote (Volta and newer; None without encodings)

    @property
    def stall(self) -> int | None:
        """Cycles the warp waits before issuing its next instruction (the control code's fixed
        latency; 1 = back to back). None when the listing carries no encodings."""
        return None if self.control is None else max(self.control & 0xF, 1)

    @property
    def reuse(self) -> int:
        """Operand reuse-cache flags: bit s set = source operand s is kept for the next instruction."""
        return 0 if self.control is None else (self.control >> 17) & 0xF

    @property
    def base(self) -> str:
        """The opcode without modifiers: ``LDG.E.128`` -> ``LDG``."""
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    @property
    def is_jump(self) -> bool:
        """A branch that can transfer control to ``target`` (BRA, JMP; predicated or not)."""
        return self.base in _JUMPS and self.target is not None


_JUMPS = frozenset({"BRA", "JMP"})
_FUNC_NVDISASM = re.compile(r"^\s*\.text\.([A-Za-z_$][\w$.]*):\s*$")
_FUNC_CUOBJDUMP = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_LABEL = re.compile(r"^\s*(\.L[\w$.]+):\s*$")
_INSN = re.compile(
    r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+"          # offset
    r"(?:\{\s*)?"                               # VLIW pair opening brace (old archs)
    r"(@!?U?P[T0-9]+\s+)?"                      # predicate
    r"([A-Z][A-Z0-9_.]*)"                       # opcode
    r"([^;]*);"                                 # operands, up to the terminating ';'
)
_ENCODING = re.compile(r";\s*/\*\s*0x([0-9a-fA-F]{16})\s*\*/")    # first word, after the ';'
_ENCODING_HI = re.compile(r"^\s*/\*\s*0x([0-9a-fA-F]{16})\s*\*/\s*$")  # a line holding only a word
_LABEL_REF = re.compile(r"`\((\.L[\w$.]+)\)")
_ADDR_REF = re.compile(r"(?<![\w\[+-])0x([0-9a-fA-F]+)\s*$")


def parse_sass_functions(text: str) -> dict[str, list[Instruction]]:
    """Every function of an nvdisasm or cuobjdump listing: name -> instructions in address order.
    Branch targets given as labels (nvdisasm) or absolute offsets (cuobjdump) both land in
    ``Instruction.target``."""
    current = ""  # instructions before any function header (a bare excerpt) go to function ""
    funcs: dict[str, list[tuple[int, str, str, str]]] = {current: []}
    labels: dict[str, dict[str, int]] = {current: {}}
    pending: dict[str, list[str]] = {current: []}
    # Volta and newer encode an instruction in 128 bits: cuobjdump (and nvdisasm -hex) print the
    # first 64-bit word after the ';' and the second on the next line, alone. Its top 23 bits are
    # the control code (stall cycles, yield, scoreboards, reuse flags). Maxwell/Pascal listings put a
    # control word before every three instructions instead: decoded only when every instruction of
    # a function has its own pair.
    words: dict[str, dict[int, list[int]]] = {current: {}}
    last: int | None = None
    for line in text.splitlines():
        m = _ENCODING_HI.match(line)
        if m:
            if last is not None and len(words[current].get(last, ())) == 1:
                words[current][last].append(int(m.group(1), 16))
            last = None
            continue
        m = _FUNC_NVDISASM.match(line) or _FUNC_CUOBJDUMP.match(line)
        if m:
            current = m.group(1)
            funcs.setdefault(current, [])
            labels.setdefault(current, {})
            words.setdefault(current, {})
            pending[current] = []
            last = None
            continue
        m = _LABEL.match(line)
        if m:
            pending[current].append(m.group(1))
            continue
        m = _INSN.match(line)
        if not m:
            last = None
            continue
        off = int(m.group(1), 16)
        enc = _ENCODING.search(line, m.end() - 1)
        last = off if enc else None
        if enc:
            words[current][off] = [int(enc.group(1), 16)]
        for lab in pending[current]:
            labels[current][lab] = off
        pending[current] = []
        pred = (m.group(2) or "").strip()
        funcs[current].append((off, pred, m.group(3), m.group(4).strip().rstrip(",").strip()))
    out: dict[str, list[Instruction]] = {}
    for name, rows in funcs.items():
        if not rows:
            continue
        end = rows[-1][0] + 16
        for lab in pending.get(name, []):  # labels after the last instruction: the function's end
            labels[name][lab] = end
        pairs = words.get(name, {})
        decode = all(len(pairs.get(off, ())) == 2 for off, *_ in rows)
        insns = []
        for off, pred, op, operands in rows:
            target = None
            lm = _LABEL_REF.search(operands)
            if lm and lm.group(1) in labels[name]:
                target = labels[name][lm.group(1)]
            elif op.split(".", 1)[0] in _LABEL_TAKERS:
                am = _ADDR_REF.search(operands)
                if am:
                    target = int(am.group(1), 16)
            control = pairs[off][1] >> 41 if decode else None
            insns.append(Instruction(off, op, operands, pred, target, control))
        out[name] = insns
    return out


# opcodes whose last operand may be a code address in cuobjdump's listing
_LABEL_TAKERS = frozenset({"BRA", "JMP", "BSSY", "CALL", "SSY", "PBK", "PCNT"})


def parse_sass(text: str, function: str | None = None) -> list[Instruction]:
    """The instructions of ``function`` (default: the first function of the listing)."""
    funcs = parse_sass_functions(text)
    if not funcs:
        raise ValueError("no SASS instructions found in the listing")
    if function is None:
        return next(iter(funcs.values()))
    if function not in funcs:
        raise ValueError(f"function {function!r} not in the listing; it has {', '.join(funcs)}")
    return funcs[function]


def sass_nvdisasm(cubin: bytes) -> str:
    """nvdisasm's listing of the code sections (labels ``.L_x_N`` as branch targets), with each
    instruction's encoding (``-hex``: the control codes ``Instruction.control`` decodes)."""
    return _run("nvdisasm", ["-c", "-hex"], cubin)


def sass_listing(cubin: bytes) -> str:
    """The most readable listing available: nvdisasm's, else cuobjdump's (same instructions)."""
    try:
        return sass_nvdisasm(cubin)
    except Exception:  # nvdisasm missing (ToolNotFoundError) or refused the cubin
        return sass(cubin)


# ---- loops -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Loop:
    start: int                   # offset of the loop head (the back-edges' target)
    end: int                     # offset of the last back-edge branch
    back_edges: tuple[int, ...]  # offsets of the branches that jump back to ``start``

    def contains(self, other: "Loop") -> bool:
        return self != other and self.start <= other.start and other.end <= self.end

    def body(self, insns: Iterable[Instruction]) -> list[Instruction]:
        return [i for i in insns if self.start <= i.offset <= self.end]


def find_loops(insns: list[Instruction]) -> list[Loop]:
    """Natural loops from back-edges: a jump to an offset at or before its own. Back-edges that
    share a target make one loop, from the target to the last of them. Sorted by start."""
    by_target: dict[int, list[int]] = {}
    for i in insns:
        if i.is_jump and i.target <= i.offset:
            by_target.setdefault(i.target, []).append(i.offset)
    return sorted((Loop(t, max(srcs), tuple(sorted(srcs))) for t, srcs in by_target.items()),
                  key=lambda lp: (lp.start, lp.end))


def innermost_loops(loops: list[Loop]) -> list[Loop]:
    """Loops that contain no other loop."""
    return [lp for lp in loops if not any(lp.contains(o) for o in loops)]


# ---- instruction classes -----------------------------------------------------------------------
_FFMA = frozenset({"FFMA", "FFMA32I", "FFMA2"})
_TEX = frozenset({"TEX", "TEXS", "TLD", "TLDS", "TLD4", "TLD4S", "TXD", "TMML", "TXQ"})
_LOADS = {"LDG": "LDG", "LDS": "LDS", "LDL": "LDL", "LD": "LD", "LDGSTS": "LDGSTS", "LDSM": "LDSM",
          "LDC": "LDC", "ULDC": "LDC", "UTMALDG": "TMA", "UBLKCP": "TMA", **{t: "TEX" for t in _TEX}}
_STORES = {"STG": "STG", "STS": "STS", "STL": "STL", "ST": "ST", "STSM": "STSM", "UTMASTG": "TMA",
           "ATOM": "ATOM", "ATOMG": "ATOM", "ATOMS": "ATOMS", "RED": "RED", "REDG": "RED"}
_BARRIERS = frozenset({"BAR", "BARRIER"})
_SYNC = frozenset({"DEPBAR", "MEMBAR", "WARPSYNC", "ERRBAR", "CGAERRBAR", "SYNCS", "FENCE", "ARRIVES",
                   "WARPGROUP", "TEXDEPBAR", "CCTL", "UCGABAR_ARV", "UCGABAR_WAIT"})
_CONTROL = frozenset({"BRA", "BRX", "BRXU", "JMP", "JMX", "JMXU", "CALL", "RET", "EXIT", "BSSY", "BSYNC",
                      "BREAK", "BMOV", "BPT", "KILL", "YIELD", "NANOSLEEP", "RTT", "ACQBULK", "ENDCOLLECTIVE"})
_INT = frozenset({"IADD3", "IADD", "IADD32I", "IMAD", "IMAD32I", "IMADSP", "IMUL", "IMUL32I", "LEA", "SHF",
                  "SHL", "SHR", "LOP3", "LOP", "LOP32I", "ISETP", "ICMP", "IABS", "IMNMX", "VIADD",
                  "VIADDMNMX", "VIMNMX", "VIMNMX3", "IDP", "IDP4A", "MOV", "MOV32I", "SEL", "PRMT", "POPC",
                  "FLO", "BREV", "BMSK", "SGXT", "PLOP3", "PSETP", "P2R", "R2P", "S2R", "S2UR", "CS2R",
                  "R2UR", "IMMA_ADDR", "ISCADD", "XMAD", "IADD3X"})
_FP_OTHER_EXTRA = frozenset({"MUFU", "I2F", "I2FP", "F2I", "F2F", "F2FP", "FRND", "FCHK", "I2I", "I2IP"})
MEMORY_KINDS_LOAD = ("LDG", "LDS", "TEX", "LDGSTS", "LDSM", "LDL", "LD", "LDC", "TMA")
MEMORY_KINDS_STORE = ("STG", "STS", "STL", "ST", "STSM", "ATOM", "ATOMS", "RED", "TMA")
WIDTHS = ("8", "16", "32", "64", "128")


def _tex_width(operands: str) -> str:
    """Texture fetch width from the channel mask (last operand after the dimension); no mask = 4 channels."""
    ops = [o.strip() for o in operands.split(",")]
    if not ops:
        return "32"
    last = ops[-1]
    dims = ("1D", "2D", "3D", "CUBE", "ARRAY_1D", "ARRAY_2D", "ARRAY_3D", "ARRAY_CUBE")
    if last in dims:
        channels = 4
    else:
        try:
            channels = bin(int(last, 16)).count("1") if last.startswith("0x") and len(ops) > 1 and ops[-2] in dims else 1
        except ValueError:
            channels = 1
    return "128" if channels >= 4 else "64" if channels >= 2 else "32"


def access_width(insn: Instruction) -> str:
    """Bits per thread of a load/store: ``"8"``, ``"16"``, ``"32"``, ``"64"`` or ``"128"``."""
    base, mods = insn.base, insn.modifiers
    if base in _TEX:
        return _tex_width(insn.operands)
    if base == "LDSM" or base == "STSM":  # LDSM.16.M88.4: four 8x8 matrices = 4 registers per thread
        n = mods[-1] if mods and mods[-1].isdigit() else "1"
        return {"4": "128", "2": "64"}.get(n, "32")
    if "128" in mods:
        return "128"
    if "64" in mods:
        return "64"
    if "U16" in mods or "S16" in mods:
        return "16"
    if "U8" in mods or "S8" in mods:
        return "8"
    return "32"


def classify(insn: Instruction) -> tuple[str, str]:
    """(category, detail). Categories: ``math`` (detail ffma/hmma/hgmma/mma), ``load``/``store``
    (detail = memory kind), ``barrier``, ``sync``, ``control``, ``fp_other``, ``address_arith``,
    ``nop``, ``other`` (detail = base opcode)."""
    b = insn.base
    if b == "NOP":
        return "nop", b
    if b in _FFMA:
        return "math", "ffma"
    if b == "HMMA":
        return "math", "hmma"
    if b == "HGMMA":
        return "math", "hgmma"
    if b.endswith("MMA"):  # IMMA, DMMA, QGMMA, IGMMA, BGMMA, UTCHMMA ...
        return "math", "mma"
    if b in _LOADS:
        return "load", _LOADS[b]
    if b in _STORES:
        return "store", _STORES[b]
    if b in _BARRIERS:
        return "barrier", b
    if b in _SYNC:
        return "sync", b
    if b in _CONTROL:
        return "control", b
    if b in _INT or (b.startswith("U") and b[1:] in _INT) or b in ("UMOV", "USEL", "ULDC"):
        return "address_arith", b
    if b in _FP_OTHER_EXTRA or (b[0] in "FHD" and b not in ("DEPBAR",)):
        return "fp_other", b
    return "other", b


def instruction_mix(insns: Iterable[Instruction]) -> dict:
    """Counts of a stretch of SASS by class, NOPs left out of every total.

    ``math_share`` = (FFMA + HMMA + HGMMA + other MMA) / all; ``ffma_share`` = FFMA / all;
    ``ffma_lds_share`` = FFMA / (FFMA + shared-memory loads): the figure seed 000 reads off its
    inner loop in PTX (1/3 for two scalar shared loads per FMA, 8/9 for 2 LDS.128 per 16 FFMA,
    16/17 for 4 LDS.128 per 64 FFMA); ``ffma_load_share`` = FFMA / (FFMA + all loads), the same
    with global and texture loads counted too (meaningful for rungs without shared memory).
    """
    loads = {k: dict.fromkeys(WIDTHS, 0) for k in MEMORY_KINDS_LOAD}
    stores = {k: dict.fromkeys(WIDTHS, 0) for k in MEMORY_KINDS_STORE}
    cats = dict.fromkeys(("math", "fp_other", "load", "store", "barrier", "sync", "address_arith", "control", "other"), 0)
    math = dict.fromkeys(("ffma", "hmma", "hgmma", "mma"), 0)
    opcodes: dict[str, int] = {}
    nops = 0
    for i in insns:
        cat, detail = classify(i)
        if cat == "nop":
            nops += 1
            continue
        cats[cat] += 1
        opcodes[i.base] = opcodes.get(i.base, 0) + 1
        if cat == "math":
            math[detail] += 1
        elif cat == "load":
            loads[detail][access_width(i)] += 1
        elif cat == "store":
            stores[detail][access_width(i)] += 1
    n = sum(cats.values())
    n_loads = cats["load"]
    n_math = cats["math"]
    n_shared_loads = sum(loads["LDS"].values()) + sum(loads["LDSM"].values())

    def share(a, b):
        return round(a / b, 4) if b else 0.0

    return {
        "n_instructions": n,
        "nops": nops,
        "ffma": math["ffma"], "hmma": math["hmma"], "hgmma": math["hgmma"], "other_mma": math["mma"],
        "math": n_math,
        "math_share": share(n_math, n),
        "ffma_share": share(math["ffma"], n),
        "ffma_lds_share": share(math["ffma"], math["ffma"] + n_shared_loads),
        "ffma_load_share": share(math["ffma"], math["ffma"] + n_loads),
        "loads": loads,
        "stores": stores,
        "global_loads": sum(loads["LDG"].values()) + sum(loads["LDGSTS"].values()) + sum(loads["TMA"].values()),
        "shared_loads": n_shared_loads,
        "texture_loads": sum(loads["TEX"].values()),
        "global_stores": sum(stores["STG"].values()),
        "shared_stores": sum(stores["STS"].values()) + sum(stores["STSM"].values()),
        "local_accesses": sum(loads["LDL"].values()) + sum(stores["STL"].values()),
        "load_instructions": n_loads,
        "store_instructions": cats["store"],
        "barriers": cats["barrier"],
        "sync": cats["sync"],
        "address_arith": cats["address_arith"],
        "control": cats["control"],
        "fp_other": cats["fp_other"],
        "other": cats["other"],
        "opcodes": dict(sorted(opcodes.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def hot_loop(insns: list[Instruction]) -> Loop | None:
    """The innermost loop with the most math (FFMA/HMMA/HGMMA/MMA) instructions.

    "Innermost" is taken among loops that do math: a loop whose only nested loops do no math
    (a runtime-trip-count copy loop, the trailing ``BRA self`` trap) still counts as innermost,
    which is what a fully unrolled k-loop inside the tile loop looks like. Ties go to the
    loop with the higher math share, then the earlier one. None when no loop does math.
    """
    loops = find_loops(insns)

    def n_math(lp: Loop) -> int:
        return sum(1 for i in lp.body(insns) if classify(i)[0] == "math")

    counts = {lp: n_math(lp) for lp in loops}
    mathy = [lp for lp in loops if counts[lp] > 0]
    # A back-edge from a stub placed after the kernel's exit (an mbarrier wait's retry, out of
    # line) makes a "loop" whose address range spans the epilogue and the EXIT: no trip runs that
    # range. Such ranges compete only when no other loop does math (rung 19's k-loop, 4 HGMMA,
    # lost to one of them spanning 256 epilogue FFMA).
    mathy = [lp for lp in mathy if not _spans_exit(lp, insns)] or mathy
    inner = innermost_loops(mathy)
    if not inner:
        return None

    def key(lp: Loop):
        size = sum(1 for i in lp.body(insns) if i.base != "NOP")
        return (counts[lp], counts[lp] / max(size, 1), -lp.start)

    return max(inner, key=key)


def _spans_exit(lp: Loop, insns: list[Instruction]) -> bool:
    """Whether the address range of ``lp`` holds an unconditional EXIT (the function's end)."""
    return any(i.base in THREAD_ENDS and i.predicate in ("", "@PT") for i in lp.body(insns))


# the instructions that end a thread
THREAD_ENDS = frozenset({"EXIT", "RET", "KILL"})
