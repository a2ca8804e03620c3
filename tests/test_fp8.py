"""FP8: rung 25 (wgmma_fp8), ``gemmlab.scaled_mm`` and ``gemmlab.quantize_fp8``.

CPU: the scale-shape and dtype contract and its refusals (stand-in device arrays, as
tests/test_bad_input.py), the rung's registry, defines and parameter block, and its builds for
sm_90a (no spills; the FP8 HGMMA, QGMMA, in the SASS; the promotion's FADDs). GPU: scaled_mm against
a float64 product of the dequantized operands over odd shapes, both layouts of each operand, the
two scalings, both formats, the three output dtypes, bias and fast accumulation; its accuracy beside
torch._scaled_mm's on the same data; quantize_fp8's codes and scales; a CUDA graph; refusals of
non-finite scales. The rung's generic verification (every layout, alpha/beta, NaN-poisoned C) is
tests/test_gpu_correctness.py's, which covers every rung and precision.
"""

from __future__ import annotations

import itertools
import re

import pytest

import gemmlab
from gemmlab.core import problem
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.params import Params
from gemmlab.core.registry import get
from gemmlab.core.variant import Variant

from test_bad_input import device_fakes


@pytest.fixture()
def fakes(monkeypatch):
    return device_fakes(monkeypatch, "|u1")


def _call(fakes, M=8, N=16, K=32, sa=(1,), sb=(1,), **kw):
    a, b = fakes(M, K), fakes(N, K).T
    return gemmlab.scaled_mm(a, b, fakes(*sa, typestr="<f4"), fakes(*sb, typestr="<f4"),
                             out=kw.pop("out", fakes(M, N, typestr="<f2")), **kw)


# ---- the contract, checked before the GPU is touched ------------------------------------------------
def test_tensor_wise_and_row_wise_scales_are_told_apart_by_their_shapes(fakes):
    from gemmlab.core.scaled import check_scales
    f = lambda *s: fakes(*s, typestr="<f4")   # noqa: E731
    assert check_scales(f(1), f(1, 1), 8, 16, 32, 0, "cai").mode == "tensor"
    assert check_scales(f(8, 1), f(1, 16), 8, 16, 32, 0, "cai").mode == "row"
    assert check_scales(f(8), f(16), 8, 16, 32, 0, "cai").mode == "row"


def test_scales_of_no_known_scaling_are_refused_naming_both_shapes_and_the_choices(fakes):
    with pytest.raises(ValueError, match=r"scale_a \(8, 2\) and scale_b \(1, 16\).*tensor-wise.*row-wise"):
        _call(fakes, sa=(8, 2), sb=(1, 16))
    with pytest.raises(ValueError, match=r"scale_a \(8, 1\) and scale_b \(1, 2\) name no scaling.*block-wise"):
        _call(fakes, sa=(8, 1), sb=(1, 2))


def test_block_wise_scales_are_told_apart_by_their_shapes_in_either_layout(fakes):
    from gemmlab.core.scaled import check_scales
    f = lambda *s, **k: fakes(*s, typestr="<f4", **k)   # noqa: E731
    sc = check_scales(f(8, 3), f(3, 2), 8, 200, 300, 0, "cai")
    assert sc.mode == "block" and sc.strides == (3, 1, 2, 1)
    sc = check_scales(f(8, 3, strides=(1, 8)), f(3, 2, strides=(1, 3)), 8, 200, 300, 0, "cai")   # M-major, transposed
    assert sc.strides == (1, 8, 1, 3)


def test_block_scales_take_no_fast_accumulation(fakes):
    with pytest.raises(ValueError, match="use_fast_accum .* does not apply"):
        _call(fakes, K=300, sa=(8, 3), sb=(3, 1), use_fast_accum=True)


def test_block_scales_refuse_a_tile_wider_than_a_column_block(fakes):
    with pytest.raises(ValueError, match="BN=192 spans more"):
        _call(fakes, N=200, K=300, sa=(8, 3), sb=(3, 2), config={"BN": 192, "STAGES": 5})


def test_scales_must_be_float32_on_the_operands_device(fakes):
    with pytest.raises(TypeError, match="scale_a is fp16; scales must be float32"):
        gemmlab.scaled_mm(fakes(8, 32), fakes(16, 32).T, fakes(1, typestr="<f2"), fakes(1, typestr="<f4"),
                          out=fakes(8, 16, typestr="<f2"))
    with pytest.raises(ValueError, match="scale_b is on device 1 but a is on device 0"):
        gemmlab.scaled_mm(fakes(8, 32), fakes(16, 32).T, fakes(1, typestr="<f4"), fakes(1, typestr="<f4", device=1),
                          out=fakes(8, 16, typestr="<f2"))


def test_a_strided_row_wise_scale_is_refused_with_the_fix(fakes):
    with pytest.raises(ValueError, match=r"scale_a must be contiguous.*scale_a.contiguous\(\)"):
        gemmlab.scaled_mm(fakes(8, 32), fakes(16, 32).T, fakes(8, 1, typestr="<f4", strides=(2, 1)),
                          fakes(1, 16, typestr="<f4"), out=fakes(8, 16, typestr="<f2"))


def test_operands_that_are_not_fp8_are_refused_naming_what_it_takes(fakes):
    with pytest.raises(TypeError, match="a is fp16; scaled_mm multiplies FP8 operands"):
        gemmlab.scaled_mm(fakes(8, 32, typestr="<f2"), fakes(16, 32).T, fakes(1, typestr="<f4"),
                          fakes(1, typestr="<f4"), out=fakes(8, 16, typestr="<f2"))


def test_an_unknown_fp8_format_is_refused(fakes):
    with pytest.raises(ValueError, match="a_format must be one of e4m3, e5m2"):
        _call(fakes, a_format="e3m4")


def test_inner_dimensions_must_match(fakes):
    with pytest.raises(ValueError, match="shape mismatch: a is 8x32 but b is 31x16"):
        gemmlab.scaled_mm(fakes(8, 32), fakes(16, 31).T, fakes(1, typestr="<f4"), fakes(1, typestr="<f4"),
                          out=fakes(8, 16, typestr="<f2"))


def test_out_must_match_the_product_and_be_row_major(fakes):
    with pytest.raises(ValueError, match="out is 8x15 but a @ b is 8x16"):
        _call(fakes, out=fakes(8, 15, typestr="<f2"))
    with pytest.raises(ValueError, match="out must be row-major"):
        _call(fakes, out=fakes(16, 8, typestr="<f2").T)
    with pytest.raises(TypeError, match="out is fp16 but out_dtype is fp32"):
        _call(fakes, out_dtype="float32")


def test_a_bias_is_of_the_output_dtype_or_float32(fakes):
    with pytest.raises(TypeError, match="with FP8 operands it must be fp16 .* or float32"):
        _call(fakes, bias=fakes(16, typestr="<V2"))
    with pytest.raises(ValueError, match="bias has length 15"):
        _call(fakes, bias=fakes(15, typestr="<f4"))


def test_quantize_refuses_an_unknown_scaling_block_or_format():
    with pytest.raises(ValueError, match="scaling must be one of tensor, row, block"):
        gemmlab.quantize_fp8(None, scaling="column")
    with pytest.raises(ValueError, match=r"block must be one of \(1, 128\), \(128, 128\)"):
        gemmlab.quantize_fp8(None, scaling="block", block=(64, 64))
    with pytest.raises(ValueError, match="not an FP8 format"):
        gemmlab.quantize_fp8(None, dtype="int8")


# ---- the rung ---------------------------------------------------------------------------------------
def test_the_promoted_precision_refuses_a_tile_its_registers_cannot_hold():
    r = get("wgmma_fp8")
    with pytest.raises(ValueError, match="in precision fp8 holds more than 96 sums"):
        r.config({"BN": 256, "STAGES": 4}, "fp8")
    assert r.config({"BN": 192, "STAGES": 5}, "fp8")["BN"] == 192   # 96 sums and 96 partial sums
    assert r.config({"BN": 192, "STAGES": 5}, "fp8_fast")["BN"] == 192   # 96 sums
    with pytest.raises(ValueError, match="BK=256: in precision fp8 a k tile is the promotion's interval"):
        r.config({"BK": 256, "STAGES": 3}, "fp8")
    assert r.config(None, "fp8_fast")["BN"] == 256


def test_the_promoted_tile_is_the_one_whose_whole_waves_take_least_time():
    from gemmlab.core.rules import fp8_wave_tile
    r = get("wgmma_fp8")
    cfg = r.config(None, "fp8")
    assert fp8_wave_tile(cfg, 4096, 4096, 132) is None                  # 8 waves of 128x128 against 6 of 128x192
    new, why = fp8_wave_tile(cfg, 8192, 8192, 132)                       # 32 against 21
    assert new["BN"] == 192 and "whole waves" in why and not r.check_config(r.config(new, "fp8"), "fp8")
    assert fp8_wave_tile(cfg, 431, 5952, 132)[0]["BN"] == 192            # 2 waves against 1
    assert fp8_wave_tile(cfg, 128, 14336, 132) is None                   # one wave either way
    assert fp8_wave_tile(cfg, 300, 1000, 132)[0]["BN"] == 64             # under a wave: twice the tiles
    half = r.config({"BN": 64, "STAGES": 8}, "fp8")
    assert fp8_wave_tile(half, 1024, 4096, 132)[0] == cfg                # 4 waves of the half tile against 2
    assert fp8_wave_tile(cfg, 640 * 132 // 5, 640, 132) is None          # 192 columns pad 640 to 768
    assert fp8_wave_tile(dict(cfg, CLUSTER=2), 8192, 8192, 132) is None


def test_fast_accumulation_takes_the_tile_of_least_whole_wave_time_among_four():
    from gemmlab.core.rules import fp8_wave_tile
    r = get("wgmma_fp8")
    cfg = r.config(None, "fp8_fast")                                      # 128x256, deferred stores
    assert fp8_wave_tile(cfg, 4096, 4096, 132, "fp8_fast") is None      # 4 waves of 128x256 against 8 of 128x128
    new, _ = fp8_wave_tile(cfg, 552, 4528, 132, "fp8_fast")             # one wave of either: the smaller 192
    assert (new["BN"], new["DEFER"]) == (192, 0) and not r.check_config(r.config(new, "fp8_fast"), "fp8_fast")
    assert fp8_wave_tile(cfg, 438, 1216, 132, "fp8_fast")[0]["BN"] == 64
    assert fp8_wave_tile(cfg, 128, 14336, 132, "fp8_fast")[0]["BN"] == 128   # 112 tiles against 56


def test_where_m_fits_one_warpgroup_the_rule_lets_the_other_sit_every_tile_out():
    from gemmlab.core.rules import fp8_one_warpgroup

    r = get("wgmma_fp8")
    cfg, why = fp8_one_warpgroup(r.config(None, "fp8"), 64)
    assert cfg["WGSKIP"] == 1 and "sits every tile out" in why
    assert fp8_one_warpgroup(r.config(None, "fp8"), 65) is None
    assert not r.check_config(r.config(cfg, "fp8"), "fp8")
    assert "WGSKIP" not in r.defines(r.config(None, "fp8")) and r.defines(r.config(cfg, "fp8"))["WGSKIP"] == 1


def test_block_scales_take_128x128_clusters_of_2_where_their_whole_waves_are_shorter():
    from gemmlab.core.rules import FP8_CLUSTER_TILE, fp8_block_cluster
    r = get("wgmma_fp8")
    cfg, half = r.config(None, "fp8"), r.config({"BN": 64, "STAGES": 8}, "fp8")
    new, why = fp8_block_cluster(cfg, 4096, 7168, 132)   # 14 whole waves either way: the clusters' rate decides
    assert new == dict(cfg, **FP8_CLUSTER_TILE) and "clusters of 2" in why
    assert fp8_block_cluster(cfg, 282, 10384, 132) is None      # 3 row tiles: 3 waves in clusters against 2
    assert fp8_block_cluster(cfg, 128, 14336, 132) is None      # one row tile
    assert fp8_block_cluster(half, 620, 4032, 132)[0]["BN"] == 128   # 2 waves of clusters against 3 of 128x64
    assert fp8_block_cluster(half, 300, 1000, 132) is None      # under a wave: the rule's 128x64 tiles
    assert fp8_block_cluster(dict(cfg, CLUSTER=2), 4096, 4096, 132) is None


def test_misaligned_fp8_rows_take_clusters_of_2_from_a_wave_of_128x128_tiles():
    from gemmlab.core.rules import fp8_misaligned

    r = get("wgmma_fp8")
    fast = r.config(None, "fp8_fast")
    assert fp8_misaligned(r.config(None, "fp8"), 4096, 4096, (4096, 4096), "fp8", False, 132) is None   # aligned
    cfg, why = fp8_misaligned(r.config(None, "fp8"), 2384, 8544, (1648, 1648), "fp8", False, 132)
    assert (cfg["BN"], cfg["CLUSTER"]) == (192, 2) and "not all 32-byte multiples" in why
    assert fp8_misaligned(fast, 2384, 8544, (1648,), "fp8_fast", False, 132)[0] == dict(fast, CLUSTER=2)
    cfg, _ = fp8_misaligned(r.config(None, "fp8"), 2384, 8544, (4096, 1648), "fp8", True, 132)
    assert (cfg["BN"], cfg["CLUSTER"]) == (128, 2)                     # block scales: within a column block
    cfg, _ = fp8_misaligned(r.config(None, "fp8"), 5334, 640, (11984,), "fp8", False, 132)
    assert (cfg["BN"], cfg["CLUSTER"]) == (128, 2)                     # 2 waves either way: 128 columns
    cfg, why = fp8_misaligned(r.config(None, "fp8"), 806, 3456, (880,), "fp8", False, 132)
    assert (cfg["BN"], cfg["CLUSTER"]) == (192, 1) and "alone" in why   # 7 x 18 tiles: 126, in clusters 144
    assert fp8_misaligned(r.config(None, "fp8"), 2125, 464, (2544,), "fp8", False, 132) is None   # 68 tiles
    assert fp8_misaligned(r.config(None, "fp8"), 128, 132 * 128, (1648,), "fp8", False, 132) is None   # one row tile
    for prec, block in (("fp8", False), ("fp8_fast", False), ("fp8", True)):
        cfg, _ = fp8_misaligned(r.config(None, prec), 7152, 6544, (5072,), prec, block, 132)
        assert not r.check_config(r.config(cfg, prec), prec)


def test_fp8_variants_write_bf16_by_default_and_define_their_formats_and_scales():
    r = get("wgmma_fp8")
    v = Variant.make(r, "fp8", b_col=True, epilogue=Epilogue(scale="row"))
    d = v.defines()
    assert d["GL_DTYPE"] == 3 and d["GL_C_DTYPE"] == 2 and d["GL_SCALE"] == 2 and "GL_FP8_A" not in d
    from dataclasses import replace
    d = replace(v, formats=("e4m3", "e5m2")).defines()
    assert d["GL_FP8_B"] == 1 and "GL_FP8_A" not in d
    assert "GL_PRECISION" not in d and Variant.make(r, "fp8", b_col=True, precision="fp8_fast").defines()["GL_PRECISION"] == 1


def test_the_parameter_block_ends_with_the_two_scale_pointers():
    import struct
    kp = problem.KernelProblem(8, 16, 32, 0, 32, False, True, 0, 32, True, True, 0, 16, True, 1.0, 0.0)
    p = Params(kp, False, 3, bias=True, scales=True)
    assert p.scales_at == p.bias_at + 8
    p.epilogue(0x10, 0, (0x20, 0x30))
    assert struct.unpack_from("<QQQ", p.buffer, p.bias_at) == (0x10, 0x20, 0x30)
    assert len(p.array) == 11 + 3 + 1 + 2


def test_fp8_operand_maps_take_128_elements_per_swizzle_row():
    from gemmlab.core import tensormaps
    m = tensormaps.operand_map("B", 300, 200, 304, True, "fp8", {"BM": 128, "BN": 128, "BK": 128, "CLUSTER": 2})
    assert m.box == (128, 64) and m.strides == (304,) and m.k_major


def _sass(precision, config=None, **epi):
    r = get("wgmma_fp8")
    v = Variant.make(r, "fp8", b_col=True, precision=precision, epilogue=Epilogue(**epi), config=config)
    ck = v.compile("sm_90a")
    from gemmlab.analysis import disasm
    return ck, disasm.sass_listing(ck.cubin)


@pytest.mark.parametrize("precision", ["fp8", "fp8_fast"])
def test_the_rung_builds_without_spills_with_scales_bias_and_an_activation(precision):
    ck, sass = _sass(precision, scale="row", bias="fp32", activation="gelu", out="bf16")
    assert ck.spill_bytes == 0
    assert re.search(r"QGMMA\.64x\d+x32\.F32\.E4M3\.E4M3", sass)


@pytest.mark.parametrize("precision, scale", [("fp8", "tensor"), ("fp8", "block"), ("fp8_fast", "row")])
def test_a_warpgroup_sitting_tiles_out_builds_without_spills(precision, scale):
    ck, sass = _sass(precision, {"WGSKIP": 1}, scale=scale, out="bf16")
    assert ck.spill_bytes == 0 and re.search(r"QGMMA\.64x\d+x32\.F32\.E4M3\.E4M3", sass)


def test_block_scales_alone_add_each_k_tile_after_its_own_wgmmas():
    ck, sass = _sass("fp8", None, scale="block", out="bf16")
    assert ck.spill_bytes == 0 and "C7514" not in ck.log
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in sass and len(re.findall(r"\bFFMA\b", sass)) >= 64


def test_block_scales_refuse_a_tile_wider_than_a_block_backward_k_tiles_and_a_deferred_store_in_clusters():
    from gemmlab.core.scaled import block_refusal
    cfg = get("wgmma_fp8").config(None, "fp8")
    assert block_refusal(cfg) is None
    assert block_refusal({**cfg, "DEFER": 1}) is None
    assert "DEFER=1" in block_refusal({**cfg, "DEFER": 1, "CLUSTER": 2})
    assert "BN=192 spans more" in block_refusal({**cfg, "BN": 192})
    assert "KREV=1" in block_refusal({**cfg, "KREV": 1})


def test_precompile_builds_every_configuration_the_fp8_rule_chooses():
    from gemmlab.core import precompile
    from gemmlab.core.rules import fp8_rule_tiles
    r = get("wgmma_fp8")
    vs = precompile.variants(kernels=["wgmma_fp8"], dtypes=["fp8"], arch="sm_90a", layouts=["rc"])
    for prec, scale in (("fp8", "tensor"), ("fp8", "block"), ("fp8_fast", "row")):
        built = [dict(v.config) for v in vs if v.precision == prec and v.epilogue.scale == scale]
        tiles = fp8_rule_tiles(r, prec, scale == "block")
        assert all(t in built for t in tiles) and all(not r.check_config(t, prec) for t in tiles)
        assert any(t["WGSKIP"] for t in tiles) and any(t["CLUSTER"] == 2 for t in tiles)


def test_an_e5m2_operand_builds_the_mixed_format_instruction():
    r = get("wgmma_fp8")
    from dataclasses import replace
    from gemmlab.analysis import disasm
    v = replace(Variant.make(r, "fp8", b_col=True), formats=("e5m2", "e4m3"))
    assert "QGMMA.64x128x32.F32.E5M2.E4M3" in disasm.sass_listing(v.compile("sm_90a").cubin)


def test_block_scales_multiply_each_k_tiles_partial_sums_as_they_are_added():
    ck, sass = _sass("fp8", scale="block", out="bf16")
    assert ck.spill_bytes == 0
    assert len(re.findall(r"\bFFMA\b", sass)) >= 64   # 64 partial sums times their scales, added, per k tile


def test_promotion_adds_each_k_tiles_partial_sums_in_fp32_and_fast_accumulation_does_not():
    _, promoted = _sass("fp8")
    _, fast = _sass("fp8_fast")
    fadd = lambda s: len(re.findall(r"\bFADD\b", s))   # noqa: E731
    # a consumer thread's 64 sums (128x128 tile) take one FADD each per k tile
    assert fadd(promoted) >= 64 and fadd(fast) < 8
    assert "RZ, !UPT" in promoted   # a k tile's first QGMMA starts fresh sums (scale-d 0)


def test_precompile_builds_each_scaling_scaled_mm_plans_with_and_their_store_twins():
    from gemmlab.core import precompile
    vs = precompile.variants(kernels=["wgmma_fp8"], dtypes=["fp8"], arch="sm_90a")
    got = {(v.precision, v.epilogue.scale, v.tma_store_only) for v in vs}
    for prec, scale in (("fp8", "tensor"), ("fp8", "row"), ("fp8", "block"), ("fp8_fast", "tensor"), ("fp8_fast", "row")):
        assert (prec, scale, False) in got and (prec, scale, True) in got
    assert ("fp8_fast", "block", False) not in got
    wide = {(v.epilogue.scale, v.tma_store_only) for v in vs if dict(v.config)["BN"] == 192}   # the rule's at many waves
    assert wide == {("tensor", False), ("tensor", True), ("row", False), ("row", True)}
    twin = next(v for v in vs if v.tma_store_only)
    assert precompile.job_key(twin)[-1] is True and precompile.job_key(twin) != precompile.job_key(
        next(v for v in vs if not v.tma_store_only and v.epilogue == twin.epilogue and v.precision == twin.precision
             and v.vec_c == twin.vec_c))


@pytest.mark.parametrize("kernel", ["pack", "pack_t"])
def test_the_operand_copies_build_for_fp8(kernel):
    from gemmlab.core import packing
    assert packing.compile_pack("fp8", "sm_90a", kernel=kernel).spill_bytes == 0


# ---- on the GPU ------------------------------------------------------------------------------------
SHAPES = [(1, 1, 1), (7, 5, 3), (37, 93, 211), (130, 257, 129), (257, 129, 1000), (128, 256, 4096)]


def _torch():
    return pytest.importorskip("torch")


def _operands(M, N, K, fmt_a="e4m3", fmt_b="e4m3", b_layout="col", seed=0):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    fa = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    a = (torch.randn(M, K, device="cuda", generator=g) * 2).to(fa[fmt_a])
    w = (torch.randn(N, K, device="cuda", generator=g) * 2).to(fa[fmt_b])
    b = w.t() if b_layout == "col" else w.t().contiguous()
    return a, b


def _scales(M, N, mode, seed=1):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    if mode == "tensor":
        return (torch.rand((), device="cuda", generator=g) + 0.5), (torch.rand((), device="cuda", generator=g) + 0.5)
    return (torch.rand(M, 1, device="cuda", generator=g) + 0.5), (torch.rand(1, N, device="cuda", generator=g) + 0.5)


def _reference(a, b, sa, sb, bias=None):
    torch = _torch()
    ref = (a.double() * sa.double()) @ (b.double() * sb.double())
    return ref + bias.double() if bias is not None else ref


def _rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm().clamp(min=1e-300))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["tensor", "row"])
@pytest.mark.parametrize("fast", [False, True], ids=["promoted", "fast"])
def test_scaled_mm_matches_the_float64_product_of_the_dequantized_operands(mode, fast):
    torch = _torch()
    failures = []
    for (M, N, K), b_layout, (fa, fb) in itertools.product(SHAPES, ("col", "row"),
                                                          (("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2"))):
        a, b = _operands(M, N, K, fa, fb, b_layout)
        sa, sb = _scales(M, N, mode)
        out = gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=fast)
        assert out.dtype == torch.bfloat16 and out.shape == (M, N)
        ref = _reference(a, b, sa, sb)
        err = _rel(out, ref)
        scale = (a.double().abs() * sa.double()) @ (b.double().abs() * sb.double())
        worst = float(((out.double() - ref).abs() / scale.clamp(min=1e-30)).max())
        if not (torch.isfinite(out).all() and err < 1e-2 and worst < 2e-2):
            failures.append(f"{M}x{N}x{K} b {b_layout} {fa}x{fb}: rel {err:.2e}, worst scaled {worst:.2e}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("config, fast", [({"BN": 192, "STAGES": 5}, False), ({"BN": 192, "STAGES": 4, "STREAMK": 1}, False),
                                          ({"BN": 192, "STAGES": 4, "CLUSTER": 2}, False),
                                          ({"BN": 192, "STAGES": 5, "EPI_TMA": 0}, False),
                                          ({"BN": 192, "STAGES": 5, "DEFER": 0}, True),
                                          ({"BN": 192, "STAGES": 5, "DEFER": 1, "CLUSTER": 2}, True)],
                         ids=["tma", "stream_k", "cluster", "staged", "fast", "fast-deferred-cluster"])
@pytest.mark.parametrize("mode", ["tensor", "row"])
def test_the_192_column_tile_matches_the_float64_product_with_each_output_and_a_bias(config, fast, mode):
    """Rung 25's 128x192 tile (promoted: 96 sums and 96 partial sums per thread; fast accumulation:
    96 sums; the epilogue in three passes of 64 columns): odd shapes, bf16 and fp32 out with a bias,
    no element left unwritten."""
    torch = _torch()
    failures = []
    for (M, N, K), od in itertools.product(SHAPES, ("bfloat16", "float32")):
        a, b = _operands(M, N, K)
        sa, sb = _scales(M, N, mode)
        bias = torch.randn(N, device="cuda", dtype=getattr(torch, od))
        out = torch.full((M, N), float("nan"), device="cuda", dtype=getattr(torch, od))
        gemmlab.scaled_mm(a, b, sa, sb, bias=bias, out=out, config=config, use_fast_accum=fast)
        err = _rel(out, _reference(a, b, sa, sb, bias))
        if not (torch.isfinite(out).all() and err < 1e-2):
            failures.append(f"{M}x{N}x{K} out {od}: rel {err:.2e}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
def test_scaled_mm_takes_the_192_column_tile_at_many_waves_except_with_block_scales():
    torch = _torch()
    from gemmlab.core import scaled

    M, N, K = 4096, 14336, 256
    a, b = _operands(M, N, K)
    sa, sb = _scales(M, N, "row")
    out = gemmlab.scaled_mm(a, b, sa, sb)
    assert scaled.plans()[-1].variant.cfg["BN"] == 192 and "128x192" in scaled.plans()[-1].choice.reason
    assert _rel(out, _reference(a, b, sa, sb)) < 1e-2
    gemmlab.scaled_mm(a, b, sa, sb, use_fast_accum=True)
    assert scaled.plans()[-1].variant.cfg["BN"] != 192
    ba = torch.rand(M, 2, device="cuda") + 0.5
    bb = torch.rand(2, -(-N // 128), device="cuda") + 0.5
    gemmlab.scaled_mm(a, b, ba, bb)
    assert scaled.plans()[-1].variant.cfg["BN"] <= 128


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["tensor", "row", "fast", "block"])
def test_misaligned_rows_run_in_clusters_of_2_and_match_the_float64_product(mode):
    """K % 32 == 16 over a wave of 128x128 tiles: the rule's clusters of 2 (promoted: 128x192 tiles),
    with an odd count of row tiles (the last cluster's second block computes rows past M), NaN in
    the output before, a bias."""
    torch = _torch()
    from gemmlab.core import scaled

    M, N, K = 1600, 1552, 272                         # 13 x 13 tiles of 128x128, rows of 272 bytes
    a, b = _operands(M, N, K)
    sa, sb = _block_scales(M, N, K) if mode == "block" else _scales(M, N, "tensor" if mode == "fast" else mode)
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemmlab.scaled_mm(a, b, sa, sb, bias=bias, out=out, use_fast_accum=mode == "fast")
    cfg = scaled.plans()[-1].variant.cfg
    assert cfg["CLUSTER"] == 2 and cfg["BN"] == (192 if mode in ("tensor", "row") else cfg["BN"])
    ref = (_block_reference(a, b, sa, sb) if mode == "block" else _reference(a, b, sa, sb)) + bias.double()
    assert torch.isfinite(out).all() and _rel(out, ref) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("mode, fast", [("tensor", False), ("row", False), ("tensor", True), ("block", False)],
                         ids=["tensor", "row", "fast", "block"])
def test_m_within_one_warpgroup_sits_the_other_out_and_matches_the_float64_product(mode, fast):
    """M of 33 to 64 (at most 32: rung 28): the rule's WGSKIP=1 (the second consumer warpgroup waits for and releases
    each stage without multiplying), odd N and K, a bias, NaN in the output before; WGSKIP=0 gives
    the same bits."""
    torch = _torch()
    from gemmlab.core import scaled

    for M, N, K in ((33, 200, 300), (37, 1000, 4000), (64, 520, 1040)):   # M of 32 or less: rung 28
        a, b = _operands(M, N, K)
        sa, sb = _block_scales(M, N, K) if mode == "block" else _scales(M, N, mode)
        bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemmlab.scaled_mm(a, b, sa, sb, bias=bias, out=out, use_fast_accum=fast)
        cfg = scaled.plans()[-1].variant.cfg
        assert cfg["WGSKIP"] == 1
        ref = (_block_reference(a, b, sa, sb) if mode == "block" else _reference(a, b, sa, sb)) + bias.double()
        assert torch.isfinite(out).all() and _rel(out, ref) < 1e-2, f"{M}x{N}x{K}"
        both = gemmlab.scaled_mm(a, b, sa, sb, bias=bias, use_fast_accum=fast, kernel="wgmma_fp8",
                                 config={**cfg, "WGSKIP": 0})
        assert torch.equal(both, out), f"{M}x{N}x{K}: WGSKIP=0 differs"


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["float32", "float16", "bfloat16"])
def test_scaled_mm_writes_each_output_dtype_with_a_bias(out_dtype):
    torch = _torch()
    M, N, K = 200, 300, 520
    a, b = _operands(M, N, K)
    sa, sb = _scales(M, N, "row")
    dt = getattr(torch, out_dtype)
    for bias in (torch.randn(N, device="cuda", dtype=dt), torch.randn(N, device="cuda")):
        out = gemmlab.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=dt)
        assert out.dtype == dt
        ref = _reference(a, b, sa, sb, bias)
        assert _rel(out, ref) < (2e-3 if out_dtype == "float32" else 1e-2)


@pytest.mark.gpu
def test_scale_result_multiplies_the_result():
    torch = _torch()
    a, b = _operands(64, 96, 256)
    sa, sb = _scales(64, 96, "row")
    sr = torch.tensor(0.25, device="cuda")
    out = gemmlab.scaled_mm(a, b, sa, sb, scale_result=sr, out_dtype=torch.float32)
    assert _rel(out, _reference(a, b, sa, sb) * 0.25) < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["tensor", "row"])
@pytest.mark.parametrize("shape, rung", [((512, 512, 8192), "wgmma_fp8"), ((16, 2048, 16384), "decode_fp8")],
                         ids=["promoted", "decode"])
def test_accuracy_is_no_worse_than_torch_scaled_mm_on_the_same_data(shape, rung, mode):
    """Rung 25's promoted sums and rung 28's FP32 ones (the M of decoding) against the float64
    product of the same dequantized operands, a float32 result each."""
    torch = _torch()
    from gemmlab.core import scaled
    M, N, K = shape
    a, b = _operands(M, N, K)
    sa, sb = _scales(M, N, mode)
    ref = _reference(a, b, sa, sb)
    ours = _rel(gemmlab.scaled_mm(a, b, sa, sb, out_dtype=torch.float32), ref)
    assert scaled.plans()[-1].rung.slug == rung
    theirs = _rel(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32), ref)
    assert ours <= 1.1 * theirs + 1e-7, f"gemmlab {ours:.3e} against torch._scaled_mm {theirs:.3e}"


@pytest.mark.gpu
def test_a_non_finite_scale_is_refused_naming_it():
    torch = _torch()
    a, b = _operands(8, 16, 32)
    sa, sb = _scales(8, 16, "row")
    sb[0, 3] = float("inf")
    with pytest.raises(ValueError, match="scale_b holds a value that is not finite"):
        gemmlab.scaled_mm(a, b, sa, sb)


@pytest.mark.gpu
def test_a_cuda_graph_captures_scaled_mm_and_replays_it_on_new_scales():
    torch = _torch()
    a, b = _operands(256, 384, 512)
    sa, sb = _scales(256, 384, "row")
    gemmlab.scaled_mm(a, b, sa, sb)   # plan and compile outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = gemmlab.scaled_mm(a, b, sa, sb)
    sa.mul_(2.0)
    g.replay()
    torch.cuda.synchronize()
    assert _rel(out, _reference(a, b, sa, sb)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_quantize_gives_the_codes_of_x_over_its_scale(src, fmt):
    torch = _torch()
    fmax = {"e4m3": 448.0, "e5m2": 57344.0}[fmt]
    x = (torch.randn(67, 301, device="cuda") * 3).to(getattr(torch, src))
    x[5].zero_()
    for scaling in ("tensor", "row"):
        q, s = gemmlab.quantize_fp8(x, scaling, dtype=fmt)
        amax = x.float().abs().amax() if scaling == "tensor" else x.float().abs().amax(dim=1, keepdim=True)
        big = torch.full_like(amax, fmax)   # tensor / tensor: an IEEE division (torch multiplies by 1/scalar)
        want_s = torch.where(amax > 0, amax / big, torch.ones_like(amax))
        assert s.shape == (() if scaling == "tensor" else (67, 1)) and torch.equal(s, want_s)
        inv = torch.where(amax > 0, big / amax, torch.ones_like(amax))
        want = (x.float() * inv).to(q.dtype)
        assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))


@pytest.mark.gpu
def test_quantized_operands_round_trip_through_scaled_mm():
    torch = _torch()
    x, w = torch.randn(300, 700, device="cuda"), torch.randn(500, 700, device="cuda") * 0.1
    x8, sx = gemmlab.quantize_fp8(x, "row")
    w8, sw = gemmlab.quantize_fp8(w, "row")
    y = gemmlab.scaled_mm(x8, w8.t(), sx, sw.t(), out_dtype=torch.float32)
    assert _rel(y, x.double() @ w.double().t()) < 0.08   # e4m3's 3 fraction bits on both operands


def _block_scales(M, N, K, sa_m_major=False, sb_t=False, seed=2):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    kb, nb = -(-K // 128), -(-N // 128)
    sa = torch.rand(kb, M, device="cuda", generator=g).t() if sa_m_major else torch.rand(M, kb, device="cuda", generator=g)
    sb = torch.rand(nb, kb, device="cuda", generator=g).t() if sb_t else torch.rand(kb, nb, device="cuda", generator=g)
    return sa + 0.5, sb + 0.5


def _block_reference(a, b, sa, sb):
    """float64 (a times its 1x128 scales) @ (b times its 128x128 scales)."""
    M, K = a.shape
    N = b.shape[1]
    ea = sa.double().repeat_interleave(128, dim=1)[:, :K]
    eb = sb.double().repeat_interleave(128, dim=0)[:K].repeat_interleave(128, dim=1)[:, :N]
    return (a.double() * ea) @ (b.double() * eb)


@pytest.mark.gpu
@pytest.mark.parametrize("layouts", [(False, False), (True, True)], ids=["row-major scales", "M-major a, transposed b"])
def test_block_scaled_mm_matches_the_float64_product_of_the_dequantized_operands(layouts):
    torch = _torch()
    failures = []
    for (M, N, K), b_layout, (fa, fb) in itertools.product(SHAPES + [(300, 200, 1000)], ("col", "row"),
                                                          (("e4m3", "e4m3"), ("e5m2", "e4m3"))):
        a, b = _operands(M, N, K, fa, fb, b_layout)
        sa, sb = _block_scales(M, N, K, *layouts)
        for out_dtype in (torch.bfloat16, torch.float32):
            out = gemmlab.scaled_mm(a, b, sa, sb, out_dtype=out_dtype)
            ref = _block_reference(a, b, sa, sb)
            err = _rel(out, ref)
            if not (torch.isfinite(out).all() and err < (1e-2 if out_dtype == torch.bfloat16 else 2e-3)):
                failures.append(f"{M}x{N}x{K} b {b_layout} {fa}x{fb} {out_dtype}: rel {err:.2e}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
def test_block_quantized_operands_round_trip_through_scaled_mm():
    torch = _torch()
    x, w = torch.randn(300, 1000, device="cuda"), torch.randn(500, 1000, device="cuda") * 0.1
    x8, sx = gemmlab.quantize_fp8(x, "block")
    w8, sw = gemmlab.quantize_fp8(w, "block", block=(128, 128))
    assert sx.shape == (300, 8) and sw.shape == (4, 8)
    assert torch.equal(sx[:, 0], x[:, :128].abs().amax(dim=1) / torch.full((300,), 448.0, device="cuda"))
    y = gemmlab.scaled_mm(x8, w8.t(), sx, sw.t(), out_dtype=torch.float32)
    assert _rel(y, x.double() @ w.double().t()) < 0.08
    assert _rel(y, _block_reference(x8, w8.t(), sx, sw.t())) < 2e-3


@pytest.mark.gpu
def test_the_torch_operator_runs_eagerly_and_under_torch_compile():
    torch = _torch()
    import gemmlab.torch as gt
    a, b = _operands(200, 300, 512)
    sa, sb = _scales(200, 300, "row")
    eager = gt.scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
    compiled = torch.compile(lambda *x: gt.scaled_mm(*x, out_dtype=torch.float32), fullgraph=True)(a, b, sa, sb)
    assert torch.equal(eager, compiled)
    assert _rel(eager, _reference(a, b, sa, sb)) < 2e-3
    with pytest.raises(TypeError, match="gemmlab::scaled_mm: a is torch.float16"):
        gt.scaled_mm(a.half(), b, sa, sb)


@pytest.mark.gpu
def test_a_call_seen_before_takes_the_fast_path_with_the_same_result():
    torch = _torch()
    from gemmlab.core import scaled
    a, b = _operands(100, 200, 300)
    sa, sb = _scales(100, 200, "row")
    first = gemmlab.scaled_mm(a, b, sa, sb, check_finite=False)
    key = scaled._fast_key(a, b, sa, sb, None, None, False, "auto", None, None, None)
    assert key in scaled._FAST
    a2, _ = _operands(100, 200, 300, seed=5)   # new operands of the same signature
    again = gemmlab.scaled_mm(a2, b, sa, sb, check_finite=False)
    assert torch.equal(first, gemmlab.scaled_mm(a, b, sa, sb, check_finite=False))
    assert _rel(again, _reference(a2, b, sa, sb)) < 1e-2


@pytest.mark.gpu
def test_cupy_takes_uint8_codes_with_their_formats_and_quantizes_to_them():
    torch = _torch()
    cp = pytest.importorskip("cupy")
    a, b = _operands(70, 90, 300, "e4m3", "e5m2")
    sa, sb = _scales(70, 90, "row")
    want = gemmlab.scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
    ca, cb = cp.asarray(a.view(torch.uint8)), cp.asarray(b.view(torch.uint8))   # b: a column-major view
    got = gemmlab.scaled_mm(ca, cb, cp.asarray(sa), cp.asarray(sb), a_format="e4m3", b_format="e5m2",
                            out_dtype=cp.float32)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32
    assert torch.equal(torch.as_tensor(got, device="cuda"), want)
    x = cp.random.standard_normal((40, 200), dtype=cp.float32)
    q, s = gemmlab.quantize_fp8(x, "row")
    assert q.dtype == cp.uint8 and s.shape == (40, 1)
    tq, ts = gemmlab.quantize_fp8(torch.as_tensor(x, device="cuda"), "row")
    assert torch.equal(torch.as_tensor(q, device="cuda"), tq.view(torch.uint8))
