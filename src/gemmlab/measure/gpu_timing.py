"""The timing engine's real GPU (``measure/timing.py`` defines what the engine needs of it): the
device on an array library's current stream (events, the spin kernel, the L2 flush), the launches
of those helper kernels through the driver, and NVML's clocks and energy, polled by a background
thread while a round runs."""

from __future__ import annotations

import threading
import time
from typing import Callable

from .timing import ClockReading

class CudaDevice:
    """``Device`` on the array library's current stream: its events, the spin kernel through the
    driver, and an L2 flush that reads twice the L2 size (the flush_read kernel: L2 left clean)."""

    FLUSH_FACTOR = 2

    SPIN_BUFFER_BYTES = 4 << 20

    def __init__(self, lib, ordinal: int, l2_bytes: int, flush: bool = True, spin: str = "busy"):
        from ..core.compile import compile_source
        from ..core.driver import device_info
        from ..core.launch import current_stream, load_compiled

        self.L = lib
        self.ordinal = ordinal
        self.stream = current_stream(lib.name, ordinal)
        info = device_info(ordinal)
        self.busy = spin == "busy"
        name = "spin_busy" if self.busy else "spin"
        self._spin = load_compiled(compile_source("spin.cu", name, info.arch), ordinal, "spin.cu")
        self._flush = load_compiled(compile_source("spin.cu", "flush_read", info.arch), ordinal, "spin.cu") if flush else None
        self._sms = info.sm_count
        self.flush_bytes = self.FLUSH_FACTOR * max(int(l2_bytes), 1 << 20) if flush else 0
        self._buf = self._zeros(self.flush_bytes) if flush else None
        self._spin_buf = self._zeros(self.SPIN_BUFFER_BYTES) if self.busy else None
        self._sink = self._zeros(16) if (self.busy or flush) else None

    def _zeros(self, nbytes: int):
        xp = self.L.xp
        return (xp.zeros(nbytes, dtype=xp.uint8, device="cuda") if self.L.name == "torch"
                else xp.zeros(nbytes, dtype=xp.uint8))

    def _ptr(self, x) -> int:
        return int(x.data_ptr()) if self.L.name == "torch" else int(x.data.ptr)

    def new_event(self):
        E = self.L.xp.cuda.Event
        return E(enable_timing=True) if self.L.name == "torch" else E()

    def record(self, event) -> None:
        event.record()

    def elapsed_ms(self, start, end) -> float:
        if self.L.name == "torch":
            return float(start.elapsed_time(end))
        return float(self.L.xp.cuda.get_elapsed_time(start, end))

    def spin(self, ns: int) -> None:
        import ctypes

        if self.busy:
            grid, block = self._sms, 256
            args = ((int(ns), self._ptr(self._spin_buf), self.SPIN_BUFFER_BYTES // 16, self._ptr(self._sink)),
                    (ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_void_p))
        else:
            grid, block = 1, 1
            args = ((int(ns),), (ctypes.c_ulonglong,))
        launch_1d(self._spin, self.ordinal, self.stream, grid, block, args, "launch of the spin kernel")

    def flush(self) -> None:
        if self._buf is not None:
            launch_l2_flush(self._flush, self.ordinal, self.stream, self._sms, self._ptr(self._buf), self.flush_bytes,
                            self._ptr(self._sink))

    def synchronize(self) -> None:
        self.L.synchronize()


def launch_1d(fn, ordinal: int, stream: int, grid: int, block: int, args, what: str) -> None:
    """One launch of the driver function ``fn`` (a 1-D grid, no dynamic shared memory) on ``stream``;
    ``args`` is the (values, ctypes types) pair cuda-python takes; a failure names ``what``."""
    from ..core.driver import check, context, cuda

    with context(ordinal):
        check(cuda().cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, args, 0), what)


def launch_l2_flush(fn, ordinal: int, stream: int, sms: int, buf: int, nbytes: int, sink: int) -> None:
    """spin.cu's flush_read (``fn``) over the ``nbytes`` at device address ``buf`` (a multiple of 16),
    4 blocks of 256 threads per SM; ``sink`` is 16 bytes it writes only for one pattern."""
    import ctypes

    args = ((buf, nbytes // 16, sink), (ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_void_p))
    launch_1d(fn, ordinal, stream, 4 * sms, 256, args, "launch of the L2 flush")


class _Poller:
    """A background thread calling ``read`` every ``interval_s`` between ``start`` and ``stop`` and
    keeping every reading that is not None."""

    def __init__(self, read: Callable[[], object], interval_s: float, name: str):
        self._read, self.interval_s, self._name = read, interval_s, name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._readings: list = []

    def _poll(self) -> None:
        while not self._stop.is_set():
            r = self._read()
            if r is not None:
                self._readings.append(r)
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._readings = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> list:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return list(self._readings)


class NvmlEnergy(_Poller):
    """``Energy`` from NVML's total-energy counter of the device (mJ since the driver loaded; Volta
    and newer), read every ``interval_s`` (a read took ~5 ms on the H100, and the counter moved
    every ~100 ms)."""

    def __init__(self, ordinal: int, interval_s: float = 0.002):
        from ..analysis import environment

        def read():
            mj = environment.total_energy_mj(ordinal)
            return None if mj is None else (time.monotonic(), mj)

        super().__init__(read, interval_s, "gemmlab-energy")
        self.ordinal = ordinal


class NvmlClocks(_Poller):
    """``Clocks`` from NVML, read by a background thread every ``interval_s`` while a round runs."""

    def __init__(self, ordinal: int, interval_s: float = 0.005):
        from ..analysis import environment

        def read():
            c = environment.clocks(ordinal)
            return ClockReading(time.monotonic(), c.get("sm_mhz"), tuple(c.get("clock_event_reasons") or ()))

        super().__init__(read, interval_s, "gemmlab-clocks")
        self.ordinal = ordinal
        self.max_sm_mhz = environment.max_sm_clock_mhz(ordinal)
