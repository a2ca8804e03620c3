"""Theoretical occupancy: how many blocks of a kernel fit on one SM of a given architecture.

The rules are those of NVIDIA's occupancy calculator (``cuda_occupancy.h`` of the CUDA toolkit,
``cudaOccMaxActiveBlocksPerMultiprocessor``), for the default configuration (no carveout
preference, so the whole shared-memory capacity of the SM is available):

* warps: ``ceil(threads / 32)`` warps per block; ``max_warps_per_sm // warps_per_block`` blocks.
* registers: a warp gets ``regs_per_thread * 32`` registers rounded up to the allocation unit
  (256); the register file is split among 4 sub-partitions (SM schedulers) and a warp lives in
  one, so ``(regs_per_sm / 4) // regs_per_warp`` warps fit per sub-partition and 4 times that per
  SM. A block whose registers exceed 64K (counted with its warps rounded up to a multiple of 4,
  as the hardware's launch check does) or whose threads need more than 255 registers does not
  launch at all.
* shared memory: static + dynamic + the per-block reservation (1 KB from sm_80 on) rounded up
  to the allocation unit (128 B from sm_80 on, 256 B before); ``smem_per_sm // that`` blocks.
  A block needing more than the opt-in per-block maximum (e.g. 227 KB on sm_90) does not launch.
* blocks: the per-SM cap on resident blocks.

No GPU is needed.
"""

from __future__ import annotations


from ..core.arch import WARP, ArchLimits, limits

LIMITERS = ("threads", "blocks", "registers", "shared memory")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(arch: str | int | ArchLimits, threads_per_block: int, regs_per_thread: int, smem_per_block: int = 0) -> dict:
    """Blocks and warps of one kernel resident per SM, and what limits them.

    ``smem_per_block``: static + dynamic shared memory of a block in bytes (the per-block
    reservation is added here). Returns a JSON-able dict: ``blocks_per_sm``, ``warps_per_sm``,
    ``threads_per_sm``, ``occupancy`` (resident warps / maximum, 0..1), ``occupancy_pct``,
    ``limiter`` (one of ``"threads"``, ``"blocks"``, ``"registers"``, ``"shared memory"``; on a
    tie the first in that order), ``limiters`` (all that tie), ``limits`` (blocks each resource
    alone allows), the allocation figures, and ``fits`` (False when not one block can launch,
    with ``reason``).
    """
    lim = arch if isinstance(arch, ArchLimits) else limits(arch)
    if threads_per_block <= 0:
        raise ValueError(f"threads_per_block must be positive, got {threads_per_block}")
    if regs_per_thread < 0 or smem_per_block < 0:
        raise ValueError("registers and shared memory must be >= 0")
    warps_per_block = -(-threads_per_block // WARP)
    reasons = []

    # threads / warp slots
    if threads_per_block > lim.max_threads_per_block:
        by_threads = 0
        reasons.append(f"{threads_per_block} threads per block exceed the maximum {lim.max_threads_per_block}")
    else:
        by_threads = lim.max_warps_per_sm // warps_per_block

    # registers
    regs_per_warp = _round_up(regs_per_thread * WARP, lim.reg_alloc_unit)
    regs_per_block = regs_per_warp * warps_per_block
    regs_checked = regs_per_warp * _round_up(warps_per_block, lim.sub_partitions)
    if regs_per_thread > lim.max_regs_per_thread:
        by_regs = 0
        reasons.append(f"{regs_per_thread} registers per thread exceed the maximum {lim.max_regs_per_thread}")
    elif regs_checked > lim.regs_per_block or regs_per_block > lim.regs_per_block:
        by_regs = 0
        reasons.append(f"the block needs {regs_checked} registers, more than the {lim.regs_per_block} a block may have")
    elif regs_per_warp == 0:
        by_regs = lim.max_blocks_per_sm
    else:
        warps_per_sub = (lim.regs_per_sm // lim.sub_partitions) // regs_per_warp
        by_regs = (warps_per_sub * lim.sub_partitions) // warps_per_block

    # shared memory
    smem_alloc = _round_up(smem_per_block + lim.reserved_smem_per_block, lim.smem_alloc_unit)
    if smem_per_block > lim.max_smem_per_block:
        by_smem = 0
        reasons.append(f"{smem_per_block} bytes of shared memory per block exceed the maximum {lim.max_smem_per_block}")
    elif smem_alloc == 0:
        by_smem = lim.max_blocks_per_sm
    else:
        by_smem = lim.smem_per_sm // smem_alloc

    by_blocks = lim.max_blocks_per_sm
    per = {"threads": by_threads, "blocks": by_blocks, "registers": by_regs, "shared memory": by_smem}
    blocks = min(per.values())
    tied = [k for k in LIMITERS if per[k] == blocks]
    warps = blocks * warps_per_block
    occ = warps / lim.max_warps_per_sm
    return {
        "arch": lim.arch,
        "threads_per_block": threads_per_block,
        "warps_per_block": warps_per_block,
        "regs_per_thread": regs_per_thread,
        "smem_per_block": smem_per_block,
        "blocks_per_sm": blocks,
        "warps_per_sm": warps,
        "threads_per_sm": blocks * threads_per_block,
        "max_warps_per_sm": lim.max_warps_per_sm,
        "occupancy": round(occ, 4),
        "occupancy_pct": round(100 * occ, 1),
        "limiter": tied[0],
        "limiters": tied,
        "limits": per,
        "regs_per_warp_allocated": regs_per_warp,
        "regs_per_block_allocated": regs_per_block,
        "smem_per_block_allocated": smem_alloc,
        "fits": blocks > 0,
        "reason": "; ".join(reasons),
    }
