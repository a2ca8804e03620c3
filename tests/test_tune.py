"""The tuner on the CPU: strategies, pruning, persistence, resume after an interruption or a crash,
failure recording, the 3x-slower rule and worker processes sharing one SQLite study -- the whole
``gemmlab.tune`` with a replayed landscape in place of the GPU (``ReplayEvaluator``)."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from gemmlab.core.registry import RUNGS, get  # noqa: E402
from gemmlab.tune import store  # noqa: E402
from gemmlab.tune.evaluate import Outcome, ReplayEvaluator, ReplayFactory  # noqa: E402
from gemmlab.tune.runner import TuneSpec, tune  # noqa: E402
from gemmlab.tune.space import Space  # noqa: E402
from gemmlab.tune.strategies import AUTO_EXHAUSTIVE, resolve  # noqa: E402

SHAPE = (512, 512, 512)


def landscape(rung: str, special: dict | None = None) -> dict:
    """A made-up but smooth landscape over the pruned space: bigger tiles are faster."""
    sp = Space.of(rung, "sm_90a")
    table = {}
    for c in sp.candidates():
        work = math.log2(c.get("BM", 32) * c.get("BN", 32)) + math.log2(c.get("TM", 1) * c.get("THREADS", 256))
        table[sp.key(c)] = {"status": "ok", "ms": 10.0 / work}
    table.update(special or {})
    return table


def spec(tmp_path, rung="naive", **kw) -> TuneSpec:
    kw.setdefault("storage", f"sqlite:///{tmp_path / 'tune.db'}")
    return TuneSpec(rung, SHAPE, **kw)


class Recording(ReplayFactory):
    """Keeps the evaluator it made, to see what was compiled and measured."""

    def create(self, device):
        self.made = super().create(device)
        return self.made


def _statuses(summary) -> dict:
    return {r["key"]: r["status"] for r in summary["document"]["records"]}


# ---- the space -------------------------------------------------------------------------------------
def test_constraints_prune_the_space_with_the_registrys_reasons():
    sp = Space.of("naive", "sm_90a")
    refused = sp.pruned()
    assert len(refused) + len(sp.candidates()) == sp.size
    assert all("must be BM*BN" in "; ".join(reasons) for _, reasons in refused)


def test_every_rung_space_is_a_few_hundred_tile_configurations_at_most():
    """A few hundred tile configurations; a split-K rung tries each with every SPLITK value (and
    rung 18 with both ways of summing the slices, SKCLUSTER, both main loops, SPREAD, both FFMA
    orders, SNAKE, and with and without its stream-K tail, STREAMK; the persistent rungs with both
    grids, BALANCE; rung 24 with both rings, ASYNC)."""
    switches = ("SPLITK", "SKCLUSTER", "SPREAD", "SNAKE", "STREAMK", "BALANCE", "ASYNC")
    for r in [r for r in RUNGS if r.space]:     # a rung without a space is refused by the tuner, by name
        tiles = {tuple(v for k, v in c.items() if k not in switches)
                 for c in Space.of(r, "sm_90a").candidates()}
        assert 1 <= len(tiles) <= 600, (r.slug, len(tiles))


def test_the_space_holds_every_rungs_defaults_and_presets():
    """The tuner can propose what the rung ships with (async_simt's "tall" preset has BN=32, below
    its BN grid)."""
    for r in [r for r in RUNGS if r.space]:
        sp = Space.of(r, "sm_90a")
        assert sp.contains(r.params), r.slug
        for name, preset in r.presets.items():
            assert sp.contains(sp.point(preset)), (r.slug, name)


def test_the_starting_points_include_the_dispatch_rules_choice_for_the_shape():
    from gemmlab.core import dispatch, registry
    from gemmlab.tune.runner import starting_points

    rung = registry.get("async_simt")
    sp = Space.of(rung, "sm_90a")
    s = TuneSpec("async_simt", (4096, 16, 4096)).checked()
    rule = sp.point(dispatch.rule_config(rung, 4096, 16, 4096, 132)[0])
    keys = [sp.key(c) for c in starting_points(sp, s, {"arch": "sm_90a", "sm_count": 132})]
    assert sp.key(rule) in keys and sp.key(rung.params) == keys[0]
    assert len(keys) == len(set(keys))


def test_a_run_measures_its_starting_points_before_the_strategys_proposals(tmp_path):
    from gemmlab.tune.runner import starting_points

    f = Recording(landscape("async_simt"))
    s = spec(tmp_path, "async_simt", strategy="random", budget=12, batch=1, seed=3)
    starts = [Space.of("async_simt", "sm_90a").key(c)
              for c in starting_points(Space.of("async_simt", "sm_90a"), s.checked(), f.identity(0))]
    summary = tune(s, f)
    first = [r["key"] for r in sorted(summary["document"]["records"], key=lambda r: r["number"])][:len(starts)]
    assert len(starts) >= 5 and first == starts


def test_the_callers_starting_configurations_are_measured_first_in_the_order_given(tmp_path):
    f = Recording(landscape("async_simt"))
    mine = ["BM=64,BN=64,WM=32,WN=32,TM=4,TN=8,SPLITK=3", {"BM": 128, "BN": 64, "WM": 64, "WN": 32, "TM": 16, "TN": 4}]
    summary = tune(spec(tmp_path, "async_simt", strategy="random", budget=9, batch=1, seed=1, starts=tuple(mine)), f)
    first = [r["config"] for r in sorted(summary["document"]["records"], key=lambda r: r["number"])][:2]
    assert [(c["BM"], c["BN"], c["TM"], c["SPLITK"]) for c in first] == [(64, 64, 4, 3), (128, 64, 16, 1)]


def test_a_starting_configuration_the_rung_refuses_is_named_with_the_reason():
    with pytest.raises(ValueError, match="starting configuration 'BM=64,TM=5'.*"):
        TuneSpec("async_simt", SHAPE, starts=("BM=64,TM=5",)).checked()


LONG_K = (256, 256, 65536)
H100 = {"gpu_name": "replay", "arch": "sm_90a", "driver": "-", "nvrtc": "-", "gemmlab": "-", "sm_count": 132}


def test_a_starting_point_outside_the_grid_is_kept():
    """At 256x256x65536 the dispatch rule splits K 64 ways, past the SPLITK grid (1-16): the tuner
    must be able to measure what ``auto`` runs."""
    from gemmlab.tune.runner import starting_points

    sp = Space.of("async_simt", "sm_90a")
    starts = starting_points(sp, TuneSpec("async_simt", LONG_K).checked(), H100)
    assert 64 not in sp.params["SPLITK"] and [c for c in starts if c["SPLITK"] == 64]


def test_widening_adds_the_values_of_the_given_points_and_nothing_else():
    sp = Space.of("async_simt", "sm_90a")
    wide = sp.widened([{"SPLITK": 64, "BK": 8}, {"SPLITK": 3}])
    assert wide.params["SPLITK"] == tuple(sorted(sp.params["SPLITK"] + (3, 64)))
    assert {k: v for k, v in wide.params.items() if k != "SPLITK"} == {k: v for k, v in sp.params.items() if k != "SPLITK"}


def test_widening_searches_a_parameter_that_a_point_sets_off_its_default():
    """Rung 22's 256x128 preset sets BM=256 and WM=128, which its grid holds at 128 and 64: they
    become searched parameters, so the preset decodes to itself (it was measured as 128x256)."""
    sp = Space.of("wgmma_tf32", "sm_90a", precision="tf32")
    preset = sp.point(get("wgmma_tf32").presets_for("tf32")["256x128"])
    assert "BM" not in sp.params and "WM" not in sp.params
    wide = sp.widened([sp.point({}), preset])
    assert (wide.params["BM"], wide.params["WM"]) == ((128, 256), (64, 128))
    assert wide.decode(wide.encode(preset)) == preset
    assert sp.widened([sp.point({}), sp.point({"BN": 128})]).params == sp.params   # defaults add nothing


def test_a_callers_start_that_sets_an_unsearched_switch_is_measured_with_it(tmp_path):
    """PACK is not in rung 18's grid: a start with PACK=1 is measured with PACK=1, not at the
    default, and the study records the parameter's values."""
    sp = Space.of("async_simt", "sm_90a")
    mine = sp.point({"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "PACK": 1})
    table = landscape("async_simt", {sp.key(mine): {"status": "ok", "ms": 0.01}})
    f = Recording(table)
    s = tune(spec(tmp_path, "async_simt", strategy="random", budget=4, batch=1, seed=1, starts=(mine,)), f)
    assert f.made.measured[0] == sp.key(mine) and s["best"]["key"] == sp.key(mine)
    assert s["space"]["PACK"] == [0, 1]


def test_an_aligned_space_keeps_a_parameter_only_the_study_searched():
    """A study whose first run searched PACK (a start set it) keeps it in a later run without such
    a start, with its values in the recorded order."""
    sp = Space.of("async_simt", "sm_90a")
    recorded = {k: list(v) for k, v in sp.params.items()} | {"PACK": [1, 0]}
    wide = sp.aligned(recorded)
    assert wide.params["PACK"] == (1, 0) and list(wide.params) == [k for k in get("async_simt").params if k in wide.params]
    cfg = wide.point({"PACK": 1})
    assert wide.decode(wide.encode(cfg)) == cfg


def test_an_aligned_space_keeps_the_indices_a_study_recorded():
    """Values that arrive after a study's first run are appended: an index its trials were told
    still names the same value."""
    sp = Space.of("async_simt", "sm_90a")
    recorded = {k: list(v) for k, v in sp.params.items()}
    wide = sp.widened([{"SPLITK": 3}, {"SPLITK": 64}]).aligned(recorded)
    assert wide.params["SPLITK"] == sp.params["SPLITK"] + (3, 64)
    cfg = wide.point({"SPLITK": 3, "BM": 64})
    assert wide.decode(wide.encode(cfg)) == cfg
    assert all(wide.params[k][:len(v)] == tuple(v) for k, v in recorded.items())


def test_a_run_measures_a_starting_point_outside_the_grid_first_and_records_the_widened_space(tmp_path):
    from gemmlab.tune.runner import starting_points

    sp = Space.of("async_simt", "sm_90a")
    rule = next(c for c in starting_points(sp, TuneSpec("async_simt", LONG_K).checked(), H100) if c["SPLITK"] == 64)
    # the split point is the fastest of the landscape: the run's best lies outside the old grid
    f = Recording(landscape("async_simt", {sp.key(rule): {"status": "ok", "ms": 0.05}}), machine=dict(H100))
    s = tune(TuneSpec("async_simt", LONG_K, strategy="random", budget=10, batch=1, seed=1,
                      storage=f"sqlite:///{tmp_path / 'tune.db'}"), f)
    assert 64 in s["space"]["SPLITK"] and sp.key(rule) in f.made.measured
    assert s["best"]["key"] == sp.key(rule)
    study = optuna.load_study(study_name=s["study"], storage=f"sqlite:///{tmp_path / 'tune.db'}")
    assert 64 in study.user_attrs["space"]["SPLITK"]


def test_a_rung_without_a_space_is_refused_by_name():
    from dataclasses import replace

    with pytest.raises(ValueError, match="no tunable parameters"):
        Space.of(replace(RUNGS[0], space={}))


def test_a_refused_proposal_is_recorded_invalid_and_never_compiled(tmp_path):
    f = Recording(landscape("tile_1d"))
    s = tune(spec(tmp_path, "tile_1d", strategy="random", budget=6, seed=3), f)
    sp = Space.of("tile_1d", "sm_90a")
    assert all(not sp.check(dict(zip(sp.rung.params, (int(x.split("=")[1]) for x in k.split(",")))))
               for k in f.made.compiled)
    assert s["evaluated"] == 6


# ---- strategies --------------------------------------------------------------------------------------
def test_auto_is_exhaustive_when_the_space_fits_else_tpe():
    assert resolve("auto", 50, None) == "exhaustive"
    assert resolve("auto", AUTO_EXHAUSTIVE + 1, None) == "tpe"
    assert resolve("auto", 50, 10) == "tpe"
    with pytest.raises(ValueError, match="unknown strategy"):
        resolve("annealing", 5, None)


@pytest.mark.parametrize("strategy", ["random", "tpe", "cmaes", "grid"])
def test_each_strategy_evaluates_its_budget_of_distinct_candidates(tmp_path, strategy):
    f = Recording(landscape("tile_1d"))
    s = tune(spec(tmp_path, "tile_1d", strategy=strategy, budget=8, batch=4, seed=1), f)
    assert s["strategy"] == strategy and s["evaluated"] == 8
    assert len(set(f.made.measured)) == len(f.made.measured) == 8


def test_exhaustive_measures_every_candidate_once(tmp_path):
    f = Recording(landscape("naive"))
    s = tune(spec(tmp_path, strategy="exhaustive"), f)
    assert sorted(f.made.measured) == sorted(landscape("naive"))
    assert s["stopped"] == "every candidate of the pruned space is recorded"


# ---- persistence ---------------------------------------------------------------------------------------
def test_a_second_run_measures_nothing_already_recorded(tmp_path):
    tune(spec(tmp_path, strategy="exhaustive"), ReplayFactory(landscape("naive")))
    f = Recording(landscape("naive"))
    s = tune(spec(tmp_path, strategy="tpe", budget=5), f)
    assert f.made.measured == [] and s["evaluated"] == 0


def test_the_study_is_keyed_by_machine_versions_rung_dtype_layout_and_shape(tmp_path):
    s = tune(spec(tmp_path, strategy="exhaustive", layout="rc"), ReplayFactory(landscape("naive")))
    key = s["document"]["key"]
    assert set(key) == set(store.KEY_FIELDS)
    assert key["layout"] == "rc" and key["shape"] == "512x512x512" and key["dtype"] == "fp32"
    other = tune(spec(tmp_path, strategy="exhaustive", layout="rr"), ReplayFactory(landscape("naive")))
    assert other["study"] != s["study"] and other["evaluated"] == 9


# ---- failures and the 3x rule --------------------------------------------------------------------------------
def test_failures_are_recorded_with_their_reason_and_the_search_goes_on(tmp_path):
    keys = list(landscape("naive"))
    special = {keys[0]: {"status": "compile_error", "reason": "NVRTC: error"},
               keys[1]: {"status": "spill", "reason": "spills 8 bytes"},
               keys[2]: {"status": "wrong", "reason": "rel. error 1e-1"}}

    class Raising(ReplayFactory):
        def create(self, device):
            ev = super().create(device)
            measure = ev.measure

            def boom(config, cutoff):
                if ev.key(config) == keys[3]:
                    raise RuntimeError("illegal memory access")
                return measure(config, cutoff)
            ev.measure = boom
            return ev

    s = tune(spec(tmp_path, strategy="exhaustive"), Raising(landscape("naive", special)))
    st = _statuses(s)
    assert [st[k] for k in keys[:4]] == ["compile_error", "spill", "wrong", "error"]
    assert s["evaluated"] == 9 and sum(v == "ok" for v in st.values()) == 5
    reasons = {r["key"]: r["reason"] for r in s["document"]["records"]}
    assert "illegal memory access" in reasons[keys[3]] and reasons[keys[1]] == "spills 8 bytes"


def test_a_candidate_3x_slower_than_the_best_so_far_is_recorded_slow(tmp_path):
    keys = list(landscape("naive"))
    table = {k: {"status": "ok", "ms": 1.0} for k in keys}
    table[keys[-1]] = {"status": "ok", "ms": 3.5}
    table[keys[-2]] = {"status": "ok", "ms": 2.9}
    s = tune(spec(tmp_path, strategy="exhaustive", batch=1), ReplayFactory(table))
    st = _statuses(s)
    assert st[keys[-1]] == "slow" and st[keys[-2]] == "ok"
    slow = next(r for r in s["document"]["records"] if r["key"] == keys[-1])
    assert "3x the best so far" in slow["reason"] and slow["tflops"] is not None


# ---- interruption and crashes -------------------------------------------------------------------------------
class Interrupting(ReplayFactory):
    def create(self, device):
        ev = super().create(device)
        calls = []
        measure = ev.measure

        def stop_on_the_fourth(config, cutoff):
            calls.append(config)
            if len(calls) == 4:
                raise KeyboardInterrupt
            return measure(config, cutoff)
        ev.measure = stop_on_the_fourth
        return ev


def test_an_interrupted_run_keeps_its_results_and_resumes_without_remeasuring(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        tune(spec(tmp_path, strategy="exhaustive", batch=2), Interrupting(landscape("naive")))
    f = Recording(landscape("naive"))
    s = tune(spec(tmp_path, strategy="exhaustive"), f)
    assert s["retried"] == 1                    # the one interrupted in the middle of its timing
    assert len(f.made.measured) == 9 - 3        # the first three are kept, never timed again
    assert all(v == "ok" for v in _statuses(s).values()) and len(_statuses(s)) == 9


@dataclass
class Crashing(ReplayFactory):
    """Kills its process (no clean-up at all) at its third measurement."""

    def create(self, device):
        ev = super().create(device)
        measure, calls = ev.measure, []

        def die(config, cutoff):
            calls.append(1)
            if len(calls) == 3:
                os._exit(9)
            return measure(config, cutoff)
        ev.measure = die
        return ev


def _tune_in_child(s: TuneSpec, f) -> None:
    tune(s, f)


def test_a_crashed_run_is_failed_by_its_heartbeat_and_retried_on_resume(tmp_path):
    s = spec(tmp_path, strategy="exhaustive", batch=4, heartbeat=(1, 2))
    p = multiprocessing.get_context("spawn").Process(target=_tune_in_child, args=(s, Crashing(landscape("naive"))))
    p.start()
    p.join(120)
    assert p.exitcode == 9
    time.sleep(3)                               # past the grace period: the held trials are stale
    f = Recording(landscape("naive"))
    out = tune(s, f)
    assert out["retried"] == 2                  # the crash left 2 of its batch of 4 unmeasured
    assert sorted(set(f.made.measured) | {k for k, v in _statuses(out).items()}) == sorted(landscape("naive"))
    assert all(v == "ok" for v in _statuses(out).values()) and len(_statuses(out)) == 9


# ---- worker processes ------------------------------------------------------------------------------------------
def test_two_worker_processes_share_one_sqlite_study(tmp_path):
    s = tune(spec(tmp_path, "tile_1d", strategy="exhaustive", devices=(0, 1), batch=4), ReplayFactory(landscape("tile_1d")))
    recs = s["document"]["records"]
    assert s["worker_failures"] == [] and len(recs) == len(landscape("tile_1d"))
    assert len({r["key"] for r in recs}) == len(recs)              # nothing measured twice
    assert {r["device"] for r in recs} == {"replay 0", "replay 1"}  # tagged by device


def test_two_workers_together_evaluate_no_more_than_the_budget(tmp_path):
    s = tune(spec(tmp_path, "tile_1d", strategy="random", budget=7, devices=(0, 1), batch=4),
             ReplayFactory(landscape("tile_1d")))
    assert s["evaluated"] == 7 == len({r["key"] for r in s["document"]["records"]})


def test_devices_of_different_gpus_are_refused(tmp_path):
    class Mixed(ReplayFactory):
        def identity(self, device):
            return {**self.machine, "gpu_name": f"GPU model {device}"}

    with pytest.raises(ValueError, match="tune them in separate runs"):
        tune(spec(tmp_path, devices=(0, 1)), Mixed(landscape("naive")))


# ---- reading the results -----------------------------------------------------------------------------------------
def test_ratios_use_the_peers_timed_in_the_candidates_own_run(tmp_path):
    table = {k: {"status": "ok", "ms": 2.0} for k in landscape("naive")}
    s = tune(spec(tmp_path, strategy="exhaustive"), ReplayFactory(table, peers={"cublas": 1.0, "triton": 0.5}))
    r = s["document"]["records"][0]
    assert r["vs_cublas"] == pytest.approx(0.5) and r["vs_best_peer"] == pytest.approx(0.25)
    assert r["best_peer"] == "triton"


def test_show_prints_seed_001s_table_from_the_database(tmp_path, capsys):
    from gemmlab.cli import main

    s = spec(tmp_path, strategy="exhaustive")
    tune(s, ReplayFactory(landscape("naive"), peers={"cublas": 0.5}))
    assert main(["tune", "naive", "--show", "--storage", s.storage, "--shape", "512"]) == 0
    out = capsys.readouterr().out
    for col in ("BM", "BN", "THREADS", "TFLOP/s", "% of cuBLAS", "% of best peer"):
        assert col in out
    assert main(["tune", "naive", "--show", "--storage", s.storage, "--shape", "1024"]) == 1


def test_tune_cli_refuses_a_bad_start_before_looking_for_a_gpu(capsys):
    from gemmlab.cli import main

    assert main(["tune", "async_simt", "--shape", "512", "--start", "small", "--start", "BM=48"]) != 0
    assert "starting configuration 'BM=48'" in capsys.readouterr().err


def test_the_summary_is_strict_json(tmp_path):
    from gemmlab.bench.results import write_json

    s = tune(spec(tmp_path, strategy="exhaustive"), ReplayFactory(landscape("naive")))
    doc = json.loads(write_json(s, tmp_path / "s.json").read_text())
    assert doc["best"]["status"] == "ok" and doc["evaluated"] == 9


def test_an_outcome_with_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="unknown status"):
        Outcome("great")
    assert ReplayEvaluator({}).measure({"BM": 1}, None).status == "error"


# ---- a shared server -----------------------------------------------------------------------------------------------
def _postgres(tmp_path):
    """A throw-away PostgreSQL server from Debian's package (run as the postgres user when root);
    skips with the reason when none can start here."""
    pytest.importorskip("psycopg2", reason="psycopg2 (pip install psycopg2-binary) is needed for PostgreSQL URLs")
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not bins:
        pytest.skip("no PostgreSQL server here (apt-get install postgresql)")
    bindir = bins[-1].parent
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user and not shutil.which("runuser"):
        pytest.skip("running as root without runuser: initdb refuses root")
    d = Path(tempfile.mkdtemp(prefix="gemmlab-pg-"))   # not under pytest's folder: the postgres user must reach it
    if as_user:
        shutil.chown(d, "postgres")
    port = 54000 + os.getpid() % 1000
    run = lambda *a: subprocess.run(as_user + [str(bindir / a[0]), *a[1:]], capture_output=True, text=True, timeout=60)  # noqa: E731
    r = run("initdb", "-D", str(d / "data"), "-A", "trust", "-U", "gemmlab")
    if r.returncode:
        pytest.skip(f"initdb failed: {r.stderr.strip()[:200]}")
    r = run("pg_ctl", "-D", str(d / "data"), "-o", f"-k {d} -p {port} -c listen_addresses=''", "-l", str(d / "log"),
            "-w", "start")
    if r.returncode:
        pytest.skip(f"the PostgreSQL server did not start: {r.stderr.strip()[:200]}")

    def stop():
        run("pg_ctl", "-D", str(d / "data"), "-m", "fast", "stop")
        shutil.rmtree(d, ignore_errors=True)

    return f"postgresql+psycopg2://gemmlab@/postgres?host={d}&port={port}", stop


def test_a_postgresql_storage_shares_one_study_between_workers(tmp_path):
    url, stop = _postgres(tmp_path)
    try:
        s = tune(TuneSpec("naive", SHAPE, strategy="exhaustive", storage=url, devices=(0, 1), batch=2),
                 ReplayFactory(landscape("naive")))
        assert s["worker_failures"] == [] and len(s["document"]["records"]) == 9
        again = tune(TuneSpec("naive", SHAPE, strategy="tpe", budget=3, storage=url), ReplayFactory(landscape("naive")))
        assert again["evaluated"] == 0 and again["study"] == s["study"]
    finally:
        stop()


# ---- the report's tuning section ---------------------------------------------------------------------------------
def test_the_report_gains_a_tuning_section_with_a_table_and_a_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from gemmlab.report.model import results_document
    from gemmlab.report.render import build
    from gemmlab.report.tuning import collect_tuning

    s = spec(tmp_path, "tile_1d", strategy="exhaustive")
    tune(s, ReplayFactory(landscape("tile_1d"), peers={"cublas": 0.5}))
    assert collect_tuning("someone else's GPU", s.storage) == []
    docs = collect_tuning("replay", s.storage)
    base = json.loads((Path(__file__).parent / "data" / "report_results.json").read_text())
    html_path, md_path = build(results_document({**base, "tuning": docs}), str(tmp_path / "rep"))
    md = Path(md_path).read_text()
    assert "## Tuning" in md and "% of cuBLAS" in md and "tuning_1.png" in md
    assert (tmp_path / "rep" / "tuning_1.png").stat().st_size > 1000
    assert 'id="tuning"' in Path(html_path).read_text()


def test_the_space_of_a_precision_prunes_with_that_precisions_constraints_and_holds_its_defaults():
    sp = Space.of("wgmma_tf32", "sm_90a", precision="3xtf32")
    d = get("wgmma_tf32").config(precision="3xtf32")
    assert sp.point({}) == d and sp.contains(d) and not sp.check(d)
    bad = sp.point({"BN": 256})                # 3xtf32 keeps partial sums beside the sums: refused
    assert sp.check(bad) and not Space.of("wgmma_tf32", "sm_90a", precision="tf32").check(bad)
    assert all(not sp.check(c) for c in sp.candidates())


def test_a_worker_refused_for_the_runs_budget_stops_asking_until_it_reads_the_study_again():
    """Another worker of the run took the budget's slots after this one read the study: the first
    proposal refused for the budget ends the batch (a later proposal, numbered later still, would
    be refused too). Proposing on from the stale view took a worker of the two-worker run above up
    to 2,000 refused proposals, each reading every trial."""
    from gemmlab.tune.search import Job, _View, _Worker

    sp = Space.of("tile_1d", "sm_90a")
    storage = store.open_storage(store.MEMORY)
    machine = {"gpu_name": "replay", "arch": "sm_90a", "driver": "0", "nvrtc": "0", "gemmlab": "0"}
    study = store.open_study(storage, store.study_key(machine, "tile_1d", "fp32", "rr", SHAPE),
                             optuna.samplers.RandomSampler(seed=1), sp.params)
    for cfg in sp.candidates()[:2]:   # the other worker's two trials, in hand
        t = study.ask()
        t.set_user_attr("candidate", {"config": cfg, "key": sp.key(cfg), "run": "r1", "device": "replay 1"})
    worker = _Worker(study, storage, sp, ReplayEvaluator(landscape("tile_1d")), Job("random", "r1", budget=2, batch=4),
                     None)
    batch, stop = worker._batch(_View({}, {}, set(), set(), 0, None))   # read before those two were asked
    refused = [t for t in study.get_trials(deepcopy=False)
               if "budget" in (t.user_attrs.get("result") or {}).get("reason", "")]
    assert batch == [] and stop == "" and len(refused) == 1


# ---- the grouped rung: a mixture-of-experts layer G x T x N x K ---------------------------------------
GROUPED_SHAPE = (64, 8192, 2048, 7168)


def test_a_grouped_tune_takes_g_t_n_k_and_refuses_a_plain_shape_or_a_column_major_a():
    assert TuneSpec("wgmma_grouped", GROUPED_SHAPE, layout="rc").checked().shape == GROUPED_SHAPE
    with pytest.raises(ValueError, match=r"4 positive integers G, T, N, K"):
        TuneSpec("wgmma_grouped", (4096, 4096, 4096)).checked()
    with pytest.raises(ValueError, match=r"3 positive integers M, N, K"):
        TuneSpec("naive", GROUPED_SHAPE).checked()
    with pytest.raises(ValueError, match=r"layout must be one of rr, rc"):
        TuneSpec("wgmma_grouped", GROUPED_SHAPE, layout="cr").checked()
    with pytest.raises(ValueError, match=r"1 to 4096"):
        TuneSpec("wgmma_grouped", (5000, 8192, 2048, 7168)).checked()


def test_a_grouped_space_holds_the_table_for_g_groups_and_prunes_by_its_shared_memory():
    from gemmlab.core.families.hopper import grouped_smem
    from gemmlab.tune.runner import fixed_params

    s = TuneSpec("wgmma_grouped", GROUPED_SHAPE, layout="rc").checked()
    sp = Space.of(s.rung, "sm_90a", fixed_params(s))
    cands = sp.candidates()
    assert cands and all(c["GROUP_CAP"] == 64 and c["GROUP_K"] == 0 for c in cands)
    assert all(grouped_smem(c) <= 232448 for c in cands)


def test_the_grouped_starting_points_include_the_groups_rule_for_the_layer():
    from gemmlab.core.families.hopper import grouped_config
    from gemmlab.tune.runner import fixed_params, starting_points

    s = TuneSpec("wgmma_grouped", GROUPED_SHAPE, layout="rc").checked()
    sp = Space.of(s.rung, "sm_90a", fixed_params(s))
    rule = sp.point(grouped_config(8192, 2048, 7168, 64, 132)[0])
    keys = [sp.key(c) for c in starting_points(sp, s, {"arch": "sm_90a", "sm_count": 132})]
    assert sp.key(rule) in keys


def test_a_grouped_fp8_tune_takes_k_major_weights_and_starts_from_its_precisions_rule():
    from gemmlab.core.families.hopper import grouped_fp8_config, grouped_fp8_smem
    from gemmlab.tune.runner import fixed_params, starting_points

    with pytest.raises(ValueError, match=r"layout must be one of rc \(A then B"):
        TuneSpec("wgmma_grouped_fp8", GROUPED_SHAPE, layout="rr").checked()
    for precision in ("fp8", "fp8_fast"):
        s = TuneSpec("wgmma_grouped_fp8", GROUPED_SHAPE, layout="rc", precision=precision).checked()
        assert s.dtype == "fp8" and s.key_dtype == ("fp8" if precision == "fp8" else "fp8:fp8_fast")
        sp = Space.of(s.rung, "sm_90a", fixed_params(s), s.precision)
        assert all(grouped_fp8_smem(c) <= 232448 and c["GROUP_CAP"] == 64 for c in sp.candidates())
        rule = sp.point(grouped_fp8_config(8192, 2048, 7168, 64, 132, precision)[0])
        keys = [sp.key(c) for c in starting_points(sp, s, {"arch": "sm_90a", "sm_count": 132})]
        assert sp.key(rule) in keys


def test_an_fp8_tune_takes_k_major_operands_files_each_precision_apart_and_starts_from_the_rule():
    from gemmlab.core import dispatch
    from gemmlab.tune.runner import starting_points

    with pytest.raises(ValueError, match=r"layout must be one of rc \(A then B"):
        TuneSpec("wgmma_fp8", (4096, 4096, 4096), "fp8", layout="rr").checked()
    for precision in ("fp8", "fp8_fast"):
        s = TuneSpec("wgmma_fp8", (4096, 4096, 4096), "fp8", layout="rc", precision=precision).checked()
        assert s.key_dtype == ("fp8" if precision == "fp8" else "fp8:fp8_fast")
        sp = Space.of(s.rung, "sm_90a", None, s.precision)
        rule = sp.point(dispatch.rule_config(get("wgmma_fp8"), 4096, 4096, 4096, 132, precision)[0])
        assert sp.key(rule) in [sp.key(c) for c in starting_points(sp, s, {"arch": "sm_90a", "sm_count": 132})]


def test_a_grouped_tune_records_tflops_of_the_layers_products(tmp_path):
    from gemmlab.tune.runner import fixed_params

    s = TuneSpec("wgmma_grouped", GROUPED_SHAPE, layout="rc", strategy="random", budget=4,
                 storage=f"sqlite:///{tmp_path / 'tune.db'}")
    sp = Space.of("wgmma_grouped", "sm_90a", fixed_params(s.checked()))
    table = {sp.key(c): {"status": "ok", "ms": 1.0} for c in sp.candidates()}
    out = tune(s, ReplayFactory(table))
    ok = [r for r in out["document"]["records"] if r["status"] == "ok"]
    assert ok and out["key"]["shape"] == "64x8192x2048x7168"
    assert ok[0]["tflops"] == pytest.approx(2.0 * 8192 * 2048 * 7168 / 1e-3 / 1e12)
