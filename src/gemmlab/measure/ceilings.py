"""The device's measured ceilings: DRAM bandwidth from a device-to-device copy far larger than L2,
and cuBLAS TFLOP/s at a large shape (true FP32 for fp32), each the median of the one timing
engine's samples (``measure.timing``; hot L2 for the copy, whose buffers dwarf the L2 anyway)."""

from __future__ import annotations

from typing import Callable

from ..core.driver import device_info
from ..core.shapes import CEILING_SHAPE
from .arrays import Lib, TrueFP32, choose_lib, make_operands
from .gpu_timing import CudaDevice
from .timing import Candidate, Engine, Settings


def _median_ms(L: Lib, name: str, fn: Callable[[], object], l2: str) -> float:
    info = device_info(0)
    st = Settings(l2=l2, max_samples=30)
    eng = Engine(CudaDevice(L, 0, info.l2_bytes, flush=l2 == "cold", spin=st.spin), st)
    eng.warm_up([Candidate(name, fn)])
    return eng.isolated(Candidate(name, fn)).median


def measure_bandwidth(lib: str | None = None, nbytes: int | None = None) -> dict:
    """Device-to-device copy of a buffer far larger than L2: (bytes read + written) / time."""
    info = device_info(0)
    L = Lib(choose_lib(lib, "fp32"))
    n = max(nbytes or 0, 8 * info.l2_bytes, 1 << 30) // 4
    if L.name == "cupy":
        a = L.xp.ones(n, dtype=L.xp.float32)
        b = L.xp.empty_like(a)
        med = _median_ms(L, "copy", lambda: L.xp.copyto(b, a), "hot") / 1e3
    else:
        a = L.xp.ones(n, dtype=L.xp.float32, device="cuda")
        b = L.xp.empty_like(a)
        med = _median_ms(L, "copy", lambda: b.copy_(a), "hot") / 1e3
    theory = 2.0 * info.mem_clock_khz * 1e3 * info.bus_width_bits / 8 if info.mem_clock_khz and info.bus_width_bits else None
    return {"dram_bw_Bps": 2.0 * n * 4 / med, "copy_bytes": n * 4, "copy_s": med, "dram_bw_theoretical_Bps": theory}


def measure_cublas(dtype: str, shape=CEILING_SHAPE, lib: str | None = None) -> float:
    """cuBLAS TFLOP/s at ``shape`` (median of the engine's cold-L2 samples), true FP32 for fp32."""
    L = Lib(choose_lib(lib, dtype))
    M, N, K = shape
    ops = make_operands(L, M, N, K, dtype, seed=7, beta_nonzero=False)
    with TrueFP32(L):
        med = _median_ms(L, "cublas", lambda: L.matmul(ops.a, ops.b, out=ops.c), "cold") / 1e3
    return 2.0 * M * N * K / med / 1e12
