"""The CUDA driver, through cuda-python: initialization, errors, device facts, contexts.

Everything that talks to the driver goes through here: ``cuda()`` is the driver module (with a
one-line message naming the extra to install when cuda-python is missing), ``check`` unpacks a
result tuple and raises ``CudaError`` naming the call, ``init`` raises ``NoGPUError`` when there is
no usable GPU, ``device_info`` reads a device's attributes once, and ``context(ordinal)`` makes
the device's primary context (the one CuPy and PyTorch use) current for a ``with`` block.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .arch import ArchLimits, arch_for_capability, limits_of_device
from .deps import require


class NoGPUError(RuntimeError):
    """No usable NVIDIA GPU / driver on this machine."""


class CudaError(RuntimeError):
    pass


@functools.cache   # the launch paths ask for it (a staged call did six times), and importlib's
def cuda():         # lookup of an already imported module is not free
    """The cuda-python driver module (``cuda.bindings.driver``)."""
    return require("cuda.bindings.driver")


def check(result, what: str):
    """Unpack a cuda-python result tuple, raising CudaError with the call's name on failure."""
    cu = cuda()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        _, desc = cu.cuGetErrorString(err)
        raise CudaError(f"{what} failed: {name.decode() if name else err} ({desc.decode() if desc else ''})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)




@functools.lru_cache(maxsize=None)
def init() -> None:
    cu = cuda()
    try:
        res = cu.cuInit(0)
    except Exception as exc:  # driver library missing (cuda.pathfinder raises)
        raise NoGPUError(f"no NVIDIA driver found ({exc.__class__.__name__}: {exc})") from None
    err = res[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise NoGPUError(f"cuInit failed: {err} (no NVIDIA GPU, or the driver is not loaded)")
    n = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
    if n == 0:
        raise NoGPUError("the NVIDIA driver reports no GPU")


def require_gpu() -> None:
    """For a command that runs on the GPU: MissingDependencyError naming the extra when
    cuda-python is missing (exit 4), else NoGPUError saying why when no GPU is usable (exit 3)."""
    cuda()
    init()


def gpu_available() -> bool:
    try:
        init()
        return True
    except (NoGPUError, ImportError, CudaError):
        return False


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    cc: tuple[int, int]
    arch: str
    sm_count: int
    max_clock_khz: int
    l2_bytes: int
    smem_per_block_optin: int
    smem_per_sm: int
    regs_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    tex_align: int
    tex1d_linear_max: int
    mem_clock_khz: int
    bus_width_bits: int

    @property
    def limits(self) -> ArchLimits:
        """This device's per-SM limits, as its driver reports them."""
        return limits_of_device(self.cc, max_threads_per_sm=self.max_threads_per_sm,
                                max_blocks_per_sm=self.max_blocks_per_sm, regs_per_sm=self.regs_per_sm,
                                smem_per_sm=self.smem_per_sm, smem_per_block_optin=self.smem_per_block_optin)


@functools.lru_cache(maxsize=None)
def device_info(ordinal: int = 0) -> DeviceInfo:
    init()
    cu = cuda()
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
    A = cu.CUdevice_attribute

    def attr(a):
        return int(check(cu.cuDeviceGetAttribute(a, dev), f"cuDeviceGetAttribute({a})"))

    name = check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName").split(b"\0")[0].decode()
    cc = (attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    return DeviceInfo(
        ordinal, name, cc, arch_for_capability(*cc),
        attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        attr(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        attr(A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
        attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
        attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR),
        attr(A.CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT),
        attr(A.CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH),
        attr(A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        attr(A.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
    )


@functools.lru_cache(maxsize=None)
def primary_context(ordinal: int):
    """The device's primary context (retained once): the one CuPy and PyTorch use."""
    init()
    cu = cuda()
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
    return check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")


class context:
    """Make the device's primary context current for the duration (the one CuPy/PyTorch use)."""

    def __init__(self, ordinal: int):
        self.ctx = primary_context(ordinal)

    def __enter__(self):
        check(cuda().cuCtxPushCurrent(self.ctx), "cuCtxPushCurrent")

    def __exit__(self, *exc):
        check(cuda().cuCtxPopCurrent(), "cuCtxPopCurrent")
