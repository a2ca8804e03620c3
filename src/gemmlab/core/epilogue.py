"""The fused epilogue: ``c = act(alpha * a @ b + beta * c + bias)`` in the GEMM's own stores.

Every rung applies one functor to its outputs (kernels/epilogue.cuh); this module checks a
call's bias and activation and gives the defines that select them. The activations themselves are
defined in core/activations.py (their CUDA, reference and derivative, each in one place).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import activations as _activations
from .dtypes import from_array_name, get as get_dtype
from .problem import ArrayInfo, check_placement, describe_array

# name -> GL_ACT code (0 is no activation)
ACTIVATIONS = {a.name: a.code for a in _activations.ALL}
BIAS_CODES = {"same": 1, "fp32": 2, "out": 3}   # GL_BIAS: a vector of the operands' type, of float, or
                                                 # of the output's type (FP8 operands)
SCALE_CODES = {"tensor": 1, "row": 2, "block": 3}   # GL_SCALE (kernels/scales.cuh): a scaled matmul's scales


@dataclass(frozen=True)
class Epilogue:
    """What a variant's stores apply beyond alpha and beta: an activation (a name of
    ``ACTIVATIONS`` or None), a bias (None, "same": the operands' dtype, or "fp32"), whether the
    bias runs along the rows C is stored in (a column-major C, stored as the row-major C^T), and
    the type the outputs are rounded to where it is not the operands' (``out``: a dtype name, the
    kernels' GL_C_DTYPE; None: the operands' own), and whether the stores also write the
    pre-activation to an auxiliary output of C's type and layout (``aux``: GL_AUX; with an
    activation only), and a scaled matmul's scales (``scale``: a key of ``SCALE_CODES``, GL_SCALE:
    "tensor", "row" or "block", two device pointers each launch passes last, the block scales'
    strides after them; None: none)."""

    activation: str | None = None
    bias: str | None = None
    bias_rows: bool = False
    out: str | None = None
    aux: bool = False
    scale: str | None = None

    @property
    def plain(self) -> bool:
        """No bias and no activation: alpha and beta alone (whatever the output type)."""
        return self.activation is None and self.bias is None

    def defines(self) -> dict[str, int]:
        """The kernel defines (none for the plain epilogue: its builds and cache keys are the
        ones every rung had before the functor)."""
        d: dict[str, int] = {}
        if self.activation is not None:
            d["GL_ACT"] = ACTIVATIONS[self.activation]
        if self.bias is not None:
            d["GL_BIAS"] = BIAS_CODES[self.bias]
            if self.bias_rows:
                d["GL_BIAS_ROW"] = 1
        if self.out is not None:
            d["GL_C_DTYPE"] = get_dtype(self.out).code
        if self.aux:
            d["GL_AUX"] = 1
        if self.scale is not None:
            d["GL_SCALE"] = SCALE_CODES[self.scale]
        return d

    def describe(self) -> str:
        parts = ([f"{self.scale}-wise scales"] if self.scale else []) + ([f"bias ({self.bias})"] if self.bias else [])
        parts += [self.activation] if self.activation else []
        return " + ".join(parts + ([f"{self.out} out"] if self.out else []) + (["aux"] if self.aux else []))


PLAIN = Epilogue()


def check_activation(activation) -> str | None:
    """The activation's name, or ValueError/TypeError naming the problem."""
    if activation is None:
        return None
    if not isinstance(activation, str):
        raise TypeError(f"activation must be a string ({', '.join(ACTIVATIONS)}) or None, "
                        f"got {type(activation).__name__}")
    return _activations.get(activation).name


def check_bias(bias, n: int, dtype: str, device: int, lib: str, out: str | None = None) -> ArrayInfo | None:
    """The bias's description after the checks a launch relies on: one dimension of length ``n``
    (C's columns), contiguous, in the operands' dtype or float32 (FP8 operands: the output's dtype
    ``out`` or float32), on C's device, of C's library (or an ``__cuda_array_interface__`` array).
    Errors name the problem."""
    if bias is None:
        return None
    info = describe_array("bias", bias, vector=True)
    if info.cols != n:
        raise ValueError(f"bias has length {info.cols} but c has N = {n} columns; the bias needs one value per column")
    if dtype == "fp8":
        if info.dtype not in (out, "fp32"):
            raise TypeError(f"bias is {info.dtype}; with FP8 operands it must be {out} (the output's dtype) or float32")
    elif info.dtype not in (dtype, "fp32"):
        raise TypeError(f"bias is {info.dtype}; it must be {dtype} (the operands' dtype) or float32")
    if info.device != device:
        raise ValueError(f"bias is on device {info.device} but c is on device {device}; all must be on one device")
    if n > 1 and info.col_major:
        raise ValueError(f"bias must be contiguous (stride 1), got a stride of {info.ld} elements; pass bias.contiguous()")
    if lib != "cai" and info.lib not in (lib, "cai"):
        raise TypeError(f"bias is a {info.lib} array but c is a {lib} array; pass one library's arrays")
    return info


def make(activation, bias_info: ArrayInfo | None, dtype: str, c_col_major: bool, out: str | None = None,
         aux: bool = False) -> Epilogue:
    """The Epilogue of a checked call (``check_activation``, ``check_bias``, ``check_aux``) whose C
    is of ``out`` (None or ``dtype``: the operands' own)."""
    out = None if out == dtype else out
    if activation is None and bias_info is None and out is None:
        return PLAIN
    kind = None if bias_info is None else ("same" if bias_info.dtype == dtype else "fp32" if bias_info.dtype == "fp32"
                                           else "out")
    return Epilogue(activation, kind, bool(kind and c_col_major), out, aux)


def check_aux(aux, activation: str | None, c: ArrayInfo, batch: int = 1) -> ArrayInfo | None:
    """The auxiliary output's description after the checks its stores rely on: it gets the
    pre-activation at C's own offsets, so it is an array like C (shape, dtype, strides, device,
    library), 16-byte aligned where C is, and not C; only with an activation (without one it would
    be C again) and for one problem (not a batch in one launch). Errors name the problem."""
    if aux is None:
        return None
    if activation is None:
        raise ValueError("aux (the pre-activation) needs an activation; without one it equals the result")
    if batch > 1:
        raise ValueError("aux is written for a single matrix product; a batch does not take one")
    info = describe_array("aux", aux)
    if (info.rows, info.cols) != (c.rows, c.cols):
        raise ValueError(f"aux is {info.rows}x{info.cols} but the result is {c.rows}x{c.cols}; they must match")
    if info.dtype != c.dtype:
        raise TypeError(f"aux is {info.dtype} but the result is {c.dtype}; they must match")
    check_placement("aux", info.device, info.lib, "the result", c.device, c.lib)
    if (info.col_major, info.ld) != (c.col_major, c.ld):
        raise ValueError(f"aux must have the result's layout and strides ({'column' if c.col_major else 'row'}-major, "
                         f"leading dimension {c.ld}); got {'column' if info.col_major else 'row'}-major with {info.ld}; "
                         f"pass an array of the result's strides")
    if c.vec_ok() and not info.vec_ok():
        raise ValueError("aux must be 16-byte aligned like the result (its stores are 16 bytes wide where the result's are)")
    return info


def out_dtype_name(out_dtype) -> str | None:
    """The dtype name (``fp32``) of an ``out_dtype`` argument: None, a name gemmlab uses ("fp32",
    "bf16"), an array library's ("float32", "bfloat16") or its dtype object (``torch.float32``,
    ``numpy.float32``). TypeError naming the argument otherwise."""
    if out_dtype is None:
        return None
    if isinstance(out_dtype, str):
        name = out_dtype
    elif isinstance(out_dtype, type):   # numpy.float32, cupy.float32
        name = out_dtype.__name__
    else:                               # numpy.dtype("float32"), torch.float32
        name = getattr(out_dtype, "name", None) or str(out_dtype).removeprefix("torch.")
    try:
        return get_dtype(name).name
    except ValueError:
        pass
    try:
        return from_array_name(name).name
    except TypeError:
        raise TypeError(f"out_dtype {out_dtype!r} is not a dtype gemmlab writes; choose float32, float16 or "
                        f"bfloat16") from None


# ---- the reference: float64, what verification compares against -------------------------------
def reference(x, activation: str | None, xp):
    """``activation`` applied to the float64 array ``x`` of the array module ``xp`` (NumPy, CuPy or torch)."""
    return x if activation is None else _activations.get(activation).reference(x, xp)
