"""The FP32 SIMT family: rungs 1-15 (the seeds' ladder) and 18 (cp.async multistage): their
thread counts, shared memory and the constraints that keep a configuration within what the
kernels were written for."""

from __future__ import annotations

from .common import (MAX_SMEM_PER_BLOCK, STREAMK_SWITCH, divides, float4_split, mult, registers, scalar_split,
                     switch_reasons, warp_threads)


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
    4x8 (1024 threads, 64 registers each) spilled 136 bytes on sm_90a in a tune on the H200
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
