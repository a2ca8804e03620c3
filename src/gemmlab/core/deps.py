"""Optional dependencies: which extra of ``pip install gemmlab[...]`` brings each one.

A base install (``pip install gemmlab``) has the registry, the CLI and the analysis tools that
read files; compiling needs NVIDIA's cuda-python and NVRTC (the ``cu13`` or ``cu12`` extra),
running on a GPU needs CuPy or PyTorch as well, and the report's figures need matplotlib.
``require`` imports a module or raises ``MissingDependencyError``, whose message is one line
naming the extra to install; the CLI prints exactly that line (exit code 4). ``require_all``
checks several at once (a command that needs two extras names both in that one line).

Every import of cuda.bindings, CuPy, PyTorch or matplotlib whose absence should stop a command
goes through here. Probing which GPU array library is usable (``measure.arrays.available_libs``)
and reading versions for the environment record stay plain try/except: absence is an answer there.
"""

from __future__ import annotations

import importlib

# top-level package -> (what it is for, the install command that brings it)
EXTRAS: dict[str, tuple[str, str]] = {
    "cuda": ("NVIDIA's cuda-python (NVRTC and the driver)",
             'pip install "gemmlab[cu13]" (CUDA 13 driver) or "gemmlab[cu12]" (CUDA 12 driver)'),
    "cupy": ("CuPy", 'pip install "gemmlab[cu13]" (or "gemmlab[cu12]")'),
    "torch": ("PyTorch", 'pip install "gemmlab[torch]"'),
    "matplotlib": ("matplotlib (the report\'s figures)", 'pip install "gemmlab[report]"'),
    "triton": ("Triton (the benchmark's Triton peer, an autotuned Triton matmul on PyTorch operands)",
               "pip install triton"),
    "optuna": ("Optuna (gemmlab tune's strategies and results database)", 'pip install "gemmlab[tune]"'),
}


class MissingDependencyError(ImportError):
    """An optional dependency is not installed; the message says which extra brings it."""


def install_hint(module: str) -> str:
    top = module.split(".")[0]
    what, how = EXTRAS.get(top, (top, f"pip install {top}"))
    return f"{what} is not installed: {how}"


def require(module: str):
    """Import ``module`` or raise ``MissingDependencyError`` with a one-line install hint."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if isinstance(exc, MissingDependencyError):
            raise
        raise MissingDependencyError(f"{install_hint(module)} (import of {module} failed: {exc})") from None


def require_all(*modules: str) -> None:
    """Check that every module imports; else one ``MissingDependencyError`` naming each missing
    one's extra, in one line (``; ``-separated)."""
    missing: list[str] = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            hint = install_hint(module)
            if hint not in missing:
                missing.append(hint)
    if missing:
        raise MissingDependencyError("; ".join(missing))
