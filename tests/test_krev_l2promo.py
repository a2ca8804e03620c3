"""Two parameters of the WGMMA rungs on the GPU.

KREV=1 (rungs 21 and 22, kernels/ws.cuh): the units of odd waves load their k tiles from the last
to the first, so a wave starts on the A lines the one before it left in L2. Only the producer's k
coordinates change; these tests hold the rest to it: correct in every layout, with and without
clusters, on the TMA and the thread-copy paths, both epilogues, with a ragged last k tile (which a
backward unit loads first), with alpha and beta (beta == 0 with NaN in C: verify poisons it), and
the same bits at every launch. L2PROMO (rungs 19, 21 and 22: the tensor maps' L2 promotion,
host-side) is correct at each value the copy engine takes. The CPU side (a switch and a parameter
the registry checks, the maps' encoding) is test_registry.py's and test_tensormaps.py's."""

from __future__ import annotations

import pytest

from gemmlab.measure.verify import ALL_LAYOUTS, verify_all

pytestmark = pytest.mark.gpu

LAYOUTS = ALL_LAYOUTS
AB = [(1.0, 0.0), (1.5, -0.75)]
# 2888 x 2104 in 128 x 256 tiles: 23 x 9 = 207 tiles on 132 SMs in 104 blocks (BALANCE=1, the
# default), so wave 1 (units 104-206) walks backward (clusters of 2: 108 units, 54 in wave 1).
# K = 264: 5 k tiles of 64 (9 of 32 for rung 22), both operands by TMA; K = 2001: a ragged last k
# tile, a backward unit's first; K = 263 (rung 21): the operand whose leading dimension is K copied
# by the producer's threads.
SHAPES = [(2888, 2104, 264), (2888, 2104, 2001)]
CONFIGS = {"wgmma_ws": ["KREV=1,CLUSTER=1", "KREV=1,CLUSTER=2", "KREV=1,CLUSTER=1,DEFER=0,BN=128,STAGES=6"],
           "wgmma_tf32": ["KREV=1,CLUSTER=1", "KREV=1,CLUSTER=2", "KREV=1,EPI_TMA=0"]}


@pytest.fixture(scope="module", autouse=True)
def _compiled_ahead(compile_ahead):
    """Their variants, every layout and alignment class, on every CPU (one after another in the
    tests' verify calls, they took most of this file's time)."""
    from gemmlab.core.precompile import variants

    todo = [v for slug, configs in CONFIGS.items() for cfg in configs
            for v in variants([slug], None, None, "sm_90a", configs={slug: cfg})]
    compile_ahead({"sm_90a": todo}, 3)


def _failures(rung, dtype, config, precision=None, shapes=SHAPES, layouts=LAYOUTS):
    return [r.message() for r in verify_all(rung, dtype, shapes, layouts, AB, config=config, precision=precision)
            if not r.ok]


@pytest.mark.parametrize("cluster", [1, 2])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_wgmma_ws_with_backward_odd_waves_matches_cublas_in_every_layout(dtype, cluster):
    failures = _failures("wgmma_ws", dtype, f"KREV=1,CLUSTER={cluster}",
                         shapes=SHAPES + [(2888, 2104, 263)])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("precision, cluster", [("tf32", 1), ("tf32", 2), ("3xtf32", 2)])
def test_wgmma_tf32_with_backward_odd_waves_matches_cublas_in_every_layout(precision, cluster):
    """tf32: the register-A path (row-major A and B, transposed) and the descriptor path; both
    epilogues (beta == 0 takes the TMA store where C allows)."""
    failures = _failures("wgmma_tf32", "fp32", f"KREV=1,CLUSTER={cluster}", precision)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rung, dtype, config, precision", [
    ("wgmma_ws", "bf16", "KREV=1,CLUSTER=1,DEFER=0,BN=128,STAGES=6", None),
    ("wgmma_tf32", "fp32", "KREV=1,EPI_TMA=0", "tf32")])
def test_backward_odd_waves_match_cublas_with_the_other_epilogue_in_every_layout(rung, dtype, config, precision):
    """Rung 21's immediate epilogue (DEFER=0) on 128x128 tiles (23 x 17 = 391 tiles: waves 0-2 of 131
    blocks, one backward); rung 22's stores from the accumulators."""
    failures = _failures(rung, dtype, config, precision)
    assert not failures, "\n".join(failures)


def test_backward_odd_waves_sum_the_same_bits_at_every_launch():
    torch = pytest.importorskip("torch")
    import gemmlab

    g = torch.Generator(device="cuda").manual_seed(16)
    a = torch.randn(2888, 2001, device="cuda", generator=g)
    b = torch.randn(2001, 2104, device="cuda", generator=g)
    first = gemmlab.matmul(a, b, kernel="wgmma_tf32", precision="tf32", config="KREV=1")
    for _ in range(3):
        again = gemmlab.matmul(a, b, kernel="wgmma_tf32", precision="tf32", config="KREV=1")
        assert torch.equal(first, again)


@pytest.mark.parametrize("promo", [64, 128, 256])
@pytest.mark.parametrize("rung, dtype, precision", [("wgmma_tma", "fp16", None), ("wgmma_ws", "bf16", None),
                                                    ("wgmma_tf32", "fp32", "tf32")])
def test_every_l2_promotion_of_the_tensor_maps_gives_results_that_match_cublas(rung, dtype, precision, promo):
    failures = _failures(rung, dtype, f"L2PROMO={promo}", precision, shapes=[(1000, 1100, 264)],
                         layouts=[(False, False, False), (True, True, True), (False, True, False)])
    assert not failures, "\n".join(failures)
