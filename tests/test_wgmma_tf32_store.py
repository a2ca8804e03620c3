"""Rung 22's TMA store epilogue (EPI_TMA=1, kernels/22_wgmma_tf32.cu, store_tile_tma) on the GPU:
where beta == 0 and C has a tensor map whose rows are whole 16-byte pieces, each consumer
warpgroup stages its tile in 64 x 32 FP32 chunks and stores them by TMA (two 32-row boxes each), in
both of the kernel's C layouts (row-major, and column-major for the register-A path's transposed
problem); beta != 0, a C TMA cannot describe (tests/test_tensormaps.py), and EPI_TMA=0 store from
the accumulators. Checked against cuBLAS in every layout on ragged tiles, with blocks looping over
many tiles (the chunk buffers reused across tiles), with stream-K and in 3xtf32; and that the
clipped boxes write nothing
outside C. verify poisons C with NaN when beta == 0."""

from __future__ import annotations

import itertools

import pytest

import gemmlab
from gemmlab.measure.arrays import Lib, make_operands
from gemmlab.measure.verify import check, verify

pytestmark = pytest.mark.gpu
RUNG = "wgmma_tf32"
LAYOUTS = list(itertools.product((False, True), repeat=3))
# M and N multiples of 4 (rows of whole 16-byte pieces in either C layout: beta == 0 takes the TMA
# store) but of no tile: boxes clipped at both edges; 2888 x 2104: 12 x 9 tiles of 128 x 256 for 132
# SMs, so blocks loop and reuse their chunk buffers (17 x 12 for the transposed problem). Then odd
# M or N, which no TMA store can write (the stores from the accumulators with EPI_TMA=1 too).
SHAPES = [(4, 8, 8), (200, 136, 72), (2888, 2104, 264), (13, 17, 9), (257, 31, 300)]


def _failures(shapes, layout, config, alpha_beta, precision="tf32"):
    a_col, b_col, c_col = layout
    out = []
    for (M, N, K), (alpha, beta) in itertools.product(shapes, alpha_beta):
        r = verify(RUNG, M, N, K, "fp32", a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                   config=config, precision=precision)
        if not r.ok:
            out.append(r.message())
    return out


@pytest.mark.parametrize("epi_tma", [1, 0], ids=["tma_store", "from_registers"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
def test_both_epilogues_match_cublas_on_ragged_tiles_in_every_layout(layout, epi_tma):
    failures = _failures(SHAPES, layout, {"EPI_TMA": epi_tma}, [(1.5, 0.0), (1.0, -0.75)])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("layout", [(False, False, False), (False, True, False), (True, True, True)],
                         ids=["RRR", "RCR", "CCC"])
def test_the_tma_store_after_stream_k_pieces_matches_cublas(layout):
    """STREAMK=1: a tile's finisher adds the other pieces' sums, then stores the tile by TMA."""
    failures = _failures([(2888, 2104, 264), (1664, 2816, 64)], layout, "STREAMK=1", [(1.5, 0.0)])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("layout", [(False, False, False), (True, False, True)], ids=["RRR", "CRC"])
def test_3xtf32_stores_through_tma_too(layout):
    failures = _failures([(200, 136, 72), (1000, 1000, 200)], layout, None, [(1.5, 0.0)], precision="3xtf32")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("b_col", [False, True], ids=["transposed_problem", "direct_problem"])
@pytest.mark.parametrize("N", [72, 77], ids=["tma_store", "ragged_piece_from_registers"])
@pytest.mark.parametrize("c_col", [False, True], ids=["c_row", "c_col"])
def test_the_epilogue_writes_nothing_outside_c_in_the_memory_around_it(c_col, N, b_col):
    """C a view into a larger buffer with a 16-byte-legal leading dimension and ragged last tiles:
    N = 72 takes the TMA store (its clipped boxes must leave the padding and the rows after C as
    they were), N = 77 ends its runs inside a 16-byte piece, which the copy engine would write
    whole (the stores from the accumulators instead). Row-major A with row-major B runs the
    transposed problem (the kernel's C column-major), with column-major B the problem as given."""
    torch = pytest.importorskip("torch")
    M, K = 131, 64
    ld = 96                    # past N, a multiple of 4
    buf = torch.full((M + 40, ld), 7.0, device="cuda", dtype=torch.float32)
    view = buf[:M, :N]
    c = view.T if c_col else view
    ops = make_operands(Lib("torch"), *((N, M) if c_col else (M, N)), K, "fp32", b_col=b_col, beta_nonzero=False, c=c)
    gemmlab.gemm(ops.a, ops.b, ops.c, alpha=1.0, beta=0.0, kernel=RUNG, precision="tf32", config="EPI_TMA=1")
    r = check(ops, 1.0, 0.0, f"{RUNG} C {M}x{N} inside a {M + 40}x{ld} buffer", "tf32")
    assert r.ok, r.message()
    outside = torch.cat([buf[:M, N:].flatten(), buf[M:].flatten()])
    assert bool((outside == 7.0).all()), "the epilogue wrote outside C"
