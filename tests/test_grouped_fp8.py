"""Grouped FP8: rung 27 (wgmma_grouped_fp8), ``gemmlab.scaled_grouped_mm``,
``gemmlab.scaled_grouped_mm_masked`` and the ``gemmlab::scaled_grouped_mm`` operator.

CPU: the scalings told apart by the scales' shapes and the refusals (stand-in device arrays), the
rung's registry and rule, its builds for sm_90a (no spills; the FP8 QGMMA; block scales' FFMAs) and
the parameter block. GPU: every scaling and accumulation against per-group float64 products of the
dequantized operands, with empty groups, groups of one row, odd N and K, both layouts of the
weights, both FP8 formats, each output dtype with a bias and an activation; the masked form and
3-D x 3-D; a CUDA graph replayed with new offsets; the operator eager and under torch.compile;
CuPy's uint8 codes; accuracy against cuBLASLt's on the same data.
"""

from __future__ import annotations

import itertools
import random
import re
import struct

import pytest

import gemmlab
from gemmlab.core import scaled_grouped
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.families.hopper import GROUP_CAPS, grouped_fp8_config, grouped_fp8_smem
from gemmlab.core.groups import Groups
from gemmlab.core.params import Params
from gemmlab.core.problem import KernelProblem
from gemmlab.core.registry import MAX_SMEM_PER_BLOCK, get
from gemmlab.core.scaled_grouped import check_group_scales
from gemmlab.core.variant import Variant

from test_bad_input import device_fakes

RUNG = "wgmma_grouped_fp8"


@pytest.fixture()
def fakes(monkeypatch):
    return device_fakes(monkeypatch, "|u1")


def _f32(fakes, *shape, **kw):
    return fakes(*shape, typestr="<f4", **kw)


# ---- the contract, checked before the GPU is touched ------------------------------------------------
def test_the_three_scalings_are_told_apart_by_the_scales_shapes(fakes):
    f = lambda *s, **k: _f32(fakes, *s, **k)   # noqa: E731
    assert check_group_scales(f(1), f(3), (10,), 3, 16, 300, 0, "cai").mode == "tensor"
    assert check_group_scales(f(1), f(3, 1, 1), (10,), 3, 16, 300, 0, "cai").mode == "tensor"
    assert check_group_scales(f(10), f(3, 16), (10,), 3, 16, 300, 0, "cai").mode == "row"
    assert check_group_scales(f(10, 1), f(3, 1, 16), (10,), 3, 16, 300, 0, "cai").mode == "row"
    assert check_group_scales(f(4, 5), f(3, 200), (4, 5), 3, 200, 300, 0, "cai").mode == "row"
    sc = check_group_scales(f(10, 3), f(3, 3, 2), (10,), 3, 200, 300, 0, "cai")
    assert sc.mode == "block" and sc.strides == (3, 1, 2, 1)


def test_block_scales_read_each_groups_grid_in_either_layout_and_the_rows_of_3_d_tokens_as_one_run(fakes):
    f = lambda *s, **k: _f32(fakes, *s, **k)   # noqa: E731
    sc = check_group_scales(f(10, 3, strides=(1, 10)), f(3, 3, 2, strides=(6, 1, 3)), (10,), 3, 200, 300, 0, "cai")
    assert sc.strides == (1, 10, 1, 3)   # an M-contiguous scale_a (DeepGEMM's), each scale_b grid transposed
    sc = check_group_scales(f(3, 4, 3), f(3, 3, 2), (3, 4), 3, 200, 300, 0, "cai")
    assert sc.strides == (3, 1, 2, 1)
    with pytest.raises(ValueError, match="each group's 3x2 grid must be dense"):
        check_group_scales(f(10, 3), f(3, 3, 2, strides=(12, 2, 1)), (10,), 3, 200, 300, 0, "cai")
    with pytest.raises(ValueError, match="its groups' rows must follow one another"):
        check_group_scales(f(3, 4, 3, strides=(24, 3, 1)), f(3, 3, 2), (3, 4), 3, 200, 300, 0, "cai")


def test_scales_of_no_known_scaling_are_refused_naming_the_choices(fakes):
    f = lambda *s: _f32(fakes, *s)   # noqa: E731
    with pytest.raises(ValueError, match=r"scale_a \(10,\) and scale_b \(16,\) name no scaling.*tensor-wise.*"
                                         r"row-wise.*block-wise"):
        check_group_scales(f(10), f(16), (10,), 3, 16, 300, 0, "cai")


def test_a_strided_row_wise_scale_is_refused_with_the_fix(fakes):
    with pytest.raises(ValueError, match=r"scale_b has strides .*pass scale_b.contiguous\(\)"):
        check_group_scales(_f32(fakes, 10), _f32(fakes, 3, 16, strides=(32, 1)), (10,), 3, 16, 300, 0, "cai")


def test_operands_must_be_fp8_with_3_d_weights_of_matching_k(fakes):
    sa, sb = _f32(fakes, 1), _f32(fakes, 2)
    with pytest.raises(TypeError, match="multiplies FP8 operands"):
        gemmlab.scaled_grouped_mm(fakes(10, 32, typestr="<f2"), fakes(2, 32, 16), sa, sb, [5, 10])
    with pytest.raises(ValueError, match=r"b must be 3-D \(G, K, N\)"):
        gemmlab.scaled_grouped_mm(fakes(10, 32), fakes(32, 16), sa, sb, [5, 10])
    with pytest.raises(ValueError, match="a.shape\\[1\\] must equal b.shape\\[1\\]"):
        gemmlab.scaled_grouped_mm(fakes(10, 32), fakes(2, 48, 16), sa, sb, [5, 10])
    with pytest.raises(ValueError, match="needs offs"):
        gemmlab.scaled_grouped_mm(fakes(10, 32), fakes(2, 32, 16), sa, sb)


def test_block_scales_take_no_fast_accumulation(fakes):
    with pytest.raises(ValueError, match="use_fast_accum"):
        gemmlab.scaled_grouped_mm(fakes(10, 300), fakes(2, 300, 16), _f32(fakes, 10, 3), _f32(fakes, 2, 3, 1), [5, 10],
                                  use_fast_accum=True, out=fakes(10, 16, typestr="<f2"))


def test_a_bias_is_one_row_of_n_per_group_of_the_output_dtype_or_float32(fakes):
    a, b, sa, sb = fakes(10, 32), fakes(2, 32, 16), _f32(fakes, 1), _f32(fakes, 2)
    out = fakes(10, 16, typestr="<f2")
    with pytest.raises(ValueError, match=r"bias has shape \(16,\); the groups take one row of N per group, \(2, 16\)"):
        gemmlab.scaled_grouped_mm(a, b, sa, sb, [5, 10], bias=fakes(16, typestr="<f2"), out=out, out_dtype="float16")
    with pytest.raises(TypeError, match="bias is fp64|unsupported dtype"):
        gemmlab.scaled_grouped_mm(a, b, sa, sb, [5, 10], bias=fakes(2, 16, typestr="<f8"), out=out,
                                  out_dtype="float16")


def test_the_masked_form_takes_3_d_tokens_of_matching_groups(fakes):
    sa, sb = _f32(fakes, 1), _f32(fakes, 2)
    with pytest.raises(ValueError, match=r"the masked form takes a \(G, M_max, K\)"):
        gemmlab.scaled_grouped_mm_masked(fakes(10, 32), fakes(2, 32, 16), sa, sb, [1, 2])
    with pytest.raises(ValueError, match="shape mismatch"):
        gemmlab.scaled_grouped_mm_masked(fakes(3, 10, 32), fakes(2, 32, 16), sa, sb, [1, 2, 3])


# ---- the rung ------------------------------------------------------------------------------------------
def test_the_rule_promotes_in_128x128_tiles_and_sums_fast_in_128x256_ones_at_many_waves():
    cfg, why = grouped_fp8_config(4096, 14336, 4096, 8, 132, "fp8")
    assert (cfg["BN"], cfg["BK"], cfg["GROUP_CAP"]) == (128, 128, 8) and "promoted" in why
    cfg, _ = grouped_fp8_config(4096, 14336, 4096, 8, 132, "fp8_fast")
    assert (cfg["BN"], cfg["DEFER"]) == (256, 1)
    cfg, _ = grouped_fp8_config(4096, 14336, 4096, 8, 132, "fp8_fast", block_scales=True)
    assert cfg["BN"] == 128   # block scales are promoted: a tile of at most 64x128 per warpgroup
    assert grouped_fp8_config(4096, 64, 4096, 8, 132, "fp8")[0]["BN"] == 64


def test_the_rule_takes_the_narrower_tile_where_its_whole_waves_take_less_time():
    # 5 row tiles x 16 column tiles = 80 units of 128x128 in one wave; 128x64's 160 take two
    assert grouped_fp8_config(354, 2048, 12288, 4, 132, "fp8")[0]["BN"] == 128
    # 40 units of 128x256 or 80 of 128x128: one wave either way, the narrower one half as long
    assert grouped_fp8_config(354, 2048, 12288, 4, 132, "fp8_fast")[0]["BN"] == 128
    # 120 units of 128x256 in one wave against 240 of 128x128 in two: the wider tile
    assert grouped_fp8_config(4540, 768, 12288, 8, 132, "fp8_fast")[0]["BN"] == 256


def test_the_rule_lets_a_warpgroup_sit_out_tiles_past_its_groups_end_at_any_group_size():
    for rows, groups in ((4096, 8), (4096, 128)):
        for precision in ("fp8", "fp8_fast"):
            cfg, why = grouped_fp8_config(rows, 14336, 4096, groups, 132, precision)
            assert cfg["WGSKIP"] == 1 and "sits the tile out" in why


@pytest.mark.parametrize("precision", ["fp8", "fp8_fast"])
def test_the_rule_leaves_room_for_the_group_table_in_shared_memory(precision):
    r = get(RUNG)
    for groups in (1, 100, GROUP_CAPS[-1]):
        cfg, _ = grouped_fp8_config(8192, 4096, 4096, groups, 132, precision)
        assert grouped_fp8_smem(cfg) <= MAX_SMEM_PER_BLOCK and not r.check_config(cfg, precision)


def test_the_registry_refuses_groups_over_k_and_a_promoted_tile_its_registers_cannot_hold():
    r = get(RUNG)
    assert any("groups of rows only" in m for m in r.check_config(dict(r.config(None), GROUP_K=1)))
    assert any("at most 64x192" in m for m in r.check_config(dict(r.config(None), BN=256, STAGES=4), "fp8"))
    assert any("rung 25's promoted tile" in m for m in r.check_config(dict(r.config(None), BN=192, STAGES=5), "fp8"))
    assert not r.check_config(dict(r.config(None, "fp8_fast")), "fp8_fast")


def test_the_parameter_block_holds_the_groups_then_the_bias_then_the_scales():
    kp = KernelProblem(64, 64, 128, 0, 128, False, True, 0, 128, True, True, 0, 64, True, 1.0, 0.0)
    p = Params(kp, False, 3, bias=True, scales=True, scale_strides=(3, 1, 2, 1), groups=Groups(5, 8192, 0))
    assert p.groups_at == 512 and p.bias_at == 552 and p.scales_at == 560
    p.epilogue(0x10, 0, (0x20, 0x30))
    assert struct.unpack_from("<QQQ4i", p.buffer, p.bias_at) == (0x10, 0x20, 0x30, 3, 1, 2, 1)


def _build(precision="fp8", scale="row", **kw):
    from gemmlab.analysis import disasm
    r = get(RUNG)
    epi = {k: kw.pop(k) for k in ("bias", "activation", "out") if k in kw}
    v = Variant.make(r, "fp8", b_col=True, precision=precision, config=dict(r.config(None, precision), GROUP_CAP=8, **kw),
                     epilogue=Epilogue(epi.get("activation"), epi.get("bias"), False, epi.get("out", "bf16"),
                                       scale=scale))
    ck = v.compile("sm_90a")
    return ck, disasm.sass_listing(ck.cubin)


@pytest.mark.parametrize("precision,scale", [("fp8", "tensor"), ("fp8", "row"), ("fp8", "block"), ("fp8_fast", "row")])
def test_the_rung_builds_without_spills_and_holds_its_claimed_instructions(precision, scale):
    ck, sass = _build(precision, scale)
    assert ck.spill_bytes == 0 and "LDL" not in sass and "STL" not in sass
    for claim in get(RUNG).sass_claims:
        assert claim in sass, claim
    assert re.search(r"QGMMA\.64x\d+x32\.F32\.E4M3\.E4M3", sass)


def test_the_rung_builds_a_fused_bias_and_activation_and_a_stream_k_tail_without_spills():
    assert _build("fp8", "row", bias="fp32", activation="gelu_tanh", out="fp32", BN=64, STAGES=8)[0].spill_bytes == 0
    assert _build("fp8", "block", STREAMK=1)[0].spill_bytes == 0


def test_block_scales_multiply_each_k_tiles_partial_sums_as_they_are_added():
    ck, sass = _build("fp8", "block")
    assert len(re.findall(r"\bFFMA\b", sass)) >= 64
    assert "C7514" not in ck.log   # ptxas did not serialize the wgmmas


# ---- on the GPU ------------------------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _split(T, G, rnd):
    """Uneven cumulative ends of T rows over G groups, with an empty group and a group of one row."""
    cuts = sorted(rnd.randint(0, T) for _ in range(G - 1))
    if G > 3:
        cuts[1] = cuts[0]
        cuts[2] = min(cuts[1] + 1, T)
        cuts = sorted(cuts)
    return cuts + [T]


def _operands(T, G, N, K, fmt_b="e4m3", b_layout="col", seed=0):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    fmt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    a = (torch.randn(T, K, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    w = (torch.randn(G, N, K, device="cuda", generator=g) * 2).to(fmt[fmt_b])
    b = w.transpose(-2, -1) if b_layout == "col" else w.transpose(-2, -1).contiguous()
    return a, b


def _scales(mode, rows, G, N, K, seed=1):
    """scale_a along ``rows`` (a tuple) and each group's scale_b, of ``mode``."""
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    rand = lambda *s: torch.rand(*s, device="cuda", generator=g) + 0.5   # noqa: E731
    if mode == "tensor":
        return rand(()), rand(G)
    if mode == "row":
        return rand(*rows), rand(G, N)
    return rand(*rows, -(-K // 128)), rand(G, -(-K // 128), -(-N // 128))


def _dequantized_rows(x, s, K):
    """float64 rows of x (R, K) times their scales: one value, one per row, or 1x128 blocks."""
    if s.dim() == 0:
        return x.double() * s.double()
    if s.dim() == 1:
        return x.double() * s.double()[:, None]
    return x.double() * s.double().repeat_interleave(128, dim=1)[:, :K]


def _dequantized_weights(w, s, K, N):
    """float64 (K, N) weights times their group's scale: one value, one per column, or 128x128 blocks."""
    if s.dim() == 0:
        return w.double() * s.double()
    if s.dim() == 1:
        return w.double() * s.double()[None, :]
    return w.double() * s.double().repeat_interleave(128, dim=0)[:K].repeat_interleave(128, dim=1)[:, :N]


def _reference_rows(a, b, offs, sa, sb, bias=None):
    """Per-group float64 products of the dequantized groups of rows (and each group's bias row)."""
    torch = _torch()
    T, K = a.shape
    N = b.shape[2]
    out = torch.zeros(T, N, dtype=torch.float64, device="cuda")
    start = 0
    for g, end in enumerate(offs):
        if end > start:
            rows_s = sa if sa.dim() == 0 else sa[start:end]
            out[start:end] = _dequantized_rows(a[start:end], rows_s, K) @ _dequantized_weights(b[g], sb[g], K, N)
            if bias is not None:
                out[start:end] += bias[g].double()
        start = end
    return out


def _rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm().clamp(min=1e-300))


SHAPES = [(1, 16, 16, 1), (1, 1, 211, 2), (37, 93, 211, 4), (300, 264, 130, 7), (1000, 520, 384, 16),
          (257, 1000, 72, 33)]


@pytest.mark.gpu
@pytest.mark.parametrize("mode,fast", [("tensor", False), ("row", False), ("row", True), ("block", False)],
                         ids=["tensor", "row", "row-fast", "block"])
def test_scaled_grouped_mm_matches_per_group_float64_products_of_the_dequantized_operands(mode, fast):
    torch = _torch()
    rnd = random.Random(5)
    failures = []
    for (T, N, K, G), b_layout, fmt_b in itertools.product(SHAPES, ("col", "row"), ("e4m3", "e5m2")):
        a, b = _operands(T, G, N, K, fmt_b, b_layout, seed=T + N)
        sa, sb = _scales(mode, (T,), G, N, K, seed=K)
        offs = _split(T, G, rnd)
        out = gemmlab.scaled_grouped_mm(a, b, sa, sb, torch.tensor(offs, dtype=torch.int32, device="cuda"),
                                        use_fast_accum=fast)
        assert out.shape == (T, N) and out.dtype == torch.bfloat16
        err = _rel(out, _reference_rows(a, b, offs, sa, sb))
        if not (torch.isfinite(out).all() and err < 1e-2):
            failures.append(f"{T}x{N}x{K} G {G} b {b_layout} {fmt_b}: rel {err:.2e} offs {offs}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_each_output_dtype_is_written_with_a_groups_bias_and_an_activation(out_dtype):
    torch = _torch()
    T, N, K, G = 515, 136, 256, 9
    a, b = _operands(T, G, N, K)
    sa, sb = _scales("row", (T,), G, N, K)
    bias = torch.randn(G, N, device="cuda")
    offs = _split(T, G, random.Random(1))
    od = getattr(torch, out_dtype)
    out = gemmlab.scaled_grouped_mm(a, b, sa, sb, offs, bias=bias, activation="relu", out_dtype=od)
    assert out.dtype == od
    assert _rel(out, _reference_rows(a, b, offs, sa, sb, bias).clamp(min=0)) < (2e-3 if out_dtype == "float32" else 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("mode,fast", [("row", False), ("row", True), ("block", False)],
                         ids=["promoted", "fast", "block"])
def test_a_warpgroup_whose_rows_lie_past_its_groups_end_sits_the_tile_out_with_the_same_bits(mode, fast):
    """WGSKIP=1 with each of the FP8 mainloops (a promoted or block-scaled k tile releases its stage
    within it, a fast one a k tile later): the stored rows are the bits of WGSKIP=0 and the float64
    product's, and no row outside the groups is written."""
    torch = _torch()
    counts = [130, 1, 260, 70, 0, 200, 64, 390, 3]
    offs = list(itertools.accumulate(counts))
    T, N, K, G = offs[-1], 520, 640, len(counts)
    a, b = _operands(T, G, N, K)
    sa, sb = _scales(mode, (T,), G, N, K)
    outs = []
    for skip in (1, 0):
        buf = torch.full((T + 1, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemmlab.scaled_grouped_mm(a, b, sa, sb, offs, use_fast_accum=fast, out=buf[:T], config={"WGSKIP": skip})
        assert scaled_grouped.plans()[-1].variant.cfg["WGSKIP"] == skip
        assert torch.isnan(buf[T]).all()
        outs.append(buf[:T])
    assert torch.equal(outs[0], outs[1])
    assert _rel(outs[0], _reference_rows(a, b, offs, sa, sb)) < 1e-2


@pytest.mark.gpu
def test_every_row_of_every_group_is_written_and_no_other_memory():
    torch = _torch()
    T, N, K, G = 515, 136, 200, 9
    a, b = _operands(T, G, N, K)
    sa, sb = _scales("row", (T,), G, N, K)
    offs = _split(T, G, random.Random(2))
    buf = torch.full((T + 2, N + 8), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = buf[1:T + 1, :N]
    gemmlab.scaled_grouped_mm(a, b, sa, sb, offs, out=out)
    assert torch.isfinite(out).all()
    assert torch.isnan(buf[0]).all() and torch.isnan(buf[T + 1]).all() and torch.isnan(buf[:, N:]).all()
    assert _rel(out, _reference_rows(a, b, offs, sa, sb)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["row", "block"])
def test_the_masked_form_writes_the_counted_rows_of_each_group_only(mode):
    torch = _torch()
    G, R, N, K = 6, 200, 136, 264
    a, b = _operands(G * R, G, N, K)
    a = a.reshape(G, R, K)
    sa, sb = _scales(mode, (G, R), G, N, K)
    counts = [0, 1, 200, 129, 128, 77]
    out = torch.full((G, R, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemmlab.scaled_grouped_mm_masked(a, b, sa, sb, torch.tensor(counts, dtype=torch.int32, device="cuda"), out=out)
    for g, c in enumerate(counts):
        if c:
            ref = _dequantized_rows(a[g, :c], sa[g, :c], K) @ _dequantized_weights(b[g], sb[g], K, N)
            assert _rel(out[g, :c], ref) < 1e-2
        assert torch.isnan(out[g, c:]).all()


@pytest.mark.gpu
def test_3_d_by_3_d_is_every_group_full():
    torch = _torch()
    G, M, N, K = 5, 70, 40, 96
    a, b = _operands(G * M, G, N, K)
    a = a.reshape(G, M, K)
    sa, sb = _scales("row", (G, M), G, N, K)
    out = gemmlab.scaled_grouped_mm(a, b, sa, sb)
    for g in range(G):
        ref = _dequantized_rows(a[g], sa[g], K) @ _dequantized_weights(b[g], sb[g], K, N)
        assert _rel(out[g], ref) < 1e-2


@pytest.mark.gpu
def test_a_cuda_graph_replays_the_launch_with_new_offsets():
    torch = _torch()
    T, N, K, G = 1024, 256, 512, 8
    a, b = _operands(T, G, N, K)
    sa, sb = _scales("row", (T,), G, N, K)
    offs = torch.tensor(_split(T, G, random.Random(4)), dtype=torch.int32, device="cuda")
    out = gemmlab.scaled_grouped_mm(a, b, sa, sb, offs)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            gemmlab.scaled_grouped_mm(a, b, sa, sb, offs, out=out, check=False, check_finite=False)
    for seed in (5, 9):
        new = _split(T, G, random.Random(seed))
        offs.copy_(torch.tensor(new, dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(out, _reference_rows(a, b, new, sa, sb)) < 1e-2


@pytest.mark.gpu
def test_a_non_finite_scale_is_refused_naming_it():
    torch = _torch()
    a, b = _operands(64, 2, 32, 64)
    sa, sb = _scales("row", (64,), 2, 32, 64)
    sb[1, 3] = float("inf")
    with pytest.raises(ValueError, match="scale_b holds a value that is not finite"):
        gemmlab.scaled_grouped_mm(a, b, sa, sb, [30, 64])


@pytest.mark.gpu
def test_promoted_accuracy_is_no_worse_than_cublaslt_on_the_same_data():
    torch = _torch()
    T, N, K, G = 512, 256, 4096, 4
    a, b = _operands(T, G, N, K)
    sa, sb = _scales("row", (T,), G, N, K)
    offs = [128, 256, 384, 512]
    ref = _reference_rows(a, b, offs, sa, sb)
    ours = _rel(gemmlab.scaled_grouped_mm(a, b, sa, sb, offs, out_dtype=torch.float32), ref)
    theirs = torch.empty(T, N, device="cuda", dtype=torch.float32)
    for g, s in enumerate(range(0, T, 128)):
        theirs[s:s + 128] = torch._scaled_mm(a[s:s + 128], b[g], sa[s:s + 128, None], sb[g][None, :],
                                             out_dtype=torch.float32)
    assert ours <= 1.05 * _rel(theirs, ref) + 1e-6


@pytest.mark.gpu
def test_the_torch_operator_runs_eagerly_and_under_torch_compile():
    torch = _torch()
    import gemmlab.torch as gt
    T, N, K, G = 300, 128, 256, 4
    a, b = _operands(T, G, N, K)
    sa, sb = _scales("row", (T,), G, N, K)
    offs = torch.tensor(_split(T, G, random.Random(3)), dtype=torch.int32, device="cuda")
    eager = gt.scaled_grouped_mm(a, b, sa, sb, offs)
    ref = _reference_rows(a, b, offs.tolist(), sa, sb)
    assert _rel(eager, ref) < 1e-2
    compiled = torch.compile(lambda *x: gt.scaled_grouped_mm(*x), fullgraph=True)(a, b, sa, sb, offs)
    assert torch.equal(compiled, eager)


@pytest.mark.gpu
def test_cupy_takes_uint8_codes_with_their_formats():
    torch = _torch()
    cp = pytest.importorskip("cupy")
    T, N, K, G = 200, 64, 128, 3
    a, b = _operands(T, G, N, K, fmt_b="e5m2")
    sa, sb = _scales("tensor", (T,), G, N, K)
    offs = [50, 50, 200]
    ref = _reference_rows(a, b, offs, sa, sb)
    codes = lambda x: cp.asarray(x.view(torch.uint8))   # noqa: E731
    out = gemmlab.scaled_grouped_mm(codes(a), codes(b), cp.asarray(sa), cp.asarray(sb), offs, b_format="e5m2",
                                    out_dtype="float32")
    assert _rel(torch.as_tensor(out, device="cuda"), ref) < 2e-3
