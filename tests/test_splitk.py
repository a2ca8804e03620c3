"""Split-K (a SPLITK parameter of rungs 15, 17, 18 and 19, kernels/common.cuh): the registry's rules
and geometry, the slice arithmetic the kernel and the host share, the determinism of the reduction
(argued on a CPU emulation), spill-free compiles of every split variant whose SASS keeps the rung's
claimed instructions; on the GPU, correctness for every SPLITK the tuner may pick, bitwise-identical
repeats, the reduction's programmatic launch (the same bits either way), and graph capture."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from gemmlab.analysis import disasm
from gemmlab.core import registry
from gemmlab.core.registry import MAX_GRID_Y, SPLITK_SPACE, get, splitk_slice, splitk_slices
from gemmlab.core.variant import Variant, compile_reduce

# the rungs whose slices may go through the workspace (rung 28 sums its slices in a cluster only:
# tests/test_decode_fp8.py)
SPLIT_RUNGS = [r for r in registry.kernels() if "SPLITK" in r.params and not r.check_config({**r.params, "SPLITK": 4})]
CASES = [(r.slug, dt) for r in SPLIT_RUNGS for dt in r.dtypes]
# (slug, dtype, arch) for the architectures of the static guards each rung runs on
ARCH_CASES = [(slug, dt, arch) for slug, dt in CASES for arch in ("sm_90a", "sm_80") if get(slug).runs_on(arch)]


# ---- the registry ----------------------------------------------------------------------------
def test_the_fast_rungs_have_a_splitk_parameter_off_by_default_and_searched_by_the_tuner():
    assert {r.slug for r in SPLIT_RUNGS} >= {"warp_tiling", "mma_sync", "async_simt", "wgmma_tma"}
    for r in SPLIT_RUNGS:
        assert r.params["SPLITK"] == 1
        assert r.space["SPLITK"] == SPLITK_SPACE == (1, 2, 4, 8, 16)


def test_splitk_one_compiles_exactly_what_the_rung_compiled_without_the_parameter():
    r = get("async_simt")
    d = r.defines(r.config())
    assert "SPLITK" not in d and "GL_SPLITK" not in d


def test_every_splitk_above_one_shares_one_compiled_kernel():
    r = get("mma_sync")
    d2, d16 = r.defines(r.config({"SPLITK": 2})), r.defines(r.config({"SPLITK": 16}))
    assert d2 == d16 and d2["GL_SPLITK"] == 1 and "SPLITK" not in d2


def test_a_splitk_above_the_limit_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="SPLITK=65 must be at most 64"):
        get("async_simt").config({"SPLITK": 65})
    with pytest.raises(ValueError, match="positive int"):
        get("async_simt").config({"SPLITK": 0})


def test_split_launch_puts_the_slices_on_grid_z():
    r = get("async_simt")
    cfg = r.config({"SPLITK": 8})          # 128 x 256 tiles, BK = 8
    assert r.launch(256, 256, cfg).grid == (1, 2, 8)
    assert r.launch(256, 256, cfg, K=65536).grid == (1, 2, 8)
    assert r.launch(256, 256, cfg, K=20).grid == (1, 2, 3)     # 3 tiles of K: 3 slices, none empty
    assert r.launch(256, 256, r.config(), K=65536).grid == (1, 2, 1)


def test_split_k_and_a_tall_grid_exclude_each_other_with_a_reason():
    r = get("async_simt")
    cfg = r.config({"SPLITK": 2})
    assert r.launch(MAX_GRID_Y * cfg["BM"], 8, cfg).grid[1:] == (MAX_GRID_Y, 2)
    with pytest.raises(ValueError, match="SPLITK=2 puts the K slices along grid.z.*use SPLITK=1"):
        r.launch(MAX_GRID_Y * cfg["BM"] + 1, 8, cfg)


# ---- the slices ------------------------------------------------------------------------------
def test_slices_by_hand():
    # K = 100, BK = 8: 13 tiles; SPLITK 4 -> 4 tiles (32) per slice, the last one 4 long
    assert splitk_slices(100, 8, 4) == 4
    assert [splitk_slice(100, 8, 4, z) for z in range(4)] == [(0, 32), (32, 32), (64, 32), (96, 4)]
    # K = 20, BK = 8: 3 tiles; SPLITK 8 -> 3 slices of one tile
    assert splitk_slices(20, 8, 8) == 3
    assert [splitk_slice(20, 8, 3, z) for z in range(3)] == [(0, 8), (8, 8), (16, 4)]
    # K = 5 tiles of 32, SPLITK 4: ceil(5/4) = 2 tiles per slice, so 3 slices, not 4 (one would be empty)
    assert splitk_slices(160, 32, 4) == 3
    assert [splitk_slice(160, 32, 3, z) for z in range(3)] == [(0, 64), (64, 64), (128, 32)]


def test_slices_cover_k_exactly_once_on_whole_tiles_and_none_is_empty():
    for K, bk, s in itertools.product(list(range(1, 70)) + [1000, 4097, 65536], (8, 16, 32, 64), (1, 2, 3, 4, 8, 16, 64)):
        n = splitk_slices(K, bk, s)
        assert 1 <= n <= s
        covered = 0
        for z in range(n):
            k0, length = splitk_slice(K, bk, n, z)
            assert k0 == covered and k0 % bk == 0 and length > 0, (K, bk, s, z)
            covered += length
        assert covered == K


# ---- the reduction's determinism, on a CPU emulation --------------------------------------------
def _partial(a, b, k0, length):
    """One slice's partial tile in FP32, k ascending (what a block of the split kernel does)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(k0, k0 + length):
        acc += np.outer(a[:, k], b[k, :]).astype(np.float32)
    return acc


def _split_k(a, b, bk, s, finish_order):
    """The two kernels: slices finishing in ``finish_order`` each write their own workspace slice,
    then the reduction adds them in z order."""
    K = a.shape[1]
    n = splitk_slices(K, bk, s)
    ws = np.empty((n, a.shape[0], b.shape[1]), np.float32)
    for z in finish_order(n):
        ws[z] = _partial(a, b, *splitk_slice(K, bk, n, z))
    out = ws[0].copy()
    for z in range(1, n):
        out += ws[z]
    return out


def _atomic(a, b, bk, s, finish_order):
    """The alternative not taken: each slice adds into C as it finishes (atomics)."""
    K = a.shape[1]
    n = splitk_slices(K, bk, s)
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for z in finish_order(n):
        out += _partial(a, b, *splitk_slice(K, bk, n, z))
    return out


def test_the_reduction_gives_the_same_bits_whatever_order_the_slices_finish_in():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 200)).astype(np.float32) * 1e3
    b = rng.standard_normal((200, 5)).astype(np.float32)
    orders = [lambda n: range(n), lambda n: reversed(range(n))] + \
             [lambda n, s=seed: random.Random(s).sample(range(n), n) for seed in range(6)]
    split = [_split_k(a, b, 8, 8, o) for o in orders]
    assert all(np.array_equal(split[0], x) for x in split[1:])
    # the emulation is sensitive to the order: accumulating as slices finish changes the bits
    atomic = [_atomic(a, b, 8, 8, o) for o in orders]
    assert any(not np.array_equal(atomic[0], x) for x in atomic[1:])


# ---- static guards --------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def _compiled_ahead(compile_ahead):
    by_arch = {arch: [Variant.make(slug, dtype, a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec,
                                   config={"SPLITK": 4})
                      for slug, dtype, on in ARCH_CASES if on == arch
                      for a_col, b_col, vec in itertools.product((False, True), (False, True), (True, False))]
               for arch in ("sm_90a", "sm_80")}
    by_arch["sm_90a"] += [Variant.make(r.slug, r.dtypes[0], config=[preset, "SPLITK=4"])
                          for r in SPLIT_RUNGS for preset in r.presets]
    compile_ahead(by_arch, len(ARCH_CASES))


def _no_spills(v: Variant, arch: str) -> None:
    ck = v.compile(arch)
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{v.describe()} on {arch} spills"


@pytest.mark.parametrize("slug,dtype,arch", ARCH_CASES)
def test_split_variant_compiles_without_spills_in_every_layout(slug, dtype, arch):
    for a_col, b_col, vec in itertools.product((False, True), (False, True), (True, False)):
        _no_spills(Variant.make(slug, dtype, a_col=a_col, b_col=b_col, vec_a=vec, vec_b=vec, vec_c=vec,
                                config={"SPLITK": 4}), arch)


@pytest.mark.parametrize("slug", [r.slug for r in SPLIT_RUNGS if r.presets])
def test_split_variants_of_the_presets_compile_without_spills(slug):
    r = get(slug)
    for preset in r.presets:
        _no_spills(Variant.make(slug, r.dtypes[0], config=[preset, "SPLITK=4"]), "sm_90a")


@pytest.mark.parametrize("dtype", ("fp32", "fp16", "bf16"))
def test_the_reduction_kernel_compiles_without_spills(dtype):
    ck = compile_reduce(dtype, "sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0)


@pytest.mark.parametrize("dtype", ("fp32", "fp16", "bf16"))
def test_the_reduction_waits_for_the_partial_products_where_it_may_be_launched_before_they_end(dtype):
    """On sm_90 the reduction goes out with programmatic stream serialization (core/launch.py): its
    first instruction waits for the partial kernel's grid and memory (griddepcontrol.wait, SASS
    ACQBULK). Before sm_90 there is no such launch and the kernel has no wait."""
    assert disasm.has_opcode(disasm.sass(compile_reduce(dtype, "sm_90a").cubin), "ACQBULK")
    assert not disasm.has_opcode(disasm.sass(compile_reduce(dtype, "sm_80").cubin), "ACQBULK")


def test_rung_19s_split_variant_lets_the_reduction_be_scheduled_after_its_main_loop():
    """griddepcontrol.launch_dependents (SASS PREEXIT) in the split variant only: the whole-K kernel
    compiles what it compiled before."""
    split = disasm.sass(Variant.make("wgmma_tma", "bf16", config={"SPLITK": 4}).compile("sm_90a").cubin)
    whole = disasm.sass(Variant.make("wgmma_tma", "bf16").compile("sm_90a").cubin)
    assert disasm.has_opcode(split, "PREEXIT") and not disasm.has_opcode(whole, "PREEXIT")


def test_split_variant_reads_its_slice_from_grid_z():
    sass = disasm.sass(Variant.make("async_simt", "fp32", config={"SPLITK": 2}).compile("sm_90a").cubin)
    assert "SR_CTAID.Z" in sass


@pytest.mark.parametrize("slug", [r.slug for r in SPLIT_RUNGS if r.sass_claims])
def test_split_variant_keeps_the_instructions_its_rung_claims(slug):
    """A split variant is the rung's fast path on a slice of K (rung 19: still HGMMA fed by
    UTMALDG through mbarriers), not a slower copy of it."""
    r = get(slug)
    sass = disasm.sass(Variant.make(slug, r.dtypes[0], config={"SPLITK": 4}).compile("sm_90a").cubin)
    missing = [c for c in r.sass_claims if not disasm.has_opcode(sass, c)]
    assert not missing, f"{slug} with SPLITK: SASS lacks {missing}"


# ---- GPU ------------------------------------------------------------------------------------------
LAYOUTS = list(itertools.product((False, True), repeat=3))   # A, B, C column-major


@pytest.mark.gpu
@pytest.mark.parametrize("splitk", [s for s in SPLITK_SPACE if s > 1])
@pytest.mark.parametrize("slug,dtype", CASES)
def test_split_k_is_correct_on_odd_shapes_in_every_layout_with_alpha_and_beta(slug, dtype, splitk):
    from gemmlab.measure.verify import verify

    lib = "torch" if dtype == "bf16" else None
    # K not a multiple of BK nor of the slice; a K shorter than the split; M, N across tile edges
    for (M, N, K), (a_col, b_col, c_col) in itertools.product([(131, 67, 1001), (33, 257, 77), (5, 3, 4099)], LAYOUTS):
        for alpha, beta in ((1.5, -0.75), (1.0, 0.0)):   # beta == 0: C is NaN first and must not leak
            r = verify(slug, M, N, K, dtype, lib=lib, a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                       config={"SPLITK": splitk})
            assert r.ok, r.message()


# (M, N, K, offset): every stride a multiple of 8 elements with ragged tiles (rung 19: TMA boxes at
# each slice's k, zeros past K in the last slice only); one operand's stride odd in most layouts (one
# TMA operand, one copied by threads); every base one element off 16 bytes (no 16-byte access at all:
# rung 19's producer warpgroup copies both operands, from each slice's first k)
ALIGNMENT_CASES = [(200, 136, 1032, 0), (64, 8, 4104, 0), (200, 136, 1001, 0), (256, 264, 2048, 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("splitk", (4, 16))
@pytest.mark.parametrize("slug,dtype", CASES)
def test_split_k_is_correct_with_aligned_mixed_and_unaligned_operands_in_every_layout(slug, dtype, splitk):
    from gemmlab.measure.verify import verify

    from gemmlab.core.variant import SpillError

    lib = "torch" if dtype == "bf16" else None
    failures, checked = [], 0
    for (M, N, K, off), (a_col, b_col, c_col) in itertools.product(ALIGNMENT_CASES, LAYOUTS):
        for alpha, beta in ((1.5, -0.75), (1.0, 0.0)):
            try:
                r = verify(slug, M, N, K, dtype, lib=lib, a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha,
                           beta=beta, offset=off, config={"SPLITK": splitk})
            except SpillError:   # the API refuses a variant that spills (warp_tiling's scalar one): not run
                continue
            checked += 1
            if not r.ok:
                failures.append(r.message())
    assert checked and not failures, "\n".join(failures) or "every case was refused"


def _torch_operands(dtype: str, M: int, N: int, K: int):
    """(torch, a, b, c) on the GPU: random a (M x K) and b (K x N), C full of NaN."""
    torch = pytest.importorskip("torch")
    tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a, b = torch.randn(M, K, device="cuda", dtype=tdt), torch.randn(K, N, device="cuda", dtype=tdt)
    return torch, a, b, torch.full((M, N), float("nan"), device="cuda", dtype=tdt)


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_a_split_k_config_over_a_k_of_one_tile_still_reduces_into_c(slug, dtype):
    """SPLITK=4 with K below one BK tile is one slice, still the split variant: its FP32 partial
    goes through the workspace and the reduction applies alpha and beta (launched as a plain
    kernel it wrote FP32 partials into C: NaN on the H100)."""
    from gemmlab.measure.verify import verify

    lib = "torch" if dtype == "bf16" else None
    for M, N, K in ((131, 67, 45), (257, 129, 33), (9, 5, 1)):
        r = verify(slug, M, N, K, dtype, lib=lib, alpha=1.5, beta=-0.75, config={"SPLITK": 4})
        assert r.ok, r.message()


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_split_k_gives_the_same_bits_on_every_run(slug, dtype):
    import gemmlab

    torch, a, b, _ = _torch_operands(dtype, 200, 130, 3000)
    outs = []
    for _ in range(3):
        c = torch.full((200, 130), float("nan"), device="cuda", dtype=a.dtype)
        gemmlab.gemm(a, b, c, kernel=slug, config={"SPLITK": 16}, alpha=0.5)
        outs.append(c)
    torch.cuda.synchronize()
    assert all(torch.equal(outs[0], o) for o in outs[1:])


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_a_remembered_split_k_plan_reads_new_operands(slug, dtype):
    """The second call of a signature reuses the plan on other pointers (rung 19: the tensor maps of
    the new A and B replace the old ones in the parameter block)."""
    import gemmlab

    torch, a, b, c = _torch_operands(dtype, 192, 136, 2048)
    gemmlab.gemm(a, b, c, kernel=slug, config={"SPLITK": 8})
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    gemmlab.gemm(a2, b2, c, kernel=slug, config={"SPLITK": 8})
    torch.cuda.synchronize()
    ref = a2.double() @ b2.double()
    tol = 1e-5 if dtype == "fp32" else 1e-2
    assert float((c.double() - ref).norm() / ref.norm()) < tol


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_a_split_k_call_captures_into_a_cuda_graph_with_its_own_workspace(slug, dtype):
    """Planned on the current stream, captured on another (no workspace there), replayed on a
    third while a direct call of the same plan runs on the current stream: both right."""
    import gemmlab

    torch, a, b, c = _torch_operands(dtype, 70, 90, 2049)
    gemmlab.gemm(a, b, c, kernel=slug, config={"SPLITK": 8})   # compiles and plans (current stream)
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a, b, c, kernel=slug, config={"SPLITK": 8}, alpha=2.0)
    c.fill_(float("nan"))
    direct = torch.full_like(c, float("nan"))
    torch.cuda.synchronize()
    replay = torch.cuda.Stream()
    with torch.cuda.stream(replay):
        g.replay()
    gemmlab.gemm(a, b, direct, kernel=slug, config={"SPLITK": 8}, alpha=-1.0)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    tol = 1e-5 if dtype == "fp32" else 1e-2
    assert float((c.double() - 2.0 * ref).norm() / ref.norm()) < 2 * tol
    assert float((direct.double() + ref).norm() / ref.norm()) < tol


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", CASES)
def test_the_programmatic_launch_of_the_reduction_changes_no_bit(slug, dtype, monkeypatch):
    """The plan made with GEMMLAB_PDL's default (the reduction scheduled early, waiting in the
    kernel) and the one made without it give the same bits; the plan says which it does."""
    import gemmlab
    from gemmlab.core import launch

    torch, a, b, c0 = _torch_operands(dtype, 333, 129, 3001)
    c0.normal_()
    out = []
    for pdl in (True, False):
        monkeypatch.setattr(launch, "PDL", pdl)
        c = c0.clone()
        p = gemmlab.plan(a, b, c, alpha=1.5, beta=-0.5, kernel=slug, config={"SPLITK": 8})
        assert ("reduction launched programmatically" in repr(p)) == pdl
        p.run()
        out.append(c)
    torch.cuda.synchronize()
    assert torch.equal(out[0], out[1])


@pytest.mark.gpu
def test_a_plan_says_its_split_and_why():
    import gemmlab

    torch, a, b, c = _torch_operands("fp32", 256, 256, 65536)
    p = gemmlab.plan(a, b, c)
    assert p.splits > 1 and "split-K" in repr(p) and p.choice.source in ("tuned", "defaults", "rule")
    p.run()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-5


@pytest.mark.gpu
def test_a_split_k_call_made_while_another_context_is_current_runs_in_the_plans_context(another_context):
    """Another context of the device current (the default stream then resolves in it): the call
    still asks whether the plan's stream captures, launches the partial products and the
    programmatically launched reduction in the plan's context, and is right."""
    import gemmlab
    from gemmlab.core import launch

    torch, a, b, c = _torch_operands("bf16", 257, 131, 4099)
    p = gemmlab.plan(a, b, c, kernel="wgmma_tma", config={"SPLITK": 8})
    assert launch.PDL == ("reduction launched programmatically" in repr(p))
    gemmlab.gemm(a, b, c, kernel="wgmma_tma", config={"SPLITK": 8})   # remembered: the next call's path
    c.fill_(float("nan"))
    torch.cuda.synchronize()
    with another_context():
        assert not launch.stream_capturing(0, 0)
        gemmlab.gemm(a, b, c, kernel="wgmma_tma", config={"SPLITK": 8}, alpha=-1.0)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float((c.double() + ref).norm() / ref.norm()) < 1e-2


@pytest.mark.gpu
def test_the_capture_query_answers_for_a_stream_object_and_for_the_default_stream():
    """A capturing stream says yes, an idle one and the legacy default stream no; asked directly
    (a stream object, or the default stream with the device's primary context current)."""
    torch = pytest.importorskip("torch")
    from gemmlab.core.launch import stream_capturing

    torch.zeros(1, device="cuda")   # the primary context current on this thread
    side = torch.cuda.Stream()
    assert not stream_capturing(side.cuda_stream, 0)
    assert not stream_capturing(0, 0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        seen = stream_capturing(side.cuda_stream, 0)
        torch.ones(1, device="cuda")   # a capture must record something
    assert seen
    assert not stream_capturing(side.cuda_stream, 0)
