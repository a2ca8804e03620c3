"""gemmlab's grouped GEMM as a PyTorch operator: ``gemmlab::grouped_mm``, with autograd and a fake
implementation (``torch.compile`` traces it; the fake makes the real one's checks of shapes and
dtypes, so a traced call fails the way an eager one does).

>>> import torch, gemmlab.torch
>>> y = gemmlab.torch.grouped_mm(x_sorted, w.transpose(-2, -1), offs)   # (T, K) x (G, K, N) -> (T, N)

The real implementation is ``gemmlab.grouped_mm`` (core/grouped.py) on torch's current stream, with
its three forms. The backward of each form is grouped products again: for 2-D x 3-D,
grad_a = grouped_mm(grad, b^T, offs) and grad_b = grouped_mm(a^T, grad, offs) (the form over K);
for 3-D x 3-D batched products; for 2-D x 2-D over K, grad_a and grad_b are 2-D x 3-D products; a
bias's gradient is each group's sum of its rows of grad (found on the device). Gradients are
computed in the operands' dtype (the bias's in its own). Importing gemmlab.torch
registers the operator (once per process).
"""

from __future__ import annotations

from typing import Optional

from .deps import require
from .grouped import grouped_mm as _grouped_mm

torch = require("torch")

OP_NAME = "gemmlab::grouped_mm"
DTYPES = (torch.float16, torch.bfloat16)


def grouped_shape(a, b, offs, bias=None) -> tuple:
    """The result's shape for the three forms (ValueError naming the problem otherwise), and the
    checks the fake shares with the real implementation: 16-bit operands of one dtype and device,
    int32 offsets where a form takes them, a bias of one row of N per group where one is given."""
    shape = _shape(a, b, offs)
    if bias is not None:
        if len(shape) == 3 and offs is not None:
            raise ValueError(f"{OP_NAME}: the form over K (the weight gradient) takes no bias")
        groups = b.shape[0]
        if tuple(bias.shape) != (groups, shape[-1]) or bias.dtype not in (a.dtype, torch.float32):
            raise ValueError(f"{OP_NAME}: bias must be ({groups}, {shape[-1]}) of {a.dtype} or torch.float32, got "
                             f"{tuple(bias.shape)} {bias.dtype}")
    return shape


def _shape(a, b, offs) -> tuple:
    if a.dtype not in DTYPES or b.dtype != a.dtype:
        raise TypeError(f"{OP_NAME}: a is {a.dtype} and b is {b.dtype}; both must be float16 or both bfloat16")
    if a.device != b.device or (offs is not None and offs.device != a.device):
        raise ValueError(f"{OP_NAME}: a, b and offs must be on one device")
    if offs is not None and (offs.dtype != torch.int32 or offs.dim() != 1):
        raise TypeError(f"{OP_NAME}: offs must be a 1-D torch.int32 tensor, got {offs.dtype} of shape {tuple(offs.shape)}")
    if a.dim() == 2 and b.dim() == 3 and offs is not None:
        if a.shape[1] != b.shape[1] or offs.shape[0] != b.shape[0]:
            raise ValueError(f"{OP_NAME}: a {tuple(a.shape)}, b {tuple(b.shape)} and offs {tuple(offs.shape)} do not "
                             f"match (a.shape[1] == b.shape[1], one offset per group)")
        return (a.shape[0], b.shape[2])
    if a.dim() == 3 and b.dim() == 3 and offs is None:
        if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
            raise ValueError(f"{OP_NAME}: a {tuple(a.shape)} and b {tuple(b.shape)} do not match")
        return (a.shape[0], a.shape[1], b.shape[2])
    if a.dim() == 2 and b.dim() == 2 and offs is not None:
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"{OP_NAME}: a {tuple(a.shape)} and b {tuple(b.shape)} do not match")
        return (offs.shape[0], a.shape[0], b.shape[1])
    raise ValueError(f"{OP_NAME}: takes 2-D x 3-D with offs, 3-D x 3-D without, or 2-D x 2-D with offs over K; got "
                     f"{a.dim()}-D x {b.dim()}-D" + (" with offs" if offs is not None else " without offs"))


@torch.library.custom_op(OP_NAME, mutates_args=())
def _grouped_op(a: torch.Tensor, b: torch.Tensor, offs: Optional[torch.Tensor] = None,
                bias: Optional[torch.Tensor] = None, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    grouped_shape(a, b, offs, bias)
    if a.device.type != "cuda":
        raise TypeError(f"{OP_NAME} computes on the GPU: got tensors on {a.device}")
    with torch.cuda.device(a.device):
        # the checks of offs are the fake's and the kernel's: a traced or graph-captured call never
        # reads them back
        return _grouped_mm(a, b, offs, bias=bias, out_dtype=out_dtype, check=False)


@_grouped_op.register_fake
def _grouped_fake(a, b, offs=None, bias=None, out_dtype=None):
    return a.new_empty(grouped_shape(a, b, offs, bias), dtype=out_dtype or a.dtype)


def _setup(ctx, inputs, output):
    a, b, offs, bias, _ = inputs
    ctx.save_for_backward(a, b, offs)
    ctx.bias_dtype = None if bias is None else bias.dtype


def _bias_grad(grad, offs, groups: int, dtype):
    """Each group's sum of its rows of ``grad``: the tokens' rows found from offs on the device
    (searchsorted, no host synchronization), or 3-D x 3-D each group's own."""
    if grad.dim() == 3:
        return grad.float().sum(dim=1).to(dtype)
    rows = torch.arange(grad.shape[0], device=grad.device, dtype=offs.dtype)
    group = torch.searchsorted(offs, rows, right=True).clamp_(max=groups - 1)
    return torch.zeros(groups, grad.shape[1], device=grad.device, dtype=torch.float32).index_add_(
        0, group, grad.float()).to(dtype)


def _backward(ctx, grad):
    a, b, offs = ctx.saved_tensors
    gbias = None
    if ctx.bias_dtype is not None and ctx.needs_input_grad[3]:
        gbias = _bias_grad(grad, offs, b.shape[0], ctx.bias_dtype)
    grad = grad.to(a.dtype)
    op = torch.ops.gemmlab.grouped_mm
    ga = gb = None
    if a.dim() == 2 and b.dim() == 3:      # (T, K) x (G, K, N): dA (T, K), dB (G, K, N) over the tokens
        if ctx.needs_input_grad[0]:
            ga = op(grad, b.transpose(-2, -1), offs, None, None)
        if ctx.needs_input_grad[1]:
            gb = op(a.t(), grad, offs, None, None)
    elif a.dim() == 3:                     # equal groups: batched
        if ctx.needs_input_grad[0]:
            ga = op(grad, b.transpose(-2, -1), None, None, None)
        if ctx.needs_input_grad[1]:
            gb = op(a.transpose(-2, -1), grad, None, None, None)
    else:                                  # (M, T) x (T, N) over K -> (G, M, N): dA (M, T), dB (T, N)
        if ctx.needs_input_grad[0]:
            ga = op(b, grad.transpose(-2, -1), offs, None, None).t()
        if ctx.needs_input_grad[1]:
            gb = op(a.t(), grad, offs, None, None)
    return ga, gb, None, gbias, None


torch.library.register_autograd(OP_NAME, _backward, setup_context=_setup)


def grouped_mm(a, b, offs=None, *, bias=None, out_dtype: Optional[torch.dtype] = None):
    """``torch.ops.gemmlab.grouped_mm``: ``gemmlab.grouped_mm`` on PyTorch tensors (core/grouped.py
    says the forms; ``bias`` (G, N), one row per group, fused into the groups of rows' stores),
    differentiable and traceable by ``torch.compile(fullgraph=True)``. The offsets are not read back
    to be checked (use ``gemmlab.grouped_mm`` for that): bad ones lose rows."""
    return torch.ops.gemmlab.grouped_mm(a, b, offs, bias, out_dtype)
