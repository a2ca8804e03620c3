"""``gemmlab.quantize_fp8``: FP8 codes and the scales ``gemmlab.scaled_mm`` takes, from fp32, fp16 or
bf16, in one fused kernel per scaling (kernels/quantize.cu): each value's code is
``round(x / scale)`` in e4m3 or e5m2, saturated at the format's largest finite value, so that
``x ~= code * scale``:

* ``scaling="tensor"``: one scale for all of x, ``amax(|x|) / FP8_MAX`` (a 0-d array);
* ``scaling="row"``: one per row, shape (rows, 1): ``scale_a`` for an activation a (M, K), and for a
  weight w (N, K) whose transpose is scaled_mm's b, ``scale_b = scale.t()`` (1, N);
* ``scaling="block"``: one per block of ``block`` = (1, 128) (an activation's: scale (rows,
  ceil(cols/128)), scaled_mm's block-wise ``scale_a``) or (128, 128) (a weight's: scale
  (ceil(rows/128), ceil(cols/128)); for w (N, K), ``scale_b = scale.t()``).

The maximum is taken in the same kernel as the codes for a row or block; a tensor's must be known
before its first code, so that scaling reads x twice (two launches).
"""

from __future__ import annotations

import struct

from .arch import arch_number
from .compile import compile_source
from .deps import require
from .driver import check, context, cuda, device_info
from .dtypes import FP8_FORMATS, get as get_dtype
from .loading import current_stream, load_compiled
from .params import HelperParams
from .problem import describe_array

SOURCE = "quantize.cu"
THREADS = 256          # GL_Q_THREADS
MAX_BLOCKS = 65535     # grid-stride beyond it
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
SCALINGS = ("tensor", "row", "block")
BLOCKS = ((1, 128), (128, 128))   # block scaling's blocks: an activation's, a weight's
MIN_ARCH = 89          # cvt ... e4m3x2 / e5m2x2


def _format(dtype) -> str:
    """The FP8 format of ``dtype``: "e4m3", "e5m2", or torch's float8_e4m3fn / float8_e5m2."""
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    for fmt, array_name in FP8_FORMATS.items():
        if name in (fmt, array_name):
            return fmt
    raise ValueError(f"dtype {dtype!r} is not an FP8 format; choose e4m3 (float8_e4m3fn) or e5m2 (float8_e5m2)")


# Each kernel's arguments: its pointers (packed per call at byte 0, core/params.py's HelperParams), then
# its ints; ORDER: the byte offset of each argument in the kernel's order
_ARGS = {
    "quantize_rows": (struct.Struct("<QQQQ"), (32, 36, 0, 40, 8, 44, 16, 24)),   # rows cols x ldx q ldq scale amax
    "gl_amax": (struct.Struct("<QQ"), (16, 20, 0, 24, 8)),                       # rows cols x ldx amax
    "quantize_groups": (struct.Struct("<QQQ"), (24, 28, 0, 32, 8, 36, 16)),      # rows cols x ldx q ldq scale
    "quantize_tiles": (struct.Struct("<QQQ"), (24, 28, 0, 32, 8, 36, 16)),
}


def _launch(fn, name: str, grid, stream: int, ptrs: tuple, ints: tuple) -> None:
    call, order = _ARGS[name]
    block = HelperParams(call, order, ints)
    block.pack(block.buffer, 0, *ptrs)
    check(cuda().cuLaunchKernel(fn, *grid, THREADS, 1, 1, 0, stream, block.address, 0), "cuLaunchKernel")


def _scale_shape(scaling: str, block, rows: int, cols: int) -> tuple:
    if scaling == "tensor":
        return ()
    if scaling == "row":
        return (rows, 1)
    return (-(-rows // block[0]), -(-cols // block[1]))


def quantize_fp8(x, scaling: str = "tensor", dtype="e4m3", block=(1, 128)):
    """``(codes, scale)`` of a 2-D float32, float16 or bfloat16 array x (CuPy or PyTorch, on the GPU, rows
    with unit stride), per the module docstring. The codes are a torch FP8 tensor of ``dtype``'s
    format, or for CuPy a uint8 array of codes (pass its format to scaled_mm as ``a_format=``);
    the scale is float32, shape () tensor-wise, (rows, 1) row-wise, one per ``block`` block-wise."""
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {', '.join(SCALINGS)}, got {scaling!r}")
    block = tuple(block)
    if scaling == "block" and block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(map(str, BLOCKS))} (scaled_mm's block scales), got {block}")
    fmt = _format(dtype)
    info = describe_array("x", x)
    if info.dtype not in ("fp32", "fp16", "bf16"):
        raise TypeError(f"x is {info.dtype}; quantize_fp8 reads float32, float16 or bfloat16")
    if info.col_major and info.rows > 1 and info.cols > 1:
        raise ValueError("x must have rows of unit stride (row-major); pass x.contiguous()")
    rows, cols = info.rows, info.cols
    ldx = info.ld if not info.col_major else (1 if cols == 1 else cols)   # one row or one column: any ld reads it
    dev = device_info(info.device)
    if arch_number(dev.arch) < MIN_ARCH:
        raise ValueError(f"quantize_fp8 converts with sm_{MIN_ARCH}'s FP8 instructions; this is {dev.arch}")
    lib = info.lib
    if lib == "torch":
        torch = require("torch")
        q = torch.empty((rows, cols), dtype=getattr(torch, FP8_FORMATS[fmt]), device=f"cuda:{info.device}")
        scale = torch.empty(_scale_shape(scaling, block, rows, cols), dtype=torch.float32, device=q.device)
        amax = torch.zeros((1,), dtype=torch.int32, device=q.device) if scaling == "tensor" else None
        ptr = lambda t: t.data_ptr()   # noqa: E731
    else:
        cp = require("cupy")
        with cp.cuda.Device(info.device):
            q = cp.empty((rows, cols), dtype=cp.uint8)
            scale = cp.empty(_scale_shape(scaling, block, rows, cols), dtype=cp.float32)
            amax = cp.zeros((1,), dtype=cp.uint32) if scaling == "tensor" else None
        ptr = lambda t: t.data.ptr   # noqa: E731
        lib = "cupy"
    if rows == 0 or cols == 0:
        if scaling == "tensor":
            scale.fill_(1.0) if hasattr(scale, "fill_") else scale.fill(1.0)
        return q, scale
    defines = {"GL_DTYPE": get_dtype(info.dtype).code, "GL_FP8_OUT": int(fmt == "e5m2")}
    ck = compile_source(SOURCE, "quantize_rows", dev.arch, defines)
    stream = current_stream(lib, info.device)
    if scaling == "block":
        groups = block[0] == 1
        name = "quantize_groups" if groups else "quantize_tiles"
        grid = (-(-cols // 128), min(-(-rows // (THREADS // 32)), MAX_BLOCKS) if groups else -(-rows // 128), 1)
        if grid[1] > MAX_BLOCKS:
            raise ValueError(f"x has {rows} rows: 128x128 blocks take at most {128 * MAX_BLOCKS}")
        with context(info.device):
            fn = load_compiled(ck, info.device, name, name)
            _launch(fn, name, grid, stream, (info.ptr, ptr(q), ptr(scale)), (rows, cols, ldx, cols))
        return q, scale
    with context(info.device):
        rows_fn = load_compiled(ck, info.device, "quantize_rows")
        amax_ptr = 0
        if scaling == "tensor":
            amax_fn = load_compiled(ck, info.device, "gl_amax", "gl_amax")
            gx = min(-(-cols // THREADS), 8)
            gy = min(rows, max(1, 4 * dev.sm_count // gx), MAX_BLOCKS)
            amax_ptr = ptr(amax)
            _launch(amax_fn, "gl_amax", (gx, gy, 1), stream, (info.ptr, amax_ptr), (rows, cols, ldx))
        _launch(rows_fn, "quantize_rows", (min(rows, MAX_BLOCKS), 1, 1), stream, (info.ptr, ptr(q), ptr(scale), amax_ptr),
                (rows, cols, ldx, cols))
    return q, scale
