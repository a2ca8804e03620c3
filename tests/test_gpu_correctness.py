"""Every rung, every dtype it claims in every precision it provides (tf32 and 3xtf32 for rungs 20 and 22),
all 8 layout combinations of A, B, C, alpha/beta (with beta = 0 on a NaN-poisoned C), over odd and
degenerate shapes: checked against cuBLAS in float64 on fresh random data (gemmlab.measure.verify),
at the tolerance of the precision."""

import itertools

import pytest

import gemmlab
from gemmlab.core import registry
from gemmlab.core.precision import applies
from gemmlab.measure.verify import verify

pytestmark = pytest.mark.gpu

# (M, N, K, ld_pad, offset): odd, prime, below one tile, tall-skinny, K = 1, single row/column,
# exact multiples of the tiles with several K tiles, leading dimensions that are not multiples of
# the vector width, base pointers that are not 16-byte aligned.
SHAPES = [
    (1, 1, 1, 0, 0),
    (7, 5, 3, 0, 0),
    (127, 129, 65, 0, 0),
    (256, 128, 96, 0, 0),
    (257, 31, 300, 0, 0),
    (33, 300, 1, 0, 0),
    (1, 515, 77, 0, 0),
    (300, 1, 129, 0, 0),
    (130, 257, 129, 3, 1),
    (192, 160, 64, 1, 0),
]
ALPHA_BETA = [(1.0, 0.0), (1.5, -0.75)]
LAYOUTS = list(itertools.product((False, True), repeat=3))
CASES = [(r.slug, dt, p) for r in gemmlab.kernels() for dt in r.dtypes for p in r.precisions if applies(p, dt)]


def _lib(dtype):
    return "torch" if dtype == "bf16" else None


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
@pytest.mark.parametrize("slug,dtype,precision", CASES)
def test_rung_matches_cublas_for_odd_shapes_in_every_layout(slug, dtype, precision, layout):
    a_col, b_col, c_col = layout
    failures = []
    for (M, N, K, pad, off), (alpha, beta) in itertools.product(SHAPES, ALPHA_BETA):
        r = verify(slug, M, N, K, dtype, lib=_lib(dtype), a_col=a_col, b_col=b_col, c_col=c_col,
                   alpha=alpha, beta=beta, ld_pad=pad, offset=off, precision=precision)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("slug,dtype", [(r.slug, r.dtypes[0]) for r in gemmlab.kernels()])
def test_m_beyond_65535_row_tiles_is_computed_in_full(slug, dtype):
    """M = 65535 x BM + 1: one row tile more than grid.y holds (the rows continue along grid.z)."""
    bm = registry.get(slug).config()["BM"]
    r = verify(slug, 65535 * bm + 1, 7, 9, dtype, lib=_lib(dtype), alpha=1.5, beta=-0.5)
    assert r.ok, r.message()


def test_tall_grid_with_surplus_tiles_in_its_last_slice_writes_only_inside_c():
    """M = 2 x 65535 x BM + 1 splits into 3 slices of 43691 row tiles: 2 tiles lie wholly past M."""
    r = verify("warp_tiling", 2 * 65535 * 128 + 1, 5, 6, "fp32", a_col=True, alpha=1.0, beta=2.0)
    assert r.ok, r.message()


@pytest.mark.parametrize("slug", ["warp_tiling", "naive"])
def test_torch_tensors_work_like_cupy_arrays(slug):
    pytest.importorskip("torch")
    r = verify(slug, 131, 67, 45, "fp32", lib="torch", a_col=True, alpha=0.5, beta=2.0)
    assert r.ok, r.message()


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_auto_picks_a_correct_rung_for_each_dtype(dtype):
    r = verify("auto", 515, 259, 333, dtype, lib=_lib(dtype), alpha=1.0, beta=0.25)
    assert r.ok, r.message()


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_auto_computes_a_tensor_core_precision_correctly(precision):
    r = verify("auto", 515, 259, 1333, "fp32", alpha=1.0, beta=0.25, precision=precision)
    assert r.ok, r.message()


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
@pytest.mark.parametrize("preset", sorted(registry.get("tf32_mma").presets))
def test_tf32_presets_are_correct_across_tile_edges(precision, preset):
    for a_col, b_col in itertools.product((False, True), repeat=2):
        r = verify("tf32_mma", 300, 173, 229, "fp32", a_col=a_col, b_col=b_col, alpha=1.5, beta=-0.75,
                   config=preset, precision=precision)
        assert r.ok, r.message()


@pytest.mark.parametrize("preset", sorted(registry.get("wgmma_tf32").presets_for("3xtf32")))
def test_wgmma_tf32_3xtf32_presets_are_correct_across_tile_edges(preset):
    for a_col, b_col in itertools.product((False, True), repeat=2):
        r = verify("wgmma_tf32", 300, 173, 229, "fp32", a_col=a_col, b_col=b_col, alpha=1.5, beta=-0.75,
                   config=preset, precision="3xtf32")
        assert r.ok, r.message()


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("preset", sorted(registry.get("mma_sync").presets))
def test_mma_sync_presets_read_operands_without_16_byte_access_at_any_parity(dtype, preset):
    """Rung 17 copies such an operand by 4-byte words into staging and shifts each chunk into its
    tile: odd and even leading dimensions, an odd base, ragged K and rows, a K split, many k tiles."""
    cases = [(300, 173, 229, 0, 0), (67, 130, 1001, 1, 1), (129, 65, 66, 2, 0), (33, 257, 517, 3, 1)]
    for (M, N, K, pad, off), (a_col, b_col), split in itertools.product(
            cases, itertools.product((False, True), repeat=2), (1, 3)):
        r = verify("mma_sync", M, N, K, dtype, lib=_lib(dtype), a_col=a_col, b_col=b_col, alpha=1.5, beta=-0.75,
                   ld_pad=pad, offset=off, config=f"{preset},SPLITK={split}")
        assert r.ok, r.message()


def test_larger_problem_with_many_k_tiles_is_accurate():
    r = verify("auto", 1000, 1100, 2049, "fp32", alpha=1.0, beta=1.0)
    assert r.ok, r.message()


def test_beta_zero_never_reads_c_even_when_it_holds_nan():
    import cupy as cp

    a = cp.random.standard_normal((65, 33), dtype=cp.float32)
    b = cp.random.standard_normal((33, 47), dtype=cp.float32)
    c = cp.full((65, 47), cp.nan, dtype=cp.float32)
    for rung in gemmlab.kernels():
        if "fp32" in rung.dtypes:
            c.fill(cp.nan)
            gemmlab.gemm(a, b, c, beta=0.0, kernel=rung.slug)
            assert bool(cp.isfinite(c).all()), rung.slug


def test_k_zero_gives_beta_times_c_without_a_launch():
    import cupy as cp

    a, b = cp.empty((5, 0), cp.float32), cp.empty((0, 4), cp.float32)
    c = cp.random.standard_normal((5, 4), dtype=cp.float32)
    want = 0.5 * c
    gemmlab.gemm(a, b, c, beta=0.5)
    assert bool(cp.allclose(c, want))
    c.fill(cp.nan)
    gemmlab.gemm(a, b, c, beta=0.0)
    assert bool((c == 0).all())


def test_empty_m_or_n_is_a_no_op():
    import cupy as cp

    c = cp.empty((0, 4), cp.float32)
    assert gemmlab.gemm(cp.ones((0, 3), cp.float32), cp.ones((3, 4), cp.float32), c) is c


def test_matmul_returns_a_new_array_of_the_input_library():
    import cupy as cp

    a = cp.random.standard_normal((70, 30), dtype=cp.float32)
    b = cp.random.standard_normal((30, 20), dtype=cp.float32)
    c = gemmlab.matmul(a, b)
    assert isinstance(c, cp.ndarray) and c.shape == (70, 20) and c.dtype == cp.float32
    assert float(cp.abs(c - a @ b).max()) < 1e-3


def test_matmul_of_torch_tensors_returns_a_torch_tensor():
    torch = pytest.importorskip("torch")
    a = torch.randn(40, 24, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(24, 56, device="cuda", dtype=torch.bfloat16)
    c = gemmlab.matmul(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.bfloat16 and c.shape == (40, 56)
    ref = (a.double() @ b.double())
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-2


def test_kernel_runs_on_the_callers_current_stream():
    # Capture the call into a CUDA graph on a non-default stream: a launch on any other stream
    # would break the capture, and replaying the graph must compute the product.
    import cupy as cp

    a = cp.random.standard_normal((256, 192), dtype=cp.float32)
    b = cp.random.standard_normal((192, 128), dtype=cp.float32)
    c = cp.empty((256, 128), cp.float32)
    gemmlab.gemm(a, b, c, kernel="tile_2d")   # compiled before the capture (a compile during one is refused)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        gemmlab.gemm(a, b, c, kernel="tile_2d")
        graph = s.end_capture()
    c.fill(cp.nan)
    cp.cuda.get_current_stream().synchronize()   # the fill (legacy stream) done before the replay on s
    graph.launch(s)
    s.synchronize()
    assert float(cp.abs(c - a @ b).max()) < 1e-3


def test_plan_runs_repeatedly_with_the_same_result():
    import cupy as cp

    a = cp.random.standard_normal((300, 200), dtype=cp.float32)
    b = cp.random.standard_normal((200, 100), dtype=cp.float32)
    c = cp.empty((300, 100), cp.float32)
    p = gemmlab.plan(a, b, c, kernel="double_buffer")
    p.run()
    first = c.copy()
    p.run()
    assert bool((c == first).all())


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
@pytest.mark.parametrize("config", [None, "BM=128,BN=128,BK=8,WM=64,WN=32,TM=8,TN=8,SPLITK=4",
                                    "BM=64,BN=64,BK=16,WM=32,WN=32,TM=4,TN=8,STAGES=3", "SNAKE=1",
                                    "BM=64,BN=64,BK=16,WM=32,WN=32,TM=4,TN=8,STAGES=3,SPREAD=0,SNAKE=1"])
def test_async_simt_edge_blocks_over_many_full_k_tiles_match_cublas(config, layout):
    """M = 127 < BM and N = 1 past a tile: every block is an edge block, and each copies its full-K
    tiles on the edge path (bounds from compile-time offsets), not the checked one; also with 16-byte
    operands (ld_pad makes N's rows aligned: the partial 16-byte copies at the last column tile)."""
    a_col, b_col, c_col = layout
    for M, N, K, pad in [(127, 4097, 1023, 0), (127, 257, 1023, 3), (65, 130, 200, 2)]:
        r = verify("async_simt", M, N, K, "fp32", a_col=a_col, b_col=b_col, c_col=c_col, alpha=1.5, beta=-0.75,
                   ld_pad=pad, config=config)
        assert r.ok, r.message()
