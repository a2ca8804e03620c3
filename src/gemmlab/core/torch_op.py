"""gemmlab as a PyTorch operator: ``gemmlab::matmul``, usable under ``torch.compile`` and autograd.

>>> import torch, gemmlab.torch
>>> a = torch.randn(300, 200, device="cuda", requires_grad=True)
>>> b = torch.randn(200, 100, device="cuda", requires_grad=True)
>>> y = gemmlab.torch.matmul(a, b)            # torch.ops.gemmlab.matmul(a, b, "auto")
>>> y.sum().backward()                         # a.grad = g @ b.T, b.grad = a.T @ g: two gemmlab GEMMs

The operator is a ``torch.library.custom_op`` (PyTorch >= 2.4) with a fake implementation
(shapes and dtypes only, with the same input checks as the real one), so ``torch.compile`` traces
it without graph breaks, and an autograd formula whose two products are the operator itself on
transposed views (gemmlab reads column-major views without copies). The real implementation
runs ``gemmlab.core.api.matmul`` on CUDA tensors, on torch's current stream; tensors on any
other device get a TypeError. Importing this module registers the operator (once per process).
"""

from __future__ import annotations

from typing import Optional

from . import activations
from .api import matmul as _gemmlab_matmul
from .deps import MissingDependencyError, require
from .dtypes import from_array_name
from .epilogue import check_activation
from .precision import resolve as resolve_precision
from .registry import get as get_rung

torch = require("torch")

if not hasattr(torch.library, "custom_op"):  # pragma: no cover - old torch
    raise MissingDependencyError(
        f"gemmlab.torch needs PyTorch >= 2.4 (torch.library.custom_op); found {torch.__version__}: "
        'pip install -U "gemmlab[torch]"')

OP_NAME = "gemmlab::matmul"


def check_operands(a, b, kernel: str, precision: Optional[str] = None) -> None:
    """The input checks shared by the real and the fake implementation (so a traced call fails
    the way an eager one does): at least 2-D (more: batch dimensions that broadcast, as
    torch.matmul's), one supported dtype, matching inner dimension, one device, a known kernel
    that takes the dtype, a precision the dtype (and the kernel) can take."""
    for name, x in (("a", a), ("b", b)):
        if x.dim() < 2:
            raise ValueError(f"gemmlab::matmul: {name} must have at least 2 dimensions (..., rows, cols), got "
                             f"{x.dim()}-D with shape {tuple(x.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"gemmlab::matmul: mixed dtypes: a is {a.dtype}, b is {b.dtype}; both must match")
    try:
        dtype = from_array_name(str(a.dtype).removeprefix("torch.")).name
    except TypeError as exc:
        raise TypeError(f"gemmlab::matmul: {exc}") from None
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"gemmlab::matmul: shape mismatch: a is {tuple(a.shape)}, b is {tuple(b.shape)}; "
                         "a.shape[-1] must equal b.shape[-2]")
    _out_shape(a, b)
    if a.device != b.device:
        raise ValueError(f"gemmlab::matmul: a is on {a.device} but b is on {b.device}; both must be on one device")
    if not isinstance(kernel, str):
        raise TypeError(f"gemmlab::matmul: kernel must be a string (a rung slug or 'auto'), got {type(kernel).__name__}")
    if kernel != "auto":
        get_rung(kernel).require(dtype, precision=precision)
    else:
        resolve_precision(dtype, precision)


def check_out_dtype(a, out_dtype) -> None:
    """An output dtype (None: the operands') of the operators: float32 or the other 16-bit type from
    16-bit operands, float32 only from float32 (TypeError otherwise, naming it)."""
    if out_dtype is None or out_dtype == a.dtype:
        return
    if out_dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"gemmlab::matmul: out_dtype {out_dtype} is not a dtype gemmlab writes; choose torch.float32, "
                        f"torch.float16 or torch.bfloat16")
    if a.dtype == torch.float32:
        raise TypeError(f"gemmlab::matmul: out_dtype is {out_dtype} but a and b are torch.float32; float32 operands "
                        f"write a float32 result only")


def _operand_grad(grad, a):
    """An output's gradient in the operands' dtype, for the gradient GEMMs (a result of an output
    dtype has its gradient in that dtype)."""
    return grad if grad.dtype == a.dtype else grad.to(a.dtype)


def _out_shape(a, b) -> tuple:
    """The shape of a @ b: the broadcast batch dimensions, then (M, N) (ValueError where the batch
    dimensions do not broadcast)."""
    try:
        batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except RuntimeError:
        raise ValueError(f"gemmlab::matmul: batch dimensions {tuple(a.shape[:-2])} of a and {tuple(b.shape[:-2])} of b "
                         f"do not broadcast") from None
    return batch + (a.shape[-2], b.shape[-1])


def _gemmlab_layout(x):
    """x itself when gemmlab can read it (each matrix row- or column-major with any leading
    dimension, any batch strides), else a contiguous copy (e.g. an expanded gradient with stride 0)."""
    rows, cols = x.shape[-2:]
    s0, s1 = x.stride()[-2:]
    if rows == 0 or cols == 0:
        return x
    if (s1 == 1 or cols == 1) and (rows == 1 or s0 >= cols):
        return x
    if (s0 == 1 or rows == 1) and (cols == 1 or s1 >= rows):
        return x
    return x.contiguous()


@torch.library.custom_op(OP_NAME, mutates_args=())
def _matmul_op(a: torch.Tensor, b: torch.Tensor, kernel: str, precision: Optional[str] = None,
               out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    check_operands(a, b, kernel, precision)
    check_out_dtype(a, out_dtype)
    if a.device.type != "cuda":
        raise TypeError(f"gemmlab::matmul computes on the GPU: got tensors on {a.device}; "
                        "move them to a CUDA device first (x.cuda())")
    with torch.cuda.device(a.device):
        return _gemmlab_matmul(_gemmlab_layout(a), _gemmlab_layout(b), kernel=kernel, precision=precision,
                               out_dtype=out_dtype)


@_matmul_op.register_fake
def _matmul_fake(a, b, kernel, precision=None, out_dtype=None):
    check_operands(a, b, kernel, precision)
    check_out_dtype(a, out_dtype)
    return a.new_empty(_out_shape(a, b), dtype=out_dtype or a.dtype)


def _setup_context(ctx, inputs, output):
    a, b, kernel, precision, _ = inputs
    ctx.save_for_backward(a, b)
    ctx.kernel, ctx.precision = kernel, precision


def _grads(a, b, grad, needs, kernel, precision):
    """(grad of a, grad of b) of a @ b for the output's gradient ``grad``, each None where not
    needed: grad @ b^T and a^T @ grad (b.mT, a.mT: column-major views, no copies), summed over the
    batch dimensions an operand was broadcast along. A 2-D b under a batched a takes its gradient
    as one GEMM over the folded batch, a^T (K, B M) @ grad (B M, N)."""
    grad_a = grad_b = None
    grad = _operand_grad(grad, a)
    if needs[0]:
        grad_a = _matmul_op(grad, b.mT, kernel, precision)
        if grad_a.shape != a.shape:
            grad_a = grad_a.sum_to_size(a.shape)
    if needs[1]:
        if b.dim() == 2 and a.dim() > 2:
            K, N = b.shape
            grad_b = _matmul_op(a.reshape(-1, K).mT, grad.reshape(-1, N), kernel, precision)
        else:
            grad_b = _matmul_op(a.mT, grad, kernel, precision)
            if grad_b.shape != b.shape:
                grad_b = grad_b.sum_to_size(b.shape)
    return grad_a, grad_b


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a, grad_b = _grads(a, b, grad, ctx.needs_input_grad, ctx.kernel, ctx.precision)
    return grad_a, grad_b, None, None, None


_matmul_op.register_autograd(_backward, setup_context=_setup_context)


# ---- the fused epilogue: act(a @ b + bias) ---------------------------------------------------------
EPILOGUE_OP_NAME = "gemmlab::matmul_epilogue"


def check_epilogue(a, b, bias, activation) -> None:
    """The checks of the bias and the activation shared by the real and the fake implementation."""
    check_activation(activation)
    if bias is None:
        return
    if bias.dim() != 1 or bias.shape[0] != b.shape[-1]:
        raise ValueError(f"{EPILOGUE_OP_NAME}: bias must be 1-D of length N = {b.shape[-1]}, got shape {tuple(bias.shape)}")
    if bias.dtype not in (a.dtype, torch.float32):
        raise TypeError(f"{EPILOGUE_OP_NAME}: bias is {bias.dtype}; it must be {a.dtype} (the operands') or torch.float32")
    if bias.device != a.device:
        raise ValueError(f"{EPILOGUE_OP_NAME}: bias is on {bias.device} but a is on {a.device}")


def _epilogue_shape(a, b, bias, activation, kernel, precision) -> tuple:
    """The checks of an epilogue operator's real and fake implementations alike; its output's shape."""
    check_operands(a, b, kernel, precision)
    check_epilogue(a, b, bias, activation)
    return _out_shape(a, b)


def _epilogue_gemm(name: str, a, b, bias, activation, kernel, precision, out_dtype=None):
    """act(a @ b + bias) by gemmlab on CUDA tensors, of ``out_dtype`` (None: the operands'), after
    ``_epilogue_shape``'s checks (``name``: the operator, for the error on other devices)."""
    _epilogue_shape(a, b, bias, activation, kernel, precision)
    check_out_dtype(a, out_dtype)
    if a.device.type != "cuda":
        raise TypeError(f"{name} computes on the GPU: got tensors on {a.device}; move them to a CUDA device first "
                        "(x.cuda())")
    with torch.cuda.device(a.device):
        return _gemmlab_matmul(_gemmlab_layout(a), _gemmlab_layout(b), bias=None if bias is None else bias.contiguous(),
                               activation=activation, kernel=kernel, precision=precision, out_dtype=out_dtype)


def _linear_grads(ctx, a, b, bias, grad_z) -> tuple:
    """The backward's six results from the gradient of the pre-activation z = a @ b + bias: a's and
    b's (``_grads``), the bias's (summed over every row, in FP32), None for the other arguments."""
    grad_a, grad_b = _grads(a, b, grad_z, ctx.needs_input_grad[:2], ctx.kernel, ctx.precision)
    grad_bias = None
    if bias is not None and ctx.needs_input_grad[2]:
        grad_bias = grad_z.reshape(-1, grad_z.shape[-1]).sum(0, dtype=torch.float32).to(bias.dtype)
    return grad_a, grad_b, grad_bias, None, None, None, None


@torch.library.custom_op(EPILOGUE_OP_NAME, mutates_args=())
def _epilogue_op(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], activation: Optional[str],
                 kernel: str, precision: Optional[str] = None, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    return _epilogue_gemm(EPILOGUE_OP_NAME, a, b, bias, activation, kernel, precision, out_dtype)


@_epilogue_op.register_fake
def _epilogue_fake(a, b, bias, activation, kernel, precision=None, out_dtype=None):
    shape = _epilogue_shape(a, b, bias, activation, kernel, precision)
    check_out_dtype(a, out_dtype)
    return a.new_empty(shape, dtype=out_dtype or a.dtype)


def _epilogue_setup(ctx, inputs, output):
    a, b, bias, activation, kernel, precision, out_dtype = inputs
    ctx.save_for_backward(a, b, bias)
    ctx.activation, ctx.kernel, ctx.precision, ctx.out_dtype = activation, kernel, precision, out_dtype


def _activation_backward(grad, z, activation):
    """d act(z) / dz * grad (core/activations.py: PyTorch's own backward kernel where it has one)."""
    return activations.get(activation).backward_torch(grad, z)


def _epilogue_backward(ctx, grad):
    """The pre-activation z = a @ b + bias is recomputed (one fused GEMM with the bias): what a call
    that did not want gradients when it ran, and is differentiated anyway, needs (``matmul`` takes
    the saving operator below whenever gradients are wanted)."""
    a, b, bias = ctx.saved_tensors
    if ctx.activation is None:
        grad_z = grad
    else:
        z = _epilogue_op(a, b, bias, None, ctx.kernel, ctx.precision, ctx.out_dtype)
        grad_z = _activation_backward(grad, z, ctx.activation)
    return _linear_grads(ctx, a, b, bias, grad_z)


_epilogue_op.register_autograd(_epilogue_backward, setup_context=_epilogue_setup)


# ---- the same for training: the pre-activation saved for the backward --------------------------------
# Where gradients are wanted, recomputing z = a @ b + bias in the backward costs a GEMM; saving it
# (as cuBLASLt's GELU_AUX epilogue does) costs one elementwise pass instead: the forward's GEMM writes
# z (its bias fused), PyTorch's activation makes y from it, and the backward starts from the saved z.
# Saving made the training step of a linear layer with bias and GELU faster than recomputing at every
# shape of the epilogue suite on an H200 (benchmarks/results/h200_epilogue_autograd_bf16.json), so
# ``matmul`` takes this operator whenever an operand or the bias requires a gradient. The GEMM's own
# auxiliary output (``gemm(..., aux=z)``: y and z from one kernel) measured slower there at the
# suite's large shapes, where it stores by rows and the GEMM writing z alone stores by TMA (the
# same JSON's forwards), so the operator keeps the elementwise pass.
SAVED_OP_NAME = "gemmlab::matmul_epilogue_saved"


@torch.library.custom_op(SAVED_OP_NAME, mutates_args=())
def _saved_op(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
              kernel: str, precision: Optional[str] = None,
              out_dtype: Optional[torch.dtype] = None) -> tuple[torch.Tensor, torch.Tensor]:
    check_epilogue(a, b, bias, activation)   # the activation too, before the GEMM without it
    z = _epilogue_gemm(SAVED_OP_NAME, a, b, bias, None, kernel, precision, out_dtype)
    return activations.get(activation).forward_torch(z), z


@_saved_op.register_fake
def _saved_fake(a, b, bias, activation, kernel, precision=None, out_dtype=None):
    shape = _epilogue_shape(a, b, bias, activation, kernel, precision)
    check_out_dtype(a, out_dtype)
    dtype = out_dtype or a.dtype
    return a.new_empty(shape, dtype=dtype), a.new_empty(shape, dtype=dtype)


def _saved_setup(ctx, inputs, output):
    a, b, bias, activation, kernel, precision, _ = inputs
    ctx.save_for_backward(a, b, bias, output[1])
    ctx.activation, ctx.kernel, ctx.precision = activation, kernel, precision


def _saved_backward(ctx, grad_y, grad_z):
    a, b, bias, z = ctx.saved_tensors
    g = _activation_backward(grad_y, z, ctx.activation)
    if grad_z is not None:   # z itself used downstream too
        g = g + grad_z
    return _linear_grads(ctx, a, b, bias, g)


_saved_op.register_autograd(_saved_backward, setup_context=_saved_setup)


def _wants_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def matmul(a, b, kernel: str = "auto", precision: Optional[str] = None, *, bias=None, activation: Optional[str] = None,
           out_dtype: Optional[torch.dtype] = None):
    """act(a @ b + bias) for CUDA tensors of 2 or more dimensions (batch dimensions broadcast as
    torch.matmul's) through gemmlab (``torch.ops.gemmlab.matmul``, or
    ``torch.ops.gemmlab.matmul_epilogue`` with a bias or an activation, fused into the GEMM's stores):
    differentiable in a, b and the bias, traceable by ``torch.compile(fullgraph=True)``. ``kernel``:
    a rung slug or "auto"; ``precision``: as for ``gemmlab.gemm`` (float32: "fp32", "tf32", "3xtf32";
    the gradients use it too); ``activation``: "relu", "gelu", "gelu_tanh", "silu" or None. With an
    activation and an operand or the bias requiring a gradient, the forward keeps the pre-activation
    for the backward (``torch.ops.gemmlab.matmul_epilogue_saved``: the GEMM with its bias, then
    PyTorch's activation) instead of fusing the activation and recomputing the GEMM later.
    ``out_dtype``: the result's dtype where it is not the operands' (``torch.float32`` from float16
    or bfloat16 operands, or the other 16-bit type; ``gemmlab.matmul``'s): the FP32 sums rounded once
    to it; the gradients' GEMMs take the result's gradient rounded to the operands' dtype."""
    if bias is None and activation is None:
        return torch.ops.gemmlab.matmul(a, b, kernel, precision, out_dtype)
    if activation is not None and _wants_grad(a, b, bias):
        return torch.ops.gemmlab.matmul_epilogue_saved(a, b, bias, activation, kernel, precision, out_dtype)[0]
    return torch.ops.gemmlab.matmul_epilogue(a, b, bias, activation, kernel, precision, out_dtype)


op = torch.ops.gemmlab.matmul.default

__all__ = ["matmul", "op", "check_operands", "OP_NAME", "EPILOGUE_OP_NAME", "SAVED_OP_NAME"]
