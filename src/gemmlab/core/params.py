"""Kernel parameter blocks: persistent argument buffers a plan updates in place between launches,
laid out in each kernel's argument order (kernels/common.cuh's launch contract), so that a launch
packs only what changes per call."""

from __future__ import annotations

import ctypes
import struct

from . import packing
from .problem import KernelProblem

class Params:
    """A persistent kernel parameter block, updated in place between launches: one buffer holds
    every argument, laid out so that what changes per call (the three pointers, alpha, beta)
    is one contiguous ``struct`` pack, and the void* array cuLaunchKernel reads (passed by
    address) points into it in the kernel's argument order (kernels/common.cuh). The extras
    after the standard arguments: two texture objects with their element offsets (the texture
    rungs), or two or three 128-byte tensor maps (the TMA rungs: A and B, and C for a rung with a
    store map; the driver copies them by value); then a stream-K kernel's workspace pointer, a
    batched kernel's batch count and its operands' batch strides (GL_BATCH_PARAMS, fixed for the
    plan), or a grouped kernel's groups (GL_GROUP_PARAMS: the count, B's or C's group stride, the
    device ints' pointer, which a call may change, the rows per group and, over K, the groups' maps),
    then the bias pointer of a fused bias and the auxiliary output's pointer
    (kernels/epilogue.cuh, GL_EPI_PARAMS), and last a scaled matmul's two scale pointers, with
    block scales their four strides (kernels/scales.cuh, GL_SCALE_PARAMS)."""

    # byte offsets in the buffer, in the kernel's argument order
    _ORDER = (32, 36, 40, 24, 0, 44, 8, 48, 28, 16, 52)   # M N K alpha A lda B ldb beta C ldc
    _TEX_ORDER = (56, 64, 72, 80)                          # texA offA texB offB
    _TMAP_ORDER = (128, 256, 384)                          # tmA tmB [tmC] (128 bytes each)
    # then, for a stream-K kernel (STREAMK=1), its workspace pointer right after the maps
    _SHAPE = struct.Struct("<6i")                          # M N K lda ldb ldc at byte 32
    _CALL = struct.Struct("<QQQff")                        # A B C alpha beta at byte 0
    _TEX = struct.Struct("<QqQq")                          # at byte 56

    __slots__ = ("buffer", "array", "address", "pack", "_ws_at", "bias_at", "aux_at", "scales_at", "groups_at")

    def __init__(self, kp: KernelProblem, textured: bool, maps: int = 0, workspace: bool = False, bias: bool = False,
                 batched: bool = False, aux: bool = False, scales: bool = False,
                 scale_strides: tuple[int, int, int, int] | None = None, groups=None):
        order = self._ORDER + (self._TEX_ORDER if textured else ()) + self._TMAP_ORDER[:maps]
        size = 128 + 128 * maps if maps else 88
        self._ws_at = size if workspace else None
        if workspace:
            order, size = order + (size,), size + 8
        batch_at = size
        if batched:   # int count (padded to 8 bytes), then three 64-bit strides
            order, size = order + (size, size + 8, size + 16, size + 24), size + 32
        self.groups_at = size if groups is not None else None
        if groups is not None:   # a grouped kernel's (GL_GROUP_PARAMS): int count (padded), B's (over K: C's)
            # group stride, the device ints' pointer (per call), rows per group (padded), the groups' maps
            # (over K, per call)
            order, size = order + (size, size + 8, size + 16, size + 24, size + 32), size + 40
        self.bias_at = size if bias else None
        if bias:
            order, size = order + (size,), size + 8
        self.aux_at = size if aux else None
        if aux:
            order, size = order + (size,), size + 8
        self.scales_at = size if scales else None
        if scales:
            order, size = order + (size, size + 8), size + 16
        strides_at = size
        if scale_strides is not None:   # block scales: four ints, fixed for the plan
            order, size = order + tuple(size + 4 * i for i in range(4)), size + 16
        self.buffer = ctypes.create_string_buffer(size)
        base = ctypes.addressof(self.buffer)
        self.array = (ctypes.c_void_p * len(order))(*[base + off for off in order])
        self.address = ctypes.addressof(self.array)
        self._SHAPE.pack_into(self.buffer, 32, kp.M, kp.N, kp.K, kp.lda, kp.ldb, kp.ldc)
        if batched:
            struct.pack_into("<iiqqq", self.buffer, batch_at, kp.batch, 0, kp.batch_a, kp.batch_b, kp.batch_c)
        if scale_strides is not None:
            struct.pack_into("<4i", self.buffer, strides_at, *scale_strides)
        if groups is not None:
            struct.pack_into("<iiqQiiQ", self.buffer, self.groups_at, groups.count, 0, groups.stride, 0,
                             groups.rows_per, 0, 0)
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

    def aux(self, ptr: int) -> None:
        """The auxiliary output's pointer (a block made with ``aux=True``)."""
        struct.pack_into("<Q", self.buffer, self.aux_at, ptr)

    def epilogue(self, bias: int, aux: int, scales: tuple[int, int] | None = None) -> None:
        """The bias, auxiliary-output and scale pointers of a call, each where the block has its slot."""
        if self.bias_at is not None:
            self.bias(bias)
        if self.aux_at is not None:
            self.aux(aux)
        if scales is not None:
            self.scales(scales)

    def scales(self, scales: tuple[int, int]) -> None:
        """A scaled matmul's scale pointers (scale_a's, scale_b's), where the block has their slot."""
        if self.scales_at is not None:
            struct.pack_into("<QQ", self.buffer, self.scales_at, *scales)

    def group_src(self, ptr: int, maps: int = 0) -> None:
        """A grouped kernel's device ints (cumulative ends or counts; 0: every group full) and, over
        K, the groups' tensor maps, where the block has the groups' slot."""
        struct.pack_into("<Q", self.buffer, self.groups_at + 16, ptr)
        struct.pack_into("<Q", self.buffer, self.groups_at + 32, maps)

    def ldc(self, value: int) -> None:
        """The leading dimension of what the kernel writes (split-K: the workspace's row length)."""
        struct.pack_into("<i", self.buffer, 52, value)


class HelperParams:
    """The persistent parameter block of a helper kernel: what changes per call (pointers, and
    alpha and beta) is one ``struct`` pack at byte 0, the fixed int arguments follow it, and the
    void* array points into the buffer in the kernel's argument order."""

    __slots__ = ("buffer", "array", "address", "pack")

    def __init__(self, call: struct.Struct, order: tuple[int, ...], ints: tuple[int, ...], wide: tuple[int, ...] = ()):
        """``wide``: fixed 64-bit arguments, after the ints (on an 8-byte boundary)."""
        wide_at = -(-(call.size + 4 * len(ints)) // 8) * 8
        self.buffer = ctypes.create_string_buffer(wide_at + 8 * len(wide))
        base = ctypes.addressof(self.buffer)
        self.array = (ctypes.c_void_p * len(order))(*[base + off for off in order])
        self.address = ctypes.addressof(self.array)
        struct.pack_into(f"<{len(ints)}i", self.buffer, call.size, *ints)
        if wide:
            struct.pack_into(f"<{len(wide)}q", self.buffer, wide_at, *wide)
        self.pack = call.pack_into


REDUCE_BIAS_AT = 40


def reduce_aux_at(bias: bool) -> int:
    """The auxiliary output's pointer in a reduction's block: after the bias's, where there is one."""
    return REDUCE_BIAS_AT + 8 * bias


def reduce_params(M: int, N: int, splits: int, ldc: int, bias: bool = False, aux: bool = False) -> HelperParams:
    """kernels/splitk_reduce.cu (M N S W alpha beta C ldc [bias] [aux]); per call W C alpha beta
    [bias] [aux]. The pointers follow the ints, from byte 40 (REDUCE_BIAS_AT; pairs of zero ints
    make their 8 bytes each)."""
    extra = (REDUCE_BIAS_AT,) * bias + (reduce_aux_at(bias),) * aux
    return HelperParams(struct.Struct("<QQff"), (24, 28, 32, 0, 16, 20, 8, 36) + extra,
                        (M, N, splits, ldc) + (0, 0) * len(extra))


def pack_params(p: packing.Pack) -> HelperParams:
    """kernels/pack.cu (outer inner src ld dst ldp [src_stride dst_stride]); per call src dst."""
    if p.batch > 1:   # GL_PACK_BATCHED: the two strides at byte 32
        return HelperParams(struct.Struct("<QQ"), (16, 20, 0, 24, 8, 28, 32, 40), (p.outer, p.inner, p.ld, p.ld_packed),
                            (p.batch_stride, p.element_stride))
    return HelperParams(struct.Struct("<QQ"), (16, 20, 0, 24, 8, 28), (p.outer, p.inner, p.ld, p.ld_packed))


def f32(x: float) -> float:
    """x as the kernel's float argument receives it (out of range: +-inf, as a C cast gives)."""
    return ctypes.c_float(x).value


def fill(block, *args) -> None:
    """The per-call ``struct`` pack of a parameter block whose last two arguments are alpha and
    beta (out of float range: as the kernel's float receives them)."""
    try:
        block.pack(block.buffer, 0, *args)
    except OverflowError:
        block.pack(block.buffer, 0, *args[:-2], f32(args[-2]), f32(args[-1]))
