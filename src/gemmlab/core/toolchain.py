"""Where NVIDIA's tools live: NVRTC (through cuda-python), the CUDA headers, cuobjdump, nvdisasm, ncu.

Everything is found through ``cuda.pathfinder`` first (it knows the pip wheels' layout), then a
CUDA install (``CUDA_HOME``/``CUDA_PATH``, ``/usr/local/cuda``), then ``PATH``. Nothing here needs
a GPU.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from .deps import require


class ToolNotFoundError(RuntimeError):
    """A command-line tool of the CUDA toolkit could not be found."""


def _cuda_homes() -> list[Path]:
    homes = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            homes.append(Path(os.environ[var]))
    homes.append(Path("/usr/local/cuda"))
    return [h for h in homes if h.is_dir()]


@functools.lru_cache(maxsize=None)
def find_tool(name: str) -> str:
    """Absolute path of ``cuobjdump``, ``nvdisasm``, ``ncu``, ``compute-sanitizer`` ..."""
    try:
        import cuda.pathfinder as pf

        found = pf.find_nvidia_binary_utility(name)
        if found:
            return str(found)
    except Exception:  # older pathfinder without the function, or utility unknown to it
        pass
    on_path = shutil.which(name)
    if on_path:
        return on_path
    for home in _cuda_homes():
        for cand in (home / "bin" / name, home / "nsight-compute" / name):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    hint = {
        "cuobjdump": "pip install nvidia-cuda-cuobjdump",
        "nvdisasm": "pip install nvidia-cuda-nvdisasm",
        "ncu": "install Nsight Compute (part of the CUDA toolkit) and put ncu on PATH",
    }.get(name, "install the CUDA toolkit")
    raise ToolNotFoundError(f"{name} not found (looked in the pip wheels, PATH and CUDA_HOME); {hint}")


@functools.lru_cache(maxsize=None)
def include_dirs() -> tuple[str, ...]:
    """Directories holding cuda_fp16.h, cuda_bf16.h and mma.h (+ crt/mma.h) for NVRTC."""
    dirs: list[str] = []
    try:
        import cuda.pathfinder as pf

        for lib in ("cudart", "nvrtc"):
            try:
                d = pf.find_nvidia_header_directory(lib)
            except Exception:
                d = None
            if d and d not in dirs:
                dirs.append(str(d))
    except ImportError:
        pass
    # cu12 wheels keep crt/ in the nvcc wheel; look for it beside the runtime headers.
    for d in list(dirs):
        root = Path(d).parents[1]
        for cand in root.glob("*/include"):
            if (cand / "crt" / "mma.h").is_file() and str(cand) not in dirs:
                dirs.append(str(cand))
    for home in _cuda_homes():
        inc = home / "include"
        if inc.is_dir() and str(inc) not in dirs:
            dirs.append(str(inc))
    return tuple(dirs)


def nvrtc_module():
    """cuda-python's NVRTC module (``MissingDependencyError`` naming the extra when absent)."""
    return require("cuda.bindings.nvrtc")


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> str:
    nvrtc = nvrtc_module()
    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=None)
def supported_archs() -> tuple[int, ...]:
    """The compute capabilities this NVRTC can compile for (e.g. 75, 80, ..., 120)."""
    nvrtc = nvrtc_module()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcGetSupportedArchs failed: {err}")
    return tuple(int(a) for a in archs)
