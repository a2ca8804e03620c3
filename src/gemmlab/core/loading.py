"""Loading and compiling for a launch: cubins into the device's primary context (once per module),
the compile a launch needs (refused while the stream captures a CUDA graph), and the array
libraries' current streams. core.launch's plans call these; measure.timing loads its own kernels
through ``load_compiled``."""

from __future__ import annotations

import logging
import threading

from . import packing
from .compile import CompiledKernel
from .deps import require
from .driver import check, context, cuda, device_info, primary_context
from .epilogue import PLAIN, Epilogue
from .variant import Variant, compile_reduce

log = logging.getLogger("gemmlab")
_modules: dict[tuple[int, str, str], tuple[object, object]] = {}   # (ordinal, cache key, entry point)
_modules_lock = threading.Lock()


def load_compiled(ck: CompiledKernel, ordinal: int, what: str | None = None, name: str | None = None):
    """The CUfunction of a compiled kernel on a device, loaded into its primary context once;
    ``name``: another entry point of the same module (rung 18's stream-K tail) instead of ck.name."""
    name = name or ck.name
    key = (ordinal, ck.key, name)
    with _modules_lock:
        hit = _modules.get(key)
    if hit is not None:
        return hit[1]
    cu = cuda()
    with context(ordinal):
        with _modules_lock:
            loaded = next((m for (o, k, _), (m, _f) in _modules.items() if o == ordinal and k == ck.key), None)
        mod = loaded or check(cu.cuModuleLoadData(ck.cubin), f"cuModuleLoadData({what or ck.source})")
        fn = check(cu.cuModuleGetFunction(mod, name.encode()), f"cuModuleGetFunction({name})")
    with _modules_lock:
        _modules[key] = (mod, fn)
    return fn


# CUDA Array Interface v3 stream values with a fixed meaning (the driver takes the same handles)
CAI_LEGACY, CAI_PER_THREAD = 1, 2
# the default stream (0), CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: handles the driver resolves in
# the CURRENT context
SPECIAL_STREAMS = (0, CAI_LEGACY, CAI_PER_THREAD)


def current_context_is(ordinal: int) -> bool:
    """Whether the calling thread's current context is the device's primary context."""
    cu = cuda()
    err, current = cu.cuCtxGetCurrent()
    return err == cu.CUresult.CUDA_SUCCESS and int(current) == int(primary_context(ordinal))


def stream_capturing(stream: int, ordinal: int) -> bool:
    """Whether ``stream`` is capturing a CUDA graph (the legacy stream counts as capturing while
    another stream captures in global mode: the driver then refuses to query it). A stream object,
    or a special handle while the device's primary context is current, is asked directly; else,
    or when the driver refuses the query (no current context), it is asked in that context
    (pushing and popping the context on every call cost several times the query:
    benchmarks/results/h100_host_staged.json). Asked before a compile on the launch path and
    by every texture-rung launch; a staged launch takes its workspace the same way in or out of a
    capture and does not ask."""
    cu = cuda()
    if stream not in SPECIAL_STREAMS or current_context_is(ordinal):
        err, status = cu.cuStreamIsCapturing(stream)
        if err == cu.CUresult.CUDA_SUCCESS:
            return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
    with context(ordinal):
        err, status = cu.cuStreamIsCapturing(stream)
    if err == cu.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return True
    check((err, status), "cuStreamIsCapturing")
    return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def before_compile_hook(what: str, arch: str, capturing):
    """What runs right before a real NVRTC compile on the launch path (see compile_for_launch)."""

    def before_compile() -> None:
        if capturing is not None and capturing():
            raise RuntimeError(
                f"gemmlab: {what} is not compiled yet and the stream is capturing a CUDA graph; "
                f"compile it first with gemmlab.precompile(...) or `gemmlab compile`")
        log.warning("compiling %s for %s (not in the cache: gemmlab.precompile(...) or `gemmlab compile` "
                    "builds it ahead of time)", what, arch)

    return before_compile


def compile_for_launch(variant: Variant, arch: str, capturing=None) -> CompiledKernel:
    """The compiled kernel a launch needs. Served from the memory or disk cache when there; a real
    NVRTC compile is logged (logger ``gemmlab``, WARNING: it takes seconds) and refused with a
    RuntimeError while ``capturing()`` says the launch stream is capturing a CUDA graph."""
    return variant.compile(arch, before_compile=before_compile_hook(variant.describe(), arch, capturing))


def load_reduce(dtype: str, ordinal: int, capturing=None, epilogue: Epilogue = PLAIN):
    """The CUfunction of the split-K reduction for ``dtype`` (with ``epilogue``, the one its
    partial products left out) on a device (``capturing``: see ``compile_for_launch``)."""
    what = f"the split-K reduction [{dtype}{', ' + epilogue.describe() if not epilogue.plain else ''}]"
    return _load_helper(lambda d, a, b: compile_reduce(d, a, b, epilogue), what, dtype, ordinal, capturing)


def load_pack(dtype: str, ordinal: int, capturing=None, kernel: str = packing.KERNEL, split: bool = False,
              batched: bool = False):
    """The CUfunction of the operand pack kernel ``kernel`` (``pack`` or the transposing ``pack_t``;
    ``split``: its version writing two TF32 planes; ``batched``: a batch's copies in one launch) for
    ``dtype`` on a device (``capturing``: see ``compile_for_launch``)."""
    what = f"the operand {kernel}{' (TF32 split)' if split else ''}{' (batched)' if batched else ''} [{dtype}]"
    return _load_helper(lambda d, a, b: packing.compile_pack(d, a, b, kernel, split, batched), what, dtype, ordinal,
                        capturing)


def _load_helper(compile_fn, what: str, dtype: str, ordinal: int, capturing):
    arch = device_info(ordinal).arch
    return load_compiled(compile_fn(dtype, arch, before_compile_hook(what, arch, capturing)), ordinal, what)


def load_function(variant: Variant, ordinal: int, capturing=None):
    """(CUfunction, CompiledKernel) of a variant on a device, compiled and loaded once
    (``capturing``: see ``compile_for_launch``)."""
    ck = compile_for_launch(variant, device_info(ordinal).arch, capturing)
    return load_compiled(ck, ordinal, variant.describe()), ck


# ---- the array libraries' current streams -----------------------------------------------------
def _torch_stream_reader():
    """ordinal -> the raw cudaStream_t of PyTorch's current stream. torch.cuda.current_stream()
    builds a Stream object per call (microseconds); torch._C._cuda_getCurrentRawStream returns
    the handle (Triton's launcher reads it the same way). The public call where it is absent."""
    torch = require("torch")
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda ordinal: torch.cuda.current_stream(ordinal).cuda_stream


def stream_reader(lib: str):
    """ordinal -> the current stream handle of the array library ``lib`` (0, the legacy default
    stream, for a bare ``__cuda_array_interface__`` object)."""
    if lib == "cupy":
        get = require("cupy").cuda.get_current_stream
        return lambda ordinal: get(ordinal).ptr
    if lib == "torch":
        return _torch_stream_reader()
    return lambda ordinal: 0


def current_stream(lib: str, ordinal: int) -> int:
    return int(stream_reader(lib)(ordinal))

