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
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "gemmlab needs NVIDIA's cuda-python bindings and NVRTC: "
            'pip install "gemmlab[cu13]" (or [cu12] for a CUDA 12 driver)'
        ) from exc
    return nvrtc


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> str:
    nvrtc = nvrtc_module()
    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    return f"{major}.{minor}"


def normalize_arch(arch: str | int) -> str:
    """``'sm_90a'``, ``'90a'``, ``'SM_80'``, ``80`` -> ``'sm_90a'`` / ``'sm_80'`` (suffix kept as given)."""
    s = str(arch).strip().lower()
    if s.startswith("sm_"):
        s = s[3:]
    suffix = ""
    if s.endswith("a") or s.endswith("f"):
        suffix, s = s[-1], s[:-1]
    if not s.isdigit():
        raise ValueError(f"architecture {arch!r} is not of the form sm_XY, e.g. sm_90a or sm_80")
    return f"sm_{int(s)}{suffix}"


def arch_for_capability(major: int, minor: int) -> str:
    """The NVRTC target for a device of compute capability major.minor.

    Hopper (9.0) and Blackwell (10.x, 12.x) get the arch-specific ``a`` target so that their own
    instructions (wgmma, setmaxnreg) are available; such a cubin runs only on that exact chip,
    which is what a kernel compiled at run time for the GPU in hand wants.
    """
    num = 10 * major + minor
    return f"sm_{num}a" if major >= 9 else f"sm_{num}"


def arch_number(arch: str) -> int:
    """``'sm_90a'`` -> 90."""
    return int(normalize_arch(arch)[3:].rstrip("af"))
