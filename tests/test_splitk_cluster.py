"""The cluster split (the SKCLUSTER switch of rungs 17, 18 and 19, kernels/common.cuh "split-K in a
cluster"): the SPLITK blocks of a tile form one thread-block cluster and sum their partial tiles
through distributed shared memory into C, with no workspace and no second kernel. The registry's
rules, the geometry, spill-free compiles whose SASS has the cluster barrier and the rung's claimed
instructions, and the refusal before sm_90; on the GPU, correctness on odd shapes in every layout
with alpha and beta, the fused epilogue, the same bits as the workspace split, and graph capture."""

from __future__ import annotations

import itertools

import pytest

from gemmlab.analysis import disasm
from gemmlab.core.arch import LIMITS
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.registry import MAX_SPLITK_CLUSTER, get
from gemmlab.core.variant import Variant
from gemmlab.tune.space import Space

RUNG = "async_simt"
# the tiles the tests run: the default (its partial tile, 128x260 floats, outgrows the stages), the
# 1024^3 tile (64x128, 2 warps) and the 127x4097x1023 one (128x64, 16x4 per thread)
TILES = ("128x256", "BM=64,BN=128,BK=8,WM=64,WN=64,TM=8,TN=16,STAGES=3",
         "BM=128,BN=64,BK=16,WM=64,WN=32,TM=16,TN=4,STAGES=4")
# rung 19 (bf16): 128x128, the selection's skinny tiles (core/selection.py WGMMA_SKINNY: 128x64 and
# one consumer warpgroup's 64x128) and 256x128 of two 128-row warpgroups with 2 stages, whose partial
# tile outgrows them and the epilogue's staging
WGMMA_TILES = ("128x128", "BM=128,BN=64,BK=64,WM=64,STAGES=8", "BM=64,BN=128,BK=64,WM=64,STAGES=8",
               "BM=256,BN=128,BK=64,WM=128,STAGES=2")
# rung 17 (fp16): the selection's 64x64 tile (core/selection.py, option mma_64_cluster), 6 stages of
# it, and 128x128, whose partial tile (128x136 floats) outgrows its 4 stages
MMA_TILES = ("64x64", "BM=64,BN=64,BK=32,WM=32,WN=32,STAGES=6", "128x128")
# rung -> (dtype, tiles)
CASES = {RUNG: ("fp32", TILES), "wgmma_tma": ("bf16", WGMMA_TILES), "mma_sync": ("fp16", MMA_TILES)}
EVERY = [(rung, dtype, tile) for rung, (dtype, tiles) in CASES.items() for tile in tiles]


def _cfg(tile: str, splitk: int) -> list[str]:
    return [tile, f"SPLITK={splitk},SKCLUSTER=1"]


# ---- the registry ------------------------------------------------------------------------------
@pytest.mark.parametrize("rung", CASES)
def test_skcluster_is_a_switch_off_by_default_that_the_tuner_searches(rung):
    r = get(rung)
    assert r.params["SKCLUSTER"] == 0 and r.space["SKCLUSTER"] == (0, 1)
    with pytest.raises(ValueError, match="switch"):
        r.config("SPLITK=4,SKCLUSTER=2")


@pytest.mark.parametrize("rung", CASES)
@pytest.mark.parametrize("splitk", (1, 16))
def test_skcluster_needs_a_splitk_a_cluster_can_hold(rung, splitk):
    with pytest.raises(ValueError, match=f"SPLITK={splitk} must be between 2 and {MAX_SPLITK_CLUSTER}"):
        get(rung).config(f"SPLITK={splitk},SKCLUSTER=1")


@pytest.mark.parametrize("rung", CASES)
def test_the_cluster_split_compiles_its_slice_count_as_the_cluster_size(rung):
    r = get(rung)
    d = r.defines(r.config("SPLITK=4,SKCLUSTER=1"))
    assert d["GL_SPLITK_CLUSTER"] == 4 and "GL_SPLITK" not in d and "SKCLUSTER" not in d
    assert "GL_SPLITK_CLUSTER" not in r.defines(r.config("SPLITK=4"))


@pytest.mark.parametrize("rung", CASES)
def test_the_cluster_split_launches_all_its_slices_even_over_a_short_k(rung):
    """The cluster's size is compiled in, so grid.z is SPLITK even where K holds fewer BK tiles
    (the workspace split launches only the non-empty slices)."""
    r = get(rung)
    d = r.config(None)
    bk, tiles = d["BK"], (256 // d["BN"], 256 // d["BM"])
    assert r.launch(256, 256, r.config("SPLITK=8,SKCLUSTER=1"), K=2 * bk + 1).grid == (*tiles, 8)
    assert r.launch(256, 256, r.config("SPLITK=8"), K=2 * bk + 1).grid == (*tiles, 3)


def test_the_cluster_split_has_shared_memory_for_its_partial_tile():
    r = get(RUNG)
    plain, clustered = r.config("SPLITK=4"), r.config("SPLITK=4,SKCLUSTER=1")   # 128x256, BK 8, 4 stages
    assert r.smem_bytes(plain) == 4 * 8 * (128 + 4 + 256 + 4) * 4      # the stages (rows padded by 4)
    assert r.smem_bytes(clustered) == 128 * (256 + 4) * 4              # the partial tile, larger


def test_rung_19s_cluster_split_has_shared_memory_for_its_partial_tile():
    r = get("wgmma_tma")
    plain, clustered = r.config([WGMMA_TILES[3], "SPLITK=4"]), r.config(_cfg(WGMMA_TILES[3], 4))   # 256x128, 2 stages
    assert r.smem_bytes(plain) == 1024 + 2 * (256 + 128) * 64 * 2 + 16 * 2          # the stages
    assert r.smem_bytes(clustered) == 1024 + 256 * (128 + 8) * 4 + 16 * 2           # the partial tile, larger


def test_rung_17s_cluster_split_has_shared_memory_for_its_partial_tile():
    r = get("mma_sync")
    plain, clustered = r.config([MMA_TILES[2], "SPLITK=4"]), r.config(_cfg(MMA_TILES[2], 4))   # 128x128, 4 stages
    assert r.smem_bytes(plain) == 4 * (128 + 128) * 32 * 2          # the stages
    assert r.smem_bytes(clustered) == 128 * (128 + 8) * 4           # the partial tile, larger
    small = r.config(_cfg(MMA_TILES[0], 4))                          # 64x64, 3 stages: the partial tile fits them
    assert r.smem_bytes(small) == 3 * (64 + 64) * 32 * 2 > 64 * (64 + 8) * 4


def test_the_cluster_split_is_refused_before_sm_90_with_the_reason():
    r = get(RUNG)
    with pytest.raises(ValueError, match="SKCLUSTER=1 .* sm_90 or newer; this is sm_80"):
        r.check_resources(r.config("SPLITK=4,SKCLUSTER=1"), LIMITS[80])
    r.check_resources(r.config("SPLITK=4,SKCLUSTER=1"), LIMITS[90])


@pytest.mark.parametrize("rung", CASES)
def test_the_tuner_space_pairs_skcluster_only_with_splits_a_cluster_holds(rung):
    clustered = [c for c in Space.of(rung, "sm_90a").candidates() if c["SKCLUSTER"]]
    assert clustered and all(2 <= c["SPLITK"] <= MAX_SPLITK_CLUSTER for c in clustered)
    assert {c["SPLITK"] for c in clustered} == {2, 4, 8}


def test_the_tuner_space_has_no_cluster_split_before_sm_90():
    assert not [c for c in Space.of(RUNG, "sm_80").candidates() if c["SKCLUSTER"]]


# ---- static guards ------------------------------------------------------------------------------
def _variants():
    return [Variant.make(rung, dtype, a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec, config=_cfg(tile, 4))
            for rung, dtype, tile in EVERY for a_col, b_col, vec in itertools.product((False, True), (False, True), (True, False))]


@pytest.fixture(scope="module", autouse=True)
def _compiled_ahead(compile_ahead):
    compile_ahead({"sm_90a": _variants()}, 3)


def test_the_cluster_split_compiles_without_spills_in_every_layout():
    for v in _variants():
        ck = v.compile("sm_90a")
        res = disasm.resource_usage(ck.cubin, ck.log)
        assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{v.describe()} spills"


@pytest.mark.parametrize("epilogue", [Epilogue("gelu_tanh", "same"), Epilogue("silu", "fp32", out="fp32"),
                                      Epilogue("gelu", "same", aux=True), Epilogue("relu", "fp32", bias_rows=True, out="fp16")],
                         ids=lambda e: e.describe())
def test_rung_19s_cluster_split_compiles_every_epilogue_part_without_spills(epilogue):
    """The reduction's stores apply the functor: bias (either dtype, along rows or columns),
    activation, an output dtype and the auxiliary output, at the 128x128 tile."""
    ck = Variant.make("wgmma_tma", "bf16", config=_cfg(WGMMA_TILES[0], 4), epilogue=epilogue).compile("sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0)


@pytest.mark.parametrize("epilogue", [Epilogue("gelu_tanh", "same"), Epilogue("gelu", "same", aux=True),
                                      Epilogue("relu", "fp32", bias_rows=True, out="fp32")],
                         ids=lambda e: e.describe())
def test_rung_17s_cluster_split_compiles_epilogue_parts_without_spills(epilogue):
    """The same reduction (tensor16.cuh) behind rung 17's 64x64 tile, the selection's mma_64_cluster,
    on operands without 16-byte access (the staged copies beside it)."""
    ck = Variant.make("mma_sync", "fp16", vec_a=False, vec_b=False, vec_c=False, config=_cfg(MMA_TILES[0], 4),
                      epilogue=epilogue).compile("sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0)


@pytest.mark.parametrize("rung,dtype,tile", EVERY)
def test_the_cluster_split_keeps_the_rungs_instructions_and_syncs_its_cluster(rung, dtype, tile):
    """The fast path is the rung's (rung 18: LDGSTS, LDS.128, FFMA; rung 19: HGMMA, UTMALDG, SYNCS),
    the partial tiles meet at the cluster barrier (UCGABAR)."""
    r = get(rung)
    sass = disasm.sass(Variant.make(rung, dtype, vec_a=True, vec_b=True, vec_c=True, config=_cfg(tile, 4))
                       .compile("sm_90a").cubin)
    missing = [c for c in (*r.sass_claims, "UCGABAR_ARV", "UCGABAR_WAIT") if not disasm.has_opcode(sass, c)]
    assert not missing, f"the cluster split of {tile}: SASS lacks {missing}"


@pytest.mark.parametrize("rung", CASES)
def test_only_the_first_cluster_barrier_releases(rung):
    """The barrier after the stores of C only keeps the tiles alive for their readers: relaxed, so it
    does not wait for C's stores (ptxas makes a release a MEMBAR.ALL.GPU). Rung 19 reaches the
    reduction from two places (its producer warpgroup and its consumers), each with its pair of
    barriers."""
    dtype, tiles = CASES[rung]
    sass = disasm.sass(Variant.make(rung, dtype, vec_a=True, vec_b=True, vec_c=True, config=_cfg(tiles[1], 4))
                       .compile("sm_90a").cubin)
    pairs = sass.count("UCGABAR_WAIT") // 2
    assert pairs >= 1 and sass.count("UCGABAR_WAIT") == 2 * pairs and sass.count("MEMBAR.ALL.GPU") == pairs


# ---- GPU ----------------------------------------------------------------------------------------
LAYOUTS = list(itertools.product((False, True), repeat=3))   # A, B, C column-major


@pytest.mark.gpu
@pytest.mark.parametrize("splitk", (2, 4, 8))
@pytest.mark.parametrize("rung,dtype,tile", EVERY)
def test_the_cluster_split_is_correct_on_odd_shapes_in_every_layout_with_alpha_and_beta(rung, dtype, tile, splitk):
    from gemmlab.measure.verify import verify

    # K not a multiple of BK nor of the slice; K of fewer BK tiles than slices (empty slices); M, N
    # across tile edges; one row
    failures = []
    for (M, N, K), (a_col, b_col, c_col) in itertools.product([(131, 67, 1001), (33, 257, 77), (1, 300, 4099)],
                                                              LAYOUTS):
        for alpha, beta in ((1.5, -0.75), (1.0, 0.0)):   # beta == 0: C is NaN first and must not leak
            r = verify(rung, M, N, K, dtype, a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                       config=_cfg(tile, splitk))
            if not r.ok:
                failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ("gelu_tanh", "silu"))
@pytest.mark.parametrize("rung,dtype,tile", [("wgmma_tma", "bf16", t) for t in WGMMA_TILES[:3]]
                         + [("mma_sync", "fp16", MMA_TILES[0])])
def test_the_16_bit_cluster_split_applies_the_fused_epilogue_and_an_output_dtype(rung, dtype, tile, activation):
    """Bias and activation go through the reduction's stores (gl_store_c8, rungs 17 and 19): checked
    against float64 with a bias of the operands' dtype and of FP32, and with an FP32 output."""
    from gemmlab.measure.verify import verify

    failures = []
    for (M, N, K), bias, out in itertools.product([(131, 67, 1001), (200, 64, 3000)], ("same", "fp32"), (None, "fp32")):
        r = verify(rung, M, N, K, dtype, alpha=1.25, beta=0.5, bias=bias, activation=activation, out=out,
                   config=_cfg(tile, 4))
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


def _operands(M: int, N: int, K: int, dtype: str):
    torch = pytest.importorskip("torch")
    t = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a, b = torch.randn(M, K, device="cuda", dtype=t), torch.randn(K, N, device="cuda", dtype=t)
    return torch, a, b, torch.randn(M, N, device="cuda", dtype=t)


@pytest.mark.gpu
@pytest.mark.parametrize("rung,dtype,tile", EVERY)
def test_the_cluster_split_gives_the_workspace_splits_bits(rung, dtype, tile):
    """The same slices summed in the same order, then the same alpha/beta: bit for bit the result of
    the workspace split with its reduction kernel."""
    import gemmlab

    torch, a, b, c0 = _operands(517, 389, 2100, dtype)
    out = []
    for cluster in (0, 1):
        c = c0.clone()
        gemmlab.gemm(a, b, c, alpha=0.75, beta=-1.25, kernel=rung, config=[tile, f"SPLITK=4,SKCLUSTER={cluster}"])
        out.append(c)
    torch.cuda.synchronize()
    assert torch.equal(out[0], out[1])


@pytest.mark.gpu
@pytest.mark.parametrize("rung", CASES)
def test_a_cluster_split_plan_uses_no_workspace_and_says_so(rung):
    import gemmlab

    dtype, tiles = CASES[rung]
    torch, a, b, c = _operands(1024, 1024, 1024, dtype)
    p = gemmlab.plan(a, b, c, kernel=rung, config=_cfg(tiles[1], 4))
    assert p.splits == 4 and "summed in a cluster" in repr(p) and p.mode.name == "clustered"
    p.run()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    tol = 1e-5 if dtype == "fp32" else 1e-2
    assert float((c.double() - ref).norm() / ref.norm()) < tol


@pytest.mark.gpu
@pytest.mark.parametrize("rung", CASES)
def test_a_cluster_split_call_captures_into_a_cuda_graph(rung):
    import gemmlab

    dtype, tiles = CASES[rung]
    torch, a, b, c = _operands(200, 300, 2049, dtype)
    config = _cfg(tiles[2], 2)
    gemmlab.gemm(a, b, c, kernel=rung, config=config)
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a, b, c, kernel=rung, config=config, alpha=2.0)
    c.fill_(float("nan"))
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    tol = 1e-5 if dtype == "fp32" else 1e-2
    assert float((c.double() - 2.0 * ref).norm() / ref.norm()) < tol
