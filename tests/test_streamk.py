"""STREAMK=1 on the GPU (rungs 21 and 22, kernels/ws.cuh): the units past the last whole wave are
cut into k-tile pieces spread evenly over the clusters, and the pieces of a unit meet in the
stream's workspace (published by the others, added by the CTA that holds the unit's last k tile).
Correctness in every layout, with and without clusters, with alpha and beta (beta == 0 with NaN in
C: verify poisons it), K both a few k tiles (pieces that span several units) and many; the sum the
same bit for bit at every launch; the plan choosing the STREAMK=0 kernel where no wave is partial;
graph capture (the flags' memset is a node of the graph). The CPU side (the rule for when the tail
is split, the workspace's size, the variant a geometry runs) is in test_registry.py. The WGMMA rungs
run here with one block per SM (BALANCE=0), the grid these shapes were chosen for."""

from __future__ import annotations

import pytest

from gemmlab.core import registry
from gemmlab.measure.verify import ALL_LAYOUTS, verify_all

pytestmark = pytest.mark.gpu

LAYOUTS = ALL_LAYOUTS
# 2888 x 2104 in 128 x 256 tiles: 23 x 9 = 207 tiles, 75 past the last whole wave of 132 (clusters
# of 2: 12 x 9 = 108 units, 42 past 66). K = 264 is 5 k tiles of 64 (9 of 32 for rung 22): a
# cluster's share of the tail is 2-6 k tiles, so pieces cross units and a unit can have three; K =
# 2000 (and 2001, whose ragged last k tile TMA fills with zeros): each share is a part of one unit.
SHAPES = [(2888, 2104, 264), (2888, 2104, 2001)]
AB = [(1.0, 0.0), (1.5, -0.75)]


def _torch():
    return pytest.importorskip("torch")


def _full_grid(kernel, config):
    """The WGMMA rungs' config with one block per SM (BALANCE=0); rung 18's as it is."""
    return config + ",BALANCE=0" if kernel in ("wgmma_ws", "wgmma_tf32") else config


def _failures(rung, dtype, config, precision=None, shapes=SHAPES, layouts=LAYOUTS):
    return [r.message() for r in verify_all(rung, dtype, shapes, layouts, AB, config=_full_grid(rung, config),
                                            precision=precision)
            if not r.ok]


@pytest.mark.parametrize("cluster", [1, 2])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_wgmma_ws_with_a_stream_k_tail_matches_cublas_in_every_layout(dtype, cluster):
    failures = _failures("wgmma_ws", dtype, f"STREAMK=1,CLUSTER={cluster}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("tile", ["BN=256", "BN=128,STAGES=6"])
def test_wgmma_ws_with_a_stream_k_tail_and_the_deferred_epilogue_matches_cublas_in_every_layout(tile):
    """DEFER=1: a piece that publishes holds nothing, and the piece after it writes the tile held
    before it."""
    failures = _failures("wgmma_ws", "bf16", f"STREAMK=1,DEFER=1,{tile}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("precision, cluster", [("tf32", 1), ("tf32", 2), ("3xtf32", 2)])
def test_wgmma_tf32_with_a_stream_k_tail_matches_cublas_in_every_layout(precision, cluster):
    """tf32: the register-A path (row-major A and B, transposed) and the descriptor path; 3xtf32:
    the partial sums of a piece added to the sums as in a whole unit."""
    failures = _failures("wgmma_tf32", "fp32", f"STREAMK=1,CLUSTER={cluster}", precision)
    assert not failures, "\n".join(failures)


def test_a_thread_copied_operand_runs_without_stream_k_and_matches_cublas():
    """K = 263: the leading dimension of a row-major A is odd, so the producer's threads copy it;
    stream-K is built for the TMA path (the copy path's consumers have too few registers beside
    it), so the plan runs the STREAMK=0 kernel."""
    torch = _torch()
    p, _ = _plan(torch, 2888, 2104, 263, "STREAMK=1,CLUSTER=2")
    assert p.variant.cfg["STREAMK"] == 0 and not p.variant.vec_a
    failures = _failures("wgmma_ws", "fp16", "STREAMK=1,CLUSTER=2", shapes=[(2888, 2104, 263)],
                         layouts=[(False, False, False), (True, False, True)])
    assert not failures, "\n".join(failures)


# rung 18 (async_simt, FP32 on the CUDA cores; not persistent: a kernel of whole tiles, one per block,
# then the tail kernel), 128x256 tiles, BK = 8: 2888 x 2104 as above, 75 tiles past 1 wave; K = 264
# is 33 k tiles and a block's share of the tail 18.75 of them (a tile in up to three pieces); K =
# 2001 ends on a ragged k tile. 4095 x 2303: 288 tiles, 24 past 2 waves, so one whole wave more
# joins the tail (156 tiles); K = 100 is 13 k tiles, the last one ragged.
SIMT_SHAPES = [(2888, 2104, 264), (2888, 2104, 2001), (4095, 2303, 100)]


def test_async_simt_with_a_stream_k_tail_matches_cublas_in_every_layout():
    failures = _failures("async_simt", "fp32", "STREAMK=1", shapes=SIMT_SHAPES)
    assert not failures, "\n".join(failures)


def test_async_simt_runs_its_stream_k_tail_where_a_wave_is_partial_and_sums_the_same_bits_every_time():
    torch = _torch()
    p, (a, b, c) = _plan(torch, 2888, 2104, 2001, "STREAMK=1", kernel="async_simt", dtype=torch.float32)
    tail = registry.streamk_tail(2888, 2104, 2001, p.variant.cfg | {"STREAMK": 1}, p.geometry.grid[0])
    assert p.variant.cfg["STREAMK"] == int(tail) and ("stream-K last wave" in repr(p)) == tail
    assert _same_bits_at_every_launch(torch, p, c)


def _same_bits_at_every_launch(torch, p, c, launches=3) -> bool:
    """Whether ``launches`` runs of plan ``p`` into ``c`` (NaN before each) leave the same bits."""
    outs = []
    for _ in range(launches):
        c.fill_(float("nan"))
        p.run()
        torch.cuda.synchronize()
        outs.append(c.clone())
    return all(torch.equal(outs[0], o) for o in outs[1:])


def _plan(torch, M, N, K, config, kernel="wgmma_ws", dtype=None, **kw):
    import gemmlab

    dtype = dtype or torch.float16
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.empty(M, N, device="cuda", dtype=dtype)
    return gemmlab.plan(a, b, c, kernel=kernel, config=_full_grid(kernel, config), **kw), (a, b, c)


def test_the_stream_k_sum_is_the_same_bit_for_bit_at_every_launch():
    torch = _torch()
    p, (a, b, c) = _plan(torch, 2888, 2104, 2000, "STREAMK=1")
    assert _same_bits_at_every_launch(torch, p, c)


def test_the_plan_splits_only_a_partial_last_wave():
    """2888 x 2104 has a partial last wave on the H100's 132 SMs (and most GPUs'): the STREAMK=1
    kernel, with the workspace; 512 x 512 (8 tiles: one wave on any GPU) runs the STREAMK=0 kernel
    and needs none."""
    torch = _torch()
    p, _ = _plan(torch, 2888, 2104, 264, "STREAMK=1,CLUSTER=1")
    tail = registry.streamk_tail(2888, 2104, 264, p.variant.cfg | {"STREAMK": 1}, p.geometry.grid[0])
    assert p.variant.cfg["STREAMK"] == int(tail)
    assert ("stream-K last wave" in repr(p)) == tail
    if tail:
        assert p.mode.name == "staged"
        assert p.mode.workspace_bytes >= registry.streamk_workspace(p.variant.cfg, p.geometry.grid[0],
                                                                p.rung.streamk_warps(p.variant.cfg))[1]
    q, _ = _plan(torch, 512, 512, 264, "STREAMK=1,CLUSTER=1")
    assert q.variant.cfg["STREAMK"] == 0 and "stream-K" not in repr(q)


def test_a_stream_k_call_captures_into_a_cuda_graph_and_replays_correctly():
    """The flags are zeroed by a memset node before the kernel at every replay: a second replay
    that saw the first one's flags would add stale pieces."""
    import gemmlab

    torch = _torch()
    a = torch.randn(2888, 2000, device="cuda", dtype=torch.float16)
    b = torch.randn(2000, 2104, device="cuda", dtype=torch.float16)
    c = torch.empty(2888, 2104, device="cuda", dtype=torch.float16)
    gemmlab.gemm(a, b, c, kernel="wgmma_ws", config="STREAMK=1,BALANCE=0")
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a, b, c, kernel="wgmma_ws", config="STREAMK=1,BALANCE=0", alpha=0.5)
    ref = (0.5 * (a.float() @ b.float())).half().float()
    for _ in range(2):
        c.fill_(float("nan"))
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        err = float(((c.float() - ref).abs() / (ref.abs() + 1.0)).max())
        assert err < 2e-2, err
