"""``gemmlab profile --source`` without a GPU: ncu's source-page CSV (per-instruction warp-state
sampling) parsed and summarized, and the command against a fake ``ncu``.

tests/data/ncu_source_*.csv are excerpts of recordings from an H100 (Nsight Compute 2025.3,
``ncu --section SourceCounters`` on one launch at 4096^3 fp32, exported with ``--page source --csv
--print-source sass``): 120 instructions of rung 18's hot loop and 60 of cuBLAS's SIMT kernel,
ncu's header rows as it wrote them.
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from gemmlab.analysis.ncu import source as S

DATA = os.path.join(os.path.dirname(__file__), "data")


def _read(name: str) -> str:
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read()


def test_source_csv_gives_one_row_per_instruction_under_its_kernel():
    k = S.parse_source_csv(_read("ncu_source_async_simt.csv"))
    assert list(k) == ["gemm"] and len(k["gemm"]) == 120
    assert all(r["Address"].startswith("0x") for r in k["gemm"])


def test_several_kernels_each_keep_their_rows():
    text = _read("ncu_source_async_simt.csv") + _read("ncu_source_cublas.csv")
    k = S.parse_source_csv(text)
    assert len(k) == 2 and len(k["gemm"]) == 120
    (cublas,) = [n for n in k if n != "gemm"]
    assert cublas.startswith("sm80_xmma_gemm") and len(k[cublas]) == 60


def test_a_csv_without_instructions_is_an_error():
    with pytest.raises(S.NcuError, match="no instruction rows"):
        S.parse_source_csv('"Kernel Name","gemm",\n')


def test_summary_shares_add_up_and_name_our_stall_reasons():
    s = S.summarize_source(S.parse_source_csv(_read("ncu_source_async_simt.csv"))["gemm"], top=5)
    assert s["samples"] == sum(e["samples"] for e in s["by_opcode"].values())
    assert sum(s["reasons"].values()) == pytest.approx(1.0, abs=2e-3)
    assert set(s["reasons"]) <= set(S.SOURCE_STALLS.values())
    assert list(s["reasons"])[:3] == ["not_selected", "selected", "dispatch_stall"]
    assert len(s["hottest"]) == 5 and s["hottest"][0]["samples"] >= s["hottest"][-1]["samples"]


def test_reason_by_opcode_says_where_a_stall_sits():
    """In rung 18's loop the dispatch stalls sit mostly at the FFMAs (and the rest at the LDS)."""
    s = S.summarize_source(S.parse_source_csv(_read("ncu_source_async_simt.csv"))["gemm"])
    where = S.reason_by_opcode(s, "dispatch_stall")
    assert list(where)[0] == "FFMA" and sum(where.values()) == pytest.approx(1.0)
    assert S.reason_by_opcode(s, "gmma") == {}


def test_commands_record_source_counters_and_export_the_sass_page():
    rec = S.record_command("ncu", ["python", "-m", "x"], "/tmp/r")
    assert rec[-3:] == ["python", "-m", "x"] and "SourceCounters" in rec and rec[rec.index("-o") + 1] == "/tmp/r"
    assert "--profile-from-start" in rec and rec[rec.index("--clock-control") + 1] == "none"
    exp = S.export_command("ncu", "/tmp/r.ncu-rep")
    assert exp[:3] == ["ncu", "-i", "/tmp/r.ncu-rep"] and "source" in exp and "sass" in exp


FAKE_NCU = '''#!{python}
"""A stand-in for ncu: -o writes a report naming its target; -i prints a recorded source page."""
import os, sys
args = sys.argv[1:]
if "--version" in args:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2099.1.0.0 (build 1) (public-release)")
    sys.exit(0)
with open(os.environ["FAKE_NCU_ARGS"], "a") as fh:
    fh.write(" ".join(args) + "\\n")
if "-o" in args:
    open(args[args.index("-o") + 1] + ".ncu-rep", "w").write("cublas" if "--cublas" in args else "rung")
    sys.exit(0)
report = open(args[args.index("-i") + 1]).read()
name = "ncu_source_cublas.csv" if report == "cublas" else "ncu_source_async_simt.csv"
sys.stdout.write(open(os.path.join(os.environ["FAKE_NCU_DATA"], name)).read())
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.replace("{python}", sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_NCU_DATA", DATA)
    monkeypatch.setenv("FAKE_NCU_ARGS", str(tmp_path / "args.txt"))
    import gemmlab.core.driver

    monkeypatch.setattr(gemmlab.core.driver, "require_gpu", lambda: None)
    return str(exe)


def test_profile_source_end_to_end_with_fake_ncu(fake_ncu, capsys):
    from gemmlab.cli import main

    rc = main(["profile", "async_simt", "--shape", "4096", "--source", "--vs-cublas", "--top", "4", "--json",
               "--ncu", fake_ncu])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res["kernel"] == "async_simt" and res["shape"] == [4096, 4096, 4096]
    assert list(res["kernels"]) == ["gemm"] and len(res["kernels"]["gemm"]["hottest"]) == 4
    (name,) = res["cublas"]["kernels"]
    assert name.startswith("sm80_xmma_gemm")
    calls = open(os.environ["FAKE_NCU_ARGS"]).read()
    assert "--rung async_simt" in calls and "--cublas" in calls and "--page source" in calls
    rc = main(["profile", "async_simt", "--shape", "4096", "--source", "--ncu", fake_ncu])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "dispatch stall" in out and "FFMA" in out and "hottest instructions" in out


def test_profile_source_refuses_a_top_below_one(fake_ncu, capsys):
    from gemmlab.cli import main

    assert main(["profile", "async_simt", "--source", "--top", "0", "--ncu", fake_ncu]) != 0
    assert "--top must be at least 1, got 0" in capsys.readouterr().err
