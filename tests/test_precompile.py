"""Ahead-of-time compilation (gemmlab.precompile, `gemmlab compile`), the log line of a launch that
compiles, and the refusal to compile while a CUDA graph is captured. NVRTC only: no GPU needed
(the graph-capture test at the end is marked gpu)."""

from __future__ import annotations

import logging

import pytest

import gemmlab
from gemmlab.cli import main
from gemmlab.core import compile as glc
from gemmlab.core import driver, launch
from gemmlab.core import precompile as pc
from gemmlab.core.variant import Variant


def _entries(cache, arch="sm_80"):
    d = cache / arch
    return sorted(p.name for p in d.glob("*.cubin")) if d.exists() else []


# ---- enumeration ----------------------------------------------------------------------------
def test_one_rung_one_dtype_two_layouts_is_two_layouts_times_eight_vector_combinations():
    vs = pc.variants(["naive"], ["fp32"], ["rr", "cc"], "sm_80")
    assert len(vs) == 2 * 8
    assert {(v.a_col, v.b_col) for v in vs} == {(False, False), (True, True)}
    assert len({(v.vec_a, v.vec_b, v.vec_c) for v in vs}) == 8
    assert len({v.describe() for v in vs}) == len(vs)


def test_defaults_cover_every_dtype_of_the_rung_and_all_four_layouts():
    r = max(gemmlab.kernels(), key=lambda k: len(k.dtypes))  # a rung of more than one dtype (wmma)
    vs = pc.variants([r.slug], arch="sm_90a")
    assert len(vs) == len(r.dtypes) * 4 * 8
    assert {v.dtype for v in vs} == set(r.dtypes)


def test_a_rung_of_two_precisions_gets_both_built():
    vs = pc.variants("tf32_mma", layouts="rr", arch="sm_90a")
    assert len(vs) == 2 * 8 and {v.precision for v in vs} == {"tf32", "3xtf32"}


def test_worker_jobs_keep_precision_and_the_tall_grid(fresh_cache):
    v = Variant.make("tf32_mma", "fp32", precision="3xtf32", tall=True)
    with pc.CompilePool(2) as pool:             # two workers: the job travels to another process
        seen = []
        pool.build([v, Variant.make("naive", "fp32")], "sm_80", lambda var, hit, err: seen.append(err))
    assert seen == [None, None]
    glc.clear_memory_cache()
    assert v.compile("sm_80").cache_hit          # the worker built this very variant (its cache key)


def test_dtype_filter_keeps_only_the_rungs_that_take_it():
    vs = pc.variants(None, ["fp16"], ["rr"], "sm_90a")
    assert vs and {v.dtype for v in vs} == {"fp16"}
    assert {v.rung.slug for v in vs} == {r.slug for r in gemmlab.kernels() if "fp16" in r.dtypes}


def test_rungs_by_number_slug_or_comma_list_and_layouts_as_tuples():
    a = pc.variants("1,02", "fp32", [(False, True)], "sm_80")
    assert {v.rung.number for v in a} == {1, 2} and len(a) == 2 * 8
    assert all(not v.a_col and v.b_col for v in a)


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernels=["nope"]), "unknown kernel"),
    (dict(kernels=["naive"], dtypes=["fp16"]), "does not support dtype fp16"),
    (dict(kernels=["naive"], dtypes=["fp64"]), "fp64"),
    (dict(kernels=["naive"], layouts=["rx"]), "bad layout 'rx'"),
    (dict(kernels=["naive"], layouts="rrr"), "bad layout"),
    (dict(kernels=["naive"], configs={"NOPE": 4}), "no parameter"),
])
def test_bad_arguments_are_clear_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gemmlab.precompile(arch="sm_80", **kwargs)


def test_without_a_gpu_and_without_arch_it_asks_for_arch(monkeypatch):
    monkeypatch.setattr(driver, "gpu_available", lambda: False)
    with pytest.raises(ValueError, match="pass arch="):
        gemmlab.precompile(kernels=["naive"])


def test_an_architecture_nvrtc_cannot_target_is_refused():
    with pytest.raises(ValueError, match="cannot compile for sm_999"):
        gemmlab.precompile(kernels=["naive"], arch="sm_999")


# ---- compiling ------------------------------------------------------------------------------
def test_precompile_fills_the_cache_and_a_second_call_finds_everything_cached(fresh_cache):
    done = []
    res = gemmlab.precompile(kernels=["naive"], dtypes=["fp32"], layouts=["rr", "rc"], arch="sm_80",
                             processes=2, on_done=lambda v, status: done.append(status))
    assert res["arch"] == "sm_80" and res["variants"] == 16
    assert res["compiled"] == 16 and res["cached"] == 0 and res["errors"] == []
    assert done == ["compiled"] * 16
    assert len(_entries(fresh_cache)) == 16
    again = gemmlab.precompile(kernels=["naive"], dtypes=["fp32"], layouts=["rr", "rc"], arch="sm_80", processes=2)
    assert again["compiled"] == 0 and again["cached"] == 16 and again["errors"] == []
    # and the launch path then reads them from the disk, with no compile and no log line
    v = Variant.make("naive", a_col=False, b_col=True, vec_a=False, vec_b=True, vec_c=False)
    assert launch.compile_for_launch(v, "sm_80", capturing=lambda: True).cache_hit


def test_one_process_compiles_in_this_process(fresh_cache):
    res = gemmlab.precompile(kernels=["naive"], layouts="cc", arch="sm_80", processes=1)
    assert res["compiled"] == 8 and len(_entries(fresh_cache)) == 8
    assert gemmlab.precompile(kernels=["naive"], layouts="cc", arch="sm_80", processes=1)["cached"] == 8


def test_a_failing_variant_is_reported_and_the_others_still_compile(fresh_cache, monkeypatch):
    real = glc._nvrtc_compile

    def flaky(kernel, source_name, source, headers, options):
        if "-DGL_VEC_C=1" in options:
            raise glc.CompileError(kernel, options, "error: injected failure")
        return real(kernel, source_name, source, headers, options)

    monkeypatch.setattr(glc, "_nvrtc_compile", flaky)  # the fork workers inherit the patch
    res = gemmlab.precompile(kernels=["naive"], layouts="rr", arch="sm_80", processes=2)
    assert res["compiled"] == 4 and len(res["errors"]) == 4
    assert all("injected failure" in e["error"] and "naive[" in e["variant"] for e in res["errors"])


# ---- the command line -----------------------------------------------------------------------
def test_gemmlab_compile_prints_a_summary_and_exits_0(fresh_cache, capsys):
    argv = ["compile", "naive", "--arch", "sm_80", "--layouts", "rr", "--jobs", "2", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sm_80: 8 variants, 8 compiled, 0 already cached, 0 failed" in out
    assert main(argv) == 0
    assert "8 variants, 0 compiled, 8 already cached" in capsys.readouterr().out


def test_gemmlab_compile_exits_1_when_a_variant_fails(fresh_cache, capsys, monkeypatch):
    def broken(kernel, source_name, source, headers, options):
        raise glc.CompileError(kernel, options, "error: injected failure")

    monkeypatch.setattr(glc, "_nvrtc_compile", broken)
    assert main(["compile", "naive", "--arch", "sm_80", "--layouts", "cc", "-j", "2", "--no-progress"]) == 1
    cap = capsys.readouterr()
    assert "8 failed" in cap.out and "FAILED naive[" in cap.err


def test_gemmlab_compile_is_listed_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "compile" in capsys.readouterr().out


# ---- the launch path ------------------------------------------------------------------------
def test_a_launch_that_compiles_says_so_in_a_log_line(fresh_cache, caplog):
    caplog.set_level(logging.WARNING, logger="gemmlab")
    v = Variant.make("naive", vec_a=False)
    ck = launch.compile_for_launch(v, "sm_80")
    assert not ck.cache_hit
    lines = [r.getMessage() for r in caplog.records if r.name == "gemmlab"]
    assert lines == [f"compiling {v.describe()} for sm_80 (not in the cache: gemmlab.precompile(...) or "
                     "`gemmlab compile` builds it ahead of time)"]
    caplog.clear()
    launch.compile_for_launch(v, "sm_80")  # memory cache
    glc.clear_memory_cache()
    assert launch.compile_for_launch(v, "sm_80").cache_hit  # disk cache
    assert [r for r in caplog.records if r.name == "gemmlab"] == []


def test_a_compile_while_the_stream_captures_a_graph_is_refused_naming_precompile(fresh_cache):
    v = Variant.make("naive", vec_b=False)
    with pytest.raises(RuntimeError, match=r"is not compiled yet and the stream is capturing a CUDA graph; "
                                           r"compile it first with gemmlab.precompile"):
        launch.compile_for_launch(v, "sm_80", capturing=lambda: True)
    assert _entries(fresh_cache) == []  # refused before NVRTC ran
    asked = []
    launch.compile_for_launch(v, "sm_80", capturing=lambda: asked.append(1) or False)
    assert asked == [1]
    # compiled now: capturing is not even asked
    launch.compile_for_launch(v, "sm_80", capturing=lambda: pytest.fail("asked while cached"))


def test_the_capture_query_gets_the_launch_stream_and_a_yes_refuses_the_compile(monkeypatch):
    seen = []
    monkeypatch.setattr(launch, "stream_capturing", lambda s, o: seen.append((s, o)) or True)

    class _V:
        def describe(self):
            return "v"

        def compile(self, arch, before_compile=None):
            before_compile()

    def capturing():  # what Plan builds, for stream 7 on device 0
        return launch.stream_capturing(7, 0)

    with pytest.raises(RuntimeError, match="capturing a CUDA graph"):
        launch.compile_for_launch(_V(), "sm_90a", capturing)
    assert seen == [(7, 0)]


# ---- on a GPU: capture a torch CUDA graph ---------------------------------------------------
@pytest.mark.gpu
def test_graph_capture_refuses_to_compile_then_works_after_precompile(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    glc.clear_memory_cache()
    M, N, K = 96, 80, 64
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    c = torch.zeros(M, N, device="cuda")
    config = {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}  # not the default
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"capturing a CUDA graph; compile it first with gemmlab.precompile"):
        with torch.cuda.stream(stream):
            with torch.cuda.graph(g, stream=stream):
                gemmlab.gemm(a, b, c, kernel="tile_2d", config=config)
    torch.cuda.synchronize()
    res = gemmlab.precompile(kernels=["tile_2d"], dtypes=["fp32"], layouts=["rr"], configs=config, processes=2)
    assert res["errors"] == [] and res["variants"] == 8
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(g, stream=stream):
            gemmlab.gemm(a, b, c, kernel="tile_2d", config=config)
    c.zero_()
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-3)
    glc.clear_memory_cache()
