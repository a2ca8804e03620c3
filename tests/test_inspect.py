"""`gemmlab inspect` (no GPU): occupancy calculator, SASS parser and loop finder, and every rung's
hot loop checked against what the rung is."""

from __future__ import annotations

import argparse
import functools
import json

import pytest

from gemmlab.analysis import disasm, hotpath
from gemmlab.analysis.inspect import analyze_sass, inspect_rung
from gemmlab.cli.inspect import register
from gemmlab.analysis.occupancy import occupancy
from gemmlab.core.arch import LIMITS, limits
from gemmlab.core.registry import get, kernels

KB = 1024


# ---- occupancy: hand-worked cases ---------------------------------------------------------------
@pytest.mark.parametrize(
    "arch, threads, regs, smem, blocks, warps, limiter",
    [
        # 1024 threads, 32 regs: 1024 regs/warp -> 16 warps per sub-partition, 64 per SM = 2 blocks;
        # 2048 threads / 1024 = 2 blocks too: full SM, named "threads" (the tie goes to threads)
        ("sm_90a", 1024, 32, 0, 2, 64, "threads"),
        # rung 13 on H100: 105 regs -> 3360 -> 3584 regs/warp; 16384 // 3584 = 4 warps per
        # sub-partition = 16 warps = 2 blocks of 8 warps. smem (9472 + 1024) -> 22 blocks.
        ("sm_90", 256, 105, 9472, 2, 16, "registers"),
        # the per-sub-partition rule bites: 112 regs -> 3584/warp; 65536 // 3584 would be 18 warps
        # (9 blocks of 2), but 4 sub-partitions x 4 warps = 16 warps = 8 blocks
        ("sm_90", 64, 112, 0, 8, 16, "registers"),
        # 33 regs round up to 1280 regs/warp: 12 warps per sub-partition, 48 per SM, 6 blocks of 8
        ("sm_90", 256, 33, 0, 6, 48, "registers"),
        # A100, 48 KB static: (49152 + 1024) = 50176 B per block, 167936 // 50176 = 3 blocks
        ("sm_80", 128, 64, 48 * KB, 3, 12, "shared memory"),
        # sm_86: 1-warp blocks hit the 16-block cap (16 of 48 warps)
        ("sm_86", 32, 16, 0, 16, 16, "blocks"),
        # Turing: 256 B granularity, no reservation, 64 KB per SM: 32 KB blocks -> 2
        ("sm_75", 256, 32, 32 * KB, 2, 16, "shared memory"),
        # 1024 threads x 128 regs = 128K registers: does not launch
        ("sm_90", 1024, 128, 0, 0, 0, "registers"),
        # 227 KB is the most a block may have on H100 (+1 KB reserved = the whole 228 KB) ...
        ("sm_90", 128, 32, 227 * KB, 1, 4, "shared memory"),
        # ... and one byte more does not launch
        ("sm_90", 128, 32, 227 * KB + 1, 0, 0, "shared memory"),
        # sm_120 (consumer Blackwell): 48 warps, 24 blocks
        ("sm_120", 64, 32, 0, 24, 48, "threads"),
    ],
)
def test_occupancy_matches_hand_worked_cases(arch, threads, regs, smem, blocks, warps, limiter):
    o = occupancy(arch, threads, regs, smem)
    assert (o["blocks_per_sm"], o["warps_per_sm"], o["limiter"]) == (blocks, warps, limiter), o
    assert o["occupancy"] == pytest.approx(warps / limits(arch).max_warps_per_sm, abs=1e-4)
    assert o["fits"] == (blocks > 0)
    assert o["limits"][limiter] == blocks
    json.dumps(o)


def test_occupancy_reports_every_tied_limiter():
    o = occupancy("sm_90", 1024, 32, 0)
    assert o["limiters"] == ["threads", "registers"]
    assert o["occupancy_pct"] == 100.0


def test_occupancy_table_has_h100_limits_and_all_target_archs():
    h = limits("sm_90a")
    assert (h.max_threads_per_sm, h.max_blocks_per_sm, h.max_warps_per_sm, h.regs_per_sm) == (2048, 32, 64, 65536)
    assert (h.smem_per_sm, h.max_smem_per_block, h.smem_alloc_unit, h.reserved_smem_per_block) == (228 * KB, 227 * KB, 128, KB)
    assert h.reg_alloc_unit == 256 and h.max_regs_per_thread == 255
    assert set(LIMITS) == {75, 80, 86, 87, 89, 90, 100, 120}
    for lim in LIMITS.values():
        assert lim.max_warps_per_sm * 32 == lim.max_threads_per_sm
    assert limits("sm_103a") is LIMITS[100]  # a family member not in the table
    with pytest.raises(ValueError):
        limits("sm_60")


# ---- SASS parser, loops, classes -----------------------------------------------------------------
# A tile loop (0x20-0xc0) whose body holds a math-free copy loop (0x50-0x70), a small loop with
# one FFMA (0xd0-0xf0), and the trailing trap loop; as nvdisasm and as cuobjdump print it.
NVDISASM = """
	.section	.text.gemm,"ax",@progbits
.text.gemm:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, 0x1, PT ;
.L_x_0:
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0030*/                   STS.128 [R0], R4 ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
.L_x_1:
        /*0050*/                   LDS R8, [R0] ;
        /*0060*/                   IADD3 R9, R9, 0x1, RZ ;
        /*0070*/              @P0 BRA `(.L_x_1) ;
        /*0080*/                   LDS.128 R12, [R0+0x10] ;
        /*0090*/                   FFMA R16, R12, R13, R16 ;
        /*00a0*/                   FFMA R17, R14, R15.reuse, R17 ;
        /*00b0*/                   NOP ;
        /*00c0*/              @!P1 BRA `(.L_x_0) ;
.L_x_2:
        /*00d0*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*00e0*/                   FFMA R16, R4, R4, R16 ;
        /*00f0*/               @P2 BRA `(.L_x_2) ;
        /*0100*/                   EXIT ;
.L_x_3:
        /*0110*/                   BRA `(.L_x_3);
        /*0120*/                   NOP;
.L_x_4:
"""

CUOBJDUMP = """
	code for sm_90a
		Function : gemm
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
                                                                          /* 0x000fe20000000800 */
        /*0010*/                   ISETP.GE.AND P0, PT, R0, 0x1, PT ;     /* 0x0000000000027919 */
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64] ;       /* 0x0000000000027919 */
        /*0030*/                   STS.128 [R0], R4 ;                     /* 0x0000000000027919 */
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;          /* 0x0000000000027919 */
        /*0050*/                   LDS R8, [R0] ;                         /* 0x0000000000027919 */
        /*0060*/                   IADD3 R9, R9, 0x1, RZ ;                /* 0x0000000000027919 */
        /*0070*/              @P0 BRA 0x50 ;                              /* 0x0000000000027919 */
        /*0080*/                   LDS.128 R12, [R0+0x10] ;               /* 0x0000000000027919 */
        /*0090*/                   FFMA R16, R12, R13, R16 ;              /* 0x0000000000027919 */
        /*00a0*/                   FFMA R17, R14, R15.reuse, R17 ;        /* 0x0000000000027919 */
        /*00b0*/                   NOP ;                                  /* 0x0000000000027919 */
        /*00c0*/              @!P1 BRA 0x20 ;                             /* 0x0000000000027919 */
        /*00d0*/                   LDG.E R4, desc[UR4][R2.64] ;           /* 0x0000000000027919 */
        /*00e0*/                   FFMA R16, R4, R4, R16 ;                /* 0x0000000000027919 */
        /*00f0*/               @P2 BRA 0xd0 ;                             /* 0x0000000000027919 */
        /*0100*/                   EXIT ;                                 /* 0x0000000000027919 */
        /*0110*/                   BRA 0x110;                             /* 0x0000000000027919 */
        /*0120*/                   NOP;                                   /* 0x0000000000027919 */
"""


@pytest.mark.parametrize("listing", [NVDISASM, CUOBJDUMP], ids=["nvdisasm", "cuobjdump"])
def test_parser_reads_offsets_predicates_operands_and_branch_targets(listing):
    insns = disasm.parse_sass(listing)
    assert [i.offset for i in insns] == list(range(0, 0x130, 0x10))
    bra = {i.offset: i for i in insns if i.base == "BRA"}
    assert {o: i.target for o, i in bra.items()} == {0x70: 0x50, 0xC0: 0x20, 0xF0: 0xD0, 0x110: 0x110}
    assert bra[0xC0].predicate == "@!P1" and bra[0x70].predicate == "@P0"
    ldg = insns[2]
    assert (ldg.opcode, ldg.base, ldg.modifiers, ldg.operands) == ("LDG.E.128", "LDG", ("E", "128"), "R4, desc[UR4][R2.64]")
    assert insns[0].target is None  # c[0x0][0x28] is not a code address


@pytest.mark.parametrize("listing", [NVDISASM, CUOBJDUMP], ids=["nvdisasm", "cuobjdump"])
def test_loops_are_back_edges_and_the_hot_loop_is_the_innermost_one_doing_math(listing):
    insns = disasm.parse_sass(listing)
    loops = disasm.find_loops(insns)
    assert [(lp.start, lp.end) for lp in loops] == [(0x20, 0xC0), (0x50, 0x70), (0xD0, 0xF0), (0x110, 0x110)]
    assert [(lp.start, lp.end) for lp in disasm.innermost_loops(loops)] == [(0x50, 0x70), (0xD0, 0xF0), (0x110, 0x110)]
    hot = disasm.hot_loop(insns)  # the tile loop: its nested loop does no math, and it has 2 FFMA to 1
    assert (hot.start, hot.end) == (0x20, 0xC0)
    mix = disasm.instruction_mix(hot.body(insns))
    assert mix["n_instructions"] == 10 and mix["nops"] == 1
    assert mix["ffma"] == 2 and mix["ffma_share"] == 0.2 and mix["math_share"] == 0.2
    assert mix["ffma_lds_share"] == 0.5 and mix["ffma_load_share"] == 0.4
    assert mix["loads"]["LDG"] == {"8": 0, "16": 0, "32": 0, "64": 0, "128": 1}
    assert mix["loads"]["LDS"] == {"8": 0, "16": 0, "32": 1, "64": 0, "128": 1}
    assert mix["stores"]["STS"] == {"8": 0, "16": 0, "32": 0, "64": 0, "128": 1}
    assert (mix["barriers"], mix["address_arith"], mix["control"]) == (1, 1, 2)


def test_hot_loop_prefers_a_nested_loop_that_does_math():
    listing = """
.text.k:
        /*0000*/                   FFMA R1, R2, R3, R1 ;
.L_x_1:
        /*0010*/                   FFMA R1, R2, R3, R1 ;
        /*0020*/                   FFMA R4, R2, R3, R4 ;
        /*0030*/              @P0 BRA `(.L_x_1) ;
        /*0040*/                   FFMA R5, R2, R3, R5 ;
        /*0050*/              @P1 BRA 0x0 ;
        /*0060*/                   EXIT ;
"""
    insns = disasm.parse_sass(listing)
    assert insns[5].target == 0  # a bare address is read too
    hot = disasm.hot_loop(insns)
    assert (hot.start, hot.end) == (0x10, 0x30)


def test_a_range_that_spans_the_exit_is_not_the_hot_loop():
    """An out-of-line retry stub after EXIT jumps back into the k-loop: its range holds the
    epilogue's FFMA, but no trip runs it; the k-loop's HGMMA is the hot loop."""
    listing = """
.text.k:
.L_x_0:
        /*0000*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;
.L_x_1:
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R2 ;
        /*0020*/             @!P0 BRA `(.L_x_3) ;
        /*0030*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;
        /*0040*/              @P1 BRA `(.L_x_0) ;
        /*0050*/                   FFMA R1, R2, R3, R1 ;
        /*0060*/                   FFMA R4, R2, R3, R4 ;
        /*0070*/                   FFMA R5, R2, R3, R5 ;
        /*0080*/                   EXIT ;
.L_x_3:
        /*0090*/                   NOP ;
        /*00a0*/                   BRA `(.L_x_1) ;
"""
    insns = disasm.parse_sass(listing)
    assert {(lp.start, lp.end) for lp in disasm.find_loops(insns)} == {(0x0, 0x40), (0x10, 0xa0)}
    hot = disasm.hot_loop(insns)
    assert (hot.start, hot.end) == (0x0, 0x40)


def test_wgmma_hot_loop_is_the_hgmma_k_loop():
    h = _inspect("wgmma_tma", "fp16")["hot_loop"]
    assert h["hgmma"] > 0 and h["ffma"] == 0


def test_no_hot_loop_without_a_loop_doing_math():
    # a bare excerpt, without a function header, parses too
    listing = "        /*0000*/                   IADD3 R1, R1, 0x1, RZ ;\n        /*0010*/               @P0 BRA 0x0 ;\n"
    insns = disasm.parse_sass(listing)
    assert len(disasm.find_loops(insns)) == 1
    assert disasm.hot_loop(insns) is None


@pytest.mark.parametrize(
    "line, cls, width",
    [
        ("LDG.E.128.CONSTANT R44, desc[UR6][R44.64]", ("load", "LDG"), "128"),
        ("LDG.E.64 R4, desc[UR6][R2.64]", ("load", "LDG"), "64"),
        ("LDG.E.U16.CONSTANT R5, desc[UR10][R2.64]", ("load", "LDG"), "16"),
        ("LDS.U.128 R4, [R2]", ("load", "LDS"), "128"),
        ("STS.64 [R3], R8", ("store", "STS"), "64"),
        ("LDGSTS.E.BYPASS.LTC128B.128 [R1], desc[UR4][R2.64]", ("load", "LDGSTS"), "128"),
        ("LDSM.16.M88.4 R92, [R98]", ("load", "LDSM"), "128"),
        ("TLD.LZ RZ, R17, R15, UR6, 0x0, 1D, 0x1", ("load", "TEX"), "32"),
        ("TLD.LZ R88, R86, R86, UR6, 0x0, 1D", ("load", "TEX"), "128"),
        ("STL [R1+0x4], R2", ("store", "STL"), "32"),
        ("HMMA.16816.F32 R64, R92.reuse, R40, R64", ("math", "hmma"), None),
        ("HGMMA.64x128x16.F32 R24, gdesc[UR4], R24", ("math", "hgmma"), None),
        ("FFMA R1, R2, R3, R4", ("math", "ffma"), None),
        ("HFMA2.MMA R5, -RZ, RZ, 0, 0", ("fp_other", "HFMA2"), None),  # a register move, not math
        ("BAR.SYNC.DEFER_BLOCKING 0x0", ("barrier", "BAR"), None),
        ("DEPBAR.LE SB0, 0x0", ("sync", "DEPBAR"), None),
        ("IMAD.WIDE.U32 R6, R0, UR11, RZ", ("address_arith", "IMAD"), None),
        ("UIADD3 UR4, UR4, 0x8, URZ", ("address_arith", "UIADD3"), None),
        ("BSSY B0, `(.L_x_2)", ("control", "BSSY"), None),
        ("SHFL.IDX PT, R3, R2, R0, 0x1f", ("other", "SHFL"), None),
        ("NOP", ("nop", "NOP"), None),
    ],
)
def test_instructions_are_classified_by_kind_and_width(line, cls, width):
    op, _, operands = line.partition(" ")
    insn = disasm.Instruction(0, op, operands)
    assert disasm.classify(insn) == cls
    if width:
        assert disasm.access_width(insn) == width


# ---- every rung, compiled for sm_90a ------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _inspect(slug: str, dtype: str | None = None, config: str | None = None, arch: str = "sm_90a") -> dict:
    return inspect_rung(slug, dtype=dtype, arch=arch, config=config)


RUNG_DTYPES = [(r.slug, d) for r in kernels() for d in r.dtypes]


def _ptxas_registers(slug, dtype):
    import re

    from gemmlab.core.variant import Variant

    log = Variant.make(slug, dtype, b_col=get(slug).k_major).compile("sm_90a").log   # rung 22: K-major B
    return int(re.search(r"Used (\d+) registers", log).group(1))


@pytest.mark.parametrize("slug, dtype", RUNG_DTYPES, ids=[f"{s}-{d}" for s, d in RUNG_DTYPES])
def test_inspect_reports_resources_occupancy_and_hot_loop_for_every_rung(slug, dtype):
    info = _inspect(slug, dtype)
    rung = get(slug)
    assert json.loads(json.dumps(info)) == info
    assert (info["rung"], info["dtype"], info["arch"]) == (slug, dtype, "sm_90a")
    r = info["resources"]
    # cuobjdump's register count agrees with ptxas's own report in the compile log
    assert r["registers"] == _ptxas_registers(slug, dtype)
    assert (r["spill_stores"], r["spill_loads"]) == (0, 0)
    assert r["shared_static"] >= 0 and r["local"] >= 0
    assert r["shared_dynamic"] == rung.smem(rung.config())  # what the launch will give each block
    o = info["occupancy"]
    assert info["threads_per_block"] == rung.threads(rung.config())
    assert o["fits"] and o["blocks_per_sm"] >= 1 and 0 < o["occupancy"] <= 1
    assert o["limits"][o["limiter"]] == o["blocks_per_sm"] == min(o["limits"].values())
    h = info["hot_loop"]
    assert h is not None and h["math"] > 0 and h["start"] <= h["end"]
    classes = ("math", "fp_other", "load_instructions", "store_instructions", "barriers", "sync", "address_arith",
               "control", "other")
    assert sum(h[c] for c in classes) == h["n_instructions"]
    assert sum(sum(d.values()) for d in h["loads"].values()) == h["load_instructions"]
    assert info["ptx_lines"] > 0 and info["sass_lines"] >= h["n_instructions"]


def test_default_dtype_is_the_rungs_first():
    assert _inspect("wmma")["dtype"] == get("wmma").dtypes[0]


def test_naive_hot_loop_has_a_32bit_global_load_per_ffma():
    h = _inspect("naive")["hot_loop"]
    assert h["ffma"] > 0
    assert h["loads"]["LDG"]["32"] >= h["ffma"]
    assert h["shared_loads"] == 0 and h["barriers"] == 0


VECTOR_RUNGS = [r.slug for r in kernels() if "LDS.128" in r.sass_claims]


@pytest.mark.parametrize("slug", VECTOR_RUNGS)
def test_vectorized_rungs_hot_loop_reads_shared_memory_128_bits_wide(slug):
    h = _inspect(slug)["hot_loop"]
    assert h["loads"]["LDS"]["128"] > 0
    assert h["loads"]["LDS"]["128"] >= h["loads"]["LDS"]["32"]


@pytest.mark.parametrize("dtype", get("wmma").dtypes)
def test_wmma_hot_loop_runs_on_tensor_cores(dtype):
    h = _inspect("wmma", dtype)["hot_loop"]
    assert h["hmma"] > 0 and h["ffma"] == 0


TEXTURE_RUNGS = [r.slug for r in kernels() if r.textures]


@pytest.mark.parametrize("slug", TEXTURE_RUNGS)
def test_texture_rungs_hot_loop_fetches_through_the_texture_path(slug):
    h = _inspect(slug)["hot_loop"]
    assert h["texture_loads"] > 0 and sum(h["loads"]["LDG"].values()) == 0


def test_ffma_share_grows_from_naive_to_the_128x128_blocked_rung():
    share = {s: _inspect(s)["hot_loop"]["ffma_share"] for s in ("naive", "tile_1d", "tile_2d", "blocked")}
    assert share["naive"] < share["tile_1d"] < share["tile_2d"] <= share["blocked"], share
    assert share["blocked"] >= 0.8, share


@pytest.mark.parametrize("preset, figure", [("128x128", 16 / 17), ("64x64", 8 / 9)])
def test_blocked_hot_loop_reproduces_seed_000_ffma_per_shared_load_figures(preset, figure):
    # seed 000: 64 FFMA per 4 LDS.128 (8x8 per thread) -> 16/17; 16 per 2 (4x4) -> 8/9
    h = _inspect("blocked", config=preset)["hot_loop"]
    assert h["ffma_lds_share"] == pytest.approx(figure, abs=0.01), h["ffma_lds_share"]


def test_nvdisasm_and_cuobjdump_listings_give_the_same_hot_loop():
    from gemmlab.core.variant import Variant

    ck = Variant.make("blocked", "fp32").compile("sm_90a")
    a = analyze_sass(disasm.sass_nvdisasm(ck.cubin))
    b = analyze_sass(disasm.sass(ck.cubin))
    assert a["hot_loop"] == b["hot_loop"] and a["loops"] == b["loops"]


def test_inspect_targets_other_architectures():
    info = _inspect("naive", arch="sm_80")
    assert info["arch"] == "sm_80" and info["occupancy"]["arch"] == "sm_80"
    with pytest.raises(ValueError, match="sm_80"):
        inspect_rung("wmma", arch="sm_75")


# ---- CLI ---------------------------------------------------------------------------------------
def _cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gemmlab")
    register(p.add_subparsers())
    args = p.parse_args(["inspect", *argv])
    return args.func(args)


def test_cli_json_is_the_inspect_dict(capsys):
    assert _cli(["naive", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == _inspect("naive")


def test_cli_prints_ptx_and_sass(capsys):
    assert _cli(["naive", "--ptx"]) == 0
    assert "fma.rn.f32" in capsys.readouterr().out
    assert _cli(["naive", "--sass"]) == 0
    out = capsys.readouterr().out
    assert "FFMA" in out and "LDG.E" in out


def test_cli_default_table_names_the_limiter_and_the_hot_loop_mix(capsys):
    assert _cli(["blocked"]) == 0
    out = capsys.readouterr().out
    assert "registers" in out and "hot loop" in out and "LDS" in out and "FFMA share" in out


def test_cli_config_takes_presets_and_key_values(capsys):
    assert _cli(["blocked", "--config", "64x64", "--json"]) == 0
    cfg = json.loads(capsys.readouterr().out)["config"]
    assert (cfg["BM"], cfg["BN"], cfg["TM"]) == (64, 64, 4)
    assert _cli(["tile_2d", "--config", "BM=64", "--config", "BN=64", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["config"]["BM"], info["config"]["BN"], info["threads_per_block"]) == (64, 64, 64)
    with pytest.raises(ValueError, match="preset"):
        _cli(["naive", "--config", "64x64"])
    with pytest.raises(ValueError, match="parameter"):
        _cli(["naive", "--config", "XX=3"])


def test_wmma_interior_path_has_only_its_vector_loads_and_the_edge_code_its_16_bit_ones():
    h = _inspect("wmma", "fp16")["hot_loop"]
    assert h["loads"]["LDG"]["16"] == 0 and h["loads"]["LDG"]["128"] > 0
    assert h["edge"]["loads"]["LDG"]["16"] > 0
    assert h["n_instructions"] + h["edge"]["n_instructions"] == h["body_instructions"]


def test_sub_word_accesses_show_their_width():
    insn = disasm.Instruction(0x10, "LDG.E.U16.CONSTANT", "R1, desc[UR4][R2.64]", "@P4")
    assert disasm.access_width(insn) == "16"
    assert disasm.access_width(disasm.Instruction(0x20, "STS.U8", "[R1], R2")) == "8"


def test_the_interior_path_takes_the_vector_branch_and_skips_the_scalar_fallback():
    sass = """
        /*0000*/                   FFMA R1, R2, R3, R1 ;
        /*0010*/               @P0 BRA 0x50 ;
        /*0020*/                   LDG.E.U16 R4, desc[UR4][R6.64] ;
        /*0030*/                   LDG.E.U16 R5, desc[UR4][R8.64] ;
        /*0040*/                   BRA 0x60 ;
        /*0050*/                   LDG.E.128 R4, desc[UR4][R6.64] ;
        /*0060*/                   FFMA R1, R4, R5, R1 ;
        /*0070*/               @P1 BRA 0x0 ;
    """
    insns = disasm.parse_sass(sass)
    lp = disasm.find_loops(insns)[0]
    assert [i.offset for i in hotpath.hot_path(insns, lp)] == [0x0, 0x10, 0x50, 0x60, 0x70]


def test_sass_view_marks_the_interior_path_and_the_loop_bounds(capsys):
    from gemmlab.cli import main

    assert main(["inspect", "wmma", "--dtype", "fp16", "--sass"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("// hot loop")
    assert any(line.startswith(">") and "loop start" in line for line in out)
    assert any(line.startswith(">") and "back-edge" in line for line in out)
    assert any(line.startswith(".") and "LDG.E.U16" in line for line in out)
    assert not any("LDG.E.U16" in line for line in out if line.startswith(">"))


def test_inspect_all_shows_every_rung_side_by_side(capsys):
    from gemmlab.cli import main

    assert main(["inspect", "--all"]) == 0
    out = capsys.readouterr().out
    for r in kernels():
        assert r.slug in out
    assert "LDSM 12x128b" in out and "HMMA" in out


def test_static_shared_memory_is_the_kernels_own_and_the_driver_reservation_is_counted_once():
    info = _inspect("smem", "fp32")
    assert info["resources"]["shared_static"] == 2 * 32 * 32 * 4   # As[32][32] + Bs[32][32]
    assert info["occupancy"]["smem_per_block_allocated"] == 2 * 32 * 32 * 4 + 1024  # Nsight Compute: 9216


@pytest.mark.parametrize("dtype", get("mma_sync").dtypes)
def test_mma_sync_hot_loop_runs_hmma_fed_by_ldmatrix_and_cp_async(dtype):
    h = _inspect("mma_sync", dtype)["hot_loop"]
    assert h["hmma"] > 0 and h["ffma"] == 0
    assert h["loads"]["LDSM"]["128"] > 0 and h["loads"]["LDGSTS"]["128"] > 0
    # the copies go global -> shared: no register round trip (LDG + STS) in the loop
    assert sum(h["loads"]["LDG"].values()) == 0 and sum(h["stores"]["STS"].values()) == 0


def test_inspect_mma_sync_for_sm_80_shows_hmma_16816_ldmatrix_and_cp_async(capsys):
    from gemmlab.cli import main

    assert main(["inspect", "mma_sync", "--arch", "sm_80", "--sass"]) == 0
    out = capsys.readouterr().out
    for opcode in ("HMMA.16816", "LDSM", "LDGSTS"):
        assert opcode in out, opcode
    assert main(["inspect", "mma_sync", "--arch", "sm_80"]) == 0
    table = capsys.readouterr().out
    assert "sm_80" in table and "HMMA" in table and "LDSM" in table and "LDGSTS" in table


# ---- control codes (Volta and newer: the second 64-bit word of each instruction) -----------------
CONTROL = """
        /*0000*/                   FFMA R107, R72, R62.reuse, R107 ;      /* 0x0000003e486b7223 */
                                                                          /* 0x086fe2000000006b */
        /*0010*/                   LDS.128 R4, [R88+0x10] ;               /* 0x0000100058047984 */
                                                                          /* 0x000e680000000c00 */
        /*0020*/                   ISETP.GE.AND P1, PT, R9, 0x1, PT ;     /* 0x000000010900780c */
                                                                          /* 0x000fda0003f26270 */
        /*0030*/               @P1 BRA 0x0 ;                              /* 0xfffffffc00f01947 */
                                                                          /* 0x000fea000383ffff */
"""


def test_control_codes_give_each_instructions_stall_cycles_and_reuse_flags():
    insns = disasm.parse_sass(CONTROL)
    assert [i.stall for i in insns] == [1, 4, 13, 5]
    assert insns[0].reuse == 0b10          # R62.reuse: the second source operand
    assert insns[1].reuse == 0


def test_issue_schedule_sums_the_stalls_of_one_trip():
    insns = disasm.parse_sass(CONTROL)
    s = hotpath.issue_schedule(insns)
    assert s["issue_cycles"] == 1 + 4 + 13 + 5
    assert s["fixed_stall_cycles"] == 23 - 4
    assert s["stalls_by_opcode"] == {"ISETP": 12, "BRA": 4, "LDS": 3}
    assert s["math_per_issue_cycle"] == round(1 / 23, 4) and s["reused_operands"] == 1


def test_a_listing_without_encodings_has_no_schedule():
    insns = disasm.parse_sass(NVDISASM)
    assert all(i.control is None for i in insns) and hotpath.issue_schedule(insns) is None


def test_maxwell_control_words_are_not_read_as_an_instructions_second_word():
    listing = """
                                                                          /* 0x001c4400fe0007f6 */
        /*0008*/                   MOV R1, c[0x0][0x20] ;                 /* 0x4c98078000870001 */
        /*0010*/                   S2R R0, SR_TID.X ;                     /* 0xf0c8000002170000 */
        /*0018*/                   FFMA R2, R0, R0, R2 ;                  /* 0x5980000000070202 */
                                                                          /* 0x001fc400fe2007f6 */
        /*0028*/                   EXIT ;                                 /* 0xe30000000007000f */
    """
    assert all(i.control is None for i in disasm.parse_sass(listing))


def test_the_interior_path_skips_edge_copies_taken_beside_the_predicated_interior_ones():
    """Rung 18's SPREAD loop: a branch at the tile's top jumps over the edge copies (128-bit, with
    zero fill) to the predicated interior copies both paths run; the interior trip is the shorter
    one, though the edge path holds more 128-bit copies."""
    sass = """
        /*0000*/               @P1 BRA 0x40 ;
        /*0010*/                   LDGSTS.E.BYPASS.128.ZFILL [R4], desc[UR8][R6.64], P2 ;
        /*0020*/                   LDGSTS.E.BYPASS.128.ZFILL [R4+0x10], desc[UR8][R8.64], P3 ;
        /*0030*/                   BRA 0x40 ;
        /*0040*/               @P0 LDGSTS.E.BYPASS.128 [R4], desc[UR8][R10.64] ;
        /*0050*/                   FFMA R1, R2, R3, R1 ;
        /*0060*/                   LDS.128 R2, [R5] ;
        /*0070*/               @P4 BRA 0x0 ;
    """
    insns = disasm.parse_sass(sass)
    lp = disasm.find_loops(insns)[0]
    assert [i.offset for i in hotpath.hot_path(insns, lp)] == [0x0, 0x40, 0x50, 0x60, 0x70]


def test_the_interior_path_keeps_the_prefetch_the_last_trips_skip():
    sass = """
        /*0000*/                   FFMA R1, R2, R3, R1 ;
        /*0010*/               @P1 BRA 0x30 ;
        /*0020*/                   LDG.E.128 R4, desc[UR4][R6.64] ;
        /*0030*/                   LDS.128 R2, [R5] ;
        /*0040*/               @P4 BRA 0x0 ;
    """
    insns = disasm.parse_sass(sass)
    lp = disasm.find_loops(insns)[0]
    assert [i.offset for i in hotpath.hot_path(insns, lp)] == [0x0, 0x10, 0x20, 0x30, 0x40]


def test_inspect_reports_the_issue_cycles_of_the_hot_loop():
    h = _inspect("async_simt", "fp32")["hot_loop"]
    s = h["schedule"]
    assert s["issue_cycles"] == h["n_instructions"] + s["fixed_stall_cycles"] + h.get("nops", 0)
    assert 0 < s["math_per_issue_cycle"] <= h["math"] / h["n_instructions"]


def test_cli_table_shows_the_issue_cycles_from_the_control_codes(capsys):
    from gemmlab.cli import main

    assert main(["inspect", "async_simt"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "issue (control codes):" in out and "fixed-latency stalls" in out


def test_ffma_operand_reads_count_three_register_reads_and_their_bank_collisions():
    """The first FFMA reads three registers in three banks (R5, R62, R3: 1, 2, 3 mod 4); the second
    takes R62 from the reuse cache (flagged in the first, same slot); the third follows an IADD3
    that replaced the cache, so it reads three registers, two of them in bank 0 (R4, R8)."""
    sass = """
        /*0000*/                   FFMA R1, R5, R62.reuse, R3 ;           /* 0x0000003e05017223 */
                                                                          /* 0x080fe20000000003 */
        /*0010*/                   FFMA R2, R6, R62, R2 ;                 /* 0x0000003e06027223 */
                                                                          /* 0x000fe20000000002 */
        /*0020*/                   IADD3 R9, R9, 0x1, RZ ;                /* 0x0000000109097810 */
                                                                          /* 0x000fe20007ffe0ff */
        /*0030*/                   FFMA R3, R4, R62, R8 ;                 /* 0x0000003e04037223 */
                                                                          /* 0x000fe20000000008 */
    """
    r = hotpath.ffma_operand_reads(disasm.parse_sass(sass))
    assert r == {"ffma_three_reads": 2, "ffma_bank_collisions": 1}
