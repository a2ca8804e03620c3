"""The selection model of kernel="auto" (core/selection.py) and its measurements (tune/selection.py,
``gemmlab tune auto``): the menu's configurations are ones the registry accepts and compile without
spills; the prediction is deterministic for a stored table, follows the measurements, and says
why; the tuning sample is the same on every machine. CPU only: the measuring itself runs on a GPU
(tools/gpu_suite.sh tune-auto)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gemmlab.core import dispatch, selection
from gemmlab.core.registry import get
from gemmlab.core.variant import Variant
from gemmlab.tune import selection as tsel
import stand_ins

H100 = SimpleNamespace(arch="sm_90a", name="NVIDIA H100 80GB HBM3", sm_count=132)
A100 = SimpleNamespace(arch="sm_80", name="NVIDIA A100-SXM4-80GB", sm_count=108)


def _record(shape, ms: dict, dtype="bf16", layout="rr", vec=(1, 1)):
    """A measured shape as the selection file holds it, each option's tile its own at that shape."""
    prob = stand_ins.problem(*shape, dtype)
    opts = selection.options(prob, H100)
    return {"dtype": dtype, "shape": list(shape), "layout": layout, "vec": list(vec), "cublas_ms": 1.0,
            "ms": {k: v for k, v in ms.items() if k in opts},
            "tiles": {k: selection.tile_of(opts[k]) for k in ms if k in opts},
            "rungs": {k: opts[k].rung.slug for k in ms if k in opts}}


def _doc(records, sm_count=132):
    return {"format": 1, "gpu_name": H100.name, "arch": "sm_90a", "sm_count": sm_count, "records": records}


@pytest.fixture
def shipped():
    selection.reload()
    dispatch.reload()
    yield
    selection.reload()
    dispatch.reload()


def test_every_option_the_menu_gives_is_a_configuration_its_rung_accepts():
    for dtype in ("bf16", "fp16", "fp32"):
        for (M, N, K), layout in tsel.tuning_sample(dtype, 120, 3):
            prob = stand_ins.problem(M, N, K, dtype, a_col=layout[0] == "c", b_col=layout[1] == "c")
            for name, c in selection.options(prob, H100).items():
                assert c.rung.check_config(c.config) == [], (dtype, (M, N, K), name, c.config)


def test_every_tile_the_menu_gives_compiles_without_spills():
    seen = {}
    for dtype in ("bf16", "fp32"):
        for (M, N, K), layout in tsel.tuning_sample(dtype, 60, 5):
            for c in selection.options(stand_ins.problem(M, N, K, dtype), H100).values():
                # the slice count is the launch's (one build for any split), copies are the plan's
                cfg = {k: v for k, v in c.config.items() if k != "PACK"}
                if cfg.get("SPLITK", 1) > 1 and not cfg.get("SKCLUSTER"):
                    cfg["SPLITK"] = 2
                seen.setdefault((c.rung.slug, dtype, json.dumps(cfg, sort_keys=True)), (c.rung, dtype, cfg))
    for rung, dtype, cfg in seen.values():
        k = Variant.make(rung, dtype, config=cfg).compile("sm_90a")
        assert k.spill_bytes == 0, (rung.slug, dtype, cfg, k.spill_bytes)


def test_the_chain_split_cuts_a_small_problems_k_into_a_clusters_slices_of_two_k_tiles_or_more():
    def split(M, N, K):
        cfg = selection.options(stand_ins.problem(M, N, K, "fp16"), H100)["mma_64_cluster"].config
        assert (cfg["BM"], cfg["BN"], cfg["SKCLUSTER"], cfg["PACK"]) == (64, 64, 1, 0)
        return cfg["SPLITK"]
    assert split(8, 293, 431) == 6       # 5 tiles; 431 // 64: six slices of two k tiles of 32 or more
    assert split(64, 64, 4000) == 8      # one tile: as many slices as a portable cluster holds
    assert split(1, 4127, 284) == 2      # 65 tiles: the 132 SMs take two slices each


def test_the_chain_split_option_applies_only_where_it_splits_and_clusters_exist():
    for shape in ((2, 18, 18), (64, 64, 127), (4096, 4096, 4096)):   # K of one slice; or the SMs full
        opts = selection.options(stand_ins.problem(*shape, "fp16"), H100)
        assert "mma_64" in opts and "mma_64_cluster" not in opts, shape
    opts = selection.options(stand_ins.problem(8, 293, 431, "fp16"), A100)
    assert "mma_64" in opts and "mma_64_cluster" not in opts


def test_fp32_takes_the_chain_split_on_rung_18s_32x32_tile():
    cfg = selection.options(stand_ins.problem(11, 430, 317, "fp32"), H100)["simt_32_cluster"].config
    assert (cfg["BM"], cfg["BN"], cfg["SPLITK"], cfg["SKCLUSTER"]) == (32, 32, 8, 1)   # 14 tiles, K of 19 k tiles
    assert "simt_32_cluster" not in selection.options(stand_ins.problem(4096, 4096, 4096, "fp32"), H100)


def test_the_model_picks_the_option_measured_fastest_near_the_shape():
    shapes = [(1000, 1000, 1000), (1200, 904, 1096), (800, 1104, 904), (1096, 1304, 1000)]
    doc = _doc([_record(s, {"ws": 0.050, "mma_64": 0.020, "tma": 0.040}) for s in shapes])
    c = selection.choose(stand_ins.problem(1050, 1000, 1000, "bf16"), H100, None, doc)
    assert c.rung.slug == "mma_sync" and c.config["BM"] == 64 and c.source == "model"


def test_the_prediction_is_deterministic_for_a_stored_table():
    shapes = [(64 * i, 128 * i, 96 * i) for i in range(1, 9)]
    doc = _doc([_record(s, {"ws": 0.01 * i, "mma_64": 0.012 * i, "tma": 0.011 * i}) for i, s in enumerate(shapes, 1)])
    prob = stand_ins.problem(304, 504, 400, "bf16")
    first = [(c.rung.slug, c.config, p.seconds) for c, p in selection.rank(prob, H100, None, doc)]
    again = [(c.rung.slug, c.config, p.seconds) for c, p in selection.rank(prob, H100, None, json.loads(json.dumps(doc)))]
    assert first == again and len(first) >= 3


def test_the_model_says_why_it_chose_in_the_choice_reason():
    shapes = [(1000, 1000, 1000), (1200, 904, 1096), (800, 1104, 904)]
    doc = _doc([_record(s, {"ws": 0.030, "tma": 0.040}) for s in shapes])
    c = selection.choose(stand_ins.problem(1000, 1000, 1000, "bf16"), H100, None, doc)
    assert "selection model: option 'ws' predicted" in c.reason and "next 'tma'" in c.reason


def test_the_model_needs_two_measured_shapes_within_reach():
    doc = _doc([_record((1000, 1000, 1000), {"ws": 0.03}), _record((16, 16, 16), {"ws": 0.005})])
    assert selection.choose(stand_ins.problem(1000, 1000, 1000, "bf16"), H100, None, doc) is None


def test_the_model_answers_only_for_the_gpu_it_was_measured_on():
    shapes = [(1000, 1000, 1000), (1200, 904, 1096), (800, 1104, 904)]
    doc = _doc([_record(s, {"ws": 0.03, "tma": 0.04}) for s in shapes])
    assert selection.choose(stand_ins.problem(1000, 1000, 1000, "bf16"), A100, None, doc) is None
    assert selection.choose(stand_ins.problem(1000, 1000, 1000, "bf16"), H100, None, dict(doc, sm_count=114)) is None


def test_the_thin_rung_is_predicted_only_from_shapes_measured_with_the_same_16_byte_access():
    shapes = [(6, 4096, 4096), (8, 4000, 4096), (4, 4200, 4096)]
    unaligned = stand_ins.problem(6, 4094, 4096, "bf16")       # B's rows of 4094 elements
    assert not unaligned.kernel_view().vec_b and "thin" in selection.options(unaligned, H100)
    aligned_only = _doc([_record(s, {"ws": 0.05, "thin": 0.001}) for s in shapes])
    assert "thin" not in {p.option for _, p in selection.rank(unaligned, H100, None, aligned_only)}
    both = _doc(aligned_only["records"] + [_record(s, {"ws": 0.05, "thin": 0.001}, vec=(1, 0)) for s in shapes])
    assert selection.choose(unaligned, H100, None, both).rung.slug == "decode"


def test_fp16_takes_bf16_measurements_where_it_has_none():
    shapes = [(1000, 1000, 1000), (1200, 904, 1096), (800, 1104, 904)]
    doc = _doc([_record(s, {"ws": 0.03, "mma_64": 0.01}) for s in shapes])
    assert selection.choose(stand_ins.problem(1000, 1000, 1000, "fp16"), H100, None, doc).rung.slug == "mma_sync"


def test_tf32_has_no_menu_and_keeps_the_rule():
    assert selection.family("fp32", "tf32") is None and selection.family("fp32", None) == "fp32"
    assert selection.options(stand_ins.problem(100, 100, 100, "fp32"), H100, "tf32") == {}


def test_auto_keeps_the_copies_a_model_option_was_measured_with(shipped):
    # rung 17's options never copy: dispatch's packing estimate must not turn it on afterwards
    prob = stand_ins.problem(4857, 20, 19, "bf16")      # A unaligned (K=19): the estimate alone might copy
    c = dispatch.decide(prob, "auto", None, H100)
    if c.source == "model" and c.rung.slug == "mma_sync":
        assert c.config["PACK"] == 0
    ranked = selection.rank(prob, H100)
    assert all(ch.config.get("PACK", 0) == 0 for ch, _ in ranked if ch.rung.slug == "mma_sync")


def test_auto_asks_the_model_for_a_shape_no_table_holds(shipped):
    c = dispatch.decide(stand_ins.problem(777, 3001, 515, "bf16"), "auto", None, H100)
    assert c.source == "model" and "selection model" in c.reason


def test_the_shipped_tables_answer_before_the_model_at_the_shapes_they_were_tuned_on(shipped):
    c = dispatch.decide(stand_ins.problem(127, 4097, 1023, "fp32"), "auto", None, H100)
    assert c.source == "defaults"


H200 = SimpleNamespace(arch="sm_90a", name="NVIDIA H200", sm_count=132)


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """A data folder of one architecture's selection files: its own (an H100's) and an H200's,
    which ask for different options at the same shape."""
    base = tmp_path / "selection_sm90.json.gz"
    rec = lambda fast: _record((1000, 1000, 1000), {"mma_64": 1.0 if fast == "mma_64" else 9.0,
                                                    "ws": 1.0 if fast == "ws" else 9.0})
    selection.store(base, _doc([rec("ws"), dict(rec("ws"), shape=[1100, 1000, 1000])]))
    selection.store(tmp_path / "selection_sm90_h200.json.gz",
                    dict(_doc([rec("mma_64"), dict(rec("mma_64"), shape=[1100, 1000, 1000])]), gpu_name=H200.name))
    monkeypatch.setattr(selection, "table_path", lambda arch: base)
    selection.reload()
    yield
    selection.reload()


def test_a_gpu_takes_the_measurements_made_on_a_gpu_of_its_name(tables):
    c = selection.choose(stand_ins.problem(1050, 1000, 1000, "bf16"), H200)
    assert c.rung.slug == "mma_sync" and "measured on NVIDIA H200" in c.reason


def test_a_gpu_without_measurements_of_its_own_takes_the_architectures(tables):
    c = selection.choose(stand_ins.problem(1050, 1000, 1000, "bf16"), H100)
    assert c.rung.slug == "wgmma_ws" and f"measured on {H100.name}" in c.reason
    other = SimpleNamespace(arch="sm_90a", name="NVIDIA H100 NVL", sm_count=132)
    assert selection.choose(stand_ins.problem(1050, 1000, 1000, "bf16"), other).rung.slug == "wgmma_ws"


def test_the_shipped_h200_measurements_come_from_an_h200_and_cover_each_dtype():
    doc = selection.load(selection.table_path("sm_90a").with_name("selection_sm90_h200.json.gz"))
    assert doc["gpu_name"] == H200.name and doc["sm_count"] == 132
    counts = {dt: sum(r["dtype"] == dt for r in doc["records"]) for dt in ("bf16", "fp16", "fp32")}
    assert min(counts.values()) >= 300, counts
    assert all(run.get("git_commit") for run in doc["runs"])


def test_the_shipped_measurements_come_from_an_h100_and_cover_each_dtype():
    doc = selection.load(selection.table_path("sm_90a"))
    assert doc["gpu_name"].startswith("NVIDIA H100") and doc["sm_count"] == 132
    counts = {dt: sum(r["dtype"] == dt for r in doc["records"]) for dt in ("bf16", "fp16", "fp32")}
    assert min(counts.values()) >= 300, counts
    assert all(run.get("git_commit") for run in doc["runs"])


def test_leave_one_out_on_the_shipped_measurements_picks_close_to_the_best_measured():
    doc = selection.load(selection.table_path("sm_90a"))
    for dt in ("bf16", "fp32"):
        s = tsel.summary(tsel.replay([r for r in doc["records"] if r["dtype"] == dt], doc["sm_count"]))
        assert s["shapes"] > 200 and s["geomean_regret"] < 1.08, (dt, s)


def test_the_tuning_sample_is_the_same_for_the_same_seed_and_half_aligned():
    a, b = tsel.tuning_sample("bf16", 40, 0), tsel.tuning_sample("bf16", 40, 0)
    assert a == b and a != tsel.tuning_sample("bf16", 40, 1)
    rand = a[:40]
    assert all(s[1] % 8 == 0 and s[2] % 8 == 0 for s, _ in rand[1::2])
    assert {lay for _, lay in rand} == {"rr", "rc"}
    assert all(lay == "rr" for _, lay in a[40:]) and len(a) > 40     # then the dtype's suites


def test_merge_replaces_a_shape_measured_again_and_keeps_the_others():
    old = {**_doc([_record((100, 100, 100), {"ws": 1.0}), _record((200, 200, 200), {"ws": 1.0})]), "runs": [{"n": 1}]}
    new = {**_doc([_record((100, 100, 100), {"ws": 2.0})]), "runs": [{"n": 2}]}
    m = tsel.merge(old, new)
    assert sorted((tuple(r["shape"]), r["ms"]["ws"]) for r in m["records"]) == [((100, 100, 100), 2.0), ((200, 200, 200), 1.0)]
    assert m["runs"] == [{"n": 1}, {"n": 2}]
    assert tsel.merge(dict(old, gpu_name="other"), new)["records"] == new["records"]


def test_a_selection_file_stored_gzipped_reads_back_the_same_and_the_same_bytes(tmp_path):
    doc = _doc([_record((100, 100, 100), {"ws": 1.0})])
    one, two = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    selection.store(one, doc)
    selection.store(two, doc)
    assert selection.load(one) == doc and one.read_bytes() == two.read_bytes()


def test_tune_auto_replays_a_selection_file_without_a_gpu(capsys):
    from gemmlab.cli.app import main

    assert main(["tune", "auto", "--replay", str(selection.table_path("sm_90a")), "--dtype", "fp32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fp32: ") and "leave-one-out" in out and "best measured option" in out


def test_tune_auto_refuses_a_malformed_sample(capsys):
    from gemmlab.cli.app import main

    assert main(["tune", "auto", "--sample", "ten@0"]) != 0
    assert "--sample: give N@SEED" in capsys.readouterr().err


# ---- GPU: every tile of the menu computes correctly ---------------------------------------------
def _menu_tiles(dtype: str):
    """The distinct builds the menu gives on a small tuning sample: configurations alike but for
    their slice count share a kernel (the split's count is the launch's), one each."""
    seen = {}
    for (M, N, K), layout in tsel.tuning_sample(dtype, 40, 11, suites=False):
        for name, c in selection.options(stand_ins.problem(M, N, K, dtype), H100).items():
            build = dict(c.config)
            if build.get("SPLITK", 1) > 1 and not build.get("SKCLUSTER"):
                build["SPLITK"] = 2
            seen.setdefault((c.rung.slug, json.dumps(build, sort_keys=True)), (name, c))
    return list(seen.values())


MENU_BUILDS = [(dtype, name, c) for dtype in ("bf16", "fp32") for name, c in _menu_tiles(dtype)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,name,choice", MENU_BUILDS,
                         ids=[f"{d}-{n}-{c.rung.slug}-{i}" for i, (d, n, c) in enumerate(MENU_BUILDS)])
def test_every_configuration_of_the_menu_is_correct_on_odd_shapes(dtype, name, choice):
    from gemmlab.measure.verify import verify

    cfg = dict(choice.config)
    r = verify(choice.rung.slug, 77, 45, 263, dtype, a_col=True, b_col=True, c_col=True, alpha=1.5, beta=-0.5,
               config=cfg)
    assert r.ok, (name, r.message())
    r = verify(choice.rung.slug, 131, 67, 45, dtype, config=cfg)   # beta 0: C poisoned with NaN first
    assert r.ok, (name, r.message())


def test_the_cost_model_charges_a_rung_its_unaligned_speed_where_it_reads_such_an_operand_itself():
    """An option copies by an estimate, so its neighbours ran it copied at some shapes and not at
    others: the estimate of a tile without copies on an operand lacking 16-byte access is its
    rung's unaligned speed (rules.UNALIGNED_SLOWDOWN), the same tile with copies its aligned one."""
    from gemmlab.core import rules
    shape = (4093, 4093, 4093)          # compute-bound: the work term is the estimate
    for slug in ("wgmma_tma", "wgmma_ws", "mma_sync"):
        aligned = selection.estimate(slug, [128, 128, 1, 0, 0], shape, (True, True), 2, 132)
        reads = selection.estimate(slug, [128, 128, 1, 0, 0], shape, (False, True), 2, 132)
        copied = selection.estimate(slug, [128, 128, 1, 1, 0], shape, (False, True), 2, 132)
        fixed = selection.LAUNCH_S
        assert (reads - fixed) / (aligned - fixed) == pytest.approx(rules.UNALIGNED_SLOWDOWN[slug])
        assert copied < reads and copied > aligned   # the copies' bytes and launch, at the aligned speed
    # a rung without a measured slowdown (rung 24 reads by pairs; its options see only shapes of
    # the same access) keeps its speed
    assert selection.estimate("decode", [8, 64, 1, 0, 0], (8, 4096, 4096), (False, False), 2, 132) == \
        selection.estimate("decode", [8, 64, 1, 0, 0], (8, 4096, 4096), (True, True), 2, 132)


def _replay_files(tmp_path):
    """A selection file where mma_64 is fastest everywhere, and a held-out run on other shapes
    where ws is: the model, predicting from the file alone, picks mma_64 there."""
    train = _doc([_record(s, {"ws": 0.050, "mma_64": 0.020, "tma": 0.040})
                  for s in ((512, 512, 512), (640, 512, 768), (768, 640, 512), (1024, 768, 640))])
    held = _doc([_record(s, {"ws": 0.010, "mma_64": 0.020, "tma": 0.040}) for s in ((600, 600, 600), (700, 560, 620))])
    for doc, name in ((train, "sel.json"), (held, "held.json")):
        (tmp_path / name).write_text(json.dumps(doc))
    return tmp_path / "sel.json", tmp_path / "held.json"


def test_replay_prints_the_leave_one_out_of_a_selection_file_without_a_gpu(tmp_path, capsys):
    from gemmlab.cli import main
    sel, _ = _replay_files(tmp_path)
    assert main(["tune", "auto", "--replay", str(sel)]) == 0
    out = capsys.readouterr().out
    # each shape predicted from the other three; cuBLAS's 1 ms against the best option's 20 us
    assert "bf16: 4 shapes, leave-one-out: the model's pick" in out and "the best measured option 50.000x" in out


def test_replay_with_a_held_out_run_chooses_for_its_shapes_from_the_selection_file_alone(tmp_path, capsys):
    from gemmlab.cli import main
    sel, held = _replay_files(tmp_path)
    assert main(["tune", "auto", "--replay", str(sel), "--heldout", str(held)]) == 0
    out = capsys.readouterr().out
    # the file says mma_64; the held-out run measured ws twice as fast: the pick is mma_64 (regret 2)
    assert "bf16: 2 shapes, held out (predicted from the selection file alone)" in out and "regret 2.000" in out
    assert "pick mma_64" in out and "best ws" in out


def test_heldout_without_replay_is_a_usage_error(tmp_path):
    from gemmlab.cli import main
    _, held = _replay_files(tmp_path)
    assert main(["tune", "auto", "--heldout", str(held)]) == 2      # a usage error, as argparse's
