"""Rung 28 (decode_fp8): ``gemmlab.scaled_mm`` where M or N is at most 32.

CPU: the rule gives thin FP8 problems to rung 28 (tile, split in one cluster of 1, 2, 4 or 8
slices, none empty) and wider ones to rung 25; the rung refuses a workspace split; precompile builds
every configuration the rule chooses; its builds for sm_90a have no spills and hold the converted
FP8 mma (F2FP unpacks and HMMA.16816) and the cp.async ring. GPU: against a float64 product of the
dequantized operands for the three scalings, both formats, both precisions, M-thin and N-thin
problems, odd K, splits, every output dtype with a bias, NaN in the output before; the same bits on
every run (its accuracy beside torch._scaled_mm's: tests/test_fp8.py). The rung's generic verification
(every layout, alpha/beta, NaN-poisoned C) is tests/test_gpu_correctness.py's.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import pytest

import gemmlab
from gemmlab.core import decode
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.problem import KernelProblem
from gemmlab.core.registry import get
from gemmlab.core.rules import thin_choice
from gemmlab.core.variant import Variant

from test_fp8 import _block_reference, _block_scales, _operands, _reference, _rel, _scales, _torch


def _thin(M, N, K, precision="fp8"):
    kp = KernelProblem(M, N, K, 0, K, False, True, 0, K, True, True, 0, N, True, 1.0, 0.0)
    return thin_choice(kp, "fp8", "sm_90a", 132, precision, "bf16")


# ---- the rule ------------------------------------------------------------------------------------
def test_thin_fp8_problems_take_the_decode_rung_and_wider_ones_do_not():
    for M, N in ((1, 4096), (32, 14336), (4096, 16)):
        c = _thin(M, N, 4096)
        assert c.rung.slug == "decode_fp8" and "thin FP8 problem" in c.reason
        assert not c.rung.check_config(c.config, "fp8")
    assert _thin(33, 4096, 4096) is None and _thin(4096, 33, 4096) is None


def test_the_rule_splits_k_in_one_cluster_of_a_power_of_two_slices_none_empty():
    c = _thin(1, 4096, 4096)          # 64 tiles of 4 warps for 8 warps on each of 132 SMs: 4 slices
    assert (c.config["SPLITK"], c.config["SKCLUSTER"]) == (4, 1)
    assert _thin(8, 14336, 4096).config["SPLITK"] == 1     # 224 tiles fill the SMs
    assert _thin(16, 1024, 16384).config["SPLITK"] == 8    # 16 tiles: the largest cluster
    assert _thin(1, 1024, 1280).config["SPLITK"] == 2      # 5 k tiles of 256: 4 slices would leave one empty
    for ktiles, want in itertools.product(range(1, 40), range(1, 12)):
        s = decode.fp8_split(want, ktiles)
        assert s in decode.FP8_SPLITS and s <= max(1, want) and -(-ktiles // -(-ktiles // s)) == s


def test_the_decode_rung_refuses_a_workspace_split():
    r = get("decode_fp8")
    with pytest.raises(ValueError, match="SPLITK=4 needs SKCLUSTER=1"):
        r.config({"SPLITK": 4}, "fp8")
    assert not r.check_config(r.config({"SPLITK": 4, "SKCLUSTER": 1}, "fp8"), "fp8")


def test_precompile_builds_every_configuration_the_decode_rule_chooses():
    from gemmlab.core import precompile
    r = get("decode_fp8")
    vs = precompile.variants(kernels=["decode_fp8"], dtypes=["fp8"], arch="sm_90a", layouts=["rc"])
    tiles = decode.fp8_rule_tiles()
    for prec, scale in (("fp8", "tensor"), ("fp8", "row"), ("fp8", "block"), ("fp8_fast", "tensor")):
        built = [dict(v.config) for v in vs if v.precision == prec and v.epilogue.scale == scale]
        assert all(r.config(t, prec) in built for t in tiles) and all(not r.check_config(t, prec) for t in tiles)
    for M, N, K in ((1, 4096, 4096), (17, 1000, 3000), (5000, 24, 7000), (32, 200, 64)):
        assert _thin(M, N, K).config in [r.config(t, "fp8") for t in tiles]


# ---- the builds ----------------------------------------------------------------------------------
def _build(config=None, precision="fp8", formats=(), **epi):
    v = Variant.make("decode_fp8", "fp8", b_col=True, config=config, precision=precision,
                     epilogue=Epilogue(out="bf16", **epi))
    if formats:
        v = replace(v, formats=formats)
    ck = v.compile("sm_90a")
    from gemmlab.analysis import disasm
    return ck, disasm.sass_listing(ck.cubin)


@pytest.mark.parametrize("config", ["m8", "m32", "n8", "n32", {"BM": 16, "BN": 64, "SPLITK": 8, "SKCLUSTER": 1}])
@pytest.mark.parametrize("scale", ["tensor", "row", "block"])
def test_the_decode_rung_builds_without_spills_for_each_tile_and_scaling(config, scale):
    ck, sass = _build(config, scale=scale, bias="fp32")
    assert ck.spill_bytes == 0 and not re.search(r"\b(LDL|STL)\b", sass)
    ns = 8 if config in ("m8", "n8") else 16 if isinstance(config, dict) else 32
    # per chunk: 4 m-tiles x NS/8 n-tiles x 2 k32 mmas, each two HMMA.16816 on converted codes
    assert len(re.findall(r"HMMA\.16816\.F32\b", sass)) == 16 * ns // 8
    assert "F2FP.F16.E4M3.UNPACK_B" in sass and "LDGSTS.E.BYPASS" in sass and "LDS.128" in sass


def test_an_e5m2_operand_is_converted_by_its_own_unpack():
    _, sass = _build("m8", formats=("e4m3", "e5m2"), scale="tensor")
    assert "F2FP.F16.E5M2.UNPACK_B" in sass and "F2FP.F16.E4M3.UNPACK_B" in sass


def test_block_scales_multiply_each_chunks_sums_as_they_are_added():
    _, sass = _build("m8", scale="block")
    _, plain = _build("m8", scale="tensor")
    # 4 m-tiles x 1 n-tile x 4 accumulators: an FFMA each where the tensor-wise build adds nothing
    assert len(re.findall(r"\bFFMA\b", sass)) >= len(re.findall(r"\bFFMA\b", plain)) + 16


# ---- on the GPU ----------------------------------------------------------------------------------
# (M, N, K): M thin (1, 5, 17, 32) and N thin (24), K odd, below a chunk, across slices
SHAPES = [(1, 200, 300), (5, 1000, 1040), (17, 4096, 2047), (32, 520, 4000), (3000, 24, 1000), (1, 1, 1),
          (7, 4100, 16384)]


def _plan_rung():
    from gemmlab.core import scaled
    return scaled.plans()[-1].rung.slug


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("fast", [False, True], ids=["promoted", "fast"])
def test_decode_scaled_mm_matches_the_float64_product_of_the_dequantized_operands(mode, fast):
    if mode == "block" and fast:
        pytest.skip("block scales take no fast accumulation")
    torch = _torch()
    failures = []
    for (M, N, K), b_layout, (fa, fb) in itertools.product(SHAPES, ("col", "row"),
                                                          (("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2"))):
        a, b = _operands(M, N, K, fa, fb, b_layout)
        sa, sb = _block_scales(M, N, K) if mode == "block" else _scales(M, N, mode)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemmlab.scaled_mm(a, b, sa, sb, out=out, use_fast_accum=fast)
        ref = _block_reference(a, b, sa, sb) if mode == "block" else _reference(a, b, sa, sb)
        err = _rel(out, ref)
        if _plan_rung() != "decode_fp8" or not (torch.isfinite(out).all() and err < 1e-2):
            failures.append(f"{M}x{N}x{K} b {b_layout} {fa}x{fb} on {_plan_rung()}: rel {err:.2e}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [{"SPLITK": 1}, {"SPLITK": 3, "SKCLUSTER": 1}, {"SPLITK": 8, "SKCLUSTER": 1},
                                    {"BM": 64, "BN": 32, "WK": 2, "BK": 128, "DEPTH": 2},
                                    {"BM": 16, "BN": 128, "WK": 4, "BK": 256, "DEPTH": 4, "L2PF": 0}],
                         ids=["one-slice", "3-slices", "8-slices", "n32-wk2", "m16-wide-depth4"])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
def test_each_decode_configuration_writes_each_output_dtype_with_a_bias(config, out_dtype):
    torch = _torch()
    dt = getattr(torch, out_dtype)
    for M, N, K in ((3, 777, 2500), (29, 130, 700), (1000, 9, 1300)):
        a, b = _operands(M, N, K)
        sa, sb = _scales(M, N, "row")
        bias = torch.randn(N, device="cuda", dtype=dt)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        gemmlab.scaled_mm(a, b, sa, sb, bias=bias, out=out, kernel="decode_fp8", config=config)
        err = _rel(out, _reference(a, b, sa, sb, bias))
        assert torch.isfinite(out).all() and err < (2e-3 if out_dtype == "float32" else 1e-2), f"{M}x{N}x{K}: {err:.2e}"


@pytest.mark.gpu
def test_the_cluster_split_gives_the_same_bits_on_every_run():
    torch = _torch()
    a, b = _operands(4, 4096, 8192)
    sa, sb = _scales(4, 4096, "row")
    first = gemmlab.scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
    assert _plan_rung() == "decode_fp8"
    for _ in range(3):
        assert torch.equal(gemmlab.scaled_mm(a, b, sa, sb, out_dtype=torch.float32), first)



@pytest.mark.gpu
def test_the_ladder_bench_times_the_fp8_rungs_writing_bf16():
    """``gemmlab bench wgmma_fp8 decode_fp8 --dtype fp8``: each FP8 rung verified and timed at its
    shape (rung 28 at the thin rungs' shape), its C in bf16 as scaled_mm's default."""
    _torch()
    from gemmlab.bench import runner
    res = runner.run_bench(rungs=["wgmma_fp8", "decode_fp8"], shapes="512x16x1024", dtype="fp8", progress=False,
                           timing_settings=runner.timing.Settings(max_samples=5, min_samples=3, time_cap_s=0.2))
    mine = [r for r in res["results"] if r["kernel"] in ("wgmma_fp8", "decode_fp8")]
    assert {r["kernel"] for r in mine} == {"wgmma_fp8", "decode_fp8"}
    assert all(r["status"] == "ok" and r["verified"] and r["ms"] for r in mine), [(r["kernel"], r["note"]) for r in mine]
