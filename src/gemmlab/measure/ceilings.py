"""The device's measured ceilings: DRAM bandwidth from a device-to-device copy far larger than L2,
and cuBLAS TFLOP/s at a large shape (true FP32 for fp32), each the median of CUDA-event timings
on the array library's current stream."""

from __future__ import annotations

from typing import Callable

from ..core.driver import device_info
from ..core.shapes import CEILING_SHAPE
from .arrays import Lib, TrueFP32, choose_lib, elapsed_ms, event_pair, make_operands


def _median_seconds(L: Lib, fn: Callable[[], object], repeats: int, warmup: int) -> float:
    """Median CUDA-event time of ``fn`` in seconds (the library's events on its current stream)."""
    times = []
    for i in range(warmup + repeats):
        s, e = event_pair(L)
        s.record()
        fn()
        e.record()
        e.synchronize()
        if i >= warmup:
            times.append(elapsed_ms(L, s, e) / 1e3)
    times.sort()
    return times[len(times) // 2]


def measure_bandwidth(lib: str | None = None, nbytes: int | None = None, repeats: int = 20) -> dict:
    """Device-to-device copy of a buffer far larger than L2: (bytes read + written) / time."""
    info = device_info(0)
    L = Lib(choose_lib(lib, "fp32"))
    n = max(nbytes or 0, 8 * info.l2_bytes, 1 << 30) // 4
    if L.name == "cupy":
        a = L.xp.ones(n, dtype=L.xp.float32)
        b = L.xp.empty_like(a)
        med = _median_seconds(L, lambda: L.xp.copyto(b, a), repeats, 3)
    else:
        a = L.xp.ones(n, dtype=L.xp.float32, device="cuda")
        b = L.xp.empty_like(a)
        med = _median_seconds(L, lambda: b.copy_(a), repeats, 3)
    theory = 2.0 * info.mem_clock_khz * 1e3 * info.bus_width_bits / 8 if info.mem_clock_khz and info.bus_width_bits else None
    return {"dram_bw_Bps": 2.0 * n * 4 / med, "copy_bytes": n * 4, "copy_s": med, "dram_bw_theoretical_Bps": theory}


def measure_cublas(dtype: str, shape=CEILING_SHAPE, lib: str | None = None, repeats: int = 10) -> float:
    """cuBLAS TFLOP/s at ``shape`` (median of CUDA-event timings), true FP32 for fp32."""
    L = Lib(choose_lib(lib, dtype))
    M, N, K = shape
    ops = make_operands(L, M, N, K, dtype, seed=7, beta_nonzero=False)
    with TrueFP32(L):
        med = _median_seconds(L, lambda: L.matmul(ops.a, ops.b, out=ops.c), repeats, 2)
    return 2.0 * M * N * K / med / 1e12
