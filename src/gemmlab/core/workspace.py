"""Device workspaces of the launch layer: the FP32 partial products of split-K launches.

A split-K launch (a rung's SPLITK > 1, kernels/common.cuh) writes its slices' partial tiles to a
workspace and a reduction kernel reads them back. Two launches that overlap in time must not
share one, so there is one workspace per (device, stream): work on one stream runs in order, and
concurrent streams each have their own. A workspace only grows (to the larger of the request and
twice its size, so a growing sequence of problems allocates a few times, not every time).

Allocation happens when a plan is made (``Plan.__init__`` asks for its stream's workspace) and,
for a later call on another stream, at that call; never while the stream captures a CUDA graph:
``cuMemAlloc`` is not allowed during a capture, so that case is refused with a RuntimeError that
says to run the call once on that stream first. A grown workspace's old buffer is kept, not freed:
a graph captured earlier may still name it, and freeing memory under a graph would let its replay
write into someone else's allocation. (Growth doubles, so what is kept is at most what is in use.)
Workspaces live as long as the process, like cuBLAS's per-handle workspace.
"""

from __future__ import annotations

import threading
from typing import Callable

from .driver import check, context, cuda

MIN_BYTES = 1 << 20          # the smallest workspace: small problems share one allocation size
_buffers: dict[tuple[int, int], tuple[int, int]] = {}   # (ordinal, stream) -> (pointer, bytes)
_kept: list[tuple[int, int]] = []                        # outgrown buffers (graphs may name them)
_lock = threading.Lock()


def get(ordinal: int, stream: int, nbytes: int, capturing: Callable[[], bool] | None = None) -> int:
    """The device pointer of a workspace of at least ``nbytes`` for work on ``stream`` of device
    ``ordinal``. Allocates (or grows) it when needed; RuntimeError when that is needed while
    ``capturing()`` says the stream is capturing a CUDA graph."""
    hit = _buffers.get((ordinal, stream))
    if hit is not None and hit[1] >= nbytes:
        return hit[0]
    with _lock:
        hit = _buffers.get((ordinal, stream))
        if hit is not None and hit[1] >= nbytes:
            return hit[0]
        if capturing is not None and capturing():
            raise RuntimeError(
                f"gemmlab: this split-K call needs a workspace of {nbytes} bytes on stream {stream:#x}, which has "
                f"{'none' if hit is None else f'only {hit[1]} bytes'}, and the stream is capturing a CUDA graph (no "
                f"allocation is allowed then): run the call once on this stream before capturing")
        size = max(nbytes, MIN_BYTES, 2 * hit[1] if hit else 0)
        with context(ordinal):
            ptr = int(check(cuda().cuMemAlloc(size), f"cuMemAlloc of a {size}-byte split-K workspace"))
        if hit is not None:
            _kept.append(hit)
        _buffers[(ordinal, stream)] = (ptr, size)
        return ptr


def size(ordinal: int, stream: int) -> int:
    """Bytes of the workspace of (device, stream); 0 when it has none."""
    hit = _buffers.get((ordinal, stream))
    return 0 if hit is None else hit[1]
