"""Launch layer: load cubins into the device's primary context and launch them through the CUDA
driver API (cuda-python), on the caller's current stream.

``Plan`` resolves everything once (variant, cubin, function handle, texture objects, argument
tuple) so that ``Plan.run()`` costs one ``cuLaunchKernel``: the benchmark times plans.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import threading
from collections import OrderedDict

from .compile import CompiledKernel
from .deps import require
from .driver import check, context, cuda, device_info
from .dtypes import get as get_dtype
from .problem import GemmProblem, KernelProblem
from .registry import Launch, Rung
from .variant import Variant


log = logging.getLogger("gemmlab")
_modules: dict[tuple[int, str], tuple[object, object]] = {}
_modules_lock = threading.Lock()


def load_compiled(ck: CompiledKernel, ordinal: int, what: str | None = None):
    """The CUfunction of a compiled kernel on a device, loaded into its primary context once."""
    key = (ordinal, ck.key)
    with _modules_lock:
        hit = _modules.get(key)
    if hit is not None:
        return hit[1]
    cu = cuda()
    with context(ordinal):
        mod = check(cu.cuModuleLoadData(ck.cubin), f"cuModuleLoadData({what or ck.source})")
        fn = check(cu.cuModuleGetFunction(mod, ck.name.encode()), f"cuModuleGetFunction({ck.name})")
    with _modules_lock:
        _modules[key] = (mod, fn)
    return fn


def stream_capturing(stream: int, ordinal: int) -> bool:
    """Whether ``stream`` is capturing a CUDA graph (the legacy stream counts as capturing while
    another stream captures in global mode: the driver then refuses to query it)."""
    cu = cuda()
    with context(ordinal):
        err, status = cu.cuStreamIsCapturing(stream)
    if err == cu.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return True
    check((err, status), "cuStreamIsCapturing")
    return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def compile_for_launch(variant: Variant, arch: str, capturing=None) -> CompiledKernel:
    """The compiled kernel a launch needs. Served from the memory or disk cache when there; a real
    NVRTC compile is logged (logger ``gemmlab``, WARNING: it takes seconds) and refused with a
    RuntimeError while ``capturing()`` says the launch stream is capturing a CUDA graph."""

    def before_compile() -> None:
        if capturing is not None and capturing():
            raise RuntimeError(
                f"gemmlab: {variant.describe()} is not compiled yet and the stream is capturing a CUDA graph; "
                f"compile it first with gemmlab.precompile(...) or `gemmlab compile`")
        log.warning("compiling %s for %s (not in the cache: gemmlab.precompile(...) or `gemmlab compile` "
                    "builds it ahead of time)", variant.describe(), arch)

    return variant.compile(arch, before_compile=before_compile)


def load_function(variant: Variant, ordinal: int, capturing=None):
    """(CUfunction, CompiledKernel) of a variant on a device, compiled and loaded once
    (``capturing``: see ``compile_for_launch``)."""
    ck = compile_for_launch(variant, device_info(ordinal).arch, capturing)
    return load_compiled(ck, ordinal, variant.describe()), ck


# ---- texture objects ------------------------------------------------------------------------
_tex_cache: "OrderedDict[tuple, int]" = OrderedDict()
_TEX_CACHE_MAX = 64


def texture_extent(ptr: int, span_bytes: int, channels: int, alloc_base: int, alloc_size: int,
                   tex_align: int, max_width: int) -> tuple[int, int, int]:
    """(base, size in bytes, channels) of a 1-D linear fp32 texture over ``span_bytes`` at ``ptr``.

    The texture starts at ``ptr`` aligned down to the device's texture alignment (never below
    the allocation's start) and ends at the array's last byte rounded up to a whole float4. A
    float4 texture whose last partial float4 would cross the allocation's end becomes a float
    texture (channels 1): the caller then compiles the scalar-fetch variant. Fetches outside the
    texture return 0 and never fault.
    """
    base = max(alloc_base, ptr - ptr % tex_align)
    if base % tex_align:
        raise ValueError(
            f"the texture rungs need the operand's allocation aligned to {tex_align} bytes "
            f"(allocation at {alloc_base:#x}); use another kernel"
        )
    end = -(-(ptr + span_bytes) // 16) * 16
    if end > alloc_base + alloc_size:
        end, channels = alloc_base + alloc_size, 1
    size = end - base
    size -= size % (4 * channels)
    width = size // (4 * channels)
    if width > max_width:
        raise ValueError(
            f"operand spans {width} texels, over the device's 1-D linear texture limit of "
            f"{max_width}; use a non-texture kernel"
        )
    return base, size, channels


def texture_for(ptr: int, span_bytes: int, channels: int, ordinal: int) -> tuple[int, int, int]:
    """(texture object, element offset of ptr from the texture's base, channels) for 1-D linear
    fp32 reads over the operand (extent: ``texture_extent``); objects are cached per range."""
    cu = cuda()
    info = device_info(ordinal)
    with context(ordinal):
        alloc_base, alloc_size = check(cu.cuMemGetAddressRange(ptr), "cuMemGetAddressRange")
        base, size, channels = texture_extent(ptr, span_bytes, channels, int(alloc_base), int(alloc_size),
                                              info.tex_align, info.tex1d_linear_max)
        key = (ordinal, base, size, channels)
        obj = _tex_cache.get(key)
        if obj is None:
            res = cu.CUDA_RESOURCE_DESC()
            res.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_LINEAR
            res.res.linear.devPtr = base
            res.res.linear.format = cu.CUarray_format.CU_AD_FORMAT_FLOAT
            res.res.linear.numChannels = channels
            res.res.linear.sizeInBytes = size
            tex = cu.CUDA_TEXTURE_DESC()
            tex.filterMode = cu.CUfilter_mode.CU_TR_FILTER_MODE_POINT
            obj = int(check(cu.cuTexObjectCreate(res, tex, None), "cuTexObjectCreate"))
            _tex_cache[key] = obj
            if len(_tex_cache) > _TEX_CACHE_MAX:
                # a kernel in flight may still read the oldest one: finish the work first
                check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
                _, old = _tex_cache.popitem(last=False)
                check(cu.cuTexObjectDestroy(old), "cuTexObjectDestroy")
        else:
            _tex_cache.move_to_end(key)
    return obj, (ptr - base) // 4, channels


# ---- launching ------------------------------------------------------------------------------
def current_stream(lib: str, ordinal: int) -> int:
    if lib == "cupy":
        cupy = require("cupy")
        with cupy.cuda.Device(ordinal):
            return int(cupy.cuda.get_current_stream().ptr)
    if lib == "torch":
        return int(require("torch").cuda.current_stream(ordinal).cuda_stream)
    return 0


def checked_mode() -> bool:
    """GEMMLAB_CHECK=1: synchronize after every launch and raise on asynchronous errors."""
    return os.environ.get("GEMMLAB_CHECK", "") not in ("", "0")


class Plan:
    """One rung on one problem, ready to launch: ``run()`` is a single cuLaunchKernel."""

    def __init__(self, problem: GemmProblem, rung: Rung, config=None, stream: int | None = None):
        self.problem = problem
        self.rung = rung
        kp: KernelProblem = problem.kernel_view()
        self.kp = kp
        self.ordinal = problem.c.device
        info = device_info(self.ordinal)
        rung.require(problem.dtype, info.arch)
        vec_a, vec_b = kp.vec_a, kp.vec_b
        tex_args: list[int] = []
        if rung.textures:
            # float4 texels only for a rung that fetches float4, and only where 16-byte access is legal
            a_info, b_info = (problem.a, problem.b) if not problem.c.col_major else (problem.b, problem.a)
            isz = get_dtype(problem.dtype).itemsize
            ta, oa, ch_a = texture_for(kp.a_ptr, a_info.span_elements * isz, rung.textures if vec_a else 1, self.ordinal)
            tb, ob, ch_b = texture_for(kp.b_ptr, b_info.span_elements * isz, rung.textures if vec_b else 1, self.ordinal)
            if rung.textures == 4:
                vec_a, vec_b = ch_a == 4, ch_b == 4
            tex_args = [ta, oa, tb, ob]
        self.variant = Variant.make(rung, problem.dtype, a_col=kp.a_col, b_col=kp.b_col,
                                    vec_a=vec_a, vec_b=vec_b, vec_c=kp.vec_c, config=config)
        cfg = self.variant.cfg
        limits = info.limits
        rung.check_resources(cfg, limits)
        self.geometry: Launch = rung.launch(kp.M, kp.N, cfg)
        if self.geometry.grid[2] > 1:   # row tiles beyond grid.y's limit: the GL_TALL variant
            self.variant = dataclasses.replace(self.variant, tall=True)
        def capturing() -> bool:  # asked only when the variant needs a real compile
            s = current_stream(problem.c.lib, self.ordinal) if stream is None else stream
            return stream_capturing(s, self.ordinal)

        self.function, self.compiled = load_function(self.variant, self.ordinal, capturing)
        if self.geometry.smem > limits.default_smem_per_block:
            # more than 48 KB of dynamic shared memory needs the function's opt-in
            cu = cuda()
            check(cu.cuFuncSetAttribute(self.function, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        self.geometry.smem), "cuFuncSetAttribute")
        vals = [kp.M, kp.N, kp.K, kp.alpha, kp.a_ptr, kp.lda, kp.b_ptr, kp.ldb, kp.beta, kp.c_ptr, kp.ldc, *tex_args]
        i32, f32, vp = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
        types = [i32, i32, i32, f32, vp, i32, vp, i32, f32, vp, i32]
        if tex_args:
            types += [ctypes.c_ulonglong, ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_longlong]
        self._args = (tuple(vals), tuple(types))

    def run(self, stream: int | None = None) -> None:
        cu = cuda()
        if stream is None:
            stream = current_stream(self.problem.c.lib, self.ordinal)
        g, b = self.geometry.grid, self.geometry.block
        with context(self.ordinal):
            check(cu.cuLaunchKernel(self.function, *g, *b, self.geometry.smem, stream, self._args, 0),
                  f"launch of {self.variant.describe()}")
            if checked_mode():
                check(cu.cuStreamSynchronize(stream), f"kernel {self.variant.describe()}")
