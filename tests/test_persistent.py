"""Rung 21 (wgmma_ws, kernels/21_wgmma_ws.cu) on the GPU where it differs from the other rungs:
persistent blocks that loop over several ragged tiles (the mbarrier phases continue from one tile
to the next), with and without clusters, through TMA and through the thread-copy path. Odd and
degenerate shapes (1x1x1 ...) in every layout are tests/test_gpu_correctness.py's, which covers
every rung; verify poisons C with NaN when beta == 0."""

import itertools

import pytest

from gemmlab.core import registry
from gemmlab.measure.verify import verify

pytestmark = pytest.mark.gpu

LAYOUTS = list(itertools.product((False, True), repeat=3))
# 2888 x 2104 in 128 x 256 tiles: 23 x 9 = 207 tiles for 132 SMs, so blocks loop; in clusters of 2,
# 12 x 9 pairs for 66 clusters, and the last pair row has one tile wholly below M (23 is odd; a
# column-major C swaps M and N: 17 x 12 tiles). Every dimension is ragged. K = 264: every leading
# dimension a multiple of 8, both operands by TMA in every layout; K = 263: the operand whose
# leading dimension is K is copied by the producer's threads.
MANY_TILES = [(2888, 2104, 264), (2888, 2104, 263)]


@pytest.mark.parametrize("preset", ["128x256", "128x256_nocluster"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
def test_blocks_looping_over_many_ragged_tiles_match_cublas_in_every_layout(layout, preset):
    a_col, b_col, c_col = layout
    failures = []
    for (M, N, K), (alpha, beta) in itertools.product(MANY_TILES, [(1.0, 0.0), (1.5, -0.75)]):
        r = verify("wgmma_ws", M, N, K, "fp16", a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                   config=preset)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("preset", sorted(registry.get("wgmma_ws").presets))
def test_every_preset_is_correct_when_its_blocks_loop_over_ragged_tiles(preset):
    """1500 x 1500: 144 tiles of 128 x 128 (12 x 6 of 128 x 256, 6 x 12 of 256 x 128), bf16."""
    for K in (1000, 1001):
        r = verify("wgmma_ws", 1500, 1500, K, "bf16", lib="torch", alpha=1.0, beta=0.5, config=preset)
        assert r.ok, r.message()

