"""Quick development timing of chosen rungs against cuBLAS at one shape (events, median, L2
flush). The real benchmark is `gemmlab bench`; this exists for fast iteration on the device."""

import sys

import cupy as cp

import gemmlab

shape = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
rungs = sys.argv[2].split(",") if len(sys.argv) > 2 else ["tile_2d", "vectorized", "blocked", "double_buffer", "warp_tiling"]
flush = cp.empty(2 * 50 * 2**20 // 4, cp.float32)


def timeit(fn, reps=20):
    ts = []
    for _ in range(3):
        fn()
    for _ in range(reps):
        flush.fill(0)
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    ts.sort()
    return ts[len(ts) // 2]


for dtype, rr in (("fp32", rungs), ("fp16", ["wmma"])):
    dt = cp.float32 if dtype == "fp32" else cp.float16
    a = cp.random.standard_normal((shape, shape), dtype=cp.float32).astype(dt)
    b = cp.random.standard_normal((shape, shape), dtype=cp.float32).astype(dt)
    c = cp.empty((shape, shape), dt)
    flops = 2 * shape**3
    tc = timeit(lambda: cp.matmul(a, b, out=c))
    print(f"{dtype} cublas {tc:.3f} ms {flops / tc / 1e9:.1f} TFLOP/s")
    for r in rr:
        p = gemmlab.plan(a, b, c, kernel=r)
        t = timeit(p.run)
        print(f"{dtype} {r:>14} {t:.3f} ms {flops / t / 1e9:.1f} TFLOP/s  {tc / t:.3f}x cuBLAS")
