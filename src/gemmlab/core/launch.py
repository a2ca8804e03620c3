"""Launch layer: launch compiled kernels through the CUDA driver API (cuda-python), on the caller's
current stream (core.loading loads them, core.params holds their argument blocks).

``Plan`` resolves everything once (variant, cubin, function handle, texture objects, argument
tuple) so that ``Plan.run()`` costs one ``cuLaunchKernel`` (more for a plan that uses a workspace
of ``core.workspace``, taken for the call: first a copy of each operand it packs (``core.packing``), then
the rung's kernel, then for a split-K plan the reduction of its partial products): the benchmark
times plans.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from dataclasses import replace

from . import launch_modes, packing, tensormaps, textures, workspace
from .driver import check, context, cuda, device_info
from .dtypes import get as get_dtype
from .epilogue import PLAIN, Epilogue
from .groups import GROUP_BOX_ROWS, MAPS_KERNEL, Groups
from .launch_modes import CHECKED
from .loading import (CAI_LEGACY, compile_for_launch, current_stream, load_compiled,  # noqa: F401 (re-exported)
                      load_function, stream_capturing, stream_reader)
from .params import Params
from .problem import GemmProblem, KernelProblem
from .registry import Rung, workspace_split
from .variant import SpillError, fused_configs, resolve


# GEMMLAB_PDL=0: launch the split-K reduction after its partial products, and a plan's second copy
# and its rung's kernel after operand copies, the ordinary way instead of with programmatic stream
# serialization (sm_90+; read once)
PDL = os.environ.get("GEMMLAB_PDL", "") != "0"


def _same_stream(producer: int, launch: int) -> bool:
    return producer == launch or {producer, launch} == {0, CAI_LEGACY}


def _formats(problem: GemmProblem) -> tuple:
    """FP8 operands' formats in the kernel's order (a column-major C's kernel computes C^T = B^T A^T);
    () for the other dtypes."""
    if problem.dtype != "fp8":
        return ()
    return (problem.b.fmt, problem.a.fmt) if problem.c.col_major else (problem.a.fmt, problem.b.fmt)


def _scale_ptrs(problem: GemmProblem, epilogue: Epilogue, ptrs: tuple[int, int] | None, strides):
    """A scaled matmul's scale pointers (Epilogue.scale: kernels/scales.cuh), passed at each launch like
    the bias's (block scales: with their strides, fixed for the plan); its C row-major (the scales run
    along C's rows and columns as stored)."""
    if epilogue.scale is None:
        return None
    if ptrs is None or (epilogue.scale == "block" and strides is None):
        raise ValueError(f"a plan with {epilogue.scale}-wise scales needs their pointers (scale_ptrs)"
                         + (" and strides (scale_strides)" if epilogue.scale == "block" else ""))
    if problem.c.col_major and problem.M > 1 and problem.N > 1:
        raise ValueError("a plan with scales writes a row-major C")
    return ptrs


class Plan:
    """One rung on one problem, ready to launch: ``run()`` is a single cuLaunchKernel (split-K:
    two, the rung's kernel writing FP32 partial products to a workspace, then the
    deterministic reduction into C, on sm_90 a cuLaunchKernelEx with programmatic stream
    serialization (``_pdl_config``); PACK=1 with an operand the 16-byte path cannot read: one
    launch more per such operand, its copy into the workspace, before the rung's kernel; a cluster
    split, SKCLUSTER=1: one cuLaunchKernelEx with the cluster scheduling policy, no workspace).

    Everything is resolved once: the variant, its function, the geometry, a persistent parameter
    block and the launch mode (``mode``: core/launch_modes.py, one class per way of launching).
    ``launch(a_ptr, b_ptr, c_ptr, alpha, beta, stream=None, bias=0, aux=0)``, the mode's, reuses the plan
    for other operands of the same shapes, strides, dtype and alignment class (gemmlab.gemm's fast
    path); it returns False, launching nothing, where a texture rung would need another variant
    for them (the caller then makes a new plan).
    ``twin``: the variant's store twin (``Variant.store_twin``; rung 21, a single-launch plan whose
    every call with beta == 0 stores by TMA), launched for those calls, or None. Loading it adds
    a second, smaller NVRTC compile to the plan's first one (cached like every variant).

    A plan keeps its operands' pointers, shapes and strides, never the arrays themselves, so a
    remembered plan (the fast path's) does not keep a caller's memory alive. ``operands``: the
    arrays a plan made by ``gemmlab.plan(...)`` holds for its ``run()`` (None for the others).
    """

    operands = None

    def __init__(self, problem: GemmProblem, rung: Rung, config=None, stream: int | None = None, choice=None,
                 precision: str | None = None, epilogue: Epilogue = PLAIN, bias_ptr: int = 0, aux_ptr: int = 0,
                 scale_ptrs: tuple[int, int] | None = None, scale_strides: tuple[int, int, int, int] | None = None,
                 groups: Groups | None = None):
        self.problem = problem
        # the fused epilogue (core/epilogue.py); with a bias, each launch passes its pointer (``bias``);
        # its output type is always C's (a rung then rounds to the type C has)
        if epilogue.out != problem.out_dtype:
            epilogue = replace(epilogue, out=problem.out_dtype)
        self.epilogue = epilogue
        self._bias = epilogue.bias is not None
        self._bias_ptr = bias_ptr   # run()'s
        # an auxiliary output (Epilogue.aux: the pre-activation), its pointer passed like the bias's
        self._aux, self._aux_ptr = epilogue.aux, aux_ptr
        self._scale_ptrs = _scale_ptrs(problem, epilogue, scale_ptrs, scale_strides)
        self.rung, self.choice = rung, choice    # choice: core.dispatch's Choice (rung, configuration, source, why)
        self.kp = kp = problem.kernel_view()
        self.ordinal = problem.c.device
        info = device_info(self.ordinal)
        rung.require(problem.dtype, info.arch, precision, problem.out_dtype)
        self._stream_of = self._default_stream(problem)
        self._producers = tuple({x.stream for x in (problem.a, problem.b, problem.c) if x.stream is not None})
        self._lock = threading.RLock() if rung.grouped else threading.Lock()   # launch_groups takes it around launch
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

        self._formats = _formats(problem)
        config = self._group(rung, kp, groups, config, precision, epilogue)
        res = self._resolved(rung, kp, config, precision, info, vec_a, vec_b, epilogue, capturing)
        self.packs, self.kp, self.geometry = res.packs, res.kp, res.geometry
        self.variant = res.variant   # the split-K, tall-grid or stream-K build of the geometry
        kp = self.kp
        rung.check_resources(self.variant.cfg, info.limits, self.variant.precision, self.variant.vec_a, self.variant.vec_b)
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
        self._params = Params(kp, bool(tex_args), (3 if rung.store_map else 2) if rung.tensor_maps else 0,
                               self._streamk, self._bias, bool(self.variant.batch), self._aux,
                               epilogue.scale is not None, scale_strides if epilogue.scale == "block" else None,
                               self.groups)
        if tex_args:
            self._params.textures(*tex_args)
        self._maps = self._map_args(problem.dtype, problem.c.dtype) if rung.tensor_maps else None
        self._map_c = self._maps is not None and self._maps[2] is not None   # a launch on a new C remaps
        self._mapped = (None, None, None)   # the pointers whose tensor maps the parameter block holds
        if self._maps is not None and not self.packs:   # a packed operand's map is of its copy: at launch
            self._remap(kp.a_ptr, kp.b_ptr, kp.c_ptr)
        self._launch_head = (self.function, *self.geometry.grid, *self.geometry.block, self.geometry.smem)
        self._load_twin(info, capturing)
        self._tail_head = self._streamk_tail(info.limits) if self._streamk and self.geometry.streamk else None
        self._cu = cu
        self._ex = self._cluster_config() if self._cluster_split else None
        # how its kernels go out (core/launch_modes.py), chosen once; ``launch`` is the mode's
        self.mode = launch_modes.choose(self, PDL, capturing)
        self.launch = self.mode.launch

    def _resolved(self, rung, kp, config, precision, info, vec_a, vec_b, epilogue, capturing):
        """``resolve``'s operand copies, kernel problem, geometry and variant; with a fused
        epilogue, another output type or a batch's arguments, the first configuration whose build
        does not spill (``_fused_fallback``); a grouped plan's grid for the most units any group
        sizes make (``Groups.grid``)."""
        res = resolve(rung, self.problem.dtype, kp, config, precision, info.sm_count, vec_a, vec_b, epilogue,
                      self._formats)
        if not epilogue.plain or epilogue.out or kp.batch > 1:
            res = self._fused_fallback(res, rung, kp, config, precision, info, vec_a, vec_b, capturing)
        if self.groups is not None:
            # a copy of B is of one group's weights: the others would be read as they lie
            if self.groups.count > 1 and any(p.operand == "B" for p in res.packs):
                raise ValueError(f"rung {rung.slug!r} reads every group's weights as they lie; these would need a "
                                 f"copy: pass K-major weights with 16-byte aligned columns (core/scaled_grouped.py "
                                 f"copies them so)")
            if self.groups.units_bound(res.kp.M, res.kp.N, res.variant.cfg) >= 2 ** 31:
                raise ValueError(f"{self.groups.count} groups of {res.kp.M}x{res.kp.N} make 2^31 units of work or more; "
                                 f"the kernel's schedule counts them in 32 bits")
            grid = self.groups.grid(res.kp.M, res.kp.N, res.variant.cfg, info.sm_count)
            res = replace(res, geometry=replace(res.geometry, grid=(grid, 1, 1)))
        return res

    def _group(self, rung, kp, groups, config, precision, epilogue):
        """A grouped rung's (26) groups (``groups``; a plain call: one group of M rows) as ``groups``,
        and the configuration with its shared table's capacity; ValueError for groups given to
        another rung, or an epilogue the grouped rung does not fuse (an auxiliary output; over K, any)."""
        self.groups = self._group_maps = None
        if not rung.grouped:
            if groups is not None:
                raise ValueError(f"rung {rung.slug!r} computes one product; groups are for the grouped rung")
            return config
        self.groups = groups or Groups.single(kp, get_dtype(self.problem.dtype).itemsize)
        if epilogue.aux or (self.groups.over_k and not epilogue.plain):
            raise ValueError(f"rung {rung.slug!r} fuses a bias and an activation into groups of rows only, and writes "
                             f"no auxiliary output")
        over_k = self.groups.over_k   # no table over K: every group has the same units
        return {**rung.config(config, precision), "GROUP_CAP": 1 if over_k else self.groups.cap, "GROUP_K": int(over_k)}

    def _fused_fallback(self, res, rung, kp, config, precision, info, vec_a, vec_b, capturing):
        """``res`` (a ``resolve`` with a fused epilogue or a batch), or where its build spills the first
        configuration of ``variant.fused_configs`` whose build does not (the compile is cached:
        load_function finds it); the last one's SpillError where none does."""
        configs = fused_configs(rung, config, res.variant.precision)
        for i, cfg in enumerate(configs):
            r = res if i == 0 else resolve(rung, self.problem.dtype, kp, cfg, precision, info.sm_count, vec_a, vec_b,
                                           res.variant.epilogue, self._formats)
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
        holds fewer clusters of 4 blocks of the 1024^3 tile (64x128, 4 blocks per SM by
        registers) at once than the grid's 128, which then runs in two waves; load-balancing holds
        them all and runs them in one (cuOccupancyMaxActiveClusters and CUDA events,
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

    def __repr__(self) -> str:
        p = self.problem
        why = f"; {self.choice.source}: {self.choice.reason}" if self.choice is not None else ""
        batch = f"batch of {p.batch} x " if p.batch > 1 else ""
        mode = self.mode.inner if isinstance(self.mode, launch_modes.Swapped) else self.mode
        split = f", split-K {self.splits} slices" + mode.describe() if self.splits > 1 else ""
        if self._streamk:
            split += ", stream-K last wave"
        packs = (f", {packing.describe(self.packs)}" + mode.describe_packs() if self.packs else "")
        if self.groups is not None and self.groups.count > 1:
            batch = (f"{self.groups.count} groups of {self.groups.rows_per} rows at most (counts on the device), "
                     if self.groups.rows_per else f"{self.groups.count} groups (ends on the device) over ")
        return f"Plan({p.dtype} {batch}{p.M}x{p.N}x{p.K}: {self.variant.describe()}{split}{packs}{why})"

    @staticmethod
    def _default_stream(problem: GemmProblem):
        """ordinal -> the stream a launch goes to: the current stream of C's library; for a bare
        ``__cuda_array_interface__`` C, the stream it names (else the legacy default stream)."""
        c = problem.c
        if c.lib == "cai":
            s = 0 if c.stream in (None, CAI_LEGACY) else c.stream
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

    def _map_args(self, dtype: str, c_dtype: str):
        """The tensor-map arguments of A and B (of ``dtype``) and C (of ``c_dtype``) (None for an operand TMA cannot describe: the
        variant copies it with threads, see kernels/19_wgmma_tma.cu; C's only for a rung with a
        store map whose EPI_TMA is on, where 16-byte access of C is legal and TMA can store it)."""
        kp, cfg = self.kp, self.variant.cfg
        split = {p.operand: (p.planes, p.plane_bytes) for p in self.packs if p.planes > 1}   # 3-D maps of two planes
        # a batch in one launch: 3-D maps of the operands that vary over it, and of C
        # a grouped plan: B's 3-D map over the groups' weights, or over K each group's C
        g = self.groups
        varies = self.variant.batch or (False, g is not None and not g.over_k)
        b_batch = (g.count, g.stride) if g is not None else (kp.batch, kp.batch_b)
        c_batch = ((kp.batch, kp.batch_c) if self.variant.batch else
                   (g.count, g.stride) if g is not None and g.over_k else None)
        # groups of rows: a row-major A's boxes of GROUP_BOX_ROWS rows, loaded up to each tile's group's end
        rows_box = GROUP_BOX_ROWS if g is not None and not g.over_k and not kp.a_col and cfg.get("ABOX", 1) else None
        a = (tensormaps.operand_map("A", kp.M, kp.K, kp.lda, kp.a_col, dtype, cfg, *split.get("A", (1, 0)),
                                    batch=(kp.batch, kp.batch_a) if varies[0] else None, box_rows=rows_box)
             if self.variant.vec_a else None)
        b = (tensormaps.operand_map("B", kp.K, kp.N, kp.ldb, kp.b_col, dtype, cfg, *split.get("B", (1, 0)),
                                    batch=b_batch if varies[1] else None)
             if self.variant.vec_b else None)
        rows, cols = (kp.N, kp.M) if kp.c_col else (kp.M, kp.N)   # a column-major C: its columns are the map's rows
        c = (tensormaps.output_map(rows, cols, kp.ldc, c_dtype, batch=c_batch)
             if self.rung.store_map and cfg.get("EPI_TMA") and self.variant.vec_c
             and tensormaps.storable(cols, kp.ldc, c_dtype) else None)
        return a, b, c

    # ---- launching ------------------------------------------------------------------------
    def run(self, stream: int | None = None) -> None:
        """Launch on ``stream`` (default: the current stream of C's library) with the plan's own
        operands."""
        kp = self.kp
        a_ptr, b_ptr = (kp.b_ptr, kp.a_ptr) if kp.c_col else (kp.a_ptr, kp.b_ptr)   # the kernel view's (Swapped)
        if not self.launch(a_ptr, b_ptr, kp.c_ptr, kp.alpha, kp.beta, stream, self._bias_ptr, self._aux_ptr,
                           self._scale_ptrs):
            raise RuntimeError(f"{self.variant.describe()}: the operands' texture extent changed since the plan was made")

    def launch_groups(self, src_ptr: int, a_ptr: int, b_ptr: int, c_ptr: int, stream: int | None = None,
                      bias: int = 0, scales: tuple[int, int] | None = None) -> None:
        """A grouped plan's launch (alpha 1, beta 0) on the groups' device ints at ``src_ptr``
        (cumulative ends, or counts; 0: every group full), these operands, a fused epilogue's bias
        (one row of N per group, or one value per row) and a scaled plan's scale pointers (rung 27:
        scale_a's along the rows, scale_b's per group). Over K, first the group_maps kernel writes
        each group's maps of A and B, K cut at the group's end, into a workspace of the call's
        (core/workspace.py: stream-ordered, a graph's own allocation when captured), and the GEMM
        goes out after it programmatically (its launch and prologue overlap the maps' writing)."""
        g = self.groups
        with self._lock:
            if not g.over_k:
                self._params.group_src(src_ptr)
                self.launch(a_ptr, b_ptr, c_ptr, 1.0, 0.0, stream, bias, 0, scales)
                return
            stream = self._stream_of(self.ordinal) if stream is None else stream
            ws = workspace.acquire(self.ordinal, stream, 2 * tensormaps.MAP_BYTES * g.count)
            try:
                if (a_ptr, b_ptr, c_ptr) != self._mapped:
                    self._remap(a_ptr, b_ptr, c_ptr)
                self._launch_group_maps(src_ptr, ws, stream)
                self._params.group_src(src_ptr, ws)
                # the GEMM scheduled while group_maps runs, where it is one plain launch on sm_90
                if PDL and isinstance(self.mode, launch_modes.Direct):
                    self.mode.launch_programmatic(a_ptr, b_ptr, c_ptr, stream, bias, scales)
                else:
                    self.launch(a_ptr, b_ptr, c_ptr, 1.0, 0.0, stream, bias, 0, scales)
            finally:
                workspace.release(self.ordinal, stream, ws)

    def _launch_group_maps(self, src_ptr: int, dst: int, stream: int) -> None:
        """kernels/group_maps.cuh's group_maps (tmA tmB ints G K dst) on ``stream``: A's and B's maps
        as the parameter block holds them, a block of two warps per group."""
        if self._group_maps is None:
            fn = load_compiled(self.compiled, self.ordinal, self.variant.describe(), MAPS_KERNEL)
            buf = ctypes.create_string_buffer(288)
            base = ctypes.addressof(buf)
            args = (ctypes.c_void_p * 6)(*[base + off for off in (0, 128, 256, 264, 268, 272)])
            self._group_maps = (fn, buf, args)
        fn, buf, args = self._group_maps
        buf[0:256] = self._params.buffer[128:384]
        struct.pack_into("<QiiQ", buf, 256, src_ptr, self.groups.count, self.kp.K, dst)
        self._launch(stream, (fn, self.groups.count, 1, 1, 64, 1, 1, 0), ctypes.addressof(args))   # a warp per map

    def _remap(self, a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        """The tensor maps of new operand pointers into the parameter block (call with the plan's
        lock): the encoded maps (cached: a dict lookup once seen) of the operands that have one.
        The block holds the maps of the last pointers, so the launches look maps up only when the
        pointers change (hashing the map arguments and copying 128 bytes a map is microseconds)."""
        cache, ordinal = tensormaps.CACHE, self.ordinal
        self._params.tensor_maps(*(None if args is None else cache.acquire(ordinal, ptr, args)
                                   for args, ptr in zip(self._maps, (a_ptr, b_ptr, c_ptr))))
        self._mapped = (a_ptr, b_ptr, c_ptr)

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
