"""Batched matmul with torch.matmul's semantics: how the batch broadcasts and when it folds into
one GEMM (CPU, from shapes and strides alone), and the products themselves against float64 (GPU:
broadcast batches, transposed and expanded views, every dtype, a fused epilogue)."""

import pytest

import gemmlab
from gemmlab.core import batched
from gemmlab.core.problem import ArrayFacts


def facts(shape, strides=None, dtype="fp32", ptr=1 << 32):
    if strides is None:   # C-contiguous
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    return ArrayFacts(ptr, tuple(shape), tuple(strides), dtype, 0, "cupy")


# ---- the layout ---------------------------------------------------------------------------------
def test_batch_dimensions_broadcast_as_numpy_does():
    assert batched.broadcast_batch((8, 1, 3), (5, 1)) == (8, 5, 3)
    assert batched.broadcast_batch((), (4,)) == (4,)


def test_batches_that_do_not_broadcast_are_refused_naming_both():
    with pytest.raises(ValueError, match=r"batch dimensions \(3,\) of a and \(4,\) of b do not broadcast"):
        batched.layout(facts((3, 5, 6)), facts((4, 6, 7)))


def test_inner_dimensions_must_match():
    with pytest.raises(ValueError, match=r"a.shape\[-1\] must equal b.shape\[-2\]"):
        batched.layout(facts((3, 5, 6)), facts((3, 5, 7)))


def test_a_vector_operand_is_refused():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        batched.layout(facts((3, 5, 6)), facts((6,)))


def test_contiguous_batch_against_a_shared_matrix_folds_into_one_gemm():
    lay = batched.layout(facts((4, 16, 64)), facts((64, 32)))
    assert lay.folds and lay.batch == (4,) and (lay.M, lay.N, lay.K) == (16, 32, 64)


def test_an_expanded_weight_of_stride_zero_still_folds():
    lay = batched.layout(facts((2, 3, 16, 64)), facts((2, 3, 64, 32), strides=(0, 0, 32, 1)))
    assert lay.folds and lay.b_strides == (0, 0)


def test_a_weight_per_batch_element_does_not_fold():
    lay = batched.layout(facts((4, 16, 64)), facts((4, 64, 32)))
    assert not lay.folds and lay.b_strides == (2048,) and lay.count == 4


def test_a_transposed_batch_view_does_not_fold():
    # a (4, 16, 64) read as (4, 64, 16).mT: column-major rows, the batch cannot join them
    lay = batched.layout(facts((4, 16, 64), strides=(1024, 1, 16)), facts((64, 32)))
    assert not lay.folds


def test_a_batch_with_gaps_between_elements_does_not_fold():
    lay = batched.layout(facts((4, 16, 64), strides=(2048, 64, 1)), facts((64, 32)))
    assert not lay.folds


def test_each_elements_problem_points_at_its_own_slices():
    a, b, c = facts((3, 4, 5), ptr=0x1000000), facts((3, 5, 6), ptr=0x2000000), facts((3, 4, 6), ptr=0x3000000)
    lay = batched.layout(a, b)
    probs = list(batched.problems(lay, a, b, c, 1.0, 0.0))
    assert [(p.a.ptr - a.ptr, p.b.ptr - b.ptr, p.c.ptr - c.ptr) for p in probs] == \
        [(0, 0, 0), (80, 120, 96), (160, 240, 192)]
    assert {(p.M, p.N, p.K) for p in probs} == {(4, 6, 5)}


def test_an_output_overlapping_an_input_is_refused():
    a, b = facts((3, 4, 5), ptr=0x1000000), facts((3, 5, 6), ptr=0x2000000)
    c = facts((3, 4, 6), ptr=0x1000000 + 16)
    with pytest.raises(ValueError, match="the output overlaps a"):
        list(batched.problems(batched.layout(a, b), a, b, c, 1.0, 0.0))


# ---- the products (GPU) ---------------------------------------------------------------------------
CASES = [
    ("folded, shared weight", (4, 33, 70), (70, 45)),
    ("per element", (5, 33, 70), (5, 70, 45)),
    ("broadcast both ways", (2, 1, 17, 30), (1, 3, 30, 19)),
    ("4-D per element", (2, 3, 9, 31), (2, 3, 31, 12)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name,ashape,bshape", CASES, ids=[c[0] for c in CASES])
def test_batched_matmul_matches_torch_matmul_in_float64(name, ashape, bshape, dtype):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    a = torch.randn(ashape, device="cuda", dtype=dt)
    b = torch.randn(bshape, device="cuda", dtype=dt)
    got = gemmlab.matmul(a, b)
    want = torch.matmul(a.double(), b.double())
    assert got.shape == want.shape and got.dtype == dt
    tol = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * a.shape[-1] ** 0.5)


@pytest.mark.gpu
def test_transposed_and_expanded_views_are_read_as_they_are():
    torch = pytest.importorskip("torch")
    a = torch.randn(6, 40, 25, device="cuda").mT             # (6, 25, 40), column-major elements
    b = torch.randn(40, 7, device="cuda").expand(6, 40, 7)    # stride 0 over the batch
    torch.testing.assert_close(gemmlab.matmul(a, b).double(), torch.matmul(a.double(), b.double()),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_batched_matmul_fuses_bias_and_activation():
    torch = pytest.importorskip("torch")
    a = torch.randn(3, 20, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(3, 64, 24, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(24, device="cuda", dtype=torch.bfloat16)
    got = gemmlab.matmul(a, b, bias=bias, activation="silu")
    want = torch.nn.functional.silu(torch.matmul(a.double(), b.double()) + bias.double())
    torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_batched_matmul_takes_cupy_arrays_and_out():
    cp = pytest.importorskip("cupy")
    a = cp.random.standard_normal((4, 30, 50), dtype=cp.float32)
    b = cp.random.standard_normal((4, 50, 20), dtype=cp.float32)
    out = cp.empty((4, 30, 20), dtype=cp.float32)
    assert gemmlab.matmul(a, b, out=out) is out
    cp.testing.assert_allclose(out, cp.matmul(a.astype(cp.float64), b.astype(cp.float64)), rtol=1e-4, atol=1e-4)
