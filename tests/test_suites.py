"""The benchmark suites by name: the fixed ones, ``decode`` (memory-bound: GB/s and the share of the
copy bandwidth beside the ratio), and ``random[:N][@SEED]``, drawn the same from the same seed on
every machine so that anyone can time a sample nobody tuned on."""

from __future__ import annotations

import argparse

import pytest
from rich.console import Console

from gemmlab.bench.stats import bytes_moved, summarize
from gemmlab.bench.table import build_table, has_bandwidth, render
from gemmlab.cli.common import suite_name
from gemmlab.core.shapes import DECODE_SUITE, RANDOM_BOUNDS, SUITE_DTYPES, random_shapes, suite, suite_kind


def test_random_draws_the_same_shapes_from_the_same_seed():
    # the literal list pins the generator: a change of how shapes are drawn changes every sample
    assert suite("random:5") == ((2840, 2461, 262), (11, 478, 236), (1604, 120, 380), (243, 6674, 457),
                                 (14, 2426, 974))
    assert suite("random:5@0") == suite("random:5") == random_shapes(5, 0)


def test_random_with_another_seed_draws_other_shapes():
    assert suite("random:8@1") != suite("random:8@0")


def test_random_n_is_a_prefix_of_a_longer_draw_from_the_same_seed():
    assert suite("random:64@3")[:10] == suite("random:10@3")


def test_random_defaults_to_48_shapes_from_seed_0():
    assert suite("random") == random_shapes(48, 0) and suite("random@0") == suite("random:48")


def test_random_shapes_stay_within_their_bounds_and_spread_over_them():
    shapes = random_shapes(2000, 11)
    for d, (lo, hi) in enumerate(RANDOM_BOUNDS):
        values = [s[d] for s in shapes]
        assert lo <= min(values) and max(values) <= hi
        assert min(values) < 4 * lo and max(values) > hi / 4      # log-uniform: both ends are reached


@pytest.mark.parametrize("name", ["random:0", "random:x", "random@", "random:", "random:-1", "random@-2", "random:4@y",
                                  "random:+5", "random:5_0", "random: 5", "random:4@7@8", "nope", "randomly"])
def test_a_malformed_or_unknown_suite_is_refused_naming_the_forms(name):
    with pytest.raises(ValueError, match=r"random\[:N\]\[@SEED\]"):
        suite(name)


def test_the_cli_takes_a_random_suite_and_refuses_a_bad_one_as_a_usage_error():
    assert suite_name("random:8@3") == "random:8@3"
    with pytest.raises(argparse.ArgumentTypeError, match="N must be at least 1"):
        suite_name("random:0")


def test_bench_parses_the_new_suites_on_its_command_line():
    from gemmlab.cli.app import build_parser
    for name in ("random:8@3", "decode", "random"):
        args = build_parser().parse_args(["bench", "--suite", name, "--dtype", "bf16"])
        assert args.suite == name
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["bench", "--suite", "random:0"])
    assert exc.value.code == 2


def test_random_shapes_refuses_an_empty_sample_or_a_negative_seed():
    with pytest.raises(ValueError, match="at least one shape"):
        random_shapes(0, 1)
    with pytest.raises(ValueError, match="non-negative"):
        random_shapes(4, -1)


def test_suite_kind_names_the_family_whose_dtypes_a_suite_is_for():
    assert suite_kind("random:8@3") == "random" and suite_kind("decode") == "decode"
    assert SUITE_DTYPES[suite_kind("random:8@3")] == ("fp32", "fp16", "bf16")
    assert SUITE_DTYPES["decode"] == ("fp16", "bf16")


def test_the_decode_suite_is_four_token_counts_against_four_weights():
    assert len(DECODE_SUITE) == 16 and suite("decode") == DECODE_SUITE
    assert {m for m, _, _ in DECODE_SUITE} == {1, 4, 16, 32}
    assert {(n, k) for _, n, k in DECODE_SUITE} == {(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096)}


# ---- bandwidth figures -------------------------------------------------------------------------
def _record(kernel, M, N, K, ms):
    return {"kernel": kernel, "number": 0, "peer": kernel == "cublas", "M": M, "N": N, "K": K, "times_ms": [ms],
            "status": "ok", "ms": None, "tflops": None, "vs_cublas": None, "vs_best_peer": None, "best_peer": None,
            "gbps": None, "pct_copy_bw": None, "note": "", "requested_shape": [M, N, K]}


def test_bytes_moved_reads_a_and_b_and_writes_c_once():
    assert bytes_moved({"M": 1, "N": 4096, "K": 4096}, 2) == (4096 + 4096 * 4096 + 4096) * 2


def test_bytes_moved_also_reads_c_when_beta_is_not_zero():
    shape = {"M": 32, "N": 6144, "K": 4096}
    assert bytes_moved(shape, 2, beta=0.5) - bytes_moved(shape, 2) == 32 * 6144 * 2


def test_summarize_gives_gb_per_s_and_the_share_of_the_copy_bandwidth():
    recs = [_record("cublas", 1, 4096, 4096, 0.016), _record("auto", 1, 4096, 4096, 0.0125)]
    summarize(recs, 1000.0, itemsize=2, copy_bw=3.0e12)
    nbytes = (4096 + 4096 * 4096 + 4096) * 2
    assert recs[1]["gbps"] == pytest.approx(nbytes / 0.0125e-3 / 1e9)
    assert recs[1]["pct_copy_bw"] == pytest.approx(100 * nbytes / 0.0125e-3 / 3.0e12)
    assert recs[1]["vs_cublas"] == pytest.approx(0.016 / 0.0125)


def test_without_a_measured_copy_bandwidth_there_is_no_share_of_it():
    recs = [_record("cublas", 1, 4096, 4096, 0.016)]
    summarize(recs, None, itemsize=2)
    assert recs[0]["gbps"] is not None and recs[0]["pct_copy_bw"] is None


def test_the_table_shows_bandwidth_columns_only_when_the_run_measured_it():
    recs = [_record("cublas", 1, 4096, 4096, 0.016)]
    summarize(recs, None, itemsize=2, copy_bw=3.0e12)
    plain = {"settings": {"dtype": "bf16"}, "env": {}, "results": recs}
    measured = {"settings": {"dtype": "bf16", "copy_bandwidth": {"dram_bw_Bps": 3.0e12, "copy_bytes": 2 ** 30}},
                "env": {}, "results": recs}
    assert not has_bandwidth(plain) and has_bandwidth(measured)
    headers = lambda result: [c.header for c in build_table(result).columns]   # noqa: E731
    assert "GB/s" not in headers(plain) and {"GB/s", "% copy BW"} <= set(headers(measured))


def _text(result) -> str:
    con = Console(record=True, width=240, color_system=None)
    render(result, con)
    return con.export_text()


def test_an_old_result_file_without_bandwidth_fields_still_renders():
    old = _record("cublas", 1, 4096, 4096, 0.016)
    del old["gbps"], old["pct_copy_bw"]
    summarize([old], None)      # as before: no element size, no bandwidth fields written
    assert "gbps" not in old
    text = _text({"settings": {"dtype": "bf16"}, "env": {}, "results": [old]})
    assert "1x4096x4096" in text and "GB/s" not in text


def test_a_measured_run_shows_each_rows_gb_per_s_and_share_of_the_copy_bandwidth():
    recs = [_record("cublas", 1, 4096, 4096, 0.016)]
    summarize(recs, None, itemsize=2, copy_bw=3.0e12)
    text = _text({"settings": {"dtype": "bf16", "copy_bandwidth": {"dram_bw_Bps": 3.0e12, "copy_bytes": 2 ** 30}},
                  "env": {}, "results": recs})
    assert f"{recs[0]['gbps']:.0f}" in text and f"{recs[0]['pct_copy_bw']:.1f}" in text
    assert "of 3000 GB/s" in text
