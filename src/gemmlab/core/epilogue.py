"""The fused epilogue: ``c = act(alpha * a @ b + beta * c + bias)`` in the GEMM's own stores.

Every rung applies one functor to its outputs (kernels/epilogue.cuh); this module names its
activations, checks a call's bias and activation, and gives the defines that select them. An
activation is one entry of ``ACTIVATIONS`` here and one case of ``gl_act`` there; the reference
formulas (``reference``) are what the verification compares against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .problem import ArrayInfo, describe_array

# name -> GL_ACT code of kernels/epilogue.cuh (0 is no activation)
ACTIVATIONS = {"relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}
BIAS_CODES = {"same": 1, "fp32": 2}   # GL_BIAS: a vector of the operands' type, or of float


@dataclass(frozen=True)
class Epilogue:
    """What a variant's stores apply beyond alpha and beta: an activation (a name of
    ``ACTIVATIONS`` or None), a bias (None, "same": the operands' dtype, or "fp32") and whether the
    bias runs along the rows C is stored in (a column-major C, stored as the row-major C^T)."""

    activation: str | None = None
    bias: str | None = None
    bias_rows: bool = False

    @property
    def plain(self) -> bool:
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
        return d

    def describe(self) -> str:
        parts = ([f"bias ({self.bias})"] if self.bias else []) + ([self.activation] if self.activation else [])
        return " + ".join(parts)


PLAIN = Epilogue()


def check_activation(activation) -> str | None:
    """The activation's name, or ValueError/TypeError naming the problem."""
    if activation is None:
        return None
    if not isinstance(activation, str):
        raise TypeError(f"activation must be a string ({', '.join(ACTIVATIONS)}) or None, "
                        f"got {type(activation).__name__}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; gemmlab fuses {', '.join(ACTIVATIONS)}")
    return activation


def check_bias(bias, n: int, dtype: str, device: int, lib: str) -> ArrayInfo | None:
    """The bias's description after the checks a launch relies on: one dimension of length ``n``
    (C's columns), contiguous, in the operands' dtype or float32, on C's device, of C's library
    (or an ``__cuda_array_interface__`` array). Errors name the problem."""
    if bias is None:
        return None
    info = describe_array("bias", bias, vector=True)
    if info.cols != n:
        raise ValueError(f"bias has length {info.cols} but c has N = {n} columns; the bias needs one value per column")
    if info.dtype not in (dtype, "fp32"):
        raise TypeError(f"bias is {info.dtype}; it must be {dtype} (the operands' dtype) or float32")
    if info.device != device:
        raise ValueError(f"bias is on device {info.device} but c is on device {device}; all must be on one device")
    if n > 1 and info.col_major:
        raise ValueError(f"bias must be contiguous (stride 1), got a stride of {info.ld} elements; pass bias.contiguous()")
    if lib != "cai" and info.lib not in (lib, "cai"):
        raise TypeError(f"bias is a {info.lib} array but c is a {lib} array; pass one library's arrays")
    return info


def make(activation, bias_info: ArrayInfo | None, dtype: str, c_col_major: bool) -> Epilogue:
    """The Epilogue of a checked call (``check_activation``, ``check_bias``)."""
    if activation is None and bias_info is None:
        return PLAIN
    kind = None if bias_info is None else ("same" if bias_info.dtype == dtype else "fp32")
    return Epilogue(activation, kind, bool(kind and c_col_major))


# ---- the reference: float64, what verification compares against -------------------------------
def reference(x, activation: str | None, xp):
    """``activation`` applied to the float64 array ``x`` of the array module ``xp`` (NumPy or CuPy)."""
    if activation is None:
        return x
    if activation == "relu":
        return xp.where(x < 0, 0.0, x)
    if activation == "gelu":
        erf = _erf(xp)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if activation == "gelu_tanh":
        return 0.5 * x * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if activation == "silu":
        return x / (1.0 + xp.exp(-x))
    raise ValueError(f"unknown activation {activation!r}")


def _erf(xp):
    """erf of the array module: torch.erf, cupyx's, SciPy's for NumPy (math.erf without SciPy)."""
    if xp.__name__ == "torch":
        return xp.erf
    if xp.__name__ == "numpy":
        try:
            from scipy.special import erf
        except ImportError:
            import numpy as np

            return np.vectorize(math.erf, otypes=[np.float64])
        return erf
    return __import__("cupyx.scipy.special", fromlist=["erf"]).erf
