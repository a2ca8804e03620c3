"""kernel="auto" picks a rung and its configuration (core/dispatch.py): from the tuner's export of
the tuning database for the nearest tuned shape of this GPU, else from the shipped defaults of the
architecture, else by the rule (top rung, a preset for skinny problems, split-K when the output
tiles leave more than half of the SMs idle, the preset of half the tile's width where it fills the
SMs better). CPU only: stand-in problems and devices."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from gemmlab.core import dispatch
from gemmlab.core.registry import get
from stand_ins import problem

H100 = SimpleNamespace(arch="sm_90a", name="NVIDIA H100 80GB HBM3", sm_count=132)
A100 = SimpleNamespace(arch="sm_80", name="NVIDIA A100-SXM4-80GB", sm_count=108)


def entry(shape, rung="async_simt", dtype="fp32", layout="rr", gpu="NVIDIA H100 80GB HBM3", **cfg):
    return {"dtype": dtype, "shape": list(shape), "layout": layout, "rung": rung, "config": cfg,
            "gpu_name": gpu, "arch": "sm_90a", "tflops": 40.0}


@pytest.fixture
def tuned(tmp_path, monkeypatch):
    """Write a tuned export into a fresh cache folder; returns the writer."""
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    dispatch.reload()

    def write(*entries):
        (tmp_path / dispatch.TUNED_FILE).write_text(json.dumps({"format": 1, "entries": list(entries)}))
        dispatch.reload()
    yield write
    dispatch.reload()


@pytest.fixture
def no_defaults(tuned, rule_only):
    """No shipped table either (nor the selection model's measurements, conftest's rule_only): the
    rule answers (the shipped bf16 entries also stand in for fp16)."""


# ---- named -------------------------------------------------------------------------------------
def test_a_named_rung_runs_with_the_configuration_given(tuned):
    c = dispatch.decide(problem(64, 64, 64), "warp_tiling", {"BM": 64}, H100)
    assert (c.rung.slug, c.config, c.source) == ("warp_tiling", {"BM": 64}, "named")


# ---- tuned ---------------------------------------------------------------------------------------
def test_auto_takes_the_nearest_tuned_shape_of_this_gpu(tuned):
    tuned(entry((4096, 4096, 4096), BM=128, BN=128, WM=64, WN=32, TM=8, TN=8),
          entry((256, 256, 65536), BM=64, BN=64, BK=16, WM=32, WN=32, TM=4, TN=8, STAGES=3, SPLITK=8),
          entry((250, 260, 60000), gpu="another GPU", SPLITK=2))
    c = dispatch.decide(problem(250, 260, 60000), "auto", None, H100)
    assert c.source == "tuned" and c.rung.slug == "async_simt"
    assert c.config["SPLITK"] == 8 and c.config["BM"] == 64
    assert "nearest tuned shape 256x256x65536" in c.reason


def test_the_same_layout_class_is_preferred_over_a_nearer_shape_of_another(tuned):
    tuned(entry((1024, 1024, 1024), layout="cc", SPLITK=2), entry((1500, 1024, 1024), layout="rr", SPLITK=4))
    assert dispatch.decide(problem(1024, 1024, 1024), "auto", None, H100).config["SPLITK"] == 4
    assert dispatch.decide(problem(1024, 1024, 1024, a_col=True, b_col=True), "auto", None, H100).config["SPLITK"] == 2


def test_a_tuned_shape_farther_than_the_limit_is_not_used(tuned):
    tuned(entry((4096, 4096, 4096), SPLITK=2))
    assert dispatch.distance((4096, 4096, 4096), (2048, 4096, 4096)) == pytest.approx(1.0)
    assert dispatch.decide(problem(2048, 4096, 4096), "auto", None, H100).source == "tuned"
    assert dispatch.decide(problem(1000, 1000, 1000), "auto", None, H100).source == "defaults"


def test_a_tuned_entry_the_registry_refuses_or_this_gpu_cannot_run_is_skipped(tuned):
    tuned(entry((512, 512, 512), BM=100), entry((512, 512, 512), rung="no_such_rung"))
    assert dispatch.decide(problem(512, 512, 512), "auto", None, H100).source != "tuned"
    tuned(entry((512, 512, 512), SPLITK=2))
    assert dispatch.decide(problem(512, 512, 512), "auto", None, A100).source == "rule"   # sm_90a entries only


def test_a_column_major_c_is_looked_up_in_the_kernels_view(tuned):
    tuned(entry((4096, 16, 4096), BM=64, BN=64, BK=16, WM=32, WN=32, TM=4, TN=8, STAGES=3, SPLITK=2))
    c = dispatch.decide(problem(16, 4096, 4096, c_col=True), "auto", None, H100)   # C^T = B^T A^T: 4096 x 16
    assert c.source == "tuned" and c.config["SPLITK"] == 2


def test_a_tf32_entry_serves_tf32_calls_and_an_exact_fp32_entry_serves_exact_ones(tuned):
    """Entries are filed under the tuner's study dtype: "fp32:tf32" for a tf32 study. A tf32 call
    takes its own precision's entry and never an exact-FP32 one (rung 18 is no tf32 rung anyway),
    and an exact call never a tf32 entry."""
    tuned(entry((4096, 4096, 4096), rung="wgmma_tf32", dtype="fp32:tf32", EPI_TMA=0),
          entry((4096, 4096, 4096), SPLITK=2))
    c = dispatch.decide(problem(4096, 4096, 4096), "auto", None, H100, precision="tf32")
    assert (c.source, c.rung.slug, c.config["EPI_TMA"]) == ("tuned", "wgmma_tf32", 0)
    exact = dispatch.decide(problem(4096, 4096, 4096), "auto", None, H100)
    assert (exact.source, exact.rung.slug, exact.config["SPLITK"]) == ("tuned", "async_simt", 2)


def test_an_entry_filed_under_the_bare_dtype_serves_no_tf32_call(tuned, no_defaults):
    tuned(entry((4096, 4096, 4096), rung="wgmma_tf32", dtype="fp32", EPI_TMA=0))
    assert dispatch.decide(problem(4096, 4096, 4096), "auto", None, H100, precision="tf32").source == "rule"


def test_a_3xtf32_call_takes_no_tf32_entry(tuned, no_defaults):
    tuned(entry((4096, 4096, 4096), rung="wgmma_tf32", dtype="fp32:tf32", BN=128, STAGES=2))
    assert dispatch.decide(problem(4096, 4096, 4096), "auto", None, H100, precision="3xtf32").source == "rule"


MACHINE = {"gpu_name": H100.name, "arch": "sm_90a", "driver": "-", "nvrtc": "-", "gemmlab": "-"}


def _replay_tune(tmp_path, rung, shapes, budget, seed) -> tuple[str, list[dict]]:
    """Tune ``rung`` at ``shapes`` on a replayed landscape (the first candidates fastest) into a
    SQLite database; (its URL, the runs' summaries)."""
    pytest.importorskip("optuna")
    from gemmlab.tune.evaluate import ReplayFactory
    from gemmlab.tune.runner import TuneSpec, tune
    from gemmlab.tune.space import Space

    sp = Space.of(rung, "sm_90a")
    table = {sp.key(c): {"status": "ok", "ms": 1.0 + 0.001 * i} for i, c in enumerate(sp.candidates())}
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    return url, [tune(TuneSpec(rung, shape, strategy="random", budget=budget, seed=seed, storage=url),
                      ReplayFactory(table, machine=MACHINE)) for shape in shapes]


def test_the_tuners_export_of_a_database_is_what_auto_reads(tuned, tmp_path):
    url, (s,) = _replay_tune(tmp_path, "async_simt", [(256, 256, 65536)], 6, 1)
    from gemmlab.tune.export import export_tuned

    export_tuned(url)
    c = dispatch.decide(problem(256, 256, 65536), "auto", None, H100)
    assert c.source == "tuned" and c.config == s["best"]["config"]


def test_emit_defaults_merges_the_best_tuned_config_per_suite_shape_into_a_table(tuned, tmp_path):
    url, _ = _replay_tune(tmp_path, "tile_1d", [(64, 64, 64), (128, 128, 128)], 3, 2)
    from gemmlab.tune.export import emit_defaults, read_table

    out = tmp_path / "defaults.json"
    out.write_text(json.dumps({"format": 1, "entries": [entry((64, 64, 64), dtype="fp16", rung="mma_sync"),
                                                         entry((64, 64, 64), rung="tile_2d")]}))
    doc = emit_defaults(out, MACHINE, "fp32", [(64, 64, 64), (128, 128, 128)], url)
    got = {(e["dtype"], e["rung"], tuple(e["shape"])) for e in doc["entries"]}
    assert got == {("fp16", "mma_sync", (64, 64, 64)), ("fp32", "tile_1d", (64, 64, 64)),
                   ("fp32", "tile_1d", (128, 128, 128))}    # the fp32 64^3 entry replaced, fp16's kept
    assert "emit-defaults" in doc["source"] and read_table(out) == doc


def test_tune_cli_emit_defaults_files_a_tf32_tune_under_its_precision(tuned, tmp_path, monkeypatch):
    """`gemmlab tune --precision tf32 --emit-defaults FILE` merges the run's best into FILE under
    "fp32:tf32", the dtype its study has (with the bare "fp32" it merged nothing); the GPU run is
    replayed."""
    pytest.importorskip("optuna")
    from gemmlab.cli import main
    from gemmlab.cli import tune as cli_tune
    from gemmlab.core import driver
    from gemmlab.tune.evaluate import ReplayFactory
    from gemmlab.tune.runner import tune
    from gemmlab.tune.space import Space

    sp = Space.of("wgmma_tf32", "sm_90a", precision="tf32")
    table = {sp.key(c): {"status": "ok", "ms": 1.0 + 0.001 * i} for i, c in enumerate(sp.candidates())}
    monkeypatch.setattr(driver, "gpu_available", lambda: True)
    monkeypatch.setattr(cli_tune, "_tune_one", lambda args, spec, devices: tune(spec, ReplayFactory(table, machine=MACHINE)))
    out = tmp_path / "defaults.json"
    rc = main(["tune", "wgmma_tf32", "--precision", "tf32", "--shape", "256x256x256", "--budget", "2", "--devices", "0",
               "--storage", f"sqlite:///{tmp_path / 'tune.db'}", "--emit-defaults", str(out), "--no-progress"])
    entries = json.loads(out.read_text())["entries"]
    assert rc == 0 and [(e["dtype"], e["rung"], tuple(e["shape"])) for e in entries] == [
        ("fp32:tf32", "wgmma_tf32", (256, 256, 256))]


# ---- shipped defaults -------------------------------------------------------------------------
def test_every_shipped_default_names_a_rung_and_a_configuration_the_registry_accepts():
    for path in sorted(dispatch.DATA_DIR.glob("defaults_sm*.json")):
        doc = json.loads(path.read_text())
        assert doc["source"] and doc["entries"], path
        for e in doc["entries"]:
            dtype, _, precision = e["dtype"].partition(":")      # "fp32:tf32": a tf32 entry (precision.label)
            rung = get(e["rung"])
            rung.config(e["config"], rung.precision_for(dtype, precision or None))
            assert e["source"] and len(e["shape"]) == 3 and dtype in rung.dtypes
            assert not precision or precision in rung.precisions, e


def test_the_h100_runs_tf32_at_8192_cubed_without_the_tma_store_from_its_shipped_table(tuned):
    """The shipped tf32 entry at 8192^3 (EPI_TMA=0: the TMA store's power draw costs the clock there),
    the rule's default (EPI_TMA=1) at 4096^3, two factors of 2 away."""
    big = dispatch.decide(problem(8192, 8192, 8192), "auto", None, H100, precision="tf32")
    assert (big.source, big.rung.slug, big.config["EPI_TMA"]) == ("defaults", "wgmma_tf32", 0)
    small = dispatch.decide(problem(4096, 4096, 4096), "auto", None, H100, precision="tf32")
    assert (small.source, small.config["EPI_TMA"]) == ("rule", 1)


def test_without_a_tuned_export_the_h100_takes_the_shipped_defaults(tuned):
    c = dispatch.decide(problem(256, 256, 65536), "auto", None, H100)
    assert c.source == "defaults" and c.rung.slug == "async_simt" and c.config["SPLITK"] > 1


def test_no_tuning_database_means_no_optional_import_at_call_time(tmp_path):
    code = ("import sys; from types import SimpleNamespace as S; from gemmlab.core import dispatch; "
            "from tests.test_dispatch import problem; "
            "c = dispatch.decide(problem(300, 300, 300), 'auto', None, S(arch='sm_90a', name='x', sm_count=132)); "
            "print(c.source, 'optuna' in sys.modules, 'sqlite3' in sys.modules, 'sqlalchemy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(_root()),
                         env=_env(tmp_path), check=True).stdout.split()
    assert out[1:] == ["False", "False", "False"] and out[0] in ("defaults", "model", "rule")


def _root():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent


def _env(tmp_path):
    import os

    return {**os.environ, "GEMMLAB_CACHE_DIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}


# ---- the rule ------------------------------------------------------------------------------------
def test_the_rule_splits_k_until_the_tiles_fill_the_sms():
    r = get("async_simt")                                   # 128 x 256 tiles
    cfg, why = dispatch.rule_config(r, 256, 256, 65536, 132)   # 2 tiles: 66 wanted, at most 64
    assert cfg["SPLITK"] == 64 and "split-K 64: 2 output tiles for 132 SMs" in why
    assert dispatch.rule_config(r, 1024, 1024, 1024, 132)[0]["SPLITK"] == 4        # 32 tiles, 132 // 32
    assert dispatch.rule_config(r, 1024, 1024, 600, 132)[0]["SPLITK"] == 2         # slices of >= 256 along K
    assert dispatch.rule_config(r, 2048, 2048, 65536, 132)[0].get("SPLITK", 1) == 1  # 128 tiles: more than SMs/2
    assert dispatch.rule_config(get("warp_tiling"), 128, 128, 8192, 108)[0]["SPLITK"] == 32


def test_the_rule_takes_a_preset_when_the_default_tile_pads_a_skinny_problem():
    cfg, why = dispatch.rule_config(get("async_simt"), 16, 4096, 4096, 132)
    assert (cfg["BM"], cfg["BN"]) == (32, 128) and "preset 'skinny'" in why and cfg["SPLITK"] == 4
    cfg, _ = dispatch.rule_config(get("async_simt"), 4096, 4096, 4096, 132)
    assert cfg == get("async_simt").config()


def test_the_rule_splits_k_inside_rung_19_where_its_tiles_leave_the_sms_idle(no_defaults):
    for shape, split in (((128, 4096, 4096), 8), ((128, 4096, 14336), 8), ((256, 256, 65536), 64)):
        c = dispatch.decide(problem(*shape, "fp16"), "auto", None, H100)   # 16, 16 and 2 tiles of 128x256
        assert c.source == "rule" and c.rung.slug == "wgmma_tma", shape
        assert (c.config["BN"], c.config["SPLITK"]) == (256, split) and f"split-K {split}" in c.reason, shape
        assert "wgmma_ws cannot split K" in c.reason
    for shape in ((4096, 4096, 4096), (1024, 4096, 4096), (8192, 4096, 14336)):   # a wave of tiles or more
        c = dispatch.decide(problem(*shape, "fp16"), "auto", None, H100)
        assert c.rung.slug == "wgmma_ws" and c.config["BN"] == 256, shape


def test_the_rule_takes_the_half_width_tile_where_it_fills_the_sms_better(no_defaults):
    # rung 19 at 1024x6144: 192 tiles of 128x256 in two waves, the second half empty; 384 of
    # 128x128 in three
    cfg, why = dispatch.rule_config(get("wgmma_tma"), 1024, 6144, 4096, 132)
    assert (cfg["BM"], cfg["BN"], cfg["SPLITK"]) == (128, 128, 1) and "preset '128x128'" in why
    # rung 21 (no split-K) keeps its tile there: its half tile was never measured faster
    c = dispatch.decide(problem(1024, 6144, 4096, "fp16"), "auto", None, H100)
    assert c.source == "rule" and (c.rung.slug, c.config["BM"], c.config["BN"]) == ("wgmma_ws", 128, 256)
    # 128x14336: 56 tiles of 128x256 leave rung 21 more than half of the SMs idle; rung 19's 112
    # tiles of 128x128 need no split where its 128x256 would need one
    c = dispatch.decide(problem(128, 14336, 4096, "fp16"), "auto", None, H100)
    assert (c.rung.slug, c.config["BM"], c.config["BN"], c.config["SPLITK"]) == ("wgmma_tma", 128, 128, 1)
    assert "preset '128x128'" in c.reason
    # as many blocks either way, both split: the default tile (half the FP32 partials per block)
    assert dispatch.rule_config(get("wgmma_tma"), 128, 4096, 4096, 132)[0]["BN"] == 256


def test_the_rule_leaves_a_top_rung_without_split_k_only_when_half_the_sms_would_idle(tuned):
    for shape in ((128, 4096, 4096), (256, 256, 65536), (256, 256, 4096)):      # 16, 2 and 2 tiles
        assert dispatch.decide(problem(*shape, "bf16"), "auto", None, H100).rung.slug == "wgmma_tma", shape
    for shape in ((4096, 4096, 4096), (512, 8192, 4096)):                       # 512 and 128 tiles
        assert dispatch.decide(problem(*shape, "bf16"), "auto", None, H100).rung.slug == "wgmma_ws", shape


def test_the_rule_clusters_only_row_tiles_that_pair_up():
    r = get("wgmma_ws")                                                       # 128 x 256, clusters of 2
    assert dispatch.rule_config(r, 4096, 4096, 4096, 132)[0] == r.config()   # 32 row tiles
    cfg, why = dispatch.rule_config(r, 2944, 4096, 4096, 132)                 # 23 row tiles
    assert cfg == dict(r.config(), CLUSTER=1) and "23 row tiles do not pair up" in why
    assert dispatch.rule_config(r, 16, 8192, 4096, 132)[0]["CLUSTER"] == 1


def test_without_any_table_auto_follows_the_rule(tuned):
    c = dispatch.decide(problem(256, 256, 65536), "auto", None, A100)      # no defaults_sm80.json
    assert c.source == "rule" and c.rung.slug == "async_simt" and c.config["SPLITK"] == 54


def test_dispatch_logs_each_choice_when_asked(tuned, monkeypatch, caplog):
    monkeypatch.setattr(dispatch, "LOG_DISPATCH", True)
    with caplog.at_level("WARNING", logger="gemmlab"):
        dispatch.decide(problem(256, 256, 65536), "auto", None, A100)
    assert "gemmlab dispatch: fp32 256x256x65536 -> async_simt" in caplog.text and "(rule:" in caplog.text


def test_the_shipped_bf16_entries_answer_the_small_m_llm_shapes_with_their_tuned_tile(tuned):
    c = dispatch.decide(problem(128, 4096, 4096, "bf16"), "auto", None, H100)
    assert c.source == "defaults" and c.rung.slug == "wgmma_tma"
    assert (c.config["BM"], c.config["BN"], c.config.get("SPLITK", 1)) == (64, 64, 1)   # no split: 128 tiles


@pytest.mark.parametrize("precision", [None, "fp16"])
def test_an_fp16_problem_takes_a_bf16_entry_where_it_has_none_of_its_own_and_says_so(tuned, precision):
    c = dispatch.decide(problem(128, 4096, 4096, "fp16"), "auto", None, H100, precision)
    assert c.source == "defaults" and c.rung.slug == "wgmma_tma" and (c.config["BM"], c.config["BN"]) == (64, 64)
    assert "a bf16 entry standing in for fp16" in c.reason


def test_an_entry_of_the_problems_own_dtype_wins_over_its_stand_in(tuned):
    tuned(entry((128, 4096, 4096), "wgmma_tma", "bf16", BM=128, BN=128, BK=64, WM=64, STAGES=4),
          entry((128, 4096, 4096), "wgmma_tma", "fp16", BM=64, BN=128, BK=64, WM=64, STAGES=4))
    c = dispatch.decide(problem(128, 4096, 4096, "fp16"), "auto", None, H100)
    assert (c.source, c.config["BM"], c.config["BN"]) == ("tuned", 64, 128) and "standing in" not in c.reason


def test_fp32_has_no_stand_in_dtype():
    from gemmlab.core import dtypes

    assert dtypes.get("fp32").stand_in is None
    assert {dtypes.get("fp16").stand_in, dtypes.get("bf16").stand_in} == {"bf16", "fp16"}


def test_a_thin_rungs_entry_serves_no_problem_wider_than_its_shape_past_the_thin_limit():
    """A thin tile re-reads the big operand once per extra tile row or column: the entry of
    4096x64x4096 does not serve 4096x128x4096; the one of 4096x16x4096 still serves 4096x24x4096
    (within THIN_MAX = 32, measured 0.98x cuBLAS)."""
    from gemmlab.core.registry import for_dtype

    allowed = {r.slug: r for r in for_dtype("fp32", "sm_90a")}
    thin64 = entry((4096, 64, 4096), rung="thin", BM=32, BN=16, BK=128)
    thin16 = entry((4096, 16, 4096), rung="thin", BM=32, BN=16, BK=256)
    simt = entry((4096, 256, 4096))
    assert dispatch.nearest([thin64], "fp32", "rr", (4096, 32, 4096), allowed)[0] is thin64
    assert dispatch.nearest([thin16], "fp32", "rr", (4096, 24, 4096), allowed)[0] is thin16
    assert dispatch.nearest([thin64], "fp32", "rr", (4096, 128, 4096), allowed) is None
    assert dispatch.nearest([thin64, simt], "fp32", "rr", (4096, 128, 4096), allowed)[0] is simt
    assert dispatch.nearest([thin16], "fp32", "rr", (4096, 48, 4096), allowed) is None


def test_a_thin_problem_takes_no_wide_problems_entry():
    """The other way round: 4096x32x4096 (thin side <= THIN_MAX) is not served by 4096x48x4096's
    wide-rung tile (0.74x cuBLAS on the H100) but by the thin rung's entry (1.04x) or the rule."""
    from gemmlab.core.registry import for_dtype

    allowed = {r.slug: r for r in for_dtype("fp32", "sm_90a")}
    wide48 = entry((4096, 48, 4096), BM=64, BN=64, BK=16, WM=32, WN=32, TM=4, TN=8, STAGES=4, SPLITK=4, SKCLUSTER=1)
    thin16 = entry((4096, 16, 4096), rung="thin", BM=32, BN=16, BK=256)
    assert dispatch.nearest([wide48, thin16], "fp32", "rr", (4096, 32, 4096), allowed)[0] is thin16
    assert dispatch.nearest([wide48], "fp32", "rr", (4096, 32, 4096), allowed) is None
    assert dispatch.nearest([wide48, thin16], "fp32", "rr", (4096, 40, 4096), allowed)[0] is wide48


def test_the_rule_tiles_the_transposed_problem_rung_22_computes_for_row_major_a_and_b(no_defaults):
    """tf32 on row-major A and B: rung 22 computes C^T = B^T A^T (14336 x 128 here), so the rule
    pads and clusters that problem, not the view's 128 x 14336."""
    c = dispatch.decide(problem(128, 14336, 4096), "auto", None, H100, precision="tf32")
    assert c.rung.slug == "wgmma_tf32" and "transposed problem 14336x128" in c.reason
    assert c.config["BN"] == 128                     # a 256-wide tile would pad the 128 columns twice
    k = dispatch.decide(problem(128, 14336, 4096, b_col=True), "auto", None, H100, precision="tf32")
    assert "transposed" not in k.reason              # K-major B: no transposition


def test_a_stand_in_entry_at_the_shape_wins_over_a_farther_entry_of_the_problems_own_dtype(tuned):
    """fp16 at 1024x6144x4096: bf16's entry for that shape, not fp16's own at 1024x4096x4096 (which
    ran it at 0.85x cuBLAS on the H100 where the bf16 entry's tile runs at 1.01x)."""
    tuned(entry((1024, 6144, 4096), "wgmma_tma", "bf16", BM=128, BN=128, BK=64, WM=64, STAGES=4),
          entry((1024, 4096, 4096), "wgmma_tma", "fp16", BM=64, BN=128, BK=64, WM=64, STAGES=4))
    c = dispatch.decide(problem(1024, 6144, 4096, "fp16"), "auto", None, H100)
    assert (c.config["BM"], c.config["BN"]) == (128, 128) and "a bf16 entry standing in for fp16" in c.reason
    c = dispatch.decide(problem(1024, 4096, 4096, "fp16"), "auto", None, H100)
    assert (c.config["BM"], c.config["BN"]) == (64, 128) and "standing in" not in c.reason
