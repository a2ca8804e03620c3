"""The cluster split (rung 18's SKCLUSTER switch, kernels/common.cuh "split-K in a cluster"): the
SPLITK blocks of a tile form one thread-block cluster and sum their partial tiles through
distributed shared memory into C, with no workspace and no second kernel. The registry's rules,
the geometry, spill-free compiles whose SASS has the cluster barrier and the rung's claimed
instructions, and the refusal before sm_90; on the GPU, correctness on odd shapes in every layout
with alpha and beta, the same bits as the workspace split, and graph capture."""

from __future__ import annotations

import itertools

import pytest

from gemmlab.analysis import disasm
from gemmlab.core.arch import LIMITS
from gemmlab.core.registry import MAX_SPLITK_CLUSTER, get
from gemmlab.core.variant import Variant
from gemmlab.tune.space import Space

RUNG = "async_simt"
# the tiles the tests run: the default (its partial tile, 128x260 floats, outgrows the stages), the
# 1024^3 tile (64x128, 2 warps) and the 127x4097x1023 one (128x64, 16x4 per thread)
TILES = ("128x256", "BM=64,BN=128,BK=8,WM=64,WN=64,TM=8,TN=16,STAGES=3",
         "BM=128,BN=64,BK=16,WM=64,WN=32,TM=16,TN=4,STAGES=4")


def _cfg(tile: str, splitk: int) -> list[str]:
    return [tile, f"SPLITK={splitk},SKCLUSTER=1"]


# ---- the registry ------------------------------------------------------------------------------
def test_skcluster_is_a_switch_off_by_default_that_the_tuner_searches():
    r = get(RUNG)
    assert r.params["SKCLUSTER"] == 0 and r.space["SKCLUSTER"] == (0, 1)
    with pytest.raises(ValueError, match="switch"):
        r.config("SPLITK=4,SKCLUSTER=2")


@pytest.mark.parametrize("splitk", (1, 16))
def test_skcluster_needs_a_splitk_a_cluster_can_hold(splitk):
    with pytest.raises(ValueError, match=f"SPLITK={splitk} must be between 2 and {MAX_SPLITK_CLUSTER}"):
        get(RUNG).config(f"SPLITK={splitk},SKCLUSTER=1")


def test_the_cluster_split_compiles_its_slice_count_as_the_cluster_size():
    r = get(RUNG)
    d = r.defines(r.config("SPLITK=4,SKCLUSTER=1"))
    assert d["GL_SPLITK_CLUSTER"] == 4 and "GL_SPLITK" not in d and "SKCLUSTER" not in d
    assert "GL_SPLITK_CLUSTER" not in r.defines(r.config("SPLITK=4"))


def test_the_cluster_split_launches_all_its_slices_even_over_a_short_k():
    """The cluster's size is compiled in, so grid.z is SPLITK even where K holds fewer BK tiles
    (the workspace split launches only the non-empty slices)."""
    r = get(RUNG)
    assert r.launch(256, 256, r.config("SPLITK=8,SKCLUSTER=1"), K=20).grid == (1, 2, 8)
    assert r.launch(256, 256, r.config("SPLITK=8"), K=20).grid == (1, 2, 3)


def test_the_cluster_split_has_shared_memory_for_its_partial_tile():
    r = get(RUNG)
    plain, clustered = r.config("SPLITK=4"), r.config("SPLITK=4,SKCLUSTER=1")   # 128x256, BK 8, 4 stages
    assert r.smem_bytes(plain) == 4 * 8 * (128 + 4 + 256 + 4) * 4      # the stages (rows padded by 4)
    assert r.smem_bytes(clustered) == 128 * (256 + 4) * 4              # the partial tile, larger


def test_the_cluster_split_is_refused_before_sm_90_with_the_reason():
    r = get(RUNG)
    with pytest.raises(ValueError, match="SKCLUSTER=1 .* sm_90 or newer; this is sm_80"):
        r.check_resources(r.config("SPLITK=4,SKCLUSTER=1"), LIMITS[80])
    r.check_resources(r.config("SPLITK=4,SKCLUSTER=1"), LIMITS[90])


def test_the_tuner_space_pairs_skcluster_only_with_splits_a_cluster_holds_and_only_on_sm_90():
    on90 = Space.of(RUNG, "sm_90a").candidates()
    clustered = [c for c in on90 if c["SKCLUSTER"]]
    assert clustered and all(2 <= c["SPLITK"] <= MAX_SPLITK_CLUSTER for c in clustered)
    assert {c["SPLITK"] for c in clustered} == {2, 4, 8}
    assert not [c for c in Space.of(RUNG, "sm_80").candidates() if c["SKCLUSTER"]]


# ---- static guards ------------------------------------------------------------------------------
def _variants():
    return [Variant.make(RUNG, "fp32", a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec, config=_cfg(tile, 4))
            for tile in TILES for a_col, b_col, vec in itertools.product((False, True), (False, True), (True, False))]


@pytest.fixture(scope="module", autouse=True)
def _compiled_ahead(compile_ahead):
    compile_ahead({"sm_90a": _variants()}, 3)


def test_the_cluster_split_compiles_without_spills_in_every_layout():
    for v in _variants():
        ck = v.compile("sm_90a")
        res = disasm.resource_usage(ck.cubin, ck.log)
        assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{v.describe()} spills"


@pytest.mark.parametrize("tile", TILES)
def test_the_cluster_split_keeps_the_rungs_instructions_and_syncs_its_cluster(tile):
    """The fast path is the rung's (LDGSTS, LDS.128, FFMA), the partial tiles meet at the cluster
    barrier (UCGABAR), and nothing reads a workspace: the only global stores are C's."""
    r = get(RUNG)
    sass = disasm.sass(Variant.make(RUNG, "fp32", vec_a=True, vec_b=True, vec_c=True, config=_cfg(tile, 4))
                       .compile("sm_90a").cubin)
    missing = [c for c in (*r.sass_claims, "UCGABAR_ARV", "UCGABAR_WAIT") if not disasm.has_opcode(sass, c)]
    assert not missing, f"the cluster split of {tile}: SASS lacks {missing}"


def test_only_the_first_cluster_barrier_releases():
    """The barrier after the stores of C only keeps the tiles alive for their readers: relaxed, so it
    does not wait for C's stores (ptxas makes a release a MEMBAR.ALL.GPU)."""
    sass = disasm.sass(Variant.make(RUNG, "fp32", vec_a=True, vec_b=True, vec_c=True, config=_cfg(TILES[1], 4))
                       .compile("sm_90a").cubin)
    assert sass.count("UCGABAR_WAIT") == 2 and sass.count("MEMBAR.ALL.GPU") == 1


# ---- GPU ----------------------------------------------------------------------------------------
LAYOUTS = list(itertools.product((False, True), repeat=3))   # A, B, C column-major


@pytest.mark.gpu
@pytest.mark.parametrize("splitk", (2, 4, 8))
@pytest.mark.parametrize("tile", TILES)
def test_the_cluster_split_is_correct_on_odd_shapes_in_every_layout_with_alpha_and_beta(tile, splitk):
    from gemmlab.measure.verify import verify

    # K not a multiple of BK nor of the slice; K of fewer BK tiles than slices (empty slices); M, N
    # across tile edges; one row
    failures = []
    for (M, N, K), (a_col, b_col, c_col) in itertools.product([(131, 67, 1001), (33, 257, 77), (1, 300, 4099)],
                                                              LAYOUTS):
        for alpha, beta in ((1.5, -0.75), (1.0, 0.0)):   # beta == 0: C is NaN first and must not leak
            r = verify(RUNG, M, N, K, a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                       config=_cfg(tile, splitk))
            if not r.ok:
                failures.append(r.message())
    assert not failures, "\n".join(failures)


def _operands(M: int, N: int, K: int):
    torch = pytest.importorskip("torch")
    a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
    return torch, a, b, torch.randn(M, N, device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("tile", TILES)
def test_the_cluster_split_gives_the_workspace_splits_bits(tile):
    """The same slices summed in the same order, then the same alpha/beta: bit for bit the result of
    the workspace split with its reduction kernel."""
    import gemmlab

    torch, a, b, c0 = _operands(517, 389, 2100)
    out = []
    for cluster in (0, 1):
        c = c0.clone()
        gemmlab.gemm(a, b, c, alpha=0.75, beta=-1.25, kernel=RUNG, config=[tile, f"SPLITK=4,SKCLUSTER={cluster}"])
        out.append(c)
    torch.cuda.synchronize()
    assert torch.equal(out[0], out[1])


@pytest.mark.gpu
def test_a_cluster_split_plan_uses_no_workspace_and_says_so():
    import gemmlab

    torch, a, b, c = _operands(1024, 1024, 1024)
    p = gemmlab.plan(a, b, c, kernel=RUNG, config=_cfg(TILES[1], 4))
    assert p.splits == 4 and "summed in a cluster" in repr(p) and p.mode.name == "clustered"
    p.run()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-5


@pytest.mark.gpu
def test_a_cluster_split_call_captures_into_a_cuda_graph():
    import gemmlab

    torch, a, b, c = _operands(200, 300, 2049)
    config = _cfg(TILES[2], 2)
    gemmlab.gemm(a, b, c, kernel=RUNG, config=config)
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a, b, c, kernel=RUNG, config=config, alpha=2.0)
    c.fill_(float("nan"))
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float((c.double() - 2.0 * ref).norm() / ref.norm()) < 1e-5
