"""Rung 21 (wgmma_ws, kernels/21_wgmma_ws.cu) on the GPU where it differs from the other rungs:
persistent blocks that loop over several ragged tiles (the mbarrier phases continue from one tile
to the next), with and without clusters, through TMA and through the thread-copy path; its epilogue
by TMA stores (EPI_TMA=1, where C has 16-byte access and beta == 0) and by staged 16-byte stores
(EPI_TMA=0, or the C or beta TMA cannot serve: a C no map describes is tests/test_tensormaps.py's),
and that the TMA stores write nothing outside C.
DEFER=1 holds a tile stored by TMA in registers and writes it box by box during the next piece's
main loop (the last tile after the walk). Odd and degenerate shapes (1x1x1 ...) in every layout are tests/test_gpu_correctness.py's, which
covers every rung; verify poisons C with NaN when beta == 0."""

import itertools

import pytest

import gemmlab
from gemmlab.core import registry
from gemmlab.measure.arrays import Lib, make_operands
from gemmlab.measure.verify import check, verify

pytestmark = pytest.mark.gpu

LAYOUTS = list(itertools.product((False, True), repeat=3))
# 2888 x 2104 in 128 x 256 tiles: 23 x 9 = 207 tiles for 132 SMs, so blocks loop (104 of them with
# BALANCE=1, the default); in clusters of 2, 12 x 9 pairs for 66 clusters (54 balanced, two pairs
# each), and the last pair row has one tile wholly below M (23 is odd; a column-major C swaps M and
# N: 17 x 12 tiles). Every dimension is ragged. K = 264: every leading dimension a multiple of 8,
# both operands by TMA in every layout; K = 263: the operand whose leading dimension is K is copied
# by the producer's threads.
MANY_TILES = [(2888, 2104, 264), (2888, 2104, 263)]


def _failures(shapes, layout, config, alpha_beta):
    """verify's messages for every shape and (alpha, beta) in one layout, fp16, that fail."""
    a_col, b_col, c_col = layout
    failures = []
    for (M, N, K), (alpha, beta) in itertools.product(shapes, alpha_beta):
        r = verify("wgmma_ws", M, N, K, "fp16", a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                   config=config)
        if not r.ok:
            failures.append(r.message())
    return failures


@pytest.mark.parametrize("preset", ["128x256", "128x256_nocluster"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
def test_blocks_looping_over_many_ragged_tiles_match_cublas_in_every_layout(layout, preset):
    failures = _failures(MANY_TILES, layout, preset, [(1.0, 0.0), (1.5, -0.75)])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("preset", sorted(registry.get("wgmma_ws").presets))
def test_every_preset_is_correct_when_its_blocks_loop_over_ragged_tiles(preset):
    """1500 x 1500: 144 tiles of 128 x 128 (12 x 6 of 128 x 256, 6 x 12 of 256 x 128), bf16."""
    for K in (1000, 1001):
        r = verify("wgmma_ws", 1500, 1500, K, "bf16", lib="torch", alpha=1.0, beta=0.5, config=preset)
        assert r.ok, r.message()


@pytest.mark.parametrize("defer", [0, 1], ids=["at_the_end", "deferred"])
@pytest.mark.parametrize("preset", sorted(registry.get("wgmma_ws").presets))
def test_every_preset_stores_through_tma_correctly_when_its_blocks_loop_over_ragged_tiles(preset, defer):
    """beta == 0, so the TMA store, with alpha 1 and not. A warp's tile of 128x256 or 256x128 is 4
    boxes through 2 buffers (the second pair waits for the copy engine to read the first), 128x128
    2 boxes. 2888 x 2104: blocks loop over several tiles, the buffers reused from one tile to the
    next (with clusters, a tile wholly below M); K = 8 and 64: one k tile per output tile (with
    DEFER=1 every held box is left for after the next piece's loop); K = 520: more k tiles than
    stages (DEFER=1: the boxes written between runs of the next tile's k tiles)."""
    failures = []
    for K, alpha in itertools.product((8, 64, 520), (1.0, 1.5)):
        r = verify("wgmma_ws", 2888, 2104, K, "bf16", lib="torch", alpha=alpha, beta=0.0,
                   config=f"{preset},DEFER={defer}")
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


# The first four: M and N multiples of 8 (C's rows whole 16-byte chunks 16-byte apart in either
# layout, so beta == 0 takes the TMA store) but not of any tile: ragged tiles in both dimensions,
# rows and columns TMA clips; K = 33 leaves A or B (or both) to the producer's thread copy; 2888 x
# 2104: blocks loop over many tiles. The last two: odd M or N, which no TMA store can write (the
# staged stores with EPI_TMA=1 too).
EPILOGUE_SHAPES = [(8, 8, 8), (200, 136, 72), (136, 520, 33), (2888, 2104, 264), (13, 17, 9), (257, 31, 300)]


@pytest.mark.parametrize("defer", [0, 1], ids=["at_the_end", "deferred"])
@pytest.mark.parametrize("epi_tma", [1, 0], ids=["tma_store", "staged"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
def test_both_epilogues_match_cublas_on_ragged_tiles_in_every_layout(layout, epi_tma, defer):
    failures = _failures(EPILOGUE_SHAPES, layout, {"EPI_TMA": epi_tma, "DEFER": defer}, [(1.5, 0.0), (1.0, -0.75)])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("defer", [0, 1], ids=["at_the_end", "deferred"])
@pytest.mark.parametrize("N", [72, 77], ids=["tma_store", "ragged_chunk_staged"])
@pytest.mark.parametrize("c_col", [False, True], ids=["c_row", "c_col"])
def test_the_epilogue_writes_nothing_outside_c_in_the_memory_around_it(c_col, N, defer):
    """C a view into a larger buffer, with a 16-byte-legal leading dimension, whose last row and
    column tiles are ragged: N = 72 takes the TMA store (its clipped boxes must leave the padding
    and the rows after C as they were); N = 77 ends its rows inside a 16-byte chunk, which the copy
    engine would write whole (the staged stores instead)."""
    torch = pytest.importorskip("torch")
    M, K = 131, 64             # as the kernel sees it
    ld = 96                    # past N, a multiple of 8
    buf = torch.full((M + 40, ld), 7.0, device="cuda", dtype=torch.bfloat16)
    view = buf[:M, :N]
    c = view.T if c_col else view                       # the kernel's C is always the row-major view
    ops = make_operands(Lib("torch"), *((N, M) if c_col else (M, N)), K, "bf16", beta_nonzero=False, c=c)
    gemmlab.gemm(ops.a, ops.b, ops.c, alpha=1.0, beta=0.0, kernel="wgmma_ws", config=f"EPI_TMA=1,DEFER={defer}")
    r = check(ops, 1.0, 0.0, f"wgmma_ws C {M}x{N} inside a {M + 40}x{ld} buffer")
    assert r.ok, r.message()
    outside = torch.cat([buf[:M, N:].flatten(), buf[M:].flatten()])
    assert bool((outside == 7.0).all()), "the epilogue wrote outside C"


ENTRY_128x128 = "BM=128,BN=128,BK=64,WM=64,STAGES=5,CLUSTER=1,DEFER=0"   # 128x14336x4096's shipped entry


@pytest.mark.parametrize("config", [None, ENTRY_128x128], ids=["default", "128x128_entry"])
@pytest.mark.parametrize("layout", [(False, False, False), (True, True, True)], ids=["RRR", "CCC"])
@pytest.mark.parametrize("M, N, K", [(200, 136, 72), (2888, 2104, 264)])
def test_a_plan_stores_through_its_twin_when_beta_is_zero_and_through_the_full_kernel_otherwise(M, N, K, layout,
                                                                                                config):
    """Rung 21's store twin (Rung.store_twin; the kernel built without the staged epilogue) runs the
    calls with beta == 0, the full kernel those with beta != 0, through one plan: gemmlab.gemm's
    fast path reuses it for new operands of the same shapes, here beta 0, -0.75, 0 in turn (C NaN
    when beta == 0)."""
    pytest.importorskip("torch")
    a_col, b_col, c_col = layout
    first = make_operands(Lib("torch"), M, N, K, "bf16", a_col=a_col, b_col=b_col, c_col=c_col, beta_nonzero=False)
    assert gemmlab.plan(first.a, first.b, first.c, kernel="wgmma_ws", config=config).twin is not None
    failures = []
    for beta in (0.0, -0.75, 0.0):
        ops = make_operands(Lib("torch"), M, N, K, "bf16", a_col=a_col, b_col=b_col, c_col=c_col,
                            beta_nonzero=beta != 0.0)
        gemmlab.gemm(ops.a, ops.b, ops.c, alpha=1.5, beta=beta, kernel="wgmma_ws", config=config)
        r = check(ops, 1.5, beta, f"wgmma_ws {M}x{N}x{K} {layout} beta={beta}")
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


def test_a_plan_whose_rows_the_tma_store_cannot_write_has_no_twin_and_is_right():
    """N = 77: rows end inside a 16-byte chunk, so every call stores by rows (the full kernel)."""
    pytest.importorskip("torch")
    ops = make_operands(Lib("torch"), 131, 77, 64, "bf16", beta_nonzero=False)
    p = gemmlab.plan(ops.a, ops.b, ops.c, kernel="wgmma_ws", config=ENTRY_128x128)
    assert p.twin is None
    p.run()
    r = check(ops, 1.0, 0.0, "wgmma_ws 131x77x64")
    assert r.ok, r.message()
