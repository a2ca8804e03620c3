"""``gemmlab profile`` and ``gemmlab report`` on a GPU under Nsight Compute (skipped without a GPU;
skipped with the reason when ncu is missing or may not read the counters)."""

from __future__ import annotations

import json
import os

import pytest

from gemmlab.analysis import ncu as P
from gemmlab.measure import ncu_profile

pytestmark = pytest.mark.gpu

SHAPE = (1024, 1024, 1024)


@pytest.fixture(scope="module")
def ncu():
    from gemmlab.core.toolchain import ToolNotFoundError

    try:
        return P.find_ncu()
    except ToolNotFoundError as exc:
        pytest.skip(f"Nsight Compute is not installed: {exc}")


def _profile(*args, **kw):
    try:
        return ncu_profile.profile_rung(*args, **kw)
    except P.NcuPermissionError as exc:
        pytest.skip(f"the GPU counters are restricted on this machine: {exc}")


def _plausible(s: dict, shape=SHAPE, fp32=True):
    M, N, K = shape
    assert s["duration_s"] and 1e-6 < s["duration_s"] < 30
    assert 0 < s["tflops"] < (80 if fp32 else 1200)
    assert 0 < s["achieved_occupancy"] <= 100
    assert 0 < s["ipc"] <= 4.0
    assert s["dram_read_bytes"] >= 0.5 * (M * K + K * N) * (4 if fp32 else 2)   # caches flushed before the run
    assert s["l2_bytes"] and s["l2_bytes"] > 0
    assert s["stalls"] and sum(x["share"] for x in s["stalls"]) == pytest.approx(1.0)
    assert s["top_stall"]
    assert s["arithmetic_intensity"] and s["arithmetic_intensity"] > 0
    assert len(s["kernels"]) >= 1


def test_profile_smem_and_padded(ncu, tmp_path):
    smem = _profile("smem", SHAPE, "fp32", ncu=ncu, keep_csv=str(tmp_path))
    padded = _profile("smem_padded", SHAPE, "fp32", ncu=ncu, keep_csv=str(tmp_path))
    for s in (smem, padded):
        _plausible(s)
        assert s["kernels"] == [s["kernels"][0]]                           # exactly the one launch
        assert s["ffma_count"] == pytest.approx(SHAPE[0] * SHAPE[1] * SHAPE[2], rel=0.02)
        # HFMA2.MMA register moves count on the hmma pipe (one per warp): negligible, not zero
        assert (s["tensor_inst_count"] or 0) < 0.001 * s["ffma_count"] / 32
        assert s["bank_conflicts_ld"] is not None and s["bank_conflicts_st"] is not None
        assert s["shared_ld_throughput"] and s["shared_ld_throughput"] > 0
    # the point of padding
    assert smem["bank_conflicts_ld"] > padded["bank_conflicts_ld"]
    assert len(list(tmp_path.glob("ncu_*.csv"))) == 2
    print(json.dumps({"smem": {k: smem[k] for k in ("bank_conflicts_ld", "bank_conflicts_st", "tflops", "top_stall")},
                      "smem_padded": {k: padded[k] for k in ("bank_conflicts_ld", "bank_conflicts_st", "tflops", "top_stall")},
                      "missing": smem["missing"], "rejected": smem["rejected_metrics"]}, indent=1))


def test_profile_vs_cublas(ncu):
    s = _profile("tile_2d", SHAPE, "fp32", True, ncu=ncu)
    _plausible(s)
    cb = s["cublas"]
    _plausible(cb)
    assert cb["kernel"] == "cublas"
    assert cb["ffma_count"] >= 0.98 * SHAPE[0] * SHAPE[1] * SHAPE[2]        # FP32 SGEMM, not TF32
    assert (cb["tensor_inst_count"] or 0) < 0.001 * cb["ffma_count"] / 32   # no TF32 MMA


def test_profile_wmma_uses_tensor_cores(ncu):
    s = _profile("wmma", SHAPE, "fp16", ncu=ncu)
    _plausible(s, fp32=False)
    assert s["tensor_inst_count"] and s["tensor_inst_count"] > 0


def test_report_on_two_rungs(ncu, tmp_path):
    """The whole report, cut down: two rungs, a small sweep."""
    from gemmlab.measure.timing import Settings
    from gemmlab.report import collect as C, render as R

    res = C.collect("fp32", (1024, 1024, 1024), [256, 512], ["smem", "smem_padded"], ["smem"], (512, 512, 512),
                    timing=Settings(min_samples=3, max_samples=5), ncu=ncu, progress=False, other_dtypes=False)
    assert not {k: v for k, v in res["errors"].items() if not k.startswith("bandwidth")}, res["errors"]
    assert res["ceilings"]["dram_bw_Bps"] > 1e11
    assert res["ceilings"]["cublas_tflops"]["fp32"] > 1
    html_path, md_path = R.build(res, str(tmp_path))
    assert open(html_path).read().count("<img ") == 4
    with open(os.path.join(tmp_path, "results.json"), "w") as fh:
        json.dump(res, fh, default=str)


def test_profile_source_puts_most_of_the_samples_of_a_simt_rung_at_its_ffmas(ncu):
    """Per-instruction sampling on the GPU: every kernel of the launch has rows, the reasons' shares
    add up, and rung 18's warps spend most of their samples at FFMAs (the hot loop is 92% FFMA)."""
    from gemmlab.analysis.ncu import reason_by_opcode

    try:
        res = ncu_profile.profile_source("async_simt", SHAPE, "fp32", ncu=ncu, top=5)
    except P.NcuPermissionError as exc:
        pytest.skip(f"the GPU counters are restricted on this machine: {exc}")
    (s,) = res["kernels"].values()
    assert s["samples"] > 0 and sum(s["reasons"].values()) == pytest.approx(1.0, abs=2e-3)
    assert max(s["by_opcode"], key=lambda op: s["by_opcode"][op]["samples"]) == "FFMA"
    assert list(reason_by_opcode(s, "selected"))[0] == "FFMA"
    assert len(s["hottest"]) == 5
