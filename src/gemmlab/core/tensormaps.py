"""TMA tensor maps of the WGMMA rungs (19, 21, 22): one 2-D map per operand (3-D for rung 22's
3xtf32 operands, two planes), built on the host and passed
to the kernel by value (a 128-byte ``__grid_constant__`` parameter after the standard ones); rungs
21 and 22 also take one of C (``output_map``), which their epilogues store through.

``operand_map`` is the pure part: from an operand as the kernel sees it (rows, columns, leading
dimension, layout, dtype) and the tile configuration, the arguments of ``cuTensorMapEncodeTiled``
less the base pointer: dimensions and byte strides (innermost, contiguous dimension first), the
box one TMA instruction copies, and whether the operand is K-major or MN-major for wgmma. An
operand TMA cannot describe (base not 16-byte aligned, or a byte stride that is not a multiple of
16) has none: the kernel's variant for it copies with threads instead. Those are exactly the operands
without 16-byte vector access (``ArrayInfo.vec_ok``: GL_VEC_A / GL_VEC_B = 0), so the variant the
launch picks already says which operands get a map.

``acquire`` is the cache: the 128 encoded bytes per (device, pointer, map), so a call that reads an
operand seen before costs a dict lookup. Encoding is a host-only driver call (no device work, no
synchronization, legal while a stream captures a graph), and a map owns no driver resource: the
kernel parameter is a copy. So an evicted entry needs no clean-up and a captured graph keeps its
own copy.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from .dtypes import get as get_dtype

SWIZZLE_BYTES = 128     # the 128-byte swizzle: a box's inner side is one swizzle row
MAP_BYTES = 128         # sizeof(CUtensorMap)
CAPACITY = 256          # cached maps; past it the least recently used is forgotten
_TENSOR_MAP_TYPE = {"fp16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
                    "fp32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",   # fp32: rung 22 (TF32 wgmma)
                    "fp8": "CU_TENSOR_MAP_DATA_TYPE_UINT8"}      # fp8: rung 25 (bytes; wgmma reads their format)
# The L2 promotion an operand map is encoded with (the L2PROMO parameter of the rungs with maps), in
# bytes: a box row of 128 bytes is fetched into L2 as an aligned 128 or 256 bytes (64: no wider than
# asked for, our rows being 128 bytes). CUTLASS encodes 128.
L2_PROMOTION = {64: "CU_TENSOR_MAP_L2_PROMOTION_L2_64B", 128: "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
                256: "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}
# L2PROMO=0, the default: each map's promotion by its rows. Rows whose strides are 32-byte multiples
# take 256, what the rungs were built and tuned with. Rows 16 bytes off a 32-byte multiple (FP8
# K-major at K % 32 == 16, 16-bit at 8 mod 16 elements) start every other box row in the middle of
# a sector pair: fetched at 256 the L2 served about twice the requests for the same bytes and bound
# the kernel (benchmarks/profiles/h200_ncu_fp8_k16.csv.gz); at 128 they ran faster in every
# precision, and never slower beyond the timing's noise (benchmarks/results/h200_fp8_k16.json.gz,
# h200_fp8_k16_heldout.json.gz).
L2_PROMOTION_BY_ROWS = 0
L2_PROMOTION_DEFAULT = L2_PROMOTION_BY_ROWS
L2_PROMOTION_SETTINGS = (L2_PROMOTION_BY_ROWS, *L2_PROMOTION)
ALIGNED_PROMOTION, MISALIGNED_PROMOTION = 256, 128
ROW_ALIGNMENT = 32   # bytes: rows whose strides are multiples of this take ALIGNED_PROMOTION by rows


def promotion_for(setting: int, strides: tuple[int, ...]) -> int:
    """The promotion (bytes) a map of these byte ``strides`` is encoded with under the L2PROMO
    ``setting``: the setting where it names one, else by the rows (``L2_PROMOTION_BY_ROWS``)."""
    if setting != L2_PROMOTION_BY_ROWS:
        return setting
    return ALIGNED_PROMOTION if all(s % ROW_ALIGNMENT == 0 for s in strides) else MISALIGNED_PROMOTION


@dataclass(frozen=True)
class MapArgs:
    """cuTensorMapEncodeTiled's arguments for one operand, less the base pointer."""

    dtype: str                      # "fp16" | "bf16" | "fp32" | "fp8"
    dims: tuple[int, ...]           # elements: (inner = contiguous, outer[, planes])
    strides: tuple[int, ...]        # bytes from one outer index to the next[, from one plane to the next]
    box: tuple[int, ...]            # elements per TMA box: (inner, outer[, 1])
    element_strides: tuple[int, ...] = (1, 1)
    swizzle: int = SWIZZLE_BYTES    # bytes
    k_major: bool = True            # K is the contiguous dimension (wgmma without transpose)
    promotion: int = ALIGNED_PROMOTION   # bytes the L2 fetches per row read (a key of L2_PROMOTION)


def operand_map(operand: str, rows: int, cols: int, ld: int, col_major: bool, dtype: str,
                cfg: dict, planes: int = 1, plane_bytes: int = 0, batch: tuple[int, int] | None = None,
                box_rows: int | None = None) -> MapArgs:
    """The map of operand ``"A"`` (rows = M, cols = K) or ``"B"`` (rows = K, cols = N), as the kernel
    sees it (kernels/common.cuh: C row-major, A and B either layout), for the tile ``cfg`` (BM, BN,
    BK). The box's inner side is one 128-byte swizzle row (64 16-bit elements); its outer side is
    the tile's extent along the outer dimension: BM or BN for a K-major operand (row-major A,
    column-major B), BK for an MN-major one. With ``CLUSTER`` > 1 (rung 21) B's outer side is split in
    CLUSTER parts: each block of a cluster loads one part and multicasts it to all. ``planes`` 2
    (rung 22's 3xtf32, the split pack's big and small TF32 parts, ``plane_bytes`` apart): a 3-D map
    (inner, outer, plane) whose box is one plane's, so rows past the operand's edge read as zeros in
    both planes. ``batch`` (count, stride in elements): an operand that varies over a batch in one
    launch (rung 21, GL_BATCHED), a 3-D map (inner, outer, element) whose box is one element's, so the
    copy engine clips a box at the element's own edges. ``box_rows``: a K-major operand's box of
    that many rows of the tile, which the kernel loads box by box (the grouped rungs' A, each tile's
    boxes up to its group's end: kernels/ring.cuh, GROUP_BOXES). ValueError for anything else."""
    if operand not in ("A", "B"):
        raise ValueError(f"operand must be 'A' or 'B', got {operand!r}")
    if dtype not in _TENSOR_MAP_TYPE:
        raise ValueError(f"tensor maps are built for fp16, bf16, fp32 and fp8 operands, not {dtype}")
    if min(rows, cols) < 1:
        raise ValueError(f"operand {operand} is {rows}x{cols}; a tensor map needs at least one element")
    itemsize = get_dtype(dtype).itemsize
    inner, outer = (rows, cols) if col_major else (cols, rows)
    if ld < inner:
        raise ValueError(f"operand {operand}: leading dimension {ld} is shorter than its contiguous extent {inner}")
    # K-major: the contiguous dimension is K (row-major A: cols; column-major B: rows)
    k_major = (not col_major) if operand == "A" else col_major
    tile = cfg["BM"] if operand == "A" else cfg["BN"]
    parts = cfg.get("CLUSTER", 1) if operand == "B" else 1
    if box_rows is not None:
        if not k_major or tile % box_rows:
            raise ValueError(f"operand {operand}: boxes of {box_rows} rows need a K-major operand whose tile's "
                             f"{tile} rows they divide")
        tile = box_rows
    box = (SWIZZLE_BYTES // itemsize, (tile if k_major else cfg["BK"]) // parts)
    setting = cfg.get("L2PROMO", L2_PROMOTION_DEFAULT)
    if setting not in L2_PROMOTION_SETTINGS:
        raise ValueError(f"operand {operand}: L2 promotion {setting!r} bytes; the copy engine takes {sorted(L2_PROMOTION)} "
                         f"(0: by the rows)")
    if batch is not None and planes != 1:
        raise ValueError(f"operand {operand}: a batch of split (3xtf32) operands would need 4-D maps")
    if planes == 1:
        args = _batched(MapArgs(dtype, (inner, outer), (ld * itemsize,), box, k_major=k_major), operand, batch, itemsize)
    elif planes != 2 or plane_bytes < outer * ld * itemsize or plane_bytes % 16:
        raise ValueError(f"operand {operand}: {planes} planes {plane_bytes} bytes apart; a split operand has 2, "
                         f"apart by at least its {outer * ld * itemsize} bytes and by a multiple of 16")
    else:
        args = MapArgs(dtype, (inner, outer, planes), (ld * itemsize, plane_bytes), box + (1,), (1, 1, 1), k_major=k_major)
    return replace(args, promotion=promotion_for(setting, args.strides))


def _batched(args: MapArgs, name: str, batch: tuple[int, int] | None, itemsize: int) -> MapArgs:
    """``args`` with a third dimension, the batch's ``(count, stride in elements)`` (None: as it is),
    whose box is one element: the stride positive and a multiple of 16 bytes (ValueError)."""
    if batch is None:
        return args
    count, stride = batch
    if stride <= 0 or (stride * itemsize) % 16:
        raise ValueError(f"operand {name}: batch stride {stride} elements; a tensor map needs a positive stride of "
                         f"whole 16-byte vectors")
    return replace(args, dims=args.dims + (count,), strides=args.strides + (stride * itemsize,), box=args.box + (1,),
                   element_strides=(1, 1, 1))


# Rows of the output box of the Hopper epilogue parts, by C's element size: 16 rows of 64 16-bit
# outputs, a consumer warp's rows of an m64 block (kernels/ws_epi16.cuh); 32 rows of 32 FP32, half a
# warpgroup's chunk (kernels/ws_epi32.cuh). Either way one 128-byte swizzle row wide.
STORE_BOX_ROWS = {2: 16, 4: 32}


def storable(cols: int, ld: int, dtype: str) -> bool:
    """Whether a TMA store (rungs 21 and 22) can write a C of rows of ``cols`` outputs (a column-major
    C: columns of ``cols`` rows) with leading dimension ``ld`` (the base's 16-byte alignment is the
    pointer's: ``ArrayInfo.vec_ok``): a row stride that is a multiple of 16 bytes, and rows of whole
    16-byte chunks. The copy engine writes whole chunks: a row ending inside one would have the
    chunk's rest written past it (on the H100: 77-column rows of a 96-wide buffer got columns 77-79
    overwritten), into memory that is not C's. The kernels check the second themselves
    (tma_store_now in kernels/21_wgmma_ws.cu and 22_wgmma_tf32.cu)."""
    row = get_dtype(dtype).itemsize
    return (ld * row) % 16 == 0 and (cols * row) % 16 == 0


def output_map(rows: int, cols: int, ld: int, dtype: str, batch: tuple[int, int] | None = None) -> MapArgs:
    """The map an epilogue stores C through (``Rung.store_map``, EPI_TMA=1): C as the kernel sees it,
    ``rows`` contiguous runs of ``cols`` outputs, ``ld`` apart (a row-major C: M x N; rung 22's
    column-major C of its transposed problem: N columns of M), of ``dtype`` (C's own: rung 21 writes an
    FP32 C from 16-bit operands too), in boxes of ``STORE_BOX_ROWS`` rows x one 128-byte swizzle row,
    as the epilogue part of C's type stages them. TMA clips a box at the last row and
    the last 16-byte chunk of a row: any number of rows will do, but C must be ``storable``.
    ``batch`` (count, stride in elements): C of a batch in one launch, a 3-D map (GL_BATCHED).
    ValueError for anything else."""
    if dtype not in _TENSOR_MAP_TYPE:
        raise ValueError(f"the output map is built for fp16, bf16 and fp32 outputs, not {dtype}")
    if min(rows, cols) < 1:
        raise ValueError(f"output C is {rows}x{cols}; a tensor map needs at least one element")
    itemsize = get_dtype(dtype).itemsize
    box_rows = STORE_BOX_ROWS[itemsize]
    if ld < cols:
        raise ValueError(f"output C: leading dimension {ld} is shorter than its row of {cols}")
    if not storable(cols, ld, dtype):
        raise ValueError(f"output C: rows of {cols * itemsize} bytes, {ld * itemsize} bytes apart; TMA stores "
                         f"need both multiples of 16 (it writes whole 16-byte chunks)")
    return _batched(MapArgs(dtype, (cols, rows), (ld * itemsize,), (SWIZZLE_BYTES // itemsize, box_rows), k_major=False),
                    "C", batch, itemsize)


def encode(args: MapArgs, ptr: int) -> bytes:
    """The 128 bytes of the CUtensorMap for ``args`` over the memory at ``ptr`` (driver call,
    host only)."""
    from .driver import check, cuda

    cu = cuda()
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    tmap = check(cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, _TENSOR_MAP_TYPE[args.dtype]), len(args.dims), ptr,
        [u64(d) for d in args.dims], [u64(s) for s in args.strides],
        [u32(b) for b in args.box], [u32(e) for e in args.element_strides],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        getattr(cu.CUtensorMapL2promotion, L2_PROMOTION[args.promotion]),
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tmap.getPtr(), MAP_BYTES)


def _in_context(encoder, args: MapArgs, ptr: int, ordinal: int) -> bytes:
    """``encoder(args, ptr)`` with the device's primary context current: the driver refuses to encode
    without a current context (CUDA_ERROR_INVALID_CONTEXT), as in a thread that has not touched the
    device yet (PyTorch's autograd thread running a backward that makes a new plan). Tried as it is
    first (the context is nearly always current); a failure for any other reason fails again in
    the context and raises."""
    from .driver import CudaError, context

    try:
        return encoder(args, ptr)
    except CudaError:
        pass
    with context(ordinal):
        return encoder(args, ptr)


class MapCache:
    """Encoded maps by (device, pointer, map arguments), least recently used forgotten first.
    ``encoder(args, ptr)`` makes the bytes (``encode``); ``encoded`` counts its calls."""

    def __init__(self, encoder=encode, capacity: int = CAPACITY):
        self._encoder = encoder
        self._capacity = capacity
        self._maps: "OrderedDict[tuple, bytes]" = OrderedDict()
        self._lock = threading.Lock()
        self.encoded = 0

    def acquire(self, ordinal: int, ptr: int, args: MapArgs) -> bytes:
        key = (ordinal, ptr, args)
        with self._lock:
            hit = self._maps.get(key)
            if hit is not None:
                self._maps.move_to_end(key)
                return hit
        made = _in_context(self._encoder, args, ptr, ordinal)
        self.encoded += 1
        if len(made) != MAP_BYTES:
            raise RuntimeError(f"a tensor map is {MAP_BYTES} bytes; the encoder gave {len(made)}")
        with self._lock:
            self._maps[key] = made
            while len(self._maps) > self._capacity:
                self._maps.popitem(last=False)
        return made

    def __len__(self) -> int:
        return len(self._maps)

    def clear(self) -> None:
        with self._lock:
            self._maps.clear()


CACHE = MapCache()
