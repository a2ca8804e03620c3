"""gemmlab: the GEMM optimization ladder as CUDA kernels compiled at run time, verified against
cuBLAS, timed honestly, and explained.

>>> import cupy as cp, gemmlab
>>> a, b = cp.random.rand(1000, 700, dtype=cp.float32), cp.random.rand(700, 900, dtype=cp.float32)
>>> c = gemmlab.matmul(a, b)                       # fastest rung for fp32
>>> gemmlab.gemm(a, b, c, alpha=2.0, beta=0.5, kernel="tile_2d")   # c <- 2 a@b + 0.5 c
"""

__version__ = "0.1.0"

from .api import gemm, matmul, plan  # noqa: E402
from .compile import CompileError  # noqa: E402
from .launch import NoGPUError  # noqa: E402
from .registry import Rung, kernels  # noqa: E402

__all__ = ["gemm", "matmul", "plan", "kernels", "Rung", "CompileError", "NoGPUError", "__version__"]
