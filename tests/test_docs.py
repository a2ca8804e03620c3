"""The README's ladder table is generated from the registry and must not drift from it."""

from pathlib import Path

from gemmlab.report.docs import bench_markdown, rungs_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_ladder_table_matches_the_registry():
    assert rungs_markdown() in README.read_text(), "run: python tools/gen_readme.py"


def test_readme_gives_the_install_and_test_commands_that_ci_runs():
    text = README.read_text()
    ci = (README.parent / ".ci" / "run").read_text()
    test_cmd = 'pip install -e ".[cu13,test]" && pytest'
    assert test_cmd in text and test_cmd in ci
    assert 'pip install -e ".[cu13]" && gemmlab bench' in text


def test_bench_table_lists_each_timed_result_with_its_ratio():
    bench = {"gemmlab_version": "0", "timestamp": "t", "env": {"gpu_name": "H100", "sm_count": 132},
             "settings": {"repeats": 5},
             "results": [{"kernel": "cublas", "number": 0, "dtype": "fp32", "M": 8, "N": 8, "K": 8, "ms": 2.0,
                          "tflops": 50.0, "vs_cublas": 1.0, "pct_peak": 75.0},
                         {"kernel": "naive", "number": 1, "dtype": "fp32", "M": 8, "N": 8, "K": 8, "ms": None}]}
    md = bench_markdown(bench)
    assert "| cublas | fp32 | 8x8x8 | 2.000 | 50.0 | 1.00x | 75.0% |" in md
    assert "naive" not in md
