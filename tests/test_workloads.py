"""The workload suites of ``gemmlab bench`` (bench/workloads.py): their shapes, what the command
line accepts with them, and how a result reads (CPU; timing them needs a GPU and PyTorch)."""

from __future__ import annotations

import pytest

from gemmlab.bench import workloads
from gemmlab.cli import main
from gemmlab.core.shapes import BATCHED_SUITE, EPILOGUE_ACTIVATION, EPILOGUE_SUITE


def _exit(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_the_batched_suite_holds_the_issues_five_shapes_first():
    assert BATCHED_SUITE[:5] == ((32, 512, 512, 64), (32, 512, 64, 512), (16, 1024, 1024, 128), (64, 128, 128, 128),
                                 (8, 2048, 2048, 2048))
    assert all(len(s) == 4 and min(s) >= 1 for s in BATCHED_SUITE)


def test_the_epilogue_suite_holds_the_issues_three_shapes_first_with_the_tanh_gelu():
    assert EPILOGUE_SUITE[:3] == ((4096, 14336, 4096), (128, 14336, 4096), (8192, 8192, 8192))
    assert EPILOGUE_ACTIVATION == "gelu_tanh"


@pytest.mark.parametrize("argv,match", [
    (["bench", "--suite", "batched", "--shape", "64"], "batched shape '64' is not BxMxNxK"),
    (["bench", "--shape", "8x64x64x64"], "is not N, N^3 or MxNxK"),
    (["bench", "--suite", "epilogue", "naive"], "RUNG does not apply"),
    (["bench", "--suite", "batched", "--activation", "relu"], "--activation is the epilogue suite's"),
    (["bench", "--activation", "relu"], "--activation is the epilogue suite's"),
])
def test_options_that_do_not_apply_to_a_workload_suite_are_refused(argv, match, capsys):
    assert _exit(argv) == 1   # a well-formed command line that gemmlab refuses (gemmlab --help)
    assert match in capsys.readouterr().err


def test_tune_does_not_take_a_workload_suite(capsys):
    assert _exit(["tune", "--suite", "batched"]) == 2
    assert "unknown suite 'batched'" in capsys.readouterr().err


def test_an_unknown_workload_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="unknown workload suite 'grouped'"):
        workloads.run_workload("grouped", "bf16")


def _batched(verified=True):
    rec = {"B": 8, "M": 128, "N": 128, "K": 128, "dtype": "bf16", "verified": verified, "rel_error": 1e-3,
           "tol": 1e-2}
    if verified:
        rec.update(median_ms={"gemmlab": 0.010, "torch.bmm": 0.011}, vs_torch_bmm=1.1,
                   tflops={"gemmlab": 3.4, "torch.bmm": 3.0})
    return rec


def test_a_record_reads_as_its_shape_and_ratio():
    assert workloads.describe(_batched()) == "8x128x128x128 bf16: gemmlab 10.0 us, torch.bmm 11.0 us: 1.100x torch.bmm"


def test_a_record_that_failed_verification_says_so_and_fails_the_run():
    assert "FAILED verification" in workloads.describe(_batched(False))
    result = {"kind": "batched", "results": [_batched(), _batched(False)], "summary": {"verified": False}}
    assert workloads.exit_code(result) == 1
    assert workloads.exit_code({"summary": {"verified": True}}) == 0


def test_the_table_renders_every_record(capsys):
    result = {"kind": "batched", "settings": {"dtype": "bf16", "activation": None}, "env": {"gpu_name": "NVIDIA H200"},
              "results": [_batched(), _batched(False)], "summary": {"verified": False, "geomean_vs_torch_bmm": 1.1}}
    workloads.render(result)
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "1.100x" in out and "FAILED" in out and "geomean_vs_torch_bmm: 1.100" in out


def _out_dtype():
    return {"M": 4096, "N": 32000, "K": 4096, "dtype": "bf16", "out_dtype": "fp32", "verified": True,
            "rel_error": 1e-6, "tol": 1e-5,
            "median_ms": {"gemmlab -> fp32": 2.0, "torch.mm out_dtype": 2.1, "unfused torch": 2.6, "gemmlab -> bf16": 1.9},
            "vs_torch_mm": 1.05, "unfused_torch_vs_fp32": 1.3, "fp32_vs_16_bit": 1.0526}


def test_an_out_dtype_record_reads_as_its_ratio_to_torch_mm_with_out_dtype():
    assert workloads.describe(_out_dtype()) == ("4096x32000x4096 bf16 -> fp32: gemmlab 2000.0 us, torch.mm out_dtype "
                                                "2100.0 us: 1.050x; unfused torch 1.300x; fp32 / bf16 output 1.053x")


def test_the_out_dtype_table_renders_its_ratios(capsys):
    result = {"kind": "out_dtype", "settings": {"dtype": "bf16", "activation": None}, "env": {"gpu_name": "NVIDIA H200"},
              "results": [_out_dtype()], "summary": {"verified": True, "geomean_vs_torch_mm": 1.05}}
    workloads.render(result)
    out = capsys.readouterr().out
    assert "bf16 -> fp32" in out and "1.050x" in out and "1.300x" in out and "geomean_vs_torch_mm: 1.050" in out


def test_the_out_dtype_suite_takes_16_bit_operands_only():
    with pytest.raises(ValueError, match="--dtype fp16 or bf16"):
        workloads.run_workload("out_dtype", "fp32")
