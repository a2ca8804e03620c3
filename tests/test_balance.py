"""BALANCE=1 on the GPU (rungs 21 and 22, the default; core/registry.py, Rung.persistent_grid): the
persistent grid takes the fewest clusters that need no more waves, so every cluster walks the same
number of units or one fewer. The kernel is the one compiled for BALANCE=0 (it reads gridDim); what
changes is which block computes which tile, never how: each tile's k loop is the same, so C is the
same bit for bit as with one block per SM. With STREAMK=1 the grid is balanced only where that
drops few SMs (test_registry.py), so here (207 units) a configuration with both runs the stream-K
tail on the full grid. The grid's arithmetic is test_registry.py's; the stream-K and KREV tests pin
or describe their grids."""

from __future__ import annotations

import pytest

from gemmlab.measure.verify import ALL_LAYOUTS, verify_all

pytestmark = pytest.mark.gpu

# 2888 x 2104 in 128 x 256 tiles: 23 x 9 = 207 tiles; on the H100's 132 SMs the full grid is 132
# blocks (a wave of 132 and one of 75), the balanced one 104 (104 and 103); with STREAMK=1 it stays
# 132 (the balanced grid would drop 28), the 75 split by k tiles. K = 2001: a ragged last k tile.
SHAPE = (2888, 2104, 2001)
AB = [(1.0, 0.0), (1.5, -0.75)]
STREAMK = {"wgmma_ws": ("fp16", None), "wgmma_tf32": ("fp32", "tf32")}
CONFIG = "BALANCE=1,STREAMK=1,CLUSTER=1"


@pytest.fixture(scope="module", autouse=True)
def _compiled_ahead(compile_ahead):
    """The stream-K variants, every layout and alignment class, on every CPU at once."""
    from gemmlab.core.precompile import variants

    todo = [v for slug, (dtype, _) in STREAMK.items() for v in variants([slug], [dtype], None, "sm_90a",
                                                                         configs={slug: CONFIG})]
    compile_ahead({"sm_90a": todo}, 2)


def _operands(torch, dtype):
    g = torch.Generator(device="cuda").manual_seed(18)
    M, N, K = SHAPE
    return (torch.randn(M, K, device="cuda", generator=g).to(dtype),
            torch.randn(K, N, device="cuda", generator=g).to(dtype))


@pytest.mark.parametrize("kernel, dtype, precision",
                         [("wgmma_ws", "bfloat16", None), ("wgmma_tf32", "float32", "tf32")])
def test_a_balanced_grid_gives_the_same_bits_as_one_block_per_sm(kernel, dtype, precision):
    torch = pytest.importorskip("torch")
    import gemmlab

    a, b = _operands(torch, getattr(torch, dtype))
    out = {}
    for balance in (0, 1):
        c = torch.full((SHAPE[0], SHAPE[1]), float("nan"), device="cuda", dtype=a.dtype)
        p = gemmlab.plan(a, b, c, kernel=kernel, config=f"BALANCE={balance},CLUSTER=1", precision=precision)
        p.run()
        torch.cuda.synchronize()
        out[balance] = (p.geometry.grid[0], c)
    (full, c0), (balanced, c1) = out[0], out[1]
    assert balanced <= full                   # 104 against 132 on the H100
    assert not torch.isnan(c1).any() and torch.equal(c0, c1)


@pytest.mark.parametrize("rung", sorted(STREAMK))
def test_balance_with_a_stream_k_tail_matches_cublas_in_every_layout(rung):
    dtype, precision = STREAMK[rung]
    results = verify_all(rung, dtype, [SHAPE, (2888, 2104, 264)], ALL_LAYOUTS, AB, config=CONFIG, precision=precision)
    failures = [r.message() for r in results if not r.ok]
    assert results and not failures, "\n".join(failures)
