"""The verification tolerances (one place, gemmlab/verify.py) and what they admit."""

import math

from gemmlab.measure.verify import elementwise_tolerance, tolerance

U32 = 2.0**-24


def test_fp32_frobenius_tolerance_grows_with_sqrt_k():
    assert math.isclose(tolerance("fp32", 4096) / tolerance("fp32", 64), 8.0)


def test_half_precision_tolerances_include_the_output_rounding():
    assert tolerance("fp16", 1) > 2 * 2.0**-11
    assert tolerance("bf16", 1) > 2 * 2.0**-8
    assert tolerance("bf16", 1) > tolerance("fp16", 1) > tolerance("fp32", 1)


def test_elementwise_tolerance_admits_the_epilogue_roundings_at_k_1():
    # measured on the H100: 33x300x1 with alpha=1.5, beta=-0.75 gives 2.14 u32
    assert elementwise_tolerance("fp32", 1) > 2.14 * U32


def test_elementwise_tolerance_still_rejects_a_wrong_element():
    # a wrong element is off by O(sqrt(K)) against a scale of ~0.64 K (|A||B| for N(0,1) data)
    K = 4096
    assert elementwise_tolerance("fp32", K) < 0.1 * math.sqrt(K) / (0.64 * K)
