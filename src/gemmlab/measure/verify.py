"""Verification against cuBLAS: any rung, fresh random data, output poisoned, float64 reference.

The reference is alpha * (A @ B) + beta * C0 computed by cuBLAS in float64 (DGEMM through CuPy
or PyTorch) from the very same inputs. Two measures are checked:

* ``rel_error``: the relative Frobenius error ||C - R||_F / ||R||_F (what the seeds and most
  ladders report);
* ``max_scaled``: the largest element error divided by that element's error scale
  |alpha| (|A| @ |B|) + |beta| |C0| -- the quantity rounding-error analysis bounds, so one wrong
  element cannot hide in a large matrix.

With a fused epilogue (``bias``, ``activation``: core/epilogue.py) the reference is
act(alpha * (A @ B) + beta * C0 + bias) in float64, and the error scale adds |bias| and is
multiplied by the activation's largest slope (ACTIVATION_SLOPE): an error in the pre-activation
moves the output by at most that much.

NaN or Inf anywhere fails (the output is poisoned with NaN before the run when beta == 0, so an
element the kernel never wrote fails too).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from ..core.activations import MAX_SLOPE
from ..core.dtypes import get as get_dtype
from ..core.epilogue import reference as activation_reference
from ..core.precision import get as get_precision
from .arrays import Lib, Operands, choose_lib, make_operands

# Unit roundoff (half an ulp of 1.0) of the accumulation and output types: core.dtypes.
_U32 = get_dtype("fp32").unit_roundoff


def _u(dtype: str) -> float:
    return get_dtype(dtype).unit_roundoff

# ---- tolerances: the one place they are defined ------------------------------------------------
# Every rung accumulates in fp32 with FMAs in some order. For random data the accumulated rounding
# error behaves like a random walk: relative Frobenius error ~ u32 * sqrt(K) (measured on the H100
# between 0.3 and 2 u32 sqrt(K) across the ladder); we allow 16x that. fp16/bf16 outputs add one
# rounding to the output type (relative ~ u_out / sqrt(3) in Frobenius norm); we allow 2 u_out.
# Element-wise, the classical bound |C - R| <= K u32 (|A||B|) holds for any summation order; the
# epilogue adds two more roundings (alpha * acc, then the FMA with beta * C: measured 2.1 u32 at
# K = 1 on the H100); we allow 2 (K + 2) u32, plus 2 u_out for the output rounding.
# A precision that rounds the operands before multiplying (core.precision: tf32 2^-11, 3xtf32's
# split 2^-22) perturbs each product by at most 2 u_in relative (one rounding per operand): we add
# 2 u_in to both measures, as for the output type. 3xtf32 thus keeps the FP32 tolerance plus its
# split's 2^-21, which the K-terms exceed from K = 2 on.
# the largest |act'(x)| of any activation (core/activations.py: each one's max_slope)
ACTIVATION_SLOPE = MAX_SLOPE


def _rounding_terms(dtype: str, precision: str | None) -> float:
    tol = 2.0 * _u(dtype) if dtype != "fp32" else 0.0
    if precision is not None:
        tol += 2.0 * get_precision(precision).input_roundoff
    return tol


def _accumulation(K: int, precision: str | None) -> tuple[float, int]:
    """(the tensor cores' relative error per addition, the terms it runs over) of an FP8 precision's
    accumulation (core.precision), (0, 0) for the others."""
    p = get_precision(precision) if precision is not None else None
    if p is None or not p.accumulation_roundoff:
        return 0.0, 0
    return p.accumulation_roundoff, min(max(K, 1), p.accumulation_run or max(K, 1))


def tolerance(dtype: str, K: int, precision: str | None = None) -> float:
    """Allowed relative Frobenius error for a problem of inner dimension K (``precision`` None:
    the dtype's exact one). FP8's tensor-core accumulation adds its own random walk over the terms
    it sums before a promotion."""
    u_acc, run = _accumulation(K, precision)
    return 16.0 * _U32 * math.sqrt(max(K, 1)) + 16.0 * u_acc * math.sqrt(run) + _rounding_terms(dtype, precision)


def elementwise_tolerance(dtype: str, K: int, precision: str | None = None) -> float:
    """Allowed element error relative to |alpha| (|A| @ |B|) + |beta| |C0| (FP8: plus the classical
    bound of its tensor-core accumulation over the terms it sums before a promotion)."""
    u_acc, run = _accumulation(K, precision)
    return 2.0 * (max(K, 1) + 2) * _U32 + 2.0 * (run + 2) * u_acc * (run > 0) + _rounding_terms(dtype, precision)


@dataclass
class VerifyResult:
    ok: bool
    rel_error: float
    tol: float
    max_scaled: float
    elem_tol: float
    nonfinite: int
    worst: list = field(default_factory=list)   # [(i, j, got, want, scaled_error)]
    label: str = ""

    def message(self) -> str:
        head = (f"{self.label}: rel. Frobenius error {self.rel_error:.3e} (tol {self.tol:.1e}), "
                f"max scaled element error {self.max_scaled:.3e} (tol {self.elem_tol:.1e}), "
                f"{self.nonfinite} non-finite")
        if self.ok:
            return head + " -- OK"
        rows = "\n".join(f"    C[{i},{j}] = {g!r}, expected {w!r} (scaled error {e:.3e})" for i, j, g, w, e in self.worst)
        return head + " -- FAILED; worst elements:\n" + rows


def check(ops: Operands, alpha: float, beta: float, label: str = "", precision: str | None = None,
          bias=None, activation: str | None = None) -> VerifyResult:
    """Compare ops.c with act(alpha * a @ b + beta * c0 + bias), computed in float64 by cuBLAS,
    at the tolerance of the dtype and ``precision`` (None: the dtype's exact one)."""
    lib, xp = ops.lib, ops.lib.xp
    a, b = lib.to64(ops.a), lib.to64(ops.b)
    ref = alpha * lib.matmul(a, b)
    scale = abs(alpha) * lib.matmul(abs(a), abs(b))
    if beta != 0.0:
        c0 = lib.to64(ops.c0)
        ref = ref + beta * c0
        scale = scale + abs(beta) * abs(c0)
    if bias is not None:
        b64 = lib.to64(bias).reshape(1, -1)
        ref = ref + b64
        scale = scale + abs(b64)
    if activation is not None:
        ref = activation_reference(ref, activation, xp)
        scale = scale * ACTIVATION_SLOPE
    out = lib.to64(ops.c)
    finite = xp.isfinite(out)
    nonfinite = int((~finite).sum())
    diff = out - ref
    M, K = ops.a.shape
    ref_norm = float(xp.linalg.norm(ref))
    err_norm = float(xp.linalg.norm(xp.where(finite, diff, 0.0)))
    rel = err_norm / ref_norm if ref_norm > 0 else err_norm
    # Rounding errors scale with |alpha||A||B| + |beta||C0|, not with the result: when alpha*AB and
    # beta*C0 cancel (seen at 1x1x1 on the H100), ||R|| is tiny and err/||R|| says nothing about
    # the kernel. The Frobenius check therefore divides by max(||R||, ||S|| / sqrt(K)); for random
    # data without cancellation the first term is the larger one (||S||/sqrt(K) ~ 0.64 ||R||).
    frob_denom = max(ref_norm, float(xp.linalg.norm(scale)) / math.sqrt(max(K, 1)))
    # Element scale floored at the output type's smallest normal number: results that round to
    # subnormal fp16 carry an absolute error of half a subnormal step (seen at K = 1 in fp16).
    scaled = abs(diff) / scale.clip(min=get_dtype(ops.c_dtype).smallest_normal)
    scaled = xp.where(finite, scaled, float("inf"))
    max_scaled = float(scaled.max()) if M * out.shape[1] > 0 else 0.0
    # the output's rounding is C's type's (an FP32 C from 16-bit operands: the FP32 sums as they are)
    tol, etol = tolerance(ops.c_dtype, K, precision), elementwise_tolerance(ops.c_dtype, K, precision)
    ok = nonfinite == 0 and err_norm <= tol * frob_denom and max_scaled <= etol
    worst = []
    if not ok:
        flat = lib.to_numpy(scaled).ravel()
        outn, refn = lib.to_numpy(out), lib.to_numpy(ref)
        N = out.shape[1]
        import numpy as np

        for idx in np.argsort(-np.nan_to_num(flat, nan=np.inf))[:5]:
            i, j = divmod(int(idx), N)
            worst.append((i, j, float(outn[i, j]), float(refn[i, j]), float(flat[idx])))
    return VerifyResult(ok, rel, tol, max_scaled, etol, nonfinite, worst, label)


def verify(kernel: str, M: int, N: int, K: int, dtype: str = "fp32", *, lib: str | None = None,
           a_col=False, b_col=False, c_col=False, alpha=1.0, beta=0.0, ld_pad=0, offset=0,
           config=None, seed=None, precision: str | None = None, bias: str | None = None,
           activation: str | None = None, out: str | None = None) -> VerifyResult:
    """Run one rung on fresh random operands and check it against the float64 cuBLAS reference.
    With beta == 0, C is filled with NaN first: NaN must not leak and every element must be written.
    ``precision`` as for ``gemmlab.gemm``; the tolerance is the one of the precision the kernel used.
    ``bias``: None, "same" (a random bias of the operands' dtype) or "fp32"; ``activation``: one of
    core/epilogue.py's, fused into the call; ``out``: C's dtype where it is not ``dtype`` (an output
    dtype; the tolerance then rounds to it)."""
    from ..core.api import gemm
    from ..core.registry import get as get_rung
    from ..core.variant import FP8_DEFAULT_OUT

    # CuPy first (gemmlab's own array library), PyTorch for a bf16 or FP8 operand or a bf16 output;
    # FP8 operands write a bf16 C unless ``out`` says otherwise
    if dtype == "fp8" and out is None:
        out = FP8_DEFAULT_OUT
    L = Lib(choose_lib(lib, "bf16" if "bf16" in (dtype, out) else dtype, prefer=("cupy", "torch")))
    ops = make_operands(L, M, N, K, dtype, a_col=a_col, b_col=b_col, c_col=c_col, ld_pad=ld_pad,
                        offset=offset, seed=seed, beta_nonzero=beta != 0.0, out=out)
    bias_vec = None
    if bias is not None:   # "same": the operands' dtype, or with FP8 operands the output's (core/epilogue.py)
        same = (ops.out or dtype) if dtype == "fp8" else dtype
        bias_vec = L.randn(1, N, same if bias == "same" else "fp32", seed=None if seed is None else seed * 7 + 4)[0]
    gemm(ops.a, ops.b, ops.c, alpha=alpha, beta=beta, bias=bias_vec, activation=activation, kernel=kernel,
         config=config, precision=precision)
    L.synchronize()
    used = precision if kernel == "auto" else get_rung(kernel).precision_for(dtype, precision)
    lay = "".join("C" if col else "R" for col in (a_col, b_col, c_col))
    prec = "" if used in (None, dtype) else f" as {used}"
    epi = "".join(f" {x}" for x in ((f"bias={bias}" if bias else None), activation) if x)
    epi += f" out={ops.out}" if ops.out else ""
    label = f"{kernel} {dtype}{prec} {M}x{N}x{K} {lay} alpha={alpha} beta={beta} pad={ld_pad} off={offset}{epi}"
    return check(ops, alpha, beta, label, used, bias_vec, activation)


ALL_LAYOUTS = tuple(itertools.product((False, True), repeat=3))   # (a_col, b_col, c_col): all 8


def verify_all(kernel: str, dtype: str, shapes, layouts=ALL_LAYOUTS, alpha_beta=((1.0, 0.0),), *,
               config=None, precision: str | None = None, lib: str | None = None, bias: str | None = None,
               activation: str | None = None, out: str | None = None):
    """``verify`` at every (layout, shape, (alpha, beta)) of the three lists, in that order; yields
    each VerifyResult as it comes (``gemmlab verify``, and the GPU tests' sweeps)."""
    for (a_col, b_col, c_col), (M, N, K), (alpha, beta) in itertools.product(layouts, shapes, alpha_beta):
        yield verify(kernel, M, N, K, dtype, lib=lib, a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                     config=config, precision=precision, bias=bias, activation=activation, out=out)
