"""Device workspaces of the launch layer: the FP32 partial products of split-K launches, and the
copies of the operands a PACK=1 launch packs (core/packing.py; one allocation holds both, the
copies first).

A split-K launch (a rung's SPLITK > 1, kernels/common.cuh) writes its slices' partial tiles to a
workspace and a reduction kernel reads them back; a packing launch copies an operand into it and
the rung's kernel reads the copy. Two launches that overlap in time must not
share one, so there is one workspace per (device, stream): work on one stream runs in order, and
concurrent streams each have their own. A workspace only grows (to the larger of the request and
twice its size, so a growing sequence of problems allocates a few times, not every time).

Allocation happens when a plan is made (``Plan.__init__`` asks for its stream's workspace) and,
for a later call on another stream, at that call. A call captured into a CUDA graph does not use
these at all: ``cuMemAlloc`` is not allowed during a capture, and a graph may be replayed on any
stream, beside direct calls on the stream it was captured on. It takes a stream-ordered allocation
instead (``captured_alloc`` / ``captured_free``: cuMemAllocAsync and cuMemFreeAsync on the
capturing stream), which the capture turns into the graph's own memory nodes: every replay has its
workspace, shared with nothing. A grown workspace's old buffer is freed only once no launch can
still use it: it is kept, like cuBLAS's per-handle workspace, for the life of the process.
(Growth doubles, so what is kept is at most what is in use.)
"""

from __future__ import annotations

import threading
from .driver import check, context, cuda

MIN_BYTES = 1 << 20          # the smallest workspace: small problems share one allocation size
_buffers: dict[tuple[int, int], tuple[int, int]] = {}   # (ordinal, stream) -> (pointer, bytes)
_kept: list[tuple[int, int]] = []                        # outgrown buffers (launches in flight may use them)
_lock = threading.Lock()


def get(ordinal: int, stream: int, nbytes: int) -> int:
    """The device pointer of a workspace of at least ``nbytes`` for work on ``stream`` of device
    ``ordinal`` (not capturing: a captured call uses ``captured_alloc``). Allocates (or grows) it
    when needed."""
    hit = _buffers.get((ordinal, stream))
    if hit is not None and hit[1] >= nbytes:
        return hit[0]
    with _lock:
        hit = _buffers.get((ordinal, stream))
        if hit is not None and hit[1] >= nbytes:
            return hit[0]
        size = max(nbytes, MIN_BYTES, 2 * hit[1] if hit else 0)
        with context(ordinal):
            ptr = int(check(cuda().cuMemAlloc(size), f"cuMemAlloc of a {size}-byte workspace"))
        if hit is not None:
            _kept.append(hit)
        _buffers[(ordinal, stream)] = (ptr, size)
        return ptr


def size(ordinal: int, stream: int) -> int:
    """Bytes of the workspace of (device, stream); 0 when it has none."""
    hit = _buffers.get((ordinal, stream))
    return 0 if hit is None else hit[1]


def captured_alloc(ordinal: int, stream: int, nbytes: int) -> int:
    """A workspace of ``nbytes`` for one call being captured on ``stream``: a stream-ordered
    allocation, which the capture records as a memory node of the graph (free it with
    ``captured_free`` after the launches that use it, in the same capture)."""
    with context(ordinal):
        return int(check(cuda().cuMemAllocAsync(nbytes, stream), f"cuMemAllocAsync of a {nbytes}-byte workspace"))


def captured_free(ordinal: int, stream: int, ptr: int) -> None:
    with context(ordinal):
        check(cuda().cuMemFreeAsync(ptr, stream), "cuMemFreeAsync of a workspace")
