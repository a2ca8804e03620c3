"""gemmlab: the GEMM optimization ladder as CUDA kernels compiled at run time, verified against
cuBLAS, timed honestly, and explained.

>>> import cupy as cp, gemmlab
>>> a, b = cp.random.rand(1000, 700, dtype=cp.float32), cp.random.rand(700, 900, dtype=cp.float32)
>>> c = gemmlab.matmul(a, b)                       # fastest rung for fp32
>>> gemmlab.gemm(a, b, c, alpha=2.0, beta=0.5, kernel="tile_2d")   # c <- 2 a@b + 0.5 c
>>> gemmlab.precompile(kernels=["tile_2d"], dtypes=["fp32"])   # build ahead of time, in parallel
>>> gemmlab.empty_cache()          # return the split-K / copy workspaces gemmlab keeps (<= workspace_limit())
>>> gemmlab.autotune(True)         # auto measures a few candidates at each new shape's first call
>>> a8, sa = gemmlab.quantize_fp8(x, "row")        # FP8 codes and scales (x ~= a8 * sa)
>>> y = gemmlab.scaled_mm(a8, w8.t(), sa, sw.t())  # torch._scaled_mm's call, on rung 25 (sm_90a)
>>> y = gemmlab.grouped_mm(x, w.transpose(-2, -1), offs)  # the experts of an MoE layer, one launch (rung 26)

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

from .core.version import __version__  # noqa: E402

from .core import autotune as _autotune  # noqa: E402
from .core.api import (empty_cache, gemm, matmul, memory_reserved, plan, set_workspace_limit,  # noqa: E402
                       workspace_limit)
from .core.compile import CompileError  # noqa: E402
from .core.deps import MissingDependencyError  # noqa: E402
from .core.driver import NoGPUError  # noqa: E402
from .core.grouped import grouped_mm, grouped_mm_masked  # noqa: E402
from .core.precompile import precompile  # noqa: E402
from .core.quantize import quantize_fp8  # noqa: E402
from .core.registry import Rung, kernels  # noqa: E402
from .core.scaled import scaled_mm  # noqa: E402
from .core.scaled_grouped import scaled_grouped_mm, scaled_grouped_mm_masked  # noqa: E402

__all__ = ["gemm", "matmul", "plan", "scaled_mm", "grouped_mm", "grouped_mm_masked", "scaled_grouped_mm",
           "scaled_grouped_mm_masked", "quantize_fp8", "precompile", "empty_cache", "memory_reserved",
           "workspace_limit", "set_workspace_limit", "autotune", "kernels", "Rung", "CompileError", "NoGPUError",
           "MissingDependencyError", "__version__"]


def _tune_online(*args):
    """core.autotune's tuner: tune.online's, imported at the first signature it measures (the
    timing engine and the tables' writer live in layers above core)."""
    from .tune.online import tune_problem

    return tune_problem(*args)


_autotune.install(_tune_online)


def autotune(enabled: bool = True, *, budget_s: float | None = None, candidates: int | None = None):
    """Switch on-line tuning of ``kernel="auto"`` on (or off): at the first call of a shape no tuned
    entry holds, time up to ``candidates`` configurations (default 4) on the call's operands within
    ``budget_s`` seconds (default 3, ``GEMMLAB_AUTOTUNE_BUDGET``) and keep the fastest in the tuned
    table for later calls and processes; never while the stream captures a CUDA graph. Also
    ``GEMMLAB_AUTOTUNE=1``. Returns the settings in force (``core.autotune.Settings``)."""
    return _autotune.configure(enabled, budget_s=budget_s, candidates=candidates)


def __getattr__(name: str):
    """``gemmlab.torch`` on first use (importing it imports PyTorch; ``import gemmlab`` does not)."""
    if name == "torch":
        import importlib

        return importlib.import_module("gemmlab.torch")
    raise AttributeError(f"module 'gemmlab' has no attribute {name!r}")
