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
    assert "| cuBLAS | fp32 | 8x8x8 | 2.000 | - | 50.0 | 1.00x | - | 75.0% |" in md
    assert "naive" not in md


def test_bench_table_says_when_fp32_operands_were_multiplied_on_the_tensor_cores():
    bench = {"gemmlab_version": "0", "timestamp": "t", "env": {"gpu_name": "H100", "sm_count": 132},
             "settings": {"repeats": 5},
             "results": [{"kernel": k, "number": n, "dtype": "fp32", "precision": p, "M": 8, "N": 8, "K": 8,
                          "ms": 1.0, "tflops": 1.0, "vs_cublas": 1.0, "pct_peak": 1.0}
                         for k, n, p in (("cublas", 0, "fp32"), ("wgmma_tf32", 22, "3xtf32"))]}
    md = bench_markdown(bench)
    assert "| cuBLAS | fp32 | 8x8x8 |" in md and "| `wgmma_tf32` | fp32 as 3xtf32 | 8x8x8 |" in md


def _head(settings: dict, kernels=("cublas", "naive")) -> str:
    bench = {"gemmlab_version": "0", "timestamp": "t", "env": {"gpu_name": "H100", "sm_count": 132},
             "settings": settings,
             "results": [{"kernel": k, "number": i, "dtype": "fp32", "M": 8, "N": 8, "K": 8, "ms": 1.0,
                          "tflops": 1.0, "vs_cublas": 1.0, "pct_peak": 1.0} for i, k in enumerate(kernels)]}
    return bench_markdown(bench).splitlines()[0]


def test_bench_table_header_says_how_it_was_timed_from_the_settings():
    head = _head({"repeats": 5, "flush_l2": True})
    assert "median of 5 timed runs" in head and "L2 flushed before each timed run" in head
    assert "cuBLAS timed in the same run" in head
    head = _head({"repeats": 5, "flush_l2": False})
    assert "L2 not flushed" in head and "L2 flushed" not in head
    # the timing engine's settings["timing"] wins over flush_l2
    head = _head({"flush_l2": True, "timing": {"l2": "hot", "spin_us": 1000.0, "min_samples": 10, "max_samples": 100}})
    assert "L2 not flushed" in head and "L2 flushed" not in head
    assert "10 to 100" in head and "1000 us" in head
    head = _head({"flush_l2": False, "timing": {"l2": "cold", "min_samples": 10}})
    assert "L2 flushed before each timed run" in head
    # how it flushed: a read (settings["flush"], since 2026-11-23) or, where not recorded, a memset
    assert "by a read" in _head({"flush": "read", "timing": {"l2": "cold"}})
    assert "by a memset" in _head({"timing": {"l2": "cold"}})
    # what the settings do not say is not claimed
    head = _head({})
    assert "L2 flushed" not in head and "not recorded" in head
    assert "cuBLAS" not in _head({"repeats": 5, "flush_l2": True}, kernels=("naive",)).replace("no cuBLAS", "")


def test_a_sustained_bench_table_header_says_blocks_of_back_to_back_launches_unflushed():
    head = _head({"timing": {"l2": "cold", "min_samples": 10, "sustained_s": 2.0, "sustained_rounds": 4}})
    assert "sustained: median of 4 blocks of back-to-back launches" in head and "about 2 s of GPU time" in head
    assert "L2 not flushed" in head and "L2 flushed" not in head and "cuBLAS timed in the same run" in head


def test_bench_table_header_states_the_peak_basis():
    import json

    bench = json.loads((README.parent / "benchmarks" / "results" / "h100_fp16.json").read_text())
    p = bench["env"]["peaks"]
    head = bench_markdown(bench).split("\n\n", 1)[0]
    assert f"{p['sm_count']} SMs x {p['tensor_flop_per_clk_sm']} flop/clk/SM x {p['clock_mhz']:.0f} MHz" in head
    assert f"{bench['settings']['peak_tflops']:.1f} TFLOP/s" in head


def test_bench_table_of_fp32_on_the_tensor_cores_states_the_precisions_share_of_the_rate():
    """FP32 operands computed as tf32 / 3xtf32: the peak is the 16-bit tensor rate times the
    precision's share (0.5, 1/6), and the header shows that product, not a mismatch with the
    FP32 CUDA-core peak."""
    import json

    for name, share in (("h100_wgmma_tf32_rs.json", 0.5), ("h100_wgmma_3xtf32_final.json", 1 / 6)):
        bench = json.loads((README.parent / "benchmarks" / "results" / name).read_text())
        p = bench["env"]["peaks"]
        head = bench_markdown(bench).split("\n\n", 1)[0]
        assert "basis not recorded" not in head, name
        assert f"{p['sm_count']} SMs x {p['tensor_flop_per_clk_sm'] * share:g} flop/clk/SM" in head, name
