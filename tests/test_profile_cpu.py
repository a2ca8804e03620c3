"""``gemmlab profile`` without a GPU: the metric table, ncu's raw CSV parser (on recorded output in
tests/data/), unit normalization, aggregation over several kernels, the retry on metrics ncu does
not know, the permission error, and the whole command against a fake ``ncu``.

tests/data/ncu_*.csv are recordings from an H100 (Nsight Compute 2025.3, ``gemmlab profile smem /
smem_padded --shape 2048 --keep-csv DIR --vs-cublas``): ncu's own ``--csv --page raw --print-units
base`` output, warnings included.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys

import pytest

from gemmlab.analysis import ncu as P
from gemmlab.analysis.ncu import run as ncu_run
from gemmlab.measure import ncu_profile

DATA = os.path.join(os.path.dirname(__file__), "data")
SHAPE = (2048, 2048, 2048)
FLOPS = 2.0 * SHAPE[0] * SHAPE[1] * SHAPE[2]


def _read(name: str) -> str:
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read()


# ---- the metric table ----------------------------------------------------------------------------

def test_metric_table_is_one_consistent_table():
    keys = [m.key for m in P.METRICS]
    assert len(keys) == len(set(keys)), "duplicate keys"
    names = [n for m in P.METRICS for n in (m.name, *m.alt)]
    assert len(names) == len(set(names)), "one ncu metric listed twice"
    for m in P.METRICS:
        assert re.fullmatch(r"[a-z0-9]+__[a-z0-9_]+(\.[a-z0-9_]+)*", m.name), m.name
        assert m.meaning and m.unit, m.key
    # what the seeds use is all there
    for key in ("duration", "achieved_occupancy", "ipc", "bank_conflicts_ld", "bank_conflicts_st", "shared_ld_bytes",
                "l1_throughput_pct", "l2_throughput_pct", "dram_throughput_pct", "l1_bytes", "l2_bytes",
                "dram_read_bytes", "dram_write_bytes", "ffma_count", "tensor_hmma_inst", "tensor_gmma_inst"):
        assert key in P.METRIC_BY_KEY
    for reason in ("long_scoreboard", "mio_throttle", "short_scoreboard", "wait", "barrier", "not_selected",
                   "math_pipe_throttle", "lg_throttle", "tex_throttle", "dispatch_stall", "no_instruction",
                   "selected", "branch_resolving", "drain", "membar", "sleeping", "misc"):
        assert f"stall_{reason}" in P.METRIC_BY_KEY
    assert P.metric_names()[0] == "gpu__time_duration.sum"


def test_ncu_command_has_the_required_options():
    cmd = P.ncu_command("/x/ncu", ["a__b.sum", "c__d.ratio"], ["python", "-m", "t"], "/tmp/log.csv")
    s = " ".join(cmd)
    for opt in ("--clock-control none", "--profile-from-start off", "--csv", "--page raw", "--print-units base",
                "--log-file /tmp/log.csv", "--metrics a__b.sum,c__d.ratio", "--target-processes all"):
        assert opt in s
    assert cmd[-3:] == ["python", "-m", "t"]


# ---- values and units ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("1,234,567", 1234567.0), ("12.50", 12.5), ("4.0e-05", 4e-05), ("0", 0.0), (" 7 ", 7.0),
    ("n/a", None), ("N/A", None), ("", None), (None, None), ("garbage", None), ("nan", None),
])
def test_parse_value(text, value):
    assert P.parse_value(text) == value


@pytest.mark.parametrize("value,unit,expect,canon", [
    (2848.0, "nsecond", 2.848e-6, "s"), (2.5, "usecond", 2.5e-6, "s"), (1.5, "msecond", 1.5e-3, "s"),
    (3.0, "second", 3.0, "s"), (12.0, "Kbyte", 12e3, "B"), (1.5, "Mbyte", 1.5e6, "B"), (2.0, "Gbyte", 2e9, "B"),
    (1.0, "KiB", 1024.0, "B"), (7.0, "byte", 7.0, "B"), (3.0, "Gbyte/second", 3e9, "B/s"),
    (2.0, "byte/second", 2.0, "B/s"), (1.98, "cycle/nsecond", 1.98e9, "Hz"), (1.5, "Ghz", 1.5e9, "Hz"),
    (1755000000.0, "hz", 1.755e9, "Hz"), (5.0, "Msector", 5e6, "sector"), (3.0, "Kinst", 3e3, "inst"),
    (42.0, "%", 42.0, "%"), (1.2, "inst/cycle", 1.2, "inst/cycle"), (64.0, "register/thread", 64.0, "register/thread"),
    (9.0, "", 9.0, ""),
])
def test_normalize_units(value, unit, expect, canon):
    v, u = P.normalize(value, unit)
    assert v == pytest.approx(expect) and u == canon


# ---- parsing by name -----------------------------------------------------------------------------

HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
          "Grid Size", "Device", "CC"]


def _csv(cols: list[tuple[str, str, str]], kernels=(("gemm", ),), prefix="==PROF== Connected to process 1 (python)\n"):
    """cols: (metric, unit, value); one row per kernel with the same values."""
    q = lambda cells: ",".join(f'"{c}"' for c in cells)  # noqa: E731
    lines = [q(HEADER + [c[0] for c in cols]), q([""] * len(HEADER) + [c[1] for c in cols])]
    for i, (name, *_) in enumerate(kernels):
        lines.append(q([str(i), "1", "python", "h", name, "1", "7", "(256, 1, 1)", "(8, 8, 1)", "0", "9.0"]
                       + [c[2] for c in cols]))
    return prefix + "\n".join(lines) + "\n==PROF== Disconnected from process 1\n"


def test_columns_are_found_by_name_not_position():
    cols = [("gpu__time_duration.sum", "nsecond", "2,000,000"), ("dram__bytes_read.sum", "byte", "1,024"),
            ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "55.5"),
            ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "", "n/a")]
    a = P.parse_ncu_csv(_csv(cols))
    b = P.parse_ncu_csv(_csv(list(reversed(cols))))
    assert a == b
    assert a["gpu__time_duration.sum"] == pytest.approx(2e-3)
    assert a["dram__bytes_read.sum"] == 1024
    assert a["sm__warps_active.avg.pct_of_peak_sustained_active"] == 55.5
    assert a["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] is None


def test_parser_ignores_program_output_and_ncu_chatter():
    text = "hello from the program\n==WARNING== something\n" + _csv([("gpu__time_duration.sum", "usecond", "12.5")])
    recs = P.parse_ncu_rows(text)
    assert len(recs) == 1 and recs[0].kernel == "gemm" and recs[0].values["gpu__time_duration.sum"] == pytest.approx(12.5e-6)
    assert recs[0].info["Block Size"] == "(256, 1, 1)"


def test_parser_rejects_output_without_a_header():
    with pytest.raises(P.NcuError):
        P.parse_ncu_rows("==ERROR== something went wrong\n")


def test_aggregate_two_kernels():
    """A call that launched two kernels: counts add up, percentages are duration-weighted."""
    cols_a = [("gpu__time_duration.sum", "nsecond", "3,000"), ("dram__bytes_read.sum", "byte", "100"),
              ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "10"),
              ("launch__registers_per_thread", "register/thread", "200")]
    ta = _csv(cols_a)
    tb = _csv([("gpu__time_duration.sum", "nsecond", "1,000"), ("dram__bytes_read.sum", "byte", "50"),
               ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "90"),
               ("launch__registers_per_thread", "register/thread", "16")])
    recs = P.parse_ncu_rows(ta) + P.parse_ncu_rows(tb)
    agg = P.aggregate(recs)
    assert agg["gpu__time_duration.sum"] == pytest.approx(4e-6)
    assert agg["dram__bytes_read.sum"] == 150
    assert agg["sm__warps_active.avg.pct_of_peak_sustained_active"] == pytest.approx((10 * 3 + 90 * 1) / 4)
    assert agg["launch__registers_per_thread"] == 200


# ---- recorded output -----------------------------------------------------------------------------

CORE = ("duration", "dram_read_bytes", "l2_bytes", "bank_conflicts_ld", "bank_conflicts_st", "achieved_occupancy",
        "ipc", "ffma_count", "l1_throughput_pct", "l2_throughput_pct", "dram_throughput_pct", "sm_throughput_pct")


@pytest.mark.parametrize("name", ["ncu_smem_raw.csv", "ncu_smem_padded_raw.csv"])
def test_recorded_rung_is_plausible(name):
    recs = P.parse_ncu_rows(_read(name))
    assert len(recs) == 1, "one profiled kernel between cuProfilerStart/Stop"
    s = P.summarize(P.aggregate(recs), FLOPS, [r.kernel for r in recs])
    for key in CORE:
        assert s["counters"][key] is not None, f"{key} missing from the recording"
    assert 1e-5 < s["duration_s"] < 10
    assert 0.01 < s["tflops"] < 100            # an fp32 rung on one GPU
    assert 0 < s["achieved_occupancy"] <= 100
    assert 0 < s["ipc"] <= 4.0                 # 4 schedulers per SM
    M, N, K = SHAPE
    assert s["dram_read_bytes"] >= 0.5 * (M * K + K * N) * 4      # caches flushed: A and B come from DRAM
    assert s["l2_bytes"] >= s["dram_read_bytes"] * 0.5
    assert s["ffma_count"] == pytest.approx(M * N * K, rel=0.02)  # one FFMA per multiply-add
    # no tensor-core math: the hmma-pipe counter also counts the HFMA2.MMA register moves the
    # compiler emits (measured on the H100: one per warp), so compare with the FFMA warp
    # instructions instead of expecting zero
    assert (s["tensor_inst_count"] or 0) < 0.001 * s["ffma_count"] / 32
    assert s["arithmetic_intensity"] == pytest.approx(FLOPS / s["dram_bytes"])
    assert len(s["stalls"]) >= 10
    assert sum(x["share"] for x in s["stalls"]) == pytest.approx(1.0)
    assert s["stalls"] == sorted(s["stalls"], key=lambda x: -x["cycles_per_issue"])
    assert s["top_stall"] not in ("selected", "not_selected")
    assert s["shared_ld_throughput"] > 0


def test_recorded_bank_conflicts_fall_with_padding():
    smem = P.summarize(P.parse_ncu_csv(_read("ncu_smem_raw.csv")), FLOPS)
    padded = P.summarize(P.parse_ncu_csv(_read("ncu_smem_padded_raw.csv")), FLOPS)
    assert smem["bank_conflicts_ld"] > 0
    assert smem["bank_conflicts_ld"] > 10 * padded["bank_conflicts_ld"]


def test_recorded_cublas():
    recs = P.parse_ncu_rows(_read("ncu_cublas_raw.csv"))
    assert recs and all(r.kernel for r in recs)
    agg = P.aggregate(recs)
    s = P.summarize(agg, FLOPS, [r.kernel for r in recs])
    total = sum(r.values["gpu__time_duration.sum"] for r in recs)
    assert s["duration_s"] == pytest.approx(total)
    assert s["dram_read_bytes"] == pytest.approx(sum(r.values["dram__bytes_read.sum"] for r in recs))
    assert 1 < s["tflops"] < 70
    assert s["kernels"] == [r.kernel for r in recs]


# ---- unknown metrics, permissions, a fake ncu ----------------------------------------------------

def test_unknown_metric_messages():
    req = ["dram__bytes_read.sum", "dram__bytes_write.sum", "flop_count_sp", "x__y.sum"]
    assert P.unknown_metrics("==ERROR== Failed to find metric regex:^dram__bytes_read\\.sum$", req) == ["dram__bytes_read.sum"]
    assert P.unknown_metrics(
        "==ERROR== Failed to find metric regex:^flop_count_sp\\.(sum|min|max|avg|pct|ratio|max_rate)$", req) == ["flop_count_sp"]
    assert P.unknown_metrics("==ERROR== Failed to find metric x__y.sum", req) == ["x__y.sum"]
    assert P.unknown_metrics("all fine", req) == []


def test_permission_error_is_explained():
    with pytest.raises(P.NcuPermissionError, match="NVreg_RestrictProfilingToAdminUsers"):
        P.check_permission("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")


FAKE_NCU = r'''#!{python}
"""A stand-in for ncu: writes a recorded raw CSV (restricted to the requested metrics) to --log-file."""
import csv, io, os, sys
args = sys.argv[1:]
mode = os.environ.get("FAKE_NCU_MODE", "ok")
if "--version" in args:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2099.1.0.0 (build 1) (public-release)")
    sys.exit(0)
log = args[args.index("--log-file") + 1]
metrics = args[args.index("--metrics") + 1].split(",")
with open(os.environ["FAKE_NCU_ARGS"], "a") as fh:
    fh.write(" ".join(args) + "\n")
if os.environ.get("FAKE_NCU_ENV"):
    with open(os.environ["FAKE_NCU_ENV"], "a") as fh:
        fh.write(os.environ.get("PYTHONPATH", "") + "\n")
if mode == "perm":
    open(log, "w").write("==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n")
    sys.exit(1)
if mode == "nokernel":
    open(log, "w").write("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")
    sys.exit(0)
bad = [m for m in metrics if m.startswith("bogus__")]
if bad:
    open(log, "w").write("==ERROR== Failed to find metric regex:^" + bad[0].replace(".", "\\.") + "$\n")
    sys.exit(1)
lines = [l for l in open(os.environ["FAKE_NCU_CSV"]).read().splitlines() if l.startswith('"')]
table = list(csv.reader(io.StringIO("\n".join(lines))))
hdr = table[0]
keep = [i for i, h in enumerate(hdr) if i < 11 or h in metrics]
out = io.StringIO()
w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
for r in table:
    w.writerow([r[i] for i in keep])
open(log, "w").write("==PROF== Connected to process 1\n" + out.getvalue() + "==PROF== Disconnected from process 1\n")
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.replace("{python}", sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_NCU_CSV", os.path.join(DATA, "ncu_smem_raw.csv"))
    monkeypatch.setenv("FAKE_NCU_ARGS", str(tmp_path / "args.txt"))
    monkeypatch.setattr(ncu_run, "REJECTED_METRICS", set())
    return str(exe)


def test_run_ncu_drops_unknown_metrics_and_retries(fake_ncu, tmp_path):
    wanted = P.metric_names() + ["bogus__metric.sum"]
    recs, rejected, text = P.run_ncu(["python", "-c", "pass"], wanted, ncu=fake_ncu)
    assert rejected == ["bogus__metric.sum"]
    assert len(recs) == 1 and "gpu__time_duration.sum" in recs[0].values
    calls = (tmp_path / "args.txt").read_text().splitlines()
    assert len(calls) == 2 and "bogus__metric.sum" in calls[0] and "bogus__metric.sum" not in calls[1]
    assert "--clock-control none" in calls[1] and "--profile-from-start off" in calls[1]
    # learned for the rest of the process: the next run does not ask again
    P.run_ncu(["python", "-c", "pass"], wanted, ncu=fake_ncu)
    assert len((tmp_path / "args.txt").read_text().splitlines()) == 3


def test_run_ncu_permission_error(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    with pytest.raises(P.NcuPermissionError, match="ERR_NVGPUCTRPERM"):
        P.run_ncu(["true"], ["gpu__time_duration.sum"], ncu=fake_ncu)


def test_run_ncu_no_kernel(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "nokernel")
    with pytest.raises(P.NcuError, match="no measurement"):
        P.run_ncu(["true"], ["gpu__time_duration.sum"], ncu=fake_ncu)


def test_missing_ncu_is_a_clear_error(monkeypatch, tmp_path):
    from gemmlab.core import toolchain

    with pytest.raises(toolchain.ToolNotFoundError, match="ncu"):
        P.find_ncu(str(tmp_path / "no-such-ncu"))

    def nothing(name):
        raise toolchain.ToolNotFoundError(f"{name} not found")

    monkeypatch.delenv("GEMMLAB_NCU", raising=False)
    monkeypatch.setattr(toolchain, "find_tool", nothing)
    monkeypatch.setattr("glob.glob", lambda pattern: [])
    with pytest.raises(toolchain.ToolNotFoundError, match="Nsight Compute"):
        P.find_ncu()


def test_profile_command_end_to_end_with_fake_ncu(fake_ncu, monkeypatch, capsys):
    """`gemmlab profile smem --shape 2048 --vs-cublas --json` against the fake ncu (GPU check faked)."""
    import gemmlab.core.driver
    from gemmlab.cli import main

    monkeypatch.setattr(gemmlab.core.driver, "require_gpu", lambda: None)
    rc = main(["profile", "smem", "--shape", "2048", "--vs-cublas", "--json", "--ncu", fake_ncu])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res["kernel"] == "smem" and res["shape"] == list(SHAPE) and res["dtype"] == "fp32"
    assert res["ncu"].startswith("2099.1")
    assert res["bank_conflicts_ld"] > 0 and res["tflops"] > 0
    assert res["cublas"]["kernel"] == "cublas"
    # the target the fake was asked to run: the rung once, then cuBLAS
    calls = open(os.environ["FAKE_NCU_ARGS"]).read()
    assert "gemmlab.measure.ncu_target --shape 2048x2048x2048 --dtype fp32 --rung smem" in calls
    assert "gemmlab.measure.ncu_target --shape 2048x2048x2048 --dtype fp32 --cublas" in calls
    # and the rich table
    rc = main(["profile", "smem", "--shape", "2048", "--ncu", fake_ncu])
    out = capsys.readouterr().out
    assert rc == 0 and "bank conflicts" in out and "top warp stalls" in out


def test_a_call_of_two_kernels_is_profiled_whole_and_kernel_by_kernel(fake_ncu, monkeypatch, tmp_path):
    """A plan that launches two kernels (rung 18's stream-K tail after its whole tiles): the
    call's figures add both up, and ``per_kernel`` gives each its own (its time, its stalls)."""
    import csv
    import io

    import gemmlab.core.driver

    lines = [l for l in _read("ncu_smem_raw.csv").splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    hdr, units, first = rows[0], rows[1], rows[2]            # the names, their units, the kernel's values
    name, dur = hdr.index("Kernel Name"), hdr.index("gpu__time_duration.sum")
    second = list(first)
    second[name], second[dur] = "gemm_sk_tail", repr(float(first[dur].replace(",", "")) / 4)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([hdr, units, first, second])
    two = tmp_path / "two.csv"
    two.write_text(out.getvalue())
    monkeypatch.setenv("FAKE_NCU_CSV", str(two))
    monkeypatch.setattr(gemmlab.core.driver, "require_gpu", lambda: None)
    res = ncu_profile.profile_rung("smem", SHAPE, "fp32", ncu=fake_ncu)
    per = res["per_kernel"]
    assert [k["kernel"] for k in per] == res["kernels"] and per[1]["kernel"] == "gemm_sk_tail"
    assert per[1]["duration_s"] == pytest.approx(per[0]["duration_s"] / 4)
    assert res["duration_s"] == pytest.approx(per[0]["duration_s"] + per[1]["duration_s"])
    assert all(k["stalls"] for k in per)


def test_a_call_of_one_kernel_has_no_per_kernel_breakdown(fake_ncu, monkeypatch):
    import gemmlab.core.driver

    monkeypatch.setattr(gemmlab.core.driver, "require_gpu", lambda: None)
    assert "per_kernel" not in ncu_profile.profile_rung("smem", SHAPE, "fp32", ncu=fake_ncu)


def test_the_profiled_target_imports_this_very_gemmlab(fake_ncu, monkeypatch, tmp_path):
    """ncu's child runs ``python -m gemmlab.measure.ncu_target`` with PYTHONPATH starting at the
    directory that holds this gemmlab package."""
    import gemmlab.core.driver

    monkeypatch.setattr(gemmlab.core.driver, "require_gpu", lambda: None)
    monkeypatch.setenv("FAKE_NCU_ENV", str(tmp_path / "env.txt"))
    ncu_profile.profile_rung("smem", SHAPE, "fp32", ncu=fake_ncu)
    first = (tmp_path / "env.txt").read_text().splitlines()[0].split(os.pathsep)[0]
    import gemmlab

    assert os.path.samefile(first, os.path.dirname(os.path.dirname(gemmlab.__file__)))
    assert os.path.isfile(os.path.join(first, "gemmlab", "measure", "ncu_target.py"))


def test_profile_rejects_a_dtype_the_rung_lacks(fake_ncu):
    with pytest.raises(ValueError, match="does not support dtype"):
        ncu_profile.profile_rung("wmma", SHAPE, "fp32", ncu=fake_ncu)


def test_profile_target_needs_a_rung_or_cublas(capsys):
    from gemmlab.measure import ncu_target as profile_target

    with pytest.raises(SystemExit):
        profile_target.main(["--shape", "64"])
    assert "one of the arguments --rung --cublas is required" in capsys.readouterr().err


def test_profile_of_fp32_on_the_tensor_cores_runs_the_rung_and_cublas_in_that_precision(fake_ncu, monkeypatch, capsys):
    """`gemmlab profile wgmma_tf32 --precision tf32 --vs-cublas`: the child computes the rung in
    tf32 and cuBLAS in its TF32 mode (the benchmark's baseline); the JSON says so."""
    import gemmlab.core.driver
    from gemmlab.cli import main

    monkeypatch.setattr(gemmlab.core.driver, "require_gpu", lambda: None)
    rc = main(["profile", "wgmma_tf32", "--precision", "tf32", "--shape", "2048", "--vs-cublas", "--json",
               "--ncu", fake_ncu])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["precision"] == "tf32" and res["cublas"]["precision"] == "tf32"
    calls = open(os.environ["FAKE_NCU_ARGS"]).read()
    assert "--rung wgmma_tf32 --precision tf32" in calls and "--cublas --precision tf32" in calls


def test_profile_refuses_a_precision_the_rung_cannot_compute(fake_ncu):
    with pytest.raises(ValueError, match="precision"):
        ncu_profile.profile_rung("smem", SHAPE, "fp32", ncu=fake_ncu, precision="tf32")


def test_the_l2_partitions_counters_and_the_sm_clock_reach_the_summary_and_the_table():
    """The counters that tell where a tensor-core GEMM's power goes under the cap (benchmarks/NOTES.md,
    session 16): lookups by the SMs, their misses, what crossed the fabric between the L2's two
    partitions, and the SM clock they ran at."""
    from gemmlab.cli.profile import TABLE_ROWS, _fmt

    raw = {"lts__t_sectors_srcunit_tex_op_read.sum": 5.0e8, "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": 1.1e8,
           "lts__t_sectors_srcunit_ltcfabric.sum": 1.04e8, "lts__t_sectors_srcunit_ltcfabric_op_read.sum": 6.6e7,
           "sm__cycles_elapsed.avg.per_second": 1.595e9}
    s = P.summarize(raw)
    assert (s["l2_sm_read_sectors"], s["l2_sm_read_miss_sectors"], s["l2_fabric_sectors"],
            s["l2_fabric_read_sectors"], s["sm_clock_hz"]) == (5.0e8, 1.1e8, 1.04e8, 6.6e7, 1.595e9)
    rows = {key: unit for key, _, unit in TABLE_ROWS}
    assert {"sm_clock_hz", "l2_sm_read_sectors", "l2_fabric_sectors"} <= set(rows)
    assert _fmt(s["sm_clock_hz"], rows["sm_clock_hz"]) == "1.595 GHz"
