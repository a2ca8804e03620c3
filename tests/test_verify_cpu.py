"""Verification (measure/verify.py) judged on the CPU: what an FP32 GEMM with the kernels' rounding
produces must pass, and a single wrong, unwritten or NaN element must fail. NumPy stands in for
the GPU array library; the reference path is the same code the GPU uses."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.measure.arrays import Operands
from gemmlab.measure.verify import check


class NumpyLib:
    """The part of measure.arrays.Lib that verify.check uses, over NumPy."""

    name = "numpy"
    xp = np

    def to64(self, x):
        return x.astype(np.float64)

    def matmul(self, a, b, out=None):
        return np.matmul(a, b, out=out)

    def to_numpy(self, x):
        return np.asarray(x)

    def copy(self, x):
        return x.copy()


DT = {"fp32": np.float32, "fp16": np.float16}


def _kernel_like(a, b, c0, alpha, beta, out_dtype):
    """C = alpha * acc + beta * C0 as the rungs compute it: FP32 FMAs in k order, then the
    epilogue's two roundings (alpha * acc, then an FMA with beta * C0), then the output type."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):  # one rounding per FMA: the product of two fp32 is exact in fp64
        acc = (acc.astype(np.float64) + np.outer(a32[:, k], b32[k, :]).astype(np.float64)).astype(np.float32)
    scaled = (np.float32(alpha) * acc).astype(np.float32)
    out = (np.float64(beta) * c0.astype(np.float32).astype(np.float64) + scaled).astype(np.float32)
    return out.astype(out_dtype)


def _ops(M, N, K, dtype, seed, alpha=1.0, beta=0.0):
    g = np.random.default_rng(seed)
    t = DT[dtype]
    a = g.standard_normal((M, K)).astype(t)
    b = g.standard_normal((K, N)).astype(t)
    c0 = g.standard_normal((M, N)).astype(t)
    c = _kernel_like(a, b, c0, alpha, beta, t)
    return Operands(NumpyLib(), a, b, c, c0, dtype)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("M, N, K", [(33, 17, 1), (64, 48, 300), (7, 9, 2048)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (1.5, -0.75)])
def test_an_fp32_accumulation_with_the_kernels_roundings_passes(dtype, M, N, K, alpha, beta):
    r = check(_ops(M, N, K, dtype, seed=M * N + K, alpha=alpha, beta=beta), alpha, beta)
    assert r.ok, r.message()


def test_cancellation_between_alpha_ab_and_beta_c_does_not_fail_a_correct_result():
    """alpha*AB and beta*C0 nearly cancel at 1x1x1: the result is tiny, its rounding is not."""
    a, b = np.array([[1.2345678]], np.float32), np.array([[0.7654321]], np.float32)
    c0 = (a @ b).astype(np.float32)
    c = _kernel_like(a, b, c0, 1.0, -1.0, np.float32)
    r = check(Operands(NumpyLib(), a, b, c, c0, "fp32"), 1.0, -1.0)
    assert r.ok, r.message()


def test_one_wrong_element_fails_and_is_named():
    ops = _ops(128, 96, 512, "fp32", seed=5)
    ops.c[17, 42] += 0.05 * abs(ops.c[17, 42]) + 1e-3   # a few percent off, one element
    r = check(ops, 1.0, 0.0)
    assert not r.ok and (r.worst[0][0], r.worst[0][1]) == (17, 42)


def test_an_unwritten_element_left_as_nan_poison_fails():
    ops = _ops(40, 40, 64, "fp32", seed=6)
    ops.c[3, 4] = np.nan
    r = check(ops, 1.0, 0.0)
    assert not r.ok and r.nonfinite == 1


def test_a_result_computed_in_half_precision_accumulation_fails_the_fp16_check():
    """fp16 outputs must come from fp32 accumulation: accumulating in fp16 is caught at large K."""
    g = np.random.default_rng(7)
    a = g.standard_normal((16, 4096)).astype(np.float16)
    b = g.standard_normal((4096, 16)).astype(np.float16)
    acc = np.zeros((16, 16), np.float16)
    for k in range(4096):
        acc = (acc + np.outer(a[:, k], b[k, :]).astype(np.float16)).astype(np.float16)
    r = check(Operands(NumpyLib(), a, b, acc, acc.copy(), "fp16"), 1.0, 0.0)
    assert not r.ok
