"""Rung 24 (decode, kernels/24_decode.cu): its geometry, constraints and selection rule.

The kernel multiplies a wide operand P (the side of C longer than the tile's thin side) by a thin
one Q: a block owns ``max(BM, BN)`` rows of P (64 per warp) and ``min(BM, BN)`` (8, 16 or 32)
columns of Q, N being the thin side when ``BN <= BM``. ``WK`` warps share each 64 rows and take
interleaved 32-k chunks; SPLITK blocks take slices of K, summed in a cluster (SKCLUSTER=1) or
through the workspace. The registry's entry (core/registry.py) reads this module; nothing here
reads the registry.
"""

from __future__ import annotations

import itertools
from typing import Mapping

from .arch import arch_number
from .splitk import CLUSTER_ARCH, MAX_SPLITK, MAX_SPLITK_CLUSTER as MAX_CLUSTER

THIN16_MAX = 32          # the widest thin side a block takes (4 n-tiles of 8); wider sides are tiled
THIN_SIDES = (8, 16, 32)
ROWS_PER_WARP = 64       # 4 m-tiles of 16 rows
CHUNK = 32               # k per warp step
MAX_WK = 8
MAX_WIDE = 256           # 4 warps along the rows: more adds nothing a second block would not

MAX_DEPTH = 6
MAX_DEPTH_ASYNC = 8      # the ring in shared memory (ASYNC=1): its depth costs no registers


def registers(cfg: Mapping[str, int]) -> int:
    """Registers a thread needs: about 44 + 4 per n-tile for each of the DEPTH chunks in its ring
    (P's 8 x 16 bytes, Q's, their addresses), 24 per n-tile for the accumulators and the
    fragments, 40 for the rest; fitted to ptxas (NVRTC 13.0 and 13.5, sm_90a, every layout with
    and without 16-byte access: 160, 202 and 254 at NS 8 and DEPTH 2-4, 234 at NS 16 and DEPTH 3,
    255 at NS 32 and DEPTH 2; NS 8 at DEPTH 5, 16 at 4 and 32 at 3 spilled). ASYNC=1 holds one
    chunk in registers where its ring applies and a ring of 2 where it does not: counted as 2."""
    nt = sides(cfg)[0] // 8
    depth = 2 if cfg.get("ASYNC") else cfg["DEPTH"]
    return 40 + 24 * nt + depth * (44 + 4 * nt)


# The rule's sizing, from a sweep of WK x DEPTH x slices on the H100 (M = 1-32 against 4096-14336
# x 4096-14336 bf16 weights): the fastest configurations ran about WARPS_PER_SM warps per SM in
# all (4096 x 4096: 64 tiles x 4 warps x 4 slices, 14336 x 4096: 224 x 4 x 1), whatever the
# split between warps along K and slices; a deeper ring (DEPTH 3-4) cost more registers than its
# loads in flight gained. Each warp keeps at least MIN_CHUNKS chunks of its slice.
WARPS_K = 4
DEPTH = 2
WARPS_PER_SM = 8
MIN_CHUNKS = 2
# Operands with 16-byte access and Q contiguous along K (the kernel's condition for its ring in
# shared memory) take that ring, ASYNC_DEPTH chunks deep: on the H200 it kept more of B in flight
# than two register buffers and ran ahead of them at every decode shape measured, at thin sides of
# 8, 16 and 32 once its loop was no longer unrolled (docs/journal/thin.md,
# benchmarks/results/h200_decode_ring_sweep.json.gz, h200_decode_ring_sweep_rolled.json.gz).
# Deeper rings took the shared memory of a third block per SM.
ASYNC_DEPTH = 3


def sides(cfg: Mapping[str, int]) -> tuple[int, int]:
    """(thin, wide) sides of a tile: N is the thin one when BN <= BM, else M."""
    return min(cfg["BM"], cfg["BN"]), max(cfg["BM"], cfg["BN"])


def threads(cfg: Mapping[str, int]) -> int:
    """32 x (wide side / 64) x WK."""
    return 32 * max(1, sides(cfg)[1] // ROWS_PER_WARP) * cfg["WK"]


def smem(cfg: Mapping[str, int]) -> int:
    """The WK k-warps' FP32 partial tiles, wide x thin each (the first is also the cluster's), and
    with ASYNC=1 the ring: DEPTH chunks of (8 + thin/8) 16-byte units per thread."""
    ns, br = sides(cfg)
    ring = cfg["DEPTH"] * (8 + ns // 8) * 16 * threads(cfg) if cfg.get("ASYNC") else 0
    return cfg["WK"] * ns * br * 4 + ring


def tile_constraints(cfg: Mapping[str, int], chunk: int) -> list[str]:
    """What both decode rungs static_assert of a tile: a thin side of 8, 16 or 32, a wide side of
    whole 64-row warps up to 256, WK of 1 to 8, BK whole block steps (``chunk`` k per warp x WK)."""
    ns, br = sides(cfg)
    out = []
    if ns not in THIN_SIDES:
        out.append(f"the thin side min(BM, BN)={ns} must be one of {', '.join(map(str, THIN_SIDES))} (mma n-tiles of 8)")
    if br % ROWS_PER_WARP or br > MAX_WIDE:
        out.append(f"the wide side max(BM, BN)={br} must be 64, 128, 192 or 256 (64 rows per warp)")
    if not 1 <= cfg["WK"] <= MAX_WK:
        out.append(f"WK={cfg['WK']} must be between 1 and {MAX_WK} (warps sharing a block's rows along K)")
    elif cfg["BK"] % (chunk * cfg["WK"]):
        out.append(f"BK={cfg['BK']} must be a multiple of {chunk}*WK={chunk * cfg['WK']} (a K slice holds whole "
                   f"steps of the block's warps, {chunk} k each)")
    return out


def constraints(cfg: Mapping[str, int], max_smem: int) -> list[str]:
    """What 24_decode.cu static_asserts: its tile (``tile_constraints``, 32 k per warp step), DEPTH of 2 to 6 (8 with the
    ring in shared memory), the registers within what a block of its threads gets and the shared
    memory within ``max_smem``."""
    ns = sides(cfg)[0]
    out = tile_constraints(cfg, CHUNK)
    most = MAX_DEPTH_ASYNC if cfg.get("ASYNC") else MAX_DEPTH
    if not 2 <= cfg["DEPTH"] <= most:
        out.append(f"DEPTH={cfg['DEPTH']} must be between 2 and {most} (chunks in flight per thread"
                   f"{', ASYNC=1' if cfg.get('ASYNC') else ''})")
    elif not out and smem(cfg) > max_smem:
        out.append(f"the partial tiles and the ring need {smem(cfg)} B of shared memory; a block may have at most "
                   f"{max_smem} B (a shallower DEPTH, fewer warps)")
    elif not out and (registers(cfg) > 256 or threads(cfg) * min(255, registers(cfg)) > 65536):
        out.append(f"a thin side of {ns} with DEPTH={cfg['DEPTH']} needs about {registers(cfg)} registers per thread; "
                   f"{threads(cfg)} threads allow {min(255, 65536 // threads(cfg))} (fewer warps, a shallower DEPTH)")
    return out


def rule(M: int, N: int, K: int, sm_count: int, arch, a_col: bool = False, b_col: bool = False,
         vec_a: bool = True, vec_b: bool = True, unaligned: bool = False) -> tuple[dict[str, int], str] | None:
    """The configuration for a kernel-view M x N x K problem whose thin side (the smaller of M and
    N) is at most ``THIN16_MAX`` (wider ones take ceil(side / 32) tiles of 32), and why.

    Tile: the thin side the smallest of 8, 16, 32 that holds it, 64 rows of the wide operand,
    ``WARPS_K`` warps along K, ``DEPTH`` chunks in flight. Split: t tiles of WARPS_K warps give
    the SMs fewer than ``WARPS_PER_SM`` warps each: s = floor(WARPS_PER_SM * S / (t * WARPS_K))
    slices of K, at most 8 (one cluster, summed in distributed shared memory: no workspace, one
    launch; on GPUs without clusters the workspace's reduction), at most what leaves each warp
    ``MIN_CHUNKS`` chunks, and as many as the K tiles divide into evenly (``splitk_slices``).
    Operands with 16-byte access and the thin one contiguous along K take the ring in shared memory
    (ASYNC=1, ``ASYNC_DEPTH`` chunks).
    L2PF=1 where the wide operand is contiguous along K (``a_col``, ``b_col``: the kernel view's
    layouts): its rows are long runs the L2's 256-byte fetches read ahead in, where the runs of a
    row-major B are 128 bytes of one k row each and the larger fetches were slower
    (docs/journal/thin.md).

    None (the rung declines, auto's other sources answer) where an operand has no 16-byte access
    (``vec_a``, ``vec_b``) unless ``unaligned``: the kernel's 4-byte pair loads there run from
    above cuBLAS (large operands) to well below it (small ones, where a copy to aligned operands
    and a tiled rung win: docs/journal/thin.md), so only the selection model, which has measured
    them on the GPU, asks for them (core/selection.py). Where even 8 slices in a cluster leave the SMs with less
    than a quarter of ``WARPS_PER_SM`` (a thin problem narrow on both sides: 1x31x11364 is one tile),
    the slices go through the workspace instead, up to ``MAX_SPLITK`` (core/splitk.py)."""
    if not (vec_a and vec_b or unaligned):
        return None
    thin, wide = min(M, N), max(M, N)
    ns = next((s for s in THIN_SIDES if s >= thin), THIN16_MAX)
    br = ROWS_PER_WARP
    bm, bn = (br, ns) if N <= M else (ns, br)
    tiles = -(-wide // br) * -(-thin // ns)
    bk = CHUNK * WARPS_K
    want = WARPS_PER_SM * sm_count // (tiles * WARPS_K)
    workspace = tiles * WARPS_K * MAX_CLUSTER * 4 < WARPS_PER_SM * sm_count
    split = max(1, min(want, MAX_SPLITK if workspace else MAX_CLUSTER, K // (bk * MIN_CHUNKS)))
    ktiles = max(1, -(-K // bk))
    split = -(-ktiles // -(-ktiles // split))          # no slice left empty or short by a tile
    kc = (not a_col) if N <= M else b_col          # the wide operand (A when N is thin) contiguous along K
    q_kc = b_col if N <= M else not a_col          # the thin one contiguous along K
    ring = vec_a and vec_b and q_kc
    cfg = {"BM": bm, "BN": bn, "BK": bk, "WK": WARPS_K, "DEPTH": ASYNC_DEPTH if ring else DEPTH, "L2PF": int(kc),
           "ASYNC": int(ring), "SPLITK": split, "SKCLUSTER": 0}
    side = "N" if N <= M else "M"
    why = f"thin 16-bit problem ({side}={thin} <= {THIN16_MAX}): {bm}x{bn} tiles, {WARPS_K} warps along K"
    if ring:
        why += f", a ring of {ASYNC_DEPTH} chunks in shared memory (cp.async)"
    if kc:
        why += ", 256-byte L2 fetches along the K-contiguous rows"
    if split > 1:
        cluster = arch is not None and arch_number(arch) >= CLUSTER_ARCH and split <= MAX_CLUSTER
        cfg["SKCLUSTER"] = int(cluster)
        why += (f"; K split in {split} ({'one cluster' if cluster else 'the workspace'}): {tiles} tiles for "
                f"{WARPS_PER_SM} warps on each of {sm_count} SMs")
    return cfg, why


# ---- rung 28 (decode_fp8, kernels/28_decode_fp8.cu): the same streaming for FP8 codes ------------
# A 16-byte unit holds 16 k of FP8, so a warp's chunk is 64 k; the ring is always in shared memory
# (cp.async: both operands K-major with 16-byte access, the plan copies any other), so DEPTH costs
# no registers, and the split is a cluster's only (the workspace's reduction applies no scales).
CHUNK_FP8 = 64
FP8_DEPTH = ASYNC_DEPTH


def fp8_smem(cfg: Mapping[str, int]) -> int:
    """The larger of the ring (DEPTH chunks of (8 + thin/8) 16-byte units per thread) and, in the
    same memory after the main loop, the WK k-warps' FP32 partial tiles."""
    ns, br = sides(cfg)
    return max(cfg["WK"] * ns * br * 4, cfg["DEPTH"] * (8 + ns // 8) * 16 * threads(cfg))


def fp8_constraints(cfg: Mapping[str, int], max_smem: int) -> list[str]:
    """What 28_decode_fp8.cu static_asserts: rung 24's tile (``tile_constraints``, 64 k per warp
    step), DEPTH of 2 to 8, the shared memory within ``max_smem``; and its split in a cluster only
    (SPLITK > 1 with SKCLUSTER=1)."""
    out = tile_constraints(cfg, CHUNK_FP8)
    if not 2 <= cfg["DEPTH"] <= MAX_DEPTH_ASYNC:
        out.append(f"DEPTH={cfg['DEPTH']} must be between 2 and {MAX_DEPTH_ASYNC} (chunks in flight per thread)")
    elif not out and fp8_smem(cfg) > max_smem:
        out.append(f"the partial tiles and the ring need {fp8_smem(cfg)} B of shared memory; a block may have at most "
                   f"{max_smem} B (a shallower DEPTH, fewer warps)")
    if cfg.get("SPLITK", 1) > 1 and not cfg.get("SKCLUSTER"):
        out.append(f"SPLITK={cfg['SPLITK']} needs SKCLUSTER=1: the FP8 decode rung sums its K slices in a cluster "
                   f"(the workspace's reduction does not apply the scales)")
    return out


FP8_SPLITS = (1, 2, 4, 8)   # the cluster sizes the rule takes: what precompile builds (fp8_rule_tiles)


def fp8_split(want: int, ktiles: int) -> int:
    """The most slices of ``FP8_SPLITS`` up to ``want`` that leave none of ``ktiles`` K tiles empty."""
    split = max(s for s in FP8_SPLITS if s <= max(1, want))
    while split > 1 and -(-ktiles // -(-ktiles // split)) < split:
        split //= 2
    return split


def fp8_tile(ns: int, m_thin: bool, split: int) -> dict[str, int]:
    """``fp8_rule``'s configuration for a thin side of ``ns`` columns (M's where ``m_thin``) against
    64 rows of the wide operand, ``WARPS_K`` warps along K, the ring of ``FP8_DEPTH`` chunks, the
    L2's 256-byte fetches along the wide operand's K-major rows, and ``split`` slices of K in one
    cluster."""
    bm, bn = (ns, ROWS_PER_WARP) if m_thin else (ROWS_PER_WARP, ns)
    return {"BM": bm, "BN": bn, "BK": CHUNK_FP8 * WARPS_K, "WK": WARPS_K, "DEPTH": FP8_DEPTH, "L2PF": 1,
            "SPLITK": split, "SKCLUSTER": int(split > 1)}


def fp8_rule_tiles() -> list[dict[str, int]]:
    """Every configuration ``fp8_rule`` can choose: each thin side and orientation, each split."""
    return [fp8_tile(ns, m_thin, split) for ns, m_thin, split in itertools.product(THIN_SIDES, (True, False), FP8_SPLITS)]


def fp8_rule(M: int, N: int, K: int, sm_count: int, arch, a_col: bool = False, b_col: bool = False,
             vec_a: bool = True, vec_b: bool = True, unaligned: bool = False) -> tuple[dict[str, int], str] | None:
    """Rung 28's configuration for a kernel-view M x N x K FP8 problem whose thin side is at most
    ``THIN16_MAX``, and why: ``fp8_tile`` with the thin side the smallest of 8, 16, 32 that holds it,
    and rung 24's split (``WARPS_PER_SM`` warps per SM, each warp ``MIN_CHUNKS`` chunks at least) in
    one cluster of 1, 2, 4 or 8 slices, none empty (``fp8_split``). The operands' layouts do not
    matter: the plan makes them K-major."""
    thin, wide = min(M, N), max(M, N)
    ns = next((s for s in THIN_SIDES if s >= thin), THIN16_MAX)
    tiles = -(-wide // ROWS_PER_WARP) * -(-thin // ns)
    bk = CHUNK_FP8 * WARPS_K
    want = WARPS_PER_SM * sm_count // (tiles * WARPS_K)
    cfg = fp8_tile(ns, M < N, fp8_split(min(want, K // (bk * MIN_CHUNKS)), max(1, -(-K // bk))))
    split = cfg["SPLITK"]
    side = "N" if N <= M else "M"
    why = (f"thin FP8 problem ({side}={thin} <= {THIN16_MAX}): {cfg['BM']}x{cfg['BN']} tiles, {WARPS_K} warps along K, "
           f"a ring of {FP8_DEPTH} chunks in shared memory")
    if split > 1:
        why += f"; K split in {split} (one cluster): {tiles} tiles for {WARPS_PER_SM} warps on each of {sm_count} SMs"
    return cfg, why
