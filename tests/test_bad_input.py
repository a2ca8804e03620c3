"""Bad input raises ValueError/TypeError naming the problem -- checked before anything touches a
GPU, so these run on CPU with stand-in device arrays (objects exposing __cuda_array_interface__)."""

import numpy as np
import pytest

import gemmlab
from gemmlab.core import problem


class FakeDeviceArray:
    """A 2-D 'device' array: only the __cuda_array_interface__ the validation reads."""

    _next = 1 << 32

    def __init__(self, shape, typestr="<f4", strides=None, device=0, ptr=None):
        itemsize = int(typestr[2:])
        self.device = device
        if ptr is None:
            ptr = FakeDeviceArray._next
            FakeDeviceArray._next += 1 << 30  # far apart: never overlapping by accident
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 3,
            "strides": None if strides is None else tuple(s * itemsize for s in strides),
        }

    @property
    def T(self):
        cai = self.__cuda_array_interface__
        rows, cols = cai["shape"]
        itemsize = int(cai["typestr"][2:])
        strides = cai["strides"] or (cols * itemsize, itemsize)
        return FakeDeviceArray((cols, rows), cai["typestr"], (strides[1] // itemsize, strides[0] // itemsize),
                               self.device, cai["data"][0])


def device_fakes(monkeypatch, default_typestr: str):
    """A maker of stand-in device arrays of ``default_typestr`` (FakeDeviceArray) whose pointers
    gemmlab places on the device they name (the fixture of the modules that build their own)."""
    registry = {}
    monkeypatch.setattr(problem, "_device_of_pointer", lambda ptr: registry.get(ptr, 0))

    def make(*shape, typestr=default_typestr, device=0, strides=None):
        x = FakeDeviceArray(shape, typestr=typestr, device=device, strides=strides)
        registry[x.__cuda_array_interface__["data"][0]] = device
        return x
    return make


@pytest.fixture(autouse=True)
def fake_devices(monkeypatch):
    registry = {}

    def device_of(ptr):
        return registry.get(ptr, 0)

    monkeypatch.setattr(problem, "_device_of_pointer", device_of)
    orig = FakeDeviceArray.__init__

    def init(self, *a, **k):
        orig(self, *a, **k)
        registry[self.__cuda_array_interface__["data"][0]] = self.device

    monkeypatch.setattr(FakeDeviceArray, "__init__", init)


def arr(*shape, **kw):
    return FakeDeviceArray(shape, **kw)


def test_inner_dimensions_must_match():
    with pytest.raises(ValueError, match=r"shape mismatch: a is 4x5 but b is 6x3"):
        gemmlab.gemm(arr(4, 5), arr(6, 3), arr(4, 3))


def test_output_shape_must_be_m_by_n():
    with pytest.raises(ValueError, match=r"c is 4x4 but a @ b is 4x3"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 4))


def test_unsupported_dtype_is_named():
    with pytest.raises(TypeError, match=r"a has unsupported dtype <f8"):
        gemmlab.gemm(arr(4, 5, typestr="<f8"), arr(5, 3), arr(4, 3))


def test_mixed_dtypes_are_rejected():
    with pytest.raises(TypeError, match=r"mixed dtypes: a is fp32, b is fp16"):
        gemmlab.gemm(arr(4, 5), arr(5, 3, typestr="<f2"), arr(4, 3))


def test_arrays_must_be_two_dimensional():
    with pytest.raises(ValueError, match=r"b must be 2-D, got 3-D"):
        gemmlab.gemm(arr(4, 5), arr(5, 3, 2), arr(4, 3))


def test_strides_neither_row_nor_column_major_are_rejected():
    every_other_row_and_col = arr(4, 5, strides=(20, 2))
    with pytest.raises(ValueError, match=r"a has strides \(20, 2\).*neither row-major"):
        gemmlab.gemm(every_other_row_and_col, arr(5, 3), arr(4, 3))


def test_host_numpy_arrays_are_rejected_with_a_hint():
    with pytest.raises(TypeError, match=r"NumPy array .* host memory.*cupy.asarray"):
        gemmlab.gemm(np.ones((4, 5), np.float32), arr(5, 3), arr(4, 3))


def test_arrays_on_different_devices_are_rejected():
    with pytest.raises(ValueError, match=r"different devices: a on cuda:0, b on cuda:1"):
        gemmlab.gemm(arr(4, 5), arr(5, 3, device=1), arr(4, 3))


def test_unknown_kernel_name_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"unknown kernel 'fastest'.*naive"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), kernel="fastest")


def test_kernel_that_does_not_support_the_dtype_is_rejected():
    with pytest.raises(ValueError, match=r"kernel 'wmma' does not support dtype fp32"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), kernel="wmma")
    with pytest.raises(ValueError, match=r"kernel 'naive' does not support dtype fp16"):
        gemmlab.gemm(arr(4, 5, typestr="<f2"), arr(5, 3, typestr="<f2"), arr(4, 3, typestr="<f2"), kernel="naive")


def test_kernel_must_be_a_string():
    with pytest.raises(TypeError, match="kernel must be a"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), kernel=3)


def test_alpha_and_beta_must_be_real_numbers():
    with pytest.raises(TypeError, match="alpha must be a real number"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), alpha="2")
    with pytest.raises(TypeError, match="beta must be a real number"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), beta=1j)


def test_output_aliasing_an_input_is_rejected():
    a = arr(4, 4)
    with pytest.raises(ValueError, match="c overlaps a"):
        gemmlab.gemm(a, arr(4, 4), a)


def test_objects_that_are_not_arrays_are_rejected():
    with pytest.raises(TypeError, match="expected a CuPy array or a PyTorch CUDA tensor, got builtins.list"):
        gemmlab.gemm([[1.0]], arr(1, 1), arr(1, 1))


def test_invalid_tile_config_is_a_value_error():
    with pytest.raises(ValueError, match="has no parameter 'QQ'"):
        gemmlab.core.registry.get("tile_2d").config({"QQ": 1})


# ---- what validation accepts ------------------------------------------------------------------
def test_transposed_views_are_column_major_with_their_leading_dimension():
    info = problem.describe_array("a", arr(6, 9).T)
    assert (info.rows, info.cols, info.col_major, info.ld) == (9, 6, True, 9)


def test_padded_leading_dimension_is_kept():
    info = problem.describe_array("a", arr(6, 9, strides=(13, 1)))
    assert (info.col_major, info.ld) == (False, 13)


def test_column_major_output_maps_through_the_transpose_identity():
    p = problem.make_problem(arr(5, 7), arr(7, 3), arr(3, 5).T, 2.0, 0.5)
    kp = p.kernel_view()
    # C^T (3x5) = B^T (3x7, column-major view of row-major B) @ A^T (7x5)
    assert (kp.M, kp.N, kp.K) == (3, 5, 7)
    assert kp.a_ptr == p.b.ptr and kp.a_col is True and kp.lda == 3
    assert kp.b_ptr == p.a.ptr and kp.b_col is True and kp.ldb == 7


def _offset(info, i, j):
    return j * info.ld + i if info.col_major else i * info.ld + j


@pytest.mark.parametrize("shape,strides", [((1, 8), (999, 1)), ((8, 1), (1, 999)), ((1, 8), (1, 1)), ((8, 1), (5, 5))])
def test_single_row_and_single_column_arrays_accept_any_stride_on_the_unit_dimension(shape, strides):
    info = problem.describe_array("a", arr(*shape, strides=strides))
    for i in range(shape[0]):
        for j in range(shape[1]):
            assert _offset(info, i, j) == i * strides[0] + j * strides[1]


def test_vector_legality_needs_alignment_and_leading_dimension_multiple():
    base = 1 << 40
    assert problem.describe_array("a", arr(4, 8, ptr=base)).vec_ok()
    assert not problem.describe_array("a", arr(4, 8, ptr=base + 4)).vec_ok()
    assert not problem.describe_array("a", arr(4, 7, strides=(7, 1), ptr=base + (1 << 20))).vec_ok()


def test_empty_arrays_are_accepted_whatever_their_strides():
    info = problem.describe_array("a", arr(5, 0, strides=(0, 0)))
    assert (info.rows, info.cols, info.span_elements) == (5, 0, 0)
