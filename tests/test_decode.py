"""Rung 24 (decode): the thin 16-bit GEMM of LLM decoding. Its tile is wide x thin in either
orientation (N thin when BN <= BM), the wide operand's 16-byte loads are its mma.sync fragments,
and K is split over the warps of a block and over the blocks of a cluster or the workspace, summed
in a fixed order. CPU: its constraints, the rule's tile and split, the dispatch, the compiled
variants the rule can choose. GPU: every layout across tile edges, alignments and splits against
the float64 reference, the same bits on every run."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import pytest

from gemmlab.core import decode, dispatch, registry
from gemmlab.core.problem import GemmProblem
from gemmlab.core.variant import Variant
import stand_ins

DECODE = registry.get("decode")
H100 = SimpleNamespace(arch="sm_90a", name="NVIDIA H100 80GB HBM3", sm_count=132)
A100 = SimpleNamespace(arch="sm_80", name="NVIDIA A100-SXM4-80GB", sm_count=108)


def problem(M, N, K, dtype="bf16", **layouts) -> GemmProblem:
    return stand_ins.problem(M, N, K, dtype, **layouts)


# ---- the registry ------------------------------------------------------------------------------
def test_the_thin_side_must_be_8_16_or_32():
    assert any("thin side" in p for p in DECODE.check_config(DECODE.config() | {"BN": 4}))
    assert any("thin side" in p for p in DECODE.check_config(DECODE.config() | {"BN": 24}))


def test_the_wide_side_is_whole_warps_of_64_rows_up_to_256():
    assert any("wide side" in p for p in DECODE.check_config(DECODE.config() | {"BM": 96}))
    assert any("wide side" in p for p in DECODE.check_config(DECODE.config() | {"BM": 512}))


def test_a_k_slice_holds_whole_steps_of_the_blocks_warps():
    assert any("multiple of 32*WK" in p for p in DECODE.check_config(DECODE.config() | {"WK": 8, "BK": 128}))


def test_a_block_whose_registers_do_not_fit_is_refused():
    # 32 thin columns need ~196 registers: 512 threads allow 128
    assert any("registers" in p for p in DECODE.check_config(DECODE.config() | {"BM": 32, "BN": 128, "WK": 8, "BK": 256}))


def test_threads_are_32_per_64_rows_per_k_warp():
    assert DECODE.threads(DECODE.config({"BM": 8, "BN": 128, "WK": 2})) == 128
    assert DECODE.threads(DECODE.config({"BM": 256, "BN": 16, "WK": 1})) == 128


def test_the_decode_rung_is_thin_and_16_bit_only():
    assert DECODE in registry.for_dtype("bf16", thin=True) and DECODE in registry.for_dtype("fp16", thin=True)
    assert DECODE not in registry.for_dtype("bf16", thin=False) and not DECODE.supports("fp32")
    assert dispatch.choose(problem(4096, 4096, 4096), "auto", "sm_90a") is not DECODE


# ---- the rule ------------------------------------------------------------------------------------
@pytest.mark.parametrize("M,N,bm,bn", [(1, 4096, 8, 64), (4, 14336, 8, 64), (16, 4096, 16, 64), (32, 6144, 32, 64),
                                       (4096, 16, 64, 16), (4096, 1, 64, 8), (9, 9, 64, 16), (30, 30, 64, 32)])
def test_the_rule_tile_fits_the_thin_side_in_the_right_orientation(M, N, bm, bn):
    cfg, _ = decode.rule(M, N, 4096, 132, "sm_90a")
    assert (cfg["BM"], cfg["BN"]) == (bm, bn)
    assert DECODE.check_config(DECODE.config(cfg)) == []


def test_the_rule_splits_k_in_one_cluster_until_every_sm_has_its_warps():
    # 4096 wide: 64 tiles of 4 warps; 8 warps on each of 132 SMs want 4 slices
    cfg, why = decode.rule(1, 4096, 4096, 132, "sm_90a")
    assert (cfg["SPLITK"], cfg["SKCLUSTER"]) == (4, 1) and "one cluster" in why
    # 14336 wide: 224 tiles are enough
    assert decode.rule(1, 14336, 4096, 132, "sm_90a")[0]["SPLITK"] == 1


def test_the_rule_splits_only_into_slices_of_whole_k_tiles_each_with_work():
    # K = 1280: 10 tiles of 128 in 4 slices of 3, 3, 3 and 1
    assert decode.rule(1, 4096, 1280, 132, "sm_90a")[0]["SPLITK"] == 4
    # K = 640: 5 tiles, at least 2 chunks of each of 4 warps per slice: 2 slices of 3 and 2
    assert decode.rule(1, 4096, 640, 132, "sm_90a")[0]["SPLITK"] == 2


def test_the_rule_leaves_each_warp_two_chunks_of_its_slice():
    # K = 512: slices of at least 2 x 128 k
    assert decode.rule(1, 4096, 512, 132, "sm_90a")[0]["SPLITK"] == 2
    cfg, why = decode.rule(1, 4096, 200, 132, "sm_90a")
    assert (cfg["SPLITK"], cfg["SKCLUSTER"]) == (1, 0) and "split" not in why


def test_a_problem_narrow_on_both_sides_splits_k_through_the_workspace_beyond_a_cluster():
    # 1 x 31: one tile; 8 slices would give 132 SMs 32 warps in all
    cfg, why = decode.rule(1, 31, 11364, 132, "sm_90a")
    assert cfg["SPLITK"] > 8 and cfg["SKCLUSTER"] == 0 and "workspace" in why
    assert DECODE.check_config(DECODE.config(cfg)) == []


def test_the_rule_declines_operands_without_16_byte_access():
    assert decode.rule(1, 4096, 4096, 132, "sm_90a", vec_b=False) is None
    assert decode.rule(1, 4096, 4096, 132, "sm_90a", vec_a=False) is None


def test_the_rule_sizes_operands_without_16_byte_access_when_the_selection_asks():
    aligned, _ = decode.rule(1, 4094, 4096, 132, "sm_90a")
    cfg, _ = decode.rule(1, 4094, 4096, 132, "sm_90a", vec_b=False, unaligned=True)
    # the same tile and split; the ring in registers (the shared-memory ring needs 16-byte access)
    assert cfg == dict(aligned, ASYNC=0, DEPTH=decode.DEPTH)


@pytest.mark.parametrize("M,N,a_col,b_col,ring", [
    (1, 4096, False, False, True), (8, 14336, False, True, True),      # M thin, A (Q) row-major: along K
    (9, 4096, False, False, True), (32, 4096, False, True, True),       # 16 and 32 columns too
    (1, 4096, True, False, False),                                      # Q = A column-major: not along K
    (4096, 8, False, True, True), (4096, 8, False, False, False)])      # N thin: Q = B, along K when column-major
def test_the_rule_takes_the_ring_in_shared_memory_where_q_runs_along_k(M, N, a_col, b_col, ring):
    cfg, why = decode.rule(M, N, 4096, 132, "sm_90a", a_col=a_col, b_col=b_col)
    assert cfg["ASYNC"] == int(ring) and ("shared memory" in why) == ring
    assert cfg["DEPTH"] == (decode.ASYNC_DEPTH if ring else decode.DEPTH)
    assert DECODE.check_config(DECODE.config(cfg)) == []


def test_the_rule_keeps_the_ring_in_registers_without_16_byte_access():
    for va, vb in ((False, True), (True, False)):
        assert decode.rule(1, 4096, 4096, 132, "sm_90a", vec_a=va, vec_b=vb, unaligned=True)[0]["ASYNC"] == 0


def test_auto_leaves_an_unaligned_thin_problem_to_the_other_rungs(rule_only):
    p = problem(6, 4094, 4096)          # B's rows of 4094 elements: no 16-byte access
    assert not p.kernel_view().vec_b
    assert dispatch.decide(p, device=H100).rung is not DECODE


def test_without_clusters_the_rule_splits_through_the_workspace():
    cfg, why = decode.rule(1, 4096, 4096, 108, "sm_80")
    assert cfg["SPLITK"] > 1 and cfg["SKCLUSTER"] == 0 and "workspace" in why


def test_the_rule_asks_for_256_byte_l2_fetches_only_where_the_wide_operand_runs_along_k():
    assert decode.rule(1, 4096, 4096, 132, "sm_90a", b_col=True)[0]["L2PF"] == 1     # M thin, B the wide: K-major
    assert decode.rule(1, 4096, 4096, 132, "sm_90a", b_col=False)[0]["L2PF"] == 0
    assert decode.rule(4096, 1, 4096, 132, "sm_90a", a_col=False)[0]["L2PF"] == 1    # N thin, A the wide: row-major
    assert decode.rule(4096, 1, 4096, 132, "sm_90a", a_col=True)[0]["L2PF"] == 0


def test_auto_passes_the_kernel_views_layouts_to_the_rule(rule_only):
    assert dispatch.decide(problem(1, 4096, 4096, b_col=True), device=H100).config["L2PF"] == 1
    assert dispatch.decide(problem(1, 4096, 4096), device=H100).config["L2PF"] == 0


def test_auto_gives_a_thin_16_bit_problem_to_the_decode_rung(rule_only):
    for dtype in ("bf16", "fp16"):
        c = dispatch.decide(problem(1, 4096, 4096, dtype), device=H100)
        assert c.rung is DECODE and c.source == "rule" and "thin 16-bit problem (M=1" in c.reason


def test_auto_decode_on_an_a100_uses_the_workspace_split(rule_only):
    c = dispatch.decide(problem(1, 4096, 4096), device=A100)
    assert c.rung is DECODE and c.config["SKCLUSTER"] == 0 and c.config["SPLITK"] > 1


def test_a_16_bit_problem_wider_than_32_goes_to_the_top_rung(rule_only):
    assert dispatch.decide(problem(33, 4096, 4096), device=H100).rung is not DECODE


def test_fp32_never_goes_to_the_decode_rung(rule_only):
    assert dispatch.decide(problem(1, 4096, 4096, "fp32"), device=H100).rung is not DECODE


def test_a_column_major_c_turns_a_thin_m_into_a_thin_n_for_the_kernel(rule_only):
    c = dispatch.decide(problem(16, 4096, 4096, c_col=True), device=H100)
    assert c.rung is DECODE and (c.config["BM"], c.config["BN"]) == (64, 16)


# ---- what the rule can choose compiles without spills --------------------------------------------
RULE_TILES = sorted({(c["BM"], c["BN"], c["BK"], c["WK"]) for c in
                     (decode.rule(M, N, 4096, 132, "sm_90a")[0] for M, N in itertools.product((1, 9, 17, 4096), repeat=2)
                      if min(M, N) <= decode.THIN16_MAX)})


@pytest.mark.parametrize("bm,bn,bk,wk", RULE_TILES)
def test_every_tile_the_rule_chooses_compiles_without_spills_in_every_layout_and_split(bm, bn, bk, wk):
    for (a_col, b_col), split in itertools.product(itertools.product((False, True), repeat=2),
                                                   ({}, {"SPLITK": 8, "SKCLUSTER": 1}, {"SPLITK": 4})):
        M, N = (bm, 4096) if bm < bn else (4096, bn)
        ring = {k: decode.rule(M, N, 4096, 132, "sm_90a", a_col=a_col, b_col=b_col)[0][k] for k in ("ASYNC", "DEPTH")}
        cfg = {"BM": bm, "BN": bn, "BK": bk, "WK": wk, "L2PF": int(a_col != b_col), **ring, **split}
        ck = Variant.make("decode", "bf16", a_col=a_col, b_col=b_col, config=cfg).compile("sm_90a")
        assert ck.spill_bytes == 0 and "bytes stack frame" in ck.log and " 0 bytes stack frame" in ck.log, ck.log


@pytest.mark.parametrize("bm,bn,bk,wk", RULE_TILES)
def test_without_16_byte_access_every_rule_tile_reads_by_4_byte_pairs_without_spills(bm, bn, bk, wk):
    from gemmlab.analysis import disasm
    for a_col, b_col in itertools.product((False, True), repeat=2):
        cfg = {"BM": bm, "BN": bn, "BK": bk, "WK": wk, "L2PF": int(a_col != b_col)}
        ck = Variant.make("decode", "bf16", a_col=a_col, b_col=b_col, vec_a=False, vec_b=False,
                          config=cfg).compile("sm_90a")
        assert ck.spill_bytes == 0 and " 0 bytes stack frame" in ck.log, ck.log
        sass = disasm.sass_nvdisasm(ck.cubin)
        # the interior's 32 pair loads a chunk (4-byte LDG, no size suffix), the byte permutes of
        # the pairs that are not 4-byte aligned, and no 16-byte load anywhere
        assert len(re.findall(r"LDG\.E(?:\.NA)?\.CONSTANT R", sass)) >= 32 and "PRMT" in sass
        assert "LDG.E.128" not in sass


def test_the_wide_operand_row_major_is_read_by_16_byte_loads_and_paired_by_byte_permutes():
    from gemmlab.analysis import disasm
    sass = disasm.sass_nvdisasm(Variant.make("decode", "bf16", config={"BM": 8, "BN": 64}).compile("sm_90a").cubin)
    assert len(re.findall(r"LDG\.E\.128", sass)) >= 9 and "PRMT" in sass and "HMMA.16816.F32.BF16" in sass


# ---- the ring in shared memory (ASYNC=1) ------------------------------------------------------------
def test_the_ring_in_shared_memory_is_counted_in_the_blocks_shared_memory():
    base = {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 4}
    assert decode.smem(dict(base, ASYNC=1)) == decode.smem(base) + 4 * (8 + 1) * 16 * 128


def test_the_ring_in_shared_memory_costs_no_registers_per_chunk():
    deep = {"BM": 32, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 8, "ASYNC": 1}
    assert decode.registers(deep) == decode.registers(dict(deep, DEPTH=2, ASYNC=0))
    assert DECODE.check_config(DECODE.config(deep)) == []
    assert DECODE.check_config(dict(DECODE.config(deep), ASYNC=0))      # 8 register buffers: refused


def test_a_ring_in_shared_memory_larger_than_a_block_may_have_is_refused():
    with pytest.raises(ValueError, match="shared memory"):
        DECODE.config({"BM": 32, "BN": 128, "BK": 256, "WK": 8, "DEPTH": 8, "ASYNC": 1})


# (config, a_col, b_col): the thin operand Q contiguous along k (A row-major where M is thin, B
# column-major where N is), the wide one in either layout
ASYNC_CASES = [({"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 8, "ASYNC": 1}, False, False),
               ({"BM": 32, "BN": 128, "BK": 64, "WK": 2, "DEPTH": 4, "ASYNC": 1, "SPLITK": 4, "SKCLUSTER": 1}, False, True),
               ({"BM": 64, "BN": 16, "BK": 128, "WK": 4, "DEPTH": 6, "ASYNC": 1, "L2PF": 1}, False, True),
               ({"BM": 128, "BN": 8, "BK": 64, "WK": 2, "DEPTH": 6, "ASYNC": 1, "SPLITK": 5}, True, True)]


@pytest.mark.parametrize("cfg,a_col,b_col", ASYNC_CASES, ids=str)
def test_the_ring_in_shared_memory_copies_by_cp_async_and_reads_back_by_16_byte_lds_without_spills(cfg, a_col, b_col):
    from gemmlab.analysis import disasm
    ck = Variant.make("decode", "bf16", a_col=a_col, b_col=b_col, config=cfg).compile("sm_90a")
    assert ck.spill_bytes == 0 and " 0 bytes stack frame" in ck.log, ck.log
    sass = disasm.sass_nvdisasm(ck.cubin)
    # a chunk's P units copied past L1 (.cg), Q's kept in it (.ca), all read back by 16-byte LDS;
    # the wait leaves DEPTH - 1 chunks in flight
    units = 8 + min(cfg["BM"], cfg["BN"]) // 8
    assert len(re.findall(r"LDGSTS\.E\.BYPASS(?:\.LTC\d+B)?\.128", sass)) >= 8
    assert len(re.findall(r"LDGSTS\.E(?:\.LTC\d+B)?\.128", sass)) >= units - 8
    assert len(re.findall(r"LDS\.128", sass)) >= units
    assert "LDGDEPBAR" in sass and f"DEPBAR.LE SB0, 0x{cfg['DEPTH'] - 1:x}" in sass


@pytest.mark.parametrize("cfg,a_col,b_col", ASYNC_CASES[:2], ids=str)
def test_the_ring_in_shared_memory_keeps_one_copy_of_its_loop(cfg, a_col, b_col):
    # not unrolled by DEPTH: as many HMMA as one chunk asks (2 k halves x 4 m-tiles x the n-tiles)
    from gemmlab.analysis import disasm
    sass = disasm.sass_nvdisasm(Variant.make("decode", "bf16", a_col=a_col, b_col=b_col, config=cfg).compile("sm_90a").cubin)
    assert len(re.findall(r"HMMA\.16816", sass)) == 2 * 4 * min(cfg["BM"], cfg["BN"]) // 8


def test_without_16_byte_access_to_both_operands_async_keeps_two_register_buffers():
    from gemmlab.analysis import disasm
    cfg = {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 8, "ASYNC": 1}
    ck = Variant.make("decode", "bf16", vec_a=False, config=cfg).compile("sm_90a")
    assert ck.spill_bytes == 0 and "LDGSTS" not in disasm.sass_nvdisasm(ck.cubin)


# ---- GPU -------------------------------------------------------------------------------------------
# thin M and thin N, ragged wide and thin sides, K below, across and beyond a chunk, unaligned
# leading dimensions and base pointers off 8 (the spread pair loads: two words where the pairs are
# not 4-byte aligned, one where they are), with several interior chunks per warp
GPU_SHAPES = [(1, 300, 257, 0, 0), (7, 131, 1000, 0, 0), (131, 13, 1000, 0, 0), (32, 64, 64, 0, 0),
              (16, 257, 513, 0, 0), (300, 3, 33, 0, 0), (13, 130, 129, 3, 1), (130, 9, 129, 1, 0), (5, 77, 7, 0, 0),
              (6, 1170, 486, 0, 0), (300, 5, 262, 2, 0), (3, 700, 1537, 0, 0), (517, 11, 2049, 0, 1),
              (5, 1001, 640, 7, 0),       # 16-byte access, a lane across the wide edge
              # 16-byte access where the layout allows, K ending inside a 16-byte unit, a lane
              # across the wide edge in P's last k row (the ring in shared memory's guarded units)
              (5, 1004, 300, 4, 0), (1004, 5, 300, 4, 0), (1, 2048, 1024, 0, 0)]
LAYOUTS = list(itertools.product((False, True), repeat=3))
CONFIGS = ["m8", "m32", "n8", "n32", "m8_deep", {"BM": 16, "BN": 128, "BK": 64, "WK": 2, "DEPTH": 3},
           {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "SPLITK": 3, "SKCLUSTER": 1},
           {"BM": 32, "BN": 64, "BK": 32, "WK": 1, "SPLITK": 8, "SKCLUSTER": 1},
           {"BM": 64, "BN": 16, "BK": 128, "WK": 4, "SPLITK": 5},
           {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 4, "ASYNC": 1},
           {"BM": 32, "BN": 128, "BK": 64, "WK": 2, "DEPTH": 6, "ASYNC": 1, "SPLITK": 3, "SKCLUSTER": 1},
           {"BM": 64, "BN": 16, "BK": 128, "WK": 4, "DEPTH": 8, "ASYNC": 1, "L2PF": 1, "SPLITK": 4}]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_decode_matches_the_float64_reference_in_every_layout(dtype, config, layout):
    from gemmlab.measure.verify import verify
    a_col, b_col, c_col = layout
    failures = []
    for (M, N, K, pad, off), (alpha, beta) in itertools.product(GPU_SHAPES, [(1.0, 0.0), (1.5, -0.75)]):
        r = verify("decode", M, N, K, dtype, a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                   ld_pad=pad, offset=off, config=config)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(1, 4096, 4096), (32, 4096, 14336), (4, 14336, 4096), (4096, 16, 4096)])
def test_auto_on_decode_shapes_matches_the_float64_reference(M, N, K):
    from gemmlab.measure.verify import verify
    for b_col in (False, True):
        r = verify("auto", M, N, K, "bf16", b_col=b_col, alpha=1.0, beta=0.5)
        assert r.ok, r.message()


@pytest.mark.gpu
@pytest.mark.parametrize("config", [{"SPLITK": 8, "SKCLUSTER": 1}, {"SPLITK": 6}, "m8_deep",
                                    {"DEPTH": 6, "ASYNC": 1, "SPLITK": 4, "SKCLUSTER": 1}])
def test_decode_gives_the_same_bits_on_every_run(config):
    import cupy as cp

    import gemmlab
    decode_m8 = dict(DECODE.presets["m8"])
    rng = cp.random.default_rng(7)
    a = rng.standard_normal((3, 4096), dtype=cp.float32).astype(cp.float16)
    b = rng.standard_normal((4096, 2048), dtype=cp.float32).astype(cp.float16)
    outs = [gemmlab.matmul(a, b, kernel="decode", config=dict(decode_m8, **config) if isinstance(config, dict) else config)
            for _ in range(3)]
    assert all(bool((o == outs[0]).all()) for o in outs[1:])
