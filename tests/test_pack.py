"""Operand packing (the PACK switch of rungs 17-20, core/packing.py, kernels/pack.cu): an operand
the 16-byte paths cannot read (base not 16-byte aligned, or a leading dimension not a multiple of
16 bytes) is copied into the stream's workspace first and the rung runs its 16-byte variant on the
copy. CPU: the switch in the registry, what a problem packs and where, the pack kernel's compile,
auto's decision, the programmatic launch of what follows a copy on sm_90; GPU: correctness on
misaligned views in every layout, with split-K, through the fast path's cached plans, inside a
captured CUDA graph, and the same bits with and without the programmatic launch."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from gemmlab.analysis import disasm
from gemmlab.core import dispatch, packing, registry, rules, selection
from gemmlab.core.problem import ArrayInfo, GemmProblem
from gemmlab.core.variant import Variant

PACKING = [r for r in registry.kernels() if "PACK" in r.params]
H100 = SimpleNamespace(arch="sm_90a", name="NVIDIA H100 80GB HBM3", sm_count=132)


def problem(M, N, K, dtype="fp32", *, lds=(None, None, None), ptrs=(0x10000, 0x20000, 0x30000),
            cols=(False, False, False)) -> GemmProblem:
    """A stand-in problem: a (M x K), b (K x N), c (M x N) at ``ptrs`` with leading dimensions
    ``lds`` (None: dense) and column-major flags ``cols``."""
    def info(rows, ncols, ld, ptr, col):
        return ArrayInfo(ptr, rows, ncols, ld or (rows if col else ncols), col, dtype, 0, "cupy")

    shapes = ((M, K), (K, N), (M, N))
    a, b, c = (info(*s, ld, p, col) for s, ld, p, col in zip(shapes, lds, ptrs, cols))
    return GemmProblem(M, N, K, dtype, a, b, c, 1.0, 0.0)


# ---- the switch ------------------------------------------------------------------------------
def test_the_rungs_with_16_byte_paths_have_a_pack_switch_off_by_default():
    assert {r.slug for r in PACKING} == {"mma_sync", "async_simt", "wgmma_tma", "tf32_mma", "wgmma_ws"}
    for r in PACKING:
        assert r.params["PACK"] == 0 and r.config()["PACK"] == 0
        assert r.config({"PACK": 1})["PACK"] == 1 and r.config("PACK=1")["PACK"] == 1


def test_pack_is_a_switch_and_anything_but_0_or_1_is_refused_naming_it():
    r = registry.get("wgmma_tma")
    for bad in (2, -1, True, 1.0, "1"):
        with pytest.raises(ValueError, match="parameter PACK of rung 'wgmma_tma' is a switch: 0 or 1"):
            r.config({"PACK": bad})


def test_a_rung_without_a_16_byte_path_has_no_pack_switch():
    with pytest.raises(ValueError, match="has no parameter 'PACK'"):
        registry.get("warp_tiling").config({"PACK": 1})


def test_pack_compiles_the_same_kernel_the_plan_packs_before_it():
    for r in PACKING:
        assert r.defines(r.config({"PACK": 1})) == r.defines(r.config())
        assert "PACK" not in r.defines(r.config({"PACK": 1}))


def test_the_tuner_searches_pack_only_when_asked():
    from gemmlab.tune.space import Space

    assert "PACK" not in Space.of("mma_sync").params
    assert Space.of("mma_sync", overrides={"PACK": (1, 0)}).params["PACK"] == (0, 1)
    with pytest.raises(ValueError, match="values of PACK must be 0 or 1"):
        Space.of("mma_sync", overrides={"PACK": (0, 2)})


# ---- what a problem packs -----------------------------------------------------------------------
def test_an_operand_with_an_odd_leading_dimension_is_packed_with_it_rounded_up_to_16_bytes():
    kp = problem(4093, 4093, 4093, "bf16").kernel_view()
    a, b = packing.plan_packs(kp, "bf16")
    assert (a.operand, a.outer, a.inner, a.ld, a.ld_packed) == ("A", 4093, 4093, 4093, 4096)
    assert (b.operand, b.outer, b.inner, b.ld, b.ld_packed) == ("B", 4093, 4093, 4093, 4096)
    assert b.offset == a.nbytes and a.nbytes % packing.ALIGN == 0 and a.nbytes >= 4093 * 4096 * 2
    assert packing.describe((a, b)) == "packs A: ld 4093 -> 4096, B: ld 4093 -> 4096"


def test_a_misaligned_base_alone_packs_into_a_dense_copy():
    # a 127 x 64 fp32 view of a padded array (ld 100), 4 bytes past a 16-byte boundary
    kp = problem(127, 64, 64, lds=(100, None, None), ptrs=(0x10004, 0x20000, 0x30000)).kernel_view()
    (a,) = packing.plan_packs(kp, "fp32")
    assert (a.operand, a.ld, a.ld_packed) == ("A", 100, 64)


def test_an_operand_the_fast_path_can_read_is_not_packed():
    assert packing.plan_packs(problem(4096, 4096, 4096, "fp16").kernel_view(), "fp16") == ()
    kp = problem(64, 96, 1000).kernel_view()              # fp32: 1000 and 96 are multiples of 4
    assert packing.plan_packs(kp, "fp32") == ()


def test_packs_follow_the_kernels_view_of_column_major_operands_and_c():
    # column-major a (M x K, ld M = 131): its rows as the kernel copies them are its K columns of M,
    # each copied into a row of a 32-byte multiple
    kp = problem(131, 64, 96, cols=(True, False, False)).kernel_view()
    (a,) = packing.plan_packs(kp, "fp32")
    assert (a.operand, a.outer, a.inner, a.ld_packed) == ("A", 96, 131, 136)
    # column-major c: the kernel computes C^T = B^T A^T, so the user's b (ld 131) is the kernel's A
    kp = problem(64, 131, 96, cols=(False, False, True)).kernel_view()
    (a,) = packing.plan_packs(kp, "fp32")
    assert (a.operand, a.outer, a.inner, a.ld_packed) == ("A", 96, 131, 136)


def test_the_gemm_sees_the_copies_leading_dimensions_and_its_16_byte_variant():
    kp = problem(127, 4097, 1023).kernel_view()
    view = packing.packed_view(kp, packing.plan_packs(kp, "fp32"))
    assert (view.lda, view.ldb, view.vec_a, view.vec_b) == (1024, 4104, True, True)   # rows of 32-byte multiples
    assert (view.a_ptr, view.b_ptr, view.ldc, view.vec_c) == (kp.a_ptr, kp.b_ptr, kp.ldc, kp.vec_c)


def test_a_workspace_holds_the_copies_then_the_split_k_partial_products_on_aligned_boundaries():
    packs = packing.plan_packs(problem(127, 4097, 1023).kernel_view(), "fp32")
    split_offset, total = packing.layout(packs, 3 * 127 * 4097 * 4)
    assert [p.offset for p in packs] == [0, packs[0].nbytes]
    assert split_offset == sum(p.nbytes for p in packs) and split_offset % packing.ALIGN == 0
    assert total >= split_offset + 3 * 127 * 4097 * 4 + packing.ALIGN    # room to round the base up
    assert packing.base(0x10001) == 0x10100 and packing.base(0x10100) == 0x10100
    assert packing.layout((), 1000) == (0, 1024)                          # split-K alone: as before


def test_a_pack_launch_covers_every_chunk_of_every_row_and_caps_grid_y():
    (a,) = packing.plan_packs(problem(4093, 8, 4093, "bf16", lds=(None, 8, 8)).kernel_view(), "bf16")
    gx, gy, _ = a.grid()
    assert gx * 32 * 8 >= a.ld_packed > (gx - 1) * 32 * 8 and gy * packing.ROWS >= a.outer
    (tall,) = packing.plan_packs(problem(10**6, 8, 3, lds=(None, 8, 8)).kernel_view(), "fp32")
    assert tall.grid()[1] == 65535    # the kernel strides over the rows past it


def test_a_leading_dimension_past_the_32_bit_range_after_rounding_is_refused():
    kp = problem(1, 1, 2**31 - 3, "fp16", lds=(None, 2**31 - 3, None)).kernel_view()
    with pytest.raises(ValueError, match="as a 32-bit int: use PACK=0"):
        packing.plan_packs(kp, "fp16")


# ---- the pack kernel -----------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ("sm_90a", "sm_80"))
@pytest.mark.parametrize("dtype", ("fp32", "fp16", "bf16"))
def test_the_pack_kernel_compiles_without_spills_and_writes_16_bytes_at_a_time(dtype, arch):
    ck = packing.compile_pack(dtype, arch)
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0)
    assert "STG.E.128" in disasm.sass(ck.cubin)


@pytest.mark.parametrize("dtype", ("fp32", "bf16"))
def test_the_batched_pack_kernel_takes_its_element_from_grid_z_without_spills(dtype):
    ck = packing.compile_pack(dtype, "sm_90a", None, packing.KERNEL, False, True)
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0)
    sass = disasm.sass(ck.cubin)
    assert "SR_CTAID.Z" in sass and "STG.E.128" in sass
    assert "SR_CTAID.Z" not in disasm.sass(packing.compile_pack(dtype, "sm_90a").cubin)


@pytest.mark.parametrize("kernel,dtype,split", [(packing.KERNEL, d, False) for d in ("fp32", "fp16", "bf16")]
                         + [(packing.KERNEL_T, "fp32", False), (packing.KERNEL, "fp32", True), (packing.KERNEL_T, "fp32", True)])
def test_a_copy_waits_for_the_kernel_before_it_on_sm_90(kernel, dtype, split):
    """A plan's second copy goes out with programmatic stream serialization on sm_90
    (core/launch.py): its first instruction waits for the first copy's grid (griddepcontrol.wait,
    SASS ACQBULK); built for sm_80 it has no such wait."""
    assert disasm.has_opcode(disasm.sass(packing.compile_pack(dtype, "sm_90a", None, kernel, split).cubin), "ACQBULK")
    assert not disasm.has_opcode(disasm.sass(packing.compile_pack(dtype, "sm_80", None, kernel, split).cubin), "ACQBULK")


@pytest.mark.parametrize("slug", [r.slug for r in PACKING])
def test_a_packing_rungs_kernel_waits_for_the_copies_before_it_on_sm_90(slug):
    """After operand copies the plan launches the rung's kernel programmatically serialized on
    sm_90, so the kernel waits for the last copy's grid in its first instruction (ACQBULK): a no-op
    after an ordinary launch. (Not after stream-K's memset of its flags: rung 18's STREAMK kernel
    is never launched so.)"""
    r = registry.get(slug)
    v = Variant.make(slug, r.dtypes[0], config={"STREAMK": 0} if "STREAMK" in r.params else None)
    assert disasm.has_opcode(disasm.sass(v.compile("sm_90a").cubin), "ACQBULK")


def test_a_precompile_of_a_packing_rung_builds_the_pack_kernel_too(fresh_cache, monkeypatch):
    from gemmlab.core import compile as glc
    from gemmlab.core import precompile as pc

    monkeypatch.setattr(Variant, "compile", lambda self, arch, before_compile=None: None)   # the GEMM itself: not here
    with pc.CompilePool(1) as pool:
        pool.build([Variant.make("tf32_mma", "fp32")], "sm_80", lambda v, hit, err: None)
    glc.clear_memory_cache()
    assert packing.compile_pack("fp32", "sm_80").cache_hit


# ---- auto -------------------------------------------------------------------------------------------
@pytest.fixture
def no_tuned(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    dispatch.reload()
    yield
    dispatch.reload()


def test_auto_packs_both_operands_of_4093_cubed_bf16_on_an_h100(no_tuned):
    # the selection model's pick (rung 19 or 21 with copies measured fastest there) or the rule's
    c = dispatch.decide(problem(4093, 4093, 4093, "bf16"), "auto", None, H100)
    assert c.rung.slug in ("wgmma_tma", "wgmma_ws") and c.config["PACK"] == 1
    assert c.reason.count("packs A: ld 4093 -> 4096, B: ld 4093 -> 4096") == 1


def test_auto_decides_packing_whatever_source_chose_the_tile(no_tuned):
    # 127x4097x1023 fp32: the shipped entry's tile; rung 18's measured unaligned slowdown (~1.1x)
    # does not pay for the copies there (packed, it ran 0.35x cuBLAS against 0.38x unpacked)
    c = dispatch.decide(problem(127, 4097, 1023), "auto", None, H100)
    assert c.source == "defaults" and c.rung.slug == "async_simt" and c.config["SPLITK"] > 1
    assert c.config["PACK"] == 0 and "no packing (copies ~" in c.reason
    # at 4093^3 the same rung's copies (~90 us) are small beside a tenth of its ~2.9 ms
    c = dispatch.decide(problem(4093, 4093, 4093), "auto", None, H100)
    assert c.rung.slug == "async_simt" and c.config["PACK"] == 1 and "packs A: ld 4093 -> 4096" in c.reason


def test_auto_does_not_pack_operands_the_fast_path_reads(no_tuned):
    for dtype in ("bf16", "fp32"):
        c = dispatch.decide(problem(4096, 4096, 4096, dtype), "auto", None, H100)
        assert rung_config(c).get("PACK", 0) == 0 and "pack" not in c.reason


def test_auto_does_not_pack_where_the_copy_costs_more_than_it_saves(rule_only):
    c = dispatch.decide(problem(37, 41, 3), "auto", None, H100)    # (7 x 5 is thin: rung 23, no PACK)
    assert c.config["PACK"] == 0 and "no packing (copies ~" in c.reason


def test_auto_does_not_take_more_workspace_for_copies_than_its_limit(no_tuned, monkeypatch):
    monkeypatch.setattr(rules, "PACK_MAX_BYTES", 1 << 20)
    p = problem(4093, 4093, 4093, "bf16")
    assert dispatch.decide(p, "auto", None, H100).config["PACK"] == 0
    opts = selection.options(p, H100)
    assert "tma_copy" not in opts                  # the option that always copies does not apply
    assert opts["ws"].config["PACK"] == 0 and f"more than {1 << 20}" in opts["ws"].reason


def test_a_named_rung_packs_only_when_its_config_says_so(no_tuned):
    p = problem(4093, 4093, 4093, "bf16")
    assert dispatch.decide(p, "wgmma_tma", None, H100).config is None      # its defaults: PACK=0
    assert dispatch.decide(p, "auto", {"PACK": 1}, H100).config == {"PACK": 1}


def test_the_estimate_weighs_the_copies_against_what_the_fast_path_saves():
    r = registry.get("wgmma_tma")
    kp = problem(4093, 4093, 4093, "bf16").kernel_view()
    copies, saved = dispatch.pack_estimate(r, r.config(), kp, packing.plan_packs(kp, "bf16"), 132, "bf16")
    # both operands read and written once at 3 TB/s plus two launches; 512 tiles fill 132 SMs
    assert copies == pytest.approx(2 * 4093 * (4093 + 4096) * 2 / 3.0e12 + 4e-6)
    assert saved == pytest.approx((733.2 / 88.3 - 1) * 2 * 4093 ** 3 / 733.2e12)


def test_every_packing_rung_has_the_figures_the_estimate_needs():
    for r in PACKING:
        for precision in r.precisions:
            assert f"{r.slug}/{precision}" in dispatch.ALIGNED_TFLOPS or r.slug in dispatch.ALIGNED_TFLOPS, r.slug


def rung_config(choice) -> dict:
    return choice.rung.config(choice.config)


# ---- GPU ----------------------------------------------------------------------------------------------
LAYOUTS = list(itertools.product((False, True), repeat=3))   # A, B, C column-major
CASES = [(r.slug, dt) for r in PACKING for dt in r.dtypes]
# (M, N, K, ld_pad, offset): misaligned bases (offset 1 element), odd leading dimensions, odd
# shapes across tile edges, K shorter than a tile
SHAPES = [(131, 67, 1001, 3, 1), (33, 257, 77, 0, 1), (127, 129, 65, 1, 0), (5, 3, 29, 0, 0)]


def _lib(dtype):
    return "torch" if dtype == "bf16" else None


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
@pytest.mark.parametrize("slug,dtype", CASES)
def test_pack_is_correct_on_misaligned_views_in_every_layout_with_alpha_and_beta(slug, dtype, layout):
    from gemmlab.measure.verify import verify

    failures = []
    for (M, N, K, pad, off), (alpha, beta) in itertools.product(SHAPES, ((1.0, 0.0), (1.5, -0.75))):
        r = verify(slug, M, N, K, dtype, lib=_lib(dtype), a_col=layout[0], b_col=layout[1], c_col=layout[2],
                   alpha=alpha, beta=beta, ld_pad=pad, offset=off, config={"PACK": 1})
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", [(s, d) for s, d in CASES if "SPLITK" in registry.get(s).params])
def test_pack_and_split_k_together_are_correct_in_every_layout(slug, dtype):
    from gemmlab.measure.verify import verify

    for (M, N, K, pad, off), (a_col, b_col, c_col) in itertools.product([(131, 67, 1001, 3, 1), (5, 3, 4099, 0, 1)],
                                                                        LAYOUTS):
        for alpha, beta in ((1.0, 0.0), (1.5, -0.75)):
            r = verify(slug, M, N, K, dtype, lib=_lib(dtype), a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha,
                       beta=beta, ld_pad=pad, offset=off, config={"PACK": 1, "SPLITK": 4})
            assert r.ok, r.message()


def _misaligned(torch, rows: int, cols: int, dtype):
    """A random rows x cols view one element past its allocation's start (base not 16-byte aligned)."""
    return torch.randn(rows * cols + 1, device="cuda", dtype=torch.float32).to(dtype)[1:].view(rows, cols)


def _rel_err(c, a, b, alpha=1.0):
    ref = alpha * (a.double() @ b.double())
    return float((c.double() - ref).norm() / ref.norm())


TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_a_packed_plan_says_what_it_packs_and_runs_the_16_byte_variant(slug, dtype):
    import gemmlab

    torch = pytest.importorskip("torch")
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    a, b = _misaligned(torch, 259, 77, tdt), torch.randn(77, 131, device="cuda", dtype=tdt)
    c = torch.full((259, 131), float("nan"), device="cuda", dtype=tdt)
    p = gemmlab.plan(a, b, c, kernel=slug, config={"PACK": 1})
    assert f", packs A: ld 77 -> 80, B: ld 131 -> {packing.packed_ld(131, dtype)}" in repr(p)
    assert p.variant.vec_a and p.variant.vec_b and not p.variant.vec_c
    assert not gemmlab.plan(a, b, c, kernel=slug).packs        # a named rung's default: PACK=0
    p.run()
    torch.cuda.synchronize()
    assert _rel_err(c, a, b) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype,precision", [(s, d, None) for s, d in CASES] + [("wgmma_tf32", "fp32", "3xtf32")])
def test_the_programmatic_launch_after_the_copies_changes_no_bit(slug, dtype, precision, monkeypatch):
    """Both operands copied (a misaligned A, an odd leading dimension of B; rung 22 in 3xtf32 also
    splits them): the plan made with GEMMLAB_PDL's default (the second copy and the kernel
    scheduled early, each waiting for the one before) and the one made without it give the same
    bits, and the plan says which it does."""
    import gemmlab
    from gemmlab.core import launch

    torch = pytest.importorskip("torch")
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    a, b = _misaligned(torch, 259, 1001, tdt), torch.randn(1001, 131, device="cuda", dtype=tdt)
    c0 = torch.randn(259, 131, device="cuda", dtype=tdt)
    out = []
    for pdl in (True, False):
        monkeypatch.setattr(launch, "PDL", pdl)
        c = c0.clone()
        p = gemmlab.plan(a, b, c, alpha=1.5, beta=-0.5, kernel=slug, precision=precision,
                         config={"PACK": 1} if "PACK" in registry.get(slug).params else None)
        assert len(p.packs) >= 2 and ("the kernel after them launched programmatically" in repr(p)) == pdl
        p.run()
        out.append(c)
    torch.cuda.synchronize()
    assert torch.equal(out[0], out[1])


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_a_cached_packed_plan_packs_the_operands_of_each_call(slug, dtype, plan_count):
    """The fast path's plan, keyed by the alignment class, reused on other (equally misaligned)
    operands: each call copies its own."""
    import gemmlab

    torch = pytest.importorskip("torch")
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    for alpha in (1.0, -2.0, 0.5):
        a, b = _misaligned(torch, 97, 61, tdt), _misaligned(torch, 61, 45, tdt)
        c = torch.full((97, 45), float("nan"), device="cuda", dtype=tdt)
        gemmlab.gemm(a, b, c, kernel=slug, config={"PACK": 1}, alpha=alpha)
        torch.cuda.synchronize()
        assert _rel_err(c, a, b, alpha) < 1e-2
    assert len(plan_count) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_a_packing_call_captured_into_a_cuda_graph_packs_on_every_replay(slug, dtype):
    """Captured on a side stream (its copies go to the graph's own workspace), replayed twice
    with new contents in the operands between the replays: both replays read the new data."""
    import gemmlab

    torch = pytest.importorskip("torch")
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    a, b = _misaligned(torch, 70, 99, tdt), _misaligned(torch, 99, 53, tdt)
    c = torch.empty(70, 53, device="cuda", dtype=tdt)
    gemmlab.gemm(a, b, c, kernel=slug, config={"PACK": 1})    # compiles and plans
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a, b, c, kernel=slug, config={"PACK": 1}, alpha=2.0)
    for _ in range(2):
        a.copy_(torch.randn(70, 99, device="cuda"))
        b.copy_(torch.randn(99, 53, device="cuda"))
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert _rel_err(c, a, b, 2.0) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("fp32", "fp16", "bf16"))
def test_auto_on_misaligned_operands_is_correct_and_packs_when_its_reason_says_so(dtype):
    import gemmlab

    torch = pytest.importorskip("torch")
    tdt = getattr(torch, TORCH_DTYPES[dtype])
    a, b = _misaligned(torch, 1029, 1027, tdt), _misaligned(torch, 1027, 1031, tdt)
    c = torch.full((1029, 1031), float("nan"), device="cuda", dtype=tdt)
    p = gemmlab.plan(a, b, c)
    assert bool(p.packs) == ("; packs " in p.choice.reason)
    p.run()
    torch.cuda.synchronize()
    assert _rel_err(c, a, b) < 1e-2


# ---- the transposing pack of a k_major rung (22 wgmma_tf32: TF32 wgmma has no transpose) ------------
def test_a_k_major_plan_transposes_a_row_major_b_and_leaves_a_row_major_a_where_it_is():
    kp = problem(256, 128, 64).kernel_view()          # row-major A, row-major B (MN-major)
    (p,) = packing.plan_packs(kp, "fp32", k_major=True)
    assert (p.operand, p.transpose, p.kernel) == ("B", True, packing.KERNEL_T)
    assert (p.outer, p.inner, p.ld_packed) == (kp.K, kp.N, kp.K)   # the copy: N rows of K
    view = packing.packed_view(kp, (p,))
    assert (view.a_col, view.b_col, view.ldb, view.vec_b) == (False, True, kp.K, True)


def test_a_transposed_copy_pads_its_rows_to_16_bytes_and_counts_its_bytes():
    kp = problem(64, 64, 45).kernel_view()            # B is 45 x 64 row-major: copy rows of 45 -> 48
    a, p = packing.plan_packs(kp, "fp32", k_major=True)   # A (lda 45) is copied too, not transposed
    assert (a.operand, a.transpose, a.ld_packed) == ("A", False, 48)
    assert (p.ld_packed, p.rows_packed, p.nbytes) == (48, 64, 64 * 48 * 4)
    assert p.traffic == (45 * 64 + 64 * 48) * 4
    assert p.grid() == (2, 2, 1) and p.threads == packing.THREADS_T


def test_without_k_major_no_aligned_operand_is_copied_whatever_its_layout():
    assert packing.plan_packs(problem(256, 128, 64).kernel_view(), "fp32") == ()


def test_the_wgmma_tf32_variants_the_plan_can_run_are_the_k_major_aligned_ones_and_register_a_in_tf32():
    r = registry.get("wgmma_tf32")
    tf32 = [c for c in itertools.product((False, True), repeat=5) if r.compiles(*c[:4], "tf32", c[4])]
    assert tf32 == [(False, True, True, True, False), (True, True, True, True, False), (True, True, True, True, True)]
    split = [c for c in itertools.product((False, True), repeat=5) if r.compiles(*c[:4], "3xtf32", c[4])]
    assert split == [(False, True, True, True, False)] and r.k_major and "PACK" not in r.params
    assert r.reads_register_a("tf32") and not r.reads_register_a("3xtf32") and r.reads_register_a()


def test_no_other_rung_reads_a_from_registers_or_writes_a_column_major_c():
    for r in registry.RUNGS:
        if r.slug != "wgmma_tf32":
            assert not r.reads.register_a and not r.compiles(False, False, True, True, None, True), r.slug


def test_a_tf32_plan_computes_row_major_a_and_b_transposed_and_copies_nothing():
    kp = problem(256, 128, 64).kernel_view()          # row-major A, row-major B (MN-major)
    packs, view = packing.for_kernel(kp, "fp32", False, True, 1, register_a=True)
    assert packs == () and view == kp.transposed()
    assert (view.M, view.N, view.a_ptr, view.b_ptr, view.lda, view.ldb) == (128, 256, kp.b_ptr, kp.a_ptr, kp.ldb, kp.lda)
    assert (view.a_col, view.b_col, view.c_col) == (True, True, True)


def test_a_tf32_plan_reads_a_column_major_a_where_it_is_and_copies_only_a_row_major_b():
    kp = problem(256, 128, 64, cols=(True, True, False)).kernel_view()
    assert packing.for_kernel(kp, "fp32", False, True, 1, register_a=True) == ((), kp)
    kp = problem(256, 128, 64, cols=(True, False, False)).kernel_view()    # both MN-major
    (p,), view = packing.for_kernel(kp, "fp32", False, True, 1, register_a=True)
    assert (p.operand, p.transpose) == ("B", True) and (view.a_col, view.b_col, view.c_col) == (True, True, False)


def test_a_3xtf32_plan_never_transposes_the_problem_it_splits_both_operands():
    kp = problem(256, 128, 64).kernel_view()
    packs, view = packing.for_kernel(kp, "fp32", False, True, 2, register_a=False)
    assert [p.operand for p in packs] == ["A", "B"] and not view.c_col and (view.M, view.N) == (256, 128)


def test_transposing_a_kernel_problem_twice_gives_it_back():
    kp = problem(200, 136, 45, lds=(48, 140, 137)).kernel_view()
    assert kp.transposed().transposed() == kp and kp.transposed() != kp


def test_kernel_layout_names_the_variant_for_kernel_makes_in_every_layout_and_precision():
    r = registry.get("wgmma_tf32")
    for (a_col, b_col), prec in itertools.product(itertools.product((False, True), repeat=2), ("tf32", "3xtf32")):
        kp = problem(200, 136, 48, cols=(a_col, b_col, False)).kernel_view()
        ra = r.reads_register_a(prec)
        _, view = packing.for_kernel(kp, "fp32", False, True, r.planes_for(prec), ra)
        assert packing.kernel_layout(a_col, b_col, True, ra) == (view.a_col, view.b_col, view.c_col)
        assert r.compiles(view.a_col, view.b_col, view.vec_a, view.vec_b, prec, view.c_col), (a_col, b_col, prec)


def test_a_plan_without_pack_on_a_rung_that_is_not_k_major_copies_nothing_even_when_unaligned():
    kp = problem(64, 64, 45).kernel_view()            # lda = 45 FP32: no 16-byte access
    assert packing.for_kernel(kp, "fp32", False, False) == ((), kp)


def test_the_kernel_view_of_a_k_major_plan_is_a_variant_the_rung_compiles_in_every_layout():
    r = registry.get("wgmma_tf32")
    for a_col, b_col in itertools.product((False, True), repeat=2):
        kp = problem(200, 136, 45, cols=(a_col, b_col, False)).kernel_view()
        packs, view = packing.for_kernel(kp, "fp32", False, True)
        assert packs and r.compiles(view.a_col, view.b_col, view.vec_a, view.vec_b), (a_col, b_col)


@pytest.mark.gpu
def test_a_packing_call_made_while_another_context_is_current_runs_in_the_plans_context(another_context):
    """The copies, and the rung's kernel launched programmatically after them, relaunched in the
    plan's context when another context of the device is current; the result is right."""
    torch = pytest.importorskip("torch")
    import gemmlab

    a = torch.randn(131, 1023, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1023, 4097, device="cuda", dtype=torch.bfloat16)
    c = torch.full((131, 4097), float("nan"), device="cuda", dtype=torch.bfloat16)
    p = gemmlab.plan(a, b, c, kernel="wgmma_tma", config={"PACK": 1})
    assert "packs" in repr(p)
    gemmlab.gemm(a, b, c, kernel="wgmma_tma", config={"PACK": 1})   # remembered: the next call's path
    c.fill_(float("nan"))
    torch.cuda.synchronize()
    with another_context():
        gemmlab.gemm(a, b, c, kernel="wgmma_tma", config={"PACK": 1}, alpha=2.0)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float((c.double() - 2.0 * ref).norm() / ref.norm()) < 1e-2
