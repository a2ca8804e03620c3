"""The registry is the single source of truth for the ladder."""

import re

import pytest

import gemmlab
from gemmlab.core import registry
from gemmlab.core.compile import KERNEL_DIR

SEEDS_TO_COVER = {
    # every kernel variant the seeds describe (issue: "every seed kernel covered")
    "002 gemm_v00", "002 gemm_v01", "002 gemm_v02", "002 gemm_v03", "002 gemm_v04", "002 gemm_v05",
    "002 gemm_v06", "002 gemm_v07",
    "000 gemm_32x32_v0", "000 gemm_32x32_v1", "000 gemm_32x32_v2", "000 gemm_32x32_v3",
    "000 gemm_32x32_v4", "000 gemm_32x32_v5", "000 gemm_64x64", "000 gemm_128x128", "000 TWO_BUFFER",
    "Alcanderian sgemm_1", "Alcanderian sgemm_2", "Alcanderian sgemm_3", "fynv g_fgemm",
    "003 ldg", "003 texture", "003 ldg(float4)", "003 texture<float4>", "003 BEAST THR_M x THR_N",
    "004 sgemm_naive", "004 sgemm_shared", "004 sgemm 2x2 tile",
    "001 sgemm 128x128x8 prefetch",
}


def test_kernels_are_in_ladder_order():
    # numbered from 1 in ladder order; rungs developed on parallel branches keep the numbers they
    # were given, so a branch may lack one of them until they are merged
    numbers = [r.number for r in gemmlab.kernels()]
    assert numbers[0] == 1 and numbers == sorted(set(numbers))


def test_slugs_are_unique_and_stable_identifiers():
    slugs = [r.slug for r in gemmlab.kernels()]
    assert len(set(slugs)) == len(slugs)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", s) for s in slugs)


def test_every_rung_has_name_summary_dtypes_and_seeds():
    for r in gemmlab.kernels():
        assert r.summary and "\n" not in r.summary
        assert r.dtypes and set(r.dtypes) <= {"fp32", "fp16", "bf16", "fp8"}
        assert r.seeds


def test_every_seed_kernel_is_covered_by_a_rung():
    covered = {s for r in gemmlab.kernels() for s in r.seeds}
    assert SEEDS_TO_COVER <= covered, SEEDS_TO_COVER - covered


def test_one_source_file_per_rung_numbered_like_the_rung():
    sources = [r.source for r in gemmlab.kernels()]
    assert len(set(sources)) == len(sources)
    for r in gemmlab.kernels():
        assert r.source.startswith(f"{r.number:02d}_"), r.source
        assert (KERNEL_DIR / r.source).is_file()


def test_every_rung_source_opens_with_a_header_naming_its_seed():
    for r in gemmlab.kernels():
        head = (KERNEL_DIR / r.source).read_text().split("#include")[0]
        assert f"Rung {r.number}" in head
        assert "seed" in head.lower()


def test_the_top_rung_for_half_types_uses_each_architectures_tensor_cores():
    for arch, opcode in (("sm_80", "HMMA"), ("sm_90a", "HGMMA"), ("sm_100a", "HMMA")):
        top = registry.for_dtype("fp16", arch, thin=False)[-1]
        assert set(top.dtypes) == {"fp16", "bf16"} and registry.for_dtype("bf16", arch, thin=False)[-1] is top
        assert any(c.startswith(opcode) for c in top.sass_claims), arch


def test_the_wgmma_rung_runs_on_hopper_only_and_says_so():
    r = registry.get("wgmma_tma")
    assert r.runs_on("sm_90a") and r.runs_on(90)
    assert not r.runs_on("sm_80") and not r.runs_on("sm_100a")
    for arch in ("sm_80", "sm_100a"):
        with pytest.raises(ValueError, match="'wgmma_tma' needs sm_90; this is sm_"):
            r.require("fp16", arch)
    assert r not in registry.for_dtype("fp16", "sm_80") and r in registry.for_dtype("bf16", "sm_90a")


def test_wgmma_refuses_configurations_it_was_not_written_for_with_reasons():
    r = registry.get("wgmma_tma")
    cfg = r.config()
    assert r.threads(cfg) == 384 and r.smem(cfg) == 1024 + 4 * (128 + 256) * 64 * 2 + 4 * 16
    for bad, reason in (({"WM": 32}, "64 or 128"), ({"BM": 512}, "1 or 2 times WM"), ({"BN": 192}, "64, 128 or 256"),
                        ({"BK": 32}, "multiple of 64"), ({"BK": 512}, "at most 256"), ({"STAGES": 1}, "at least 2"),
                        ({"WM": 128, "BM": 128}, "256 FP32 accumulators"), ({"STAGES": 5}, "shared memory")):
        with pytest.raises(ValueError, match=reason):
            r.config(bad)
    for name in r.presets:
        assert r.check_config(r.config(name)) == []


def test_the_top_fp32_rung_is_the_async_simt_pipeline_and_needs_sm80():
    top = registry.for_dtype("fp32", thin=False)[-1]
    assert top.slug == "async_simt" and top.min_arch == 80
    assert registry.for_dtype("fp32")[-1].thin     # rung 23, for thin problems only
    assert {"LDGSTS", "LDS.128", "FFMA"} <= set(top.sass_claims)
    assert registry.for_dtype("fp32", arch="sm_75")[-1].slug == "warp_tiling"


def test_async_simt_refuses_configurations_it_was_not_written_for_with_reasons():
    r = registry.get("async_simt")
    cfg = r.config()
    assert r.threads(cfg) == 256 and r.smem(cfg) == 4 * 8 * (128 + 4 + 256 + 4) * 4
    for bad, reason in (({"STAGES": 1}, "at least 2"), ({"TN": 6}, "multiple of 4"),
                        ({"TM": 8}, "32 lanes"), ({"BK": 64}, "at most 32"), ({"BK": 32}, "copies per thread"),
                        ({"STAGES": 20}, "shared memory"),
                        ({"BM": 256, "WM": 128, "TM": 32}, "registers")):
        with pytest.raises(ValueError, match=reason):
            r.config(bad)
    for name in r.presets:
        assert r.check_config(r.config(name)) == []


def test_default_configs_are_valid():
    for r in gemmlab.kernels():
        cfg = r.config()
        assert r.check_config(cfg) == []
        for name in r.presets:
            r.config(name)


def test_invalid_config_is_rejected_with_the_reason():
    r = registry.get("warp_tiling")
    with pytest.raises(ValueError, match="32 lanes"):
        r.config({"WM": 32})
    with pytest.raises(ValueError, match="no parameter"):
        r.config({"XX": 4})
    with pytest.raises(ValueError, match="positive int"):
        r.config({"BK": 0})


def test_get_accepts_slug_or_number_and_rejects_unknown_names():
    assert registry.get("naive").number == 1
    assert registry.get("15").slug == "warp_tiling"
    with pytest.raises(ValueError, match="unknown kernel 'nope'.*available"):
        registry.get("nope")


def test_grid_folds_row_tiles_beyond_grid_y_into_grid_z_without_losing_any():
    r = registry.get("warp_tiling")
    cfg = r.config()
    bm = cfg["BM"]
    assert r.launch(65535 * bm, 10, cfg).grid[1:] == (65535, 1)
    for tiles in (65536, 2 * 65535 + 1, 5 * 65535 + 3):
        _, gy, gz = r.launch(tiles * bm - 1, 10, cfg).grid
        assert gy <= 65535 and tiles <= gy * gz < tiles + gz


def test_a_persistent_rung_launches_one_block_per_sm_in_whole_clusters_up_to_its_work():
    r = registry.get("wgmma_ws")
    one, two = r.config("128x256_nocluster,BALANCE=0"), r.config("128x256,BALANCE=0")
    assert r.launch(4096, 4096, one, 4096, sm_count=132).grid == (132, 1, 1)       # 512 tiles
    assert r.launch(4096, 4096, two, 4096, sm_count=132).grid == (132, 1, 1)       # 256 pairs: 66 clusters
    assert r.launch(4096, 4096, two, 4096, sm_count=133).grid == (132, 1, 1)       # never half a cluster
    assert r.launch(300, 300, one, 64, sm_count=132).grid == (6, 1, 1)             # 3 x 2 tiles
    assert r.launch(300, 300, two, 64, sm_count=132).grid == (8, 1, 1)             # 2 pairs x 2 columns
    assert r.launch(1, 1, two, 1, sm_count=132).grid == (2, 1, 1)
    assert r.launch(65535 * 128 + 1, 7, one, 9, sm_count=132).grid == (132, 1, 1)  # no grid.y limit


def test_a_balanced_persistent_grid_takes_the_fewest_clusters_that_need_no_more_waves():
    """BALANCE=1 (rungs 21 and 22's default): every cluster walks the same number of units, or one
    fewer, in as many waves as one cluster per SM pair would take."""
    r = registry.get("wgmma_tf32")
    cfg = r.config("BALANCE=1", "tf32")                                     # 128x256 tiles, no cluster
    assert cfg["BALANCE"] == 1 and r.config(None, "tf32")["BALANCE"] == 1
    assert r.launch(8192, 8192, cfg, 8192, sm_count=132).grid == (128, 1, 1)    # 2048 tiles: 16 waves of 128
    assert r.launch(4096, 4096, cfg, 4096, sm_count=132).grid == (128, 1, 1)    # 512: 4 of 128, not 3 of 132 and 116
    assert r.launch(2888, 2104, cfg, 264, sm_count=132).grid == (104, 1, 1)     # 23 x 9 = 207 tiles: 104 + 103
    assert r.launch(128 * 133, 256, cfg, 64, sm_count=132).grid == (67, 1, 1)   # 133 tiles: 67 + 66
    assert r.launch(1024, 4096, cfg, 64, sm_count=132).grid == (128, 1, 1)      # one wave: every tile a block
    assert r.launch(8192, 8192, cfg, 8192, sm_count=128).grid == (128, 1, 1)
    ws = registry.get("wgmma_ws")
    two = ws.config("128x256")                                              # clusters of 2
    assert two["BALANCE"] == 1
    assert ws.launch(4096, 4096, two, 4096, sm_count=132).grid == (128, 1, 1)  # 256 pairs: 4 waves of 64 clusters
    assert ws.launch(2888, 2104, two, 264, sm_count=132).grid == (108, 1, 1)   # 12 x 9 = 108 pairs: one wave


def test_a_stream_k_tail_takes_the_balanced_grid_only_where_it_drops_few_clusters():
    """STREAMK=1 splits the last wave over every cluster; a balanced grid that drops more than a
    sixteenth of them would leave those idle (169 units of 1654 x 3296 on 85 blocks instead of
    132), one that drops fewer needs no tail (1024 units of 8192 x 4096 on 128)."""
    ws = registry.get("wgmma_ws")
    for balance in (0, 1):
        cfg = ws.config(f"128x256_nocluster,STREAMK=1,BALANCE={balance}")
        assert ws.launch(1654, 3296, cfg, 9496, sm_count=132).grid == (132, 1, 1)
        assert ws.launch(2888, 2104, cfg, 264, sm_count=132).grid == (132, 1, 1)
        assert registry.streamk_tail(1654, 3296, 9496, cfg, 132)
        assert ws.launch(8192, 4096, cfg, 14336, sm_count=132).grid == ((128 if balance else 132), 1, 1)
    assert ws.launch(1654, 3296, ws.config("128x256_nocluster,BALANCE=1"), 9496, sm_count=132).grid == (85, 1, 1)
    assert not registry.streamk_tail(8192, 4096, 14336, ws.config("128x256_nocluster,STREAMK=1"), 128)


def test_the_balanced_grid_is_the_hosts_choice_and_leaves_the_kernel_as_it_is():
    for slug, precision in (("wgmma_ws", None), ("wgmma_tf32", "tf32")):
        r = registry.get(slug)
        on, off = r.config("BALANCE=1", precision), r.config("BALANCE=0", precision)
        assert r.defines(on, precision) == r.defines(off, precision) and "BALANCE" not in r.defines(on, precision)
        with pytest.raises(ValueError, match="BALANCE"):
            r.config("BALANCE=2", precision)


def test_the_persistent_rungs_epilogue_staging_lies_beside_four_full_stages_within_a_block():
    """Rung 21 stores through staging of its own (the producer refills the stages meanwhile): 8
    consumer warps x 16 rows x 128 16-bit outputs beside 4 stages of 128x64 + 64x256."""
    r = registry.get("wgmma_ws")
    assert r.smem(r.config()) == 1024 + 4 * (128 + 256) * 64 * 2 + 8 * 16 * 128 * 2 + 4 * 16


def test_rung_22s_tma_store_staging_is_32_kb_beside_its_four_stages_and_only_with_epi_tma():
    """Rung 22's EPI_TMA staging: two 64 x 32 FP32 chunks per consumer warpgroup (32 KB), which
    with 4 stages of 128x32 + 32x256 FP32 still fits a block; without EPI_TMA none."""
    r = registry.get("wgmma_tf32")
    stages = 4 * (128 + 256) * 32 * 4
    assert r.smem(r.config()) == 1024 + stages + 2 * 2 * 64 * 32 * 4 + 4 * 16 <= registry.MAX_SMEM_PER_BLOCK
    assert r.smem(r.config("EPI_TMA=0")) == 1024 + stages + 4 * 16


def test_rung_22_refuses_a_fifth_stage_of_its_default_tile_beside_the_tma_store_staging():
    r = registry.get("wgmma_tf32")
    assert any("32 KB staging (EPI_TMA=1)" in p for p in r.check_config(dict(r.config(), STAGES=5)))


@pytest.mark.parametrize("slug", ["wgmma_ws", "wgmma_tf32"])
def test_the_persistent_rungs_tma_store_is_a_switch_on_by_default_and_a_define_of_the_kernel(slug):
    """EPI_TMA=1 (default): the kernel stores C through TMA where it can; 0: always the staged
    16-byte stores (rung 21) or the stores from the accumulators (rung 22). Unlike PACK it changes
    the kernel, so it reaches it as a define."""
    r = registry.get(slug)
    assert r.config()["EPI_TMA"] == 1 and r.store_map and r.space["EPI_TMA"] == (0, 1)
    assert r.defines(r.config("EPI_TMA=0"))["EPI_TMA"] == 0 and r.defines(r.config())["EPI_TMA"] == 1
    with pytest.raises(ValueError, match=f"parameter EPI_TMA of rung '{slug}' is a switch: 0 or 1"):
        r.config({"EPI_TMA": 2})
    assert any("EPI_TMA=2 must be 0" in p for p in r.check_config(dict(r.config(), EPI_TMA=2)))


def test_the_deferred_epilogue_is_a_switch_that_reaches_the_kernel_only_when_on():
    """DEFER=1: rung 21 holds a tile in registers and stores it during the next; DEFER=0 compiles
    the kernel the rung had before the switch (no define)."""
    r = registry.get("wgmma_ws")
    assert r.space["DEFER"] == (0, 1)
    assert r.defines(r.config("DEFER=1"))["DEFER"] == 1 and "DEFER" not in r.defines(r.config("DEFER=0"))
    with pytest.raises(ValueError, match="parameter DEFER of rung 'wgmma_ws' is a switch: 0 or 1"):
        r.config({"DEFER": 2})


def test_rung_21_has_a_store_twin_only_where_the_tma_store_can_serve_every_call_with_beta_zero():
    """The twin (kernels/21_wgmma_ws.cu, GL_TMA_STORE_ONLY) needs EPI_TMA=1, a C with 16-byte access
    and rows of whole 16-byte chunks (8 outputs); the full variant's defines stay as they were."""
    from gemmlab.core.variant import Variant

    v = Variant.make("wgmma_ws", "bf16")
    twin = v.store_twin(2104)
    assert twin is not None and twin.defines() == {**v.defines(), "GL_TMA_STORE_ONLY": 1}
    assert "GL_TMA_STORE_ONLY" not in v.defines() and twin.describe().endswith(", TMA store only]")
    assert v.store_twin(2105) is None
    assert Variant.make("wgmma_ws", "fp16", config="EPI_TMA=0").store_twin(2104) is None
    assert Variant.make("wgmma_ws", "fp16", vec_c=False).store_twin(2104) is None
    assert Variant.make("wgmma_tf32", "fp32", precision="tf32").store_twin(2104) is None


def test_a_persistent_rung_refuses_a_launch_without_the_sm_count():
    r = registry.get("wgmma_ws")
    with pytest.raises(ValueError, match="'wgmma_ws' is persistent.*SM count"):
        r.launch(4096, 4096, r.config(), 4096)


def test_the_persistent_rung_refuses_configurations_it_was_not_written_for_with_reasons():
    r = registry.get("wgmma_ws")
    with pytest.raises(ValueError, match="must be 2 x WM=128: two consumer warpgroups"):
        r.config({"BM": 128, "WM": 128, "BN": 128})
    with pytest.raises(ValueError, match="CLUSTER=4 must be 1 or 2"):
        r.config({"CLUSTER": 4})
    with pytest.raises(ValueError, match="5 stages of 128x64 \\+ 64x256 need"):
        r.config({"STAGES": 5})


@pytest.mark.parametrize("slug", ["wgmma_ws", "wgmma_tf32"])
def test_persistent_rungs_refuse_a_group_that_is_not_whole_clusters_naming_it(slug):
    from gemmlab.core.registry import get

    r = get(slug)
    assert r.config("GROUP=12")["GROUP"] == 12 and r.config()["GROUP"] == 16
    assert 16 in r.space["GROUP"]
    with pytest.raises(ValueError, match="GROUP=3 must be 1 to 64 row tiles and a multiple of CLUSTER=2"):
        r.config("GROUP=3,CLUSTER=2")
    with pytest.raises(ValueError, match="GROUP=65"):
        r.config("GROUP=65")


def test_stream_k_splits_only_a_partial_last_wave_of_units():
    """Hand-counted on 132 SMs: 4096^3 in 128x256 tiles is 512 units (3.88 waves), 256 in clusters
    of 2 (66 clusters: 3.88); 4224 x 4096 is 33 x 16 = 528 = 4 whole waves; 1024^2 is 64 units, fewer
    than one wave; STREAMK=0 never splits."""
    cfg = {"BM": 128, "BN": 256, "BK": 64, "STREAMK": 1, "CLUSTER": 1}
    assert registry.streamk_tail(4096, 4096, 4096, cfg, 132)
    assert registry.streamk_tail(4096, 4096, 4096, dict(cfg, CLUSTER=2), 132)
    assert not registry.streamk_tail(4224, 4096, 4096, cfg, 132)
    assert not registry.streamk_tail(1024, 1024, 4096, cfg, 64)
    assert not registry.streamk_tail(4096, 4096, 4096, dict(cfg, STREAMK=0), 132)


def test_stream_k_is_refused_where_the_split_steps_would_not_fit_32_bits():
    """4096^2 on 132 SMs splits 116 units; with K = 2^31 - 1 that is 116 x 2^25 k tiles of 64."""
    cfg = {"BM": 128, "BN": 256, "BK": 64, "STREAMK": 1, "CLUSTER": 1}
    assert registry.streamk_tail(4096, 4096, 2 ** 24, cfg, 132)
    assert not registry.streamk_tail(4096, 4096, 2 ** 31 - 1, cfg, 132)


def test_the_stream_k_workspace_is_a_tile_of_fp32_per_block_then_a_flag_per_publishing_warp():
    cfg = {"BM": 128, "BN": 256, "WM": 64}
    flags, total = registry.streamk_workspace(cfg, 132, registry.get("wgmma_ws").streamk_warps(cfg))
    assert flags == 132 * 128 * 256 * 4 and total == flags + 132 * 8 * 4


def test_rung_18_publishes_a_stream_k_piece_from_every_warp_of_its_block():
    cfg = registry.get("async_simt").config("STREAMK=1")
    assert registry.get("async_simt").streamk_warps(cfg) == 8      # 128x256 of 64x64 warp tiles
    assert registry.get("wgmma_ws").streamk_warps(registry.get("wgmma_ws").config(None)) == 8   # 2 consumer warpgroups


def test_stream_k_is_a_switch_of_both_persistent_rungs_that_reaches_the_kernel_only_when_on():
    """STREAMK=0 (the default) compiles the kernel the rung had before the switch: no define."""
    for slug in ("wgmma_ws", "wgmma_tf32"):
        r = registry.get(slug)
        assert r.config()["STREAMK"] == 0 and r.space["STREAMK"] == (0, 1)
        assert "STREAMK" not in r.defines(r.config()) and r.defines(r.config("STREAMK=1"))["STREAMK"] == 1
        with pytest.raises(ValueError, match=f"parameter STREAMK of rung '{slug}' is a switch"):
            r.config({"STREAMK": 2})
        assert any("STREAMK=2 must be 0" in p for p in r.check_config(dict(r.config(), STREAMK=2)))


def test_the_backward_odd_waves_are_a_switch_of_both_persistent_rungs_that_reaches_the_kernel_only_when_on():
    """KREV=1: the units of odd waves load their k tiles last to first (kernels/ws.cuh); KREV=0 (the
    default) compiles the kernel the rung had before the switch: no define."""
    for slug in ("wgmma_ws", "wgmma_tf32"):
        r = registry.get(slug)
        assert r.config()["KREV"] == 0 and r.space["KREV"] == (0, 1)
        assert "KREV" not in r.defines(r.config()) and r.defines(r.config("KREV=1"))["KREV"] == 1
        with pytest.raises(ValueError, match=f"parameter KREV of rung '{slug}' is a switch"):
            r.config({"KREV": 2})
        assert any("KREV=2 must be 0" in p for p in r.check_config(dict(r.config(), KREV=2)))
        with pytest.raises(ValueError, match="KREV=1 \\(backward odd waves\\) takes no stream-K tail"):
            r.config("KREV=1,STREAMK=1")


@pytest.mark.parametrize("slug", ["wgmma_tma", "wgmma_ws", "wgmma_tf32"])
def test_the_l2_promotion_of_the_tensor_maps_is_a_host_parameter_of_every_rung_with_maps(slug):
    """L2PROMO: the bytes the L2 fetches per 128-byte row a map reads; the host encodes it into the
    maps, so the kernel, and its defines, are the same for every value; 0, the default, decides it
    by each map's rows (core/tensormaps.py)."""
    r = registry.get(slug)
    assert r.config()["L2PROMO"] == 0
    assert "L2PROMO" not in r.defines(r.config("L2PROMO=128"))
    assert r.defines(r.config("L2PROMO=64")) == r.defines(r.config())
    with pytest.raises(ValueError, match="L2PROMO=100 must be one of 64, 128, 256"):
        r.config("L2PROMO=100")


def test_rungs_without_tensor_maps_have_no_l2_promotion():
    assert all("L2PROMO" not in r.params for r in registry.kernels() if not r.tensor_maps)


def test_a_stream_k_variant_becomes_the_plain_one_where_no_wave_is_partial():
    from gemmlab.core.registry import Launch
    from gemmlab.core.variant import Variant

    v = Variant.make("wgmma_ws", "fp16", config="STREAMK=1,CLUSTER=1")
    assert v.for_geometry(Launch((132, 1, 1), (384, 1, 1)), 4096, 4096, 4096).cfg["STREAMK"] == 1
    assert v.for_geometry(Launch((64, 1, 1), (384, 1, 1)), 1024, 1024, 4096).cfg["STREAMK"] == 0


def test_rung_18_launches_its_stream_k_tail_as_the_last_row_of_a_grid_of_whole_waves():
    """4096^3 in 128x256 tiles on 132 SMs: 512 tiles, 3 whole waves (rows 0-2 of the grid, one tile
    per block) and the 116 left split by k tiles over the 132 blocks of row 3; 8192^3: 2048 tiles,
    15 waves and 68 left (over half a wave: no extra wave joins the tail)."""
    r = registry.get("async_simt")
    cfg = r.config("STREAMK=1")
    g = r.launch(4096, 4096, cfg, 4096, sm_count=132)
    assert g.grid == (132, 4, 1) and g.block == (256, 1, 1) and g.streamk
    assert r.launch(8192, 8192, cfg, 8192, sm_count=132).grid == (132, 16, 1)
    # 288 tiles: 24 past 2 waves, under half a wave, so the tail takes one whole wave more
    assert r.launch(4095, 2303, cfg, 100, sm_count=132).grid == (132, 2, 1)


def test_rung_18_launches_the_plain_grid_where_no_wave_is_partial_or_the_sm_count_is_unknown():
    from gemmlab.core.variant import Variant

    r = registry.get("async_simt")
    cfg = r.config("STREAMK=1")
    whole = r.launch(4096, 4096, cfg, 4096, sm_count=128)          # 512 tiles: 4 whole waves of 128
    assert whole.grid == (16, 32, 1) and not whole.streamk
    assert r.launch(4096, 4096, cfg, 4096).grid == (16, 32, 1)      # inspect, without a device
    v = Variant.make("async_simt", "fp32", config="STREAMK=1")
    assert v.for_geometry(whole, 4096, 4096, 4096).cfg["STREAMK"] == 0
    assert v.for_geometry(r.launch(4096, 4096, cfg, 4096, sm_count=132), 4096, 4096, 4096).cfg["STREAMK"] == 1


def test_rung_18_takes_stream_k_only_with_one_block_per_sm_and_without_split_k():
    r = registry.get("async_simt")
    assert not r.check_config(r.config("STREAMK=1"))
    assert not r.check_config(r.config("256x128,STREAMK=1"))
    assert any("SPLITK=2" in p for p in r.check_config(dict(r.config("STREAMK=1"), SPLITK=2)))
    assert any("one block per SM" in p for p in r.check_config(dict(r.config("small"), STREAMK=1)))
    assert "STREAMK" not in r.defines(r.config()) and r.defines(r.config("STREAMK=1"))["STREAMK"] == 1


def test_stream_k_is_for_the_tma_path_only():
    """An operand the producer's threads copy leaves the consumers 200 registers: STREAMK=0."""
    from dataclasses import replace

    from gemmlab.core.registry import Launch
    from gemmlab.core.variant import Variant

    v = replace(Variant.make("wgmma_ws", "fp16", config="STREAMK=1,CLUSTER=1"), vec_a=False)
    assert v.for_geometry(Launch((132, 1, 1), (384, 1, 1)), 4096, 4096, 4096).cfg["STREAMK"] == 0


def test_mma_sync_declares_the_staging_of_operands_without_16_byte_access():
    """Rung 17 stages such an operand's 4-byte words after its tiles: 5 words per 16-byte chunk a
    thread copies, STAGES deep. The variant's shared memory, its GL_DYN_SMEM and the geometry a
    plan launches all include them; an aligned variant's stay the rung's."""
    from gemmlab.core.problem import KernelProblem
    from gemmlab.core.variant import Variant, resolve

    rung = registry.get("mma_sync")
    cfg = rung.config("64x64")   # 128 threads; A 64x32 and B 32x64: 2 chunks each per thread
    plain = rung.smem_bytes(cfg)
    words = cfg["STAGES"] * 5 * 2 * 128 * 4
    assert Variant.make(rung, "fp16", config=cfg).smem == plain
    a_only = Variant.make(rung, "fp16", vec_a=False, config=cfg)
    both = Variant.make(rung, "fp16", vec_a=False, vec_b=False, config=cfg)
    assert a_only.smem == plain + words and both.smem == plain + 2 * words
    assert both.defines()["GL_DYN_SMEM"] == both.smem
    assert Variant.make(rung, "fp16", config=cfg).defines()["GL_DYN_SMEM"] == plain
    # 300 x 173 x 229, row-major: odd K and N, neither operand has 16-byte access
    kp = KernelProblem(300, 173, 229, 1 << 20, 229, False, False, 2 << 20, 173, False, False, 3 << 20, 173, False,
                       1.0, 0.0)
    res = resolve(rung, "fp16", kp, cfg, None, 132)
    assert res.geometry.smem == res.variant.smem == plain + 2 * words


def test_a_staging_that_overflows_shared_memory_is_refused_by_name():
    """128x128 tiles of BK 64 in 5 stages fit a block aligned (160 KB); the staging of two operands
    without 16-byte access would add 200 KB: refused before any launch, saying why."""
    from gemmlab.core.arch import LIMITS

    rung = registry.get("mma_sync")
    cfg = rung.config("BM=128,BN=128,BK=64,WM=64,WN=32,STAGES=5")
    rung.check_resources(cfg, LIMITS[90])
    with pytest.raises(ValueError, match="staging of its operands without 16-byte access"):
        rung.check_resources(cfg, LIMITS[90], vec_a=False, vec_b=False)
