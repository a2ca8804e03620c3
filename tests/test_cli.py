"""What the command line tells a user when there is nothing to do, no GPU, or a bad architecture."""

from __future__ import annotations

import pytest

from gemmlab.cli import main
from gemmlab.core import driver


def _no_gpu(monkeypatch):
    def init():
        raise driver.NoGPUError("no NVIDIA driver found")
    monkeypatch.setattr(driver, "init", init)


@pytest.mark.parametrize("argv", [["verify", "wmma", "--dtype", "fp32"], ["verify", "naive", "--dtype", "fp16"],
                                  ["verify", "async_simt", "--out-dtype", "fp16"],
                                  ["verify", "wgmma_ws", "--dtype", "fp16", "--out-dtype", "fp16", "--precision", "fp32"]])
def test_a_verify_that_would_check_nothing_fails_and_says_why(argv, capsys, monkeypatch):
    _no_gpu(monkeypatch)  # the refusal comes before any GPU question
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "nothing to verify" in err and "supports" in err


def test_verify_with_an_output_dtype_names_the_rungs_that_write_it(capsys, monkeypatch):
    _no_gpu(monkeypatch)
    assert main(["verify", "mma_sync", "wgmma_ws", "--out-dtype", "fp32"]) == 3   # both write it: a GPU is asked for
    assert main(["verify", "naive", "--dtype", "fp32", "--out-dtype", "bf16"]) == 1
    assert "writing bf16" in capsys.readouterr().err


def test_every_gpu_command_without_a_gpu_exits_3_the_same_way(capsys, monkeypatch):
    _no_gpu(monkeypatch)
    assert main(["verify", "naive"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("gemmlab verify: needs an NVIDIA GPU, and none is usable here (no NVIDIA driver found)")
    assert "report --from-json benchmarks/results/report_h100/results.json" in err


def test_bench_overhead_without_a_gpu_exits_3(capsys, monkeypatch):
    _no_gpu(monkeypatch)
    assert main(["bench", "--overhead"]) == 3
    assert capsys.readouterr().err.startswith("gemmlab bench: needs an NVIDIA GPU")


def test_bench_overhead_takes_one_rung_and_one_shape(capsys):
    assert main(["bench", "--overhead", "--shape", "64,128"]) == 1
    assert "takes one --shape" in capsys.readouterr().err
    assert main(["bench", "--overhead", "naive", "smem"]) == 1
    assert "takes one RUNG" in capsys.readouterr().err


def test_an_architecture_nvrtc_cannot_target_is_refused_naming_the_supported_ones(capsys):
    assert main(["inspect", "smem", "--arch", "sm_999"]) == 1
    err = capsys.readouterr().err
    assert "cannot compile for sm_999" in err and "sm_90" in err and "NVRTC log" not in err


def test_the_a_suffix_below_sm_90_is_refused(capsys):
    assert main(["inspect", "smem", "--arch", "sm_80a"]) == 1
    assert "'a' suffix from sm_90 on" in capsys.readouterr().err


def test_profile_without_a_gpu_talks_about_the_gpu_not_ncu(capsys, monkeypatch):
    _no_gpu(monkeypatch)
    assert main(["profile", "smem", "--ncu", "/nonexistent/ncu"]) == 3
    err = capsys.readouterr().err
    assert "needs an NVIDIA GPU" in err and "ncu" not in err.split("\n")[0].split("(")[0]


def test_compile_without_a_gpu_or_arch_targets_what_inspect_does_and_says_so(capsys, monkeypatch, tmp_path):
    from gemmlab.core.arch import OFFLINE_ARCH

    _no_gpu(monkeypatch)
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    assert main(["compile", "naive", "--dtype", "fp32", "--layouts", "rr", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert f"compiling for {OFFLINE_ARCH}" in err and out.startswith(f"{OFFLINE_ARCH}: 8 variants")
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    assert f"(default {OFFLINE_ARCH})" in " ".join(capsys.readouterr().out.split())


def test_tune_show_without_local_results_shows_the_shipped_table_and_where_it_looked(capsys, monkeypatch, tmp_path):
    pytest.importorskip("optuna")
    _no_gpu(monkeypatch)
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    assert main(["tune", "async_simt", "--show"]) == 0
    out = capsys.readouterr().out
    assert f"no tuning results for rung async_simt, layout rr in sqlite:///{tmp_path}/tune.db" in out
    assert "shipped table defaults_sm90.json (sm_90a)" in out and "256x256x65536" in out


def test_tune_show_with_nothing_anywhere_fails_naming_both_places(capsys, monkeypatch, tmp_path):
    pytest.importorskip("optuna")
    _no_gpu(monkeypatch)
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    assert main(["tune", "naive", "--show", "--arch", "sm_90a"]) == 1
    out, err = capsys.readouterr()
    assert "no tuning results for rung naive" in out and "defaults_sm90.json an entry for rung naive" in err


@pytest.mark.parametrize("argv", [["list"], ["list", "--long"]])
def test_list_fits_80_columns(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 80
    assert any("naive" in line for line in lines)


def test_list_explains_the_seeds(capsys):
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    assert "kernel gemm_v07 of seed document 002" in " ".join(capsys.readouterr().out.split())


def test_the_package_has_the_license_its_metadata_names():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    assert (root / "LICENSE").read_text().startswith("MIT License")
    assert 'license = { text = "MIT" }' in (root / "pyproject.toml").read_text()
