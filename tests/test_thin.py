"""Rung 23 (thin): C with a side of at most 32. Its tile is wide x thin in either orientation (N thin
when BN <= BM, M thin otherwise), the wide operand is copied in its own layout, and a K tile is split
over the warps whose partial sums meet in shared memory in a fixed order. CPU: its constraints, the
rule's tile, the dispatch and the bench's shape for it. GPU: every preset in every layout across
tile edges, split-K, and the same bits on every run."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from gemmlab.bench.schedule import schedule, select_rungs
from gemmlab.core import dispatch, registry
from gemmlab.core.shapes import BENCH_SHAPE, THIN_SHAPE
from stand_ins import problem

THIN = registry.get("thin")
H100 = SimpleNamespace(arch="sm_90a", name="NVIDIA H100 80GB HBM3", sm_count=132)


# ---- the registry ------------------------------------------------------------------------------
def test_the_thin_side_must_be_a_multiple_of_4_up_to_32():
    assert any("thin side" in p for p in THIN.check_config(THIN.config() | {"BN": 6}))
    assert any("thin side" in p for p in THIN.check_config(THIN.config() | {"BM": 64, "BN": 64}))


def test_the_wide_side_is_16_or_32_rows():
    assert any("wide side" in p for p in THIN.check_config(THIN.config() | {"BM": 40, "BN": 8}))
    assert any("wide side" in p for p in THIN.check_config(THIN.config() | {"BM": 64, "BN": 8}))


def test_each_thread_takes_whole_chunks_of_a_k_tile():
    assert any("multiple of THREADS" in p for p in THIN.check_config(THIN.config() | {"BK": 64, "THREADS": 128}))


def test_more_than_128_partial_sums_per_thread_is_refused():
    # 32 rows x 32 columns: 8 rows x 32 columns per thread
    assert any("partial sums" in p for p in THIN.check_config(THIN.config() | {"BM": 32, "BN": 32}))


def test_both_orientations_are_accepted():
    assert THIN.check_config(THIN.config("tall")) == [] and THIN.check_config(THIN.config("wide")) == []
    assert registry.thin_sides(THIN.config("wide")) == (16, 32)


def test_a_thin_rung_is_never_the_top_rung_of_its_dtype():
    assert THIN in registry.for_dtype("fp32")
    assert THIN not in registry.for_dtype("fp32", thin=False)
    assert registry.for_dtype("fp32", thin=True) == (THIN,)
    assert dispatch.choose(problem(4096, 4096, 4096), "auto", "sm_90a") is not THIN


# ---- the rule ------------------------------------------------------------------------------------
@pytest.mark.parametrize("M,N,bm,bn", [(4096, 16, 32, 16), (16, 4096, 16, 32), (4096, 1, 32, 4),
                                       (3, 4096, 4, 32), (4096, 8, 32, 8), (12, 12, 32, 16),
                                       (4096, 30, 16, 32)])
def test_the_rule_tile_fits_the_thin_side_in_the_right_orientation(M, N, bm, bn):
    cfg = registry.thin_rule_config(THIN, M, N)
    assert (cfg["BM"], cfg["BN"]) == (bm, bn)
    assert THIN.check_config(cfg) == []


def test_auto_gives_a_thin_problem_to_the_thin_rung(rule_only):
    c = dispatch.decide(problem(4096, 16, 4096), device=H100)
    assert c.rung is THIN and c.source == "rule" and "thin problem (N=16" in c.reason
    assert (c.config["BM"], c.config["BN"], c.config.get("SPLITK", 1)) == (32, 16, 1)


def test_auto_splits_k_when_the_thin_blocks_leave_most_sms_idle(rule_only):
    # 1 x 1024: 32 blocks of 4 x 32 on 132 SMs, K = 4096: split in 4
    cfg = dispatch.decide(problem(1, 1024, 4096), device=H100).config
    assert (cfg["BM"], cfg["BN"], cfg["SPLITK"]) == (4, 32, 4)


def test_a_column_major_c_turns_a_thin_m_into_a_thin_n_for_the_kernel(rule_only):
    c = dispatch.decide(problem(16, 4096, 4096, c_col=True), device=H100)
    assert c.rung is THIN and (c.config["BM"], c.config["BN"]) == (32, 16)


def test_a_problem_wider_than_the_thin_limit_goes_to_the_top_rung(rule_only):
    c = dispatch.decide(problem(4096, 17, 4096), device=H100)
    assert c.rung is not THIN


def test_tf32_never_goes_to_the_thin_rung(rule_only):
    c = dispatch.decide(problem(4096, 16, 4096), device=H100, precision="tf32")
    assert c.rung is not THIN


# ---- the bench -----------------------------------------------------------------------------------
def test_the_default_bench_times_the_thin_rung_at_the_thin_shape():
    groups = {g.shape: g for g in schedule(select_rungs(None, "fp32"))}
    thin_jobs = [j for j in groups[THIN_SHAPE].jobs if j.rung is THIN]
    assert thin_jobs and "thin rung" in thin_jobs[0].note
    assert not any(j.rung is THIN for j in groups[BENCH_SHAPE].jobs)
    assert any(j.rung is None and j.peer == "cublas" for j in groups[THIN_SHAPE].jobs)


# ---- GPU -------------------------------------------------------------------------------------------
# thin N and thin M, ragged wide and thin sides, K below, across and far beyond a K tile,
# unaligned leading dimensions and base pointers (the 4-byte and the checked copies)
GPU_SHAPES = [(131, 13, 1000, 0, 0), (13, 131, 1000, 0, 0), (257, 16, 513, 0, 0), (16, 257, 513, 0, 0),
              (1, 300, 257, 0, 0), (300, 3, 1, 0, 0), (130, 7, 129, 3, 1), (64, 32, 2048, 1, 0)]
LAYOUTS = list(itertools.product((False, True), repeat=3))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join("C" if x else "R" for x in l))
@pytest.mark.parametrize("preset", sorted(THIN.presets))
def test_every_thin_preset_matches_cublas_in_every_layout(preset, layout):
    from gemmlab.measure.verify import verify
    a_col, b_col, c_col = layout
    failures = []
    for (M, N, K, pad, off), (alpha, beta) in itertools.product(GPU_SHAPES, [(1.0, 0.0), (1.5, -0.75)]):
        r = verify("thin", M, N, K, "fp32", a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta,
                   ld_pad=pad, offset=off, config=preset)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [{"SPLITK": 4}, {"BM": 16, "BN": 32, "SPLITK": 3},
                                 {"BK": 256, "THREADS": 256, "STAGES": 2}, {"BK": 64, "THREADS": 64, "STAGES": 6}])
def test_thin_split_k_and_other_tiles_match_cublas(cfg):
    from gemmlab.measure.verify import verify
    for M, N, K in [(300, 16, 3000), (16, 300, 3000), (65, 9, 777)]:
        r = verify("thin", M, N, K, "fp32", alpha=1.25, beta=0.5, config=cfg)
        assert r.ok, r.message()


@pytest.mark.gpu
def test_thin_gives_the_same_bits_on_every_run():
    import cupy as cp

    import gemmlab
    rng = cp.random.default_rng(7)
    a = rng.standard_normal((2048, 4096), dtype=cp.float32)
    b = rng.standard_normal((4096, 16), dtype=cp.float32)
    outs = [gemmlab.matmul(a, b, kernel="thin", config={"SPLITK": 4}) for _ in range(3)]
    assert all(bool((o == outs[0]).all()) for o in outs[1:])
