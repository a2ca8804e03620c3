"""The dispatch's rules: what ``kernel="auto"`` runs where no table or measured model answers, and
the decisions every source shares (core/dispatch.py says in which order the sources are asked).

* ``choose``: the top rung for the dtype and precision on the architecture (never a thin one).
* ``rule_config``: its tile, split-K and clusters from the problem's shape and the SM count.
* ``rule`` / ``thin_choice``: the whole rule, a thin rung for thin problems (its own ``Rung.thin_rule.choose``
  or ``registry.thin_rule_config``), a rung that can split K where the top one cannot and would
  leave more than half of the SMs idle, the rung below a split pass that costs more than it saves.
* ``with_packing``: whether a rung copies its unaligned operands first (``pack_estimate``).

A ``Choice`` says what runs and why; ``gemmlab.plan(...)`` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import packing
from .arch import arch_number
from .families.hopper import batched_config
from .families.simt import SIMT_BATCHED_RATE, simt_batched_config
from .problem import GemmProblem
from .registry import MAX_GRID_Y, Rung, for_dtype, get, thin_rule_config
from .schema import MAX_GRID_Z

SKINNY_PAD = 0.75     # a preset replaces the default tile when it pads to at most 3/4 of the area
MIN_SLICE_K = 256     # split-K slices at least this long along K
HALF_TILE_TIME = 0.8  # the half-BN preset replaces the tile when predicted at most this fraction of its time
# Persistent rungs without split-K whose half tile the rule weighs too: rung 25, whose half tiles
# (fp8_fast's 128x128, fp8's 128x64) ran ahead of its full ones where those left SMs idle
# (128x14336x4096 in fp8_fast: 112 tiles of 128x128 against 56 of 128x256; 128x4096x4096 in fp8: 64
# of 128x64 against 32 of 128x128), and behind them elsewhere (benchmarks/results/h200_fp8_tiles.json)
HALF_TILE_RUNGS = ("wgmma_fp8",)


# Rung 25 (tensor-wise or row-wise scales, rows of 32-byte multiples): of its tiles, the one whose whole
# waves take least time, a tile's time in units of a 128x128 tile's (FP8_TILE_TIME). Wider tiles reuse
# each operand tile over more of the other but a wave of them takes longer; 128x64 makes twice
# 128x128's tiles. Promoted (fp8): 128x64, 128x128 and 128x192 (96 sums and 96 partial sums per
# thread); fast accumulation (fp8_fast, one set of sums) 128x256 besides. The times are what the
# tiles' runs imply (each shape's whole waves and TFLOP/s). Promoted
# (benchmarks/results/h200_fp8_tiles_bn192.json.gz, h200_fp8_tiles_bn192_heldout.json.gz,
# h200_fp8_promoted_seed3.json.gz): for 128x64 the median of 14 shapes (over 0.51-0.86), for 128x192
# 1.35 against a median of 1.32 over 22 shapes (0.97-1.61): at 1.32 the rule would take 128x192 at
# 4096^3 (6 whole waves against 8), where 128x128 ran 4-5% ahead. Fast accumulation
# (h200_fp8_fast_tiles*.json.gz): the medians over 24 shapes, 1.33 for 128x192 (0.95-1.70) and 1.7
# for 128x256 (1.31-2.03). The rules before them (the widest tile but at many waves or where it left
# SMs idle, then the registry's half tile) ran 0.46-0.96x the better promoted tile on 8 random
# shapes (h200_fp8_promoted_seed3.json.gz) and fast accumulation 0.80-1.00x its best tile on 18
# (h200_fp8_fast_tiles_seed3.json.gz, _seed4): few waves of either tile is where the choice matters
# most. Both rules, on 10 shapes drawn after they were set: 0.99 and 0.97 of the best tile
# (h200_fp8_tiles_heldout.json.gz).
FP8_TILE_TIME = {"fp8": {128: 1.0, 192: 1.35, 64: 0.75},
                 "fp8_fast": {128: 1.0, 192: 1.33, 256: 1.7, 64: 0.75}}
FP8_TILES = {"fp8": {128: {"BN": 128, "STAGES": 6}, 192: {"BN": 192, "STAGES": 5}, 64: {"BN": 64, "STAGES": 8}},
             "fp8_fast": {128: {"BN": 128, "STAGES": 6, "DEFER": 0}, 192: {"BN": 192, "STAGES": 5, "DEFER": 0},
                          256: {"BN": 256, "STAGES": 4, "DEFER": 1}, 64: {"BN": 64, "STAGES": 8, "DEFER": 0}}}
FP8_TILE_ROWS = {"BM": 128, "BK": 128, "WM": 64}   # every tile above: two consumer warpgroups of 64 rows
FP8_WIDE_TILE = {**FP8_TILE_ROWS, **FP8_TILES["fp8"][192], "CLUSTER": 1}


def fp8_wave_tile(cfg: dict, M: int, N: int, sm_count: int, precision: str = "fp8") -> tuple[dict, str] | None:
    """Rung 25's tile in ``precision`` for an M x N output in place of the rule's ``cfg`` (a tile
    alone, of 128 rows), and why: the one whose whole waves at ``FP8_TILE_TIME`` take least time (the
    first of equals in the table's order); None where that is ``cfg``'s."""
    times, tiles = FP8_TILE_TIME[precision], FP8_TILES[precision]
    if cfg["CLUSTER"] != 1 or cfg["BM"] != 128 or cfg["BN"] not in tiles:
        return None
    waves = {bn: _whole_waves(M, N, bn, 1, sm_count) for bn in times}
    bn = min(times, key=lambda b: waves[b] * times[b])
    if bn == cfg["BN"]:
        return None
    return (dict(cfg, **tiles[bn]),
            f"128x{bn} tiles: {waves[bn]} whole waves, the least time of "
            + ", ".join(f"128x{b}" for b in sorted(times)))


# Rung 25 where an operand it reads in place has rows that are not 32-byte multiples (K-major FP8 at
# K % 32 == 16; copies are padded to 32 bytes): the L2 serves about twice the requests for such rows
# and bounds the kernel, even at the 128-byte promotion the maps then take (core/tensormaps.py).
# Clusters of 2 (each block loads half of B's tile and multicasts it) and, promoted, 128x192 tiles
# (fewer operand bytes per flop) relieve it: from one wave of 128x128 tiles on they ran ahead of the
# rule's tiles in every precision and scaling, below a wave the rule's smaller tiles mostly ran ahead
# (benchmarks/results/h200_fp8_k16.json.gz, h200_fp8_k16_heldout.json.gz). Which tile, and whether
# in clusters, is the one whose whole waves take least time, at FP8_WIDE_RATE a 128-column tile's
# rate per column for 192 columns and at 1 / FP8_CLUSTER_RATE of it for tiles alone (a cluster over
# an odd count of row tiles computes one row of tiles more). The whole waves are what decided the
# misses of simpler rules on held-out draws (h200_fp8_k16_heldout_seed15.json.gz, _seed16): at
# 3949x928, 2 waves of either tile, 128x128 ran 5% ahead; at 806x3456, 126 tiles of 128x192 in one
# wave and 144 in clusters, the tiles alone ran 38% ahead.
FP8_MISALIGNED_WAVES = 1
FP8_WIDE_RATE = 1.2
FP8_CLUSTER_RATE = 1.25
FP8_CLUSTER_TILE = {**FP8_TILE_ROWS, **FP8_TILES["fp8"][128], "CLUSTER": 2}


def _whole_waves(M: int, N: int, bn: int, cluster: int, sm_count: int) -> int:
    """Whole waves of 128 x ``bn`` tiles over ``sm_count`` SMs, row tiles rounded up to pairs in
    clusters of 2."""
    rows = -(-M // 128)
    rows += rows % cluster
    return -(-rows * -(-N // bn) // max(sm_count, 1))


def _misaligned_time(M: int, N: int, bn: int, cluster: int, sm_count: int) -> float:
    """Whole waves of 128 x ``bn`` tiles, each in units of a 128-column tile's time in clusters, at
    rows that are not 32-byte multiples."""
    waves = _whole_waves(M, N, bn, cluster, sm_count)
    return waves * bn / (FP8_WIDE_RATE if bn == 192 else 1.0) * (1.0 if cluster == 2 else FP8_CLUSTER_RATE)


def fp8_misaligned(cfg: dict, M: int, N: int, row_bytes: tuple[int, ...], precision: str, block: bool,
                   sm_count: int) -> tuple[dict, str] | None:
    """Rung 25's configuration in place of the rule's ``cfg`` where an operand read in place has rows
    of ``row_bytes`` that are not all 32-byte multiples, and why: of 128x192 and 128x128 tiles
    (promoted; block scales 128x128, fast accumulation the rule's tile), in clusters of 2 or alone,
    the one ``_misaligned_time`` puts first. None where the rows are, below
    ``FP8_MISALIGNED_WAVES`` waves of 128x128 tiles, or over one row tile."""
    if all(b % 32 == 0 for b in row_bytes):
        return None
    waves = -(-M // 128) * -(-N // 128) / max(sm_count, 1)
    if waves < FP8_MISALIGNED_WAVES or -(-M // 128) < 2:
        return None
    if precision == "fp8":
        tiles = [dict(FP8_CLUSTER_TILE)] if block else [dict(FP8_WIDE_TILE), dict(FP8_CLUSTER_TILE)]
    else:
        tiles = [dict(cfg)]
    options = [dict(t, CLUSTER=c) for t in tiles for c in (2, 1)]
    new = min(options, key=lambda o: _misaligned_time(M, N, o["BN"], o["CLUSTER"], sm_count))   # first of equals
    how = "in clusters of 2" if new["CLUSTER"] == 2 else "alone"
    return new, (f"rows of {'/'.join(map(str, row_bytes))} bytes, not all 32-byte multiples, at {waves:.1f} waves "
                 f"of 128x128: {new['BM']}x{new['BN']} tiles {how}, their whole waves the shortest")


# Rung 25 with block scales (tiles within one column block of scale_b): 128x128 tiles in clusters of
# 2, B multicast, have the mainloop part add each k tile's sums under the next k tile's wgmmas
# (kernels/mainloop.cuh), and at the FP8 suite's shapes of many tiles ran 1.03-1.06x 128x128 tiles
# alone (benchmarks/results/h200_fp8_block.json.gz; geomean FP8_BLOCK_CLUSTER_RATE). 128x64 tiles
# (the rule's where they fill the SMs better) ran at 0.57-0.74x 128x128's rate there (geomean
# FP8_BLOCK_HALF_RATE). Clusters where their whole waves take less time at those rates than the
# rule's tiles' alone: a cluster over an odd count of row tiles computes one row of tiles more, and
# one row tile leaves half of each cluster idle.
FP8_BLOCK_CLUSTER_RATE = 1.05
FP8_BLOCK_HALF_RATE = 0.66


def fp8_block_cluster(cfg: dict, M: int, N: int, sm_count: int) -> tuple[dict, str] | None:
    """Rung 25's 128x128 tile in clusters of 2 in place of the rule's block-scaled ``cfg`` (128x128 or
    128x64 alone) where ``_whole_waves`` at the rates above favour it, and why; None elsewhere
    (other tiles, clusters already, a single row tile)."""
    if cfg["BN"] not in (64, 128) or cfg["CLUSTER"] != 1 or -(-M // 128) < 2:
        return None
    alone = _whole_waves(M, N, cfg["BN"], 1, sm_count)
    paired = _whole_waves(M, N, 128, 2, sm_count)
    if paired / FP8_BLOCK_CLUSTER_RATE >= alone * (1.0 if cfg["BN"] == 128 else 0.5 / FP8_BLOCK_HALF_RATE):
        return None
    return (dict(cfg, **FP8_CLUSTER_TILE, DEFER=0),
            f"block scales: 128x128 tiles in clusters of 2 ({paired} whole waves against {alone} of 128x{cfg['BN']} "
            f"alone; B multicast, each k tile added under the next one's wgmmas)")


# Rung 25 where M fits one consumer warpgroup's rows of a tile (WM, 64): the other warpgroup's rows all
# lie past M, and with WGSKIP=1 it sits every tile out (kernels/ring.cuh), leaving the tensor cores
# to the warpgroup whose products are stored.
def fp8_one_warpgroup(cfg: dict, M: int) -> tuple[dict, str] | None:
    """Rung 25's ``cfg`` with WGSKIP=1 where M is at most its WM rows, and why; None elsewhere."""
    if M > cfg["WM"] or cfg.get("WGSKIP"):
        return None
    return dict(cfg, WGSKIP=1), f"M={M} within one warpgroup's {cfg['WM']} rows: the other sits every tile out"


def fp8_rule_tiles(rung: Rung, precision: str, block: bool) -> tuple[dict, ...]:
    """Every configuration of rung 25 its rule and the adjustments above can choose in ``precision``
    (block scales: ``block``): the default tile and the presets (the half tile among them), the
    tiles of ``fp8_wave_tile`` where the scales allow them, in clusters of 2 where rows are not
    32-byte multiples, and alone with WGSKIP=1 where M fits one warpgroup; what
    ``gemmlab.precompile`` builds so that no choice of the rule compiles on a call."""
    base = [rung.config(None, precision)] + [rung.config(p, precision) for p in rung.presets_for(precision)]
    if block:
        base = [c for c in base if c["BN"] <= 128]
    wide = [] if block else [rung.config(t, precision) for t in FP8_TILES[precision].values()]
    clustered = [dict(FP8_CLUSTER_TILE)] if precision == "fp8" else [dict(c, CLUSTER=2) for c in base]
    clustered += [dict(FP8_WIDE_TILE, CLUSTER=2)] if precision == "fp8" and not block else []
    skipping = [dict(c, WGSKIP=1) for c in base + wide if c["CLUSTER"] == 1]
    out: list[dict] = []
    for c in base + wide + clustered + skipping:
        full = rung.config(c, precision)
        if full not in out:
            out.append(full)
    return tuple(out)


@dataclass(frozen=True)
class Choice:
    """What runs and why: ``source`` is "named", "tuned", "defaults", "model", "online" or "rule"."""

    rung: Rung
    config: object = None                 # what Plan takes: None, a preset name, a dict ...
    source: str = "named"
    reason: str = ""
    entry: dict = field(default_factory=dict, compare=False)   # the table entry used, if any

    def as_dict(self) -> dict:
        return {"rung": self.rung.slug, "config": self.config, "source": self.source, "reason": self.reason}

    def __str__(self) -> str:
        cfg = self.config if not isinstance(self.config, dict) else ",".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.rung.slug} [{cfg or 'defaults'}] ({self.source}: {self.reason})"


# ---- the rule -----------------------------------------------------------------------------------
def _padded(M: int, N: int, cfg) -> int:
    return -(-M // cfg["BM"]) * cfg["BM"] * -(-N // cfg["BN"]) * cfg["BN"]


def split_for(cfg, M: int, N: int, K: int, sm_count: int) -> int:
    """The rule's K slices for tile ``cfg`` (1: none): with t output tiles on S SMs, s = S // t while
    that is 2 or more (t <= S/2), at most 64 (registry.MAX_SPLITK) and at most K / ``MIN_SLICE_K``;
    none when the row tiles need grid.z."""
    tiles = -(-M // cfg["BM"]) * -(-N // cfg["BN"])
    split = min(sm_count // max(tiles, 1), 64, K // MIN_SLICE_K)
    return split if split >= 2 and -(-M // cfg["BM"]) <= MAX_GRID_Y else 1


def _launch_time(cfg, split: int, M: int, N: int, sm_count: int) -> float:
    """A launch's time in units of one SM's time for one output element's whole K (one block per
    SM, every tile at the same per-SM rate): waves of blocks times a block's BM*BN/split elements."""
    blocks = -(-M // cfg["BM"]) * -(-N // cfg["BN"]) * split
    return -(-blocks // sm_count) * cfg["BM"] * cfg["BN"] / split


def _half_tile(rung: Rung, cfg, precision: str | None = None) -> tuple[str, dict] | None:
    """The rung's preset with ``cfg``'s BM and half its BN (rung 19: 128x128 beside 128x256), if any."""
    for name in rung.presets_for(precision):
        p = rung.config(name, precision)
        if p["BM"] == cfg["BM"] and 2 * p["BN"] == cfg["BN"]:
            return name, p
    return None


def rule_config(rung: Rung, M: int, N: int, K: int, sm_count: int, precision: str | None = None) -> tuple[dict, str]:
    """The rule's configuration of ``rung`` for a kernel-view problem M x N x K on ``sm_count``
    SMs, and why.

    Tile: the default, unless a preset pads the output to at most ``SKINNY_PAD`` of the default's
    padded area (16x4096: a 32-row tile instead of 128 computes 4x fewer wasted rows).
    Split (``split_for``): with t output tiles and S SMs, a one-wave launch lasts as long as one
    block's K loop; splitting K in s shortens that by s only while t*s blocks still fit one wave, so
    s = S // t, used when it is 2 or more (more than half of the SMs idle). Above S/2 tiles a split
    only moves the wave quantization (160 blocks on 132 SMs take two waves of half the work: no
    gain) and adds the workspace traffic.
    Half tile: the preset with half the BN, each with its own split, when ``_launch_time`` predicts
    it at most ``HALF_TILE_TIME`` of the tile's (1024x6144 on 132 SMs: 384 tiles of 128x128 in 3
    waves instead of 192 of 128x256 in 2 with the last half empty), or as fast without a split where
    the tile needs one (128x14336: 112 tiles of 128x128 instead of 56 of 128x256 split in 2; no
    FP32 partials written and read back). The margin pays for the half tile's lower per-SM rate: a
    third more operand bytes per flop from L2, and twice the blocks' prologues and epilogues.
    Clusters (a CLUSTER parameter, rung 21): none when the row tiles do not divide into clusters
    along M (an odd count: the last cluster's second block would compute a tile wholly below M; at
    M <= 128 half of the blocks). ``precision``: the rung's defaults and presets in it (None: its own)."""
    cfg = rung.config(None, precision)
    why = f"top rung for the dtype, default {cfg['BM']}x{cfg['BN']} tile"
    area = _padded(M, N, cfg)
    presets = [(p, rung.config(p, precision)) for p in rung.presets_for(precision)]
    better = [(p, c) for p, c in presets if _padded(M, N, c) <= SKINNY_PAD * area]
    if better:
        name, cfg = min(better, key=lambda pc: _padded(M, N, pc[1]))
        why = f"top rung for the dtype, preset {name!r}: its {cfg['BM']}x{cfg['BN']} tile pads {M}x{N} least"
    # a rung without split-K keeps its tile: the half tile is weighed only where it was measured,
    # rung 19's (rung 21's 128x128 at 1024x6144x4096 ran far behind rung 19's 128x256,
    # h100_splitk19_bf16.json; rung 21 has been changed since, not measured there)
    if "SPLITK" not in rung.params and rung.slug not in HALF_TILE_RUNGS:
        return clustered(cfg, why, M)
    splits = "SPLITK" in rung.params   # else (HALF_TILE_RUNGS) the tiles are weighed unsplit
    split = split_for(cfg, M, N, K, sm_count) if splits else 1
    half = _half_tile(rung, cfg, precision)
    if half is not None:
        hsplit = split_for(half[1], M, N, K, sm_count) if splits else 1
        t, ht = _launch_time(cfg, split, M, N, sm_count), _launch_time(half[1], hsplit, M, N, sm_count)
        if ht <= HALF_TILE_TIME * t or (ht <= t and hsplit == 1 < split):
            cfg, split = half[1], hsplit
            why += f"; preset {half[0]!r}: its {cfg['BM']}x{cfg['BN']} tiles fill the {sm_count} SMs better"
    if split > 1:
        tiles = -(-M // cfg["BM"]) * -(-N // cfg["BN"])
        cfg = dict(cfg, SPLITK=split)
        why += f"; split-K {split}: {tiles} output tiles for {sm_count} SMs, K={K}"
    return clustered(cfg, why, M)


def clustered(cfg: dict, why: str, M: int) -> tuple[dict, str]:
    """``cfg`` with CLUSTER=1 where its row tiles do not pair up into clusters (rung 21)."""
    rows = -(-M // cfg["BM"])
    if rows % cfg.get("CLUSTER", 1):
        cfg = dict(cfg, CLUSTER=1)
        why += f"; CLUSTER=1: {rows} row tiles do not pair up in clusters"
    return cfg, why


def rule(problem: GemmProblem, arch, sm_count: int, precision: str | None = None, thin: bool = True) -> Choice:
    """The top rung for the dtype and precision with ``rule_config``, except where it cannot split
    K and its output tiles would leave more than half of the SMs idle: then the highest rung that
    can split, with its own rule (fp16/bf16 on sm_90a: rung 21 is persistent but has no split-K, so
    128x4096x4096's 16 tiles of 128x256 go to rung 19, split in 8, or its 128x128 tile)."""
    kp = problem.kernel_view()
    ruled = thin_choice(kp, problem.dtype, arch, sm_count, precision, problem.out_dtype) if thin else None
    if ruled is not None:
        return ruled
    rung = choose(problem, "auto", arch, precision)
    lower = _split_pass_loses(rung, problem, arch, sm_count, precision)
    if lower is not None:
        return lower
    cfg0 = rung.config(None, own_precision(rung, problem.dtype, precision))
    M, N = _computed_dims(rung, kp, own_precision(rung, problem.dtype, precision))
    tiles = -(-M // cfg0["BM"]) * -(-N // cfg0["BN"])
    if "SPLITK" not in rung.params and 2 * tiles <= sm_count:
        splitting = [r for r in for_dtype(problem.dtype, arch, precision, thin=False, out=problem.out_dtype) if "SPLITK" in r.params]
        if splitting:
            cfg, why = rule_config(splitting[-1], kp.M, kp.N, kp.K, sm_count)
            return Choice(splitting[-1], cfg, "rule", f"{rung.slug} cannot split K and its {tiles} tiles would leave "
                                                      f"more than half of {sm_count} SMs idle: {splitting[-1].slug}; {why}")
    cfg, why = rule_config(rung, M, N, kp.K, sm_count, own_precision(rung, problem.dtype, precision))
    if (M, N) != (kp.M, kp.N):
        why += f" (of the transposed problem {M}x{N}: A read from registers)"
    return Choice(rung, cfg, "rule", why)


def _computed_dims(rung: Rung, kp, precision: str | None) -> tuple[int, int]:
    """(M, N) of the problem ``rung``'s kernel computes for the kernel view ``kp``: N x M where its
    plan transposes the problem (rung 22 in tf32 on row-major A and B, core/packing.py), since the
    tile and the clusters apply to that one."""
    if packing.kernel_layout(kp.a_col, kp.b_col, rung.k_major, rung.reads_register_a(precision))[2]:
        return kp.N, kp.M
    return kp.M, kp.N


def thin_choice(kp, dtype: str, arch, sm_count: int, precision: str | None, out: str | None = None,
                unaligned: bool = False) -> Choice | None:
    """The thin rung for a kernel-view problem with M or N at most its ``Rung.thin`` (None when
    there is none or the problem is not thin): its own ``Rung.thin_rule.choose`` (rung 24's tile and K
    split, core/decode.py), else ``thin_rule_config``'s tile, split in K like any rung (``split_for``)
    where its blocks would leave more than half of the SMs idle."""
    side = min(kp.M, kp.N)
    for rung in reversed(for_dtype(dtype, arch, precision, thin=True, out=out)):
        if side <= rung.thin and rung.thin_rule.choose is not None:   # its own rule (rung 24: tile and split), or None
            ruled = rung.thin_rule.choose(kp.M, kp.N, kp.K, sm_count, arch, kp.a_col, kp.b_col, kp.vec_a, kp.vec_b,
                                          unaligned)
            if ruled is None:
                continue
            return Choice(rung, rung.config(ruled[0], precision), "rule", ruled[1])
        if side <= rung.thin:
            cfg = thin_rule_config(rung, kp.M, kp.N)
            which = "N" if kp.N <= kp.M else "M"
            why = f"thin problem ({which}={side} <= {rung.thin}): {cfg['BM']}x{cfg['BN']} tiles"
            split = split_for(cfg, kp.M, kp.N, kp.K, sm_count)
            if split > 1:
                cfg = dict(cfg, SPLITK=split)
                why += f"; split-K {split}: {-(-kp.M // cfg['BM']) * -(-kp.N // cfg['BN'])} blocks for {sm_count} SMs, K={kp.K}"
            return Choice(rung, cfg, "rule", why)
    return None


def own_precision(rung: Rung, dtype: str, precision: str | None) -> str:
    return rung.precision_for(dtype, precision)


def _gemm_seconds(rung: Rung, cfg: dict, kp, sm_count: int, precision: str) -> float:
    """The GEMM's time at the rung's aligned speed (``ALIGNED_TFLOPS``), scaled by the share of
    the SMs its tiles occupy (one block per SM)."""
    tiles = -(-kp.M // cfg["BM"]) * -(-kp.N // cfg["BN"])
    busy = min(1.0, tiles * cfg.get("SPLITK", 1) / sm_count)
    tflops = ALIGNED_TFLOPS.get(f"{rung.slug}/{precision}", ALIGNED_TFLOPS.get(rung.slug))
    return 2.0 * kp.M * kp.N * kp.K / (tflops * 1e12 * busy)


def _split_pass_loses(rung: Rung, problem: GemmProblem, arch, sm_count: int, precision: str | None) -> Choice | None:
    """A top rung that splits the operands in a pass before the GEMM (rung 22 in 3xtf32: both
    operands read once and written twice) against the rung below it for the precision (rung 20,
    which splits in registers): the lower one's rule choice where ``_gemm_seconds`` plus the pass
    (its bytes at the copy rate and a launch per operand) predicts the top rung slower (small
    problems, where the pass's launches and the half-empty persistent grid dominate); else None."""
    own = own_precision(rung, problem.dtype, precision)
    others = for_dtype(problem.dtype, arch, precision, thin=False, out=problem.out_dtype)[:-1]
    if rung.planes_for(own) == 1 or not others:
        return None
    kp = problem.kernel_view()
    cfg = rung.config(None, own)
    packs = packing.plan_packs(kp, problem.dtype, rung.k_major, rung.planes_for(own))
    top = _gemm_seconds(rung, cfg, kp, sm_count, own) + sum(p.traffic for p in packs) / COPY_BYTES_PER_S \
        + PACK_LAUNCH_S * len(packs)
    low_cfg, why = rule_config(others[-1], kp.M, kp.N, kp.K, sm_count, own)
    low = _gemm_seconds(others[-1], low_cfg, kp, sm_count, own)
    if low >= top:
        return None
    return Choice(others[-1], low_cfg, "rule", f"{rung.slug} with its split pass predicted ~{top * 1e6:.0f} us, "
                                               f"{others[-1].slug} ~{low * 1e6:.0f} us: {others[-1].slug}; {why}")


# ---- packing -------------------------------------------------------------------------------------
# auto packs when the copies cost at most half of what the 16-byte path saves: (S - 1) x the GEMM's
# time at the rung's aligned speed, S the slowdown of its variant without 16-byte access (the
# estimates are rough: a factor of 2 of margin). The GEMM's time: its flops at the rung's aligned
# speed, scaled by the share of the SMs its blocks occupy (one block per SM; 17 tiles of
# 127x4097 leave 115 of 132 idle). The copies: bytes read and written at the device-to-device copy
# rate, plus a launch each. Speeds are the H100's (TFLOP/s at 4096^3: benchmarks/results/
# h100_llm_suite_bf16.json, h100_fp16.json, h100_fp32_suite.json, h100_tf32.json,
# h100_3xtf32.json); the slowdowns are 4093^3 against 4096^3 (h100_llm_suite_bf16.json;
# h100_wgmma_tma_unaligned_fp16.json and h100_fp16.json); unmeasured ones take
# 5/3 (the copy then may cost a third of the GEMM). Other GPUs: the same ratio of compute to copy
# rate, within a factor of about 2 (a prediction).
COPY_BYTES_PER_S = 3.0e12     # the H100's device-to-device copy rate
PACK_LAUNCH_S = 2e-6          # a pack launch's fixed cost on the stream (a prediction)
PACK_MAX_BYTES = 1 << 30      # auto never takes more workspace than this for copies (PACK=1 may)
# Rung 21 (wgmma_ws) is not measured yet: rung 19's figures stand in (its producer warpgroup copies
# an unaligned operand the same way; a faster aligned path only makes the copies pay off sooner).
# wgmma_tf32/3xtf32: the kernel without its split pass, from h100_wgmma_3xtf32_stages2.json (the
# call with the pass, less the pass's predicted time: the pass itself is not timed alone), rounded
# down.
ALIGNED_TFLOPS = {"wgmma_tma": 733.2, "wgmma_ws": 733.2, "mma_sync": 443.0, "async_simt": 46.8,
                  "tf32_mma/tf32": 127.1, "tf32_mma/3xtf32": 50.1, "wgmma_tf32/3xtf32": 125.0}
# async_simt (rung 18) at 127x4097x1023 fp32 with its shipped tile (SPLITK 3) ran slower packed
# than unpacked (h100_pack_fp32.json; docs/journal/dispatch.md): its 4-byte copies cost little more
# than its 16-byte ones, far from 5/3. mma_sync (rung 17): 4096^3 against 4093^3 with its word copies
# through staging, measured on an H200 (h200_mma_sync_4093_fp16.json; the copies through registers
# it replaced: h200_mma_sync_4093_fp16_register_copies.json)
UNALIGNED_SLOWDOWN = {"wgmma_tma": 733.2 / 88.3, "wgmma_ws": 733.2 / 88.3, "mma_sync": 438.0 / 109.3,
                      "async_simt": 1.1}
DEFAULT_SLOWDOWN = 5 / 3


def pack_estimate(rung: Rung, cfg: dict, kp, packs, sm_count: int, precision: str) -> tuple[float, float]:
    """(seconds the copies ``packs`` take, seconds the 16-byte path saves) for ``rung`` with ``cfg``
    on the kernel-view problem ``kp``, computing in ``precision``."""
    gemm = _gemm_seconds(rung, cfg, kp, sm_count, precision)
    copies = sum(p.traffic for p in packs) / COPY_BYTES_PER_S + PACK_LAUNCH_S * len(packs)
    return copies, (UNALIGNED_SLOWDOWN.get(rung.slug, DEFAULT_SLOWDOWN) - 1.0) * gemm


def copies_fit(packs) -> bool:
    """Whether the copies ``packs`` (packing.plan_packs) fit the workspace auto may take for them."""
    return sum(p.nbytes for p in packs) <= PACK_MAX_BYTES


def with_packing(choice: Choice, problem: GemmProblem, sm_count: int, precision: str | None = None) -> Choice:
    """``choice`` with its rung's PACK decided by ``pack_estimate`` (unchanged when the rung has no
    PACK or both operands take the 16-byte path); the reason says what is packed, or why not."""
    rung = choice.rung
    kp = problem.kernel_view()
    if "PACK" not in rung.params or (kp.vec_a and kp.vec_b):
        return choice
    cfg = rung.config(choice.config, own_precision(rung, problem.dtype, precision))
    try:
        packs = packing.plan_packs(kp, problem.dtype)
    except ValueError as exc:
        return Choice(rung, dict(cfg, PACK=0), choice.source, f"{choice.reason}; no packing: {exc}", choice.entry)
    copies, saved = pack_estimate(rung, cfg, kp, packs, sm_count, rung.precision_for(problem.dtype, precision))
    cost = f"copies ~{copies * 1e6:.0f} us, the 16-byte path saves ~{saved * 1e6:.0f} us"
    fit = copies_fit(packs)
    if copies <= saved / 2 and fit:
        return Choice(rung, dict(cfg, PACK=1), choice.source, f"{choice.reason}; {packing.describe(packs)} ({cost})",
                      choice.entry)
    why = f"{cost}" if fit else f"the copies need {sum(p.nbytes for p in packs)} B of workspace, more than {PACK_MAX_BYTES}"
    return Choice(rung, dict(cfg, PACK=0), choice.source, f"{choice.reason}; no packing ({why})", choice.entry)


# ---- choosing ------------------------------------------------------------------------------------
def choose(problem: GemmProblem, kernel: str = "auto", arch: str | int | None = None,
           precision: str | None = None) -> Rung:
    """The rung to run: ``kernel`` forced by slug (ValueError when it cannot compute the dtype in
    ``precision``; None: its own default), or the top rung for the dtype and precision, never a
    thin one (``Rung.thin``: ``rule`` gives those the thin problems) (and,
    when ``arch`` is given, the architecture; otherwise the launch checks it)."""
    if not isinstance(kernel, str):
        raise TypeError(f"kernel must be a string (a rung slug or 'auto'), got {type(kernel).__name__}")
    if kernel != "auto":
        rung = get(kernel)
        rung.require(problem.dtype, precision=precision, out=problem.out_dtype)
        return rung
    candidates = for_dtype(problem.dtype, arch, precision, thin=False, out=problem.out_dtype)
    if not candidates:
        what = problem.dtype if precision is None else f"{problem.dtype} in precision {precision}"
        if problem.out_dtype is not None:
            what += f" writing a {problem.out_dtype} C (rungs that do: " + ", ".join(
                f"{r.slug} (sm_{r.min_arch}" + (f" to sm_{r.max_arch}" if r.max_arch else "+")
                + (f", a side of at most {r.thin}" if r.thin else "") + ")"
                for r in for_dtype(problem.dtype, None, precision, out=problem.out_dtype)) + ")"
        raise ValueError(f"no rung supports {what} on {arch}")
    return candidates[-1]




# ---- a batch in one launch ---------------------------------------------------------------------------
# Rung 21 copies a batch's operands without 16-byte access first (PACK=1) where K is longer than one
# k tile: on an H200 the copy beat the producer's thread copy at every arbitrary size of the sweep but
# the one whose tiles had a single k tile, where the extra launch cost more; rung 18's scalar path ran
# ahead of its copy or level at every size, so it never packs a batch
# (benchmarks/results/h200_batched_sweep.json; docs/journal/batched.md gives the figures).
BATCHED_PACK_K = 64
def batched_choice(problem: GemmProblem, kernel: str, config, device, precision: str | None) -> Choice | None:
    """The rung and configuration that run ``problem`` (a batch, ``GemmProblem.batch``) in one
    launch, or None where none does (core/batched.py then launches per element). ``auto`` takes a
    rung that runs batches (``Rung.batched``) in the dtype's own precision: rung 21 for 16-bit
    operands on sm_90 (``families.hopper.batched_config``), rung 18 for FP32 (SIMT, sm_80 on;
    ``families.simt.simt_batched_config``); unless a config is given. A named rung that runs batches
    does the same; another named rung (checked first) runs per element. ``device``: the DeviceInfo
    of the problem's GPU."""
    rung = choose(problem, kernel, device.arch, precision)   # its refusals first
    if kernel == "auto":
        if precision not in (None, problem.dtype):
            return None
        rung = get("wgmma_ws" if problem.dtype in ("fp16", "bf16") else "async_simt")
        arch = arch_number(device.arch)
        if problem.dtype not in rung.dtypes or arch < rung.min_arch or (rung.max_arch and arch > rung.max_arch):
            return None
    if not rung.batched:
        return None
    source = "named" if kernel != "auto" else "rule"
    if config is not None:
        return Choice(rung, config, source, f"a batch of {problem.batch} in one launch, config given")
    kp = problem.kernel_view()
    if rung.persistent:
        cfg, why = batched_config(kp.M, kp.N, kp.K, problem.batch, device.sm_count)
        if (not kp.vec_a or not kp.vec_b) and kp.K > BATCHED_PACK_K:
            cfg = dict(cfg, PACK=1)
            why += "; PACK=1: operands without 16-byte access copied first, in one launch for the batch"
        return Choice(rung, cfg, source, why)
    presets = {name: rung.config(name) for name in SIMT_BATCHED_RATE}
    name, why = simt_batched_config(kp.M, kp.N, kp.K, problem.batch, device.sm_count, presets)
    if -(-kp.M // presets[name]["BM"]) > MAX_GRID_Y or problem.batch > MAX_GRID_Z:
        return None   # beyond grid.y or grid.z: per element
    return Choice(rung, name, source, why)
