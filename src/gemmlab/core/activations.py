"""The activations the epilogue fuses, each defined once: its CUDA, its float64 reference, its
derivative and, where PyTorch has them, PyTorch's own kernels of the same function.

Adding an activation is one ``Activation`` in ``ALL``. Everything else reads it:

- the kernels: ``cuda_header`` generates ``activations.cuh`` (``gl_act``, selected by ``GL_ACT``
  = the entry's ``code``), which core/compile.py hands NVRTC beside the kernel headers, so its text
  is part of every build's cache key;
- the Python side: core/epilogue.py's names and checks, the verification's reference
  (measure/verify.py) and tolerance (``max_slope``), the CLI's choices, the benchmarks' unfused peers;
- the torch operators' forward and backward (core/torch_op.py): ``torch_forward`` and
  ``torch_backward`` where PyTorch has fused kernels, else the reference and the derivative
  composed from torch's elementwise operations.

A function ``f(x, xp)`` here takes the array module ``xp`` of ``x`` (NumPy, CuPy or torch) and uses
only what the three share (``where``, ``exp``, ``tanh``, ``erf`` through ``erf_of``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_TANH_C = 0.044715


@dataclass(frozen=True)
class Activation:
    """One activation. ``cuda``: the body of ``float gl_act(float x)`` for an FP32 C, with the
    library's accurate functions; ``cuda_16``: the body for a 16-bit C where it differs (hardware
    approximations whose error, about 2^-11 relative, is below half an output ulp of fp16 and bf16).
    ``reference`` and ``derivative``: f and f' in float64 (``xp`` as above). ``max_slope``: an
    upper bound of |f'| over the reals (the verification scales the error of the pre-activation
    by it). ``torch_forward(z)``, ``torch_backward(grad, z)``: PyTorch's fused kernels of f and of
    grad * f'(z), None where it has none."""

    name: str
    code: int
    cuda: str
    reference: Callable
    derivative: Callable
    max_slope: float
    cuda_16: str | None = None
    torch_forward: Callable | None = None
    torch_backward: Callable | None = None

    def forward_torch(self, z):
        """f(z) for a torch tensor: PyTorch's fused kernel, or the reference's operations."""
        import torch

        return self.torch_forward(z) if self.torch_forward else self.reference(z, torch)

    def backward_torch(self, grad, z):
        """grad * f'(z) for torch tensors: PyTorch's fused kernel, or the derivative's operations."""
        import torch

        return self.torch_backward(grad, z) if self.torch_backward else grad * self.derivative(z, torch)


def erf_of(xp):
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


def _gelu_tanh_t(x, xp):
    return xp.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_C * x ** 3))


def _gelu_tanh_slope(x, xp):
    t = _gelu_tanh_t(x, xp)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * x * x)


def _sigmoid(x, xp):
    return 1.0 / (1.0 + xp.exp(-x))


def _t():
    """torch, imported where a torch form is called (the module itself needs no torch)."""
    import torch

    return torch


ALL: tuple[Activation, ...] = (
    # relu keeps a NaN a NaN (as torch.relu does; fmaxf would turn it into 0)
    Activation(
        "relu", 1, "return x < 0.0f ? 0.0f : x;",
        reference=lambda x, xp: xp.where(x < 0, 0.0, x),
        derivative=lambda x, xp: xp.where(x > 0, 1.0, 0.0 * x),   # an array operand: x's dtype in torch too
        max_slope=1.0,
        torch_forward=lambda z: _t().relu(z),
        torch_backward=lambda grad, z: _t().ops.aten.threshold_backward(grad, z, 0),
    ),
    Activation(
        "gelu", 2, "return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));",
        reference=lambda x, xp: 0.5 * x * (1.0 + erf_of(xp)(x / math.sqrt(2.0))),
        derivative=lambda x, xp: (0.5 * (1.0 + erf_of(xp)(x / math.sqrt(2.0)))
                                  + x * xp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)),
        max_slope=1.13,   # 1.129 at x = 1.414
        torch_forward=lambda z: _t().nn.functional.gelu(z),
        torch_backward=lambda grad, z: _t().ops.aten.gelu_backward(grad, z),
    ),
    # u = sqrt(2/pi) (x + 0.044715 x^3) = x (k + k c x^2): two multiplies and one FMA; h + h t with
    # h = x / 2: one more multiply and FMA
    Activation(
        "gelu_tanh", 3,
        "const float u = x * fmaf(0.79788456080286536f * 0.044715f, x * x, 0.79788456080286536f);\n"
        "const float t = tanhf(u);\n"
        "const float h = 0.5f * x;\n"
        "return fmaf(h, t, h);",
        cuda_16="const float u = x * fmaf(0.79788456080286536f * 0.044715f, x * x, 0.79788456080286536f);\n"
                "float t;\n"
                "asm(\"tanh.approx.f32 %0, %1;\\n\" : \"=f\"(t) : \"f\"(u));\n"
                "const float h = 0.5f * x;\n"
                "return fmaf(h, t, h);",
        reference=lambda x, xp: 0.5 * x * (1.0 + _gelu_tanh_t(x, xp)),
        derivative=_gelu_tanh_slope,
        max_slope=1.13,   # 1.129
        torch_forward=lambda z: _t().nn.functional.gelu(z, approximate="tanh"),
        torch_backward=lambda grad, z: _t().ops.aten.gelu_backward(grad, z, approximate="tanh"),
    ),
    Activation(
        "silu", 4, "return x / (1.0f + expf(-x));",
        cuda_16="return __fdividef(x, 1.0f + __expf(-x));",
        reference=lambda x, xp: x * _sigmoid(x, xp),
        derivative=lambda x, xp: _sigmoid(x, xp) * (1.0 + x * (1.0 - _sigmoid(x, xp))),
        max_slope=1.10,   # 1.0998 at x = 2.40
        torch_forward=lambda z: _t().nn.functional.silu(z),
        torch_backward=lambda grad, z: _t().ops.aten.silu_backward(grad, z),
    ),
)

BY_NAME: dict[str, Activation] = {a.name: a for a in ALL}
NAMES: tuple[str, ...] = tuple(BY_NAME)
MAX_SLOPE = max(a.max_slope for a in ALL)
HEADER = "activations.cuh"


def get(name: str) -> Activation:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; gemmlab fuses {', '.join(NAMES)}") from None


def _indent(body: str, depth: int = 4) -> str:
    return "\n".join(" " * depth + line for line in body.splitlines())


def cuda_header() -> str:
    """The text of ``activations.cuh``: ``gl_act(x)``, the activation whose code is ``GL_ACT`` (x
    itself for 0), in FP32; an FP32 C (GL_C_DTYPE 0) takes ``cuda``, a 16-bit C ``cuda_16``."""
    lines = [
        f"// {HEADER} — generated from gemmlab/core/activations.py (ALL); edit the definitions there.",
        "// The activation of a pre-activation value x, in FP32 (GL_ACT: the entry's code, 0 none).",
        "#pragma once",
        "__device__ __forceinline__ float gl_act(float x) {",
    ]
    for n, a in enumerate(ALL):
        lines.append(f"#{'if' if n == 0 else 'elif'} GL_ACT == {a.code}   // {a.name}")
        if a.cuda_16 is None:
            lines.append(_indent(a.cuda))
        else:
            lines += ["#if GL_C_DTYPE == 0", _indent(a.cuda), "#else", _indent(a.cuda_16), "#endif"]
    lines += ["#else", "    return x;", "#endif", "}", ""]
    return "\n".join(lines)
