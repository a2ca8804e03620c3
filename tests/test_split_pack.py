"""3xtf32 on rung 22 (wgmma_tf32): the split pack writes each operand as two K-major TF32 planes
(hi = tf32(x), lo = tf32(x - hi)), the kernel reads them through 3-D tensor maps, and the registry
sizes the stages for two planes. CPU: the split's arithmetic on host-simulated values, the plan's
packs and workspace, the maps, the registry's rules, auto's choice. GPU: the planes the kernel
writes are the host model's, bit for bit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gemmlab.core import dispatch, packing, registry, tensormaps
from gemmlab.core.problem import ArrayInfo, GemmProblem
from gemmlab.core.variant import Variant

RUNG = registry.get("wgmma_tf32")
TF32_LOW = np.uint32(0x1FFF)      # the 13 fraction bits a TF32 does not have


def _edge_values() -> np.ndarray:
    f32 = np.finfo(np.float32)
    rng = np.random.default_rng(7)
    rand = np.concatenate([rng.standard_normal(4000), rng.uniform(-1e30, 1e30, 500), rng.uniform(-1e-30, 1e-30, 500)])
    ties = np.array([0x3F801000, 0x3F803000, 0xBF801000], dtype=np.uint32).view(np.float32)   # exactly half a TF32 ulp
    edge = [0.0, -0.0, 1.0, -1.0, 2.0**-126, -(2.0**-126), 1e38, -1e38, 3.0e38, np.pi, -np.e, 1 / 3,
            2.0**-149, 3 * 2.0**-149, 2.0**-130, -(2.0**-140), f32.tiny * 0.75]
    return np.concatenate([rand.astype(np.float32), ties, np.array(edge, dtype=np.float32)])


# ---- the split, on host-simulated values -----------------------------------------------------------
def test_both_parts_of_the_split_are_tf32_representable():
    hi, lo = packing.split_tf32(_edge_values())
    assert not (hi.view(np.uint32) & TF32_LOW).any() and not (lo.view(np.uint32) & TF32_LOW).any()


def test_big_plus_small_equals_x_within_2_to_the_minus_22():
    """|x - hi - lo| <= 2^-22 |x| (a normal x), or half of TF32's smallest subnormal step (2^-137)
    for a subnormal x, whose low bits the small part cannot hold."""
    x = _edge_values().astype(np.float64)
    hi, lo = (p.astype(np.float64) for p in packing.split_tf32(x.astype(np.float32)))
    err = np.abs(x - hi - lo)
    bound = np.maximum(2.0**-22 * np.abs(x), 2.0**-137)
    assert (err <= bound).all(), x[err > bound][:5]


def test_rounding_is_to_nearest_with_ties_away_from_zero():
    ties = np.array([0x3F801000, 0xBF801000], dtype=np.uint32).view(np.float32)   # 1 + 2^-11, its negative
    assert packing.tf32_round(ties).tolist() == [1 + 2.0**-10, -(1 + 2.0**-10)]
    assert packing.tf32_round(np.float32(1 + 2.0**-12)).item() == 1.0


def test_split_of_zero_is_zero_and_keeps_the_sign_of_x_in_the_big_part():
    hi, lo = packing.split_tf32(np.array([0.0, -3.0000002], dtype=np.float32))
    assert hi[0] == 0 and lo[0] == 0 and hi[1] == -3.0 and np.signbit(hi[1])


# ---- the plan's packs and the workspace -------------------------------------------------------------
def _kp(M, N, K, a_col, b_col, lda=None, ldb=None):
    def info(rows, cols, col, ld):
        return ArrayInfo(0x10000, rows, cols, ld or (rows if col else cols), col, "fp32", 0, "cupy")

    c = info(M, N, False, None)
    return GemmProblem(M, N, K, "fp32", info(M, K, a_col, lda), info(K, N, b_col, ldb), c, 1.0, 0.0).kernel_view()


@pytest.mark.parametrize("a_col,b_col", list(itertools.product((False, True), repeat=2)))
def test_split_pack_copies_both_operands_in_every_layout_k_major(a_col, b_col):
    kp = _kp(300, 129, 77, a_col, b_col)
    packs = packing.plan_packs(kp, "fp32", k_major=True, planes=2)
    assert [p.operand for p in packs] == ["A", "B"] and all(p.planes == 2 for p in packs)
    assert [p.transpose for p in packs] == [a_col, not b_col]   # the MN-major ones transposed
    view = packing.packed_view(kp, packs)
    assert (view.a_col, view.b_col, view.vec_a, view.vec_b) == (False, True, True, True)


def test_split_pack_planes_are_rows_times_ldp_apart_and_the_workspace_holds_both():
    kp = _kp(300, 129, 77, False, False)            # row-major B: transposed, 129 rows of 80 (77 padded)
    a, b = packing.plan_packs(kp, "fp32", k_major=True, planes=2)
    assert (a.rows_packed, a.ld_packed, a.plane_bytes) == (300, 80, 300 * 80 * 4)
    assert (b.rows_packed, b.ld_packed, b.plane_bytes) == (129, 80, 129 * 80 * 4)
    assert a.nbytes == -(-2 * 300 * 80 * 4 // 256) * 256 and b.offset == a.nbytes
    assert a.traffic == 300 * 77 * 4 + 2 * 300 * 80 * 4        # read once, two planes written
    split_offset, total = packing.layout((a, b), 0)
    assert split_offset == a.nbytes + b.nbytes and total == split_offset + packing.ALIGN
    assert "split into TF32 hi + lo" in packing.describe((a, b))


def test_split_pack_refuses_16_bit_operands():
    with pytest.raises(ValueError, match="splits fp32 operands"):
        packing._pack("A", 64, 64, 64, False, "fp16", planes=2)


# ---- tensor maps of the two planes ------------------------------------------------------------------
def test_split_operand_map_is_three_dimensional_with_one_plane_per_box():
    cfg = RUNG.config(None, "3xtf32")
    m = tensormaps.operand_map("B", 77, 129, 80, True, "fp32", cfg, planes=2, plane_bytes=129 * 80 * 4)
    assert m.dims == (77, 129, 2) and m.strides == (320, 129 * 320)
    assert m.box == (32, cfg["BN"] // cfg["CLUSTER"], 1) and m.element_strides == (1, 1, 1)
    assert tensormaps.operand_map("A", 300, 77, 80, False, "fp32", cfg).dims == (77, 300)   # tf32: 2-D


def test_split_operand_map_refuses_planes_that_overlap_or_misalign():
    cfg = RUNG.config(None, "3xtf32")
    with pytest.raises(ValueError, match="planes"):
        tensormaps.operand_map("A", 300, 77, 80, False, "fp32", cfg, planes=2, plane_bytes=299 * 320)
    with pytest.raises(ValueError, match="multiple of 16"):
        tensormaps.operand_map("A", 300, 77, 80, False, "fp32", cfg, planes=2, plane_bytes=300 * 320 + 8)


# ---- the registry -----------------------------------------------------------------------------------
def test_wgmma_tf32_computes_tf32_by_default_and_3xtf32_on_request():
    assert RUNG.precisions == ("tf32", "3xtf32") and RUNG.planes_for(None) == 1 and RUNG.planes_for("3xtf32") == 2


def test_3xtf32_default_and_presets_fit_a_block_with_two_planes_per_stage():
    """... beside the TMA store's 32 KB staging (EPI_TMA, on by default in both precisions)."""
    cfg = RUNG.config(None, "3xtf32")
    st, staging = cfg["STAGES"], 2 * 2 * 64 * 32 * 4
    assert (cfg["BM"], cfg["BN"], cfg["BK"]) == (128, 128, 32) and st >= 2 and cfg["EPI_TMA"] == 1
    assert RUNG.smem_bytes(cfg, "3xtf32") == 1024 + st * (128 + 128) * 32 * 4 * 2 + staging + st * 16
    for name in RUNG.presets_for("3xtf32"):
        c = RUNG.config(name, "3xtf32")
        assert RUNG.check_config(c, "3xtf32") == [] and RUNG.smem_bytes(c, "3xtf32") <= registry.MAX_SMEM_PER_BLOCK
    assert RUNG.config()["BN"] == 256 and RUNG.smem_bytes(RUNG.config()) == 1024 + 4 * 384 * 32 * 4 + staging + 64


def test_3xtf32_refuses_the_tf32_tile_naming_accumulators_and_shared_memory():
    problems = RUNG.check_config(RUNG.config(), "3xtf32")
    assert any("partial sums" in p for p in problems) and any("2 planes" in p for p in problems)
    with pytest.raises(ValueError, match="in precision 3xtf32.*partial sums"):
        Variant.make("wgmma_tf32", "fp32", b_col=True, config={"BN": 256, "STAGES": 2}, precision="3xtf32")


def test_3xtf32_variant_defines_precision_3_and_its_own_shared_memory():
    d = Variant.make("wgmma_tf32", "fp32", b_col=True, precision="3xtf32").defines()
    assert d["GL_PRECISION"] == 3 and d["GL_DYN_SMEM"] == RUNG.smem_bytes(RUNG.config(None, "3xtf32"), "3xtf32")


def test_3xtf32_launch_gives_the_block_the_two_plane_shared_memory():
    cfg = RUNG.config(None, "3xtf32")
    assert RUNG.launch(4096, 4096, cfg, 4096, 132, "3xtf32").smem == RUNG.smem_bytes(cfg, "3xtf32")


# ---- auto ---------------------------------------------------------------------------------------------
def _problem(M, N, K):
    def info(rows, cols):
        return ArrayInfo(0x10000, rows, cols, cols, False, "fp32", 0, "cupy")

    return GemmProblem(M, N, K, "fp32", info(M, K), info(K, N), info(M, N), 1.0, 0.0)


@pytest.mark.parametrize("size", [1024, 4096, 8192])
def test_auto_takes_rung_22_for_3xtf32_on_big_problems(size):
    choice = dispatch.rule(_problem(size, size, size), "sm_90a", 132, "3xtf32")
    assert choice.rung.slug == "wgmma_tf32" and choice.rung.config(choice.config, "3xtf32")["BN"] == 128


def test_auto_leaves_a_tiny_3xtf32_problem_to_rung_20_when_the_split_pass_costs_more():
    choice = dispatch.rule(_problem(64, 64, 64), "sm_90a", 132, "3xtf32")
    assert choice.rung.slug == "tf32_mma" and "split pass" in choice.reason


# ---- GPU: the planes the kernel writes ----------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("col_major", [False, True])
def test_split_pack_kernel_writes_the_host_model_planes_bit_for_bit(col_major):
    """A 37 x 45 operand (odd, padded to 48), one row of edge values: the pack kernel's planes
    equal ``split_tf32`` of the source (transposed where MN-major), zeros in the padding."""
    cp = pytest.importorskip("cupy")
    from gemmlab.core.loading import load_pack
    from gemmlab.core.params import pack_params

    rows, cols = 37, 45
    host = np.random.default_rng(3).standard_normal((rows, cols)).astype(np.float32)
    host[0, :17] = _edge_values()[-17:]
    p = packing._pack("A", rows, cols, cols, False, "fp32", transpose=col_major, planes=2)
    src, dst = cp.asarray(host), cp.full(p.nbytes // 4, np.nan, dtype=cp.float32)
    fn = load_pack("fp32", 0, None, p.kernel, split=True)
    block = pack_params(p)
    block.pack(block.buffer, 0, src.data.ptr, dst.data.ptr)
    from gemmlab.core.driver import check, cuda

    check(cuda().cuLaunchKernel(fn, *p.grid(), p.threads, 1, 1, 0, 0, block.address, 0), "pack launch")
    cp.cuda.runtime.deviceSynchronize()
    got = cp.asnumpy(dst)[: 2 * p.rows_packed * p.ld_packed].reshape(2, p.rows_packed, p.ld_packed)
    want = np.stack(packing.split_tf32(host.T if col_major else host))
    n_inner = want.shape[2]
    assert (got[:, :, :n_inner].view(np.uint32) == want.view(np.uint32)).all()
    assert (got[:, :, n_inner:] == 0).all()
