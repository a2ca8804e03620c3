"""A real tune on the GPU: a small space (rung ``naive``: 9 candidates) at a small shape, every
candidate compiled in worker processes, verified and timed by the timing engine beside cuBLAS;
then the stored results through ``gemmlab tune --show`` and ``--json``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("optuna")

pytestmark = pytest.mark.gpu

FAST = dict(min_samples=3, max_samples=10, target_error=0.02, time_cap_s=0.2, warmup=1)


def test_an_exhaustive_tune_of_a_small_space_verifies_and_times_every_candidate(tmp_path):
    from gemmlab.measure.timing import Settings
    from gemmlab.tune.gpu import GpuFactory
    from gemmlab.tune.runner import TuneSpec, tune

    url = f"sqlite:///{tmp_path / 'tune.db'}"
    shape = (256, 384, 128)
    s = tune(TuneSpec("naive", shape, strategy="exhaustive", storage=url),
             GpuFactory("naive", "fp32", shape, settings=Settings(**FAST)))
    recs = s["document"]["records"]
    assert s["evaluated"] == s["candidates"] == len(recs) == 9
    ok = [r for r in recs if r["status"] == "ok"]
    assert ok and all(r["detail"]["rel_error"] is not None for r in ok)
    # each record's ratio comes from the peers timed in its own run (cuBLAS among them)
    assert all(r.get("vs_cublas") for r in ok), s["document"]["peers"]
    assert s["best"]["tflops"] == max(r["tflops"] for r in ok)
    again = tune(TuneSpec("naive", shape, strategy="tpe", budget=3, storage=url),
                 GpuFactory("naive", "fp32", shape, settings=Settings(**FAST)))
    assert again["evaluated"] == 0                     # nothing measured twice


def test_a_tune_of_a_k_major_rung_compiles_and_measures_the_variant_its_plan_runs(tmp_path):
    """Rung 22 reads K-major copies only: the candidates compile the packed view's variant (before
    packing.for_kernel, every one failed to compile the row-major B it never sees)."""
    from gemmlab.core.driver import device_info
    from gemmlab.measure.timing import Settings
    from gemmlab.tune.gpu import GpuFactory
    from gemmlab.tune.runner import TuneSpec, tune

    if device_info(0).arch != "sm_90a":
        pytest.skip("rung 22 (wgmma_tf32) runs on sm_90a only")
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    shape = (200, 136, 72)
    s = tune(TuneSpec("wgmma_tf32", shape, precision="tf32", strategy="random", budget=3, storage=url,
                      warm_start=False),
             GpuFactory("wgmma_tf32", "fp32", shape, precision="tf32", settings=Settings(**FAST)))
    recs = s["document"]["records"]
    assert len(recs) == 3 and all(r["status"] == "ok" for r in recs), [r.get("reason") for r in recs]


def test_the_command_tunes_shows_and_writes_json(tmp_path, capsys):
    from gemmlab.cli import main

    url = f"sqlite:///{tmp_path / 'tune.db'}"
    args = ["tune", "tile_1d", "--shape", "512", "--strategy", "tpe", "--budget", "6", "--storage", url,
            "--min-samples", "3", "--max-samples", "10", "--time-cap", "0.2", "--no-progress"]
    assert main(args + ["--json", str(tmp_path / "t.json")]) == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["evaluated"] == 6 and doc["strategy"] == "tpe"
    capsys.readouterr()
    assert main(["tune", "tile_1d", "--show", "--storage", url]) == 0
    out = capsys.readouterr().out
    assert "TFLOP/s" in out and "% of cuBLAS" in out and "TM" in out


def _gpu_count() -> int:
    from gemmlab.core.driver import check, cuda

    return check(cuda().cuDeviceGetCount(), "cuDeviceGetCount")


def test_two_gpus_share_one_study_each_candidate_measured_once(tmp_path):
    """--devices with two GPUs: one worker process per GPU on one SQLite study. Both workers take
    candidates, no configuration is measured twice, and every record names the GPU it ran on."""
    from gemmlab.measure.timing import Settings
    from gemmlab.tune.gpu import GpuFactory
    from gemmlab.tune.runner import TuneSpec, tune

    if _gpu_count() < 2:
        pytest.skip("needs two GPUs of one kind (run on a two-GPU host)")
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    shape = (512, 512, 256)
    s = tune(TuneSpec("tile_2d", shape, strategy="exhaustive", storage=url, devices=(0, 1), batch=4),
             GpuFactory("tile_2d", "fp32", shape, settings=Settings(**FAST)))
    recs = s["document"]["records"]
    assert s["evaluated"] == s["candidates"] == len(recs) > 8
    keys = [json.dumps(r["config"], sort_keys=True) for r in recs]
    assert len(set(keys)) == len(keys)                   # each candidate once, across both workers
    by_device = {r["device"] for r in recs}
    assert len(by_device) == 2, f"records came from {by_device}"
    assert all(r["status"] for r in recs)


def test_a_grouped_tune_verifies_and_times_grouped_mm_and_auto_then_runs_its_best(tmp_path, monkeypatch):
    """The grouped rung's evaluator: each candidate is grouped_mm on an unevenly routed layer,
    checked against per-group float64 products, timed beside torch._grouped_mm; after the export,
    grouped_mm's auto takes the tuned configuration for that layer."""
    torch = pytest.importorskip("torch")
    from gemmlab.core import dispatch, grouped
    from gemmlab.core.driver import device_info
    from gemmlab.measure.timing import Settings
    from gemmlab.tune.export import export_tuned
    from gemmlab.tune.grouped import GroupedFactory
    from gemmlab.tune.runner import TuneSpec, tune

    if device_info(0).arch != "sm_90a":
        pytest.skip("the grouped rung runs on sm_90a only")
    monkeypatch.setattr(dispatch, "tuned_path", lambda: tmp_path / "tuned.json")
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    shape = (8, 1000, 520, 384)
    s = tune(TuneSpec("wgmma_grouped", shape, "bf16", "rc", strategy="random", budget=3, storage=url),
             GroupedFactory("bf16", shape, "rc", Settings(**FAST)))
    recs = s["document"]["records"]
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(recs) == 3 and ok, [r.get("reason") for r in recs]
    assert all(r["detail"]["rel_error"] < 1e-2 for r in ok) and s["best"]["config"]["GROUP_CAP"] == 8
    assert any("torch._grouped_mm" in p for p in s["document"]["peers"].values())
    export_tuned(url)
    G, T, N, K = shape
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.tensor([0, 100, 250, 250, 600, 601, 900, 1000], dtype=torch.int32, device="cuda")
    grouped.grouped_mm(a, b, offs)
    choice = grouped.plans()[-1].choice
    assert choice.source == "tuned" and "tuned at 8x1000x520x384" in choice.reason


def test_a_grouped_fp8_tune_verifies_and_times_scaled_grouped_mm_then_runs_its_best(tmp_path, monkeypatch):
    """The FP8 grouped rung's evaluator: each candidate is scaled_grouped_mm (row-wise scales) on an
    unevenly routed layer, checked against per-group float64 products of the dequantized operands,
    timed beside torch._scaled_grouped_mm; after the export, scaled_grouped_mm's auto takes the tuned
    configuration for that layer in that precision only."""
    torch = pytest.importorskip("torch")
    from gemmlab.core import dispatch, scaled_grouped
    from gemmlab.core.driver import device_info
    from gemmlab.measure.timing import Settings
    from gemmlab.tune.export import export_tuned
    from gemmlab.tune.grouped import GroupedFactory
    from gemmlab.tune.runner import TuneSpec, tune

    if device_info(0).arch != "sm_90a":
        pytest.skip("the grouped rungs run on sm_90a only")
    monkeypatch.setattr(dispatch, "tuned_path", lambda: tmp_path / "tuned.json")
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    shape = (8, 1000, 512, 384)
    s = tune(TuneSpec("wgmma_grouped_fp8", shape, "fp8", "rc", strategy="random", budget=3, storage=url,
                      precision="fp8_fast"),
             GroupedFactory("fp8", shape, "rc", Settings(**FAST), precision="fp8_fast"))
    recs = s["document"]["records"]
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(recs) == 3 and ok, [r.get("reason") for r in recs]
    assert all(r["detail"]["rel_error"] < 1e-2 for r in ok)
    export_tuned(url)
    G, T, N, K = shape
    a = (torch.randn(T, K, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(G, N, K, device="cuda") * 2).to(torch.float8_e4m3fn).transpose(-2, -1)
    sa, sb = torch.rand(T, device="cuda") + 0.5, torch.rand(G, N, device="cuda") + 0.5
    offs = [0, 100, 250, 250, 600, 601, 900, 1000]
    scaled_grouped.scaled_grouped_mm(a, b, sa, sb, offs, use_fast_accum=True)
    choice = scaled_grouped.plans()[-1].choice
    assert choice.source == "tuned" and "tuned at 8x1000x512x384" in choice.reason
    scaled_grouped.scaled_grouped_mm(a, b, sa, sb, offs)   # promoted: no entry of its own
    assert scaled_grouped.plans()[-1].choice.source == "rule"


def test_an_fp8_tune_verifies_and_times_the_scaled_rung_then_scaled_mm_runs_its_best(tmp_path, monkeypatch):
    """Rung 25 through the generic evaluator: each candidate an FP8 product into bf16 (K-major
    operands), checked against the float64 product, timed beside torch._scaled_mm; after the export,
    scaled_mm's auto takes the tuned configuration in that precision only."""
    torch = pytest.importorskip("torch")
    from gemmlab.core import dispatch, scaled
    from gemmlab.core.driver import device_info
    from gemmlab.measure.timing import Settings
    from gemmlab.tune.export import export_tuned
    from gemmlab.tune.gpu import GpuFactory
    from gemmlab.tune.runner import TuneSpec, tune

    if device_info(0).arch != "sm_90a":
        pytest.skip("rung 25 (wgmma_fp8) runs on sm_90a only")
    monkeypatch.setattr(dispatch, "tuned_path", lambda: tmp_path / "tuned.json")
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    shape = (384, 512, 640)
    s = tune(TuneSpec("wgmma_fp8", shape, "fp8", "rc", strategy="random", budget=3, storage=url,
                      precision="fp8_fast", warm_start=False),
             GpuFactory("wgmma_fp8", "fp8", shape, "rc", Settings(**FAST), precision="fp8_fast"))
    recs = s["document"]["records"]
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(recs) == 3 and ok, [r.get("reason") for r in recs]
    assert any("torch._scaled_mm" in p for p in s["document"]["peers"].values())
    export_tuned(url)
    M, N, K = shape
    a = (torch.randn(M, K, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, device="cuda") * 2).to(torch.float8_e4m3fn).t()
    sa, sb = torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5
    out = scaled.scaled_mm(a, b, sa, sb, use_fast_accum=True)
    choice = scaled.plans()[-1].choice
    assert choice.source == "tuned" and "384x512x640" in choice.reason
    ref = (a.double() * sa.double()) @ (b.double() * sb.double())
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-2
    scaled.scaled_mm(a, b, sa, sb)   # promoted: no entry of its own
    assert scaled.plans()[-1].choice.source != "tuned"
