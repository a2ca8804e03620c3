"""What the command line tells a user when there is nothing to do, no GPU, or a bad architecture."""

from __future__ import annotations

import pytest

from gemmlab.cli import main
from gemmlab.core import driver


def _no_gpu(monkeypatch):
    def init():
        raise driver.NoGPUError("no NVIDIA driver found")
    monkeypatch.setattr(driver, "init", init)


@pytest.mark.parametrize("argv", [["verify", "wmma", "--dtype", "fp32"], ["verify", "naive", "--dtype", "fp16"]])
def test_a_verify_that_would_check_nothing_fails_and_says_why(argv, capsys, monkeypatch):
    _no_gpu(monkeypatch)  # the refusal comes before any GPU question
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "nothing to verify" in err and "supports" in err


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
