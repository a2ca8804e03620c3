"""How a plan's kernels go out: one small class per launch mode, chosen once when the plan is made
(``choose``). A mode's ``launch(a_ptr, b_ptr, c_ptr, alpha, beta, stream=None, bias=0, aux=0) -> bool`` is
the plan's ``launch`` (the plan binds it, so a call costs one Python call, as gemmlab.gemm's fast
path wants); the plan (core/launch.py) keeps what every mode shares: the parameter block, the tensor
maps, the launch heads and the helpers that launch one kernel.

- ``Direct``: one cuLaunchKernel; on a plan with a store twin, the twin for beta == 0.
- ``Textured``: the same after looking the operands' texture objects up (rungs 7 and 12).
- ``Clustered``: one cuLaunchKernelEx with the cluster scheduling policy (a cluster split, SKCLUSTER=1).
- ``Staged``: a workspace taken for the call (core/workspace.py): the copies of packed operands,
  the rung's kernel (split-K: into FP32 partial products; stream-K: with its flags zeroed first),
  then split-K's reduction, each after the one before with programmatic stream serialization on sm_90.
- ``Swapped``: another mode on the transposed problem (C^T = B^T A^T): A and B trade places.
"""

from __future__ import annotations

import os
import struct

from . import packing, workspace
from .arch import arch_number
from .driver import check, context, device_info
from .loading import SPECIAL_STREAMS, current_context_is, load_pack, load_reduce, stream_capturing
from .params import REDUCE_BIAS_AT, f32, fill, pack_params, reduce_aux_at, reduce_params
from .registry import MAX_GRID_Y, streamk_workspace
from .variant import REDUCE_THREADS
from . import textures

PDL_ARCH = 90   # programmatic dependent launch (griddepcontrol): sm_90 and newer
# GEMMLAB_CHECK=1: synchronize after every launch and raise on asynchronous errors (read once)
CHECKED = os.environ.get("GEMMLAB_CHECK", "") not in ("", "0")


class LaunchMode:
    """A plan's way of launching (one instance per plan). ``name`` says which; ``describe()`` what
    the plan's repr adds for it."""

    name = ""

    def __init__(self, plan):
        self.plan = plan

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
               stream: int | None = None, bias: int = 0, aux: int = 0,
               scales: tuple | None = None) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        """What the plan's repr adds to its split-K slices."""
        return ""

    def _stream(self, stream: int | None) -> int:
        """The launch's stream (None: the current stream of C's library), once the operands'
        producer streams' pending work is ordered before it (``Direct`` has this inline)."""
        p = self.plan
        if stream is None:
            stream = p._stream_of(p.ordinal)
        if p._producers:
            p._wait_for_producers(stream)
        return stream

    def describe_packs(self) -> str:
        """What the plan's repr adds to its operand copies."""
        return ""


class Direct(LaunchMode):
    """One cuLaunchKernel of the plan's parameter block. The path of gemmlab.gemm's every call:
    kept flat (each Python call costs time on the host)."""

    name = "direct"
    _pdl_head = None   # launch_programmatic's cuLaunchKernelEx configuration, made at its first call

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
               stream: int | None = None, bias: int = 0, aux: int = 0,
               scales: tuple | None = None) -> bool:
        p = self.plan
        if stream is None:
            stream = p._stream_of(p.ordinal)
        if p._producers:
            p._wait_for_producers(stream)
        params = p._params
        with p._lock:
            try:
                params.pack(params.buffer, 0, a_ptr, b_ptr, c_ptr, alpha, beta)
            except OverflowError:
                params.pack(params.buffer, 0, a_ptr, b_ptr, c_ptr, f32(alpha), f32(beta))
            if p._bias:
                params.bias(bias)
            if p._aux:
                params.aux(aux)
            if scales is not None:
                params.scales(scales)
            if p._maps is not None and (a_ptr != p._mapped[0] or b_ptr != p._mapped[1]
                                        or (p._map_c and c_ptr != p._mapped[2])):
                p._remap(a_ptr, b_ptr, c_ptr)
            # beta == 0 (and -0.0) on a plan with a store twin: the twin (its kernel stores only by TMA)
            head = p._launch_head if beta or p._twin_head is None else p._twin_head
            err = p._cu.cuLaunchKernel(*head, stream, params.address, 0)[0]
            if err or CHECKED:
                p._after_launch(err, stream, head, params.address, p._ex)
        return True

    def launch_programmatic(self, a_ptr: int, b_ptr: int, c_ptr: int, stream: int, bias: int = 0,
                            scales: tuple | None = None) -> None:
        """The plan's kernel (alpha 1, beta 0; call with the plan's lock) with programmatic stream
        serialization: scheduled while the kernel before it on ``stream`` finishes, waiting for it
        in gl_pdl_wait. Rung 26's GEMM over K after its group_maps kernel (Plan.launch_groups):
        its blocks' launch and prologue overlap the maps' writing. The operands' maps are those the
        caller has made current (group_maps copied them)."""
        p = self.plan
        if p._producers:
            p._wait_for_producers(stream)
        params = p._params
        params.pack(params.buffer, 0, a_ptr, b_ptr, c_ptr, 1.0, 0.0)
        params.epilogue(bias, 0, scales)
        if self._pdl_head is None:
            self._pdl_head = p._pdl_config(p._launch_head)
        p._launch_ex(stream, self._pdl_head, p._launch_head, params.address)


class Textured(LaunchMode):
    """A texture rung's launch: the operands' texture objects looked up (under textures.LOCK) and
    passed with the arguments. False, launching nothing, when the operands would need another
    variant (texels of another width): the caller then makes a new plan."""

    name = "textured"

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
               stream: int | None = None, bias: int = 0, aux: int = 0,
               scales: tuple | None = None) -> bool:
        p = self.plan
        stream = self._stream(stream)
        with textures.LOCK:
            ta = textures.acquire(a_ptr, p._spans[0], p._want[0], p.ordinal)
            tb = textures.acquire(b_ptr, p._spans[1], p._want[1], p.ordinal)
            if (ta.channels, tb.channels) != p._channels:
                return False
            params = p._params
            with p._lock:
                params.pack(params.buffer, 0, a_ptr, b_ptr, c_ptr, f32(alpha), f32(beta))
                params.textures(ta.handle, ta.offset, tb.handle, tb.offset)
                params.epilogue(bias, aux, scales)
                p._launch(stream)
            textures.used((ta, tb), stream, p.ordinal, stream_capturing(stream, p.ordinal))
        return True


class Clustered(LaunchMode):
    """A cluster split (SKCLUSTER=1) without packed operands: one cuLaunchKernelEx with the
    plan's cluster configuration (its scheduling policy)."""

    name = "clustered"

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
               stream: int | None = None, bias: int = 0, aux: int = 0,
               scales: tuple | None = None) -> bool:
        p = self.plan
        stream = self._stream(stream)
        with p._lock:
            fill(p._params, a_ptr, b_ptr, c_ptr, alpha, beta)
            p._params.epilogue(bias, aux, scales)
            p._launch(stream)
        return True

    def describe(self) -> str:
        return " summed in a cluster"


class Staged(LaunchMode):
    """A plan that uses a workspace (core/workspace.py), taken for each call on its stream and
    given back after its last kernel: the copy of each packed operand into it, the rung's kernel on
    the copies (split-K: into its partial products with ld N, ignoring alpha and beta; stream-K:
    its pieces and flags, the flags zeroed first), then split-K's reduction into C. On sm_90 a
    second copy, the rung's kernel after a copy and the reduction go out with programmatic stream
    serialization: each waits for the kernel before it in its first instruction (gl_pdl_wait)."""

    name = "staged"

    def __init__(self, plan, pdl: bool, capturing):
        super().__init__(plan)
        p, kp, dtype = plan, plan.kp, plan.problem.dtype
        self._pack_heads = [(load_pack(dtype, p.ordinal, capturing, q.kernel, q.planes > 1, q.batch > 1), *q.grid(),
                             q.threads, 1, 1, 0) for q in p.packs]
        self._pack_blocks = [pack_params(q) for q in p.packs]
        # not after stream-K's memset of its flags, nor with a cluster split's own launch
        self._pdl = pdl and arch_number(device_info(p.ordinal).arch) >= PDL_ARCH
        self._pack_ex = [None] + [p._pdl_config(h) if self._pdl else None for h in self._pack_heads[1:]]
        self.gemm_ex = (p._pdl_config(p._launch_head) if self._pdl and p.packs and p._ex is None
                        and not p._streamk else None)
        # after the copies: split-K's partial products, or stream-K's pieces and flags
        self._sk_flags = None
        extra = p.splits * kp.M * kp.N * 4 if p._split else 0
        if p._streamk:
            self._sk_flags, extra = streamk_workspace(p.variant.cfg, p.geometry.grid[0],
                                                      p.rung.streamk_warps(p.variant.cfg))
            self._sk_count = (extra - self._sk_flags) // 4     # the flags: 4-byte ints
        self._split_offset, self.workspace_bytes = packing.layout(p.packs, extra)
        self.reduce_ex = None
        if p._split:
            p._params.ldc(kp.N)
            fn = load_reduce(dtype, p.ordinal, capturing, p.epilogue)
            self._reduce = reduce_params(kp.M, kp.N, p.splits, kp.ldc, p._bias, p._aux)
            grid = (-(-kp.N // REDUCE_THREADS), min(kp.M, MAX_GRID_Y), 1)
            self._reduce_head = (fn, *grid, REDUCE_THREADS, 1, 1, 0)
            self.reduce_ex = p._pdl_config(self._reduce_head) if self._pdl else None

    def describe(self) -> str:
        p = self.plan
        out = ""
        if p._cluster_split:
            out += " summed in a cluster"
        if self.reduce_ex is not None:
            out += ", their reduction launched programmatically after them"
        return out

    def describe_packs(self) -> str:
        return ", the kernel after them launched programmatically" if self.gemm_ex is not None else ""

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
               stream: int | None = None, bias: int = 0, aux: int = 0,
               scales: tuple | None = None) -> bool:
        """A default-stream handle names the current context's stream: while another context is
        current, all of the call runs in the plan's."""
        p = self.plan
        stream = self._stream(stream)
        if stream in SPECIAL_STREAMS and not current_context_is(p.ordinal):
            with context(p.ordinal):
                self._staged(a_ptr, b_ptr, c_ptr, alpha, beta, stream, bias, aux, scales)
        else:
            self._staged(a_ptr, b_ptr, c_ptr, alpha, beta, stream, bias, aux, scales)
        return True

    def _staged(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float, stream: int, bias: int,
                aux: int, scales: tuple | None = None) -> None:
        p = self.plan
        ws = workspace.acquire(p.ordinal, stream, self.workspace_bytes)
        try:
            region = packing.base(ws) if p.packs else ws
            with p._lock:
                for q, head, block, ex in zip(p.packs, self._pack_heads, self._pack_blocks, self._pack_ex):
                    block.pack(block.buffer, 0, a_ptr if q.operand == "A" else b_ptr, region + q.offset)
                    p._launch_ex(stream, ex, head, block.address)
                    if q.operand == "A":
                        a_ptr = region + q.offset
                    else:
                        b_ptr = region + q.offset
                split = p._split
                fill(p._params, a_ptr, b_ptr, region + self._split_offset if split else c_ptr, alpha, beta)
                p._params.epilogue(bias, aux, scales)
                if self._sk_flags is not None:   # stream-K: the workspace, its flags zeroed before the kernel
                    p._params.workspace(region + self._split_offset)
                    self._zero_flags(region + self._split_offset + self._sk_flags, stream)
                if p._maps is not None and (a_ptr != p._mapped[0] or b_ptr != p._mapped[1]
                                            or (p._map_c and c_ptr != p._mapped[2])):
                    p._remap(a_ptr, b_ptr, c_ptr)   # the maps of these operands (a packed one's: of its copy)
                p._launch_ex(stream, p._ex if self.gemm_ex is None else self.gemm_ex, p._launch_head,
                             p._params.address)
                if p._tail_head is not None:   # rung 18's stream-K tail, after its whole tiles
                    p._launch(stream, p._tail_head, p._params.address)
                if split:
                    fill(self._reduce, region + self._split_offset, c_ptr, alpha, beta)
                    if p._bias:
                        struct.pack_into("<Q", self._reduce.buffer, REDUCE_BIAS_AT, bias)
                    if p._aux:
                        struct.pack_into("<Q", self._reduce.buffer, reduce_aux_at(p._bias), aux)
                    p._launch_ex(stream, self.reduce_ex, self._reduce_head, self._reduce.address)
        finally:
            workspace.release(p.ordinal, stream, ws)

    def _zero_flags(self, ptr: int, stream: int) -> None:
        """cuMemsetD32Async of the stream-K flags (one int per block and consumer warp) on ``stream``
        (a memset node when the stream captures); in the plan's context when none is current."""
        cu = self.plan._cu
        err = cu.cuMemsetD32Async(ptr, 0, self._sk_count, stream)[0]
        if err:
            with context(self.plan.ordinal):
                check(cu.cuMemsetD32Async(ptr, 0, self._sk_count, stream), "cuMemsetD32Async of the stream-K flags")


class Swapped(LaunchMode):
    """``inner`` on the transposed problem (packing.for_kernel: the kernel computes C^T = B^T A^T):
    a launch's A and B trade places, so callers keep passing the kernel view's."""

    def __init__(self, plan, inner: LaunchMode):
        super().__init__(plan)
        self.inner = inner
        self.name = inner.name + ", swapped"
        self._inner_launch = inner.launch

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
               stream: int | None = None, bias: int = 0, aux: int = 0,
               scales: tuple | None = None) -> bool:
        # scales pass as they are: a scaled plan never runs transposed (its C is row-major, launch._scale_ptrs,
        # and rung 25 reads no A into registers)
        return self._inner_launch(b_ptr, a_ptr, c_ptr, alpha, beta, stream, bias, aux, scales)

    def describe(self) -> str:
        return self.inner.describe()


def choose(plan, pdl: bool, capturing) -> LaunchMode:
    """The plan's mode: staged where it uses a workspace (operand copies, split-K into a
    workspace, stream-K), else clustered for a cluster split, textured for a texture rung, else
    direct; swapped around it where the kernel computes the transposed problem."""
    if plan._split or plan.packs or plan._streamk:
        mode: LaunchMode = Staged(plan, pdl, capturing)
    elif plan._ex is not None:
        mode = Clustered(plan)
    elif plan.rung.textures:
        mode = Textured(plan)
    else:
        mode = Direct(plan)
    return Swapped(plan, mode) if plan.kp.c_col else mode
