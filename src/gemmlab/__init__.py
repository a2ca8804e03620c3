"""gemmlab: the GEMM optimization ladder as CUDA kernels compiled at run time, verified against
cuBLAS, timed honestly, and explained."""

__version__ = "0.1.0"

from .registry import kernels  # noqa: E402

__all__ = ["kernels", "__version__"]
