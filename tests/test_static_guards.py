"""Static guards on what makes each rung fast, read from the cubin without a GPU:
every rung compiles for sm_90a and sm_80 (those of them it runs on) in every precision it
provides, never spills or uses local memory (any layout, with and without vector access), and its
SASS contains the instructions the rung claims (128-bit loads for the vectorized rungs, HMMA or
HGMMA for the tensor-core rungs, TEX for textures)."""

import itertools
import re
from dataclasses import replace

import pytest

from gemmlab.analysis import disasm

from gemmlab import kernels
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.families.hopper import batched_config
from gemmlab.core.families.simt import SIMT_BATCHED_RATE
from gemmlab.core.precision import applies
from gemmlab.core.registry import get
from gemmlab.core.variant import Variant

ARCHS = ("sm_90a", "sm_80")
TF32_TILE = {"BN": 128, "STAGES": 3}   # rung 22's tile of its 3xtf32 test, in tf32 and 3xtf32
SPREAD_64x256 = "BM=64,BN=256,BK=8,WM=64,WN=64,TM=8,TN=16,STAGES=3,SPREAD=1"   # rung 18's SPREAD loop at 64x256
CASES = [(r.slug, dt) for r in kernels() for dt in r.dtypes]
# every precision a rung provides for a dtype (the exact one for most; tf32 and 3xtf32 for rung
# 20), on every architecture of ARCHS the rung runs on
PRECISION_CASES = [(r.slug, dt, p, arch) for r in kernels() for dt in r.dtypes for p in r.precisions if applies(p, dt)
                   for arch in ARCHS if r.runs_on(arch)]
# (A column-major, B column-major, 16-byte access, C column-major): C column-major only where a
# rung reads A from registers (rung 22 in tf32: the transposed problem of row-major A and B)
LAYOUTS = list(itertools.product((False, True), (False, True), (True, False), (False, True)))


def _batched_variants() -> list[Variant]:
    """A batch in one launch (GL_BATCHED): rung 21 with each tile its batched rule chooses (row-major
    operands, a broadcast A), the 128-column one in every layout with and without 16-byte access;
    rung 18 with each preset its batched rule chooses from, and its default without 16-byte access."""
    tiles = [batched_config(*shape, 132)[0] for shape in ((2048, 2048, 2048, 8), (512, 512, 64, 32), (512, 64, 512, 32))]
    out = [replace(Variant.make("wgmma_ws", "bf16", config=cfg), batch=(False, True)) for cfg in tiles]
    for (a_col, b_col), vec in itertools.product(((False, False), (True, False), (False, True), (True, True)),
                                                 (True, False)):
        out.append(replace(Variant.make("wgmma_ws", "fp16", a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec,
                                        config=tiles[1]), batch=(True, True)))
    out += [replace(Variant.make("async_simt", "fp32", config=name), batch=(True, True)) for name in SIMT_BATCHED_RATE]
    out.append(replace(Variant.make("async_simt", "fp32", vec_a=False, vec_b=False, vec_c=False), batch=(True, True)))
    return out


def _output_variants() -> list[Variant]:
    """Rungs 21 and 24 writing a C of another type than their operands (``Rung.outputs``, GL_C_DTYPE):
    rung 21 writing FP32 from each 16-bit type (ws_epi32.cuh) with its default tile, the 128x128
    preset, the 128x64 tile the batched rule takes, stream-K, no TMA store, every operand layout with
    and without 16-byte access, batched, and fused, and the other 16-bit type from each
    (ws_epi16.cuh); rung 24 writing FP32."""
    out = []
    for dt, cfg in itertools.product(("bf16", "fp16"), (None, "128x128", batched_config(512, 512, 64, 32, 132)[0],
                                                         "STREAMK=1", "EPI_TMA=0")):
        out.append(Variant.make("wgmma_ws", dt, config=cfg, epilogue=Epilogue(out="fp32")))
    for (a_col, b_col), vec in itertools.product(((True, False), (False, True), (True, True)), (True, False)):
        out.append(Variant.make("wgmma_ws", "bf16", a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec,
                                epilogue=Epilogue(out="fp32")))
    out.append(replace(Variant.make("wgmma_ws", "bf16", epilogue=Epilogue(out="fp32")), batch=(True, True)))
    out.append(Variant.make("wgmma_ws", "fp16", epilogue=Epilogue("gelu_tanh", "fp32", out="fp32")))
    out += [Variant.make("wgmma_ws", dt, epilogue=Epilogue(out=o)) for dt, o in (("bf16", "fp16"), ("fp16", "bf16"))]
    # the decode rung's scalar stores: its M-thin preset, its cluster split and its workspace split
    out += [Variant.make("decode", "bf16", config=cfg, epilogue=Epilogue(out="fp32"))
            for cfg in ("m8", "SPLITK=4,SKCLUSTER=1", "SPLITK=4")]
    return out


def _staged_variants() -> list[Variant]:
    """Rung 17 staging the 4-byte words of operands without 16-byte access (both A and B, C without
    it too) with the small tiles the selection menu runs it at beside its default (the 64x64 preset,
    the 6-stage 64x64 tile; the default's guard above covers the larger tiles' registers), in every
    layout, whole and with a K split (whose variant ptxas once held to 96 registers and spilled)."""
    from gemmlab.core.selection import MMA_DEEP

    rung = get("mma_sync")
    out = []
    for cfg, (a_col, b_col), split in itertools.product(
            ("64x64", MMA_DEEP), itertools.product((False, True), repeat=2), (1, 2)):
        v = Variant.make(rung, "fp16", a_col=a_col, b_col=b_col, vec_a=False, vec_b=False, vec_c=False,
                         config=dict(rung.config(cfg), SPLITK=split))
        out.append(v.for_geometry(rung.launch(1000, 1000, v.cfg, 4000, 132), 1000, 1000, 4000) if split > 1 else v)
    return out


def _guarded_variants() -> dict[str, list[Variant]]:
    """Per architecture, every variant the tests below compile."""
    out: dict[str, list[Variant]] = {arch: [] for arch in ARCHS}
    for slug, dtype, precision, arch in PRECISION_CASES:
        for a_col, b_col, vec, c_col in LAYOUTS:
            if get(slug).compiles(a_col, b_col, vec, vec, precision, c_col):
                out[arch].append(Variant.make(slug, dtype, a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec,
                                              precision=precision, c_col=c_col))
    for r in kernels():
        for dt, (a_col, b_col) in itertools.product(r.dtypes, itertools.product((False, True), (False, True))):
            if r.runs_on("sm_90a") and r.compiles(a_col, b_col, True, True):
                out["sm_90a"].append(Variant.make(r.slug, dt, a_col=a_col, b_col=b_col, tall=True))
        for preset, p in _presets(r):
            if r.runs_on("sm_90a"):
                out["sm_90a"].append(Variant.make(r.slug, r.dtypes[0], b_col=r.k_major, config=preset, precision=p))
                if r.reads_register_a(p):   # rung 22's register-A path, as a row-major problem runs it
                    out["sm_90a"].append(Variant.make(r.slug, r.dtypes[0], a_col=True, b_col=True, c_col=True,
                                                      config=preset, precision=p))
    # and the other variants the SASS tests at the end read (one missing here is compiled by its test,
    # on one CPU, at the end of the run: the cu12 leg's pytest took 146 s so, 142 s with these here)
    out["sm_90a"] += [Variant.make("wgmma_ws", "fp16", config="EPI_TMA=0"), Variant.make("wgmma_ws", "fp16", vec_c=False),
                      Variant.make("wgmma_ws", "fp16", config="DEFER=1,EPI_TMA=0")]
    out["sm_90a"] += [Variant.make("wgmma_ws", "fp16", a_col=a_col, b_col=b_col, config="DEFER=1")
                      for a_col, b_col in ((False, False), (True, False), (False, True))]
    out["sm_90a"] += [Variant.make("wgmma_tf32", "fp32", b_col=True, config=TF32_TILE, precision=p) for p in ("tf32", "3xtf32")]
    out["sm_90a"] += [Variant.make("wgmma_tf32", "fp32", b_col=True, config="EPI_TMA=0", precision="tf32")]
    out["sm_90a"] += [Variant.make("async_simt", "fp32", a_col=a_col, config=SPREAD_64x256) for a_col in (False, True)]
    out["sm_90a"] += [Variant.make("async_simt", "fp32", config=c) for c in ("SPREAD=0,SNAKE=0", "SNAKE=0")]
    out["sm_90a"] += _batched_variants() + _output_variants() + _staged_variants()
    return out


def _presets(r):
    """(preset, precision) of every precision the rung computes its first dtype in, with that
    precision's presets (rung 22's 3xtf32 has smaller ones)."""
    return [(preset, p) for p in r.precisions if applies(p, r.dtypes[0]) for preset in r.presets_for(p)]


@pytest.fixture(scope="module", autouse=True)
def _compiled_ahead(compile_ahead):
    compile_ahead(_guarded_variants(), len(PRECISION_CASES) // 2)


@pytest.mark.parametrize("slug,dtype,precision,arch", PRECISION_CASES)
def test_rung_compiles_without_spills_or_local_memory_in_every_layout(slug, dtype, precision, arch):
    for a_col, b_col, vec, c_col in LAYOUTS:
        if not get(slug).compiles(a_col, b_col, vec, vec, precision, c_col):   # a k_major rung: the plan packs these
            continue
        v = Variant.make(slug, dtype, a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec, precision=precision,
                         c_col=c_col)
        ck = v.compile(arch)
        res = disasm.resource_usage(ck.cubin, ck.log)
        assert res.local == 0, f"{v.describe()} on {arch}: {res.local} bytes of local memory/stack (spills)"
        assert (res.spill_stores, res.spill_loads) == (0, 0), f"{v.describe()} on {arch}: ptxas reports spills"


@pytest.mark.parametrize("slug,dtype", CASES)
def test_tall_grid_variant_compiles_without_spills_in_every_layout(slug, dtype):
    """The GL_TALL variant (row tiles continued along grid.z, for M > 65535 x BM) stays spill-free."""
    for a_col, b_col in itertools.product((False, True), (False, True)):
        if not get(slug).compiles(a_col, b_col, True, True):
            continue
        v = Variant.make(slug, dtype, a_col=a_col, b_col=b_col, tall=True)
        ck = v.compile("sm_90a")
        res = disasm.resource_usage(ck.cubin, ck.log)
        assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{v.describe()} spills"


@pytest.mark.parametrize("variant", _batched_variants(), ids=lambda v: v.describe())
def test_batched_variant_compiles_without_spills_or_local_memory(variant):
    ck = variant.compile("sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{variant.describe()} spills"


@pytest.mark.parametrize("variant", _staged_variants(), ids=lambda v: v.describe())
def test_mma_sync_stages_operands_without_16_byte_access_without_spills_at_the_menus_small_tiles(variant):
    ck = variant.compile("sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{variant.describe()}: spills"
    assert variant.smem > variant.rung.smem_bytes(variant.cfg), "the staging words are part of its shared memory"


@pytest.mark.parametrize("variant", _output_variants(), ids=lambda v: v.describe())
def test_output_type_variant_compiles_without_spills_or_local_memory(variant):
    ck = variant.compile("sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{variant.describe()} spills"


def test_wgmma_ws_writes_fp32_from_16_bit_operands_through_the_fp32_epilogue_part():
    """An FP32 C: the TMA store from 8-byte st.shared (ws_epi32.cuh's chunks), no stmatrix (the 16-bit
    part's staging) and no rounding to 16 bits; without the TMA store, 8-byte stores to C."""
    sass = disasm.sass(Variant.make("wgmma_ws", "bf16", epilogue=Epilogue(out="fp32")).compile("sm_90a").cubin)
    assert all(disasm.has_opcode(sass, op) for op in ("HGMMA", "UTMASTG", "STS.64"))
    assert not disasm.has_opcode(sass, "STSM") and "F2FP" not in sass
    direct = disasm.sass(Variant.make("wgmma_ws", "fp16", config="EPI_TMA=0", epilogue=Epilogue(out="fp32"))
                         .compile("sm_90a").cubin)
    assert disasm.has_opcode(direct, "STG.E.64") and not disasm.has_opcode(direct, "UTMASTG")


@pytest.mark.parametrize("dtype,out,rounding", [("bf16", "fp16", "F2FP.F16"), ("fp16", "bf16", "F2FP.BF16")])
def test_wgmma_ws_rounds_to_the_output_type_not_the_operands(dtype, out, rounding):
    """The other 16-bit type: the staged part (stmatrix, TMA store), rounding to C's type only."""
    sass = disasm.sass(Variant.make("wgmma_ws", dtype, epilogue=Epilogue(out=out)).compile("sm_90a").cubin)
    assert all(disasm.has_opcode(sass, op) for op in ("HGMMA", "STSM", "UTMASTG"))
    operands = "F2FP.BF16" if rounding == "F2FP.F16" else "F2FP.F16"
    assert rounding in sass and operands + "." not in sass


def test_batched_wgmma_ws_reads_a_varying_operand_and_stores_c_through_3d_maps():
    """An element's tiles come by the third coordinate of 3-D maps; a broadcast B keeps its 2-D map."""
    cfg = batched_config(512, 512, 64, 32, 132)[0]
    sass = disasm.sass(replace(Variant.make("wgmma_ws", "bf16", config=cfg), batch=(True, False)).compile("sm_90a").cubin)
    assert all(disasm.has_opcode(sass, op) for op in ("UTMALDG.3D", "UTMALDG.2D", "UTMASTG.3D", "HGMMA"))
    plain = disasm.sass(Variant.make("wgmma_ws", "bf16", config=cfg).compile("sm_90a").cubin)
    assert not disasm.has_opcode(plain, "UTMALDG.3D") and not disasm.has_opcode(plain, "UTMASTG.3D")


def test_batched_async_simt_takes_its_element_from_grid_z():
    assert "SR_CTAID.Z" in disasm.sass(replace(Variant.make("async_simt", "fp32"), batch=(True, True)).compile("sm_90a").cubin)


def test_ordinary_variant_reads_no_grid_z():
    """Below grid.y's limit a rung runs the code it always ran: no blockIdx.z, no gridDim.y."""
    sass = disasm.sass(Variant.make("warp_tiling", "fp32").compile("sm_90a").cubin)
    tall = disasm.sass(Variant.make("warp_tiling", "fp32", tall=True).compile("sm_90a").cubin)
    assert "SR_CTAID.Z" not in sass and "SR_CTAID.Z" in tall


@pytest.mark.parametrize("slug,dtype,precision", [(r.slug, r.dtypes[0], p) for r in kernels() if r.sass_claims
                                                   for p in r.precisions if applies(p, r.dtypes[0])])
def test_rung_sass_contains_the_instructions_it_claims(slug, dtype, precision):
    v = Variant.make(slug, dtype, b_col=get(slug).k_major, precision=precision)   # rung 22 reads column-major B
    sass = disasm.sass(v.compile("sm_90a").cubin)
    missing = [c for c in v.rung.sass_claims if not disasm.has_opcode(sass, c)]
    assert not missing, f"{slug}: SASS lacks {missing}"


@pytest.mark.parametrize("config", [{"CLUSTER": 2}, {"CLUSTER": 2, "STREAMK": 1}], ids=["cluster", "cluster-streamk"])
def test_block_scales_in_clusters_add_a_k_tile_while_the_next_ones_wgmmas_run(config):
    # rung 25's pipelined block-scaled mainloop (kernels/mainloop.cuh) waits for all but the newest
    # commit group (DEPBAR.LE gsb0, 0x1); ptxas did not serialize its wgmmas (C7514: it would wait
    # after every one) and spilled nothing, under either NVRTC (CI's cu12 leg runs this file)
    v = Variant.make("wgmma_fp8", "fp8", b_col=True, precision="fp8", config=config,
                     epilogue=Epilogue(scale="block", out="bf16"))
    ck = v.compile("sm_90a")
    sass = disasm.sass_listing(ck.cubin)
    assert ck.spill_bytes == 0 and "C7514" not in ck.log
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass and len(re.findall(r"\bFFMA\b", sass)) >= 64


@pytest.mark.parametrize("slug", [r.slug for r in kernels() if r.presets])
def test_rung_presets_compile_without_local_memory(slug):
    r = next(k for k in kernels() if k.slug == slug)
    for preset, precision in _presets(r):
        ck = Variant.make(slug, r.dtypes[0], b_col=r.k_major, config=preset, precision=precision).compile("sm_90a")
        res = disasm.resource_usage(ck.cubin, ck.log)
        assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{slug}[{preset}, {precision}] spills"


@pytest.mark.parametrize("vec", (True, False), ids=("tma", "thread_copy"))
def test_warp_specialized_register_split_takes_effect_and_fits_the_registers_the_block_holds(vec):
    """Rung 21's setmaxnreg: ptxas applies it (no warning C7508), the consumers get more registers
    than a thread has at entry and the producer fewer, and the block's registers at launch
    (ptxas's count per thread x 384) cover the producer's share plus the two consumer warpgroups'
    (otherwise the consumers' setmaxnreg.inc would wait forever)."""
    v = Variant.make("wgmma_ws", "fp16", vec_a=vec, vec_b=vec, vec_c=vec)
    ck = v.compile("sm_90a")
    assert "C7508" not in ck.log and "setmaxnreg" not in ck.log, ck.log
    split = dict(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ck.ptx))
    producer, consumer = int(split["dec"]), int(split["inc"])
    used = int(re.search(r"Used (\d+) registers", ck.log).group(1))
    assert producer < used < consumer
    assert 128 * (producer + 2 * consumer) <= used * v.rung.threads(v.cfg)


def test_the_tma_store_epilogue_is_compiled_only_where_it_can_run():
    """Rung 21's UTMASTG: in its default (EPI_TMA=1, a C with 16-byte access); not with EPI_TMA=0
    (the staged stores only), nor for a C without 16-byte access (no tensor map describes it)."""
    def stores(**kw):
        return disasm.has_opcode(disasm.sass(Variant.make("wgmma_ws", "fp16", **kw).compile("sm_90a").cubin), "UTMASTG")

    assert stores() and not stores(config="EPI_TMA=0") and not stores(vec_c=False)
    assert stores(config="DEFER=1") and not stores(config="DEFER=1,EPI_TMA=0")


def test_wgmma_tf32_stores_its_tile_in_chunks_of_two_boxes_through_its_staging():
    """Rung 22's EPI_TMA (both C layouts of tf32, and 3xtf32): per 64 x 32 chunk of a warpgroup's
    tile, 8 STS.64 into the staging and two UTMASTG (its 32-row boxes), between two named
    barriers of the warpgroup; the 8-byte stores from the accumulators stay for beta != 0.
    EPI_TMA=0 has no staging."""
    def ops(**kw):
        text = disasm.sass_nvdisasm(Variant.make("wgmma_tf32", "fp32", b_col=True, **kw).compile("sm_90a").cubin)
        return {op: len(re.findall(rf"\b{re.escape(op)}\b", text)) for op in ("UTMASTG", "STS.64", "BAR.SYNC", "STG.E.64")}

    chunks = 128 // 64 * 256 // 32 // 2      # a warpgroup's 64 x 256 at the default tile: 8 chunks
    for kw in (dict(precision="tf32"), dict(a_col=True, c_col=True, precision="tf32")):
        n = ops(**kw)
        assert (n["UTMASTG"], n["STS.64"]) == (2 * chunks, 8 * chunks) and n["BAR.SYNC"] >= 2 * chunks, (kw, n)
        assert n["STG.E.64"] > 0, (kw, n)
    assert ops(precision="3xtf32", config=TF32_TILE)["UTMASTG"] == 2 * 4   # 64 x 128 per warpgroup: 4 chunks
    assert ops(precision="tf32", config="EPI_TMA=0")["UTMASTG"] == ops(precision="tf32", config="EPI_TMA=0")["STS.64"] == 0


def test_opcode_claims_match_modifiers_in_order_but_not_other_opcodes():
    text = "        /*0100*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;\n" \
           "        /*0110*/                   TEXDEPBAR 0x0 ;\n"
    assert disasm.has_opcode(text, "LDG.E.128")
    assert not disasm.has_opcode(text, "LDS.128")
    assert not disasm.has_opcode(text, "TEX")


def test_ptxas_spill_report_is_read_from_the_compile_log():
    log = ("ptxas info    : Function properties for gemm\n"
           "ptxas         .     24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads\n")
    assert disasm.ptxas_report(log) == {"stack_frame": 24, "spill_stores": 16, "spill_loads": 8}
    log += "ptxas info    : Used 128 registers, used 1 barriers, 16896 bytes smem\n"
    assert disasm.ptxas_report(log)["smem"] == 16896
    assert disasm.ptxas_report("no report here") is None


def test_ptxas_spill_report_of_a_module_of_two_entry_points_counts_the_spills_of_both():
    """Rung 18's STREAMK=1 module holds its whole-tile kernel and its stream-K tail: a spill in
    either is a spill of the variant."""
    log = ("ptxas info    : Function properties for gemm_sk_tail\n"
           "ptxas         .     8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
           "ptxas info    : Function properties for gemm\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    assert disasm.ptxas_report(log) == {"stack_frame": 8, "spill_stores": 8, "spill_loads": 8}


def test_wgmma_tf32_3xtf32_issues_three_wgmmas_per_k8_step_and_loads_both_planes():
    """Rung 22 in 3xtf32 at the same tile as its tf32 variant: three times the HGMMA per k tile
    (a_lo*b_hi, a_hi*b_lo, a_hi*b_hi), twice the TMA boxes (big and small planes of A and B), and
    the FP32 adds of the partial sums (BN/2 per thread per k tile: 64 at 128x128)."""
    listing = {p: disasm.sass_nvdisasm(Variant.make("wgmma_tf32", "fp32", b_col=True, config=TF32_TILE, precision=p)
                                       .compile("sm_90a").cubin) for p in ("tf32", "3xtf32")}
    count = {p: {op: len(re.findall(rf"\b{op}\b", t)) for op in ("HGMMA", "UTMALDG", "FADD")} for p, t in listing.items()}
    assert count["3xtf32"]["HGMMA"] == 3 * count["tf32"]["HGMMA"] == 12
    assert count["3xtf32"]["UTMALDG"] == 2 * count["tf32"]["UTMALDG"]
    assert count["3xtf32"]["FADD"] >= 64 > count["tf32"]["FADD"]


def test_wgmma_tf32_register_a_reads_its_fragments_by_lds64_and_feeds_them_to_hgmma():
    """Rung 22's register-A path (column-major A, the transposed problem of row-major A and B): a
    k tile's fragments come by 8-byte LDS (two per k8 step and m64 block: k = t and t + 4, rows
    m and m + 1), every HGMMA takes A from registers (no A descriptor), the two halves of a k tile
    go out as two commit groups each waited with one left in flight, and with C column-major the
    epilogue stores 8 bytes (rows m, m + 1) at a time."""
    v = Variant.make("wgmma_tf32", "fp32", a_col=True, b_col=True, c_col=True, precision="tf32")
    text = disasm.sass_nvdisasm(v.compile("sm_90a").cubin)
    hgmma = re.findall(r"HGMMA\.64x256x8\.F32\.TF32 R\d+, (\S+),", text)
    assert len(hgmma) == 4 and all(re.fullmatch(r"R\d+", a) for a in hgmma), hgmma
    assert len(re.findall(r"\bLDS\.64\b", text)) == 8
    assert len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1", text)) == 2
    assert re.search(r"\bSTG\.E\.64\b", text)
    assert "GL_C_COL" in v.defines() and "GL_C_COL" not in Variant.make("wgmma_tf32", "fp32", b_col=True).defines()


@pytest.mark.parametrize("defer", [0, 1], ids=["at_the_end", "deferred"])
@pytest.mark.parametrize("a_col,b_col", [(False, False), (True, False), (False, True)])
def test_wgmma_ws_builds_its_k_tile_descriptors_in_uniform_registers(a_col, b_col, defer):
    """Rung 21's k-tile loop with 32-bit descriptor words and a warpgroup index ptxas knows is
    warp-uniform (hopper.cuh, GlStageDescs): 4 HGMMA whose descriptors are uniform registers made
    in the loop by uniform adds and moves, no R2UR and no 64-bit IADD3/IMAD.X pairs, 51 instructions
    a trip. With 64-bit descriptors it took 90-95 (Nsight Compute at fp16 4096^3: 27.6 million
    instructions executed against 18.6, h100_profile_wgmma_ws_*streamk0_fp16_4096.json). DEFER=1
    keeps it so (its held tile's writes between runs of the loop; inside it, 69 with R2UR)."""
    from gemmlab.analysis.inspect import analyze_sass, hot_loop_listing

    v = Variant.make("wgmma_ws", "fp16", a_col=a_col, b_col=b_col, config=f"DEFER={defer}")
    text = disasm.sass_nvdisasm(v.compile("sm_90a").cubin)
    hot = analyze_sass(text)["hot_loop"]
    loop = hot_loop_listing(text, hot)
    assert hot["n_instructions"] <= 60, hot["n_instructions"]
    assert len(re.findall(r"HGMMA\.64x256x16\.F32", loop)) == 4
    assert "R2UR" not in loop and "IMAD.X" not in loop and "IADD3.X" not in loop


@pytest.mark.parametrize("config", ["DEFER=1", "DEFER=0", "BM=128,BN=128,BK=64,WM=64,STAGES=5,CLUSTER=1,DEFER=0"])
def test_wgmma_ws_store_twin_is_the_kernel_without_the_staged_epilogue(config):
    """Rung 21's store twin (GL_TMA_STORE_ONLY): the TMA store and no 16-byte stores to C, the
    full build's k-tile loop (no more instructions a trip, as many HGMMA, descriptors in uniform
    registers), and a fraction of its code. The full build's staged epilogue (16 unrolled 16-byte
    stores, each with its guarded scalar fallback) sat between the main loop and the TMA store:
    36 of the 46 KB at 128x128 tiles (benchmarks/NOTES.md, session 22)."""
    from gemmlab.analysis.inspect import analyze_sass, hot_loop_listing

    full = Variant.make("wgmma_ws", "bf16", config=config)
    texts = [disasm.sass_nvdisasm(v.compile("sm_90a").cubin) for v in (full, full.store_twin(2104))]
    hots = [analyze_sass(t)["hot_loop"] for t in texts]
    loops = [hot_loop_listing(t, h) for t, h in zip(texts, hots)]
    assert hots[1]["n_instructions"] <= hots[0]["n_instructions"]
    assert len(re.findall(r"HGMMA", loops[1])) == len(re.findall(r"HGMMA", loops[0])) >= 4
    assert "R2UR" not in loops[1]
    assert "UTMASTG" in texts[1] and "STG.E.128" in texts[0] and "STG.E.128" not in texts[1]
    size = [len(re.findall(r"^\s+/\*[0-9a-f]{4,5}\*/", t, re.M)) for t in texts]
    assert size[1] < 0.4 * size[0], size


@pytest.mark.parametrize("a_col", [False, True])
@pytest.mark.parametrize("config", ["SPREAD=1", SPREAD_64x256])
def test_async_simt_spread_loop_loses_under_8_percent_of_its_ffma_issue_to_fixed_stalls(config, a_col):
    """Rung 18's SPREAD loop as one warp issues it (the stall counts ptxas writes into the control
    codes): its next fragment loads among the FFMA rows, the copies predicated, so that fixed
    latencies cost 73 (128x256) and 39 (64x256) cycles per k tile of 1024 FFMA with NVRTC 13.5 (33
    with SNAKE=1 and 44 with NVRTC 13.0); the loop that issued its LDS.128 and copies in clusters
    (SPREAD=0) lost 141 (111), and Nsight Compute's "wait"
    stall went from 0.14 to 0.05 cycles per instruction with the change (benchmarks/NOTES.md).
    B row-major: a column-major B is copied 4 bytes at a time, 12 copies per thread, which the SPREAD
    loop takes with more stalls (56 with NVRTC 13.0, 96 with 13.5)."""
    b_col = False
    from gemmlab.analysis.inspect import inspect_rung

    h = inspect_rung("async_simt", config=config, a_col=a_col, b_col=b_col)["hot_loop"]
    assert h["ffma"] == 1024
    assert h["schedule"]["fixed_stall_cycles"] < 0.08 * h["ffma"], h["schedule"]


def test_async_simt_clustered_loop_shows_the_stalls_the_spread_loop_removes():
    """The guard above can fail: SPREAD=0's k tile carries more than 0.1 x 1024 fixed stall cycles
    (NVRTC 13.5: 141; 13.0, the H100 machine's: 111)."""
    from gemmlab.analysis.inspect import inspect_rung

    h = inspect_rung("async_simt", config="SPREAD=0,SNAKE=0")["hot_loop"]
    assert h["schedule"]["fixed_stall_cycles"] > 0.1 * h["ffma"], h["schedule"]


def test_async_simt_snake_order_cuts_the_ffmas_that_read_three_registers():
    """SNAKE=1 runs the odd rows of the outer product backward, so that a row starts on the b the
    row before ended on and reads it from the operand reuse cache: at least a quarter fewer FFMAs
    that read all three sources from the register file (device NVRTC 13.0: 199 -> 136 per k tile;
    Nsight Compute's dispatch stall 0.24 -> 0.17 cycles per instruction, benchmarks/NOTES.md)."""
    from gemmlab.analysis.inspect import inspect_rung

    three = {s: inspect_rung("async_simt", config=f"SNAKE={s}")["hot_loop"]["schedule"]["ffma_three_reads"] for s in (0, 1)}
    assert three[1] <= 0.75 * three[0], three
