"""What the kernel families' constraints share: split-K's limits, divisibility and vector-split
checks, the register estimate of a thread tile, the switches' meanings, the tuner's power-of-two
ranges. Each family module (simt, tensor, hopper, thin) holds its rungs' thread counts, shared
memory and constraints; core/registry.py lists the rungs and reads them."""

from __future__ import annotations

from ..arch import LIMITS
from ..splitk import MAX_SPLITK, MAX_SPLITK_CLUSTER

# the most dynamic shared memory any GPU in the table gives one block (227 KB on sm_90 / sm_100)
MAX_SMEM_PER_BLOCK = max(lim.max_smem_per_block for lim in LIMITS.values())


def splitk_constraints(cfg) -> list[str]:
    v = cfg.get("SPLITK", 1)
    if cfg.get("SKCLUSTER") and not 2 <= v <= MAX_SPLITK_CLUSTER:
        return [f"SKCLUSTER=1 sums the SPLITK slices of a tile in one thread-block cluster: SPLITK={v} must be "
                f"between 2 and {MAX_SPLITK_CLUSTER} (the portable cluster size)"]
    if v > MAX_SPLITK:
        return [f"SPLITK={v} must be at most {MAX_SPLITK} (each slice adds an FP32 copy of C to the workspace "
                f"that the reduction reads)"]
    return []


def divides(cfg, a: str, b: str) -> list[str]:
    return [] if cfg[b] % cfg[a] == 0 else [f"{a}={cfg[a]} must divide {b}={cfg[b]}"]


def mult(cfg, a: str, m: int) -> list[str]:
    return [] if cfg[a] % m == 0 else [f"{a}={cfg[a]} must be a multiple of {m}"]


def float4_split(cfg, threads: int) -> list[str]:
    """The vectorized loaders give every thread a whole number of float4 of each tile."""
    out = []
    if (cfg["BM"] * cfg["BK"]) % (4 * threads):
        out.append(f"BM*BK={cfg['BM'] * cfg['BK']} must be a multiple of 4*THREADS={4 * threads}")
    if (cfg["BK"] * cfg["BN"]) % (4 * threads):
        out.append(f"BK*BN={cfg['BK'] * cfg['BN']} must be a multiple of 4*THREADS={4 * threads}")
    return out


def scalar_split(cfg, threads: int) -> list[str]:
    """The scalar loaders give every thread a whole number of elements of each tile."""
    out = []
    if (cfg["BM"] * cfg["BK"]) % threads:
        out.append(f"BM*BK={cfg['BM'] * cfg['BK']} must be a multiple of THREADS={threads}")
    if (cfg["BK"] * cfg["BN"]) % threads:
        out.append(f"BK*BN={cfg['BK'] * cfg['BN']} must be a multiple of THREADS={threads}")
    return out


def registers(cfg, threads: int, min_blocks: int = 1, prefetch: bool = False) -> list[str]:
    """A TM x TN thread tile must fit the registers a thread may have: 255, or fewer when the
    kernel asks for ``min_blocks`` blocks of ``threads`` per SM (65536 registers). The estimate:
    the accumulators, one fragment of A and of B, ~24 for addresses and loop state, and the
    register prefetch of the next tiles for the double-buffered rungs."""
    cap = min(255, 65536 // (threads * min_blocks) // 8 * 8)
    need = cfg["TM"] * cfg["TN"] + cfg["TM"] + cfg["TN"] + 24
    if prefetch:
        need += (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) // threads
    return [] if need <= cap else [f"a {cfg['TM']}x{cfg['TN']} thread tile needs about {need} registers per thread; "
                                   f"{threads} threads x {min_blocks} block(s) per SM allow {cap}"]


def pow2(cfg, a: str, least: int) -> list[str]:
    v = cfg[a]
    return [] if v >= least and v & (v - 1) == 0 else [f"{a}={v} must be a power of two >= {least}"]


def cluster_reasons(cfg) -> list[str]:
    """Rungs 21 and 22: clusters of 1 or 2 CTAs along M (the B tile multicast to both)."""
    if cfg.get("CLUSTER", 1) not in (1, 2):
        return [f"CLUSTER={cfg['CLUSTER']} must be 1 or 2 (blocks per cluster along M, sharing B by multicast)"]
    return []


def switch_reasons(cfg, **meanings: tuple[str, str]) -> list[str]:
    """A reason for each switch of ``meanings`` (name: what 0 and 1 mean) that ``cfg`` sets to
    neither 0 nor 1."""
    return [f"{k}={cfg[k]} must be 0 ({off}) or 1 ({on})" for k, (off, on) in meanings.items()
            if cfg.get(k, 0) not in (0, 1)]


STREAMK_SWITCH = ("whole tiles only", "the last wave split by k tiles")   # rungs 21 and 22


KREV_SWITCH = ("every unit's k tiles first to last", "odd waves' units last to first (kernels/ws.cuh)")   # rungs 21 and 22


BALANCE_SWITCH = ("a cluster per CLUSTER SMs", "the fewest clusters that take no more waves")            # rungs 21 and 22


def p2(lo: int, hi: int) -> tuple[int, ...]:
    """Powers of two from 2**lo to 2**hi."""
    return tuple(2 ** i for i in range(lo, hi + 1))


def warp_threads(cfg) -> int:
    """A block of (BM/WM) x (BN/WN) warps."""
    return 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])
