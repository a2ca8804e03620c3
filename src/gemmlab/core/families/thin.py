"""Rung 23 (thin, FP32): C with a side of at most ``THIN_MAX``; its tile sides, shared memory,
constraints and the dispatch rule's tile. Rung 24 (decode, 16-bit) has its own module,
core/decode.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import MAX_SMEM_PER_BLOCK

if TYPE_CHECKING:
    from ..registry import Rung


THIN_MAX = 32           # the widest thin side the kernel takes (its 4-k chunks x 8 k groups)


def thin_sides(cfg) -> tuple[int, int]:
    """(thin, wide) sides of a thin tile: N is the thin one when BN <= BM, else M (23_thin.cu)."""
    return min(cfg["BM"], cfg["BN"]), max(cfg["BM"], cfg["BN"])


def thin_smem(cfg) -> int:
    """23_thin.cu's dynamic shared memory, the larger of its two uses: STAGES stages of the wide
    operand's BR x BK tile (rows padded by 16 floats in the layout that pads) and the thin one's
    BK x NS tile (rows of NS + 4 floats when NS/4 is even), or after the K loop the THREADS/4
    slots of BR x NS partial sums (+4 floats each), FP32."""
    ns, br = thin_sides(cfg)
    q_ld = ns + (0 if (ns // 4) % 2 else 4)
    pipe = cfg["STAGES"] * cfg["BK"] * (br + (16 if br % 32 == 0 else 0) + q_ld) * 4
    red = cfg["THREADS"] // 4 * (br * ns + 4) * 4
    return max(pipe, red)


def thin_constraints(cfg) -> list[str]:
    """What 23_thin.cu static_asserts: a thin side of 4..32 in steps of 4, a wide side of 16 or 32
    rows (whole 16-row groups; 64 rows spilled under NVRTC 13.0 on the H100), whole 4-k chunks of each K tile per thread (BK a multiple of THREADS), at most
    128 partial sums per thread, at least 2 stages; shared memory within a block's."""
    ns, br = thin_sides(cfg)
    out = []
    if ns % 4 or ns > THIN_MAX:
        out.append(f"the thin side min(BM, BN)={ns} must be a multiple of 4, at most {THIN_MAX}")
    if br % 16 or br > 32:
        out.append(f"the wide side max(BM, BN)={br} must be 16 or 32 (4 row groups of float4; 64-row tiles, 16 rows "
                   f"per thread, spilled 8-16 bytes under NVRTC 13.0)")
    if cfg["BK"] % cfg["THREADS"]:
        out.append(f"BK={cfg['BK']} must be a multiple of THREADS={cfg['THREADS']} (each thread takes whole 4-k "
                   f"chunks of every K tile)")
    if br // 4 * ns > 128:
        out.append(f"a {cfg['BM']}x{cfg['BN']} tile gives each thread {br // 4}x{ns} = {br // 4 * ns} partial sums; "
                   f"at most 128 fit the registers")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']} must be at least 2 (a stage in flight while one is computed)")
    if not out and thin_smem(cfg) > MAX_SMEM_PER_BLOCK:
        out.append(f"the tile needs {thin_smem(cfg)} B of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out


def thin_rule_config(rung: Rung, M: int, N: int) -> dict[str, int]:
    """The thin tile for a kernel-view M x N (one of them at most ``rung.thin``): the thin side the
    smallest of 4, 8, 16, 32 that holds it, the wide side 32 rows (16 beside a thin side of 32: at
    most 128 partial sums per thread), the rung's other defaults."""
    thin = min(M, N)
    ns = next(s for s in (4, 8, 16, 32) if s >= min(thin, THIN_MAX))
    br = min(32, 512 // ns)
    bm, bn = (br, ns) if N <= M else (ns, br)
    return rung.config({"BM": bm, "BN": bn})
