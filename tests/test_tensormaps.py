"""The TMA tensor maps of the WGMMA rung: the encode arguments built for odd shapes, strides and
layouts (pure Python, no GPU), the cache that makes a repeated operand a dict lookup, and on the
GPU: maps reused across calls, re-encoded for a new pointer, and correct results on the TMA path
(ragged tiles), the thread-copy path and the two mixed."""

from __future__ import annotations

import itertools

import pytest

import gemmlab
from gemmlab.core import registry, tensormaps
from gemmlab.core.tensormaps import MapArgs, MapCache, operand_map, output_map

CFG = {"BM": 128, "BN": 256, "BK": 64}


# ---- encode arguments -------------------------------------------------------------------------
def test_row_major_a_is_k_major_with_k_innermost_and_a_box_of_bm_rows():
    m = operand_map("A", 127, 72, 80, False, "fp16", CFG)
    assert m == MapArgs("fp16", (72, 127), (160,), (64, 128), k_major=True)


def test_column_major_a_is_mn_major_with_m_innermost_and_a_box_of_bk_rows():
    m = operand_map("A", 129, 65, 136, True, "bf16", CFG)
    assert m == MapArgs("bf16", (129, 65), (272,), (64, 64), k_major=False, promotion=128)   # 272 % 32: 16


def test_column_major_b_is_k_major_with_a_box_of_bn_rows():
    m = operand_map("B", 65, 31, 72, True, "fp16", CFG)
    assert m == MapArgs("fp16", (65, 31), (144,), (64, 256), k_major=True, promotion=128)


def test_row_major_b_is_mn_major_with_n_innermost():
    m = operand_map("B", 1000, 257, 264, False, "fp16", CFG)
    assert m == MapArgs("fp16", (257, 1000), (528,), (64, 64), k_major=False, promotion=128)


def test_a_single_row_or_column_keeps_its_leading_dimension_as_the_stride():
    assert operand_map("A", 1, 8, 8, False, "fp16", CFG).dims == (8, 1)
    assert operand_map("A", 1, 8, 8, False, "fp16", CFG).strides == (16,)
    assert operand_map("B", 8, 1, 8, True, "bf16", CFG).dims == (8, 1)


def test_the_box_follows_the_tile_configuration():
    cfg = {"BM": 64, "BN": 128, "BK": 128}
    assert operand_map("A", 300, 300, 304, False, "fp16", cfg).box == (64, 64)
    assert operand_map("A", 300, 300, 304, True, "fp16", cfg).box == (64, 128)
    assert operand_map("B", 300, 300, 304, True, "fp16", cfg).box == (64, 128)


def test_a_cluster_splits_the_b_box_so_each_block_multicasts_its_part():
    cfg = {"BM": 128, "BN": 256, "BK": 64, "CLUSTER": 2}
    assert operand_map("B", 300, 300, 304, True, "fp16", cfg).box == (64, 128)    # K-major: BN / 2 rows
    assert operand_map("B", 300, 300, 304, False, "fp16", cfg).box == (64, 32)    # MN-major: BK / 2 rows
    assert operand_map("A", 300, 300, 304, False, "fp16", cfg).box == (64, 128)   # A is not shared


def test_the_maps_l2_promotion_is_256_bytes_for_rows_of_32_byte_multiples_unless_the_configuration_names_another():
    assert operand_map("A", 300, 300, 304, False, "fp16", CFG).promotion == 256          # rows of 608 bytes
    maps = {promo: operand_map("B", 300, 300, 304, True, "fp32", {**CFG, "BK": 32, "L2PROMO": promo})
            for promo in (64, 128, 256)}
    assert {promo: m.promotion for promo, m in maps.items()} == {64: 64, 128: 128, 256: 256}
    assert len(set(maps.values())) == 3      # three maps apart in the cache (its key is the arguments)


def test_rows_16_bytes_off_a_32_byte_multiple_are_promoted_at_128_bytes_unless_the_configuration_names_another():
    assert operand_map("A", 300, 296, 296, False, "fp16", CFG).promotion == 128          # rows of 592 bytes
    assert operand_map("B", 5072, 300, 5072, True, "fp8", {**CFG, "BK": 128}).promotion == 128
    assert operand_map("A", 300, 296, 296, False, "fp16", {**CFG, "L2PROMO": 256}).promotion == 256
    # a batch whose elements start 16 bytes off: every other element's rows are
    assert operand_map("A", 300, 304, 304, False, "fp16", CFG, batch=(3, 300 * 304 + 8)).promotion == 128
    assert operand_map("A", 300, 304, 304, False, "fp16", CFG, batch=(3, 300 * 304 + 16)).promotion == 256


def test_an_l2_promotion_the_copy_engine_does_not_have_is_refused_naming_it():
    with pytest.raises(ValueError, match="L2 promotion 512 bytes"):
        operand_map("A", 300, 300, 304, False, "fp16", {**CFG, "L2PROMO": 512})


def test_every_accepted_configuration_gives_boxes_tma_can_copy():
    """A box side is at most 256 elements and its inner side one 128-byte swizzle row."""
    rungs = [registry.get("wgmma_tma"), registry.get("wgmma_ws")]
    for r, values in [(r, v) for r in rungs for v in itertools.product(*r.space.values())]:
        cfg = dict(r.params, **dict(zip(r.space, values)))
        if r.check_config(cfg):
            continue
        for operand, col in itertools.product("AB", (False, True)):
            box = operand_map(operand, 4096, 4096, 4096, col, "bf16", cfg).box
            assert box[0] * 2 == 128 and 1 <= box[1] <= 256, (cfg, operand, col, box)


@pytest.mark.parametrize("args, reason", [
    (("C", 8, 8, 8, False, "fp16", CFG), "operand must be 'A' or 'B'"),
    (("A", 8, 8, 8, False, "fp64", CFG), "fp16, bf16, fp32 and fp8"),
    (("A", 0, 8, 8, False, "fp16", CFG), "at least one element"),
    (("A", 8, 16, 8, False, "fp16", CFG), "shorter than its contiguous extent 16"),
])
def test_arguments_no_map_can_describe_are_refused_naming_the_problem(args, reason):
    with pytest.raises(ValueError, match=reason):
        operand_map(*args)


# ---- the output map (rung 21's TMA store epilogue) ---------------------------------------------
def test_the_output_map_is_c_row_major_with_n_innermost_in_boxes_of_16_rows_by_a_swizzle_row():
    m = output_map(131, 72, 80, "fp16")           # ragged M, N not a multiple of the box, ld past N
    assert m == MapArgs("fp16", (72, 131), (160,), (64, 16), k_major=False)


def test_the_output_map_of_a_single_row_keeps_its_leading_dimension_as_the_stride():
    assert output_map(1, 8, 8, "bf16") == MapArgs("bf16", (8, 1), (16,), (64, 16), k_major=False)
    assert output_map(1, 8, 1024, "bf16").strides == (2048,)


def test_tma_stores_only_rows_of_whole_16_byte_chunks_with_16_byte_strides():
    """The copy engine writes whole 16-byte chunks: a 77-output row would have 3 more written."""
    assert tensormaps.storable(72, 80, "fp16") and tensormaps.storable(8, 8, "bf16")
    assert not tensormaps.storable(77, 80, "fp16")    # the row's last chunk is ragged
    assert not tensormaps.storable(1, 8, "bf16")      # a single column: 2 bytes of a chunk
    assert not tensormaps.storable(72, 76, "fp16")    # 152-byte row stride


def test_a_16_bit_output_box_is_one_consumer_warps_16_rows_of_one_128_byte_swizzle_row():
    for dtype in ("fp16", "bf16"):
        box = output_map(4096, 4096, 4096, dtype).box
        assert box == (tensormaps.SWIZZLE_BYTES // 2, tensormaps.STORE_BOX_ROWS[2]) == (64, 16)


def test_an_fp32_output_map_is_in_boxes_of_32_rows_by_a_swizzle_row_of_32_outputs():
    """The FP32 epilogue part's chunk (64 rows x 32 FP32; rung 22, and rung 21 writing FP32) is two
    such boxes."""
    assert output_map(300, 172, 176, "fp32") == MapArgs("fp32", (172, 300), (704,), (32, 32), k_major=False)


def test_a_column_major_c_maps_its_columns_as_the_rows_of_the_map():
    """Rung 22's transposed problem writes C column-major: the launch passes (N, M), so the map's
    contiguous side runs down a column of M outputs and its stride is ldc."""
    M, N, ldc = 900, 1000, 904
    assert output_map(N, M, ldc, "fp32") == MapArgs("fp32", (M, N), (ldc * 4,), (32, 32), k_major=False)


@pytest.mark.parametrize("args, reason", [
    ((8, 8, 8, "fp64"), "fp16, bf16 and fp32 outputs, not fp64"),
    ((0, 8, 8, "fp16"), "at least one element"),
    ((8, 16, 8, "bf16"), "leading dimension 8 is shorter than its row of 16"),
    ((8, 13, 16, "fp16"), "rows of 26 bytes, 32 bytes apart; TMA stores need both multiples of 16"),
    ((8, 8, 12, "fp16"), "rows of 16 bytes, 24 bytes apart"),
])
def test_an_output_no_store_map_can_describe_is_refused_naming_the_problem(args, reason):
    with pytest.raises(ValueError, match=reason):
        output_map(*args)


# ---- the cache ------------------------------------------------------------------------------
def _fake_encoder(args, ptr):
    return ptr.to_bytes(8, "little") + bytes(120)


def test_a_map_seen_before_is_served_without_encoding_again():
    cache = MapCache(_fake_encoder)
    args = operand_map("A", 64, 64, 64, False, "fp16", CFG)
    first = cache.acquire(0, 0x1000, args)
    assert cache.acquire(0, 0x1000, args) is first and cache.encoded == 1


def test_a_new_pointer_device_or_shape_encodes_a_new_map():
    cache = MapCache(_fake_encoder)
    args = operand_map("A", 64, 64, 64, False, "fp16", CFG)
    cache.acquire(0, 0x1000, args)
    assert cache.acquire(0, 0x2000, args)[:8] == (0x2000).to_bytes(8, "little")
    cache.acquire(1, 0x1000, args)
    cache.acquire(0, 0x1000, operand_map("A", 64, 72, 72, False, "fp16", CFG))
    assert cache.encoded == 4 and len(cache) == 4


def test_the_cache_forgets_the_least_recently_used_map_past_its_capacity():
    cache = MapCache(_fake_encoder, capacity=2)
    args = operand_map("B", 64, 64, 64, True, "bf16", CFG)
    cache.acquire(0, 0x1000, args)
    cache.acquire(0, 0x2000, args)
    cache.acquire(0, 0x1000, args)       # now the most recent
    cache.acquire(0, 0x3000, args)       # evicts 0x2000
    cache.acquire(0, 0x1000, args)
    assert cache.encoded == 3
    cache.acquire(0, 0x2000, args)
    assert cache.encoded == 4 and len(cache) == 2


def test_an_encoder_that_does_not_give_128_bytes_is_an_error():
    cache = MapCache(lambda args, ptr: bytes(64))
    with pytest.raises(RuntimeError, match="128 bytes"):
        cache.acquire(0, 0x1000, operand_map("A", 8, 8, 8, False, "fp16", CFG))


# ---- on the GPU -----------------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _rel_err(c, a, b, alpha=1.0):
    ref = alpha * (a.double() @ b.double())
    return float((c.double() - ref).norm() / ref.norm())


@pytest.mark.gpu
@pytest.mark.parametrize("rung, dtype, precision", [("wgmma_ws", "bf16", None), ("wgmma_tf32", "fp32", "tf32")],
                         ids=["rung21_bf16", "rung22_tf32"])
@pytest.mark.parametrize("c_col", [False, True], ids=["c_row", "c_col"])
@pytest.mark.parametrize("ld_pad, offset", [(3, 0), (0, 1)], ids=["ld_not_16_bytes", "base_not_16_bytes"])
def test_a_c_no_store_map_can_describe_is_stored_without_one_with_beta_zero(ld_pad, offset, c_col, rung, dtype,
                                                                              precision):
    """EPI_TMA=1 and beta == 0, but C's leading dimension or base is not 16-byte legal: rung 21's
    staged 16-byte stores and rung 22's stores from the accumulators write it (A and B by TMA)."""
    from gemmlab.measure.arrays import Lib, make_operands
    from gemmlab.measure.verify import check

    M, N, K = 300, 264, 130
    L = Lib("torch")
    c = L.randn(M, N, dtype, col_major=c_col, ld_pad=ld_pad, offset=offset)
    ops = make_operands(L, M, N, K, dtype, beta_nonzero=False, c=c)
    gemmlab.gemm(ops.a, ops.b, ops.c, alpha=1.5, beta=0.0, kernel=rung, precision=precision, config="EPI_TMA=1")
    r = check(ops, 1.5, 0.0, f"{rung} C pad={ld_pad} off={offset} col={c_col}", precision)
    assert r.ok, r.message()


@pytest.mark.gpu
def test_repeated_calls_reuse_their_maps_and_a_new_pointer_encodes_one_more():
    torch = _torch()
    a = torch.randn(200, 136, device="cuda", dtype=torch.float16)
    b = torch.randn(136, 264, device="cuda", dtype=torch.float16)
    c = torch.empty(200, 264, device="cuda", dtype=torch.float16)
    gemmlab.gemm(a, b, c, kernel="wgmma_tma")
    before = tensormaps.CACHE.encoded
    for _ in range(3):
        gemmlab.gemm(a, b, c, kernel="wgmma_tma")
    assert tensormaps.CACHE.encoded == before
    a2 = torch.randn_like(a)
    gemmlab.gemm(a2, b, c, kernel="wgmma_tma")
    torch.cuda.synchronize()
    assert tensormaps.CACHE.encoded == before + 1
    assert _rel_err(c, a2, b) < 1e-2


@pytest.mark.gpu
def test_a_call_on_a_new_c_stores_into_that_c_through_a_map_of_its_own():
    """Rung 21's C map follows C: the remembered plan, launched on another C, encodes that C's map
    (once) and writes there, not into the C of the call before."""
    torch = _torch()
    a = torch.randn(200, 136, device="cuda", dtype=torch.float16)
    b = torch.randn(136, 264, device="cuda", dtype=torch.float16)
    c1, c2 = (torch.empty(200, 264, device="cuda", dtype=torch.float16) for _ in range(2))
    gemmlab.gemm(a, b, c1, kernel="wgmma_ws")
    torch.cuda.synchronize()
    first, before = c1.clone(), tensormaps.CACHE.encoded
    c2.fill_(float("nan"))
    gemmlab.gemm(a, b, c2, kernel="wgmma_ws", alpha=0.5)
    gemmlab.gemm(a, b, c2, kernel="wgmma_ws", alpha=0.5)
    torch.cuda.synchronize()
    assert tensormaps.CACHE.encoded == before + 1
    assert _rel_err(c2, a, b, alpha=0.5) < 1e-2 and torch.equal(c1, first)


@pytest.mark.gpu
def test_a_call_captured_into_a_graph_with_operands_never_seen_replays_correctly():
    """Encoding a map is host-only: legal while the stream captures; the graph keeps its copy."""
    torch = _torch()
    a = torch.randn(256, 192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(192, 320, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(256, 320, device="cuda", dtype=torch.bfloat16)
    gemmlab.gemm(a, b, c, kernel="wgmma_tma")          # compiles and remembers the plan
    a2, b2 = torch.randn_like(a), torch.randn_like(b)  # new pointers: encoded during the capture
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a2, b2, c, kernel="wgmma_tma", alpha=0.5)
    c.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert _rel_err(c, a2, b2, alpha=0.5) < 1e-2


# (M, N, K): ragged in every dimension with TMA-legal strides (multiples of 8 elements), so every
# layout takes the TMA path for both operands (the last two: more row tiles than one launch-order
# group of 8, the last group shorter); then one operand's stride odd (one TMA operand, one copied by
# threads), whichever operand that is in each layout.
TMA_SHAPES = [(8, 8, 8), (200, 136, 72), (136, 520, 1032), (64, 8, 4104), (1100, 600, 72), (2200, 72, 16)]
MIXED_SHAPES = [(200, 33, 72), (33, 136, 72), (72, 72, 33)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("layout", list(itertools.product((False, True), repeat=3)),
                         ids=lambda l: "".join("C" if x else "R" for x in l))
def test_tma_and_mixed_paths_match_cublas_on_ragged_tiles(layout, dtype):
    from gemmlab.measure.verify import verify

    a_col, b_col, c_col = layout
    failures = []
    for (M, N, K), (alpha, beta) in itertools.product(TMA_SHAPES + MIXED_SHAPES, [(1.0, 0.0), (1.5, -0.75)]):
        r = verify("wgmma_tma", M, N, K, dtype, lib="torch" if dtype == "bf16" else None, a_col=a_col,
                   b_col=b_col, c_col=c_col, alpha=alpha, beta=beta)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("preset", sorted(registry.get("wgmma_tma").presets))
def test_every_preset_is_correct_on_a_ragged_problem(preset):
    from gemmlab.measure.verify import verify

    r = verify("wgmma_tma", 300, 264, 200, "fp16", alpha=1.0, beta=0.5, config=preset)
    assert r.ok, r.message()
