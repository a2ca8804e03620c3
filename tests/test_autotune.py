"""On-line tuning of kernel="auto" (core/autotune.py, tune/online.py): off by default; switched on,
the first call of a shape no tuned entry holds measures a few candidates and stores the fastest
where auto reads tuned configurations; once per signature, within its bounds, never while the
stream captures a CUDA graph. CPU: the switch and its bounds, the candidates, when the tuner is
asked, what it stores. GPU: a new shape tuned and then read back, the refusal inside a capture."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gemmlab.core import api, autotune, dispatch, registry
from gemmlab.core.problem import GemmProblem
import stand_ins

H100 = SimpleNamespace(arch="sm_90a", name="NVIDIA H100 80GB HBM3", sm_count=132, l2_bytes=50 << 20)


def problem(M, N, K) -> GemmProblem:
    return stand_ins.problem(M, N, K, "bf16", lib="torch")


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """An empty cache folder (no tuned table) and a clean on-line state; the settings restored."""
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    dispatch.reload()
    autotune.forget()
    before = autotune.settings()
    yield tmp_path
    autotune.configure(before.enabled, budget_s=before.budget_s, candidates=before.candidates)
    autotune.forget()
    dispatch.reload()


@pytest.fixture
def fake_tuner(tables, monkeypatch):
    """On-line tuning on, with a tuner that records its calls and picks the second candidate; the
    device and the stream's capture state are stand-ins (no GPU)."""
    calls = []

    def tuner(prob, device, precision, operands, settings):
        calls.append((prob.M, prob.N, prob.K))
        c = dispatch.candidates(prob, device, precision, settings.candidates)[1]
        return dispatch.Choice(c.rung, c.config, "online", "fake tuner")

    monkeypatch.setattr(autotune, "_tuner", tuner)
    monkeypatch.setattr(api, "_device_for", lambda prob, kernel: H100)
    monkeypatch.setattr(api, "current_stream", lambda lib, ordinal: 0)
    monkeypatch.setattr(api, "stream_capturing", lambda stream, ordinal: False)
    autotune.configure(True)
    return calls


# ---- the switch ----------------------------------------------------------------------------------
def test_on_line_tuning_is_off_unless_the_environment_asks_for_it():
    assert not autotune.from_environment({}).enabled
    assert autotune.from_environment({"GEMMLAB_AUTOTUNE": "1"}).enabled
    assert not autotune.from_environment({"GEMMLAB_AUTOTUNE": "0"}).enabled


def test_a_malformed_environment_variable_is_refused_naming_it():
    with pytest.raises(ValueError, match="GEMMLAB_AUTOTUNE="):
        autotune.from_environment({"GEMMLAB_AUTOTUNE": "maybe"})
    with pytest.raises(ValueError, match="GEMMLAB_AUTOTUNE_BUDGET="):
        autotune.from_environment({"GEMMLAB_AUTOTUNE": "1", "GEMMLAB_AUTOTUNE_BUDGET": "0"})


def test_the_budget_and_the_candidates_must_be_positive(tables):
    with pytest.raises(ValueError, match="budget"):
        autotune.configure(True, budget_s=0)
    with pytest.raises(ValueError, match="candidate"):
        autotune.configure(True, candidates=0)
    with pytest.raises(TypeError):
        autotune.configure("yes")


def test_gemmlab_autotune_switches_it_and_returns_the_settings(tables):
    import gemmlab
    st = gemmlab.autotune(True, budget_s=1.5, candidates=3)
    assert (st.enabled, st.budget_s, st.candidates) == (True, 1.5, 3) and autotune.settings() == st
    assert not gemmlab.autotune(False).enabled


# ---- the candidates ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(214, 60, 458), (2840, 2461, 262), (1, 4096, 4096), (4093, 4093, 4093)])
def test_the_candidates_are_distinct_accepted_and_start_with_autos_own_choice(tables, shape):
    p = problem(*shape)
    cands = dispatch.candidates(p, H100, None, 4)
    assert 2 <= len(cands) <= 4
    first = dispatch.decide(p, "auto", None, H100)
    assert (cands[0].rung, cands[0].config) == (first.rung, first.config)
    keys = {(c.rung.slug, json.dumps(c.config, sort_keys=True)) for c in cands}
    assert len(keys) == len(cands)
    for c in cands:
        assert c.rung.check_config(c.config) == [], c


def test_the_candidates_are_at_most_the_limit(tables):
    assert len(dispatch.candidates(problem(2840, 2461, 262), H100, None, 1)) == 1


# ---- when the tuner is asked ---------------------------------------------------------------------
def test_a_new_shape_is_tuned_once_per_process(fake_tuner):
    p = problem(214, 60, 458)
    first = api._choose(p, "auto", None, None, (None, None, None))
    again = api._choose(p, "auto", None, None, (None, None, None))
    assert fake_tuner == [(214, 60, 458)]
    assert first.source == "online" and again.source != "online"


def test_nothing_is_tuned_when_it_is_off_or_a_rung_or_config_is_named(fake_tuner):
    p = problem(214, 60, 458)
    api._choose(p, "wgmma_tma", None, None, (None, None, None))
    api._choose(p, "auto", "128x128", None, (None, None, None))
    autotune.configure(False)
    api._choose(p, "auto", None, None, (None, None, None))
    assert fake_tuner == []


def test_a_shape_the_tuned_table_holds_exactly_is_not_measured(fake_tuner, tables):
    p = problem(214, 60, 458)
    (tables / "tuned.json").write_text(json.dumps({"entries": [
        {"dtype": "bf16", "shape": [214, 60, 458], "layout": "rr", "rung": "mma_sync", "config": {},
         "gpu_name": H100.name, "arch": "sm_90a"}]}))
    dispatch.reload()
    c = api._choose(p, "auto", None, None, (None, None, None))
    assert fake_tuner == [] and c.source == "tuned" and c.rung is registry.get("mma_sync")


def test_a_call_inside_a_graph_capture_is_not_tuned_and_the_next_one_is(fake_tuner, monkeypatch):
    p = problem(214, 60, 458)
    monkeypatch.setattr(api, "stream_capturing", lambda stream, ordinal: True)
    captured = api._choose(p, "auto", None, None, (None, None, None))
    assert fake_tuner == [] and "capturing a CUDA graph" in captured.reason
    monkeypatch.setattr(api, "stream_capturing", lambda stream, ordinal: False)
    assert api._choose(p, "auto", None, None, (None, None, None)).source == "online"
    assert fake_tuner == [(214, 60, 458)]


def test_a_tuner_that_fails_leaves_the_shape_to_be_tuned_again(fake_tuner, monkeypatch):
    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(autotune, "_tuner", broken)
    with pytest.raises(RuntimeError, match="boom"):
        api._choose(problem(214, 60, 458), "auto", None, None, (None, None, None))
    assert autotune.claim(("bf16", None, 214, 60, 458, False, False, H100.name))


# ---- what is stored ------------------------------------------------------------------------------
def test_the_winner_is_stored_where_auto_reads_it_and_survives_an_export(tables, monkeypatch):
    from gemmlab.tune import export, online
    p = problem(214, 60, 458)
    best = dispatch.candidates(p, H100, None, 4)[0]
    online._store(p, H100, None, best, 0.0125, {"0:x": 0.0125, "1:y": 0.02})
    stored = json.loads((tables / "online.json").read_text())["entries"]
    assert stored[0]["source"] == "online" and stored[0]["shape"] == [214, 60, 458] and stored[0]["rung"] == best.rung.slug
    assert dispatch.tuned_exactly(p, H100)                       # tuned.json has it: auto takes it, unmeasured
    monkeypatch.setattr(export, "documents", lambda url=None: [])   # an empty tuning database
    export.export_tuned()
    assert dispatch.tuned_exactly(p, H100)


def test_a_new_winner_replaces_the_old_one_of_its_shape(tables):
    from gemmlab.tune import online
    p = problem(214, 60, 458)
    c0, c1 = dispatch.candidates(p, H100, None, 4)[:2]
    online._store(p, H100, None, c0, 0.02, {})
    online._store(p, H100, None, c1, 0.01, {})
    entries = json.loads((tables / "tuned.json").read_text())["entries"]
    assert len(entries) == 1 and entries[0]["rung"] == c1.rung.slug


# ---- GPU -----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_a_new_shape_is_tuned_on_its_first_call_and_read_back_afterwards(tables):
    import torch

    import gemmlab
    gemmlab.autotune(True, budget_s=30)
    a = torch.randn(214, 458, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(458, 60, device="cuda", dtype=torch.bfloat16)
    c = torch.full((214, 60), float("nan"), device="cuda", dtype=torch.bfloat16)
    p = gemmlab.plan(a, b, c)
    assert p.choice.source == "online" and "on-line tuning: the fastest of" in p.choice.reason
    p.run()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)
    assert (tables / "online.json").is_file()
    assert gemmlab.plan(a, b, c).choice.source == "tuned"


@pytest.mark.gpu
def test_on_line_tuning_refuses_inside_a_graph_capture(tables):
    import torch

    import gemmlab
    a = torch.randn(227, 187, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(187, 215, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(227, 215, device="cuda", dtype=torch.bfloat16)
    gemmlab.autotune(False)
    gemmlab.gemm(a, b, c)                          # auto's own choice compiled outside the capture
    gemmlab.autotune(True, budget_s=30)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        captured = gemmlab.plan(a, b, c)
        captured.run()
    assert "capturing a CUDA graph" in captured.choice.reason and not (tables / "online.json").exists()
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)
    assert gemmlab.plan(a, b, c).choice.source == "online"


@pytest.mark.gpu
def test_tuning_a_call_with_beta_leaves_its_c_to_the_call(tables):
    import torch

    import gemmlab
    gemmlab.autotune(True, budget_s=30)
    a = torch.randn(301, 77, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(77, 190, device="cuda", dtype=torch.bfloat16)
    full = torch.randn(190, 320, device="cuda", dtype=torch.bfloat16)
    c = full[:, :301].t()                        # column-major, padded: the copy keeps its strides
    want = 1.5 * (a.float() @ b.float()) - 0.5 * c.float()
    gemmlab.gemm(a, b, c, alpha=1.5, beta=-0.5)
    assert (tables / "online.json").is_file()
    torch.testing.assert_close(c.float(), want, rtol=3e-2, atol=3e-2)
