"""precision= (core/precision.py): the table, the argument's validation, which rung `auto` takes for
each precision, the fast path's key, the tolerances and peaks it implies, and the 3xTF32 split
emulated on the host (numpy: cvt.rna.tf32.f32 on float32 bit patterns). All on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.core import dispatch, fastpath, precision
from gemmlab.core.arch import peak_for_dtype
from gemmlab.core.problem import ArrayInfo, GemmProblem
from gemmlab.core.variant import Variant
from gemmlab.measure.verify import elementwise_tolerance, tolerance


def _problem(dtype="fp32"):
    info = ArrayInfo(0x10000, 64, 64, 64, False, dtype, 0, "cupy")
    return GemmProblem(64, 64, 64, dtype, info, info, info, 1.0, 0.0)


# ---- the table and the argument ---------------------------------------------------------------
def test_each_dtype_lists_its_own_exact_precision_first():
    assert precision.for_dtype("fp32") == ("fp32", "tf32", "3xtf32")
    assert precision.for_dtype("fp16") == ("fp16",) and precision.for_dtype("bf16") == ("bf16",)
    assert all(precision.resolve(d, None) == d for d in ("fp32", "fp16", "bf16"))


@pytest.mark.parametrize("bad", ["TF32", "fp64", "", 3])
def test_an_unknown_precision_is_refused_naming_the_choices(bad):
    with pytest.raises(ValueError, match="unknown precision .*choose one of fp32, tf32, 3xtf32"):
        precision.resolve("fp32", bad)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("name", ["tf32", "3xtf32", "fp32"])
def test_half_precision_operands_take_only_their_own_precision(dtype, name):
    with pytest.raises(ValueError, match=f"applies to fp32 operands; {dtype} operands take only '{dtype}'"):
        dispatch.choose(_problem(dtype), "auto", "sm_90a", name)
    with pytest.raises(ValueError, match="applies to fp32 operands"):
        dispatch.choose(_problem(dtype), "mma_sync", None, name)


def test_a_rung_that_cannot_provide_the_precision_is_refused_naming_one_that_can():
    with pytest.raises(ValueError, match="'async_simt' does not compute fp32 in precision 'tf32'.*tf32_mma"):
        dispatch.choose(_problem(), "async_simt", None, "tf32")
    with pytest.raises(ValueError, match="'tf32_mma' does not compute fp32 in precision 'fp32'"):
        dispatch.choose(_problem(), "tf32_mma", None, "fp32")


@pytest.mark.parametrize("name", ["tf32", "3xtf32"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_auto_takes_the_tf32_rung_for_a_tensor_core_precision(name, arch):
    """On sm_90a TF32 and 3xTF32 go to rung 22 (wgmma); rung 20 elsewhere."""
    want = "wgmma_tf32" if arch == "sm_90a" else "tf32_mma"
    assert dispatch.choose(_problem(), "auto", arch, name).slug == want


@pytest.mark.parametrize("name", [None, "fp32"])
def test_auto_never_takes_the_tf32_rung_for_exact_fp32(name):
    for arch in ("sm_80", "sm_90a", None):
        rung = dispatch.choose(_problem(), "auto", arch, name)
        assert rung.slug not in ("tf32_mma", "wgmma_tf32") and "fp32" in rung.precisions


def test_auto_refuses_a_tensor_core_precision_where_no_rung_runs_it():
    with pytest.raises(ValueError, match="no rung supports fp32 in precision tf32 on sm_75"):
        dispatch.choose(_problem(), "auto", "sm_75", "tf32")


def test_a_named_tf32_rung_defaults_to_its_own_precision_and_passes_it_to_the_kernel():
    assert Variant.make("tf32_mma", "fp32").precision == "tf32"
    assert Variant.make("tf32_mma", "fp32").defines()["GL_PRECISION"] == 1
    assert Variant.make("tf32_mma", "fp32", precision="3xtf32").defines()["GL_PRECISION"] == 3
    assert "GL_PRECISION" not in Variant.make("async_simt", "fp32").defines()   # exact: defines unchanged
    assert "as 3xtf32" in Variant.make("tf32_mma", "fp32", precision="3xtf32").describe()


# ---- the fast path ----------------------------------------------------------------------------
class _Data:
    def __init__(self, ptr):
        self.ptr, self.device_id = ptr, 0


class _Array:
    def __init__(self, ptr):
        self.data, self.shape, self.strides, self.dtype = _Data(ptr), (64, 64), (256, 4), "float32"


def test_the_fast_path_keys_on_the_precision():
    fastpath.forget()
    a, b, c = _Array(0x10000), _Array(0x20000), _Array(0x30000)
    fastpath.register(a, "cupy")
    keys = {fastpath.signature(a, b, c, "auto", None, p)[0] for p in (None, "fp32", "tf32", "3xtf32")}
    assert len(keys) == 4

    class Plan:
        launched = 0

        def launch(self, *args):
            Plan.launched += 1
            return True

    fastpath.remember((a, b, c), "auto", None, Plan(), _problem(), "3xtf32")
    assert not fastpath.run(a, b, c, "auto", None, "tf32", 1.0, 0.0)
    assert fastpath.run(a, b, c, "auto", None, "3xtf32", 1.0, 0.0) and Plan.launched == 1
    fastpath.forget()


# ---- what verification and the peaks make of it ------------------------------------------------
@pytest.mark.parametrize("K", [1, 4096])
def test_the_tolerance_adds_two_input_roundings_of_the_precision(K):
    base, ebase = tolerance("fp32", K), elementwise_tolerance("fp32", K)
    assert tolerance("fp32", K, "fp32") == base
    assert tolerance("fp32", K, "tf32") - base == pytest.approx(2 * 2.0**-10)
    assert elementwise_tolerance("fp32", K, "tf32") - ebase == pytest.approx(2 * 2.0**-10)
    assert tolerance("fp32", K, "3xtf32") - base == pytest.approx(2 * 2.0**-22)   # FP32 level


def test_the_peak_of_a_tensor_core_precision_is_its_share_of_the_16_bit_rate():
    peaks = {"tensor_tflops": 990.0, "fp32_tflops": 67.0}
    assert peak_for_dtype(peaks, "fp32") == 67.0 and peak_for_dtype(peaks, "fp16") == 990.0
    assert peak_for_dtype(peaks, "fp32", "tf32") == 495.0
    assert peak_for_dtype(peaks, "fp32", "3xtf32") == pytest.approx(165.0)


# ---- 3xTF32 on the host -------------------------------------------------------------------------
def _tf32_rna(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32 on float32 bit patterns (finite x): add half a TF32 ulp to the magnitude
    bits, clear the 13 low bits -- round to nearest, ties away from zero (sign-magnitude)."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _round_reference(x: np.ndarray, bits: int = 11) -> np.ndarray:
    """x rounded to `bits` significant bits, ties away from zero, in float64 (independent of the
    bit trick above)."""
    m, e = np.frexp(x.astype(np.float64))             # x = m 2^e, 0.5 <= |m| < 1
    scaled = np.abs(m) * 2.0**bits
    return np.sign(m) * np.floor(scaled + 0.5) * 2.0 ** (e - bits)


def _samples() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(200_000), rng.uniform(-1e30, 1e30, 1000), rng.uniform(-1e-30, 1e-30, 1000),
                        [1.0, -1.0, 1 + 2.0**-11, 1 + 3 * 2.0**-12, 3.0 - 2.0**-22]])
    return x.astype(np.float32)


def test_the_tf32_rounding_is_round_to_nearest_ties_away_at_11_significant_bits():
    x = _samples()
    np.testing.assert_array_equal(_tf32_rna(x).astype(np.float64), _round_reference(x))


def test_the_3xtf32_split_is_exact_to_2_pow_minus_22_and_both_parts_are_tf32():
    x = _samples()
    big = _tf32_rna(x)
    small = _tf32_rna(x - big)                          # x - big is exact in float32
    assert np.array_equal((x.astype(np.float64) - big), (x - big).astype(np.float64))
    for part in (big, small):
        assert not np.any(part.view(np.uint32) & np.uint32(0x1FFF)), "a part has more than 10 fraction bits"
    x64 = x.astype(np.float64)
    err = np.abs(big.astype(np.float64) + small.astype(np.float64) - x64)
    assert np.all(err <= 2.0**-22 * np.abs(x64))


def test_three_tf32_products_recover_an_fp32_product_that_one_does_not():
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal(100_000).astype(np.float32), rng.standard_normal(100_000).astype(np.float32)
    ab, bb = _tf32_rna(a), _tf32_rna(b)
    as_, bs_ = _tf32_rna(a - ab), _tf32_rna(b - bb)
    exact = a.astype(np.float64) * b.astype(np.float64)
    three = (as_.astype(np.float64) * bb + ab.astype(np.float64) * bs_) + ab.astype(np.float64) * bb
    one = ab.astype(np.float64) * bb
    assert np.max(np.abs(three - exact) / np.abs(exact)) <= 2.0**-21    # the FP32 level: 8 u32
    assert np.max(np.abs(one - exact) / np.abs(exact)) > 2.0**-12       # TF32 alone: ~2^-11
