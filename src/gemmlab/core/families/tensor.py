"""The tensor-core family before Hopper: rungs 16 (WMMA), 17 (mma.sync, ldmatrix, cp.async) and 20
(TF32 and 3xTF32 through mma.sync): thread counts, shared memory, register estimates and
constraints."""

from __future__ import annotations

from ..parts import ANY_16BIT_OUTPUT, Reads
from ..schema import SPLITK_SPACE, Rung
from .common import MAX_SMEM_PER_BLOCK, divides, mult, p2, pow2, splitk_constraints, warp_threads


def wmma_threads(cfg) -> int:
    return 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])


def wmma_smem(cfg) -> int:
    """16_wmma.cu's dynamic shared memory: two stages of 16-bit A and B tiles, rows padded by 8
    (the larger of the two layouts), or the FP32 per-warp epilogue staging [warps][16][WN+4]
    that overlays them. Above 48 KB the launch opts in (cuFuncSetAttribute)."""
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    ab = 2 * 2 * (max(bm * (bk + 8), bk * (bm + 8)) + max(bk * (bn + 8), bn * (bk + 8)))
    staging = wmma_threads(cfg) // 32 * 16 * (cfg["WN"] + 4) * 4
    return max(ab, staging)


def wmma_constraints(cfg) -> list[str]:
    return divides(cfg, "WM", "BM") + divides(cfg, "WN", "BN") + mult(cfg, "WM", 16) + mult(cfg, "WN", 16) + mult(cfg, "BK", 16)


def mma_threads(cfg) -> int:
    return 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])


def mma_smem(cfg) -> int:
    """17_mma_sync.cu's dynamic shared memory: STAGES unpadded (swizzled) 16-bit A and B tiles, or
    what overlays them after the main loop if larger: the FP32 per-warp epilogue staging
    [warps][16][WN+8], or with the cluster split (SKCLUSTER=1) the block's partial tile [BM][BN+8]."""
    pipeline = cfg["STAGES"] * (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * 2
    staging = mma_threads(cfg) // 32 * 16 * (cfg["WN"] + 8) * 4
    partial = cfg["BM"] * (cfg["BN"] + 8) * 4 if cfg.get("SKCLUSTER") and cfg.get("SPLITK", 1) > 1 else 0
    return max(pipeline, staging, partial)


def mma_staging(cfg, vec_a: bool, vec_b: bool) -> int:
    """The staging words 17_mma_sync.cu adds after its shared memory for each operand without
    16-byte access (GlTileCopy::STAGING_B): per stage, 5 aligned 4-byte words for each 16-byte
    chunk of its tile a thread copies (the chunks split evenly over the threads, rounded up)."""
    threads = mma_threads(cfg)
    per = lambda rows, cols: -(-rows * cols // 8 // threads)
    words = per(cfg["BM"], cfg["BK"]) * (not vec_a) + per(cfg["BK"], cfg["BN"]) * (not vec_b)
    return cfg["STAGES"] * 5 * words * threads * 4


def mma_regs(cfg) -> list[str]:
    """A warp tile must fit a thread's registers (255, or 65536 / THREADS for bigger blocks): its
    WM*WN/32 FP32 accumulators, two sets of fragments (WM/16 x 4 + WN/8 x 2 registers each), about
    40 for addresses, copy state and loop counters, and 2 per 16-byte copy a thread issues per
    tile (its 64-bit source address). Fitted to ptxas (NVRTC 13, sm_90a and sm_80, every layout,
    every vector-access combination): 230-254 registers at the default tile (estimate 244); a
    single warp copying 40 chunks per tile spills."""
    acc = cfg["WM"] * cfg["WN"] // 32
    threads = mma_threads(cfg)
    copies = -(-cfg["BM"] * cfg["BK"] // 8 // threads) - (-cfg["BK"] * cfg["BN"] // 8 // threads)
    need = acc + 2 * (cfg["WM"] // 16 * 4 + cfg["WN"] // 8 * 2) + 40 + 2 * copies
    cap = min(255, 65536 // threads // 8 * 8)
    return [] if need <= cap else [f"a {cfg['WM']}x{cfg['WN']} warp tile with {copies} copies per thread and tile needs "
                                   f"about {need} registers per thread; {threads} threads allow {cap}"]


def mma_constraints(cfg) -> list[str]:
    """What 17_mma_sync.cu static_asserts: m16 x n16 pieces per warp, an even number of k16 steps
    per tile (the two fragment register sets alternate), power-of-two widths (the XOR swizzle
    permutes 16-byte chunks inside a row), at least two stages, and shared memory within the
    227 KB a block may have on the largest GPUs (a smaller device refuses it at launch)."""
    out = (divides(cfg, "WM", "BM") + divides(cfg, "WN", "BN") + mult(cfg, "WM", 16) + mult(cfg, "WN", 16)
           + mult(cfg, "BK", 32) + pow2(cfg, "BM", 16) + pow2(cfg, "BN", 16) + pow2(cfg, "BK", 32))
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the cp.async pipeline needs at least 2 stages")
    if out:
        return out
    smem = mma_smem(cfg)
    if smem > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} need {smem} B of "
                   f"shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out + mma_regs(cfg)


def tf32_smem(cfg) -> int:
    """20_tf32_mma.cu's dynamic shared memory: STAGES swizzled FP32 tiles of A and B (no padding)."""
    return cfg["STAGES"] * (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * 4


def tf32_regs(cfg) -> list[str]:
    """A warp tile must fit a thread's registers (255, or 65536 / THREADS for bigger blocks) in BOTH
    precisions; 3xTF32 needs more: the WM*WN/32 accumulators, two sets of raw fragments
    (WM/4 + WN/4 registers each) and the big and small parts of one set, about 40 for addresses and
    loop state, and 2 per 16-byte copy a thread issues per tile. Fitted to ptxas (NVRTC 13, sm_90a
    and sm_80, every layout, with and without vector access): 64x32 warp tiles 152-196 registers in
    TF32 and 138-200 in 3xTF32 (estimate 216 with 8 warps, 224 with 4), 32x32 96-128 (estimate
    152); 64x64 warp tiles spill 100-160 bytes in 3xTF32 (estimate 296: refused)."""
    threads = warp_threads(cfg)
    copies = -(-cfg["BM"] * cfg["BK"] // 4 // threads) - (-cfg["BK"] * cfg["BN"] // 4 // threads)
    need = cfg["WM"] * cfg["WN"] // 32 + 4 * (cfg["WM"] // 4 + cfg["WN"] // 4) + 40 + 2 * copies
    cap = min(255, 65536 // threads // 8 * 8)
    return [] if need <= cap else [f"a {cfg['WM']}x{cfg['WN']} warp tile with {copies} copies per thread and tile needs "
                                   f"about {need} registers per thread in 3xTF32; {threads} threads allow {cap}"]


def tf32_constraints(cfg) -> list[str]:
    """What 20_tf32_mma.cu static_asserts: warp tiles in groups of 32 rows and columns (the
    permuted fragment map), power-of-two tile widths with rows of at least 8 chunks of 16 bytes
    (the swizzles), BK of 32 or 64 (an even number of k8 steps), a whole number of each row's
    chunks per thread, at least two stages; shared memory within the 227 KB a block may have."""
    out = (divides(cfg, "WM", "BM") + divides(cfg, "WN", "BN") + mult(cfg, "WM", 32) + mult(cfg, "WN", 32)
           + pow2(cfg, "BM", 32) + pow2(cfg, "BN", 32))
    if cfg["BK"] not in (32, 64):
        out.append(f"BK={cfg['BK']} must be 32 or 64 (rows of 8 or 16 chunks, an even number of k8 steps)")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the cp.async pipeline needs at least 2 stages")
    if out:
        return out
    threads, widest = warp_threads(cfg), max(cfg["BM"], cfg["BN"], cfg["BK"])
    if threads % (widest // 4):
        out.append(f"THREADS={threads} must be a multiple of {widest // 4}, the 16-byte chunks of a {widest}-float "
                   f"shared row (each thread copies whole columns of chunks)")
    smem = tf32_smem(cfg)
    if smem > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} FP32 need {smem} B "
                   f"of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out + (tf32_regs(cfg) if 32 <= threads <= 1024 else [])


# ---- the entries (core/registry.py lists every family's in ladder order) --------------------
RUNGS: tuple[Rung, ...] = (
    Rung(
        16, "wmma", "Tensor cores through WMMA",
        "FP16/BF16 inputs on the tensor cores with nvcuda::wmma 16x16x16 fragments, FP32 accumulation, output in the input dtype.",
        ("002 gemm_v07",), "16_wmma.cu", dtypes=("fp16", "bf16"),
        params={"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32},
        # tiny problems: four warps of 16x16, many small blocks (the selection model's option)
        presets={"32x32": {"BM": 32, "BN": 32, "BK": 32, "WM": 16, "WN": 16}},
        threads=wmma_threads, constraints=wmma_constraints, smem=wmma_smem,
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(4, 5), "WM": p2(4, 6), "WN": p2(4, 6)},
        sass_claims=("HMMA",), min_arch=80,
        stores=ANY_16BIT_OUTPUT,   # its staged stores round to C's type (gl_store_c8)
    ),
    Rung(
        17, "mma_sync", "Tensor cores through mma.sync, ldmatrix and cp.async",
        "mma.sync m16n8k16 on ldmatrix fragments from XOR-swizzled (unpadded) shared tiles, filled by a STAGES-deep cp.async pipeline that bypasses the registers.",
        ("002 future work after gemm_v07",), "17_mma_sync.cu", dtypes=("fp16", "bf16"),
        params={"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4, "SPLITK": 1, "SKCLUSTER": 0},   # the faster of the two presets on the H100
        presets={"128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4},
                 "128x256": {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3},
                 # small problems: 4 warps of 32x32, a light launch (on-line tuning's candidate)
                 "64x64": {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 3}},
        threads=mma_threads, constraints=lambda c: mma_constraints(c) + splitk_constraints(c), smem=mma_smem,
        sass_claims=("HMMA.16816", "LDSM", "LDGSTS"), min_arch=80,
        reads=Reads(packs=True, staging=mma_staging), stores=ANY_16BIT_OUTPUT,   # its staged stores round to C's type (gl_store_c8)
        space={"BM": p2(6, 8), "BN": p2(6, 8), "BK": (32, 64), "WM": p2(5, 7), "WN": p2(5, 7), "STAGES": (2, 3, 4, 5),
               "SPLITK": SPLITK_SPACE, "SKCLUSTER": (0, 1)},
    ),
    Rung(
        20, "tf32_mma", "FP32 on the tensor cores: TF32 and 3xTF32 through mma.sync",
        "FP32 operands rounded to TF32 (or split into two TF32 parts, three products: FP32-accurate) for mma.sync m16n8k8; fragments by ldmatrix or LDS.128 through a permuted map, swizzled cp.async pipeline.",
        ("CUTLASS FastF32 3xTF32 (a_big b_big + a_big b_small + a_small b_big)",), "20_tf32_mma.cu",
        precisions=("tf32", "3xtf32"),
        params={"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "STAGES": 4},
        presets={"128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "STAGES": 4},
                 "128x64": {"BM": 128, "BN": 64, "BK": 32, "WM": 64, "WN": 32, "STAGES": 4},
                 "64x64": {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 4}},
        threads=warp_threads, constraints=tf32_constraints, smem=tf32_smem,
        sass_claims=("HMMA.1688.F32.TF32", "LDSM", "LDGSTS"), min_arch=80,
        reads=Reads(packs=True),
        space={"BM": p2(6, 8), "BN": p2(6, 8), "BK": (32, 64), "WM": (32, 64), "WN": (32, 64), "STAGES": (2, 3, 4)},
    ),
)
