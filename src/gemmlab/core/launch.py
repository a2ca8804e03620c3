"""Launch layer: load cubins into the device's primary context and launch them through the CUDA
driver API (cuda-python), on the caller's current stream.

``Plan`` resolves everything once (variant, cubin, function handle, texture objects, argument
tuple) so that ``Plan.run()`` costs one ``cuLaunchKernel`` (more for a plan that uses a workspace
of ``core.workspace``, taken for the call: first a copy of each operand it packs (``core.packing``), then
the rung's kernel, then for a split-K plan the reduction of its partial products): the benchmark
times plans.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import struct
import threading

from .arch import arch_number
from .compile import CompiledKernel
from .deps import require
from . import packing, tensormaps, textures
from .driver import check, context, cuda, device_info, primary_context
from .dtypes import get as get_dtype
from .problem import GemmProblem, KernelProblem
from .registry import MAX_GRID_Y, Launch, Rung, streamk_workspace, workspace_split
from .epilogue import PLAIN, Epilogue
from .variant import REDUCE_THREADS, SpillError, Variant, compile_reduce, fused_configs, resolve
from . import workspace


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
_CAI_LEGACY, _CAI_PER_THREAD = 1, 2
# the default stream (0), CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: handles the driver resolves in
# the CURRENT context
_SPECIAL_STREAMS = (0, _CAI_LEGACY, _CAI_PER_THREAD)


def _current_context_is(ordinal: int) -> bool:
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
    if stream not in _SPECIAL_STREAMS or _current_context_is(ordinal):
        err, status = cu.cuStreamIsCapturing(stream)
        if err == cu.CUresult.CUDA_SUCCESS:
            return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
    with context(ordinal):
        err, status = cu.cuStreamIsCapturing(stream)
    if err == cu.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return True
    check((err, status), "cuStreamIsCapturing")
    return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def _before_compile(what: str, arch: str, capturing):
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
    return variant.compile(arch, before_compile=_before_compile(variant.describe(), arch, capturing))


def load_reduce(dtype: str, ordinal: int, capturing=None, epilogue: Epilogue = PLAIN):
    """The CUfunction of the split-K reduction for ``dtype`` (with ``epilogue``, the one its
    partial products left out) on a device (``capturing``: see ``compile_for_launch``)."""
    what = f"the split-K reduction [{dtype}{', ' + epilogue.describe() if not epilogue.plain else ''}]"
    arch = device_info(ordinal).arch
    return load_compiled(compile_reduce(dtype, arch, _before_compile(what, arch, capturing), epilogue), ordinal, what)


def load_pack(dtype: str, ordinal: int, capturing=None, kernel: str = packing.KERNEL, split: bool = False):
    """The CUfunction of the operand pack kernel ``kernel`` (``pack`` or the transposing ``pack_t``;
    ``split``: its version writing two TF32 planes) for ``dtype`` on a device (``capturing``: see
    ``compile_for_launch``)."""
    what = f"the operand {kernel}{' (TF32 split)' if split else ''} [{dtype}]"
    return _load_helper(lambda d, a, b: packing.compile_pack(d, a, b, kernel, split), what, dtype, ordinal, capturing)


def _load_helper(compile_fn, what: str, dtype: str, ordinal: int, capturing):
    arch = device_info(ordinal).arch
    return load_compiled(compile_fn(dtype, arch, _before_compile(what, arch, capturing)), ordinal, what)


def load_function(variant: Variant, ordinal: int, capturing=None):
    """(CUfunction, CompiledKernel) of a variant on a device, compiled and loaded once
    (``capturing``: see ``compile_for_launch``)."""
    ck = compile_for_launch(variant, device_info(ordinal).arch, capturing)
    return load_compiled(ck, ordinal, variant.describe()), ck


# ---- launching ------------------------------------------------------------------------------
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


# GEMMLAB_CHECK=1: synchronize after every launch and raise on asynchronous errors (read once)
CHECKED = os.environ.get("GEMMLAB_CHECK", "") not in ("", "0")

# GEMMLAB_PDL=0: launch the split-K reduction after its partial products, and a plan's second copy
# and its rung's kernel after operand copies, the ordinary way instead of with programmatic stream
# serialization (sm_90+; read once)
PDL = os.environ.get("GEMMLAB_PDL", "") != "0"
PDL_ARCH = 90   # programmatic dependent launch (griddepcontrol): sm_90 and newer

def _same_stream(producer: int, launch: int) -> bool:
    return producer == launch or {producer, launch} == {0, _CAI_LEGACY}


class _Params:
    """A persistent kernel parameter block, updated in place between launches: one buffer holds
    every argument, laid out so that what changes per call (the three pointers, alpha, beta)
    is one contiguous ``struct`` pack, and the void* array cuLaunchKernel reads (passed by
    address) points into it in the kernel's argument order (kernels/common.cuh). The extras
    after the standard arguments: two texture objects with their element offsets (the texture
    rungs), or two or three 128-byte tensor maps (the TMA rungs: A and B, and C for a rung with a
    store map; the driver copies them by value); then a stream-K kernel's workspace pointer, and
    last the bias pointer of a fused bias (kernels/epilogue.cuh, GL_EPI_PARAMS)."""

    # byte offsets in the buffer, in the kernel's argument order
    _ORDER = (32, 36, 40, 24, 0, 44, 8, 48, 28, 16, 52)   # M N K alpha A lda B ldb beta C ldc
    _TEX_ORDER = (56, 64, 72, 80)                          # texA offA texB offB
    _TMAP_ORDER = (128, 256, 384)                          # tmA tmB [tmC] (128 bytes each)
    # then, for a stream-K kernel (STREAMK=1), its workspace pointer right after the maps
    _SHAPE = struct.Struct("<6i")                          # M N K lda ldb ldc at byte 32
    _CALL = struct.Struct("<QQQff")                        # A B C alpha beta at byte 0
    _TEX = struct.Struct("<QqQq")                          # at byte 56

    __slots__ = ("buffer", "array", "address", "pack", "_ws_at", "bias_at")

    def __init__(self, kp: KernelProblem, textured: bool, maps: int = 0, workspace: bool = False, bias: bool = False):
        order = self._ORDER + (self._TEX_ORDER if textured else ()) + self._TMAP_ORDER[:maps]
        size = 128 + 128 * maps if maps else 88
        self._ws_at = size if workspace else None
        if workspace:
            order, size = order + (size,), size + 8
        self.bias_at = size if bias else None
        if bias:
            order, size = order + (size,), size + 8
        self.buffer = ctypes.create_string_buffer(size)
        base = ctypes.addressof(self.buffer)
        self.array = (ctypes.c_void_p * len(order))(*[base + off for off in order])
        self.address = ctypes.addressof(self.array)
        self._SHAPE.pack_into(self.buffer, 32, kp.M, kp.N, kp.K, kp.lda, kp.ldb, kp.ldc)
        self.pack = self._CALL.pack_into

    def textures(self, ta, oa, tb, ob) -> None:
        self._TEX.pack_into(self.buffer, 56, ta, oa, tb, ob)

    def tensor_maps(self, ma: bytes | None, mb: bytes | None, mc: bytes | None = None) -> None:
        """The maps of A, B and C (None: that operand has none; its 128 bytes are left as they are,
        the kernel's variant does not read them)."""
        if ma is not None:
            self.buffer[128:256] = ma
        if mb is not None:
            self.buffer[256:384] = mb
        if mc is not None:
            self.buffer[384:512] = mc

    def workspace(self, ptr: int) -> None:
        """The stream-K workspace pointer (a block made with ``workspace=True``)."""
        struct.pack_into("<Q", self.buffer, self._ws_at, ptr)

    def bias(self, ptr: int) -> None:
        """The bias pointer (a block made with ``bias=True``)."""
        struct.pack_into("<Q", self.buffer, self.bias_at, ptr)

    def ldc(self, value: int) -> None:
        """The leading dimension of what the kernel writes (split-K: the workspace's row length)."""
        struct.pack_into("<i", self.buffer, 52, value)


class _HelperParams:
    """The persistent parameter block of a helper kernel: what changes per call (pointers, and
    alpha and beta) is one ``struct`` pack at byte 0, the fixed int arguments follow it, and the
    void* array points into the buffer in the kernel's argument order."""

    __slots__ = ("buffer", "array", "address", "pack")

    def __init__(self, call: struct.Struct, order: tuple[int, ...], ints: tuple[int, ...]):
        self.buffer = ctypes.create_string_buffer(call.size + 4 * len(ints))
        base = ctypes.addressof(self.buffer)
        self.array = (ctypes.c_void_p * len(order))(*[base + off for off in order])
        self.address = ctypes.addressof(self.array)
        struct.pack_into(f"<{len(ints)}i", self.buffer, call.size, *ints)
        self.pack = call.pack_into


REDUCE_BIAS_AT = 40


def _reduce_params(M: int, N: int, splits: int, ldc: int, bias: bool = False) -> _HelperParams:
    """kernels/splitk_reduce.cu (M N S W alpha beta C ldc [bias]); per call W C alpha beta [bias]."""
    if bias:   # its pointer after the ints, at byte 40 (two zero ints make its 8 bytes): REDUCE_BIAS_AT
        return _HelperParams(struct.Struct("<QQff"), (24, 28, 32, 0, 16, 20, 8, 36, REDUCE_BIAS_AT),
                             (M, N, splits, ldc, 0, 0))
    return _HelperParams(struct.Struct("<QQff"), (24, 28, 32, 0, 16, 20, 8, 36), (M, N, splits, ldc))


def _pack_params(p: packing.Pack) -> _HelperParams:
    """kernels/pack.cu (outer inner src ld dst ldp); per call src dst."""
    return _HelperParams(struct.Struct("<QQ"), (16, 20, 0, 24, 8, 28), (p.outer, p.inner, p.ld, p.ld_packed))


def _f32(x: float) -> float:
    """x as the kernel's float argument receives it (out of range: +-inf, as a C cast gives)."""
    return ctypes.c_float(x).value


def _fill(block, *args) -> None:
    """The per-call ``struct`` pack of a parameter block whose last two arguments are alpha and
    beta (out of float range: as the kernel's float receives them)."""
    try:
        block.pack(block.buffer, 0, *args)
    except OverflowError:
        block.pack(block.buffer, 0, *args[:-2], _f32(args[-2]), _f32(args[-1]))


class Plan:
    """One rung on one problem, ready to launch: ``run()`` is a single cuLaunchKernel (split-K:
    two, the rung's kernel writing FP32 partial products to a workspace, then the
    deterministic reduction into C, on sm_90 a cuLaunchKernelEx with programmatic stream
    serialization (``_pdl_config``); PACK=1 with an operand the 16-byte path cannot read: one
    launch more per such operand, its copy into the workspace, before the rung's kernel; a cluster
    split, SKCLUSTER=1: one cuLaunchKernelEx with the cluster scheduling policy, no workspace).

    Everything is resolved once: the variant, its function, the geometry and a persistent
    parameter block. ``launch(a_ptr, b_ptr, c_ptr, alpha, beta)`` reuses the plan for other
    operands of the same shapes, strides, dtype and alignment class (gemmlab.gemm's fast path).
    ``twin``: the variant's store twin (``Variant.store_twin``; rung 21, a single-launch plan whose
    every call with beta == 0 stores by TMA), launched for those calls, or None. Loading it adds
    a second, smaller NVRTC compile to the plan's first one (cached like every variant).

    A plan keeps its operands' pointers, shapes and strides, never the arrays themselves, so a
    remembered plan (the fast path's) does not keep a caller's memory alive. ``operands``: the
    arrays a plan made by ``gemmlab.plan(...)`` holds for its ``run()`` (None for the others).
    """

    operands = None
    # cuLaunchKernelEx configurations with programmatic stream serialization (_init_staged), or None:
    # split-K's reduction, the rung's kernel after operand copies
    _reduce_ex = _gemm_ex = None

    def __init__(self, problem: GemmProblem, rung: Rung, config=None, stream: int | None = None, choice=None,
                 precision: str | None = None, epilogue: Epilogue = PLAIN, bias_ptr: int = 0):
        self.problem = problem
        # the fused epilogue (core/epilogue.py); with a bias, each launch passes its pointer (``bias``)
        self.epilogue = epilogue
        self._bias = epilogue.bias is not None
        self._bias_ptr = bias_ptr   # run()'s
        self.rung = rung
        self.choice = choice    # core.dispatch's Choice: rung, configuration, source and why
        kp: KernelProblem = problem.kernel_view()
        self.kp = kp
        self.ordinal = problem.c.device
        info = device_info(self.ordinal)
        rung.require(problem.dtype, info.arch, precision)
        self._stream_of = self._default_stream(problem)
        self._producers = tuple({x.stream for x in (problem.a, problem.b, problem.c) if x.stream is not None})
        self._lock = threading.Lock()
        vec_a, vec_b, tex_args = kp.vec_a, kp.vec_b, []
        if rung.textures:
            textures.LOCK.acquire()   # each launch looks the objects up again under the lock
            try:
                vec_a, vec_b, tex_args = self._bind_textures(problem, kp)
            finally:
                textures.LOCK.release()
        # PACK=1: the operands without 16-byte access are copied first (core/packing.py); the
        # kernel reads the copies, with their leading dimensions and its 16-byte variant
        # a k_major rung (22): its MN-major or unaligned operands are always copied, MN-major ones transposed;
        # a rung reading two planes per operand (22 in 3xtf32): both operands always, split into TF32 parts
        # a rung reading A from registers (22 in tf32): row-major A and B computed as C^T = B^T A^T
        # (kp.c_col), the operands' pointers swapped at each launch (_swapped)
        def capturing() -> bool:  # asked only when the variant needs a real compile
            return stream_capturing(self._stream_of(self.ordinal) if stream is None else stream, self.ordinal)

        res = resolve(rung, problem.dtype, kp, config, precision, info.sm_count, vec_a, vec_b, epilogue)
        if not epilogue.plain:
            res = self._fused_fallback(res, rung, kp, config, precision, info, vec_a, vec_b, capturing)
        self.packs, self.kp, self.geometry = res.packs, res.kp, res.geometry
        self.variant = res.variant   # the split-K, tall-grid or stream-K build of the geometry
        kp = self.kp
        rung.check_resources(self.variant.cfg, info.limits, self.variant.precision)
        # split-K is the configuration's, not the slice count's: SPLITK=4 over a K of one BK tile
        # is ONE slice, and still the split variant (FP32 partials into the workspace, then the
        # reduction applies alpha and beta); launching it as a plain kernel wrote FP32 partials
        # into C (H100, tests/test_configs.py: NaN at 131x67x45 with BK=64, SPLITK=4)
        # SKCLUSTER=1: the slices sum in their cluster (kernels/common.cuh), one launch into C
        self._cluster_split = bool(self.variant.cfg.get("SKCLUSTER"))
        split = self._split = workspace_split(self.variant.cfg)
        self.splits = self.geometry.grid[2] if split or self._cluster_split else 1   # K slices, else 1
        # STREAMK=1 with a partial last wave (registry.streamk_tail; otherwise for_geometry gave the
        # STREAMK=0 kernel): its pieces meet in the stream's workspace, whose flags are zeroed first
        self._streamk = bool(self.variant.cfg.get("STREAMK"))
        self.function, self.compiled = load_function(self.variant, self.ordinal, capturing)
        cu = cuda()
        self._opt_in_smem(self.function, info.limits)
        self._params = _Params(kp, bool(tex_args), (3 if rung.store_map else 2) if rung.tensor_maps else 0,
                               self._streamk, self._bias)
        if tex_args:
            self._params.textures(*tex_args)
        self._maps = self._map_args(problem.dtype) if rung.tensor_maps else None
        self._map_c = self._maps is not None and self._maps[2] is not None   # a launch on a new C remaps
        self._mapped = (None, None, None)   # the pointers whose tensor maps the parameter block holds
        if self._maps is not None and not self.packs:   # a packed operand's map is of its copy: at launch
            self._remap(kp.a_ptr, kp.b_ptr, kp.c_ptr)
        self._launch_head = (self.function, *self.geometry.grid, *self.geometry.block, self.geometry.smem)
        self._load_twin(info, capturing)
        self._tail_head = self._streamk_tail(info.limits) if self._streamk and self.geometry.streamk else None
        self._cu = cu
        self._ex = self._cluster_config() if self._cluster_split else None
        if split or self.packs or self._streamk:
            self._init_staged(kp, split, capturing)
        elif self._ex is not None:
            self.launch = self._launch_clustered
        # the kernel computes C^T = B^T A^T (packing.for_kernel): a launch's A and B trade places,
        # so its callers keep passing the kernel view's (fastpath.py)
        self._swapped = kp.c_col
        if self._swapped:
            self.launch = functools.partial(_swap_ab, self.launch)

    def _fused_fallback(self, res, rung, kp, config, precision, info, vec_a, vec_b, capturing):
        """``res`` (a ``resolve`` with a fused epilogue), or where its build spills the first
        configuration of ``variant.fused_configs`` whose build does not (the compile is cached:
        load_function finds it); the last one's SpillError where none does."""
        configs = fused_configs(rung, config, res.variant.precision)
        for i, cfg in enumerate(configs):
            r = res if i == 0 else resolve(rung, self.problem.dtype, kp, cfg, precision, info.sm_count, vec_a, vec_b,
                                           res.variant.epilogue)
            try:
                compile_for_launch(r.variant, info.arch, capturing)
                return r
            except SpillError:
                if i == len(configs) - 1:
                    raise
        return res

    def _opt_in_smem(self, function, limits) -> None:
        """More than 48 KB of dynamic shared memory needs the function's opt-in."""
        if self.geometry.smem > limits.default_smem_per_block:
            cu = cuda()
            check(cu.cuFuncSetAttribute(function, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        self.geometry.smem), "cuFuncSetAttribute")

    def _load_twin(self, info, capturing) -> None:
        """The store twin (Rung.store_twin, ``twin``): the same kernel with only the TMA store's
        epilogue, launched for the calls that store through TMA (beta == 0). A plan with operand
        copies, split-K, stream-K or a cluster split launches through its own paths and keeps the
        one build."""
        self.twin = self._twin_head = None
        plain = not (self._split or self.packs or self._streamk or self._cluster_split)
        if plain and self._maps is not None and self._maps[2] is not None:
            self.twin = self.variant.store_twin(self.kp.N)
        if self.twin is not None:
            try:
                function, _ = load_function(self.twin, self.ordinal, capturing)
            except SpillError:   # (a fused epilogue's twin, in principle): the full build serves every call
                self.twin = None
                return
            self._opt_in_smem(function, info.limits)
            self._twin_head = (function, *self._launch_head[1:])

    def _streamk_tail(self, limits):
        """A non-persistent rung's stream-K launch (Launch.streamk, rung 18): the whole tiles on
        grid (G, dp/G), then its tail kernel on (G, 1). Sets the first launch's head and returns
        the tail's, or None when there is no whole wave (the tail alone is the first launch)."""
        g, block, smem = self.geometry.grid, self.geometry.block, self.geometry.smem
        tail = load_compiled(self.compiled, self.ordinal, self.variant.describe(), self.rung.tail_kernel)
        self._opt_in_smem(tail, limits)
        head = (tail, g[0], 1, 1, *block, smem)
        if g[1] == 1:
            self._launch_head = head
            return None
        self._launch_head = (self.function, g[0], g[1] - 1, 1, *block, smem)
        return head

    @property
    def kernel_params(self) -> int:
        """The address of the kernel's argument array (cuLaunchKernel's kernelParams) as the last
        launch left it: for launching the plan's kernel by other means (tools/cluster_policy_probe.py)."""
        return self._params.address

    def _cluster_config(self):
        """The cuLaunchKernelEx configuration of a cluster split (SKCLUSTER=1): the geometry, and
        the load-balancing cluster scheduling policy. Under the default (spread) policy the H100
        holds only 124 clusters of 4 blocks of the 1024^3 tile (64x128, 4 blocks per SM by
        registers) at once: 128 clusters ran in two waves, 82.9 us; load-balancing holds 132 and
        ran them in one, 54.4 us (cuOccupancyMaxActiveClusters and CUDA events, H100 80GB HBM3,
        benchmarks/results/h100_cluster_policy_probe.json)."""
        cu = self._cu
        policy = cu.CUlaunchAttribute()
        policy.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
        policy.value.clusterSchedulingPolicyPreference = \
            cu.CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING
        return self._ex_config(self._launch_head, policy)

    def _ex_config(self, head, attribute):
        """The cuLaunchKernelEx configuration of a launch ``head`` (function, grid, block, shared
        memory) with one launch ``attribute``."""
        lc = self._cu.CUlaunchConfig()
        lc.gridDimX, lc.gridDimY, lc.gridDimZ = head[1:4]
        lc.blockDimX, lc.blockDimY, lc.blockDimZ = head[4:7]
        lc.sharedMemBytes = head[7]
        lc.attrs, lc.numAttrs = [attribute], 1
        return lc

    def _init_staged(self, kp: KernelProblem, split: bool, capturing) -> None:
        """A plan that uses a workspace (core/workspace.py; each call takes its own at launch): the
        copies of the packed operands, then, split-K, the partial products (the kernel writes them
        with ld N), the helper kernels and their parameter blocks; ``launch`` becomes the staged
        launch."""
        dtype = self.problem.dtype
        self._pack_heads = [(load_pack(dtype, self.ordinal, capturing, p.kernel, p.planes > 1), *p.grid(), p.threads,
                             1, 1, 0) for p in self.packs]
        self._pack_blocks = [_pack_params(p) for p in self.packs]
        # sm_90: a second copy, and the rung's kernel right after a copy, programmatically serialized
        # (_pdl_config): each waits for the kernel before it in its first instruction (gl_pdl_wait);
        # not after stream-K's memset of its flags, nor with a cluster split's own launch
        self._pdl = PDL and arch_number(device_info(self.ordinal).arch) >= PDL_ARCH
        self._pack_ex = [None] + [self._pdl_config(h) if self._pdl else None for h in self._pack_heads[1:]]
        self._gemm_ex = (self._pdl_config(self._launch_head) if self._pdl and self.packs and self._ex is None
                         and not self._streamk else None)
        # after the copies: split-K's partial products, or stream-K's pieces and flags
        self._sk_flags = None
        extra = self.splits * kp.M * kp.N * 4 if split else 0
        if self._streamk:
            self._sk_flags, extra = streamk_workspace(self.variant.cfg, self.geometry.grid[0],
                                                      self.rung.streamk_warps(self.variant.cfg))
            self._sk_count = (extra - self._sk_flags) // 4     # the flags: 4-byte ints
        self._split_offset, self.workspace_bytes = packing.layout(self.packs, extra)
        if split:
            self._params.ldc(kp.N)
            fn = load_reduce(dtype, self.ordinal, capturing, self.epilogue)
            self._reduce = _reduce_params(kp.M, kp.N, self.splits, kp.ldc, self._bias)
            grid = (-(-kp.N // REDUCE_THREADS), min(kp.M, MAX_GRID_Y), 1)
            self._reduce_head = (fn, *grid, REDUCE_THREADS, 1, 1, 0)
            self._reduce_ex = self._pdl_config(self._reduce_head) if self._pdl else None
        self.launch = self._launch_staged

    def __repr__(self) -> str:
        p = self.problem
        why = f"; {self.choice.source}: {self.choice.reason}" if self.choice is not None else ""
        split = (f", split-K {self.splits} slices" + (" summed in a cluster" if self._cluster_split else "")
                 + (", their reduction launched programmatically after them" if self._reduce_ex is not None else "")
                 if self.splits > 1 else "")
        if self._streamk:
            split += ", stream-K last wave"
        packs = (f", {packing.describe(self.packs)}"
                 + (", the kernel after them launched programmatically" if self._gemm_ex is not None else "")
                 if self.packs else "")
        return f"Plan({p.dtype} {p.M}x{p.N}x{p.K}: {self.variant.describe()}{split}{packs}{why})"

    @staticmethod
    def _default_stream(problem: GemmProblem):
        """ordinal -> the stream a launch goes to: the current stream of C's library; for a bare
        ``__cuda_array_interface__`` C, the stream it names (else the legacy default stream)."""
        c = problem.c
        if c.lib == "cai":
            s = 0 if c.stream in (None, _CAI_LEGACY) else c.stream
            return lambda ordinal: s
        return stream_reader(c.lib)

    def _bind_textures(self, problem: GemmProblem, kp: KernelProblem):
        """(vec_a, vec_b, texture arguments) for a texture rung; float4 texels only for a rung
        that fetches float4, and only where 16-byte access is legal. Call with textures.LOCK."""
        a_info, b_info = (problem.a, problem.b) if not problem.c.col_major else (problem.b, problem.a)
        isz = get_dtype(problem.dtype).itemsize
        self._spans = (a_info.span_elements * isz, b_info.span_elements * isz)
        self._want = (self.rung.textures if kp.vec_a else 1, self.rung.textures if kp.vec_b else 1)
        ta = textures.acquire(kp.a_ptr, self._spans[0], self._want[0], self.ordinal)
        tb = textures.acquire(kp.b_ptr, self._spans[1], self._want[1], self.ordinal)
        vec_a, vec_b = kp.vec_a, kp.vec_b
        if self.rung.textures == 4:
            vec_a, vec_b = ta.channels == 4, tb.channels == 4
        self._channels = (ta.channels, tb.channels)
        return vec_a, vec_b, [ta.handle, ta.offset, tb.handle, tb.offset]

    def _map_args(self, dtype: str):
        """The tensor-map arguments of A, B and C (None for an operand TMA cannot describe: the
        variant copies it with threads, see kernels/19_wgmma_tma.cu; C's only for a rung with a
        store map whose EPI_TMA is on, where 16-byte access of C is legal and TMA can store it)."""
        kp, cfg = self.kp, self.variant.cfg
        split = {p.operand: (p.planes, p.plane_bytes) for p in self.packs if p.planes > 1}   # 3-D maps of two planes
        a = (tensormaps.operand_map("A", kp.M, kp.K, kp.lda, kp.a_col, dtype, cfg, *split.get("A", ()))
             if self.variant.vec_a else None)
        b = (tensormaps.operand_map("B", kp.K, kp.N, kp.ldb, kp.b_col, dtype, cfg, *split.get("B", ()))
             if self.variant.vec_b else None)
        rows, cols = (kp.N, kp.M) if kp.c_col else (kp.M, kp.N)   # a column-major C: its columns are the map's rows
        c = (tensormaps.output_map(rows, cols, kp.ldc, dtype, self.rung.store_box)
             if self.rung.store_map and cfg.get("EPI_TMA") and self.variant.vec_c
             and tensormaps.storable(cols, kp.ldc, dtype) else None)
        return a, b, c

    # ---- launching ------------------------------------------------------------------------
    def run(self, stream: int | None = None) -> None:
        """Launch on ``stream`` (default: the current stream of C's library) with the plan's own
        operands."""
        kp = self.kp
        a_ptr, b_ptr = (kp.b_ptr, kp.a_ptr) if self._swapped else (kp.a_ptr, kp.b_ptr)   # the kernel view's
        if not self.launch(a_ptr, b_ptr, kp.c_ptr, kp.alpha, kp.beta, stream, self._bias_ptr):
            raise RuntimeError(f"{self.variant.describe()}: the operands' texture extent changed since the plan was made")

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
               stream: int | None = None, bias: int = 0) -> bool:
        """Launch on other operands (the kernel's view: A, B, C after any transposition) of the
        plan's shapes, strides and alignment class; ``bias``: the bias vector's pointer of a plan
        whose epilogue has one. False, launching nothing, when a texture rung would need another
        variant for them (the caller then makes a new plan).
        The path of gemmlab.gemm's every call: kept flat (each Python call costs ~0.1 us)."""
        if stream is None:
            stream = self._stream_of(self.ordinal)
        if self._producers:
            self._wait_for_producers(stream)
        if self.rung.textures:
            with textures.LOCK:
                return self._launch_textured(a_ptr, b_ptr, c_ptr, alpha, beta, stream, bias)
        params = self._params
        with self._lock:
            try:
                params.pack(params.buffer, 0, a_ptr, b_ptr, c_ptr, alpha, beta)
            except OverflowError:
                params.pack(params.buffer, 0, a_ptr, b_ptr, c_ptr, _f32(alpha), _f32(beta))
            if self._bias:
                params.bias(bias)
            if self._maps is not None and (a_ptr != self._mapped[0] or b_ptr != self._mapped[1]
                                           or (self._map_c and c_ptr != self._mapped[2])):
                self._remap(a_ptr, b_ptr, c_ptr)
            # beta == 0 (and -0.0) on a plan with a store twin: the twin (its kernel stores only by TMA)
            head = self._launch_head if beta or self._twin_head is None else self._twin_head
            err = self._cu.cuLaunchKernel(*head, stream, params.address, 0)[0]
            if err or CHECKED:
                self._after_launch(err, stream, head, params.address, self._ex)
        return True

    def _remap(self, a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        """The tensor maps of new operand pointers into the parameter block (call with the plan's
        lock): the encoded maps (cached: a dict lookup once seen) of the operands that have one.
        The block holds the maps of the last pointers, so the launches look maps up only when the
        pointers change (hashing the map arguments and copying 128 bytes a map is microseconds)."""
        cache, ordinal = tensormaps.CACHE, self.ordinal
        self._params.tensor_maps(*(None if args is None else cache.acquire(ordinal, ptr, args)
                                   for args, ptr in zip(self._maps, (a_ptr, b_ptr, c_ptr))))
        self._mapped = (a_ptr, b_ptr, c_ptr)

    def _launch_staged(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
                       stream: int | None = None, bias: int = 0) -> bool:
        """``launch`` of a plan that uses a workspace (core/workspace.py), taken for this call on its
        stream and given back after its last kernel: the copy of each packed operand into it, the
        rung's kernel on the copies (split-K: into its partial products, ignoring alpha and beta),
        then split-K's reduction into C. A default-stream handle names the current context's
        stream: while another context is current, all of it runs in the plan's."""
        if stream is None:
            stream = self._stream_of(self.ordinal)
        if self._producers:
            self._wait_for_producers(stream)
        if stream in _SPECIAL_STREAMS and not _current_context_is(self.ordinal):
            with context(self.ordinal):
                self._staged(a_ptr, b_ptr, c_ptr, alpha, beta, stream, bias)
        else:
            self._staged(a_ptr, b_ptr, c_ptr, alpha, beta, stream, bias)
        return True

    def _staged(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float, stream: int, bias: int) -> None:
        ws = workspace.acquire(self.ordinal, stream, self.workspace_bytes)
        try:
            region = packing.base(ws) if self.packs else ws
            with self._lock:
                for p, head, block, ex in zip(self.packs, self._pack_heads, self._pack_blocks, self._pack_ex):
                    block.pack(block.buffer, 0, a_ptr if p.operand == "A" else b_ptr, region + p.offset)
                    self._launch_ex(stream, ex, head, block.address)
                    if p.operand == "A":
                        a_ptr = region + p.offset
                    else:
                        b_ptr = region + p.offset
                split = self._split
                _fill(self._params, a_ptr, b_ptr, region + self._split_offset if split else c_ptr, alpha, beta)
                if self._bias:
                    self._params.bias(bias)
                if self._sk_flags is not None:   # stream-K: the workspace, its flags zeroed before the kernel
                    self._params.workspace(region + self._split_offset)
                    self._zero_flags(region + self._split_offset + self._sk_flags, stream)
                if self._maps is not None and (a_ptr != self._mapped[0] or b_ptr != self._mapped[1]
                                               or (self._map_c and c_ptr != self._mapped[2])):
                    self._remap(a_ptr, b_ptr, c_ptr)   # the maps of these operands (a packed one's: of its copy)
                self._launch_ex(stream, self._ex if self._gemm_ex is None else self._gemm_ex, self._launch_head,
                                self._params.address)
                if self._tail_head is not None:   # rung 18's stream-K tail, after its whole tiles
                    self._launch(stream, self._tail_head, self._params.address)
                if split:
                    _fill(self._reduce, region + self._split_offset, c_ptr, alpha, beta)
                    if self._bias:
                        struct.pack_into("<Q", self._reduce.buffer, REDUCE_BIAS_AT, bias)
                    self._launch_ex(stream, self._reduce_ex, self._reduce_head, self._reduce.address)
        finally:
            workspace.release(self.ordinal, stream, ws)

    def _pdl_config(self, head):
        """The cuLaunchKernelEx configuration of a launch ``head`` (function, grid, block, shared
        memory) with programmatic stream serialization: the driver may schedule it while the kernel
        before it on the stream finishes; the kernel waits for that one's grid in gl_pdl_wait
        (the split-K reduction after the partial products, the GEMM and a second copy after a pack)."""
        cu = self._cu
        pdl = cu.CUlaunchAttribute()
        pdl.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        pdl.value.programmaticStreamSerializationAllowed = 1
        return self._ex_config(head, pdl)

    def _launch_ex(self, stream: int, config, head, address: int) -> None:
        """One launch of ``head`` with the parameter array at ``address`` (call with the plan's
        lock): cuLaunchKernelEx with ``config`` (``_ex_config``), or cuLaunchKernel without one."""
        if config is None:
            err = self._cu.cuLaunchKernel(*head, stream, address, 0)[0]
        else:
            config.hStream = stream
            err = self._cu.cuLaunchKernelEx(config, head[0], address, 0)[0]
        if err or CHECKED:
            self._after_launch(err, stream, head, address, config)

    def _zero_flags(self, ptr: int, stream: int) -> None:
        """cuMemsetD32Async of the stream-K flags (one int per block and consumer warp) on ``stream``
        (a memset node when the stream captures); in the plan's context when none is current."""
        err = self._cu.cuMemsetD32Async(ptr, 0, self._sk_count, stream)[0]
        if err:
            with context(self.ordinal):
                check(self._cu.cuMemsetD32Async(ptr, 0, self._sk_count, stream), "cuMemsetD32Async of the stream-K flags")

    def _launch_clustered(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
                          stream: int | None = None, bias: int = 0) -> bool:
        """``launch`` of a cluster split without packed operands: one cuLaunchKernelEx (``_launch``)."""
        if stream is None:
            stream = self._stream_of(self.ordinal)
        if self._producers:
            self._wait_for_producers(stream)
        with self._lock:
            _fill(self._params, a_ptr, b_ptr, c_ptr, alpha, beta)
            if self._bias:
                self._params.bias(bias)
            self._launch(stream)
        return True

    def _launch_textured(self, a_ptr, b_ptr, c_ptr, alpha, beta, stream, bias=0) -> bool:
        ta = textures.acquire(a_ptr, self._spans[0], self._want[0], self.ordinal)
        tb = textures.acquire(b_ptr, self._spans[1], self._want[1], self.ordinal)
        if (ta.channels, tb.channels) != self._channels:
            return False
        params = self._params
        with self._lock:
            params.pack(params.buffer, 0, a_ptr, b_ptr, c_ptr, _f32(alpha), _f32(beta))
            params.textures(ta.handle, ta.offset, tb.handle, tb.offset)
            if self._bias:
                params.bias(bias)
            self._launch(stream)
        textures.used((ta, tb), stream, self.ordinal, stream_capturing(stream, self.ordinal))
        return True

    def _launch(self, stream: int, head=None, address=None) -> None:
        """One launch: the plan's kernel (a cluster split's with its scheduling policy), or ``head``
        with the parameter array at ``address``."""
        if head is None:
            self._launch_ex(stream, self._ex, self._launch_head, self._params.address)
        else:
            self._launch_ex(stream, None, head, address)

    def _after_launch(self, err, stream: int, head, address, config) -> None:
        """A launch (``head``, its arguments at ``address``, its cuLaunchKernelEx ``config`` or
        None) that failed, or GEMMLAB_CHECK. The launch goes out without asking which
        context is current (CuPy and PyTorch keep the primary one current; the query cost a
        fifth of a microsecond per call): a function of another context is refused by the
        driver with INVALID_HANDLE (INVALID_CONTEXT with none current) and launches nothing,
        so that case pushes the plan's context and launches the same again."""
        cu = self._cu
        if err in (cu.CUresult.CUDA_ERROR_INVALID_HANDLE, cu.CUresult.CUDA_ERROR_INVALID_CONTEXT):
            with context(self.ordinal):
                err = (cu.cuLaunchKernelEx(config, head[0], address, 0)[0] if config is not None else
                       cu.cuLaunchKernel(*head, stream, address, 0)[0])
        if err:
            check((err,), f"launch of {self.variant.describe()}")
        if CHECKED:
            with context(self.ordinal):
                check(cu.cuStreamSynchronize(stream), f"kernel {self.variant.describe()}")

    def _wait_for_producers(self, stream: int) -> None:
        """CUDA Array Interface v3: work pending on an operand's producer stream finishes before
        the kernel reads it (an event on that stream, waited for on the launch stream)."""
        cu = self._cu
        with context(self.ordinal), _events_lock:   # one thread's record-then-wait at a time
            for producer in self._producers:
                if _same_stream(producer, stream):
                    continue
                ev = _sync_event(self.ordinal)
                check(cu.cuEventRecord(ev, producer), "cuEventRecord on the operand's stream")
                check(cu.cuStreamWaitEvent(stream, ev, 0), "cuStreamWaitEvent")


def _swap_ab(launch, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float, stream: int | None = None,
             bias: int = 0) -> bool:
    """``launch`` of a plan whose kernel computes the transposed problem: its A is the view's B."""
    return launch(b_ptr, a_ptr, c_ptr, alpha, beta, stream, bias)


_events: dict[int, object] = {}
_events_lock = threading.Lock()


def _sync_event(ordinal: int):
    """One reusable event per device for stream-to-stream ordering (a wait copies the event's
    state when it is enqueued, so the event may be recorded again right after)."""
    ev = _events.get(ordinal)
    if ev is None:
        cu = cuda()
        ev = _events[ordinal] = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    return ev
