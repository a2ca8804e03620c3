"""The process ``gemmlab profile`` runs under Nsight Compute.

    python -m gemmlab.measure.ncu_target --rung smem --shape 2048x2048x2048 --dtype fp32
    python -m gemmlab.measure.ncu_target --cublas --shape 2048 --dtype fp16

It builds fresh random operands (their generation launches kernels of the array library), runs
the measured call once unprofiled (module loading, cuBLAS's first-call setup), synchronizes, and
then runs it exactly once between ``cuProfilerStart`` and ``cuProfilerStop``. ncu runs with
``--profile-from-start off``, so what it measures is that one call and nothing else.
"""

from __future__ import annotations

import argparse
import sys

from ..core.config import parse_config
from ..core.dtypes import ALL_DTYPES
from ..core.variant import FP8_DEFAULT_OUT
from ..core.precision import PRECISIONS


def _profiler(ordinal: int, start: bool) -> None:
    """cuProfilerStart/Stop in the device's primary context (the one CuPy, PyTorch and our
    launches use)."""
    from ..core.driver import check, context, cuda

    cu = cuda()
    with context(ordinal):
        if start:
            check(cu.cuProfilerStart(), "cuProfilerStart")
        else:
            check(cu.cuProfilerStop(), "cuProfilerStop")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gemmlab.measure.ncu_target", description=__doc__.split("\n\n")[0])
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--rung", help="rung slug or number")
    who.add_argument("--cublas", action="store_true", help="the array library's matmul (cuBLAS) instead of a rung")
    p.add_argument("--shape", required=True, help="N, N^3 or MxNxK")
    p.add_argument("--dtype", default="fp32", choices=list(ALL_DTYPES))
    p.add_argument("--config", default=None, help="preset name, KEY=VALUE,... or JSON")
    p.add_argument("--lib", default=None, choices=["cupy", "torch"])
    p.add_argument("--precision", default=None, choices=list(PRECISIONS),
                   help="what float32 operands are multiplied in (the rung's; cuBLAS with TF32 for tf32)")
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args(argv)

    from .arrays import Fp32Mode, Lib, choose_lib, make_operands
    from ..core.shapes import parse_shape

    M, N, K = parse_shape(args.shape)
    L = Lib(choose_lib(args.lib, args.dtype))   # the library the benchmark times: the cuBLAS profiled is the cuBLAS timed
    # fp32 (and 3xtf32) means FP32 math in cuBLAS, tf32 its TF32 mode: the benchmark's baselines
    Fp32Mode(L, tf32=args.precision == "tf32").__enter__()
    # FP8 operands (rung 25) write the C a scaled matmul writes by default; cuBLAS has no plain FP8 GEMM
    fp8 = args.dtype == "fp8"
    if fp8 and args.cublas:
        p.error("--cublas multiplies fp32, fp16 or bf16: cuBLAS has no plain FP8 GEMM (torch._scaled_mm is cuBLASLt's)")
    ops = make_operands(L, M, N, K, args.dtype, seed=args.seed, beta_nonzero=False, out=FP8_DEFAULT_OUT if fp8 else None)
    if args.cublas:
        ordinal = _device_of(ops.c, L)

        def call():
            L.matmul(ops.a, ops.b, out=ops.c)
    else:
        from ..core.api import plan
        pl = plan(ops.a, ops.b, ops.c, kernel=args.rung, config=parse_config(args.config), precision=args.precision)
        ordinal = pl.ordinal
        call = pl.run

    call()                      # unprofiled: lazy module loading, library setup
    L.synchronize()
    _profiler(ordinal, True)
    call()                      # the measured call
    L.synchronize()
    _profiler(ordinal, False)
    return 0


def _device_of(x, L) -> int:
    if L.name == "torch":
        return int(x.device.index or 0)
    return int(x.device.id)


if __name__ == "__main__":
    sys.exit(main())
