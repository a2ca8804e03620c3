"""gemmlab: the GEMM optimization ladder as CUDA kernels compiled at run time, verified against
cuBLAS, timed honestly, and explained.

>>> import cupy as cp, gemmlab
>>> a, b = cp.random.rand(1000, 700, dtype=cp.float32), cp.random.rand(700, 900, dtype=cp.float32)
>>> c = gemmlab.matmul(a, b)                       # fastest rung for fp32
>>> gemmlab.gemm(a, b, c, alpha=2.0, beta=0.5, kernel="tile_2d")   # c <- 2 a@b + 0.5 c
>>> gemmlab.precompile(kernels=["tile_2d"], dtypes=["fp32"])   # build ahead of time, in parallel
>>> gemmlab.empty_cache()          # return the split-K / copy workspaces gemmlab keeps (<= workspace_limit())

``gemmlab.torch.matmul(a, b)`` is the PyTorch operator ``gemmlab::matmul`` (autograd and
``torch.compile``); it is imported on first use, so ``import gemmlab`` does not import PyTorch.

The package is layered; each folder is one layer and imports only from the layers below it:

    cli       the command line, one module per subcommand
    report    the measured worklog: model, step explanations, figures, rendering, collection
    bench     the benchmark: what to run, statistics, the GPU run, results and tables
    measure   arrays, verification against cuBLAS, timing
    analysis  disassembly, occupancy, inspect, Nsight Compute, the environment
    core      dtypes, registry, configs, shapes, problems, compile, driver, launch, the API
    kernels   the CUDA sources, one file per rung (data, not Python)
"""

__version__ = "0.1.0"

from .core.api import (empty_cache, gemm, matmul, memory_reserved, plan, set_workspace_limit,  # noqa: E402
                       workspace_limit)
from .core.compile import CompileError  # noqa: E402
from .core.deps import MissingDependencyError  # noqa: E402
from .core.driver import NoGPUError  # noqa: E402
from .core.precompile import precompile  # noqa: E402
from .core.registry import Rung, kernels  # noqa: E402

__all__ = ["gemm", "matmul", "plan", "precompile", "empty_cache", "memory_reserved", "workspace_limit",
           "set_workspace_limit", "kernels", "Rung", "CompileError", "NoGPUError", "MissingDependencyError",
           "__version__"]


def __getattr__(name: str):
    """``gemmlab.torch`` on first use (importing it imports PyTorch; ``import gemmlab`` does not)."""
    if name == "torch":
        import importlib

        return importlib.import_module("gemmlab.torch")
    raise AttributeError(f"module 'gemmlab' has no attribute {name!r}")
