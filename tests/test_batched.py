"""Batched matmul with torch.matmul's semantics: how the batch broadcasts, when it folds into one
GEMM and when it runs in one launch that walks batch x tiles (CPU, from shapes and strides alone:
the problem, its kernel view, the launch geometry, tensor maps, argument block and the rule that
configures it), and the products themselves against float64 (GPU: broadcast batches, transposed,
expanded and interleaved views, odd shapes, every dtype, a NaN-poisoned output, a fused epilogue)."""

import struct
from dataclasses import replace

import pytest

import gemmlab
from gemmlab.core import batched, rules, tensormaps
from gemmlab.core.families.hopper import batched_config
from gemmlab.core.families.simt import SIMT_BATCHED_RATE, simt_batched_config
from gemmlab.core.params import Params
from gemmlab.core.problem import ArrayFacts
from gemmlab.core.registry import get
from gemmlab.core.variant import Variant, resolve


def facts(shape, strides=None, dtype="fp32", ptr=1 << 32):
    if strides is None:   # C-contiguous
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    return ArrayFacts(ptr, tuple(shape), tuple(strides), dtype, 0, "cupy")


# ---- the layout ---------------------------------------------------------------------------------
def test_batch_dimensions_broadcast_as_numpy_does():
    assert batched.broadcast_batch((8, 1, 3), (5, 1)) == (8, 5, 3)
    assert batched.broadcast_batch((), (4,)) == (4,)


def test_batches_that_do_not_broadcast_are_refused_naming_both():
    with pytest.raises(ValueError, match=r"batch dimensions \(3,\) of a and \(4,\) of b do not broadcast"):
        batched.layout(facts((3, 5, 6)), facts((4, 6, 7)))


def test_inner_dimensions_must_match():
    with pytest.raises(ValueError, match=r"a.shape\[-1\] must equal b.shape\[-2\]"):
        batched.layout(facts((3, 5, 6)), facts((3, 5, 7)))


def test_a_vector_operand_is_refused():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        batched.layout(facts((3, 5, 6)), facts((6,)))


def test_contiguous_batch_against_a_shared_matrix_folds_into_one_gemm():
    lay = batched.layout(facts((4, 16, 64)), facts((64, 32)))
    assert lay.folds and lay.batch == (4,) and (lay.M, lay.N, lay.K) == (16, 32, 64)


def test_an_expanded_weight_of_stride_zero_still_folds():
    lay = batched.layout(facts((2, 3, 16, 64)), facts((2, 3, 64, 32), strides=(0, 0, 32, 1)))
    assert lay.folds and lay.b_strides == (0, 0)


def test_a_weight_per_batch_element_does_not_fold():
    lay = batched.layout(facts((4, 16, 64)), facts((4, 64, 32)))
    assert not lay.folds and lay.b_strides == (2048,) and lay.count == 4


def test_a_transposed_batch_view_does_not_fold():
    # a (4, 16, 64) read as (4, 64, 16).mT: column-major rows, the batch cannot join them
    lay = batched.layout(facts((4, 16, 64), strides=(1024, 1, 16)), facts((64, 32)))
    assert not lay.folds


def test_a_batch_with_gaps_between_elements_does_not_fold():
    lay = batched.layout(facts((4, 16, 64), strides=(2048, 64, 1)), facts((64, 32)))
    assert not lay.folds


def test_each_elements_problem_points_at_its_own_slices():
    a, b, c = facts((3, 4, 5), ptr=0x1000000), facts((3, 5, 6), ptr=0x2000000), facts((3, 4, 6), ptr=0x3000000)
    lay = batched.layout(a, b)
    probs = list(batched.problems(lay, a, b, c, 1.0, 0.0))
    assert [(p.a.ptr - a.ptr, p.b.ptr - b.ptr, p.c.ptr - c.ptr) for p in probs] == \
        [(0, 0, 0), (80, 120, 96), (160, 240, 192)]
    assert {(p.M, p.N, p.K) for p in probs} == {(4, 6, 5)}


def test_an_output_overlapping_an_input_is_refused():
    a, b = facts((3, 4, 5), ptr=0x1000000), facts((3, 5, 6), ptr=0x2000000)
    c = facts((3, 4, 6), ptr=0x1000000 + 16)
    with pytest.raises(ValueError, match="the output overlaps a"):
        list(batched.problems(batched.layout(a, b), a, b, c, 1.0, 0.0))


# ---- one launch: the problem, its launch and its rule (CPU) -----------------------------------------
def test_batch_dimensions_that_chain_flatten_into_one_stride():
    assert batched.flat_stride((3 * 4096, 4096), (2, 3)) == 4096
    assert batched.flat_stride((0, 0), (2, 3)) == 0                 # broadcast over the whole batch
    assert batched.flat_stride((4096, 5), (1, 3)) == 5               # extent 1 has no stride of its own


def test_batch_dimensions_that_do_not_chain_do_not_flatten():
    assert batched.flat_stride((0, 4096), (2, 3)) is None            # broadcast over one dimension only
    assert batched.flat_stride((5 * 4096, 4096), (2, 3)) is None     # a gap between the outer steps


def test_a_batch_that_flattens_is_one_problem_of_that_many_elements():
    a, b, c = facts((6, 32, 64), ptr=0x1000000), facts((6, 64, 48), ptr=0x2000000), facts((6, 32, 48), ptr=0x3000000)
    p = batched.one_problem(batched.layout(a, b), a, b, c)
    assert (p.batch, p.batch_strides, p.M, p.N, p.K) == (6, (2048, 3072, 1536), 32, 48, 64)
    assert p.flops == 2 * 6 * 32 * 48 * 64


def test_a_batch_that_does_not_flatten_has_no_one_problem():
    a, b = facts((2, 3, 32, 64), ptr=0x1000000), facts((1, 3, 64, 48), ptr=0x2000000)
    c = facts((2, 3, 32, 48), ptr=0x3000000)
    assert batched.one_problem(batched.layout(a, b), a, b, c) is None


def test_an_output_broadcast_over_the_batch_is_refused():
    a, b = facts((4, 8, 16), ptr=0x1000000), facts((4, 16, 8), ptr=0x2000000)
    c = facts((4, 8, 8), strides=(0, 8, 1), ptr=0x3000000)
    with pytest.raises(ValueError, match="out has a batch dimension of stride 0"):
        batched.check_output(batched.layout(a, b), a, b, c)


def _problem(batch=6, M=32, N=48, K=64, dtype="bf16", strides=None, out_col=False):
    a, b = facts((batch, M, K), dtype=dtype, ptr=0x1000000), facts((batch, K, N), dtype=dtype, ptr=0x2000000)
    c = facts((batch, M, N), strides=(M * N, 1, M), dtype=dtype, ptr=0x3000000) if out_col else \
        facts((batch, M, N), dtype=dtype, ptr=0x3000000)
    p = batched.one_problem(batched.layout(a, b), a, b, c)
    return p if strides is None else replace(p, batch_strides=strides)


def test_a_column_major_output_swaps_the_operands_batch_strides_in_the_kernel_view():
    kp = _problem(out_col=True).kernel_view()
    assert (kp.M, kp.N, kp.batch, kp.batch_a, kp.batch_b, kp.batch_c) == (48, 32, 6, 64 * 48, 32 * 64, 32 * 48)


def test_a_batch_stride_of_part_of_a_vector_takes_16_byte_access_away():
    kp = _problem(strides=(2048 + 4, 3072, 1536)).kernel_view()
    assert not kp.vec_a and kp.vec_b and kp.vec_c


def test_the_persistent_rung_walks_the_units_of_every_element():
    r = get("wgmma_ws")
    cfg = r.config({"BN": 128, "CLUSTER": 1, "BALANCE": 0})
    assert r.launch(256, 256, cfg, 64, 132, batch=8).grid == (32, 1, 1)      # 4 units each, 32 in all
    assert r.launch(256, 256, cfg, 64, 132, batch=64).grid == (132, 1, 1)


def test_the_grid_rung_puts_the_batch_along_grid_z():
    r = get("async_simt")
    launch = r.launch(300, 520, r.config(None), 64, 132, batch=7)
    assert launch.grid == (3, 3, 7)


def test_a_rung_that_launches_one_problem_refuses_a_batch():
    with pytest.raises(ValueError, match="launches one problem"):
        get("warp_tiling").launch(64, 64, get("warp_tiling").config(None), 64, 132, batch=2)


def test_split_k_and_a_batch_both_want_grid_z():
    r = get("async_simt")
    with pytest.raises(ValueError, match="SPLITK=4"):
        r.launch(64, 64, r.config({"SPLITK": 4}), 4096, 132, batch=2)


def test_a_batched_variant_defines_which_operands_vary_over_the_batch():
    v = replace(Variant.make("wgmma_ws", "bf16"), batch=(False, True))
    d = v.defines()
    assert (d["GL_BATCHED"], d["GL_BATCH_A"], d["GL_BATCH_B"]) == (1, 0, 1)
    assert "batched (A broadcast)" in v.describe()
    assert "GL_BATCHED" not in Variant.make("wgmma_ws", "bf16").defines()


def test_resolve_gives_a_batched_problem_the_batched_variant_of_its_rung():
    res = resolve(get("wgmma_ws"), "bf16", _problem().kernel_view(), None, None, 132)
    assert res.variant.batch == (True, True) and not res.variant.tall


def test_pack_copies_every_element_of_an_unaligned_operand_in_one_launch():
    res = resolve(get("wgmma_ws"), "bf16", replace(_problem().kernel_view(), vec_a=False), {"PACK": 1}, None, 132)
    (pack,) = res.packs
    assert (pack.operand, pack.batch, pack.batch_stride, pack.grid()[2]) == ("A", 6, 2048, 6)
    assert res.kp.vec_a and res.kp.batch_a == pack.element_stride == 32 * 64
    assert res.variant.vec_a and res.variant.batch == (True, True)


def test_an_operand_broadcast_over_the_batch_is_copied_once():
    kp = replace(_problem().kernel_view(), vec_a=False, batch_a=0)
    res = resolve(get("wgmma_ws"), "bf16", kp, {"PACK": 1}, None, 132)
    assert res.packs[0].batch == 1 and res.kp.batch_a == 0 and res.variant.batch == (False, True)


def test_the_batched_pack_takes_both_strides_after_its_ints():
    from gemmlab.core.packing import Pack
    from gemmlab.core.params import pack_params
    block = pack_params(Pack("A", 32, 70, 70, 72, 2, batch=5, batch_stride=2240))
    assert struct.unpack_from("<iiii", block.buffer, 16) == (32, 70, 70, 72)
    assert struct.unpack_from("<qq", block.buffer, 32) == (2240, 32 * 72)
    assert len(block.array) == 8


def test_a_varying_operand_gets_a_3d_map_whose_box_is_one_elements():
    m = tensormaps.operand_map("A", 32, 64, 64, False, "bf16", {"BM": 128, "BN": 128, "BK": 64}, batch=(6, 2048))
    assert (m.dims, m.strides, m.box) == ((64, 32, 6), (128, 4096), (64, 128, 1))
    c = tensormaps.output_map(32, 48, 48, "bf16", batch=(6, 1536))
    assert (c.dims, c.strides, c.box) == ((48, 32, 6), (96, 3072), (64, 16, 1))


@pytest.mark.parametrize("stride", [0, 2048 + 4, -2048])
def test_a_map_needs_a_positive_batch_stride_of_whole_vectors(stride):
    with pytest.raises(ValueError, match="positive stride of whole 16-byte vectors"):
        tensormaps.operand_map("A", 32, 64, 64, False, "bf16", {"BM": 128, "BN": 128, "BK": 64}, batch=(6, stride))


def test_the_argument_block_holds_the_batch_after_the_maps_and_before_the_bias():
    kp = _problem().kernel_view()
    p = Params(kp, False, 3, False, True, batched=True)
    at = 128 + 3 * 128
    assert struct.unpack_from("<iiqqq", p.buffer, at) == (6, 0, 2048, 3072, 1536)
    assert p.bias_at == at + 32


def test_a_tile_at_least_twice_as_wide_as_the_row_is_never_taken():
    cfg, _ = batched_config(512, 64, 512, 32, 132)
    assert cfg["BN"] == 64


def test_long_k_over_many_waves_takes_the_wide_tile():
    cfg, _ = batched_config(2048, 2048, 2048, 8, 132)
    assert (cfg["BN"], cfg["CLUSTER"]) == (256, 1)


def test_short_k_takes_more_narrower_tiles_whose_fill_and_drain_hide_behind_each_other():
    cfg, why = batched_config(512, 512, 64, 32, 132)
    assert cfg["BN"] == 128 and "4 wave(s)" in why


def test_simt_batch_takes_small_tiles_where_big_ones_leave_sms_idle():
    r = get("async_simt")
    presets = {n: r.config(n) for n in SIMT_BATCHED_RATE}
    assert simt_batched_config(128, 128, 128, 64, 132, presets)[0] == "small"
    assert simt_batched_config(2048, 2048, 2048, 8, 132, presets)[0] == "128x256"


class _Device:
    """The two facts of a DeviceInfo that the rule reads."""

    def __init__(self, arch, sm_count=132):
        self.arch, self.sm_count = arch, sm_count


@pytest.mark.parametrize("dtype,slug", [("bf16", "wgmma_ws"), ("fp16", "wgmma_ws"), ("fp32", "async_simt")])
def test_auto_runs_a_batch_on_the_rung_that_walks_batches_for_its_dtype(dtype, slug):
    choice = rules.batched_choice(_problem(dtype=dtype), "auto", None, _Device("sm_90a"), None)
    assert choice.rung.slug == slug and choice.source == "rule" and "one launch" in choice.reason


def test_auto_copies_a_16_bit_batchs_unaligned_operands_first_where_k_is_longer_than_one_k_tile():
    choice = rules.batched_choice(_problem(K=70), "auto", None, _Device("sm_90a"), None)
    assert choice.config["PACK"] == 1 and "PACK=1" in choice.reason
    assert "PACK" not in rules.batched_choice(_problem(K=60), "auto", None, _Device("sm_90a"), None).config
    assert "PACK" not in rules.batched_choice(_problem(K=64), "auto", None, _Device("sm_90a"), None).config


def test_auto_never_copies_an_fp32_batchs_operands():
    choice = rules.batched_choice(_problem(K=70, dtype="fp32"), "auto", None, _Device("sm_90a"), None)
    assert "PACK" not in get("async_simt").config(choice.config) or get("async_simt").config(choice.config)["PACK"] == 0


def test_auto_runs_a_16_bit_batch_per_element_before_hopper():
    assert rules.batched_choice(_problem(dtype="bf16"), "auto", None, _Device("sm_80"), None) is None


def test_a_named_rung_that_launches_one_problem_runs_per_element():
    assert rules.batched_choice(_problem(dtype="fp32"), "warp_tiling", None, _Device("sm_90a"), None) is None


def test_an_fp32_batch_in_another_precision_runs_per_element():
    assert rules.batched_choice(_problem(dtype="fp32"), "auto", None, _Device("sm_90a"), "tf32") is None


# ---- the products (GPU) ---------------------------------------------------------------------------
CASES = [
    ("folded, shared weight", (4, 33, 70), (70, 45)),
    ("per element", (5, 33, 70), (5, 70, 45)),
    ("broadcast both ways", (2, 1, 17, 30), (1, 3, 30, 19)),
    ("4-D per element", (2, 3, 9, 31), (2, 3, 31, 12)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name,ashape,bshape", CASES, ids=[c[0] for c in CASES])
def test_batched_matmul_matches_torch_matmul_in_float64(name, ashape, bshape, dtype):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    a = torch.randn(ashape, device="cuda", dtype=dt)
    b = torch.randn(bshape, device="cuda", dtype=dt)
    got = gemmlab.matmul(a, b)
    want = torch.matmul(a.double(), b.double())
    assert got.shape == want.shape and got.dtype == dt
    tol = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * a.shape[-1] ** 0.5)


@pytest.mark.gpu
def test_transposed_and_expanded_views_are_read_as_they_are():
    torch = pytest.importorskip("torch")
    a = torch.randn(6, 40, 25, device="cuda").mT             # (6, 25, 40), column-major elements
    b = torch.randn(40, 7, device="cuda").expand(6, 40, 7)    # stride 0 over the batch
    torch.testing.assert_close(gemmlab.matmul(a, b).double(), torch.matmul(a.double(), b.double()),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_batched_matmul_fuses_bias_and_activation():
    torch = pytest.importorskip("torch")
    a = torch.randn(3, 20, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(3, 64, 24, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(24, device="cuda", dtype=torch.bfloat16)
    got = gemmlab.matmul(a, b, bias=bias, activation="silu")
    want = torch.nn.functional.silu(torch.matmul(a.double(), b.double()) + bias.double())
    torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_batched_matmul_takes_cupy_arrays_and_out():
    cp = pytest.importorskip("cupy")
    a = cp.random.standard_normal((4, 30, 50), dtype=cp.float32)
    b = cp.random.standard_normal((4, 50, 20), dtype=cp.float32)
    out = cp.empty((4, 30, 20), dtype=cp.float32)
    assert gemmlab.matmul(a, b, out=out) is out
    cp.testing.assert_allclose(out, cp.matmul(a.astype(cp.float64), b.astype(cp.float64)), rtol=1e-4, atol=1e-4)


# ---- one launch (GPU): every case checks that the batch ran as one plan, then the product -----------
def _t(*shape, dtype="bfloat16"):
    torch = pytest.importorskip("torch")
    return torch.randn(*shape, device="cuda", dtype=getattr(torch, dtype))


ONE_LAUNCH = {
    "contiguous": lambda d: (_t(4, 64, 128, dtype=d), _t(4, 128, 96, dtype=d)),
    "odd shapes without 16-byte access": lambda d: (_t(5, 33, 70, dtype=d), _t(5, 70, 45, dtype=d)),
    "several tiles per element": lambda d: (_t(3, 300, 200, dtype=d), _t(3, 200, 520, dtype=d)),
    "column-major a": lambda d: (_t(4, 128, 96, dtype=d).mT, _t(4, 128, 80, dtype=d)),
    "column-major b": lambda d: (_t(4, 96, 128, dtype=d), _t(4, 80, 128, dtype=d).mT),
    "a broadcast over the batch": lambda d: (_t(64, 128, dtype=d), _t(6, 128, 72, dtype=d)),
    "b shared, a transposed": lambda d: (_t(6, 128, 64, dtype=d).mT, _t(128, 72, dtype=d)),
    "4-D batch": lambda d: (_t(2, 3, 65, 64, dtype=d), _t(2, 3, 64, 40, dtype=d)),
    "interleaved batch": lambda d: (_t(64, 4, 32, dtype=d).transpose(0, 1), _t(4, 32, 48, dtype=d)),
    "many tiny elements": lambda d: (_t(1000, 8, 16, dtype=d), _t(1000, 16, 8, dtype=d)),
}
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _rel(got, want) -> float:
    return float((got.double() - want).norm() / max(float(want.norm()), 1e-30))


def _one_plan(count):
    from gemmlab.core import api
    plans = list(api._BATCH_PLANS.values())
    assert len(plans) == 1 and plans[0].problem.batch == count, "the batch did not run as one plan"
    return plans[0]


@pytest.fixture()
def no_batch_plans():
    from gemmlab.core import api
    api._BATCH_PLANS.clear()
    yield
    api._BATCH_PLANS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", list(ONE_LAUNCH))
def test_a_batch_runs_in_one_launch_and_matches_float64(case, dtype, no_batch_plans):
    torch = pytest.importorskip("torch")
    a, b = ONE_LAUNCH[case](dtype)
    got = gemmlab.matmul(a, b)
    want = torch.matmul(a.double(), b.double())
    _one_plan(want[..., 0, 0].numel())
    assert got.shape == want.shape and _rel(got, want) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["column-major", "with gaps", "interleaved"])
def test_a_batch_overwrites_a_nan_poisoned_output_of_any_layout(layout, dtype, no_batch_plans):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    nan = float("nan")
    out = {"column-major": lambda: torch.full((4, 48, 64), nan, device="cuda", dtype=dt).mT,
           "with gaps": lambda: torch.full((4, 100, 80), nan, device="cuda", dtype=dt)[:, :64, :48],
           "interleaved": lambda: torch.full((64, 4, 48), nan, device="cuda", dtype=dt).transpose(0, 1)}[layout]()
    a, b = _t(4, 64, 32, dtype=dtype), _t(4, 32, 48, dtype=dtype)
    assert gemmlab.matmul(a, b, out=out) is out
    _one_plan(4)
    assert not torch.isnan(out).any() and _rel(out, torch.matmul(a.double(), b.double())) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_a_batch_in_one_launch_fuses_bias_and_each_activation(activation, dtype, no_batch_plans):
    torch = pytest.importorskip("torch")
    from gemmlab.core.epilogue import reference
    a, b, bias = _t(5, 130, 64, dtype=dtype), _t(5, 64, 200, dtype=dtype), _t(200, dtype=dtype)
    got = gemmlab.matmul(a, b, bias=bias, activation=activation)
    _one_plan(5)
    want = reference(torch.matmul(a.double(), b.double()) + bias.double(), activation, torch)
    assert _rel(got, want) < 2 * TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("config", ["128x128", "128x256_nocluster", {"BN": 64, "STAGES": 8, "DEFER": 0},
                                    {"STREAMK": 1, "CLUSTER": 1, "BALANCE": 0}, {"STREAMK": 1, "BALANCE": 0},
                                    {"EPI_TMA": 0}, {"KREV": 1}],
                         ids=str)
def test_every_rung_21_switch_runs_a_batch(config, no_batch_plans):
    torch = pytest.importorskip("torch")
    # 25 elements of 3 x 3 tiles (6 units of 2): a partial last wave on 132 or 66 clusters (without
    # BALANCE, which would even the waves out), which STREAMK=1 splits by k tiles
    a, b = _t(25, 333, 192, dtype="float16"), _t(25, 192, 520, dtype="float16")
    got = gemmlab.matmul(a, b, kernel="wgmma_ws", config=config)
    plan = _one_plan(25)
    assert plan.variant.cfg["STREAMK"] == (isinstance(config, dict) and config.get("STREAMK", 0))
    assert _rel(got, torch.matmul(a.double(), b.double())) < TOL["float16"]


@pytest.mark.gpu
@pytest.mark.parametrize("config", [{"BALANCE": 0}, {"CLUSTER": 1, "BALANCE": 0}], ids=str)
def test_a_batch_holds_its_fused_tiles_into_the_next_elements_main_loop(config, no_batch_plans):
    """DEFER=1 with bias + gelu_tanh: a tile is held while the cluster's next unit, often of the next
    element, runs its main loop, and is written to its own element (25 elements of 6 units of 2
    tiles on 66 clusters, or 12 tiles on 132 CTAs). Not with a stream-K tail: a batch's build with
    both spills (core/variant.py, FUSED_FALLBACKS)."""
    torch = pytest.importorskip("torch")
    from gemmlab.core.epilogue import reference
    a, b, bias = _t(25, 333, 192, dtype="float16"), _t(25, 192, 520, dtype="float16"), _t(520, dtype="float16")
    got = gemmlab.matmul(a, b, bias=bias, activation="gelu_tanh", kernel="wgmma_ws", config=dict(config, DEFER=1))
    assert _one_plan(25).variant.cfg["DEFER"] == 1
    want = reference(torch.matmul(a.double(), b.double()) + bias.double(), "gelu_tanh", torch)
    assert _rel(got, want) < 2 * TOL["float16"]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,dtype", [("wgmma_ws", "bfloat16"), ("async_simt", "float32")])
@pytest.mark.parametrize("shapes,transposed", [(((5, 33, 70), (5, 70, 45)), False), (((70, 33), (5, 33, 45)), False),
                                               (((5, 70, 33), (5, 45, 70)), True)],
                         ids=["both unaligned", "a broadcast", "transposed views"])
def test_pack_copies_a_batchs_unaligned_operands_first(shapes, transposed, kernel, dtype, no_batch_plans):
    torch = pytest.importorskip("torch")
    a, b = _t(*shapes[0], dtype=dtype), _t(*shapes[1], dtype=dtype)
    if transposed:    # (5, 33, 70) and (5, 70, 45), read column-major
        a, b = a.mT, b.mT
    got = gemmlab.matmul(a, b, kernel=kernel, config={"PACK": 1})
    plan = _one_plan(5)
    assert plan.packs and all(p.batch in (1, 5) for p in plan.packs)
    assert _rel(got, torch.matmul(a.double(), b.double())) < TOL[dtype]


@pytest.mark.gpu
def test_a_repeated_batch_reuses_its_plan_on_new_arrays(no_batch_plans):
    torch = pytest.importorskip("torch")
    for _ in range(3):
        a, b = _t(8, 128, 64), _t(8, 64, 128)
        got = gemmlab.matmul(a, b)
        assert _rel(got, torch.matmul(a.double(), b.double())) < TOL["bfloat16"]
    _one_plan(8)


@pytest.mark.gpu
def test_a_repeated_batch_whose_output_now_overlaps_an_input_is_refused(no_batch_plans):
    torch = pytest.importorskip("torch")
    a, b = _t(4, 64, 64), _t(4, 64, 64)
    gemmlab.matmul(a, b, out=torch.empty_like(a))
    with pytest.raises(ValueError, match="the output overlaps a"):
        gemmlab.matmul(a, b, out=a)
