"""Device workspaces of the launch layer: the FP32 partial products of split-K launches, stream-K's
pieces and flags, and the copies of the operands a PACK=1 launch packs (core/packing.py; one
allocation holds them all, the copies first).

Each call takes its workspace when it launches and gives it back right after its last kernel,
both ordered on the launch stream (``acquire`` / ``release``: cuMemAllocFromPoolAsync and
cuMemFreeAsync), from a memory pool of gemmlab's own on each device (cuMemPoolCreate). The CUDA
driver's stream-ordered allocator then does what a hand-kept cache would have to: work on one
stream reuses the same memory in order; a call on another stream gets other memory until the
first stream's work is done (the pool may not make one stream wait for another: its internal
dependencies are off, so concurrent streams stay concurrent); and a call captured into a CUDA
graph becomes the graph's own allocation and free nodes, shared with no direct call (the graph
keeps that memory reserved for as long as it lives, as every graph memory node does).

What gemmlab keeps between calls is bounded: the pool holds on to at most ``limit()`` bytes
(its release threshold; 256 MiB unless ``GEMMLAB_WORKSPACE_LIMIT`` or ``set_limit`` says
otherwise) and returns the rest to the device at the next synchronization (a stream, event or
device synchronize). A call that needs more than the limit still runs: it holds the memory while
it runs. ``empty()`` (``gemmlab.empty_cache()``) waits for the device's work and returns all of it;
``reserved()`` says how much a device's pool holds now. No workspace belongs to a plan, so
forgetting a plan frees nothing and needs nothing freed.
"""

from __future__ import annotations

import os
import re
import sys
import threading

from .driver import check, context, cuda

DEFAULT_LIMIT = 256 << 20
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_bytes(text: str, what: str = "GEMMLAB_WORKSPACE_LIMIT") -> int:
    """A byte count written as ``268435456``, ``256MB``, ``256 MiB`` or ``1g`` (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{what}={text!r}: expected a byte count such as 268435456, 256MB or 1GiB")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


_limit = parse_bytes(os.environ["GEMMLAB_WORKSPACE_LIMIT"]) if os.environ.get("GEMMLAB_WORKSPACE_LIMIT") \
    else DEFAULT_LIMIT
_pools: dict[int, object] = {}   # ordinal -> CUmemoryPool
_lock = threading.Lock()


def _set_threshold(pool, nbytes: int) -> None:
    cu = cuda()
    check(cu.cuMemPoolSetAttribute(pool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                   cu.cuuint64_t(nbytes)), "cuMemPoolSetAttribute(RELEASE_THRESHOLD)")


def _create(ordinal: int):
    cu = cuda()
    props = cu.CUmemPoolProps()
    props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    props.handleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
    props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    props.location.id = ordinal
    with context(ordinal):
        pool = check(cu.cuMemPoolCreate(props), f"cuMemPoolCreate on device {ordinal} (gemmlab's workspaces need "
                                                "the driver's stream-ordered memory pools)")
    _set_threshold(pool, _limit)
    check(cu.cuMemPoolSetAttribute(pool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 0),
          "cuMemPoolSetAttribute(REUSE_ALLOW_INTERNAL_DEPENDENCIES)")
    return pool


def pool(ordinal: int):
    """The device's workspace pool, made on first use."""
    p = _pools.get(ordinal)
    if p is None:
        with _lock:
            p = _pools.get(ordinal)
            if p is None:
                p = _pools[ordinal] = _create(ordinal)
    return p


def acquire(ordinal: int, stream: int, nbytes: int) -> int:
    """A workspace of ``nbytes`` for one call's launches on ``stream`` (a stream of device
    ``ordinal``'s primary context, or a default-stream handle while that context is current): its
    device pointer, usable by work queued on ``stream`` after this; ``release`` it after them."""
    cu = cuda()
    p = _pools.get(ordinal)
    if p is None:
        p = pool(ordinal)
    err, ptr = cu.cuMemAllocFromPoolAsync(nbytes, p, stream)
    if err:   # no context current (the driver wants one): in the device's own
        with context(ordinal):
            ptr = check(cu.cuMemAllocFromPoolAsync(nbytes, p, stream),
                        f"cuMemAllocFromPoolAsync of a {nbytes}-byte workspace")
    return int(ptr)


def release(ordinal: int, stream: int, ptr: int) -> None:
    """Give a workspace back after the launches on ``stream`` that use it."""
    cu = cuda()
    if cu.cuMemFreeAsync(ptr, stream)[0]:
        with context(ordinal):
            check(cu.cuMemFreeAsync(ptr, stream), "cuMemFreeAsync of a workspace")


def limit() -> int:
    """The bytes each device's pool keeps between calls (its release threshold)."""
    return _limit


def set_limit(nbytes: int) -> None:
    """Keep at most ``nbytes`` between calls on each device (0: return everything at each
    synchronization); takes effect at once, for the pools made already too."""
    global _limit
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"the workspace limit must be a byte count >= 0, got {nbytes!r}")
    with _lock:
        _limit = nbytes
        for p in _pools.values():
            _set_threshold(p, nbytes)


def devices() -> list[int]:
    """The devices with a workspace pool."""
    return sorted(_pools)


def _attribute(ordinal: int, attr: str) -> int:
    p = _pools.get(ordinal)
    if p is None:
        return 0
    cu = cuda()
    return int(check(cu.cuMemPoolGetAttribute(p, getattr(cu.CUmemPool_attribute, attr)), f"cuMemPoolGetAttribute({attr})"))


def reserved(ordinal: int) -> int:
    """Device memory that device's pool holds now, in use or kept (0 before its first workspace)."""
    return _attribute(ordinal, "CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT")


def in_use(ordinal: int) -> int:
    """Bytes of that device's pool taken by calls not yet given back (as far as the host knows)."""
    return _attribute(ordinal, "CU_MEMPOOL_ATTR_USED_MEM_CURRENT")


def _library_stream_captures() -> bool:
    """Whether the current stream of PyTorch or CuPy (those already imported) is capturing a graph."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
        return True
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        stream = cupy.cuda.get_current_stream()
        return bool(stream.ptr) and stream.is_capturing()   # the legacy stream 0 never captures
    return False


def empty(ordinal: int | None = None) -> None:
    """Return every pool's memory (or device ``ordinal``'s) to the device: synchronize the device,
    so that every call's release has happened, then trim the pool to nothing. Refused while the
    current stream of PyTorch or CuPy captures a CUDA graph (a synchronization would invalidate
    the capture): before touching anything."""
    if _library_stream_captures():
        raise RuntimeError("gemmlab.empty_cache() cannot run while a stream captures a CUDA graph "
                           "(it synchronizes the device); call it after the capture ends")
    cu = cuda()
    for o in ([ordinal] if ordinal is not None else sorted(_pools)):
        p = _pools.get(o)
        if p is None:
            continue
        with context(o):
            check(cu.cuCtxSynchronize(), f"cuCtxSynchronize of device {o}")
            check(cu.cuMemPoolTrimTo(p, 0), "cuMemPoolTrimTo")
