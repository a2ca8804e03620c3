"""The FP32 SIMT family: rungs 1-15 (the seeds' ladder) and 18 (cp.async multistage): their
thread counts, shared memory and the constraints that keep a configuration within what the
kernels were written for."""

from __future__ import annotations

from ..parts import Reads, Walk
from ..schema import SPLITK_SPACE, Rung
from .common import (MAX_SMEM_PER_BLOCK, STREAMK_SWITCH, divides, float4_split, mult, p2, registers, scalar_split,
                     splitk_constraints, switch_reasons, warp_threads)


def tile_1d_threads(cfg) -> int:
    return (cfg["BM"] // cfg["TM"]) * cfg["BN"]


def thread_tile_threads(cfg) -> int:
    return (cfg["BM"] // cfg["TM"]) * (cfg["BN"] // cfg["TN"])


def thread_tile_constraints(cfg, min_blocks: int = 1, prefetch: bool = False) -> list[str]:
    out = (divides(cfg, "TM", "BM") + divides(cfg, "TN", "BN") + mult(cfg, "BK", 4) + mult(cfg, "TN", 4)
           + mult(cfg, "TM", 4))
    if out:
        return out
    threads = thread_tile_threads(cfg)
    return float4_split(cfg, threads) + ([] if threads < 32 else registers(cfg, threads, min_blocks, prefetch))


def tile_2d_constraints(cfg) -> list[str]:
    """Scalar loads (no float4 split), and the thread tile within the registers: 256x128 tiles of
    4x8 (1024 threads, 64 registers each) spilled on sm_90a in a tune on the H200
    (benchmarks/results/h200x2_tune_two_workers.json)."""
    out = divides(cfg, "TM", "BM") + divides(cfg, "TN", "BN")
    if out:
        return out
    threads = thread_tile_threads(cfg)
    return scalar_split(cfg, threads) + ([] if not 32 <= threads <= 1024 else registers(cfg, threads))


def double_buffer_constraints(cfg) -> list[str]:
    return thread_tile_constraints(cfg, min_blocks=2, prefetch=True)


def warp_tile_constraints(cfg) -> list[str]:
    out = divides(cfg, "WM", "BM") + divides(cfg, "WN", "BN") + mult(cfg, "BK", 4)
    out += divides(cfg, "TM", "WM") + divides(cfg, "TN", "WN") + mult(cfg, "TM", 4) + mult(cfg, "TN", 4)
    if not out:
        lanes = (cfg["WM"] // cfg["TM"]) * (cfg["WN"] // cfg["TN"])
        if lanes != 32:
            out.append(f"(WM/TM)*(WN/TN)={lanes}: a warp tile must hold exactly 32 lanes of TM x TN outputs")
        out += float4_split(cfg, warp_threads(cfg))
        if not out and 32 <= warp_threads(cfg) <= 1024:
            out += registers(cfg, warp_threads(cfg), min_blocks=2, prefetch=True)
    return out


def simt_pad(cfg) -> int:
    """18_async_simt.cu's shared row padding: the transposing copies take KC = 8 (or 4, when BK is
    not a multiple of 8) consecutive k per row, and a row stride of 32/KC (mod 32) floats spreads
    a warp's writes over 32 banks."""
    return 32 // (8 if cfg["BK"] % 8 == 0 else 4)


def simt_smem(cfg) -> int:
    """STAGES stages of As[BK][BM+PAD] and Bs[BK][BN+PAD], FP32, dynamic (above 48 KB the launch opts in);
    with SKCLUSTER=1 at least the partial tile [BM][BN+4] that overlays them after the main loop."""
    pad = simt_pad(cfg)
    pipeline = cfg["STAGES"] * cfg["BK"] * (cfg["BM"] + pad + cfg["BN"] + pad) * 4
    return max(pipeline, cfg["BM"] * (cfg["BN"] + 4) * 4) if cfg.get("SKCLUSTER") else pipeline


def simt_register_estimate(cfg) -> tuple[int, int]:
    """(4-byte copies per thread per stage, registers per thread) as 18_async_simt.cu estimates
    them (COPIES, REG_ESTIMATE): the accumulators, two buffers of fragments, ~48 for indices,
    pointers and loop state, and one per copy."""
    copies = -(-(cfg["BM"] + cfg["BN"]) * cfg["BK"] // warp_threads(cfg))
    return copies, cfg["TM"] * cfg["TN"] + 2 * (cfg["TM"] + cfg["TN"]) + 48 + copies


def simt_registers(cfg) -> list[str]:
    """18_async_simt.cu's register estimate (its launch bounds use the same): the accumulators,
    two buffers of A and B fragments, ~48 for indices, pointers and loop state, and ~1 per 4-byte
    copy a thread issues per stage (at most 24). It must fit the 255 registers a thread may have,
    and with more than 256 threads (fewer than 255 registers each) leave 24 of headroom."""
    threads = warp_threads(cfg)
    copies, need = simt_register_estimate(cfg)
    if copies > 24:
        return [f"(BM+BN)*BK/THREADS = {copies} copies per thread per stage; at most 24 fit beside the accumulators "
                f"(a smaller BK or more threads)"]
    cap = 255 if threads <= 256 else 65536 // threads - 24
    return [] if need <= cap else [f"a {cfg['TM']}x{cfg['TN']} thread tile with double-buffered fragments and {copies} "
                                   f"copies per stage needs about {need} registers per thread; {threads} threads per "
                                   f"block allow {cap}"]


def simt_min_blocks(cfg) -> int:
    """The blocks per SM 18_async_simt.cu's launch bounds ask for (MIN_BLOCKS): as many as its
    register estimate plus 24 of headroom allow, 1 to 4."""
    return max(1, min(4, 65536 // (warp_threads(cfg) * (simt_register_estimate(cfg)[1] + 24))))


# ---- a batch in one launch (rung 18, GL_BATCHED: the batch along grid.z): its configuration ----------
# Per-SM rates of the presets' main loops (128x256's = 1), fitted on an H200 against torch.bmm
# (benchmarks/results/h200_batched_fp32.json; the preset sweep in docs/journal/batched.md).
SIMT_BATCHED_RATE = {"128x256": 1.0, "256x128": 0.97, "128x128": 0.91, "small": 0.74}


def simt_batched_config(M: int, N: int, K: int, batch: int, sm_count: int, presets: dict) -> tuple[str, str]:
    """Rung 18's preset for ``batch`` problems of M x N x K in one launch (``presets``: name -> its
    whole configuration, for the names of SIMT_BATCHED_RATE), and why. Each is timed as the busiest
    SM's share of its blocks (the blocks spread evenly over the SMs; blocks that share an SM share
    its FMA throughput), each a tile's area times k at the preset's rate; the least wins, the
    earlier preset on a tie. Small tiles win where a bigger one would leave SMs idle."""
    best = None
    for name, rate in SIMT_BATCHED_RATE.items():
        cfg = presets[name]
        tiles = -(-M // cfg["BM"]) * -(-N // cfg["BN"]) * batch
        per_sm = -(-tiles // sm_count)
        cost = per_sm * cfg["BM"] * cfg["BN"] * K / rate
        if best is None or cost < best[0] * 0.999:
            best = (cost, name, per_sm)
    _, name, per_sm = best
    return name, (f"a batch of {batch} in one launch: preset {name!r}, {per_sm} block(s) on the busiest of "
                  f"{sm_count} SMs (the least predicted time)")


def simt_streamk(cfg) -> list[str]:
    """STREAMK=1 (18_async_simt.cu's stream-K tail) counts a wave as one block per SM, and writes C
    itself: a tile whose launch bounds allow one block per SM, without split-K."""
    if not cfg.get("STREAMK"):
        return []
    out = switch_reasons(cfg, STREAMK=STREAMK_SWITCH)
    if out:
        return out
    if cfg.get("SPLITK", 1) > 1:
        out.append(f"STREAMK=1 splits the last wave by k tiles and SPLITK={cfg['SPLITK']} every tile: use one or the other")
    if not out and simt_min_blocks(cfg) > 1:
        out.append(f"STREAMK=1 counts a wave as one block per SM; a {cfg['BM']}x{cfg['BN']} tile with {cfg['TM']}x{cfg['TN']} "
                   f"thread tiles runs {simt_min_blocks(cfg)} blocks per SM (use STREAMK=0)")
    return out


def simt_constraints(cfg) -> list[str]:
    out = divides(cfg, "WM", "BM") + divides(cfg, "WN", "BN") + divides(cfg, "TM", "WM") + divides(cfg, "TN", "WN")
    out += mult(cfg, "TM", 4) + mult(cfg, "TN", 4) + mult(cfg, "BK", 4)
    out += [f"{k}={cfg[k]} must be a multiple of 32 (a warp's transposing copy covers whole rows)"
            for k in ("BM", "BN") if cfg[k] % 32]
    if cfg["BK"] > 32:
        out.append(f"BK={cfg['BK']} must be at most 32 (the k loop is fully unrolled: code and registers grow with BK)")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']} must be at least 2 (a stage in flight while one is computed)")
    if out:
        return out
    lanes = (cfg["WM"] // cfg["TM"]) * (cfg["WN"] // cfg["TN"])
    if lanes != 32:
        return [f"(WM/TM)*(WN/TN)={lanes}: a warp tile must hold exactly 32 lanes of TM x TN outputs"]
    if simt_smem(cfg) > MAX_SMEM_PER_BLOCK:
        what = "the stages or the partial tile" if cfg.get("SKCLUSTER") else f"STAGES*BK*(BM+BN+2*{simt_pad(cfg)})*4 ="
        out.append(f"{what} {simt_smem(cfg)} B of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    if 32 <= warp_threads(cfg) <= 1024:
        out += simt_registers(cfg)
        out += [] if out else simt_streamk(cfg)
    return out


def square_tile(cfg) -> list[str]:
    """Rungs 4-7: square BM = BN = BK tiles, one thread per element of C (one load per tile)."""
    out = [] if cfg["BM"] == cfg["BN"] == cfg["BK"] else [f"BM, BN and BK must be equal (got {cfg['BM']}, {cfg['BN']}, {cfg['BK']})"]
    return out + ([] if cfg["THREADS"] == cfg["BM"] * cfg["BN"] else [f"THREADS={cfg['THREADS']} must be BM*BN={cfg['BM'] * cfg['BN']}"])


_SIMPLE32 = {"BM": 32, "BN": 32, "THREADS": 1024}
_SMEM32 = {"BM": 32, "BN": 32, "BK": 32, "THREADS": 1024}


# ---- the tuner's search spaces (gemmlab tune) --------------------------------------------------
# Powers of two around each rung's defaults. The constraints (core/families/) prune the product before any
# compile; the ranges keep every pruned space at a few hundred tile configurations at most (an
# exhaustive run stays in minutes) while holding seed 001's sweep (bm, bk, bn, rm, rn) for the
# thread-tiled rungs. The split-K rungs try each tile with every SPLITK of SPLITK_SPACE (x5: the
# auto strategy then samples with TPE; the SPLITK values > 1 share one compiled kernel per tile).
_SPACE_SIMPLE = {"BM": p2(3, 5), "BN": p2(3, 5), "THREADS": (64, 128, 256, 512, 1024)}
_SPACE_SQUARE = {"BM": p2(3, 5), "BN": p2(3, 5), "BK": p2(3, 5), "THREADS": (64, 256, 1024)}
_SPACE_VEC = {"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(2, 4), "TM": p2(2, 3), "TN": p2(2, 3)}


def _one_thread_per_element(c) -> list[str]:
    """Rungs 1 and 2: a thread per element of the BM x BN tile."""
    if c["BM"] * c["BN"] == c["THREADS"]:
        return []
    return [f"THREADS={c['THREADS']} must be BM*BN={c['BM'] * c['BN']} (one thread per element of C)"]


# ---- the entries (core/registry.py lists every family's in ladder order) --------------------
RUNGS: tuple[Rung, ...] = (
    Rung(
        1, "naive", "Naive, non-coalesced",
        "One thread per C element; threadIdx.x walks the rows of C, so a warp's loads of B and stores of C stride by a row.",
        ("002 gemm_v00", "000 gemm_32x32_v0"), "01_naive.cu",
        params=_SIMPLE32,
        space=_SPACE_SIMPLE,
        constraints=_one_thread_per_element,
    ),
    Rung(
        2, "coalesced", "Naive, coalesced",
        "threadIdx.x walks the columns of C: a warp reads one row of B and writes one row of C contiguously (coalesced).",
        ("002 gemm_v01", "000 gemm_32x32_v1", "000 gemm_32x32_v2"), "02_coalesced.cu",
        params=_SIMPLE32,
        space=_SPACE_SIMPLE,
        constraints=_one_thread_per_element,
    ),
    Rung(
        3, "warp_shuffle", "Naive with warp-shuffle broadcast",
        "Each lane loads one A value of a 32-wide slice and the warp broadcasts it with __shfl_sync instead of 32 loads.",
        ("004 sgemm_naive",), "03_warp_shuffle.cu",
        params={"BM": 32, "BN": 32, "THREADS": 256},
        space={"THREADS": (32, 64, 128, 256, 512, 1024)},
        constraints=lambda c: ([] if c["BM"] == 32 and c["BN"] == 32 else ["BM and BN must be 32 (the warp width)"])
        + ([] if 32 % max(1, c["THREADS"] // 32) == 0 else [f"THREADS/32={c['THREADS'] // 32} warps must divide the 32 rows"]),
    ),
    Rung(
        4, "smem", "Shared-memory tiling 32x32",
        "A block stages 32x32 tiles of A and B in shared memory; each global element is loaded once per block instead of 32 times.",
        ("000 gemm_32x32_v3", "002 gemm_v02", "Alcanderian sgemm_1"), "04_smem.cu",
        params=_SMEM32, constraints=square_tile,
        space=_SPACE_SQUARE,
        landmark=True,
    ),
    Rung(
        5, "smem_padded", "Shared-memory tiling, padded rows",
        "The shared tile rows are 33 floats wide, so a warp reading a column hits 32 different banks (no bank conflicts).",
        ("000 gemm_32x32_v4", "Alcanderian sgemm_2"), "05_smem_padded.cu",
        params=_SMEM32, constraints=square_tile,
        space=_SPACE_SQUARE,
    ),
    Rung(
        6, "ldg", "Read-only data path (__ldg)",
        "A and B are const __restrict__ and read with __ldg, through the read-only (texture) cache.",
        ("003 ldg", "Alcanderian sgemm_3"), "06_ldg.cu",
        params=_SMEM32, constraints=square_tile, sass_claims=("LDG.E.CONSTANT",),
        space=_SPACE_SQUARE,
    ),
    Rung(
        7, "texture", "Texture objects (tex1Dfetch<float>)",
        "A and B are read through 1-D texture objects over linear memory, the pre-Kepler way to the read-only cache.",
        ("003 texture",), "07_texture.cu",
        params=_SMEM32, constraints=square_tile, reads=Reads(textures=1), sass_claims=("TLD",),
        space=_SPACE_SQUARE,
    ),
    Rung(
        8, "reg_accum", "Accumulators in registers",
        "The partial sums live in registers (4 per thread, one output row per warp iteration; the seed's column in column-major) instead of a shared-memory output tile.",
        ("004 sgemm_shared",), "08_reg_accum.cu",
        params={"BM": 32, "BN": 32, "BK": 32, "THREADS": 256},
        space={"BM": p2(3, 7), "BK": p2(3, 6), "THREADS": (64, 128, 256, 512, 1024)},
        constraints=lambda c: ([] if c["BN"] == 32 else ["BN must be 32 (lane -> column of C)"])
        + ([] if c["BM"] % max(1, c["THREADS"] // 32) == 0 else [f"THREADS/32={c['THREADS'] // 32} warps must divide BM={c['BM']}"])
        + scalar_split(c, c["THREADS"]),
    ),
    Rung(
        9, "tile_1d", "1D thread tiling",
        "Each thread computes TM outputs of one column, reusing each B value from shared memory TM times in a register.",
        ("002 gemm_v03",), "09_tile_1d.cu",
        params={"BM": 64, "BN": 64, "BK": 8, "TM": 8},
        space={"BM": p2(5, 7), "BN": p2(5, 7), "BK": p2(3, 5), "TM": p2(2, 4)},
        threads=tile_1d_threads,
        constraints=lambda c: divides(c, "TM", "BM") + scalar_split(c, tile_1d_threads(c)),
    ),
    Rung(
        10, "tile_2d", "2D thread tiling",
        "Each thread computes a TM x TN register tile: TM+TN shared loads feed TM*TN FMAs (outer product).",
        ("002 gemm_v04", "004 sgemm 2x2 tile", "003 BEAST THR_M x THR_N"), "10_tile_2d.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        presets={"2x2": {"BM": 32, "BN": 32, "BK": 32, "TM": 2, "TN": 2}},
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(3, 4), "TM": p2(1, 3), "TN": p2(1, 3)},
        threads=thread_tile_threads,
        constraints=tile_2d_constraints,
        landmark=True,
    ),
    Rung(
        11, "vectorized", "Vectorized float4, A transposed in shared memory",
        "Global loads are 128-bit (LDG.E.128) and A is stored transposed so the inner loop reads A and B as float4 (LDS.128).",
        ("000 gemm_32x32_v5", "002 gemm_v05", "003 ldg(float4)"), "11_vectorized.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=thread_tile_threads, constraints=thread_tile_constraints,
        sass_claims=("LDG.E.128", "LDS.128"), space=_SPACE_VEC,
        landmark=True,
    ),
    Rung(
        12, "vec_texture", "Vectorized through texture<float4>",
        "The float4 loads of the vectorized rung go through tex1Dfetch<float4> texture objects instead of LDG.",
        ("003 texture<float4>",), "12_vec_texture.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=thread_tile_threads, constraints=thread_tile_constraints, reads=Reads(textures=4),
        space=_SPACE_VEC,
        sass_claims=("TLD", "LDS.128"),  # tex1Dfetch on linear memory compiles to TLD.LZ (seed 003's SASS too), not TEX
    ),
    Rung(
        13, "blocked", "64x64 / 128x128 register-blocked tiles",
        "Each thread's 8x8 (or 4x4) outputs are 2x2 strided 4x4 blocks, so every LDS.128 of a warp is conflict-free; #pragma unroll on the inner loop.",
        ("000 gemm_64x64", "000 gemm_128x128", "fynv g_fgemm"), "13_blocked.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        presets={"64x64": {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, "128x128": {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}},
        space=_SPACE_VEC,
        threads=thread_tile_threads, constraints=thread_tile_constraints,
        sass_claims=("LDG.E.128", "LDS.128"),
    ),
    Rung(
        14, "double_buffer", "Double buffering + register prefetch",
        "Two shared tiles (ping-pong) and a register prefetch of the next tile overlap global loads with math: one barrier per tile.",
        ("001 sgemm 128x128x8 prefetch", "000 TWO_BUFFER"), "14_double_buffer.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=thread_tile_threads, constraints=double_buffer_constraints,
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(2, 5), "TM": p2(2, 4), "TN": p2(2, 4)},  # seed 001's sweep
        sass_claims=("LDG.E.128", "LDS.128"),
    ),
    Rung(
        15, "warp_tiling", "Warp tiling",
        "Block tile -> warp tile (WM x WN) -> thread tile: each warp reads a compact sub-tile of shared memory, improving register reuse and locality.",
        ("002 gemm_v06",), "15_warp_tiling.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "SPLITK": 1},
        threads=warp_threads, constraints=lambda c: warp_tile_constraints(c) + splitk_constraints(c),
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(3, 5), "WM": p2(4, 7), "WN": p2(4, 7), "TM": p2(2, 3), "TN": p2(2, 3),
               "SPLITK": SPLITK_SPACE},
        sass_claims=("LDG.E.128", "LDS.128"),
        landmark=True,
    ),
    Rung(
        18, "async_simt", "cp.async multistage SIMT, 128x256 tiles",
        "cp.async (LDGSTS) copies global to shared with no register staging through a STAGES-deep pipeline; 128x256 block tiles, 16x8 thread tiles, fragments double-buffered in registers.",
        ("CUTLASS SIMT sgemm (MmaMultistage)", "A100 cp.async 128x256x8 SGEMM", "RTX 4090 register-blocked SGEMM"),
        "18_async_simt.cu",
        params={"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64, "TM": 16, "TN": 8, "STAGES": 4, "SPLITK": 1, "SKCLUSTER": 0, "SPREAD": 1, "SNAKE": 1,
                "STREAMK": 0},
        presets={
            "128x256": {"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64, "TM": 16, "TN": 8, "STAGES": 4},
            "256x128": {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "STAGES": 4},
            "128x128": {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "STAGES": 4},
            "small": {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "STAGES": 3},
            "skinny": {"BM": 32, "BN": 128, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "STAGES": 3},
            "tall": {"BM": 128, "BN": 32, "BK": 16, "WM": 32, "WN": 32, "TM": 8, "TN": 4, "STAGES": 3},   # N ~ 16
        },
        threads=warp_threads, constraints=lambda c: simt_constraints(c) + splitk_constraints(c), smem=simt_smem,
        sass_claims=("LDGSTS", "LDS.128", "FFMA"), min_arch=80,
        reads=Reads(packs=True), walk=Walk(batched=True, tail_kernel="gemm_sk_tail"),
        space={"BM": p2(6, 8), "BN": p2(6, 8), "BK": (8, 16, 32), "WM": p2(5, 7), "WN": p2(5, 7),
               "TM": (4, 8, 16), "TN": (4, 8, 16), "STAGES": (2, 3, 4), "SPLITK": SPLITK_SPACE,
               "SKCLUSTER": (0, 1), "SPREAD": (0, 1), "SNAKE": (0, 1), "STREAMK": (0, 1)},
    ),
)
