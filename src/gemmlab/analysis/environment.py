"""The environment a measurement was taken in: GPU, clocks, driver, toolchain, library versions,
source revision, and the device's theoretical peaks.

``collect()`` is called once per benchmark run and ``clocks()`` before and after it; both go into
the benchmark's JSON so that a figure can always be traced back to the machine that produced it.
Nothing here raises for a missing piece: NVML absent (no driver, a container without
libnvidia-ml), no GPU, no git checkout -- the corresponding values are ``None`` and an
``*_error`` key says why.

Peaks come from ``core.arch.peaks`` (the one definition: rates by architecture, the clock the
CUDA driver reports as the maximum, and "unknown" for an architecture outside the tables).
"""

from __future__ import annotations

import functools
import platform
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from ..core.arch import peak_for_dtype, peaks
from ..core.dtypes import DTYPES

# Known throttle-reason bits (nvmlClocksEventReason*), decoded into names for the JSON.
_REASONS = ("GpuIdle", "ApplicationsClocksSetting", "SwPowerCap", "HwSlowdown", "SyncBoost",
            "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown", "DisplayClockSetting")


# ---- NVML --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _nvml():
    """The initialized pynvml module, or an error string (cached: NVML is initialized once)."""
    try:
        import pynvml
    except ImportError as exc:
        return f"pynvml not installed ({exc}); pip install nvidia-ml-py"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return f"NVML unavailable: {exc.__class__.__name__}: {exc}"
    return pynvml


def _pci_bus_id(ordinal: int) -> str | None:
    """The CUDA device's PCI bus id, to find the same GPU in NVML whatever CUDA_VISIBLE_DEVICES says."""
    try:
        from ..core.driver import check, cuda, init

        init()
        cu = cuda()
        dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        bus = check(cu.cuDeviceGetPCIBusId(32, dev), "cuDeviceGetPCIBusId")
        if isinstance(bus, (bytes, bytearray)):
            bus = bytes(bus).split(b"\0")[0].decode()
        return str(bus).split("\0")[0] or None
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def _handle(ordinal: int):
    """(pynvml, handle) for the CUDA device ``ordinal``, or (None, error string)."""
    nv = _nvml()
    if isinstance(nv, str):
        return None, nv
    bus = _pci_bus_id(ordinal)
    if bus:
        try:
            return nv, nv.nvmlDeviceGetHandleByPciBusId(bus)
        except Exception:
            pass
    try:  # by index: the same GPU unless CUDA_VISIBLE_DEVICES reorders them
        return nv, nv.nvmlDeviceGetHandleByIndex(ordinal)
    except Exception as exc:
        return None, f"NVML has no handle for device {ordinal} (PCI bus {bus}): {exc}"


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def _text(x):
    return x.decode() if isinstance(x, (bytes, bytearray)) else x


def _reasons(nv, mask: int | None) -> list[str] | None:
    if mask is None:
        return None
    names = []
    for r in _REASONS:
        bit = getattr(nv, "nvmlClocksEventReason" + r, None) or getattr(nv, "nvmlClocksThrottleReason" + r, None)
        if bit and mask & bit:
            names.append(r)
    return names


def clocks(ordinal: int = 0) -> dict:
    """Current SM and memory clocks (MHz), temperature, power and clock-limiting reasons (NVML).

    All values are ``None`` when NVML is unavailable; ``error`` then says why."""
    out = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "sm_mhz": None, "mem_mhz": None,
           "temperature_c": None, "power_w": None, "clock_event_reasons": None, "clock_event_mask": None}
    nv, h = _handle(ordinal)
    if nv is None:
        out["error"] = h
        return out
    out["sm_mhz"] = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
    out["mem_mhz"] = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
    out["temperature_c"] = _try(nv.nvmlDeviceGetTemperature, h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
    mw = _try(nv.nvmlDeviceGetPowerUsage, h)
    out["power_w"] = mw / 1000.0 if mw is not None else None
    getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
    mask = _try(getter, h) if getter else None
    out["clock_event_mask"] = mask
    out["clock_event_reasons"] = _reasons(nv, mask)
    return out


def max_sm_clock_mhz(ordinal: int = 0) -> int | None:
    """The maximum SM clock NVML reports (None without NVML)."""
    nv, h = _handle(ordinal)
    return None if nv is None else _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)


def total_energy_mj(ordinal: int = 0) -> float | None:
    """The device's energy counter: millijoules since the driver loaded (NVML, Volta and newer; None
    without NVML or where the device does not report it)."""
    nv, h = _handle(ordinal)
    if nv is None:
        return None
    mj = _try(nv.nvmlDeviceGetTotalEnergyConsumption, h)
    return float(mj) if mj is not None else None


# ---- versions ----------------------------------------------------------------------------------
def package_version(module: str) -> str | None:
    """The installed version of the package that provides ``module`` (``"cupy"`` finds
    cupy-cuda13x), without importing it; None when it is not installed."""
    return _dist_version(module)[1]


@functools.lru_cache(maxsize=None)
def _dist_version(module: str) -> tuple[str | None, str | None]:
    """(distribution name, version) of the installed package providing ``module``, without importing it."""
    import importlib.metadata as md

    try:
        dists = md.packages_distributions().get(module) or []
    except Exception:
        dists = []
    for d in dists:
        if module == "cuda" and d != "cuda-bindings":
            continue
        try:
            return d, md.version(d)
        except Exception:
            continue
    return None, None


def library_versions() -> dict:
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for key, module in (("numpy", "numpy"), ("cupy", "cupy"), ("torch", "torch"), ("cuda-bindings", "cuda"),
                        ("nvidia-ml-py", "pynvml"), ("rich", "rich")):
        dist, ver = _dist_version(module)
        out[key] = ver
        if key == "cupy" and dist:
            out["cupy_dist"] = dist  # cupy-cuda12x / cupy-cuda13x
    torch = sys.modules.get("torch")  # only if already imported: importing torch costs seconds
    if torch is not None:
        out["torch_cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
    return out


def cuda_driver_version() -> str | None:
    """The CUDA version the driver supports (cuDriverGetVersion), e.g. ``'13.0'``."""
    try:
        from ..core.driver import cuda

        driver = cuda()  # absent in a base install: the record says None
        err, v = driver.cuDriverGetVersion()
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        return f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:
        return None


def _nvrtc_version() -> str | None:
    try:
        from ..core.toolchain import nvrtc_version

        return nvrtc_version()
    except Exception:
        return None


def source_root() -> Path | None:
    """The git checkout gemmlab is imported from (src layout), or None for an installed package."""
    pkg = Path(__file__).resolve().parent
    root = pkg.parents[1]
    if pkg.parent.name == "src" and (root / ".git").exists():
        return root
    return None


def git_revision() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the source checkout; (None, None) when not running from one.

    A copy of the tree without .git (as on a remote GPU machine) can name its commit in
    ``GEMMLAB_GIT_COMMIT``. Read-only: ``--no-optional-locks`` keeps ``git status`` from
    refreshing the index."""
    if os.environ.get("GEMMLAB_GIT_COMMIT"):
        return os.environ["GEMMLAB_GIT_COMMIT"], None
    root = source_root()
    if root is None:
        return None, None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip() or None
    except Exception:
        return None, None
    try:
        st = subprocess.run(["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain",
                             "--untracked-files=no"], capture_output=True, text=True, timeout=10, check=True).stdout
        dirty = bool(st.strip())
    except Exception:
        dirty = None
    return commit, dirty


# ---- everything --------------------------------------------------------------------------------
def collect(ordinal: int = 0) -> dict:
    """GPU, clocks, driver, CUDA, NVRTC, libraries, source revision and peaks, as a JSON-ready dict.

    Keys (values ``None`` when unknown): gpu_name, ordinal, pci_bus_id, uuid, sm_count,
    compute_capability ("9.0"), arch ("sm_90a"), max_sm_clock_mhz (NVML max, else the CUDA
    attribute), max_sm_clock_mhz_cuda, max_mem_clock_mhz, l2_bytes, memory_bus_width_bits,
    total_memory_bytes, power_limit_w, driver_version, cuda_driver_version, nvrtc_version,
    libraries {python, platform, numpy, cupy, torch, cuda-bindings, ...}, gemmlab_version,
    git_commit, git_dirty, clocks (current, see ``clocks()``), peaks (see ``peaks()``),
    peak_tflops {fp32, fp16, bf16} (the peak each dtype is compared with), and cuda_error /
    nvml_error when those parts are unavailable.
    """
    from ..core.version import __version__

    env: dict = {"gpu_name": None, "ordinal": ordinal, "pci_bus_id": None, "uuid": None, "sm_count": None,
                 "compute_capability": None, "arch": None, "max_sm_clock_mhz": None, "max_sm_clock_mhz_cuda": None,
                 "max_mem_clock_mhz": None, "l2_bytes": None, "memory_bus_width_bits": None,
                 "total_memory_bytes": None, "power_limit_w": None, "driver_version": None,
                 "cuda_driver_version": cuda_driver_version(), "nvrtc_version": _nvrtc_version()}
    cc = None
    try:
        from ..core.driver import device_info

        info = device_info(ordinal)
        cc = tuple(info.cc)
        env.update(gpu_name=info.name, sm_count=info.sm_count, compute_capability=f"{cc[0]}.{cc[1]}",
                   arch=info.arch, max_sm_clock_mhz_cuda=info.max_clock_khz / 1000.0, l2_bytes=info.l2_bytes,
                   memory_bus_width_bits=info.bus_width_bits)
        env["pci_bus_id"] = _pci_bus_id(ordinal)
    except Exception as exc:
        env["cuda_error"] = f"{exc.__class__.__name__}: {exc}"

    nv, h = _handle(ordinal)
    if nv is None:
        env["nvml_error"] = h
    else:
        env["driver_version"] = _text(_try(nv.nvmlSystemGetDriverVersion))
        if env["gpu_name"] is None:
            env["gpu_name"] = _text(_try(nv.nvmlDeviceGetName, h))
        env["uuid"] = _text(_try(nv.nvmlDeviceGetUUID, h))
        env["max_sm_clock_mhz"] = _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)
        env["max_mem_clock_mhz"] = _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)
        mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
        env["total_memory_bytes"] = getattr(mem, "total", None)
        mw = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        env["power_limit_w"] = mw / 1000.0 if mw is not None else None
    if env["max_sm_clock_mhz"] is None:
        env["max_sm_clock_mhz"] = env["max_sm_clock_mhz_cuda"]

    env["libraries"] = library_versions()
    env["gemmlab_version"] = __version__
    env["git_commit"], env["git_dirty"] = git_revision()
    env["clocks"] = clocks(ordinal)
    env["peaks"] = peaks(cc, env["sm_count"], env["max_sm_clock_mhz_cuda"])
    env["peak_tflops"] = {d: peak_for_dtype(env["peaks"], d) for d in DTYPES}
    return env
