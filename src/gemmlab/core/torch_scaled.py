"""gemmlab's FP8 scaled products as PyTorch operators: ``gemmlab::scaled_mm`` and
``gemmlab::scaled_grouped_mm`` (mixture of experts), traceable by ``torch.compile`` (each a
``torch.library.custom_op`` with a fake implementation that makes the same checks of shapes and
dtypes as the real one, so a traced call fails the way an eager one does).

>>> import torch, gemmlab.torch
>>> y = gemmlab.torch.scaled_mm(x8, w8.t(), sx, sw.t(), out_dtype=torch.bfloat16)
>>> y = gemmlab.torch.scaled_grouped_mm(x8, w8.transpose(-2, -1), sx, sw, offs)   # (T, K) x (G, K, N)

The real implementations are ``gemmlab.scaled_mm`` (core/scaled.py) and
``gemmlab.scaled_grouped_mm`` (core/scaled_grouped.py) on torch's current stream. Like
``torch._scaled_mm`` they have no autograd formula: FP8 training quantizes its gradients itself and
calls the product again. Importing gemmlab.torch registers them (once per process).
"""

from __future__ import annotations

from typing import Optional

from .deps import require
from .scaled import scaled_mm as _scaled_mm
from .scaled_grouped import scaled_grouped_mm as _scaled_grouped_mm

torch = require("torch")

OP_NAME = "gemmlab::scaled_mm"
GROUPED_OP_NAME = "gemmlab::scaled_grouped_mm"
FP8 = ("float8_e4m3fn", "float8_e5m2")


def check_scaled(a, b, scale_a, scale_b, out_dtype) -> None:
    """The checks the fake implementation shares with the real one: 2-D FP8 operands of matching inner
    dimension on one device, float32 scales, an output dtype gemmlab writes."""
    for name, x in (("a", a), ("b", b)):
        if x.dim() != 2:
            raise ValueError(f"{OP_NAME}: {name} must be 2-D, got shape {tuple(x.shape)}")
        if str(x.dtype).removeprefix("torch.") not in FP8:
            raise TypeError(f"{OP_NAME}: {name} is {x.dtype}; it multiplies torch.float8_e4m3fn or torch.float8_e5m2")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{OP_NAME}: shape mismatch: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise TypeError(f"{OP_NAME}: {name} is {s.dtype}; scales must be torch.float32")
    if out_dtype not in (None, torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{OP_NAME}: out_dtype {out_dtype} is not one gemmlab writes (float32, float16, bfloat16)")
    if len({a.device, b.device, scale_a.device, scale_b.device}) != 1:
        raise ValueError(f"{OP_NAME}: a, b and the scales must be on one device")


@torch.library.custom_op(OP_NAME, mutates_args=())
def _scaled_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
               bias: Optional[torch.Tensor] = None, scale_result: Optional[torch.Tensor] = None,
               out_dtype: Optional[torch.dtype] = None, use_fast_accum: bool = False) -> torch.Tensor:
    check_scaled(a, b, scale_a, scale_b, out_dtype)
    if a.device.type != "cuda":
        raise TypeError(f"{OP_NAME} computes on the GPU: got tensors on {a.device}")
    with torch.cuda.device(a.device):
        return _scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype or torch.bfloat16,
                          scale_result=scale_result, use_fast_accum=use_fast_accum)


@_scaled_op.register_fake
def _scaled_fake(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    check_scaled(a, b, scale_a, scale_b, out_dtype)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.bfloat16)


def scaled_mm(a, b, scale_a, scale_b, *, bias=None, scale_result=None, out_dtype: Optional[torch.dtype] = None,
              use_fast_accum: bool = False):
    """``torch.ops.gemmlab.scaled_mm``: ``gemmlab.scaled_mm`` on PyTorch tensors (core/scaled.py says
    what it takes), bfloat16 unless ``out_dtype`` says otherwise; traceable by
    ``torch.compile(fullgraph=True)``."""
    return torch.ops.gemmlab.scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)


def scaled_grouped_shape(a, b, scale_a, scale_b, offs, out_dtype) -> tuple:
    """The grouped product's shape (2-D a with offs: (T, N); 3-D a without: (G, M, N)) after the
    checks the fake shares with the real implementation: FP8 operands, float32 scales and int32
    offsets on one device, matching groups and K, an output dtype gemmlab writes (the scales' shapes
    are the real implementation's to check: they name the scaling)."""
    name = GROUPED_OP_NAME
    for x_name, x in (("a", a), ("b", b)):
        if str(x.dtype).removeprefix("torch.") not in FP8:
            raise TypeError(f"{name}: {x_name} is {x.dtype}; it multiplies torch.float8_e4m3fn or torch.float8_e5m2")
    for s_name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise TypeError(f"{name}: {s_name} is {s.dtype}; scales must be torch.float32")
    if out_dtype not in (None, torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{name}: out_dtype {out_dtype} is not one gemmlab writes (float32, float16, bfloat16)")
    if len({a.device, b.device, scale_a.device, scale_b.device} | ({offs.device} if offs is not None else set())) != 1:
        raise ValueError(f"{name}: a, b, the scales and offs must be on one device")
    if offs is not None and (offs.dtype != torch.int32 or offs.dim() != 1):
        raise TypeError(f"{name}: offs must be a 1-D torch.int32 tensor, got {offs.dtype} of shape {tuple(offs.shape)}")
    if b.dim() == 3 and a.dim() == 2 and offs is not None and a.shape[1] == b.shape[1] and offs.shape[0] == b.shape[0]:
        return (a.shape[0], b.shape[2])
    if b.dim() == 3 and a.dim() == 3 and offs is None and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]:
        return (a.shape[0], a.shape[1], b.shape[2])
    raise ValueError(f"{name}: takes a (T, K) with offs or a (G, M, K) without, and b (G, K, N); got a "
                     f"{tuple(a.shape)}, b {tuple(b.shape)}" + (f", offs {tuple(offs.shape)}" if offs is not None else ""))


@torch.library.custom_op(GROUPED_OP_NAME, mutates_args=())
def _scaled_grouped_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                       offs: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                       out_dtype: Optional[torch.dtype] = None, use_fast_accum: bool = False) -> torch.Tensor:
    scaled_grouped_shape(a, b, scale_a, scale_b, offs, out_dtype)
    if a.device.type != "cuda":
        raise TypeError(f"{GROUPED_OP_NAME} computes on the GPU: got tensors on {a.device}")
    with torch.cuda.device(a.device):
        # the offsets' and scales' checks read values back: a traced or graph-captured call never does
        return _scaled_grouped_mm(a, b, scale_a, scale_b, offs, bias=bias, out_dtype=out_dtype or torch.bfloat16,
                                  use_fast_accum=use_fast_accum, check=False, check_finite=False)


@_scaled_grouped_op.register_fake
def _scaled_grouped_fake(a, b, scale_a, scale_b, offs=None, bias=None, out_dtype=None, use_fast_accum=False):
    shape = scaled_grouped_shape(a, b, scale_a, scale_b, offs, out_dtype)
    return a.new_empty(shape, dtype=out_dtype or torch.bfloat16)


def scaled_grouped_mm(a, b, scale_a, scale_b, offs=None, *, bias=None, out_dtype: Optional[torch.dtype] = None,
                      use_fast_accum: bool = False):
    """``torch.ops.gemmlab.scaled_grouped_mm``: ``gemmlab.scaled_grouped_mm`` on PyTorch tensors
    (core/scaled_grouped.py says the forms and scalings), bfloat16 unless ``out_dtype`` says
    otherwise; traceable by ``torch.compile(fullgraph=True)``."""
    return torch.ops.gemmlab.scaled_grouped_mm(a, b, scale_a, scale_b, offs, bias, out_dtype, use_fast_accum)
