"""The metrics ``gemmlab profile`` asks Nsight Compute for, in one table, ``METRICS``: our key, the
Nsight Compute metric name (plus older or newer spellings of the same counter), its unit after
normalization and what it means; and the warp stall reasons, with a label and a meaning each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Metric:
    key: str                   # our name, the key in summarize()'s "counters"
    name: str                  # Nsight Compute metric name (Hopper, ncu 2023+)
    unit: str                  # unit after normalization
    meaning: str
    alt: tuple[str, ...] = ()  # other spellings of the same counter in other ncu versions


# Stall reasons: ncu's "warp cycles per issued instruction" split by reason (WarpStateStats). The
# value is the average number of cycles a warp spent in that state between two of its issued
# instructions; divided by their sum it is the reason's share of the time between issues.
STALL_REASONS: tuple[tuple[str, str, str], ...] = (
    # (reason, display label, what it means)
    ("long_scoreboard", "long scoreboard", "waiting for data from L1TEX: global, local or texture memory"),
    ("mio_throttle", "MIO throttle", "the memory input/output queue is full: too many shared-memory (or special-math) instructions"),
    ("short_scoreboard", "short scoreboard", "waiting for data from the MIO: shared-memory loads, special math"),
    ("wait", "wait", "a fixed-latency dependency (e.g. an FFMA waiting for the previous one)"),
    ("barrier", "barrier", "waiting at __syncthreads for the other warps of the block"),
    ("not_selected", "not selected", "eligible, but the scheduler issued another warp (no loss)"),
    ("selected", "selected", "issuing an instruction (the productive state)"),
    ("math_pipe_throttle", "math pipe throttle", "the math pipe the instruction needs is busy"),
    ("lg_throttle", "LG throttle", "the local/global memory instruction queue is full"),
    ("tex_throttle", "TEX throttle", "the texture unit's queue is full"),
    ("dispatch_stall", "dispatch stall", "the dispatcher could not take the instruction"),
    ("no_instruction", "no instruction", "instruction cache miss or not yet fetched"),
    ("branch_resolving", "branch resolving", "waiting for a branch target"),
    ("drain", "drain", "waiting for memory stores to drain at exit"),
    ("membar", "membar", "waiting at a memory barrier"),
    ("sleeping", "sleeping", "sleeping (nanosleep or all threads yielded)"),
    ("imc_miss", "IMC miss", "immediate constant cache miss"),
    ("gmma", "GMMA", "waiting for warpgroup MMA (wgmma) to complete (Hopper)"),
    ("misc", "misc", "other reasons"),
)
STALL_LABEL = {r: label for r, label, _ in STALL_REASONS}
STALL_MEANING = {r: meaning for r, _, meaning in STALL_REASONS}


def _stall_metric(reason: str) -> Metric:
    return Metric(
        f"stall_{reason}",
        f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",
        "cycles/issue",
        f"stall '{STALL_LABEL[reason]}': {STALL_MEANING[reason]}",
    )


METRICS: tuple[Metric, ...] = (
    # ---- time, clocks, launch ----------------------------------------------------------------
    Metric("duration", "gpu__time_duration.sum", "s", "GPU time of the kernel(s)"),
    Metric("sm_clock", "sm__cycles_elapsed.avg.per_second", "Hz", "SM clock during the kernel"),
    Metric("dram_clock", "dram__cycles_elapsed.avg.per_second", "Hz", "DRAM clock during the kernel"),
    Metric("elapsed_cycles", "gpc__cycles_elapsed.max", "cycles", "elapsed GPC cycles"),
    Metric("registers", "launch__registers_per_thread", "regs", "registers per thread"),
    Metric("smem_static", "launch__shared_mem_per_block_static", "B", "static shared memory per block"),
    Metric("smem_dynamic", "launch__shared_mem_per_block_dynamic", "B", "dynamic shared memory per block"),
    Metric("waves", "launch__waves_per_multiprocessor", "waves", "blocks per SM over what fits at once"),
    # ---- speed of light ------------------------------------------------------------------------
    Metric("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%",
           "compute (SM) throughput, % of peak"),
    Metric("mem_throughput_pct", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%",
           "memory throughput (busiest unit), % of peak"),
    # ---- occupancy and issue -----------------------------------------------------------------
    Metric("achieved_occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", "%",
           "achieved occupancy: active warps / maximum warps per SM (nvprof achieved_occupancy)"),
    Metric("theoretical_occupancy", "sm__maximum_warps_per_active_cycle_pct", "%",
           "theoretical occupancy from the launch's resources"),
    Metric("ipc", "sm__inst_executed.avg.per_cycle_active", "inst/cycle",
           "instructions executed per active cycle per SM (nvprof ipc)"),
    Metric("issued_ipc", "sm__inst_issued.avg.per_cycle_active", "inst/cycle",
           "instructions issued per active cycle per SM (nvprof issued_ipc)"),
    Metric("inst_executed", "smsp__inst_executed.sum", "inst", "warp instructions executed"),
    # ---- shared memory -------------------------------------------------------------------------
    Metric("bank_conflicts_ld", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "count",
           "shared-memory bank conflicts of loads (extra wavefronts)"),
    Metric("bank_conflicts_st", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "count",
           "shared-memory bank conflicts of stores (extra wavefronts)"),
    Metric("shared_ld_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "count",
           "shared-memory load wavefronts (one per bank pass)"),
    Metric("shared_st_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "count",
           "shared-memory store wavefronts"),
    Metric("shared_ld_inst", "smsp__sass_inst_executed_op_shared_ld.sum", "inst", "shared load instructions (LDS) executed"),
    Metric("shared_st_inst", "smsp__sass_inst_executed_op_shared_st.sum", "inst", "shared store instructions (STS) executed"),
    Metric("shared_ld_bytes", "smsp__sass_data_bytes_mem_shared_op_ld.sum", "B", "bytes read from shared memory"),
    Metric("shared_st_bytes", "smsp__sass_data_bytes_mem_shared_op_st.sum", "B", "bytes written to shared memory"),
    # ---- global memory, caches, DRAM -----------------------------------------------------------
    Metric("global_ld_inst", "smsp__sass_inst_executed_op_global_ld.sum", "inst", "global load instructions (LDG) executed"),
    Metric("global_st_inst", "smsp__sass_inst_executed_op_global_st.sum", "inst", "global store instructions (STG) executed"),
    Metric("l1_throughput_pct", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "%", "L1/TEX cache throughput, % of peak"),
    Metric("l2_throughput_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "%", "L2 cache throughput, % of peak"),
    Metric("dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "DRAM throughput, % of peak",
           alt=("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",)),
    Metric("l1_bytes", "l1tex__t_bytes.sum", "B", "bytes requested from L1/TEX (all memory spaces but shared)"),
    Metric("l2_bytes", "lts__t_bytes.sum", "B", "bytes moved through L2"),
    Metric("dram_read_bytes", "dram__bytes_read.sum", "B", "bytes read from DRAM", alt=("dram__bytes_op_read.sum",)),
    Metric("dram_write_bytes", "dram__bytes_write.sum", "B", "bytes written to DRAM", alt=("dram__bytes_op_write.sum",)),
    # the L2's two partitions: the SMs' reads looked up in a slice, those that missed it, and what
    # a slice took from the fabric between the partitions (on the H100 the power these draw sets the
    # clock of a tensor-core GEMM at its power cap: docs/journal/tf32.md)
    Metric("l2_sm_read_sectors", "lts__t_sectors_srcunit_tex_op_read.sum", "sectors",
           "32-byte sectors the SMs read from L2 (lookups in a slice; TMA, loads)"),
    Metric("l2_sm_read_miss_sectors", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", "sectors",
           "of those, sectors the slice did not hold (from DRAM or the other partition)"),
    Metric("l2_fabric_sectors", "lts__t_sectors_srcunit_ltcfabric.sum", "sectors",
           "sectors a slice took from the fabric between the L2 partitions, every operation"),
    Metric("l2_fabric_read_sectors", "lts__t_sectors_srcunit_ltcfabric_op_read.sum", "sectors",
           "of those, reads"),
    Metric("l1_hit_rate", "l1tex__t_sector_hit_rate.pct", "%", "L1/TEX sector hit rate"),
    Metric("l2_hit_rate", "lts__t_sector_hit_rate.pct", "%", "L2 sector hit rate"),
    # ---- math ----------------------------------------------------------------------------------
    Metric("ffma_count", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "thread-inst",
           "FP32 fused multiply-adds executed (per thread; 2 FLOPs each)"),
    Metric("fadd_count", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "thread-inst", "FP32 adds executed (per thread)"),
    Metric("fmul_count", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "thread-inst", "FP32 multiplies executed (per thread)"),
    Metric("hfma_count", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "thread-inst", "FP16 fused multiply-adds executed (per thread)"),
    Metric("tensor_hmma_inst", "sm__inst_executed_pipe_tensor_op_hmma.sum", "inst",
           "tensor-core HMMA warp instructions (mma.sync, WMMA); also counts the HFMA2.MMA register moves "
           "compilers emit (about one per warp in FP32 kernels on the H100)"),
    Metric("tensor_gmma_inst", "sm__inst_executed_pipe_tensor_op_gmma.sum", "inst", "tensor-core warpgroup MMA instructions (wgmma, Hopper)"),
    Metric("tensor_active_pct", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "%",
           "tensor pipe busy, % of active cycles"),
    Metric("fma_pipe_pct", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "%", "FMA pipe busy, % of active cycles"),
) + tuple(_stall_metric(r) for r, _, _ in STALL_REASONS)

METRIC_BY_KEY = {m.key: m for m in METRICS}


def metric_names(metrics: Iterable[Metric] = METRICS) -> list[str]:
    """Every ncu name to request, alternatives included, in table order, without repeats."""
    out: list[str] = []
    for m in metrics:
        for n in (m.name, *m.alt):
            if n not in out:
                out.append(n)
    return out
