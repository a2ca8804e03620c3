"""Grouped GEMM: rung 26 (wgmma_grouped), ``gemmlab.grouped_mm``, ``gemmlab.grouped_mm_masked`` and
the ``gemmlab::grouped_mm`` operator.

CPU: the offsets and counts contract and its refusals (stand-in device arrays, as
tests/test_bad_input.py), the bound on the units any group sizes make (the grid), the rung's
registry, configuration rule and parameter block, and its builds for sm_90a (no spills; the
HGMMA, TMA loads and stores in the SASS). GPU: every form against per-group float64 products, with
empty groups, groups of one row, odd N and K, both layouts of the weights, each output dtype; the
masked form; a CUDA graph replayed with new offsets; the backward; torch.compile; CuPy. The rung's
generic verification as one group (every layout, alpha/beta, NaN-poisoned C) is
tests/test_gpu_correctness.py's, which covers every rung.
"""

from __future__ import annotations

import itertools
import random

import pytest

import gemmlab
from gemmlab.core import grouped, grouped_args
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.families.hopper import GROUP_CAPS, grouped_config, grouped_smem
from gemmlab.core.groups import Groups
from gemmlab.core.params import Params
from gemmlab.core.problem import KernelProblem
from gemmlab.core.registry import MAX_SMEM_PER_BLOCK, get
from gemmlab.core.variant import Variant

from test_bad_input import device_fakes


@pytest.fixture()
def fakes(monkeypatch):
    return device_fakes(monkeypatch, "<f2")


# ---- the contract, checked before the GPU is touched ------------------------------------------------
def test_offsets_must_not_decrease_and_must_end_at_the_rows():
    grouped_args.check_offsets([0, 3, 3, 10], 10)
    with pytest.raises(ValueError, match=r"offs\[2\] = 2 is below offs\[1\] = 3"):
        grouped_args.check_offsets([0, 3, 2, 10], 10)
    with pytest.raises(ValueError, match=r"offs\[0\] = -1 is negative"):
        grouped_args.check_offsets([-1, 10], 10)
    with pytest.raises(ValueError, match=r"offs\[-1\] = 9 but a has 10 rows"):
        grouped_args.check_offsets([4, 9], 10)


def test_counts_must_lie_within_the_rows_of_a_group():
    grouped_args.check_counts([0, 5, 7], 7)
    with pytest.raises(ValueError, match=r"counts\[1\] = 8 is outside 0..7"):
        grouped_args.check_counts([0, 8], 7)
    with pytest.raises(ValueError, match=r"counts\[0\] = -1"):
        grouped_args.check_counts([-1], 7)


def test_host_offsets_of_floats_or_the_wrong_length_are_refused(fakes):
    a, b = fakes(10, 32), fakes(2, 32, 16)
    with pytest.raises(ValueError, match="offs has 3 entries; b has 2 groups"):
        gemmlab.grouped_mm(a, b, [1, 2, 10])
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match="offsets are float64"):
        gemmlab.grouped_mm(a, b, np.array([5.0, 10.0]))


def test_operands_must_be_16_bit_of_one_dtype_with_matching_k(fakes):
    with pytest.raises(TypeError, match="float16 or bfloat16 operands, got fp32"):
        gemmlab.grouped_mm(fakes(10, 32, typestr="<f4"), fakes(2, 32, 16, typestr="<f4"), [5, 10])
    with pytest.raises(TypeError, match="mixed dtypes"):
        gemmlab.grouped_mm(fakes(10, 32), fakes(2, 32, 16, typestr="<f4"), [5, 10])
    with pytest.raises(ValueError, match=r"a.shape\[1\] must equal b.shape\[1\]"):
        gemmlab.grouped_mm(fakes(10, 32), fakes(2, 31, 16), [5, 10])


def test_the_forms_are_told_apart_by_the_dimensions_and_offs(fakes):
    with pytest.raises(ValueError, match="pass offs"):
        gemmlab.grouped_mm(fakes(10, 32), fakes(2, 32, 16))
    with pytest.raises(ValueError, match="3-D a and b are groups of equal size: pass no offs"):
        gemmlab.grouped_mm(fakes(2, 5, 32), fakes(2, 32, 16), [5, 10])
    with pytest.raises(ValueError, match="a has 3 groups and b 2"):
        gemmlab.grouped_mm(fakes(3, 5, 32), fakes(2, 32, 16))
    with pytest.raises(ValueError, match="grouped_mm takes 2-D x 3-D"):
        gemmlab.grouped_mm(fakes(2, 5, 32), fakes(32, 16), [5, 10])


def test_device_offsets_must_be_int32_arrays_of_a_library(fakes):
    with pytest.raises(TypeError, match="offs must be a CuPy or PyTorch int32 array on the device, or host ints"):
        gemmlab.grouped_mm(fakes(10, 32), fakes(2, 32, 16), fakes(2, typestr="<i4"))


def test_a_bias_is_one_row_of_n_per_group_of_the_operands_dtype_or_float32(fakes):
    a, b = fakes(10, 32), fakes(2, 32, 16)
    with pytest.raises(ValueError, match=r"bias has shape \(16,\); the groups take one row of N per group, \(2, 16\)"):
        gemmlab.grouped_mm(a, b, [5, 10], bias=fakes(16))
    with pytest.raises(TypeError, match="bias is fp64|unsupported dtype"):
        gemmlab.grouped_mm(a, b, [5, 10], bias=fakes(2, 16, typestr="<f8"))
    with pytest.raises(ValueError, match="its rows must be contiguous"):
        gemmlab.grouped_mm(a, b, [5, 10], bias=fakes(2, 16, strides=(32, 1)))


def test_the_form_over_k_takes_no_bias(fakes):
    with pytest.raises(ValueError, match="takes no bias or activation"):
        gemmlab.grouped_mm(fakes(8, 32), fakes(32, 16), [10, 32], bias=fakes(2, 16))


def test_the_masked_form_takes_3_d_operands_of_matching_groups(fakes):
    with pytest.raises(ValueError, match=r"the masked form takes a \(G, M_max, K\)"):
        gemmlab.grouped_mm_masked(fakes(10, 32), fakes(2, 32, 16), [1, 2])
    with pytest.raises(ValueError, match="shape mismatch"):
        gemmlab.grouped_mm_masked(fakes(3, 10, 32), fakes(2, 32, 16), [1, 2, 3])


def test_the_expected_rows_of_the_masked_form_are_an_int_within_its_rows_per_group():
    assert grouped_args.expected(None, 300) == 300 and grouped_args.expected(40, 300) == 40
    assert grouped_args.expected(0, 300) == 1   # the rule's estimate: at least a row per group
    with pytest.raises(ValueError, match=r"expected_rows = 301 is outside 0..300"):
        grouped_args.expected(301, 300)
    with pytest.raises(TypeError, match="expected_rows must be an int"):
        grouped_args.expected(2.5, 300)


# ---- the grid: the most units any group sizes make ----------------------------------------------------
def test_the_unit_bound_holds_for_any_group_sizes_and_is_exact_for_the_masked_form():
    rnd = random.Random(3)
    for _ in range(300):
        cfg = {"BM": 128, "BN": rnd.choice((64, 128, 256)), "CLUSTER": rnd.choice((1, 2))}
        G, N = rnd.randint(1, 40), rnd.randint(1, 3000)
        rows = [rnd.choice((0, 1, rnd.randint(0, 700))) for _ in range(G)]
        unit = cfg["BM"] * cfg["CLUSTER"]
        units = sum(-(-r // unit) for r in rows) * -(-N // cfg["BN"])
        assert units <= Groups(G, 8, 0).units_bound(sum(rows), N, cfg)
        R = max(rows)
        assert Groups(G, 8, R).units_bound(G * R, N, cfg) == G * -(-R // unit) * -(-N // cfg["BN"])


def test_a_plain_call_is_one_full_group_with_a_vector_multiple_weight_stride():
    kp = KernelProblem(300, 77, 129, 0, 129, False, False, 0, 77, False, False, 0, 77, False, 1.0, 0.0)
    g = Groups.single(kp, 2)
    assert (g.count, g.rows_per, g.cap) == (1, 300, 1)
    assert g.stride * 2 % 16 == 0 and g.stride >= 129 * 77


def test_the_table_capacity_is_the_least_power_of_two_that_holds_the_groups():
    assert [Groups(n, 8).cap for n in (1, 2, 3, 8, 9, 128, 129, 4096)] == [1, 2, 4, 8, 16, 128, 256, 4096]
    with pytest.raises(ValueError, match="the grouped kernel takes 1 to 4096"):
        Groups(GROUP_CAPS[-1] + 1, 8)


# ---- the rung ------------------------------------------------------------------------------------------
def test_the_rule_leaves_room_for_the_group_table_in_shared_memory():
    for G in (1, 8, 64, 128, 256, 1024, 4096):
        cfg, why = grouped_config(4096, 768, 2048, G, 132)
        assert cfg["GROUP_CAP"] >= G and grouped_smem(cfg) <= MAX_SMEM_PER_BLOCK
        assert f"{G} groups" in why and "stages beside a table" in why
        assert not get("wgmma_grouped").check_config(get("wgmma_grouped").config(cfg))


def test_the_rule_takes_a_stream_k_tail_for_128x256_units_over_long_k_only():
    r = get("wgmma_grouped")
    long_k, _ = grouped_config(4096, 4096, 14336, 8, 132)
    short_k, _ = grouped_config(8192, 2816, 2048, 16, 132)
    narrow, _ = grouped_config(4096, 128, 14336, 128, 132)
    few_long, _ = grouped_config(2833, 2432, 4864, 4, 132)      # 2 waves of 128x256 units, K long: the tail
    few_short, _ = grouped_config(4096, 768, 2048, 128, 132)    # 3 waves, K short: 128x128 units
    assert (long_k["BN"], long_k["STREAMK"], long_k["DEFER"]) == (256, 1, 0)
    assert (short_k["BN"], short_k["STREAMK"]) == (256, 0)
    assert (narrow["BN"], narrow["STREAMK"]) == (128, 0)
    assert (few_long["BN"], few_long["STREAMK"]) == (256, 1) and (few_short["BN"], few_short["STREAMK"]) == (128, 0)
    assert grouped_config(2833, 2432, 4864, 4, 132, fused=True)[0]["BN"] == 128
    assert not any(r.check_config(r.config(c)) for c in (long_k, short_k, narrow, few_long, few_short))


def test_the_rule_lets_a_warpgroup_sit_out_tiles_only_where_groups_average_under_a_row_tile():
    few_rows, why = grouped_config(4096, 768, 2048, 128, 132)      # 32 rows per group
    many_rows, why_not = grouped_config(4096, 14336, 4096, 8, 132)   # 512
    assert few_rows["WGSKIP"] == 1 and "sits the tile out" in why
    assert many_rows["WGSKIP"] == 0 and "sits the tile out" not in why_not
    assert grouped_config(8192, 2048, 7168, 64, 132)[0]["WGSKIP"] == 0   # 128: a whole row tile
    assert get("wgmma_grouped").params["WGSKIP"] == 0 and get("wgmma_grouped_fp8").params["WGSKIP"] == 1


def test_a_fused_epilogue_takes_no_stream_k_tail_so_its_128x256_build_does_not_spill():
    r = get("wgmma_grouped")
    cfg, _ = grouped_config(4096, 4096, 14336, 8, 132, fused=True)
    assert (cfg["BN"], cfg["STREAMK"]) == (256, 0)
    v = Variant.make(r, "bf16", b_col=True, config=cfg, epilogue=Epilogue("gelu_tanh", "same"))
    assert v.compile("sm_90a").spill_bytes == 0


def test_auto_finds_a_tuned_layer_nearby_of_this_gpu_and_dtype(tmp_path, monkeypatch):
    import json

    from gemmlab.core import dispatch

    path = tmp_path / "tuned.json"
    entry = {"dtype": "bf16", "shape": [8, 4096, 4096, 14336], "layout": "rc", "rung": "wgmma_grouped"}
    path.write_text(json.dumps({"format": 1, "entries": [
        {**entry, "config": {"BN": 128, "STAGES": 6, "DEFER": 0}, "gpu_name": "GPU A"},
        {**entry, "config": {"BN": 256}, "gpu_name": "GPU B"},
        {**entry, "shape": [4096, 4096, 14336], "rung": "wgmma_ws", "config": {}, "gpu_name": "GPU A"}]}))
    monkeypatch.setattr(dispatch, "tuned_path", lambda: path)
    r = get("wgmma_grouped")
    e, d = dispatch.grouped_entry(r, "bf16", "rc", (8, 5000, 4096, 14336), "GPU A")
    assert e["config"]["BN"] == 128 and 0 < d < 1
    assert dispatch.grouped_entry(r, "fp16", "rc", (8, 4096, 4096, 14336), "GPU A") is None
    assert dispatch.grouped_entry(r, "bf16", "rc", (64, 4096, 4096, 14336), "GPU A") is None   # 3 octaves of G


def test_the_registry_refuses_a_table_that_is_not_a_power_of_two_or_does_not_fit():
    r = get("wgmma_grouped")
    assert any("GROUP_CAP=3" in m for m in r.check_config(dict(r.config(None), GROUP_CAP=3)))
    assert any("a table of 4096 groups" in m for m in r.check_config(dict(r.config(None), GROUP_CAP=4096)))


def test_the_parameter_block_holds_the_groups_after_the_maps():
    kp = KernelProblem(64, 64, 64, 0, 64, False, True, 0, 64, False, True, 0, 64, True, 1.0, 0.0)
    p = Params(kp, False, 3, groups=Groups(5, 4096, 0))
    assert p.groups_at == 512 and len(p.array) == 11 + 3 + 5
    p.group_src(0x1234, 0x5000)
    import struct
    assert struct.unpack_from("<iiqQiiQ", p.buffer, 512) == (5, 0, 4096, 0x1234, 0, 0, 0x5000)


def test_a_row_major_a_of_groups_of_rows_comes_in_boxes_of_64_rows_that_a_tile_loads_to_its_groups_end():
    from gemmlab.core import tensormaps
    from gemmlab.core.groups import GROUP_BOX_ROWS
    cfg = {"BM": 128, "BN": 256, "BK": 64, "CLUSTER": 1}
    assert tensormaps.operand_map("A", 300, 200, 200, False, "bf16", cfg, box_rows=GROUP_BOX_ROWS).box == (64, 64)
    assert tensormaps.operand_map("A", 300, 200, 200, False, "bf16", cfg).box == (64, 128)
    with pytest.raises(ValueError, match="boxes of 64 rows need a K-major operand"):
        tensormaps.operand_map("A", 300, 200, 300, True, "bf16", cfg, box_rows=GROUP_BOX_ROWS)


def test_groups_over_k_make_every_group_all_of_m_by_n_and_need_no_table():
    cfg = {"BM": 128, "BN": 256, "CLUSTER": 1}
    assert Groups(6, 100, over_k=True).units_bound(300, 600, cfg) == 6 * 3 * 3
    r = get("wgmma_grouped")
    assert r.smem_bytes(dict(r.config(None), GROUP_CAP=4096, GROUP_K=1)) <= MAX_SMEM_PER_BLOCK


@pytest.mark.parametrize("b_col", [False, True], ids=["b_row", "b_col"])
def test_the_rung_builds_without_spills_and_holds_its_claimed_instructions(b_col):
    from gemmlab.analysis import disasm
    r = get("wgmma_grouped")
    v = Variant.make(r, "bf16", b_col=b_col, config=dict(r.config(None), GROUP_CAP=128))
    ck = v.compile("sm_90a")
    sass = disasm.sass_listing(ck.cubin)
    assert ck.spill_bytes == 0 and "LDL" not in sass and "STL" not in sass
    for claim in r.sass_claims:
        assert claim in sass, claim


@pytest.mark.parametrize("config", [None, "128x128"])
def test_the_rung_over_k_builds_without_spills_with_its_group_maps_kernel(config):
    from gemmlab.analysis import disasm
    r = get("wgmma_grouped")
    v = Variant.make(r, "bf16", a_col=True, b_col=False, config=dict(r.config(config), GROUP_K=1))
    ck = v.compile("sm_90a")
    sass = disasm.sass_listing(ck.cubin)
    assert ck.spill_bytes == 0 and "group_maps" in sass and "UTMASTG" in sass and "UTMACCTL.IV" in sass


def test_the_rung_over_k_refuses_to_build_with_k_contiguous_operands():
    from gemmlab.core.compile import CompileError
    r = get("wgmma_grouped")
    with pytest.raises(CompileError, match="K as A's and B's outer dimension"):
        Variant.make(r, "bf16", a_col=False, b_col=False, config=dict(r.config(None), GROUP_K=1)).compile("sm_90a")


def test_the_rung_builds_a_stream_k_tail_without_spills_and_refuses_it_with_deferred_stores_or_over_k():
    r = get("wgmma_grouped")
    v = Variant.make(r, "bf16", b_col=True, config=dict(r.config(None), STREAMK=1, DEFER=0, GROUP_CAP=8))
    assert v.compile("sm_90a").spill_bytes == 0
    assert any("STREAMK=1 takes DEFER=0" in m for m in r.check_config(dict(r.config(None), STREAMK=1, DEFER=1)))
    assert any("takes no stream-K tail" in m for m in r.check_config(dict(r.config(None), STREAMK=1, DEFER=0,
                                                                            GROUP_K=1)))


def test_the_rung_builds_its_thread_copy_for_operands_tma_cannot_describe():
    r = get("wgmma_grouped")
    v = Variant.make(r, "fp16", vec_a=False, vec_b=False, config={"BN": 128, "STAGES": 5, "DEFER": 0})
    assert v.compile("sm_90a").spill_bytes == 0


# ---- on the GPU ------------------------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _split(T, G, rnd, empty=True):
    """Uneven cumulative ends of T rows over G groups, with empty groups and groups of one row."""
    cuts = sorted(rnd.randint(0, T) for _ in range(G - 1))
    if empty and G > 3:
        cuts[1] = cuts[0]                      # an empty group
        cuts[2] = min(cuts[1] + 1, T)          # a group of one row (or empty at the end)
        cuts = sorted(cuts)
    return cuts + [T]


def _reference_rows(a, b, offs, bias=None):
    """Per-group float64 products of the groups of rows, each group's bias row added where given."""
    torch = _torch()
    out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64, device=a.device)
    start = 0
    for g, end in enumerate(offs):
        out[start:end] = a[start:end].double() @ b[g].double()
        if bias is not None:
            out[start:end] += bias[g].double()
        start = end
    return out


def _assert_weight_gradients(out, a, b, offs):
    """out[g] is a[:, group g's k] @ b[group g's k] (zeros for an empty group), in float64 terms."""
    start = 0
    for g, end in enumerate(offs):
        ref = a[:, start:end].double() @ b[start:end].double()
        assert (end == start and not out[g].any()) or _rel(out[g], ref) < 1e-2
        start = end


def _captured(call):
    """A CUDA graph of ``call`` captured on a side stream."""
    torch = _torch()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            call()
    return graph


def _rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm().clamp(min=1e-300))


def _units(offs, N, BN, BM=128):
    """The units (row tile x column tile) the device counts for these cumulative ends."""
    start, n = 0, 0
    for end in offs:
        n, start = n + -(-(end - start) // BM), end
    return n * -(-N // BN)


@pytest.mark.gpu
@pytest.mark.parametrize("fill", [(0.0, 0.125), (0.125, 0.5), (0.5, 1.0)], ids=["sliver", "short", "whole"])
def test_a_stream_k_tail_over_uneven_groups_applies_each_groups_bias_once(fill):
    """STREAMK=1: the device splits a last wave under an eighth full with the wave before it, one
    under half full alone, and leaves a fuller one whole; each way every group's product, bias and
    activation, each applied once (the split units' finisher applies its group's)."""
    torch = _torch()
    from gemmlab.core.driver import device_info

    sms = device_info(0).sm_count
    N, K, G = 1000, 1000, 9          # 1200-3400 tokens: 14-31 row tiles x 8 column tiles, 1-2 waves on 132 SMs
    rnd = random.Random(1)
    T, offs = next((T, o) for T, o in ((t, _split(t, G, rnd)) for t in range(1200, 3400, 3))
                   if _units(o, N, 128) > sms and fill[0] < _units(o, N, 128) % sms / sms < fill[1])
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    bias = torch.randn(G, N, device="cuda", dtype=torch.float32)
    out = gemmlab.grouped_mm(a, b, offs, bias=bias, activation="relu",
                             config={"BN": 128, "STAGES": 6, "DEFER": 0, "STREAMK": 1})
    assert _rel(out, _reference_rows(a, b, offs, bias).clamp(min=0)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tokens_by_group_match_per_group_float64_products(dtype):
    torch = _torch()
    rnd = random.Random(7)
    failures = []
    for (T, N, K, G), b_layout, out_dtype in itertools.product(
            [(1, 8, 16, 1), (37, 93, 211, 4), (300, 264, 130, 7), (1000, 520, 384, 16), (257, 1000, 72, 33)],
            ("row", "col"), (None, "float32")):
        g = torch.Generator(device="cuda").manual_seed(T + N)
        dt = getattr(torch, dtype)
        a = torch.randn(T, K, device="cuda", dtype=dt, generator=g)
        w = torch.randn(G, N, K, device="cuda", dtype=dt, generator=g)
        b = w.transpose(-2, -1) if b_layout == "col" else w.transpose(-2, -1).contiguous()
        offs = _split(T, G, rnd)
        od = getattr(torch, out_dtype) if out_dtype else None
        out = gemmlab.grouped_mm(a, b, torch.tensor(offs, dtype=torch.int32, device="cuda"), out_dtype=od)
        assert out.shape == (T, N) and out.dtype == (od or dt)
        err = _rel(out, _reference_rows(a, b, offs))
        if not (torch.isfinite(out).all() and err < 1e-2):
            failures.append(f"{T}x{N}x{K} G {G} b {b_layout} out {out_dtype}: rel {err:.2e} offs {offs}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [{}, {"CLUSTER": 2}, {"BN": 128, "STAGES": 6, "DEFER": 0, "STREAMK": 1}],
                         ids=["deferred", "cluster", "stream_k"])
def test_a_warpgroup_whose_rows_lie_past_its_groups_end_sits_the_tile_out_with_the_same_bits(config):
    """WGSKIP=1: where a group ends in a tile's first 64 rows (a cluster's second tile: in none of
    its rows), the warpgroup of the rows past the end waits its k tiles out; the stored rows are
    the bits of WGSKIP=0 and the float64 product's, and no row outside the groups is written."""
    torch = _torch()
    counts = [130, 1, 260, 70, 0, 200, 64, 390, 3, 420]   # tails of 2, 1, 4, 70, 8, 64, 6, 3, 36 rows
    offs = list(itertools.accumulate(counts))
    T, N, K, G = offs[-1], 1000, 1000, len(counts)
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    outs = []
    for skip in (1, 0):
        buf = torch.full((T + 1, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemmlab.grouped_mm(a, b, offs, out=buf[:T], config={**config, "WGSKIP": skip})
        assert grouped.plans()[-1].variant.cfg["WGSKIP"] == skip
        assert torch.isnan(buf[T]).all()
        outs.append(buf[:T])
    assert torch.equal(outs[0], outs[1])
    assert _rel(outs[0], _reference_rows(a, b, offs)) < 1e-2


@pytest.mark.gpu
def test_column_major_tokens_are_read_as_row_major_ones():
    torch = _torch()
    T, N, K, G = 300, 136, 264, 5
    a = torch.randn(K, T, device="cuda", dtype=torch.bfloat16).t()     # (T, K), rows contiguous along T
    b = torch.randn(G, K, N, device="cuda", dtype=torch.bfloat16)
    offs = _split(T, G, random.Random(6))
    assert _rel(gemmlab.grouped_mm(a, b, offs), _reference_rows(a, b, offs)) < 1e-2


@pytest.mark.gpu
def test_every_row_of_every_group_is_written_and_no_other_memory():
    torch = _torch()
    T, N, K, G = 515, 136, 200, 9
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, K, N, device="cuda", dtype=torch.bfloat16)
    offs = _split(T, G, random.Random(1))
    buf = torch.full((T + 2, N + 8), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = buf[1:T + 1, :N]
    gemmlab.grouped_mm(a, b, offs, out=out)
    assert torch.isfinite(out).all()
    assert torch.isnan(buf[0]).all() and torch.isnan(buf[T + 1]).all() and torch.isnan(buf[:, N:]).all()
    assert _rel(out, _reference_rows(a, b, offs)) < 1e-2


@pytest.mark.gpu
def test_the_masked_form_writes_the_counted_rows_of_each_group_only():
    torch = _torch()
    G, R, N, K = 6, 200, 136, 264
    a = torch.randn(G, R, K, device="cuda", dtype=torch.float16)
    b = torch.randn(G, K, N, device="cuda", dtype=torch.float16)
    counts = [0, 1, 200, 129, 128, 77]
    out = torch.full((G, R, N), float("nan"), device="cuda", dtype=torch.float16)
    gemmlab.grouped_mm_masked(a, b, torch.tensor(counts, dtype=torch.int32, device="cuda"), out=out)
    for g, c in enumerate(counts):
        ref = a[g, :c].double() @ b[g].double()
        assert c == 0 or _rel(out[g, :c], ref) < 1e-2
        assert torch.isnan(out[g, c:]).all()


@pytest.mark.gpu
def test_the_masked_form_sizes_its_tile_by_the_expected_rows_as_the_contiguous_form_does():
    torch = _torch()
    G, R, N, K, T = 128, 315, 768, 2048, 4096   # the padded buffer's rows make many more waves than the tokens
    a = torch.randn(G, R, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, K, N, device="cuda", dtype=torch.bfloat16)
    counts = torch.full((G,), T // G, dtype=torch.int32, device="cuda")
    gemmlab.grouped_mm(torch.randn(T, K, device="cuda", dtype=torch.bfloat16), b, torch.arange(1, G + 1,
                       dtype=torch.int32, device="cuda") * (T // G))
    contiguous = grouped.plans()[-1].variant.cfg
    out = gemmlab.grouped_mm_masked(a, b, counts, expected_rows=T // G)
    assert grouped.plans()[-1].variant.cfg["BN"] == contiguous["BN"]
    ref = a[0, :T // G].double() @ b[0].double()
    assert _rel(out[0, :T // G], ref) < 1e-2


@pytest.mark.gpu
def test_3_d_by_3_d_is_a_batch_of_equal_groups():
    torch = _torch()
    a = torch.randn(5, 70, 96, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(5, 96, 40, device="cuda", dtype=torch.bfloat16)
    assert _rel(gemmlab.grouped_mm(a, b), a.double() @ b.double()) < 1e-2


@pytest.mark.gpu
def test_2_d_by_2_d_over_k_gives_each_groups_weight_gradient():
    torch = _torch()
    M, T, N, G = 96, 700, 72, 6
    a = torch.randn(M, T, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(T, N, device="cuda", dtype=torch.bfloat16)
    offs = _split(T, G, random.Random(2))
    out = gemmlab.grouped_mm(a, b, torch.tensor(offs, dtype=torch.int32, device="cuda"))
    _assert_weight_gradients(out, a, b, offs)


@pytest.mark.gpu
def test_the_weight_gradient_is_one_launch_a_cuda_graph_replays_with_new_offsets():
    torch = _torch()
    M, T, N, G = 128, 1000, 264, 5
    a = torch.randn(T, M, device="cuda", dtype=torch.bfloat16).t()   # x^T of the tokens, as the backward has it
    b = torch.randn(T, N, device="cuda", dtype=torch.bfloat16)
    offs = torch.tensor(_split(T, G, random.Random(3), empty=False), dtype=torch.int32, device="cuda")
    out = gemmlab.grouped_mm(a, b, offs, check=False)
    graph = _captured(lambda: gemmlab.grouped_mm(a, b, offs, out=out, check=False))
    for seed in (4, 9):
        new = _split(T, G, random.Random(seed))
        offs.copy_(torch.tensor(new, dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _assert_weight_gradients(out, a, b, new)


@pytest.mark.gpu
def test_bad_device_offsets_are_refused_when_checked():
    torch = _torch()
    a = torch.randn(10, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(2, 32, 16, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"offs\[-1\] = 9 but a has 10 rows"):
        gemmlab.grouped_mm(a, b, torch.tensor([4, 9], dtype=torch.int32, device="cuda"))
    with pytest.raises(TypeError, match="offs is torch.int64; it must be torch.int32"):
        gemmlab.grouped_mm(a, b, torch.tensor([4, 10], device="cuda"))


@pytest.mark.gpu
def test_unchecked_bad_offsets_never_write_outside_out():
    torch = _torch()
    a = torch.randn(300, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(3, 64, 64, device="cuda", dtype=torch.float16)
    buf = torch.full((302, 64), 7.0, device="cuda", dtype=torch.float16)
    bad = torch.tensor([200, 100, 100000], dtype=torch.int32, device="cuda")
    gemmlab.grouped_mm(a, b, bad, out=buf[1:301], check=False)
    torch.cuda.synchronize()
    assert (buf[0] == 7).all() and (buf[301] == 7).all()


@pytest.mark.gpu
def test_a_cuda_graph_replays_the_launch_with_new_offsets():
    torch = _torch()
    T, N, K, G = 1024, 256, 512, 8
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, K, N, device="cuda", dtype=torch.bfloat16)
    offs = torch.tensor(_split(T, G, random.Random(4), empty=False), dtype=torch.int32, device="cuda")
    out = gemmlab.grouped_mm(a, b, offs)   # warm: plan and compile
    graph = _captured(lambda: gemmlab.grouped_mm(a, b, offs, out=out))
    for seed in (5, 6):
        new = _split(T, G, random.Random(seed))
        offs.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(out, _reference_rows(a, b, new)) < 1e-2


@pytest.mark.gpu
def test_the_operator_differentiates_each_operand_like_per_group_matmuls():
    torch = _torch()
    import gemmlab.torch as gt
    T, N, K, G = 300, 96, 128, 5
    offs_list = _split(T, G, random.Random(8))
    offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = gt.grouped_mm(a, w.transpose(-2, -1), offs)
    grad = torch.randn_like(y)
    y.backward(grad)
    ad, wd = a.detach().double(), w.detach().double()
    ga = torch.zeros_like(ad)
    gw = torch.zeros_like(wd)
    start = 0
    for g, end in enumerate(offs_list):
        ga[start:end] = grad[start:end].double() @ wd[g]
        gw[g] = grad[start:end].double().t() @ ad[start:end]
        start = end
    assert _rel(a.grad, ga) < 1e-2 and _rel(w.grad, gw) < 1e-2


@pytest.mark.gpu
def test_the_operator_traces_under_torch_compile():
    torch = _torch()
    import gemmlab.torch as gt
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(4, 128, 64, device="cuda", dtype=torch.float16)
    offs = torch.tensor([0, 100, 101, 256], dtype=torch.int32, device="cuda")
    f = torch.compile(lambda a, b, o: gt.grouped_mm(a, b, o) * 2, fullgraph=True)
    assert _rel(f(a, b, offs), 2 * _reference_rows(a, b, offs.tolist())) < 1e-2


@pytest.mark.gpu
def test_cupy_arrays_take_the_same_call():
    cp = pytest.importorskip("cupy")
    T, N, K, G = 200, 72, 96, 3
    a = cp.random.standard_normal((T, K)).astype(cp.float16)
    b = cp.random.standard_normal((G, K, N)).astype(cp.float16)
    offs = [50, 50, 200]
    out = gemmlab.grouped_mm(a, b, cp.asarray(offs, dtype=cp.int32))
    ref = cp.zeros((T, N))
    start = 0
    for g, end in enumerate(offs):
        ref[start:end] = a[start:end].astype(cp.float64) @ b[g].astype(cp.float64)
        start = end
    assert float(cp.linalg.norm(out.astype(cp.float64) - ref) / cp.linalg.norm(ref)) < 1e-2


@pytest.mark.gpu
def test_the_grouped_rung_refuses_an_auxiliary_output_naming_it():
    torch = _torch()
    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="'wgmma_grouped' fuses a bias and an activation into groups of rows only"):
        gemmlab.matmul(a, a, activation="gelu", aux=torch.empty(64, 64, device="cuda", dtype=torch.float16),
                       kernel="wgmma_grouped")


@pytest.mark.gpu
@pytest.mark.parametrize("bias_dtype", ["same", "float32"])
def test_a_per_group_bias_and_an_activation_are_fused_into_each_groups_rows(bias_dtype):
    torch = _torch()
    T, N, K, G = 700, 264, 200, 6
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    bias = torch.randn(G, N, device="cuda", dtype=torch.bfloat16 if bias_dtype == "same" else torch.float32)
    offs = _split(T, G, random.Random(11))
    out = gemmlab.grouped_mm(a, b, offs, bias=bias, activation="relu")
    assert _rel(out, _reference_rows(a, b, offs, bias).clamp(min=0)) < 1e-2


@pytest.mark.gpu
def test_a_bias_of_equal_groups_and_of_the_masked_form_is_each_groups_own():
    torch = _torch()
    G, R, N, K = 4, 130, 72, 96
    a = torch.randn(G, R, K, device="cuda", dtype=torch.float16)
    b = torch.randn(G, K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(G, N, device="cuda", dtype=torch.float16)
    ref = a.double() @ b.double() + bias.double()[:, None, :]
    assert _rel(gemmlab.grouped_mm(a, b, bias=bias), ref) < 1e-2
    counts = [0, 1, 130, 77]
    out = torch.full((G, R, N), float("nan"), device="cuda", dtype=torch.float16)
    gemmlab.grouped_mm_masked(a, b, counts, bias=bias, out=out)
    for g, c in enumerate(counts):
        assert c == 0 or _rel(out[g, :c], ref[g, :c]) < 1e-2
        assert torch.isnan(out[g, c:]).all()


@pytest.mark.gpu
def test_the_operator_differentiates_a_per_group_bias_by_each_groups_rows():
    torch = _torch()
    import gemmlab.torch as gt
    T, N, K, G = 300, 96, 128, 5
    offs_list = _split(T, G, random.Random(12))
    offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(G, N, device="cuda", dtype=torch.float32, requires_grad=True)
    y = gt.grouped_mm(a, w.transpose(-2, -1), offs, bias=bias)
    grad = torch.randn_like(y)
    y.backward(grad)
    want = torch.zeros(G, N, dtype=torch.float64, device="cuda")
    start = 0
    for g, end in enumerate(offs_list):
        want[g] = grad[start:end].double().sum(dim=0)
        start = end
    assert _rel(bias.grad, want) < 1e-2
