"""The Hopper family: rungs 19 (WGMMA fed by TMA), 21 (warp-specialized, persistent, clustered),
22 (TF32 WGMMA in rung 21's structure), 25 (FP8 WGMMA in rung 21's structure), 26 (grouped GEMM
on rung 21's parts) and 27 (grouped FP8, rungs 25's and 26's parts): thread counts, shared memory,
constraints and the grouped rules."""

from __future__ import annotations

from ..parts import ANY_16BIT_OUTPUT, TMA_READS, PrecisionPart, Reads, Stores, Walk
from ..schema import SPLITK_SPACE, Rung
from .common import (BALANCE_SWITCH, KREV_SWITCH, STREAMK_SWITCH, MAX_SMEM_PER_BLOCK, cluster_reasons,
                     splitk_constraints, switch_reasons)


def wgmma_threads(cfg) -> int:
    """BM/WM consumer warpgroups of 128 threads and a producer warpgroup."""
    return 128 * (cfg["BM"] // cfg["WM"]) + 128


def wgmma_smem(cfg) -> int:
    """19_wgmma_tma.cu's dynamic shared memory: 1024 bytes to align the base to the 128-byte
    swizzle's period, STAGES 16-bit A and B tiles or what overlays them once they drain (the
    larger): the FP32 per-warp epilogue staging [warps][16][BN+8], or with the cluster split
    (SKCLUSTER=1) the block's FP32 partial tile [BM][BN+8]; then a full and an empty mbarrier per
    stage."""
    pipeline = cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 2
    staging = cfg["BM"] // cfg["WM"] * 4 * 16 * (cfg["BN"] + 8) * 4
    partial = cfg["BM"] * (cfg["BN"] + 8) * 4 if cfg.get("SKCLUSTER") and cfg.get("SPLITK", 1) > 1 else 0
    return 1024 + max(pipeline, staging, partial) + 16 * cfg["STAGES"]


def wgmma_constraints(cfg, smem=wgmma_smem) -> list[str]:
    """What 19_wgmma_tma.cu static_asserts: one or two consumer warpgroups of 64 or 128 rows, a
    wgmma N of 64, 128 or 256 (the block's BN), BK in whole 64-element swizzle rows and at most a
    TMA box side (256), at least two stages, at most 128 FP32 accumulators per thread (with 384
    threads a thread may have 168 registers, which 128 accumulators fit), and shared memory within what
    a block may have."""
    out = []
    if cfg["WM"] not in (64, 128):
        out.append(f"WM={cfg['WM']} must be 64 or 128 (one or two m64 wgmmas per warpgroup)")
    elif cfg["BM"] % cfg["WM"] or cfg["BM"] // cfg["WM"] not in (1, 2):
        out.append(f"BM={cfg['BM']} must be 1 or 2 times WM={cfg['WM']} (one or two consumer warpgroups)")
    if cfg["BN"] not in (64, 128, 256):
        out.append(f"BN={cfg['BN']} must be 64, 128 or 256 (the N of one wgmma)")
    if cfg["BK"] % 64 or cfg["BK"] > 256:
        out.append(f"BK={cfg['BK']} must be a multiple of 64 (a 128-byte swizzle row) and at most 256 (a TMA box side)")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the pipeline needs at least 2 stages")
    if out:
        return out
    acc = cfg["WM"] // 64 * cfg["BN"] // 2
    if acc > 128:
        out.append(f"a {cfg['WM']}x{cfg['BN']} warpgroup tile needs {acc} FP32 accumulators per thread; at most 128 fit")
    if smem(cfg) > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} need {smem(cfg)} B "
                   f"of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out


def ws_smem(cfg) -> int:
    """21_wgmma_ws.cu's dynamic shared memory: 1024 bytes to align the base to the 128-byte
    swizzle's period, STAGES 16-bit A and B tiles, the epilogue's own staging (the producer refills
    the stages while the consumers store: each consumer warp has 16 rows x min(BN, 128) 16-bit
    outputs), and a full and an empty mbarrier per stage."""
    staging = cfg["BM"] // cfg["WM"] * 4 * 16 * min(cfg["BN"], 128) * 2
    return 1024 + cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 2 + staging + 16 * cfg["STAGES"]


def krev_reasons(cfg) -> list[str]:
    """Rungs 21 and 22: KREV=1 takes no stream-K tail (a unit's pieces on several clusters would
    have to agree on its direction; with both, rung 21's DEFER=1 kernel spilled 80 bytes)."""
    if cfg.get("KREV") == 1 and cfg.get("STREAMK") == 1:
        return ["KREV=1 (backward odd waves) takes no stream-K tail: STREAMK must be 0"]
    return []


def group_reasons(cfg) -> list[str]:
    """Rungs 21 and 22: GROUP row tiles per group of the persistent launch order (ws.cuh), whole
    clusters."""
    group = cfg.get("GROUP", 8)
    if not 1 <= group <= 64 or group % cfg.get("CLUSTER", 1):
        return [f"GROUP={group} must be 1 to 64 row tiles and a multiple of CLUSTER={cfg.get('CLUSTER', 1)} "
                f"(the launch order's groups are whole clusters)"]
    return []


def ws_constraints(cfg) -> list[str]:
    """Rung 19's (``wgmma_constraints``, with this rung's shared memory), and what
    21_wgmma_ws.cu adds: exactly two consumer warpgroups (its register split, setmaxnreg 232 for
    them and 40 for the producer, is made for 384 threads), clusters of 1 or 2 blocks, and EPI_TMA
    a switch (its TMA store boxes, 16 rows x 64 outputs, fit every tile and the staging as it is)."""
    out = wgmma_constraints(cfg, ws_smem)
    if not out and cfg["BM"] != 2 * cfg["WM"]:
        out.append(f"BM={cfg['BM']} must be 2 x WM={cfg['WM']}: two consumer warpgroups (the register split "
                   f"between them and the producer is made for 384 threads)")
    out += cluster_reasons(cfg) + group_reasons(cfg) + krev_reasons(cfg)
    out += switch_reasons(cfg, STREAMK=STREAMK_SWITCH, KREV=KREV_SWITCH, BALANCE=BALANCE_SWITCH,
                           EPI_TMA=("staged 16-byte stores", "TMA stores where C allows"),
                           DEFER=("each tile stored at its end",
                                  "held in registers and stored during the next tile's main loop"))
    return out


WSTF32_EPI_B = 2 * 2 * 64 * 32 * 4   # 22_wgmma_tf32.cu's EPI_B: two 8 KB chunks per consumer warpgroup


def wstf32_smem(cfg, planes: int = 1) -> int:
    """22_wgmma_tf32.cu's dynamic shared memory: 1024 bytes to align the base, STAGES FP32 A and B
    tiles (K-major) of ``planes`` planes each (3xtf32: 2, the big and the small TF32 parts), with
    EPI_TMA the TMA store's staging (two 64 x 32 FP32 chunks per consumer warpgroup: 32 KB), and a
    full and an empty mbarrier per stage."""
    return (1024 + cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 4 * planes
            + (WSTF32_EPI_B if cfg.get("EPI_TMA") else 0) + 16 * cfg["STAGES"])


def wstf32_constraints(cfg, planes: int = 1) -> list[str]:
    """What 22_wgmma_tf32.cu static_asserts: rung 21's (two consumer warpgroups of 64 or 128 rows,
    BN a wgmma N, at most 128 accumulators per thread, clusters of 1 or 2), BK whole 128-byte
    swizzle rows of 32 FP32 up to a TMA box side, and shared memory within a block's. With two
    planes (3xtf32) a stage holds both parts of A and B, and a thread holds its sums and a k tile's
    partial sums: twice the accumulators (a 64 x 128 warpgroup tile at most)."""
    out = []
    if cfg["WM"] not in (64, 128) or cfg["BM"] != 2 * cfg["WM"]:
        out.append(f"BM={cfg['BM']} must be 2 x WM, WM={cfg['WM']} 64 or 128 (two consumer warpgroups)")
    if cfg["BN"] not in (64, 128, 256):
        out.append(f"BN={cfg['BN']} must be 64, 128 or 256 (the N of one wgmma)")
    if cfg["BK"] % 32 or cfg["BK"] > 256:
        out.append(f"BK={cfg['BK']} must be a multiple of 32 (a 128-byte swizzle row of FP32) and at most 256")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the pipeline needs at least 2 stages")
    out += cluster_reasons(cfg) + group_reasons(cfg) + krev_reasons(cfg)
    out += switch_reasons(cfg, STREAMK=STREAMK_SWITCH, KREV=KREV_SWITCH, BALANCE=BALANCE_SWITCH, EPI_TMA=("8-byte stores from the accumulators",
                                                                       "TMA stores where C allows"))
    if out:
        return out
    if planes * cfg["WM"] // 64 * cfg["BN"] // 2 > 128:
        out.append(f"a {cfg['WM']}x{cfg['BN']} warpgroup tile needs more than 128 FP32 accumulators per thread"
                   + (" with 3xtf32's partial sums beside the sums" if planes > 1 else ""))
    if wstf32_smem(cfg, planes) > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} FP32"
                   + (f" in {planes} planes (3xtf32's TF32 parts)" if planes > 1 else "")
                   + (" and the TMA store's 32 KB staging (EPI_TMA=1)" if cfg.get("EPI_TMA") else "")
                   + f" need {wstf32_smem(cfg, planes)} B of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out


def fp8_smem(cfg, planes: int = 1) -> int:
    """25_wgmma_fp8.cu's dynamic shared memory: rung 21's carve-up (``ws_smem``) with one-byte
    operands: 1024 bytes of alignment, STAGES FP8 A and B tiles, the epilogue's 16-bit staging and a
    full and an empty mbarrier per stage."""
    epi_n = min(cfg["BN"], 128) if cfg["BN"] % 128 == 0 or cfg["BN"] < 128 else 64   # ws_epi16.cuh's EPI_N
    staging = cfg["BM"] // cfg["WM"] * 4 * 16 * epi_n * 2
    return 1024 + cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] + staging + 16 * cfg["STAGES"]


def fp8_constraints(cfg, planes: int = 1) -> list[str]:
    """What 25_wgmma_fp8.cu static_asserts in either precision: rung 21's structure (two consumer
    warpgroups of 64 or 128 rows, BN a wgmma N, clusters of 1 or 2, the persistent rungs' switches),
    a k tile of 128 or 256 (one or two 128-byte swizzle rows of FP8), at most 128 accumulators per
    thread, and shared memory within a block's."""
    out = []
    if cfg["WM"] not in (64, 128) or cfg["BM"] != 2 * cfg["WM"]:
        out.append(f"BM={cfg['BM']} must be 2 x WM, WM={cfg['WM']} 64 or 128 (two consumer warpgroups)")
    if cfg["BN"] not in (64, 128, 192, 256):
        out.append(f"BN={cfg['BN']} must be 64, 128, 192 or 256 (the N of one wgmma)")
    if cfg["BK"] not in (128, 256):
        out.append(f"BK={cfg['BK']} must be 128 or 256 (one or two 128-byte swizzle rows of FP8)")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the pipeline needs at least 2 stages")
    out += cluster_reasons(cfg) + group_reasons(cfg) + krev_reasons(cfg)
    out += switch_reasons(cfg, STREAMK=STREAMK_SWITCH, KREV=KREV_SWITCH, BALANCE=BALANCE_SWITCH,
                           EPI_TMA=("staged 16-byte stores", "TMA stores where C allows"),
                           DEFER=("each tile stored at its end",
                                  "held in registers and stored during the next tile's main loop"))
    if out:
        return out
    if cfg["WM"] // 64 * cfg["BN"] // 2 > 128:
        out.append(f"a {cfg['WM']}x{cfg['BN']} warpgroup tile needs more than 128 FP32 accumulators per thread")
    if fp8_smem(cfg) > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} FP8 and the "
                   f"epilogue's staging need {fp8_smem(cfg)} B of shared memory; a block may have at most "
                   f"{MAX_SMEM_PER_BLOCK} B")
    return out


def fp8_promoted_constraints(cfg) -> list[str]:
    """Precision fp8 (promoted): a k tile is the promotion's interval of 128, and a thread holds a k
    tile's partial sums beside its FP32 sums, so a warpgroup tile of at most 64 accumulators (64x128)."""
    out = []
    if cfg["BK"] != 128:
        out.append(f"BK={cfg['BK']}: in precision fp8 a k tile is the promotion's interval, 128 of K "
                   f"(BK 256 is for fp8_fast)")
    if cfg["WM"] // 64 * cfg["BN"] // 2 > 96:
        out.append(f"a {cfg['WM']}x{cfg['BN']} warpgroup tile in precision fp8 holds more than 96 sums and 96 "
                   f"partial sums per thread; at most 64x192 (fp8_fast takes 64x256)")
    return out


# ---- the grouped rung (26, GL_GROUPED) -------------------------------------------------------------
GROUP_CAPS = tuple(2 ** i for i in range(13))   # the group table's capacities (GROUP_CAP), 1 to 4096


def grouped_table_bytes(cfg) -> int:
    """26_wgmma_grouped.cu's group table (schedule.cuh, GlGroupedSchedule::table_ints): the units
    before each of GROUP_CAP groups and one more, each group's end, a warp total per warp; none for
    groups over K (GROUP_K=1: every group has the same units)."""
    if cfg.get("GROUP_K"):
        return 0
    return 4 * (2 * cfg["GROUP_CAP"] + 1 + wgmma_threads(cfg) // 32)


def grouped_smem(cfg) -> int:
    """26_wgmma_grouped.cu's dynamic shared memory: rung 21's carve-up (``ws_smem``) and the group
    table after the barriers."""
    return ws_smem(cfg) + grouped_table_bytes(cfg)


def grouped_constraints(cfg, planes: int = 1) -> list[str]:
    """Rung 21's structure and switches (with this rung's shared memory: the table costs a stage
    where many groups meet a deep ring) and a table capacity, GROUP_CAP, a power of two up to 4096."""
    out = [m for m in ws_constraints(cfg) if "shared memory" not in m]
    return out + _group_reasons(cfg, out, grouped_smem)


def grouped_fp8_smem(cfg, planes: int = 1) -> int:
    """27_wgmma_grouped_fp8.cu's dynamic shared memory: rung 25's carve-up (``fp8_smem``: one-byte
    operands) and the group table after the barriers."""
    return fp8_smem(cfg) + grouped_table_bytes(cfg)


def grouped_fp8_constraints(cfg, planes: int = 1) -> list[str]:
    """Rung 25's FP8 structure and switches with rung 26's group table; groups of rows only
    (GROUP_K=0: the FP8 rung has no weight gradient over K)."""
    out = [m for m in fp8_constraints(cfg) if "shared memory" not in m]
    if cfg["BN"] == 192:
        out.append("BN=192 is rung 25's promoted tile; the grouped FP8 rung's are 64, 128 or 256 columns")
    if cfg.get("GROUP_K"):
        out.append("GROUP_K=1: the grouped FP8 rung takes groups of rows only (the experts' tokens); groups over K "
                   "run on wgmma_grouped in 16 bits")
    return out + _group_reasons(cfg, out, grouped_fp8_smem)


def _group_reasons(cfg, found: list[str], smem) -> list[str]:
    """What the grouped rungs add to their base structure's problems (``found``): GROUP_K a switch,
    no stream-K over K, a stream-K tail without deferred stores, a table capacity, and the shared
    memory (``smem``) of the stages and the table within a block's."""
    out = switch_reasons(cfg, GROUP_K=("groups of rows (the experts' tokens)", "groups over K (the weight gradient)"),
                         ABOX=("a row-major A's tile in one box, every row read",
                               "in boxes of 64 rows, those past the tile's group's end not loaded"),
                         WGSKIP=("both consumer warpgroups multiply every tile",
                                 "a consumer warpgroup whose rows all lie past the tile's group's end sits it out"))
    if cfg.get("STREAMK") == 1 and cfg.get("GROUP_K") == 1:
        out.append("GROUP_K=1 (groups over K) takes no stream-K tail: STREAMK must be 0")
    if cfg.get("STREAMK") == 1 and cfg.get("DEFER") == 1:
        out.append("STREAMK=1 takes DEFER=0: the held tile beside the stream-K fixup spills registers")
    if cfg["GROUP_CAP"] not in GROUP_CAPS:
        out.append(f"GROUP_CAP={cfg['GROUP_CAP']} must be a power of two from 1 to {GROUP_CAPS[-1]} (the groups the "
                   f"shared table holds)")
    elif not out and not found and smem(cfg) > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} and a table of "
                   f"{cfg['GROUP_CAP']} groups need {smem(cfg)} B of shared memory; a block may have at most "
                   f"{MAX_SMEM_PER_BLOCK} B")
    return out


# ---- a batch in one launch (rung 21, GL_BATCHED): its configuration ---------------------------------
# Measured on an H200 against torch.bmm (benchmarks/results/h200_batched_bf16.json; the tile and
# switch sweeps in docs/journal/batched.md): a persistent block's first loads and last stores are not
# hidden behind other tiles, which favours more, narrower tiles where K is short; a 64-column tile's
# wgmmas read A again for every 64 columns; clusters of 2 gained nothing on a batch; with a short K
# the deferred store (DEFER=1) has too few k tiles to spread a held tile over and ran behind storing
# at the tile's end, and 4 stages ran ahead of 6 (a producer far ahead competes with the stores).
BATCHED_TILE_RATE = {256: 1.0, 128: 0.94, 64: 0.62}   # per-element rate of a tile's main loop, 128x256's = 1
BATCHED_EXPOSED_K = 96    # one tile's exposed fill and drain, in k of its main loop
BATCHED_DEFER_K = 1024    # DEFER=1 from this K on: 16 k tiles, the held tile's 4 boxes one every 2 of the first half
BATCHED_STAGES = 4


def batched_config(M: int, N: int, K: int, batch: int, sm_count: int) -> tuple[dict, str]:
    """Rung 21's configuration for ``batch`` problems of M x N x K (kernel view) in one launch, and
    why. The candidates are 128-row tiles of 256, 128 or 64 columns (none at least twice as wide as
    N), without clusters. Each is timed as a tile's area times its waves of units on the persistent
    grid times its k (over ``BATCHED_TILE_RATE``), plus one tile's exposed fill and drain
    (``BATCHED_EXPOSED_K``); the least wins, the wider tile on a tie. ``BATCHED_STAGES`` stages; a
    256-column tile defers its stores into the next tile's main loop where K is long enough to hide
    them (``BATCHED_DEFER_K``)."""
    best = None
    for bn in (256, 128, 64):
        if bn > 64 and N <= bn // 2:
            continue    # a tile at least twice the row: its right half computes nothing
        cfg = {"BM": 128, "WM": 64, "BN": bn, "BK": 64, "CLUSTER": 1, "DEFER": int(bn == 256 and K >= BATCHED_DEFER_K),
               "STAGES": BATCHED_STAGES}
        units = -(-M // 128) * -(-N // bn) * batch
        waves = -(-units // max(1, min(units, sm_count)))
        cost = 128 * bn * (waves * K / BATCHED_TILE_RATE[bn] + BATCHED_EXPOSED_K)
        if best is None or cost < best[0] * 0.999:
            best = (cost, cfg, waves)
    _, cfg, waves = best
    return cfg, (f"a batch of {batch} in one launch: {cfg['BM']}x{cfg['BN']} tiles, {waves} wave(s) of them on "
                 f"{sm_count} SMs (the least predicted time)" + (", stores deferred" if cfg["DEFER"] else ""))


GROUPED_MIN_WAVES = 4   # fewer waves of 128x256 units than this: 128x128 tiles, a last wave half as long
GROUPED_STREAMK_K = 4096   # 128x256 units from this K on: a stream-K tail (64 k tiles amortize its fix-up)
# Rung 26: WGSKIP=1 below this many rows per group on average. A warpgroup sitting out a group's last
# tile ends the tile early, and the SM runs ahead of the wave whose tiles share the weights' panels
# in L2: at the moe suite's 8-expert up projection (512 rows per group) the weights were read again
# from DRAM (benchmarks/profiles/h200_ncu_moe_wgskip_up.csv.gz). With groups
# of a row tile or less there is little such sharing to lose. Rung 27 takes WGSKIP=1 at any size:
# on held-out layers FP8 lost less to the rereads than it gained
# (benchmarks/results/h200_moe_wgskip*.json.gz).
GROUPED_WGSKIP_ROWS = 128


def grouped_config(rows: int, N: int, K: int, groups: int, sm_count: int, fused: bool = False) -> tuple[dict, str]:
    """Rung 26's configuration for ``groups`` groups over ``rows`` rows of N x K, and why: rung 21's
    128x256 tile, its stores deferred where K is long enough to hide them (``BATCHED_DEFER_K``);
    128x128 tiles where N is at most 128 or where 128x256 units would make fewer than
    ``GROUPED_MIN_WAVES`` waves (a partial last wave is then a large share of the time, and half-size
    units shorten it) unless K is long enough for the stream-K tail; 128x64 where N is at most 64.
    The host does not know the group sizes: a group is taken to end in half a row tile on average,
    and each to take at least one. 128x256 units over K of ``GROUPED_STREAMK_K`` or more take the
    stream-K tail (STREAMK=1, stores not deferred): the device, counting the units, splits a last
    wave less than half full (schedule.cuh), which evens out a partial wave in place of half-size
    units; not with a ``fused`` epilogue (its functor beside the tail's fix-up spills at 128x256)
    (benchmarks/results/h200_moe_tiles.json.gz: the tiles at the moe suite's shapes and others). The
    stages are those that leave room for the group table (GROUP_CAP, the least power of two that
    holds the groups). Groups of fewer than ``GROUPED_WGSKIP_ROWS`` rows on average take WGSKIP=1."""
    row_tiles = max(-(-rows // 128) + groups // 2, min(groups, rows))
    waves = row_tiles * -(-N // 256) / max(sm_count, 1)
    if N <= 64:
        cfg, why = {"BN": 64, "STAGES": 8, "DEFER": 0}, f"N={N}: 128x64 tiles"
    elif N <= 128 or (waves < GROUPED_MIN_WAVES and (K < GROUPED_STREAMK_K or fused)):
        cfg, why = {"BN": 128, "STAGES": 6, "DEFER": 0}, (f"N={N}: 128x128 tiles" if N <= 128 else
                                                          f"{waves:.1f} waves of 128x256 units: 128x128 tiles")
    elif K >= GROUPED_STREAMK_K and not fused:
        cfg, why = ({"BN": 256, "STAGES": 4, "DEFER": 0, "STREAMK": 1},
                    f"{waves:.1f} waves of 128x256 units, K={K}: a stream-K tail where the last wave is short")
    else:
        cfg, why = {"BN": 256, "STAGES": 4, "DEFER": int(K >= BATCHED_DEFER_K)}, f"{waves:.1f} waves of 128x256 units"
    cfg = {"BM": 128, "WM": 64, "BK": 64, "CLUSTER": 1, "STREAMK": 0, **cfg,
           "GROUP_CAP": next(c for c in GROUP_CAPS if c >= groups),
           "WGSKIP": int(rows < GROUPED_WGSKIP_ROWS * groups)}
    while cfg["STAGES"] > 2 and grouped_smem(cfg) > MAX_SMEM_PER_BLOCK:
        cfg["STAGES"] -= 1
    return cfg, (f"{groups} groups over {rows} rows, about {row_tiles} row tiles on {sm_count} SMs: {why}"
                 + (", stores deferred" if cfg["DEFER"] else "")
                 + (", a warpgroup past its group's end sits the tile out" if cfg["WGSKIP"] else "")
                 + f", {cfg['STAGES']} stages beside a table of {cfg['GROUP_CAP']} groups")


# rung 27's per-area rate of a tile's main loop at many waves, the wider tile's = 1 (H200, the moe FP8
# tiles: benchmarks/results/h200_moe_fp8_tiles.json.gz): promoted 128x64 against 128x128, and with
# fast accumulation 128x128 against 128x256 (less operand reuse per k step)
GROUPED_FP8_RATE = {"fp8": {128: 1.0, 64: 0.75}, "fp8_fast": {256: 1.0, 128: 0.94}}


def grouped_fp8_config(rows: int, N: int, K: int, groups: int, sm_count: int, precision: str = "fp8",
                       block_scales: bool = False) -> tuple[dict, str]:
    """Rung 27's configuration for ``groups`` groups of FP8 rows over ``rows`` rows of N x K, and
    why. Two tiles per precision: promoted (precision fp8, and block scales, which multiply each k
    tile of 128's sums) rung 25's 128x128 (a thread holds a k tile's partial sums beside its FP32
    sums) or 128x64; fp8_fast (the sums in the tensor cores) rung 21's 128x256, its stores deferred
    where K is long enough to hide them, or 128x128. Of the two, the one of least predicted time:
    whole waves of its units on the persistent grid (a partial last wave costs a whole one) times a
    unit's columns over its per-area rate (``GROUPED_FP8_RATE``), the wider tile on a tie. The host
    does not know the group sizes: as in ``grouped_config``, a group ends in half a row tile on
    average. The stages are those that leave room for the group table. Judged on held-out layers
    (benchmarks/results/h200_moe_fp8_heldout*.json.gz). WGSKIP=1 at any group size
    (benchmarks/results/h200_moe_wgskip*.json.gz)."""
    row_tiles = max(-(-rows // 128) + groups // 2, min(groups, rows))
    prec = "fp8" if precision == "fp8" or block_scales else "fp8_fast"
    rates = GROUPED_FP8_RATE[prec]
    cost = {}
    for bn, rate in rates.items():
        waves = -(-row_tiles * -(-N // bn) // max(sm_count, 1))
        cost[bn] = (waves * bn / rate, waves)
    wide, narrow = max(rates), min(rates)
    bn = narrow if N <= narrow or cost[narrow][0] < cost[wide][0] else wide
    stages = {256: 4, 128: 6, 64: 8}[bn]
    cfg = {"BN": bn, "STAGES": stages, "DEFER": int(bn == 256 and K >= BATCHED_DEFER_K)}
    why = (f"N={N}: 128x{bn} tiles" if N <= narrow else
           f"128x{bn} tiles: {cost[bn][1]} wave(s) of their units against {cost[wide if bn == narrow else narrow][1]} "
           f"of 128x{wide if bn == narrow else narrow} (the least predicted time)")
    cfg = {"BM": 128, "WM": 64, "BK": 128, "CLUSTER": 1, "STREAMK": 0, **cfg,
           "GROUP_CAP": next(c for c in GROUP_CAPS if c >= groups), "GROUP_K": 0, "WGSKIP": 1}
    while cfg["STAGES"] > 2 and grouped_fp8_smem(cfg) > MAX_SMEM_PER_BLOCK:
        cfg["STAGES"] -= 1
    return cfg, (f"{groups} groups over {rows} rows, about {row_tiles} row tiles on {sm_count} SMs, "
                 f"{'promoted' if prec == 'fp8' else 'fast accumulation'}: {why}"
                 + (", stores deferred" if cfg["DEFER"] else "")
                 + ", a warpgroup past its group's end sits the tile out"
                 + f", {cfg['STAGES']} stages beside a table of {cfg['GROUP_CAP']} groups")


def grouped_k_config(M: int, N: int, K: int, groups: int, sm_count: int) -> tuple[dict, str]:
    """Rung 26's configuration for ``groups`` groups over K (GROUP_K=1: the weight gradient, each
    group all of M x N over its share of K): rung 21's 128x256 tile, or 128x128 where N is at most
    128 or where the 128x256 units would make fewer than ``GROUPED_MIN_WAVES`` waves, its stores
    deferred where a group's share of K is long enough to hide them."""
    units = groups * -(-M // 128) * -(-N // 256)
    waves = units / max(sm_count, 1)
    if N <= 128 or waves < GROUPED_MIN_WAVES:
        cfg, why = {"BN": 128, "STAGES": 6, "DEFER": 0}, f"{waves:.1f} waves of 128x256 units: 128x128 tiles"
    else:
        cfg, why = ({"BN": 256, "STAGES": 4, "DEFER": int(K // max(groups, 1) >= BATCHED_DEFER_K)},
                    f"{waves:.1f} waves of 128x256 units")
    cfg = {"BM": 128, "WM": 64, "BK": 64, "CLUSTER": 1, **cfg, "GROUP_CAP": 1, "GROUP_K": 1}
    return cfg, (f"{groups} groups over K={K} of {M}x{N} on {sm_count} SMs: {why}"
                 + (", stores deferred" if cfg["DEFER"] else ""))


# ---- the entries (core/registry.py lists every family's in ladder order) --------------------
RUNGS: tuple[Rung, ...] = (
    Rung(
        19, "wgmma_tma", "Hopper WGMMA fed by TMA",
        "wgmma.mma_async reads A and B from 128-byte-swizzled shared memory through matrix descriptors; one thread's TMA boxes fill a STAGES-deep ring guarded by mbarriers.",
        ("issue 10, section 1.2 (Hopper WGMMA + TMA)",), "19_wgmma_tma.cu", dtypes=("fp16", "bf16"),
        params={"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "SPLITK": 1, "SKCLUSTER": 0},
        presets={"128x256": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4},
                 "128x128": {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "STAGES": 6},
                 "256x128": {"BM": 256, "BN": 128, "BK": 64, "WM": 128, "STAGES": 4}},
        threads=wgmma_threads, constraints=lambda c: wgmma_constraints(c) + splitk_constraints(c), smem=wgmma_smem,
        sass_claims=("HGMMA", "UTMALDG", "SYNCS"), min_arch=90, max_arch=90,
        reads=TMA_READS, stores=ANY_16BIT_OUTPUT,   # its staged stores round to C's type (gl_store_c8)
        space={"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (64, 128), "WM": (64, 128), "STAGES": (2, 3, 4, 5, 6),
               "SPLITK": SPLITK_SPACE, "SKCLUSTER": (0, 1)},
    ),
    Rung(
        21, "wgmma_ws", "Warp-specialized persistent WGMMA: setmaxnreg, tile scheduler, clusters",
        "A producer warpgroup (setmaxnreg.dec) runs TMA ahead into the next tile while two consumer warpgroups (setmaxnreg.inc) multiply and store their tile through their own shared staging (stmatrix, then TMA stores; 16-byte rows where TMA cannot or beta != 0); one block per SM loops over the tiles; clusters of 2 along M share B by TMA multicast.",
        ("CUTLASS sm90 warp-specialized persistent GEMM (TMA, cooperative consumers, 2x1 cluster)",), "21_wgmma_ws.cu",
        dtypes=("fp16", "bf16"),
        # GROUP 16 (rung 22's reason: a wave's patch reads less from DRAM), faster at 4096^3 and
        # 8192^3 in both dtypes (h100_tune_wgmma_ws_group_*.json)
        # DEFER 1: the tile held in registers and stored during the next, so a wave's C writes do not
        # come in one burst; faster at 4096^3 and 8192^3 (h100_tune_wgmma_ws_defer_*.json)
        # BALANCE 1: the fewest clusters that take no more waves (persistent_grid): whole column tiles
        # per wave, faster at 4096^3 and 8192^3 (h100_tune_balance_*.json); the LLM suites with it:
        # h100_llm_suite_*_balance.json
        params={"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 2, "EPI_TMA": 1, "GROUP": 16,
                "STREAMK": 0, "DEFER": 1, "KREV": 0, "BALANCE": 1},
        presets={"128x256": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 2},
                 "128x256_nocluster": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 1},
                 # DEFER 0 with 128x128 tiles: DEFER 1 was slower there at 1024x14336x4096
                 # (h100_tune_wgmma_ws_defer_*_1024x14336x4096.json; cause not found)
                 "128x128": {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "STAGES": 6, "CLUSTER": 2, "DEFER": 0},
                 "256x128": {"BM": 256, "BN": 128, "BK": 64, "WM": 128, "STAGES": 4, "CLUSTER": 2}},
        threads=wgmma_threads, constraints=ws_constraints, smem=ws_smem,
        sass_claims=("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"), min_arch=90, max_arch=90,
        reads=TMA_READS, stores=Stores(outputs=("fp32", "fp16", "bf16"), store_map=True, store_twin=True),
        walk=Walk(persistent=True, batched=True),
        space={"BN": (128, 256), "BK": (64, 128), "STAGES": (2, 3, 4, 5, 6), "CLUSTER": (1, 2), "EPI_TMA": (0, 1),
               "GROUP": (8, 16), "STREAMK": (0, 1), "DEFER": (0, 1), "KREV": (0, 1), "BALANCE": (0, 1)},
    ),
    Rung(
        22, "wgmma_tf32", "FP32 on Hopper's wgmma: TF32 in the warp-specialized persistent structure",
        "wgmma.mma_async m64nNk8 .tf32 reads K-major FP32 tiles (TMA, 128-byte swizzle) in rung 21's persistent, warp-specialized, clustered loop; TF32 wgmma has no transpose, so the plan runs row-major A and B transposed (C^T = B^T A^T) with the MN-major operand read into registers (wgmma's register-A form), and copies a row-major B only beside a column-major A. 3xtf32: a split pass writes each operand's TF32 big and small parts as two K-major planes, and three wgmmas per k8 step fill a k tile's partial sums, added in FP32. The epilogue stores through TMA from a 32 KB staging where C allows and beta == 0 (EPI_TMA), else 8-byte stores from the accumulators.",
        ("CUTLASS sm90 TF32 GEMM (tfloat32_t, both operands K-major)",), "22_wgmma_tf32.cu",
        precisions=("tf32", "3xtf32"),
        # tf32 without a cluster: the register-A path (row-major A and B) ran faster with CLUSTER=1
        # than with CLUSTER=2 in the same sitting (h100_tune_wgmma_tf32_rs_*.json); the K-major path
        # was level either way
        # GROUP 16: a wave's patch of tiles 16 x 8.25 instead of 8 x 16.5 reads a fifth less from DRAM
        # (Nsight Compute at 4096^3, h100_profile_wgmma_tf32_rs_*_4096.json); a little faster at 4096^3,
        # level at 8192^3 (h100_tune_wgmma_tf32_group_*.json)
        # EPI_TMA 1: the TMA store epilogue, faster at K = 1024 (8192x8192x1024, 4096x4096x1024),
        # level at 4096^3, a little slower at 8192^3 (its power draw lowers the clock there: the
        # shipped table keeps EPI_TMA=0 at 8192^3); h100_tune_wgmma_tf32_epi_*.json. With its staging
        # made conflict-free it takes cuBLAS's cycles at 8192^3 but more L2 lookups, a lower clock
        # and more time (h100_tune_wgmma_tf32_{epi,cluster,epiwait}_8192_conflictfree.json;
        # docs/journal/tf32.md)
        # 256x128 (BM 256, WM 128; the tuner had once run the preset as 128x128): slower than
        # 128x256 at 4096^3 and 8192^3 (h100_tune_wgmma_tf32_tiles_*.json)
        # BALANCE 1 (rung 21's reason): faster at 8192^3 and 4096^3, sampled and sustained
        # (h100_balance_tf32.json), with fewer DRAM reads at 8192^3
        # (benchmarks/profiles/h100_l2probe_tf32_8192_balance.json)
        params={"BM": 128, "BN": 256, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 1, "GROUP": 16, "STREAMK": 0,
                "EPI_TMA": 1, "KREV": 0, "BALANCE": 1},
        # 3xtf32: a stage holds both TF32 planes of A and B, and the warps hold a k tile's partial
        # sums beside the sums: 128x128 tiles (BN 256 would need 256 accumulators), 2 stages of 64 KB
        # (3 stages met the power cap at 8192^3 and ran slower than 2: h100_wgmma_3xtf32_*.json)
        per_precision={"3xtf32": PrecisionPart(
            planes=2, params={"BN": 128, "STAGES": 2, "CLUSTER": 2, "GROUP": 8},
            presets={"128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "STAGES": 3, "CLUSTER": 2},
                     "128x128_nocluster": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "STAGES": 3, "CLUSTER": 1},
                     "128x64": {"BM": 128, "BN": 64, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 2}})},
        presets={"128x256": {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 2},
                 "128x256_nocluster": {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 1},
                 "128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "STAGES": 6, "CLUSTER": 2},
                 "256x128": {"BM": 256, "BN": 128, "BK": 32, "WM": 128, "STAGES": 4, "CLUSTER": 2}},
        threads=wgmma_threads, constraints=wstf32_constraints, smem=wstf32_smem,
        sass_claims=("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"), min_arch=90, max_arch=90,
        reads=Reads(tensor_maps=True, k_major=True, register_a=("tf32",)), stores=Stores(store_map=True),
        walk=Walk(persistent=True),
        space={"BN": (128, 256), "BK": (32, 64), "STAGES": (2, 3, 4, 5, 6), "CLUSTER": (1, 2), "GROUP": (8, 16),
               "STREAMK": (0, 1), "EPI_TMA": (0, 1), "KREV": (0, 1), "BALANCE": (0, 1)},
    ),
    Rung(
        25, "wgmma_fp8", "FP8 on Hopper's wgmma: scaled e4m3/e5m2 products, promoted into FP32",
        "wgmma.mma_async m64nNk32 .e4m3/.e5m2 reads K-major FP8 tiles in rung 21's persistent, warp-specialized, clustered loop at twice the 16-bit rate; each k tile of 128 is summed in fresh accumulators and promoted into FP32 registers (precision fp8; fp8_fast sums the whole K in the tensor cores), and tensor-wise or row-wise scales multiply the accumulators before the epilogue (gemmlab.scaled_mm).",
        ("DeepGEMM FP8 GEMM (FP32 promotion every 128 of K)", "cuBLASLt FP8 matmul (scaled e4m3/e5m2)"),
        "25_wgmma_fp8.cu", dtypes=("fp8",), precisions=("fp8", "fp8_fast"),
        # promoted: 128x128 tiles (the k tile's partial sums beside the sums), 6 stages of 32 KB.
        # CLUSTER 1: without B's multicast rung 25 ran ahead of or level with CLUSTER 2 at each of the
        # FP8 issue's shapes, in both precisions (benchmarks/results/h200_fp8_tiles.json)
        params={"BM": 128, "BN": 128, "BK": 128, "WM": 64, "STAGES": 6, "CLUSTER": 1, "EPI_TMA": 1, "GROUP": 16,
                "STREAMK": 0, "DEFER": 0, "KREV": 0, "BALANCE": 1, "WGSKIP": 0},
        per_precision={
            "fp8": PrecisionPart(constraints=fp8_promoted_constraints,
                                 presets={"128x128": {"BM": 128, "BN": 128, "BK": 128, "WM": 64, "STAGES": 6, "CLUSTER": 1},
                                          "128x128_cluster": {"BM": 128, "BN": 128, "BK": 128, "WM": 64, "STAGES": 6,
                                                              "CLUSTER": 2},
                                          # the rule's half tile where 128x128 tiles leave most SMs idle
                                          "128x64": {"BM": 128, "BN": 64, "BK": 128, "WM": 64, "STAGES": 8,
                                                     "CLUSTER": 1}}),
            # summed in the tensor cores: one set of accumulators, so rung 21's 128x256 tile and deferred
            # stores; its 128x128 preset is the rule's half tile where 128x256 tiles leave SMs idle
            "fp8_fast": PrecisionPart(params={"BN": 256, "STAGES": 4, "DEFER": 1},
                                      presets={"128x256": {"BM": 128, "BN": 256, "BK": 128, "WM": 64, "STAGES": 4, "CLUSTER": 1},
                                               "128x128": {"BM": 128, "BN": 128, "BK": 128, "WM": 64, "STAGES": 6, "CLUSTER": 1,
                                                           "DEFER": 0},
                                               "256x128": {"BM": 256, "BN": 128, "BK": 128, "WM": 128, "STAGES": 4, "CLUSTER": 1}})},
        threads=wgmma_threads, constraints=fp8_constraints, smem=fp8_smem,
        sass_claims=("QGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"), min_arch=90, max_arch=90,
        reads=Reads(tensor_maps=True, k_major=True), stores=Stores(outputs=("fp32", "fp16", "bf16"), store_map=True,
                                                                   store_twin=True),
        walk=Walk(persistent=True),
        space={"BN": (64, 128, 192, 256), "BK": (128, 256), "STAGES": (2, 3, 4, 5, 6, 8), "CLUSTER": (1, 2),
               "EPI_TMA": (0, 1), "GROUP": (8, 16), "STREAMK": (0, 1), "DEFER": (0, 1), "KREV": (0, 1), "BALANCE": (0, 1)},
    ),
    Rung(
        26, "wgmma_grouped", "Grouped GEMM: the experts of a mixture-of-experts layer in one launch",
        "Rung 21's parts with a tile scheduler over (group, tile) pairs: every block reads the group sizes on the device (cumulative ends, or counts of a padded buffer) into a shared table, then walks its units; A and C one 2-D map over every group's rows, the weights a 3-D map per group, the tile that reaches past its group's end stored by rows (gemmlab.grouped_mm; a plain call is one group).",
        ("CUTLASS sm90 grouped GEMM (persistent tile scheduler over groups)",
         "DeepGEMM grouped GEMMs (contiguous and masked layouts)"), "26_wgmma_grouped.cu", dtypes=("fp16", "bf16"),
        # rung 21's tile and deferred stores; no cluster (B's multicast gained nothing on a batch,
        # whose units are as short as a group's: docs/journal/batched.md); GROUP_CAP: the plan's, from
        # the call's group count (core/grouped.py)
        params={"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 1, "EPI_TMA": 1, "GROUP": 16,
                "DEFER": 1, "GROUP_CAP": 1, "GROUP_K": 0, "STREAMK": 0, "ABOX": 1,
                "WGSKIP": 0},
        presets={"128x256": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 1, "DEFER": 1},
                 "128x256_cluster": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 2, "DEFER": 1},
                 "128x128": {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "STAGES": 6, "CLUSTER": 1, "DEFER": 0},
                 "128x64": {"BM": 128, "BN": 64, "BK": 64, "WM": 64, "STAGES": 8, "CLUSTER": 1, "DEFER": 0}},
        threads=wgmma_threads, constraints=grouped_constraints, smem=grouped_smem,
        sass_claims=("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"), min_arch=90, max_arch=90,
        reads=Reads(tensor_maps=True), stores=Stores(outputs=("fp32", "fp16", "bf16"), store_map=True),
        walk=Walk(persistent=True, grouped=True),
        space={"BN": (64, 128, 256), "BK": (64, 128), "STAGES": (2, 3, 4, 5, 6, 8), "CLUSTER": (1, 2), "EPI_TMA": (0, 1),
               "GROUP": (8, 16), "DEFER": (0, 1), "STREAMK": (0, 1)},
    ),
    Rung(
        27, "wgmma_grouped_fp8", "Grouped FP8: the experts' scaled e4m3/e5m2 products in one launch",
        "Rung 26's tile scheduler over (group, tile) pairs, its group sizes read on the device, with rung 25's FP8 mainloop: k32 wgmmas on K-major FP8 tiles, each k tile of 128 promoted into FP32 (fp8_fast: summed in the tensor cores); scale_a along all the tokens, scale_b each expert's own (tensor-wise one value per group, row-wise one row of N, block-wise 128x128 blocks), applied per tile from its group (gemmlab.scaled_grouped_mm).",
        ("DeepGEMM FP8 grouped GEMMs (contiguous and masked layouts, block scales)",
         "torch._scaled_grouped_mm (row-wise scales)"), "27_wgmma_grouped_fp8.cu", dtypes=("fp8",),
        precisions=("fp8", "fp8_fast"),
        # rung 25's promoted tile and its fp8_fast 128x256 one, no cluster (rung 26's reason); GROUP_CAP:
        # the plan's, from the call's group count (core/scaled_grouped.py)
        params={"BM": 128, "BN": 128, "BK": 128, "WM": 64, "STAGES": 6, "CLUSTER": 1, "EPI_TMA": 1, "GROUP": 16,
                "DEFER": 0, "GROUP_CAP": 1, "GROUP_K": 0, "STREAMK": 0, "ABOX": 1,
                "WGSKIP": 1},
        per_precision={
            "fp8": PrecisionPart(constraints=fp8_promoted_constraints,
                                 presets={"128x128": {"BM": 128, "BN": 128, "BK": 128, "WM": 64, "STAGES": 6},
                                          "128x64": {"BM": 128, "BN": 64, "BK": 128, "WM": 64, "STAGES": 8}}),
            "fp8_fast": PrecisionPart(params={"BN": 256, "STAGES": 4, "DEFER": 1},
                                      presets={"128x256": {"BM": 128, "BN": 256, "BK": 128, "WM": 64, "STAGES": 4,
                                                           "DEFER": 1},
                                               "128x128": {"BM": 128, "BN": 128, "BK": 128, "WM": 64, "STAGES": 6,
                                                           "DEFER": 0}})},
        threads=wgmma_threads, constraints=grouped_fp8_constraints, smem=grouped_fp8_smem,
        sass_claims=("QGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"), min_arch=90, max_arch=90,
        reads=Reads(tensor_maps=True, k_major=True), stores=Stores(outputs=("fp32", "fp16", "bf16"), store_map=True),
        walk=Walk(persistent=True, grouped=True),
        space={"BN": (64, 128, 256), "BK": (128, 256), "STAGES": (2, 3, 4, 5, 6, 8), "EPI_TMA": (0, 1),
               "GROUP": (8, 16), "DEFER": (0, 1), "STREAMK": (0, 1)},
    ),
)
