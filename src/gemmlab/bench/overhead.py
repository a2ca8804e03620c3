"""Host overhead per call: gemmlab.gemm and gemmlab.matmul beside cupy.matmul and torch.matmul.

``gemmlab bench --overhead``. What a caller in a training loop pays on the CPU for one call on a
problem seen before (the fast path): host wall time per call, not GPU time. Each sample is a batch
of 10 calls timed with ``time.perf_counter_ns`` around the Python loop; the GPU is synchronized
between batches, outside the timed interval, so every batch starts on an idle launch queue and
the queue never holds more than the batch (GPU time cannot leak into the figure through a full
queue, whatever the kernel's duration). Batches of the contenders alternate in a rotating order,
so the CPU's state (a shared machine's clock moves by tens of percent) hits each alike.
Figures: the median and the minimum over the batches, per call.

Compared in pairs that do the same work: ``gemmlab.gemm(a, b, c)`` (in place) beside the library's
``matmul(a, b, out=c)``, and ``gemmlab.matmul(a, b)`` (allocates the result) beside the library's
``matmul(a, b)``, each with the library's own operands (CuPy arrays, PyTorch tensors). The
verdict the issue asks for: gemm's median at most 10 us, and below the library's.
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime, timezone

from ..core.api import gemm, matmul
from ..core.driver import require_gpu
from ..core.dtypes import get as get_dtype
from ..core.shapes import OVERHEAD_SHAPE
from ..measure.arrays import Lib, available_libs
from ..measure.verify import check, make_operands

TARGET_US = 10.0


def _per_call_us(fn, calls: int, batches: int, sync) -> list[float]:
    """Host microseconds per call of ``fn()``, one figure per batch of ``calls`` calls."""
    out = []
    for _ in range(batches):
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter_ns() - t0) / calls / 1000.0)
    sync()
    return out


def _summary(samples: list[float]) -> dict:
    return {"median_us": statistics.median(samples), "min_us": min(samples),
            "max_us": max(samples), "batches": len(samples)}


def _contenders(L: Lib, ops, kernel: str) -> dict:
    a, b, c = ops.a, ops.b, ops.c
    lib_matmul = L.xp.matmul
    return {
        "gemmlab.gemm": lambda: gemm(a, b, c, kernel=kernel),
        f"{L.name}.matmul(out=)": lambda: lib_matmul(a, b, out=c),
        "gemmlab.matmul": lambda: matmul(a, b, kernel=kernel),
        f"{L.name}.matmul": lambda: lib_matmul(a, b),
    }


def measure_lib(lib: str, shape: tuple[int, int, int], dtype: str, kernel: str,
                calls: int = 10, batches: int = 400) -> dict:
    """Every contender on ``lib``'s operands, verified first (gemmlab's answer against the
    float64 reference), then timed in rotating order so drift hits each alike."""
    L = Lib(lib)
    M, N, K = shape
    ops = make_operands(L, M, N, K, dtype)
    gemm(ops.a, ops.b, ops.c, kernel=kernel)   # the first call: full path, compile, plan
    L.synchronize()
    verdict = check(ops, 1.0, 0.0, f"{kernel} {dtype} {M}x{N}x{K} ({lib})")
    contenders = _contenders(L, ops, kernel)
    for fn in contenders.values():           # warm every path (allocator pools, cuBLAS handles)
        _per_call_us(fn, calls, 20, L.synchronize)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for i in range(batches):
        for name in names[i % len(names):] + names[:i % len(names)]:
            samples[name] += _per_call_us(contenders[name], calls, 1, L.synchronize)
    return {"lib": lib, "verified": verdict.ok, "rel_error": verdict.rel_error,
            "results": {name: _summary(s) for name, s in samples.items()}}


def _verdict(entry: dict) -> dict:
    r, lib = entry["results"], entry["lib"]
    gemm_us, lib_us = r["gemmlab.gemm"]["median_us"], r[f"{lib}.matmul(out=)"]["median_us"]
    mm_us, lib_mm_us = r["gemmlab.matmul"]["median_us"], r[f"{lib}.matmul"]["median_us"]
    return {"gemm_at_most_target": gemm_us <= TARGET_US, "gemm_below_library": gemm_us < lib_us,
            "matmul_below_library": mm_us < lib_mm_us}


def run_overhead(shape=OVERHEAD_SHAPE, dtype: str = "fp32", kernel: str = "auto", libs=None,
                 calls: int = 10, batches: int = 400) -> dict:
    """The overhead benchmark's result (JSON-ready): environment, settings, per library the
    figures of every contender and the verdicts."""
    from ..analysis.environment import collect

    get_dtype(dtype)
    require_gpu()
    libs = [lib for lib in (libs or available_libs()) if not (lib == "cupy" and dtype == "bf16")]
    if not libs:
        raise RuntimeError("the overhead benchmark needs CuPy or PyTorch on a GPU")
    entries = []
    for lib in libs:
        entry = measure_lib(lib, shape, dtype, kernel, calls, batches)
        entry["verdict"] = _verdict(entry)
        entries.append(entry)
    return {"kind": "overhead", "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "env": collect(), "settings": {"shape": list(shape), "dtype": dtype, "kernel": kernel,
                                           "calls_per_batch": calls, "batches": batches,
                                           "target_us": TARGET_US},
            "libs": entries}


def render(result: dict) -> None:
    """The figures as a table (rich), one row per contender, and the verdicts in words."""
    from rich.console import Console
    from rich.table import Table

    s = result["settings"]
    table = Table(title=f"host time per call, {'x'.join(map(str, s['shape']))} {s['dtype']} "
                        f"(kernel {s['kernel']}; median of {s['batches']} batches of {s['calls_per_batch']})")
    for col in ("library", "call", "median us", "min us", "max us"):
        table.add_column(col, justify="right" if "us" in col else "left")
    for entry in result["libs"]:
        for name, r in entry["results"].items():
            table.add_row(entry["lib"], name, f"{r['median_us']:.2f}", f"{r['min_us']:.2f}", f"{r['max_us']:.2f}")
    console = Console()
    console.print(table)
    for entry in result["libs"]:
        v = entry["verdict"]
        console.print(f"{entry['lib']}: gemm <= {s['target_us']:g} us: {'yes' if v['gemm_at_most_target'] else 'NO'}; "
                      f"gemm below {entry['lib']}.matmul(out=): {'yes' if v['gemm_below_library'] else 'NO'}; "
                      f"matmul below {entry['lib']}.matmul: {'yes' if v['matmul_below_library'] else 'NO'}; "
                      f"result verified: {'yes' if entry['verified'] else 'NO'}")


def exit_code(result: dict) -> int:
    """0 when every result verified and every verdict holds, else 1 (a missed target is a
    failure of the run, said in the table)."""
    ok = all(e["verified"] and all(e["verdict"].values()) for e in result["libs"])
    return 0 if ok else 1
