"""The interior path of a SASS loop and what it issues: one trip through the hot loop on its fast
path (matrix-edge code left aside), its issue schedule from the control words, and the register
reads of its FFMAs (bank conflicts). Built on ``disasm``'s parsed instructions and loops."""

from __future__ import annotations

import re
from typing import Iterable

from .disasm import THREAD_ENDS, Instruction, Loop, access_width, classify


_FETCHES = frozenset({"LDG", "LDGSTS", "TMA", "TEX"})


def _path_score(i: Instruction) -> tuple[int, int, int]:
    cat, _ = classify(i)
    wide = cat in ("load", "store") and access_width(i) == "128"
    return (1 if cat == "math" else 0, 0 if i.base == "NOP" else -1, 1 if wide else 0)


def _fetches(i: Instruction) -> bool:
    cat, kind = classify(i)
    return cat == "load" and kind in _FETCHES


def hot_path(insns: list[Instruction], loop: Loop) -> list[Instruction]:
    """The instructions of one trip through ``loop`` on its interior (fast) path.

    The loop body's forward branches make a graph from the loop's start to its back-edges. The
    path chosen has the most math instructions; then, if some path with that math reads global
    memory (LDG, LDGSTS, TMA, texture), one that does (the last trips skip the next tile's
    prefetch); then the fewest instructions; then the most 128-bit memory accesses. Matrix-edge
    code is off that path: a scalar fallback beside a vector access, the checked copies of a
    tile at the matrix's edge taken on a branch beside the interior copies (rung 18's SPREAD
    loop, which an earlier rule of "most 128-bit accesses first" walked into)."""
    body = loop.body(insns)
    index = {i.offset: k for k, i in enumerate(body)}
    ends = set(loop.back_edges)
    n = len(body)
    neg = (-(10**9), 0, 0)
    # best[c][k]: the best score of a path from body[k] to a back-edge that fetches (c=1) or not (c=0)
    best = [[neg] * n for _ in range(2)]
    nxt: list[list[int | None]] = [[None] * n for _ in range(2)]
    for k in range(n - 1, -1, -1):
        i = body[k]
        own = _path_score(i)
        fetch = _fetches(i)
        if i.offset in ends:
            best[1 if fetch else 0][k] = own
            continue
        unconditional = not i.predicate or i.predicate in ("@PT",)
        jumps_forward = i.is_jump and i.target > i.offset and i.target in index
        if i.is_jump and unconditional:
            succ = [index[i.target]] if jumps_forward else []
        elif i.base in THREAD_ENDS and unconditional:
            succ = []
        else:
            succ = [k + 1] if k + 1 < n else []
            if jumps_forward:
                succ.append(index[i.target])
        for c in (0, 1):
            # a path of class c through here continues as class c, or as either class after a fetch
            options = [(best[cc][j], j) for j in succ for cc in ((0, 1) if fetch and c == 1 else () if fetch else (c,))]
            options = [o for o in options if o[0] != neg]
            if not options:
                continue
            sc, j = max(options, key=lambda o: o[0])
            best[c][k] = tuple(a + b for a, b in zip(own, sc))
            nxt[c][k] = j
    if best[0][0] == neg and best[1][0] == neg:
        return body
    c = 1 if best[1][0] != neg and best[1][0][0] >= best[0][0][0] else 0
    path, k = [], 0
    while k is not None:
        path.append(body[k])
        j = nxt[c][k]
        if c == 1 and _fetches(body[k]) and j is not None:
            # after the fetch the rest of the path is whichever class scored best from there
            c = 1 if best[1][j] >= best[0][j] else 0
        k = j
    return path


def issue_schedule(path: Iterable[Instruction]) -> dict | None:
    """What the control codes say about one warp issuing ``path`` (Volta and newer).

    ``issue_cycles``: the sum of the stall counts ptxas wrote, the cycles one warp needs to issue
    the path if no scoreboard (memory or barrier) holds it: the single-warp bound the other warps
    on the scheduler fill in. ``fixed_stall_cycles`` = issue cycles - instructions: cycles lost to
    fixed latencies (an instruction whose result the next one reads, a branch, an LDS.128 or
    LDGSTS issued right after another). ``math_per_issue_cycle`` = math instructions / issue
    cycles: 1.0 is a warp that issues math every cycle. ``stalls_by_opcode``: where the fixed
    stalls sit. ``reused_operands``: source operands of the math read from the operand reuse cache.
    None when the listing has no encodings."""
    path = list(path)
    if not path or any(i.control is None for i in path):
        return None
    cycles = sum(i.stall for i in path)
    by_op: dict[str, int] = {}
    for i in path:
        if i.stall > 1:
            by_op[i.base] = by_op.get(i.base, 0) + i.stall - 1
    math = [i for i in path if classify(i)[0] == "math"]
    return {
        "issue_cycles": cycles,
        "fixed_stall_cycles": cycles - len(path),
        "math_per_issue_cycle": round(len(math) / cycles, 4) if cycles else 0.0,
        "stalls_by_opcode": dict(sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0]))),
        "reused_operands": sum(bin(i.reuse).count("1") for i in math),
        **ffma_operand_reads(path),
    }


_SRC_REG = re.compile(r"^[-|!]*R(\d+)(?:\.reuse)?\|?$")
# ALU instructions with register sources in the operand slots an FFMA uses: they replace what the
# reuse cache holds (memory, branch and uniform-datapath instructions do not read those slots)
_SLOT_READERS = frozenset({"IADD3", "IMAD", "LOP3", "ISETP", "SEL", "LEA", "SHF", "MOV", "FSEL", "FADD", "FMUL",
                           "FSETP", "VIMNMX", "IMNMX", "PRMT", "IABS"})


def ffma_register_reads(path: Iterable[Instruction]):
    """Each FFMA of ``path`` (with control codes) as (instruction, the source registers it reads
    from the register file, whether two of those share a bank, mod 4); the model of
    ``ffma_operand_reads``."""
    cache: dict[int, int] = {}
    for i in path:
        if i.base != "FFMA":
            if i.base in _SLOT_READERS:
                cache = {}
            continue
        regs = []
        for o in [o.strip() for o in i.operands.split(",")][1:4]:
            m = _SRC_REG.match(o)
            regs.append(int(m.group(1)) if m and int(m.group(1)) != 255 else None)
        reads = [r for s, r in enumerate(regs) if r is not None and cache.get(s) != r]
        cache = {s: r for s, r in enumerate(regs) if r is not None and i.reuse >> s & 1}
        yield i, reads, len({r % 4 for r in reads}) < len(reads)


def ffma_operand_reads(path: Iterable[Instruction]) -> dict:
    """The register-file reads of the FFMAs on ``path``: ``ffma_three_reads`` FFMAs read all three
    sources from the register file (none from the operand reuse cache), and
    ``ffma_bank_collisions`` of those have two sources in one bank, taking the bank as the register
    number mod 4. The model is fitted, not documented: on the H100, Nsight Compute's per-instruction
    sampling of rung 18 (``gemmlab profile --source``;
    benchmarks/profiles/h100_ffma_dispatch_async_simt_fp32_4096.json) put more dispatch stalls on
    FFMAs with three reads than on those with two, and more again on the three-read ones with a
    collision mod 4. A source comes from the reuse cache when the previous FFMA flagged the
    same register in the same slot with no other ALU instruction reading registers between them."""
    path = list(path)
    if any(i.control is None for i in path):
        return {}
    three = [collide for _, reads, collide in ffma_register_reads(path) if len(reads) == 3]
    return {"ffma_three_reads": len(three), "ffma_bank_collisions": sum(three)}
