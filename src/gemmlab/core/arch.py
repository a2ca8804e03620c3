"""Facts about GPU architectures, defined once: target names, per-SM limits and arithmetic rates.

* Names: ``normalize_arch`` ("90a", "SM_80", 80 -> "sm_90a"/"sm_80"), ``arch_number``,
  ``arch_for_capability`` (the NVRTC target for a device).
* Limits (``ArchLimits``): from the device when there is one (``limits_of_device``, which reads
  the driver's attributes), from the one table ``LIMITS`` otherwise (``limits``: the CUDA C++
  Programming Guide's "Technical Specifications per Compute Capability" and ``cuda_occupancy.h``
  of CUDA 13). The occupancy calculator, the registry's shared-memory checks and the launch read
  only these.
* Rates and peaks (``peaks``): FP32 FMA per clock per SM on the CUDA cores and dense FP16/BF16
  tensor-core flop per clock per SM with FP32 accumulation, by compute capability. An
  architecture not in these tables has an *unknown* peak (None, said as "unknown"): nothing is
  guessed.

The clock a peak is computed at is the device's maximum SM clock as the CUDA driver reports it
(``CU_DEVICE_ATTRIBUTE_CLOCK_RATE``, the boost clock: 1980 MHz on an H100 SXM). That is why an
H100's dense FP16 peak reads 132 x 4096 x 1.98 GHz = 1070 TFLOP/s here while the datasheet says
989: the datasheet's figure is the same formula at 1.83 GHz, the clock the tensor cores sustain
under full load. A percentage of this peak is therefore a lower bound on the share of what the
chip can sustain.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# what the commands that need no GPU (inspect, compile) target when none is named and none is
# here: the H100's, the GPU the shipped tables and figures come from
OFFLINE_ARCH = "sm_90a"

WARP = 32
KB = 1024


# ---- names -------------------------------------------------------------------------------------
def normalize_arch(arch: str | int) -> str:
    """``'sm_90a'``, ``'90a'``, ``'SM_80'``, ``80`` -> ``'sm_90a'`` / ``'sm_80'`` (suffix kept as given)."""
    s = str(arch).strip().lower()
    if s.startswith("sm_"):
        s = s[3:]
    suffix = ""
    if s.endswith("a") or s.endswith("f"):
        suffix, s = s[-1], s[:-1]
    if not s.isdigit():
        raise ValueError(f"architecture {arch!r} is not of the form sm_XY, e.g. sm_90a or sm_80")
    return f"sm_{int(s)}{suffix}"


def arch_number(arch: str | int) -> int:
    """``'sm_90a'`` -> 90."""
    return arch if isinstance(arch, int) else int(normalize_arch(arch)[3:].rstrip("af"))


def arch_for_capability(major: int, minor: int) -> str:
    """The NVRTC target for a device of compute capability major.minor.

    Hopper (9.0) and Blackwell (10.x, 12.x) get the arch-specific ``a`` target so that their own
    instructions (wgmma, setmaxnreg) are available; such a cubin runs only on that exact chip,
    which is what a kernel compiled at run time for the GPU in hand wants.
    """
    num = 10 * major + minor
    return f"sm_{num}a" if major >= 9 else f"sm_{num}"


# ---- limits ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchLimits:
    arch: str                    # "sm_90"
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_warps_per_sm: int
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256    # registers, per warp
    max_regs_per_thread: int = 255
    regs_per_block: int = 65536
    sub_partitions: int = 4
    smem_per_sm: int = 0         # bytes usable by blocks (largest carveout)
    max_smem_per_block: int = 0  # bytes, opt-in maximum (cudaFuncAttributeMaxDynamicSharedMemorySize)
    default_smem_per_block: int = 48 * KB  # without opting in (also the static shared-memory limit)
    smem_alloc_unit: int = 128   # bytes
    reserved_smem_per_block: int = 1 * KB  # bytes the driver keeps per block (sm_80+)
    max_threads_per_block: int = 1024
    source: str = "table"        # "table" or "device"


LIMITS: dict[int, ArchLimits] = {
    75: ArchLimits("sm_75", 1024, 16, 32, smem_per_sm=64 * KB, max_smem_per_block=64 * KB,
                   smem_alloc_unit=256, reserved_smem_per_block=0),
    80: ArchLimits("sm_80", 2048, 32, 64, smem_per_sm=164 * KB, max_smem_per_block=163 * KB),
    86: ArchLimits("sm_86", 1536, 16, 48, smem_per_sm=100 * KB, max_smem_per_block=99 * KB),
    87: ArchLimits("sm_87", 1536, 16, 48, smem_per_sm=164 * KB, max_smem_per_block=163 * KB),
    89: ArchLimits("sm_89", 1536, 24, 48, smem_per_sm=100 * KB, max_smem_per_block=99 * KB),
    90: ArchLimits("sm_90", 2048, 32, 64, smem_per_sm=228 * KB, max_smem_per_block=227 * KB),
    100: ArchLimits("sm_100", 2048, 32, 64, smem_per_sm=228 * KB, max_smem_per_block=227 * KB),
    120: ArchLimits("sm_120", 1536, 24, 48, smem_per_sm=100 * KB, max_smem_per_block=99 * KB),
}


def limits(arch: str | int) -> ArchLimits:
    """The table's limits of ``arch`` (``"sm_90a"``, ``"90"``, 90 ...). An architecture not in the
    table takes those of its family's first member (sm_103 -> sm_100, sm_121 -> sm_120)."""
    n = arch_number(arch)
    if n in LIMITS:
        return LIMITS[n]
    family = [k for k in LIMITS if k // 10 == n // 10 and k <= n]
    if family:
        return LIMITS[max(family)]
    raise ValueError(f"no limits known for sm_{n}; known: {', '.join(v.arch for v in LIMITS.values())}")


def limits_of_device(cc: tuple[int, int], *, max_threads_per_sm: int, max_blocks_per_sm: int,
                     regs_per_sm: int, smem_per_sm: int, smem_per_block_optin: int) -> ArchLimits:
    """The limits of a device: the values its driver reports, over the table's allocation rules
    (units, reservations and sub-partitions, which the driver does not report)."""
    base = limits(cc[0] * 10 + cc[1])
    return replace(base, max_threads_per_sm=max_threads_per_sm, max_blocks_per_sm=max_blocks_per_sm,
                   max_warps_per_sm=max_threads_per_sm // WARP, regs_per_sm=regs_per_sm,
                   smem_per_sm=smem_per_sm, max_smem_per_block=smem_per_block_optin, source="device")


# ---- rates and peaks ---------------------------------------------------------------------------
# FP32 FMA per clock per SM (CUDA cores): 64 on sm_60/70/75/80 (GP100, V100, Turing, A100), 128
# on sm_61, sm_86/89 (GA10x, Ada), sm_90 (Hopper) and Blackwell.
FP32_FMA_PER_CLK_SM = {60: 64, 61: 128, 62: 128, 70: 64, 72: 64, 75: 64, 80: 64, 86: 128, 87: 128,
                       89: 128, 90: 128, 100: 128, 101: 128, 103: 128, 110: 128, 120: 128, 121: 128}
# Dense FP16/BF16 tensor-core flop per clock per SM (FP32 accumulate, full rate): 1024 on
# Volta/Turing and GA10x/Ada/consumer Blackwell (GeForce cards halve the FP32-accumulate rate; the
# table gives the full rate), 2048 on A100 (108 x 2048 x 1.41 GHz = 312, its datasheet figure),
# 4096 on Hopper, 8192 on datacenter Blackwell.
TENSOR_FLOP_PER_CLK_SM = {70: 1024, 72: 1024, 75: 1024, 80: 2048, 86: 1024, 87: 1024, 89: 1024,
                          90: 4096, 100: 8192, 101: 8192, 103: 8192, 110: 8192, 120: 1024, 121: 1024}

CLOCK_SOURCE = "maximum SM clock reported by the CUDA driver (CU_DEVICE_ATTRIBUTE_CLOCK_RATE)"


def peaks(cc: tuple[int, int] | None, sm_count: int | None, clock_mhz: float | None) -> dict:
    """Theoretical peaks in TFLOP/s: ``fp32_tflops`` (CUDA cores) and ``tensor_tflops`` (dense
    FP16/BF16 tensor cores), with the per-SM rates and the clock they come from.

    A value is None when an input is missing or the architecture is not in the rate tables; then
    ``unknown`` names what is missing. Nothing is guessed."""
    key = cc[0] * 10 + cc[1] if cc else None
    fma = FP32_FMA_PER_CLK_SM.get(key) if key is not None else None
    tensor = TENSOR_FLOP_PER_CLK_SM.get(key) if key is not None else None
    out = {"clock_mhz": clock_mhz, "clock_source": CLOCK_SOURCE, "sm_count": sm_count,
           "fp32_fma_per_clk_sm": fma, "tensor_flop_per_clk_sm": tensor, "fp32_tflops": None,
           "tensor_tflops": None, "unknown": []}
    if key is None:
        out["unknown"].append("compute capability")
    elif fma is None:
        out["unknown"].append(f"FP32 rate of sm_{key}")
    if key is not None and tensor is None:
        out["unknown"].append(f"tensor-core rate of sm_{key}")
    if not sm_count:
        out["unknown"].append("SM count")
    if not clock_mhz:
        out["unknown"].append("SM clock")
    if sm_count and clock_mhz:
        hz = clock_mhz * 1e6
        out["fp32_tflops"] = sm_count * fma * 2 * hz / 1e12 if fma else None
        out["tensor_tflops"] = sm_count * tensor * hz / 1e12 if tensor else None
    return out


def peak_for_dtype(peak: dict, dtype: str, precision: str | None = None) -> float | None:
    """The peak a result of ``dtype`` computed in ``precision`` (None: the dtype's exact one) is
    compared with, in useful flop/s: the tensor-core rate for the precisions that run there
    (TF32 half the 16-bit rate, 3xTF32 a sixth), the FP32 CUDA-core rate otherwise (None: unknown)."""
    from .precision import get, resolve

    p = get(resolve(dtype, precision))
    if not p.tensor_cores:
        return peak.get("fp32_tflops")
    tensor = peak.get("tensor_tflops")
    return tensor * p.tensor_share if tensor else None


def peak_kind(dtype: str, precision: str | None = None) -> str:
    from .precision import get, resolve

    p = get(resolve(dtype, precision))
    if not p.tensor_cores:
        return "fp32 CUDA cores"
    return "dense tensor cores" if p.exact else f"dense tensor cores, {p.name} ({p.tensor_share:.3g} of the 16-bit rate)"
