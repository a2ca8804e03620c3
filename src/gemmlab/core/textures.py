"""Texture objects of the texture rungs (7 and 12): 1-D linear fp32 textures over an operand.

Objects are cached per (device, pointer, span, texel width), so a call that reads an operand seen
before costs a dict lookup and no driver call. The cache is bounded, and it never synchronizes the
device: an evicted object is destroyed only once the last kernel that read it has finished (an
event recorded after every launch that used it, queried without blocking), and an object a kernel
read while its stream captured a CUDA graph is never destroyed (the graph may replay it at any
time). ``LOCK`` serializes the cache and the launches that read from it, so no object can be
evicted between a lookup and the launch that uses it.

An object describes raw device addresses and holds no reference to the array it was made over, so
the cache never keeps a caller's memory alive (an object read inside a captured graph is a driver
handle kept for the process's life, not memory). A pointer reused by a later allocation gets the
cached object back: the kernel reads only the operand's span (plus the rest of its last 16-byte
granule), and allocators hand out whole granules, so the bytes read are the new operand's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .driver import check, context, cuda, device_info

LOCK = threading.RLock()
CAPACITY = 64   # unpinned objects kept alive; past it the least recently used one retires


class Texture:
    """One texture object: ``handle`` (cudaTextureObject_t), the element ``offset`` of the operand
    from the texture's base, the texel width ``channels`` (4: float4, 1: float)."""

    __slots__ = ("handle", "offset", "channels", "event", "pinned")

    def __init__(self, handle: int, offset: int, channels: int):
        self.handle, self.offset, self.channels = handle, offset, channels
        self.event = None     # recorded after each launch that read it (created on first use)
        self.pinned = False   # read inside a graph capture: kept for the life of the process


_live: "OrderedDict[tuple, Texture]" = OrderedDict()   # unpinned, least recently used first
_pinned: dict[tuple, Texture] = {}
_retired: list[tuple[int, Texture]] = []                 # (ordinal, texture) waiting for its event


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


def _create(ptr: int, span_bytes: int, channels: int, ordinal: int) -> Texture:
    cu = cuda()
    info = device_info(ordinal)
    with context(ordinal):
        alloc_base, alloc_size = check(cu.cuMemGetAddressRange(ptr), "cuMemGetAddressRange")
        base, size, channels = texture_extent(ptr, span_bytes, channels, int(alloc_base), int(alloc_size),
                                              info.tex_align, info.tex1d_linear_max)
        res = cu.CUDA_RESOURCE_DESC()
        res.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_LINEAR
        res.res.linear.devPtr = base
        res.res.linear.format = cu.CUarray_format.CU_AD_FORMAT_FLOAT
        res.res.linear.numChannels = channels
        res.res.linear.sizeInBytes = size
        tex = cu.CUDA_TEXTURE_DESC()
        tex.filterMode = cu.CUfilter_mode.CU_TR_FILTER_MODE_POINT
        handle = int(check(cu.cuTexObjectCreate(res, tex, None), "cuTexObjectCreate"))
    return Texture(handle, (ptr - base) // 4, channels)


def acquire(ptr: int, span_bytes: int, channels: int, ordinal: int) -> Texture:
    """The texture over ``span_bytes`` at ``ptr`` (``channels``: 4 when float4 fetches are
    legal for the operand, else 1; the result may say 1 where 4 was asked, see
    ``texture_extent``). Call with ``LOCK`` held through the launch that reads it."""
    key = (ordinal, ptr, span_bytes, channels)
    tex = _pinned.get(key)
    if tex is not None:
        return tex
    tex = _live.get(key)
    if tex is not None:
        _live.move_to_end(key)
        return tex
    tex = _create(ptr, span_bytes, channels, ordinal)
    _live[key] = tex
    _sweep()
    while len(_live) > CAPACITY:
        (dev, *_), old = _live.popitem(last=False)
        _retired.append((dev, old))
    return tex


def used(textures, stream: int, ordinal: int, capturing: bool) -> None:
    """After a launch on ``stream`` read ``textures``: remember when they are free again (an
    event), or pin them for good when the launch was captured into a graph."""
    cu = cuda()
    with context(ordinal):
        for tex in textures:
            if capturing:
                tex.pinned = True
                for key in [k for k, t in _live.items() if t is tex]:
                    _pinned[key] = _live.pop(key)
                continue
            if tex.event is None:
                tex.event = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
            check(cu.cuEventRecord(tex.event, stream), "cuEventRecord")


def retire_all() -> None:
    """Retire every unpinned object and destroy those no kernel still reads (``gemmlab.empty_cache``;
    after a synchronization that is all of them). Call with ``LOCK`` held."""
    while _live:
        (dev, *_), old = _live.popitem(last=False)
        _retired.append((dev, old))
    _sweep()


def _sweep() -> None:
    """Destroy the retired objects whose last reader has finished (never waits)."""
    cu = cuda()
    keep = []
    for ordinal, tex in _retired:
        if tex.pinned:
            continue
        with context(ordinal):
            if tex.event is not None:
                if cu.cuEventQuery(tex.event)[0]:   # not ready (or not queryable now, e.g. during a
                    keep.append((ordinal, tex))      # capture): ask again at the next sweep
                    continue
                check(cu.cuEventDestroy(tex.event), "cuEventDestroy")
            check(cu.cuTexObjectDestroy(tex.handle), "cuTexObjectDestroy")
    _retired[:] = keep
