"""``gemmlab report`` without a GPU: the page built from a recorded results document
(tests/data/report_results.json: 16 rungs + cuBLAS, synthetic counters, real ``inspect`` output),
the step explanations, the Markdown twin, robustness to partial results, and the page opened in
headless Chromium with all its images decoded."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess

import pytest

from gemmlab.report import collect as C, figures as F, model as M, render as R, steps as S
from gemmlab.core.registry import kernels

DATA = os.path.join(os.path.dirname(__file__), "data")
CHROMIUM = "/usr/bin/chromium"
N_FIGURES = 4


@pytest.fixture(scope="module")
def results() -> dict:
    with open(os.path.join(DATA, "report_results.json"), encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def built(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    html_path, md_path = R.build(results, str(out))
    return out, html_path, md_path


# ---- the document --------------------------------------------------------------------------------

def _recorded(results) -> list[str]:
    """The registry's rungs that the recorded document holds, in ladder order (rungs added after
    it was recorded are not in it)."""
    timed = {e["kernel"] for e in results["bench"]["results"]}
    return [r.slug for r in kernels() if r.slug in timed]


def test_ladder_is_every_rung_in_order(results):
    rungs, cublas = M.ladder(results)
    assert [r.slug for r in rungs] == _recorded(results) and len(rungs) == 16
    assert [r.number for r in rungs] == sorted(r.number for r in rungs)
    assert set(cublas) == {"fp32", "fp16"}
    assert cublas["fp32"].tflops and cublas["fp32"].profile.get("duration_s")
    wmma = next(r for r in rungs if r.slug == "wmma")
    assert wmma.dtype == "fp16" and wmma.profile["tensor_inst_count"] > 0


def test_one_sentence_per_step(results):
    steps = S.steps(results)
    assert len(steps) == len(_recorded(results)) - 1
    for st in steps:
        assert st["sentence"].endswith(".") and st["sentence"].count(".") >= 1
        assert "\n" not in st["sentence"]
    by = {(s["from"], s["to"]): s for s in steps}
    assert "bank conflicts fell" in by[("smem", "smem_padded")]["sentence"]
    # measured on the H100 (tests/data/report_results.json is a real `gemmlab report` result):
    # coalescing cuts the L1/TEX traffic 6.6x, and the LG-throttle stall share falls
    assert "L1/TEX bytes fell" in by[("naive", "coalesced")]["sentence"]
    assert "LG throttle stalls fell" in by[("naive", "coalesced")]["sentence"]
    assert "tensor cores" in by[("warp_tiling", "wmma")]["sentence"]
    # HFMA2.MMA register moves on the tensor pipe are not tensor-core math
    assert "tensor cores" not in by[("coalesced", "warp_shuffle")]["sentence"]
    assert "[fp32 to fp16]" in by[("warp_tiling", "wmma")]["sentence"]
    assert any("top stall moved from" in s["sentence"] for s in steps)
    assert any("FFMA share rose" in s["sentence"] for s in steps)
    # the explanations come from the instructions that changed (inspect's hot loop)
    tex = by[("ldg", "texture")]["sentence"]
    assert "texture path" in tex and "wider" not in tex
    wm = by[("warp_tiling", "wmma")]["sentence"]
    assert "ldmatrix" in wm and "LDS.128" not in wm and "wider" not in wm
    assert "wider" in by[("tile_2d", "vectorized")]["sentence"]
    assert "texture path" in by[("vectorized", "vec_texture")]["sentence"]
    # padding the tile (33 floats a row) breaks the 128-bit alignment: LDS.128 -> LDS.32
    pad = {o["kind"]: o["text"] for o in by[("smem", "smem_padded")]["observations"]}
    assert "narrower LDS loads" in pad["shared_ld_inst"]


def _view(slug, number, tflops, **prof):
    stalls = prof.pop("stalls", None)
    v = M.RungView(slug, number, slug, "", "fp32", {"tflops": tflops}, prof.pop("inspect", {}), dict(prof))
    if stalls:
        v.profile["stalls"] = [{"reason": r, "share": s, "cycles_per_issue": 10 * s} for r, s in stalls]
    return v


def test_explain_step_names_the_counters_that_moved():
    a = _view("a", 1, 2.0, dram_bytes=1.23e9, l2_bytes=5e9, bank_conflicts_ld=1.2e8, shared_ld_wavefronts=2.4e8,
              achieved_occupancy=50, ipc=1.0, inspect={"hot_loop": {"ffma_share": 0.33}},
              stalls=[("long_scoreboard", 0.61), ("wait", 0.2), ("selected", 0.19)])
    b = _view("b", 2, 8.0, dram_bytes=1.0e8, l2_bytes=4.9e9, bank_conflicts_ld=0.0, shared_ld_wavefronts=1.2e8,
              achieved_occupancy=52, ipc=1.05, inspect={"hot_loop": {"ffma_share": 0.89}},
              stalls=[("mio_throttle", 0.40), ("long_scoreboard", 0.3), ("selected", 0.3)])
    st = S.explain_step(a, b)
    s = st["sentence"]
    assert s.startswith("b (rung 2) vs a (rung 1): 4.00x faster (2 to 8 TFLOP/s)")
    texts = [o["text"] for o in st["observations"]]
    assert any(t.startswith("DRAM bytes fell 12.3x") for t in texts)
    assert any(t.startswith("shared-load bank conflicts fell from 1.2e8 to 0") for t in texts)
    assert any(t.startswith("hot-loop FFMA share rose from 33% to 89%") for t in texts)
    assert any(t.startswith("top stall moved from long scoreboard (61%) to MIO throttle (40%)") for t in texts)
    assert not any("L2 bytes" in t for t in texts)            # 2% is no change
    assert not any("occupancy" in t for t in texts)
    assert s.count(";") >= 3                                   # speed + the three largest changes
    assert st["speedup"] == pytest.approx(4.0)


def _hot(math=32, **kinds):
    """An inspect dict whose hot loop has ``math`` math instructions and the given loads, e.g.
    LDG={"32": 2}; the widths a kind does not name are absent (like documents from before the
    8- and 16-bit keys)."""
    return {"hot_loop": {"math": math, "ffma": math, "loads": {k: dict(v) for k, v in kinds.items()}}}


def _load_text(a, b, kind):
    return next(o["text"] for o in S.explain_step(a, b)["observations"] if o["kind"] == kind)


def test_loads_that_moved_to_the_texture_path_are_not_called_wider():
    """ldg -> texture: the LDG of the hot loop became TEX fetches, at the same 32-bit width."""
    a = _view("ldg", 6, 6.9, global_ld_inst=1.7e7, inspect=_hot(LDG={"32": 2, "64": 0, "128": 0}, TEX={"32": 0}))
    b = _view("texture", 7, 7.0, global_ld_inst=0.0, inspect=_hot(LDG={"32": 0}, TEX={"32": 2, "64": 0, "128": 0}))
    text = _load_text(a, b, "global_ld_inst")
    assert text.startswith("global load instructions fell from 1.7e7 to 0")
    assert "texture path" in text and "TEX" in text
    assert "wider" not in text and "128-bit" not in text
    # and back: texture -> LDG is a move back, not "more, narrower" loads
    back = _load_text(b, a, "global_ld_inst")
    assert "back" in back and "texture path" in back and "narrower" not in back


def test_wider_only_when_the_same_kind_of_load_moved_to_wider_widths():
    # 8 x LDG.32 -> 6 x LDG.32 + 2 x LDG.128 (the older documents: no "8"/"16" keys)
    a = _view("tile_2d", 10, 29.0, global_ld_inst=4.2e6, inspect=_hot(512, LDG={"32": 8, "64": 0, "128": 0}))
    b = _view("vectorized", 11, 35.0, global_ld_inst=1.0e6, inspect=_hot(512, LDG={"32": 6, "64": 0, "128": 2}))
    assert "wider" in _load_text(a, b, "global_ld_inst")
    # the newer documents: 8/16-bit keys; 16-bit -> 32-bit loads are wider too
    a = _view("a", 1, 1.0, global_ld_inst=8e6, inspect=_hot(LDG={"8": 0, "16": 8, "32": 0, "64": 0, "128": 0}))
    b = _view("b", 2, 1.0, global_ld_inst=4e6, inspect=_hot(LDG={"8": 0, "16": 0, "32": 4, "64": 0, "128": 0}))
    assert "wider" in _load_text(a, b, "global_ld_inst")
    # same widths, fewer loads per math instruction: not "wider"
    a = _view("a", 1, 1.0, global_ld_inst=5.4e8, inspect=_hot(16, LDG={"32": 32}))
    b = _view("b", 2, 1.0, global_ld_inst=1.7e7, inspect=_hot(128, LDG={"32": 8}))
    text = _load_text(a, b, "global_ld_inst")
    assert "wider" not in text and "per math instruction" in text
    # a wider load of ANOTHER kind does not make these loads wider
    a = _view("a", 1, 1.0, shared_ld_inst=5e8, inspect=_hot(LDS={"32": 64}, LDG={"32": 2}))
    b = _view("b", 2, 1.0, shared_ld_inst=1e8, inspect=_hot(LDS={"32": 16}, LDG={"128": 2}))
    assert "wider" not in _load_text(a, b, "shared_ld_inst")
    # no inspection: no made-up cause
    a = _view("a", 1, 1.0, global_ld_inst=8e6)
    b = _view("b", 2, 1.0, global_ld_inst=1e6)
    text = _load_text(a, b, "global_ld_inst")
    assert "wider" not in text and "not inspected" in text


def test_shared_loads_that_became_ldmatrix_are_named_so():
    a = _view("warp_tiling", 15, 42.0, shared_ld_inst=1.7e7, inspect=_hot(512, LDS={"32": 0, "64": 0, "128": 32}))
    b = _view("wmma", 16, 183.0, shared_ld_inst=3.3e4, inspect=_hot(32, LDS={"128": 0}, LDSM={"128": 12}))
    text = _load_text(a, b, "shared_ld_inst")
    assert "ldmatrix" in text and "LDSM" in text and "tensor cores" in text
    assert "LDS.128" not in text and "wider" not in text


def test_explain_step_without_counters_says_so():
    st = S.explain_step(_view("a", 1, 1.0), _view("b", 2, 1.01))
    assert "about as fast" in st["sentence"] and "no counters recorded" in st["sentence"]


def test_small_conflict_counts_are_noise():
    a = _view("a", 1, 1.0, bank_conflicts_ld=0.0, shared_ld_wavefronts=1e9)
    b = _view("b", 2, 1.0, bank_conflicts_ld=3.7e3, shared_ld_wavefronts=1e9)
    assert not S.explain_step(a, b)["observations"]


# ---- the figures ---------------------------------------------------------------------------------

def test_every_stall_series_has_its_own_colour(results):
    """Eight reasons and "other": nine series, each drawn in a colour of its own."""
    drawn: dict = {}
    assert F.fig_stalls(results, drawn)
    series = drawn["series"]
    assert len(series) == 9 and series[-1][0] == "other"
    assert {"not selected", "other"} <= {label for label, _ in series}
    colours = [c for _, c in series]
    assert len(set(colours)) == len(colours), series


def test_every_sweep_line_has_its_own_colour(results):
    """The default colour cycle drew rung 11 in a green next to cuBLAS's green."""
    drawn: dict = {}
    assert F.fig_sweep(results, drawn)
    colours = [c for _, c in drawn["series"]]
    assert len(drawn["series"]) == 5 and len(set(colours)) == len(colours), drawn["series"]
    from matplotlib.colors import to_rgb

    def far(a, b):
        return sum(abs(x - y) for x, y in zip(to_rgb(a), to_rgb(b))) > 0.3
    assert all(far(a, b) for i, a in enumerate(colours) for b in colours[i + 1:]), drawn["series"]


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_roofline_labels_do_not_overlap(results):
    drawn: dict = {}
    assert F.fig_roofline(results, drawn)
    boxes = drawn["labels"]                     # (text, (x0, y0, x1, y1)) in pixels, as drawn
    assert len(boxes) == 18                     # 16 rungs and cuBLAS in two dtypes
    bad = [(a[0], b[0]) for i, a in enumerate(boxes) for b in boxes[i + 1:] if _overlaps(a[1], b[1])]
    assert not bad, f"overlapping labels: {bad}"


def test_roofline_draws_the_l2_roof_from_the_counters_as_a_lower_bound(results):
    drawn: dict = {}
    F.fig_roofline(results, drawn)
    roofs = {r["name"]: r for r in drawn["roofs"]}
    assert {"DRAM measured (copy)", "DRAM theoretical", "L2"} <= set(roofs)
    l2 = roofs["L2"]
    # no L2 bandwidth in the document: the highest L2 rate of a profiled launch (cuBLAS fp16 here:
    # l2 bytes / duration) is a lower bound of it, and the caption says so
    p = results["profile"]["cublas_fp16"]
    assert l2["Bps"] == pytest.approx(p["l2_bytes"] / p["duration_s"])
    assert l2["basis"] == "lower bound"
    assert drawn["l2_points"] == 18
    assert any("lower bound" in n and "L2" in n for n in drawn["notes"])


def test_roofline_prefers_a_measured_l2_bandwidth_and_leaves_l2_points_out_without_one(results):
    doc = copy.deepcopy(results)
    doc["ceilings"]["l2_bw_Bps"] = 9.0e12
    drawn: dict = {}
    F.fig_roofline(doc, drawn)
    l2 = next(r for r in drawn["roofs"] if r["name"] == "L2")
    assert l2["Bps"] == 9.0e12 and l2["basis"] == "measured"
    # neither measured nor derivable (no launch durations): no L2 roof, no L2 points, and why
    doc = copy.deepcopy(results)
    for p in doc["profile"].values():
        p.pop("duration_s", None)
    drawn = {}
    F.fig_roofline(doc, drawn)
    assert "L2" not in {r["name"] for r in drawn["roofs"]}
    assert drawn["l2_points"] == 0
    assert any("L2" in n and "left out" in n for n in drawn["notes"])


def test_roofline_caption_names_its_l2_roof(built):
    _, html_path, _ = built
    text = open(html_path, encoding="utf-8").read()
    cap = re.search(r'<figure id="fig_roofline">.*?<figcaption>(.*?)</figcaption>', text, re.S).group(1)
    assert "L2" in cap and "lower bound" in cap


# ---- the files -----------------------------------------------------------------------------------

def test_html_is_self_contained_with_every_figure(built, results):
    out, html_path, _ = built
    text = open(html_path, encoding="utf-8").read()
    assert text.startswith("<!DOCTYPE html>")
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', text)
    assert len(imgs) == N_FIGURES
    for src in imgs:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    # nothing fetched from anywhere: no external src/href, no stylesheet or script files
    assert not re.search(r'(src|href)\s*=\s*"(?!data:|#)', text)
    assert "<link" not in text and "<script" not in text and "url(" not in text
    assert "NVIDIA H100 80GB HBM3" in text
    for slug in _recorded(results):
        assert f">{slug}<" in text
    assert text.count("<li>") == len(_recorded(results)) - 1


def test_markdown_twin_with_its_images(built, results):
    out, _, md_path = built
    md = open(md_path, encoding="utf-8").read()
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(refs) == N_FIGURES
    for ref in refs:
        p = os.path.join(out, ref)
        assert os.path.isfile(p) and open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "| # | rung | dtype |" in md
    assert md.count("\n| ") > 2 * len(_recorded(results))


def _md_section(md: str, heading: str) -> str:
    return md.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]


def test_step_list_is_numbered_once_and_stays_one_list(built, results):
    """The sentences started with the rung's own number ("2. coalesced vs 1. naive"): in an
    ordered list that read "1. 2. coalesced", and in Markdown it opened a list inside each item."""
    markdown_it = pytest.importorskip("markdown_it")
    out, html_path, md_path = built
    md = open(md_path, encoding="utf-8").read()
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(_md_section(md, "What each step changed"))
    lists = [t for t in tokens if t.type in ("bullet_list_open", "ordered_list_open")]
    assert len(lists) == 1, [t.type for t in lists]          # one list, none nested in its items
    assert sum(t.type == "list_item_open" for t in tokens) == len(_recorded(results)) - 1
    # underscores of __restrict__, __ldg and __syncthreads are text, not emphasis
    inline = [c.type for t in tokens if t.type == "inline" for c in t.children or ()]
    assert "strong_open" not in inline and "em_open" not in inline
    text = open(html_path, encoding="utf-8").read()
    items = re.findall(r"<li>(.*?)</li>", text.split('id="steps"', 1)[1].split("<h2", 1)[0], re.S)
    assert len(items) == len(_recorded(results)) - 1
    assert not [i for i in items if re.match(r"\s*\d+\.", i)], "a step item starts with a number of its own"


def _md_captions(md: str) -> dict[str, str]:
    """{figure: its caption} of the Markdown twin (the italic line under each image)."""
    return {ref[:-4]: cap for ref, cap in re.findall(r"!\[[^\]]*\]\(([^)]+)\)\n\n\*(.*)\*\n", md)}


def test_headings_and_captions_name_the_dtypes_of_their_rows(built, results, tmp_path):
    """The ladder mixes the report's dtype (fp32) and the rungs that do not take it (wmma, fp16):
    the intro, the ladder's heading and the figures' captions say which rows are which."""
    out, _, md_path = built
    md = open(md_path, encoding="utf-8").read()
    row_dtypes = {row[2] for row in R.ladder_rows(results)}
    assert row_dtypes == {"fp32", "fp16"}
    heading = next(line for line in md.splitlines() if line.startswith("## The ladder"))
    intro = md.splitlines()[2]
    for text in (heading, intro):
        assert "fp32" in text and "fp16" in text and "wmma" in text, text
    assert "16 rungs, fp32" not in intro
    caps = _md_captions(md)
    assert "fp16" in caps["fig_ladder"] and "fp32" in caps["fig_ladder"]
    assert "fp32" in caps["fig_sweep"] and "fp16" not in caps["fig_sweep"]      # the sweep is fp32 only
    # one dtype: the heading says it, and no other
    one = copy.deepcopy(results)
    one["bench"]["results"] = [e for e in one["bench"]["results"] if e.get("dtype") == "fp32"]
    one["inspect"].pop("wmma")
    for k in ("wmma", "cublas_fp16"):
        one["profile"].pop(k)
    _, md_path = R.build(one, str(tmp_path / "one"))
    md = open(md_path, encoding="utf-8").read()
    heading = next(line for line in md.splitlines() if line.startswith("## The ladder"))
    assert "fp32" in heading and "fp16" not in heading


def test_tensor_core_rungs_show_their_tensor_instruction_share(results):
    """wmma's hot loop has no FFMA: its math is HMMA, and the tables say so (not 'FFMA 0%')."""
    col = next(c for c in R.LADDER_COLUMNS if c.startswith("math share"))
    assert "FFMA" in col and "tensor" in col
    i = R.LADDER_COLUMNS.index(col)
    rows = {r[1]: r for r in R.ladder_rows(results)}
    h = results["inspect"]["wmma"]["hot_loop"]
    assert rows["wmma"][i] == f"HMMA {100 * h['hmma'] / h['n_instructions']:.0f}%" == "HMMA 11%"
    assert rows["warp_tiling"][i] == "FFMA 80%"
    assert rows["cuBLAS"][i] == "n/a"                       # not inspected
    j = R.STEP_COLUMNS.index(next(c for c in R.STEP_COLUMNS if c.startswith("math share")))
    steps = {r[0]: r for r, _ in R.step_rows(results)}
    assert steps["15. warp_tiling → 16. wmma"][j] == "FFMA 80% → HMMA 11%"
    assert not any(c == "FFMA share" for c in R.LADDER_COLUMNS + R.STEP_COLUMNS)


def test_the_page_says_how_the_benchmark_was_timed_from_its_settings(results, tmp_path):
    doc = copy.deepcopy(results)
    doc["bench"]["settings"]["flush_l2"] = False
    html_path, md_path = R.build(doc, str(tmp_path / "hot"))
    for path in (html_path, md_path):
        text = open(path, encoding="utf-8").read()
        assert "L2 flushed" not in text and "L2 not flushed" in text
    doc["bench"]["settings"]["timing"] = {"l2": "cold", "spin_us": 1000.0, "min_samples": 10, "max_samples": 100}
    html_path, _ = R.build(doc, str(tmp_path / "cold"))
    text = open(html_path, encoding="utf-8").read()
    assert "L2 flushed before each timed run" in text and "10 to 100" in text


def test_the_timing_text_names_the_order_of_the_rounds_where_it_is_recorded():
    doc = {"settings": {"timing": {"l2": "cold", "spin_us": 1000.0, "min_samples": 10, "max_samples": 100,
                                   "order": "balanced"}}, "results": [{"kernel": "cublas"}]}
    assert "rounds in a balanced order" in M.timing_text(doc)
    doc["settings"]["timing"]["order"] = "rotate"
    assert "rounds in a rotating order" in M.timing_text(doc)
    del doc["settings"]["timing"]["order"]
    assert "the order of the rounds not recorded" in M.timing_text(doc)


def _bases(peaks: dict) -> tuple[str, str]:
    """How the page writes the basis of the fp32 and of the tensor-core peak."""
    return (f"{peaks['sm_count']} SMs x {peaks['fp32_fma_per_clk_sm']} FMA/clk/SM x 2 flop/FMA x {peaks['clock_mhz']:.0f} MHz",
            f"{peaks['sm_count']} SMs x {peaks['tensor_flop_per_clk_sm']} flop/clk/SM x {peaks['clock_mhz']:.0f} MHz")


def test_every_peak_on_the_page_states_its_basis(results, built):
    """The fp16 peak (1071 TFLOP/s at the maximum SM clock; the datasheet's 989 is at a lower
    clock) is only meaningful with its basis: the env table, the ladder note and the captions of the
    figures that draw a peak say it, from the document's env["peaks"]."""
    _, html_path, md_path = built
    fp32, tensor = _bases(results["bench"]["env"]["peaks"])
    rows = dict(R.env_rows(results))
    basis = " ".join(v for k, v in rows.items() if k.startswith("peak basis"))
    assert fp32 in basis and tensor in basis
    # this document predates "clock_source": the clock is the driver's maximum (env max_sm_clock_mhz)
    assert "maximum SM clock" in basis
    md = open(md_path, encoding="utf-8").read()
    caps = _md_captions(md)
    for name in ("fig_ladder", "fig_roofline"):
        assert fp32 in caps[name] and tensor in caps[name], name
    text = open(html_path, encoding="utf-8").read()
    assert "% peak: of" in text and "peak basis" in text


def test_the_peak_basis_comes_from_the_document(results, tmp_path):
    doc = copy.deepcopy(results)
    peaks = doc["bench"]["env"]["peaks"]
    peaks.update(clock_mhz=1500, sm_count=100, clock_source="a clock the test chose")
    tf = peaks["sm_count"] * peaks["tensor_flop_per_clk_sm"] * peaks["clock_mhz"] * 1e6 / 1e12
    f32 = peaks["sm_count"] * peaks["fp32_fma_per_clk_sm"] * 2 * peaks["clock_mhz"] * 1e6 / 1e12
    for part in (doc["bench"]["env"]["peak_tflops"], doc["ceilings"]["peak_tflops"]):
        part.update(fp32=f32, fp16=tf, bf16=tf)
    fp32, tensor = _bases(peaks)
    rows = dict(R.env_rows(doc))
    basis = " ".join(v for k, v in rows.items() if k.startswith("peak basis"))
    assert fp32 in basis and tensor in basis and "a clock the test chose" in basis
    # a peak that is not SMs x rate x clock of the document: its basis is not recorded, not guessed
    doc["ceilings"]["peak_tflops"]["fp16"] = 999.0
    rows = dict(R.env_rows(doc))
    assert "not recorded" in rows.get("peak basis (fp16)", "")


def test_report_code_hard_codes_no_device_numbers():
    src = os.path.join(os.path.dirname(DATA), os.pardir, "src", "gemmlab", "report")
    for name in os.listdir(src):
        if name.endswith(".py"):
            text = open(os.path.join(src, name), encoding="utf-8").read()
            assert not re.search(r"\b(1980|1830|989|1070|1071)\b", text), name


def test_build_from_partial_results(tmp_path, results):
    """Only the benchmark: a page with the ladder figure, no roofline, no crash."""
    part = {"bench": copy.deepcopy(results["bench"])}
    html_path, md_path = R.build(part, str(tmp_path / "a"))
    text = open(html_path).read()
    assert text.count("<img ") == 1 and "fig_ladder" in text
    # nothing at all
    html_path, _ = R.build({}, str(tmp_path / "b"))
    assert "<img" not in open(html_path).read()
    # failed profiles and a failed rung are shown, not fatal
    broken = copy.deepcopy(results)
    broken["profile"]["smem"] = {"error": "NcuError: boom", "dtype": "fp32"}
    broken["bench"]["results"][3].update(status="failed", tflops=None, ms=None, verified=False)
    broken["errors"] = {"profile smem": "NcuError: boom"}
    html_path, _ = R.build(broken, str(tmp_path / "c"))
    text = open(html_path).read()
    assert text.count("<img ") == N_FIGURES
    assert "What could not be measured" in text and "NcuError: boom" in text and ">failed<" in text


def test_cli_from_json(tmp_path):
    from gemmlab.cli import main

    out = tmp_path / "rep"
    assert main(["report", "--from-json", os.path.join(DATA, "report_results.json"), "--out", str(out)]) == 0
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    assert sorted(p.name for p in out.glob("*.png")) == sorted(f"{n}.png" for n, _, _ in F.FIGURES)


def _report_cli(path, out, capsys) -> tuple[int, str]:
    from gemmlab.cli import main

    rc = main(["report", "--from-json", str(path), "--out", str(out)])
    return rc, capsys.readouterr().err


def test_cli_from_a_missing_file_says_so_in_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    rc, err = _report_cli(missing, tmp_path / "out", capsys)
    assert rc == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and str(missing) in err and "no such file" in err
    assert not (tmp_path / "out").exists()


def test_cli_from_a_file_that_is_not_json_names_it_and_the_position(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"bench": {"results": []},\n "sweep": ,}', encoding="utf-8")
    rc, err = _report_cli(bad, tmp_path / "out", capsys)
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert str(bad) in err and "not valid JSON" in err and "line 2 column 11" in err
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    rc, err = _report_cli(binary, tmp_path / "out", capsys)
    assert rc == 1 and len(err.strip().splitlines()) == 1 and str(binary) in err


@pytest.mark.parametrize("content", ['[1, 2]', '"text"', '{"hello": 1}', "{}", '{"results": "x"}'])
def test_cli_refuses_json_that_is_not_a_results_document(tmp_path, capsys, content):
    other = tmp_path / "other.json"
    other.write_text(content, encoding="utf-8")
    rc, err = _report_cli(other, tmp_path / "out", capsys)
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert str(other) in err and "gemmlab bench --json" in err
    assert not (tmp_path / "out").exists()


def test_cli_from_a_bench_json_renders_the_ladder_and_says_what_is_missing(tmp_path, capsys):
    """benchmarks/results/h100_fp32.json (what the README points to) is a `gemmlab bench --json`
    result: its ladder table and figure are drawn, and the page says the rest is not in it."""
    bench = os.path.join(os.path.dirname(DATA), os.pardir, "benchmarks", "results", "h100_fp32.json")
    rc, err = _report_cli(bench, tmp_path / "out", capsys)
    assert rc == 0, err
    text = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert text.count("<img ") == 1 and 'id="fig_ladder"' in text
    for slug in ("naive", "warp_tiling"):
        assert f">{slug}<" in text
    assert ">cuBLAS<" in text
    assert "not in this file" in text and "counters" in text and "sweep" in text
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "not in this file" in md
    # its slow rungs were timed at the reduced shape: the intro and the step across it say so
    assert "4096^3 (naive, coalesced, warp_shuffle at 2048^3)" in md
    assert "smem (rung 4) vs warp_shuffle (rung 3) [2048^3 to 4096^3]:" in text


def test_collect_needs_a_gpu(monkeypatch):
    import gemmlab.core.driver
    from gemmlab.core.driver import NoGPUError

    monkeypatch.setattr(gemmlab.core.driver, "gpu_available", lambda: False)
    with pytest.raises(NoGPUError, match="--from-json"):
        C.collect(progress=False)


# ---- in a browser --------------------------------------------------------------------------------

_CHECK = ("<script>window.addEventListener('load',function(){var im=document.images,ok=0;"
          "for(var i=0;i<im.length;i++){if(im[i].complete&&im[i].naturalWidth>0)ok++;}"
          "var d=document.createElement('div');d.id='imgcheck';d.textContent='IMGCHECK '+ok+'/'+im.length;"
          "document.body.appendChild(d);});</script>")


def _chromium(args, timeout=120):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-dev-shm-usage", "--no-first-run", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(not os.path.exists(CHROMIUM),
                    reason="/usr/bin/chromium is missing (apt-get install -y chromium): the browser check is skipped")
def test_page_renders_in_headless_chromium(built, tmp_path):
    _, html_path, _ = built
    # a copy with a probe that counts the decoded images once the page has loaded
    probe = tmp_path / "probe.html"
    probe.write_text(open(html_path, encoding="utf-8").read().replace("</body>", _CHECK + "</body>"), encoding="utf-8")
    r = _chromium(["--virtual-time-budget=10000", "--dump-dom", f"file://{probe}"])
    m = re.search(r"IMGCHECK (\d+)/(\d+)", r.stdout)
    assert m, f"the probe did not run; chromium said:\n{r.stderr[-2000:]}"
    assert m.group(1) == m.group(2) == str(N_FIGURES)
    # and the page itself (no probe) paints: a screenshot that is not blank
    shot = tmp_path / "shot.png"
    _chromium(["--hide-scrollbars", "--window-size=1280,2200", f"--screenshot={shot}", f"file://{html_path}"])
    assert shot.is_file()
    from PIL import Image

    with Image.open(shot) as im:
        im = im.convert("L")
        lo, hi = im.getextrema()
        colors = len(im.getcolors(maxcolors=1 << 16) or [])
    assert hi - lo > 100 and colors > 50, "the screenshot is blank"


def test_a_peer_stands_beside_cublas_and_is_not_a_step_of_the_ladder():
    from gemmlab.report.model import ladder, peers
    from gemmlab.report.steps import steps

    def rec(kernel, number, ms, peer=False):
        return {"kernel": kernel, "number": number, "peer": peer, "title": kernel, "dtype": "fp32", "M": 4096,
                "N": 4096, "K": 4096, "ms": ms, "tflops": 2 * 4096**3 / (ms * 1e-3) / 1e12, "status": "ok",
                "verified": True}

    doc = {"bench": {"results": [rec("cublas", 0, 2.67, True), rec("triton", 0, 3.02, True),
                                 rec("double_buffer", 14, 3.27), rec("warp_tiling", 15, 3.24)]}}
    rungs, cublas = ladder(doc)
    assert [r.slug for r in rungs] == ["double_buffer", "warp_tiling"] and "fp32" in cublas
    assert [p.slug for p in peers(doc)] == ["triton"]
    assert len(steps(doc)) == 1 and "triton" not in json.dumps(steps(doc))
    rows = R.ladder_rows(doc)
    assert [r[1] for r in rows] == ["double_buffer", "warp_tiling", "cuBLAS", "triton"]


def test_a_rung_steps_up_from_the_latest_earlier_rung_of_its_dtype(results):
    """Rung 18 (fp32) is explained against rung 15, not the fp16 rung numbered before it; the first
    fp16 rung, with no fp16 rung before it, against the rung just before it."""
    doc = copy.deepcopy(results)
    entries = doc["bench"]["results"]
    for slug, like in (("async_simt", "warp_tiling"), ("mma_sync", "wmma")):   # rungs 17 and 18
        if not any(e["kernel"] == slug for e in entries):
            entries.append(dict(next(e for e in entries if e["kernel"] == like), kernel=slug, number=None))
    rungs, _ = M.ladder(doc)
    slugs = [r.slug for r in rungs]
    assert slugs[-4:] == ["warp_tiling", "wmma", "mma_sync", "async_simt"]
    pairs = [tuple(x.split(". ")[1] for x in row[0].split(" → ")) for row, _ in R.step_rows(doc)]
    assert pairs[-3:] == [("warp_tiling", "wmma"), ("wmma", "mma_sync"), ("warp_tiling", "async_simt")]
    assert len(S.steps(doc)) == len(rungs) - 1
