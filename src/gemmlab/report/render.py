"""The page: the ladder, step and environment tables of a results document, rendered as one
self-contained HTML file (inline CSS, figures as base64 PNG, no script, no external resource) and
as its Markdown twin (figures as PNG files beside it). Pure: needs no GPU."""

from __future__ import annotations

import base64
import datetime as _dt
import html
import os
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..core.shapes import CEILING_SHAPE
from . import fmt
from .figures import FIGURES
from .model import (DATASHEET_NOTE, dig, dtype_text, env_of, ladder, main_dtype, peak_basis, peak_tflops, peers,
                    stall_label, timing_text)
from .steps import explain_step, predecessor
from .tuning import section as tuning_section

# =============================================================================================
# Tables
# =============================================================================================

MATH_SHARE = "math share (FFMA / tensor)"    # FFMA, or HMMA/HGMMA on the tensor cores: see RungView.math_share
LADDER_COLUMNS = ("#", "rung", "dtype", "ms", "TFLOP/s", "vs cuBLAS", "% peak", "ok", "DRAM", "L2",
                  "ld conflicts", "st conflicts", "occupancy", "IPC", MATH_SHARE, "top stall", "regs")


def ladder_rows(results: Mapping) -> list[list[str]]:
    rungs, cublas = ladder(results)
    rows = []
    for r in list(rungs) + [cublas[d] for d in cublas] + peers(results):
        b, p = r.bench, r.profile
        ts = r.top_stall()
        regs = dig(r.inspect, "resources", "registers") or p.get("registers")
        verified = b.get("verified")
        rows.append([
            "" if r.number is None else str(r.number),
            "cuBLAS" if r.slug == "cublas" else r.slug,
            r.dtype,
            "n/a" if b.get("ms") is None else f"{b['ms']:.3f}",
            fmt.tflops(b.get("tflops")),
            "n/a" if b.get("vs_cublas") is None else f"{b['vs_cublas']:.2f}",
            "n/a" if b.get("pct_peak") is None else f"{b['pct_peak']:.1f}",
            (b.get("status") if b.get("status") not in (None, "ok") else
             {True: "yes", False: "NO", None: "-"}.get(verified, str(verified))),
            fmt.nbytes(p.get("dram_bytes")),
            fmt.nbytes(p.get("l2_bytes")),
            fmt.number(p.get("bank_conflicts_ld")),
            fmt.number(p.get("bank_conflicts_st")),
            fmt.percent(p.get("achieved_occupancy")),
            "n/a" if p.get("ipc") is None else f"{p['ipc']:.2f}",
            math_cell(r.math_share),
            "n/a" if not ts else f"{stall_label(ts['reason'])} {100 * ts['share']:.0f}%",
            "n/a" if regs is None else str(int(regs)),
        ])
    return rows


STEP_COLUMNS = ("step", "what it adds", "speed-up", "DRAM bytes", "L2 bytes", "ld conflicts", "st conflicts",
                MATH_SHARE, "top stall", "occupancy")


def math_cell(share: tuple[str, float] | None) -> str:
    """'FFMA 80%', 'HMMA 11%', or 'n/a' (not inspected)."""
    return "n/a" if share is None else f"{share[0]} {share[1]:.0f}%"


def _pair(v, f) -> str:
    return f"{f(v[0])} → {f(v[1])}"


def _stall_cell(s) -> str:
    return "n/a" if not s else f"{stall_label(s['reason'])} {100 * (s['share'] or 0):.0f}%"


def step_rows(results: Mapping) -> list[tuple[list[str], str]]:
    """(table row, sentence) of every step up the ladder."""
    rungs, _ = ladder(results)
    out = []
    for i in range(1, len(rungs)):
        a, b = predecessor(rungs, i), rungs[i]
        st = explain_step(a, b)
        out.append(([
            f"{a.label} → {b.label}",
            b.summary,
            "n/a" if st["speedup"] is None else f"{st['speedup']:.2f}x",
            _pair(st["dram_bytes"], fmt.nbytes),
            _pair(st["l2_bytes"], fmt.nbytes),
            _pair(st["bank_conflicts_ld"], fmt.number),
            _pair(st["bank_conflicts_st"], fmt.number),
            _pair(st["math_share"], math_cell),
            _pair(st["top_stall"], _stall_cell),
            _pair(st["achieved_occupancy"], fmt.percent),
        ], st["sentence"]))
    return out


def _clock_text(c) -> str | None:
    """analysis.environment.clocks() -> 'SM <MHz> MHz, memory <MHz> MHz, <T> C, <P> W (clock events: ...)'."""
    if not isinstance(c, Mapping):
        return None if c is None else str(c)
    parts = []
    if c.get("sm_mhz") is not None:
        parts.append(f"SM {c['sm_mhz']:.0f} MHz")
    if c.get("mem_mhz") is not None:
        parts.append(f"memory {c['mem_mhz']:.0f} MHz")
    if c.get("temperature_c") is not None:
        parts.append(f"{c['temperature_c']:.0f} C")
    if c.get("power_w") is not None:
        parts.append(f"{c['power_w']:.0f} W")
    text = ", ".join(parts) or ", ".join(f"{k}={fmt.plain(v)}" for k, v in c.items() if v is not None)
    reasons = [r for r in (c.get("clock_event_reasons") or []) if r != "GpuIdle"]
    return text + (f" (clock events: {', '.join(reasons)})" if reasons else "")


def _peak_rows(results: Mapping, env: Mapping) -> list[tuple[str, str]]:
    """'peak basis (fp16, bf16)': how each peak the page compares with is made (dtypes with the same
    basis share a row), and the document's own note on the peaks."""
    by_text: dict[str, list[str]] = {}
    dts = list(dict.fromkeys(list(env.get("peak_tflops") or {}) + list(dig(results, "ceilings", "peak_tflops") or {})))
    for d in dts:
        v = peak_tflops(results, d)
        if v:
            by_text.setdefault(f"{fmt.tflops(v)} TFLOP/s = {peak_basis(env, d, v)}", []).append(d)
    rows = [(f"peak basis ({', '.join(ds)})", text) for text, ds in by_text.items()]
    if rows and any("not recorded" not in t for t in by_text):
        rows.append(("peak note", DATASHEET_NOTE + "."))
    note = dig(env, "peaks", "note")
    if note:
        rows.append(("peak note (from the document)", str(note)))
    return rows


def env_rows(results: Mapping) -> list[tuple[str, str]]:
    """(label, text) rows of the machine-and-software table, from the bench JSON's env
    (analysis.environment.collect()) and the report's own env."""
    env = env_of(results)
    settings = dig(results, "bench", "settings", default={}) or {}
    rows: list[tuple[str, str]] = []

    def add(k, v):
        if v is None or v == {} or v == [] or v == "":
            return
        if isinstance(v, Mapping):
            v = ", ".join(f"{kk}={fmt.plain(vv)}" for kk, vv in v.items()
                          if vv is not None and not isinstance(vv, (dict, list)))
        elif isinstance(v, (list, tuple)):
            v = ", ".join(map(fmt.plain, v))
        rows.append((k, str(v)))

    add("GPU", env.get("gpu_name"))
    add("SMs", env.get("sm_count"))
    add("compute capability", env.get("compute_capability") or env.get("cc"))
    add("max SM clock", None if env.get("max_sm_clock_mhz") is None else f"{env['max_sm_clock_mhz']:.0f} MHz")
    add("peak TFLOP/s", {k: fmt.tflops(v) for k, v in (env.get("peak_tflops") or {}).items() if v})
    rows += _peak_rows(results, env)
    add("clocks before the benchmark", _clock_text(env.get("clocks_before")))
    add("clocks after the benchmark", _clock_text(env.get("clocks_after")))
    add("driver", env.get("driver_version") or env.get("driver"))
    add("CUDA (driver)", env.get("cuda_driver_version") or env.get("cuda"))
    add("NVRTC", env.get("nvrtc_version") or env.get("nvrtc"))
    add("Nsight Compute", env.get("ncu"))
    libs = env.get("libraries") or {}
    if isinstance(libs, Mapping):
        add("libraries", {k: v for k, v in libs.items() if k not in ("platform", "cupy_dist") and v})
        add("platform", libs.get("platform"))
    add("gemmlab", env.get("gemmlab_version") or dig(results, "bench", "gemmlab_version"))
    if env.get("git_commit"):
        add("source", f"{env['git_commit'][:12]}{' (uncommitted changes)' if env.get('git_dirty') else ''}")
    add("measured", dig(results, "bench", "timestamp") or results.get("timestamp"))
    add("bench settings", settings)
    if results.get("bench"):
        add("timing", timing_text(results["bench"]))
    c = results.get("ceilings") or {}
    if c.get("dram_bw_Bps"):
        add("DRAM bandwidth (copy)", f"{c['dram_bw_Bps'] / 1e12:.2f} TB/s measured"
            + (f", {c['dram_bw_theoretical_Bps'] / 1e12:.2f} TB/s theoretical" if c.get("dram_bw_theoretical_Bps") else ""))
    if c.get("cublas_tflops"):
        add(f"cuBLAS at {'x'.join(map(str, c.get('cublas_shape') or CEILING_SHAPE))}",
            {k: fmt.tflops(v) for k, v in c["cublas_tflops"].items()})
    return rows


# =============================================================================================
# The page
# =============================================================================================

_CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.82em;margin:.6em 0}th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top}
th{background:#f3f5f8;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr:nth-child(even) td{background:#fafbfc}figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}.env td:first-child{font-weight:600;white-space:nowrap}
ul.steps li{margin:.35em 0}.muted{color:#777;font-size:.85em}
.note{background:#fff8e5;border-left:4px solid #e0a800;padding:.4em .8em}
"""


def _h(s) -> str:
    return html.escape(str(s), quote=True)


def _html_table(cols: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = ()) -> str:
    num = set(numeric)
    out = ["<table><thead><tr>" + "".join(f"<th>{_h(c)}</th>" for c in cols) + "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td{" class=n" if i in num else ""}>{_h(v)}</td>' for i, v in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _md_text(s) -> str:
    """Text as Markdown shows it literally: backslashes, backticks, asterisks, brackets and angle
    brackets escaped, and the underscores that could open emphasis (``__restrict__``, ``__ldg``;
    not the one inside ``warp_tiling``)."""
    s = re.sub(r"([\\`*\[\]<>])", r"\\\1", str(s))
    return re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", s)


def _md_cell(s) -> str:
    return _md_text(s).replace("|", "\\|").replace("\n", " ")


def _md_table(cols: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    out = ["| " + " | ".join(map(_md_cell, cols)) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(map(_md_cell, r)) + " |" for r in rows]
    return "\n".join(out)


@dataclass
class _Page:
    """What both renderings say: the texts, the tables and the figures."""

    title: str
    intro: str
    ladder_heading: str                 # names the dtype of the rows under it
    notes: list[str]                    # what the page must say before anything else (what is not in it)
    ladder_note: str                    # where the ladder table's columns come from
    env_rows: list[tuple[str, str]]
    ladder_rows: list[list[str]]
    step_rows: list[tuple[list[str], str]]
    errors: Mapping
    generated: str
    figs: dict[str, bytes]
    captions: dict[str, str]
    tuning: list[dict]                  # report.tuning.section: one table (and figure) per study


def _shape_text(rungs) -> str:
    """The shape most rungs were timed at, and the rungs timed at another: '4096^3 (naive at 2048^3)'."""
    shapes = {r.slug: fmt.shape_label(r.bench) for r in rungs if r.bench}
    if not shapes:
        return "?"
    common = max(set(shapes.values()), key=list(shapes.values()).count)
    others: dict[str, list[str]] = {}
    for slug, sh in shapes.items():
        if sh != common:
            others.setdefault(sh, []).append(slug)
    return common + (" (" + "; ".join(f"{', '.join(s)} at {sh}" for sh, s in others.items()) + ")" if others else "")


def _ladder_note(results: Mapping) -> str:
    """Where the ladder table's columns come from, the benchmark's method read from its settings."""
    return (f"ms, TFLOP/s, vs cuBLAS and % peak: the benchmark ({timing_text(results.get('bench') or {})}); "
            "% peak: of the theoretical peak of the row's dtype (its peak basis: Machine and software). "
            "DRAM, L2, conflicts, occupancy, IPC, top stall: Nsight Compute, one launch at the profile shape. "
            "Math share: the share of the hot loop's SASS instructions that do the math, FFMA on the CUDA cores or "
            "HMMA/HGMMA on the tensor cores (gemmlab inspect).")


def _page(results: Mapping) -> _Page:
    figs: dict[str, bytes] = {}
    captions: dict[str, str] = {}
    for name, caption, fn in FIGURES:
        drawn: dict = {}
        png = fn(results, drawn)
        if png:
            figs[name] = png
            captions[name] = " ".join([caption] + list(drawn.get("notes") or ()))
    d = main_dtype(results)
    rungs, _ = ladder(results)
    gpu = dig(results, "bench", "env", "gpu_name") or dig(results, "env", "gpu_name") or "unknown GPU"
    shape = _shape_text(rungs)
    pshape = next((r.profile.get("shape") for r in rungs if r.profile.get("shape")), None)
    title = f"gemmlab worklog: the GEMM ladder on {gpu}"
    dts = dtype_text(rungs, d)
    mixed = len({r.dtype for r in rungs}) > 1
    intro = (f"{len(rungs)} rungs timed at {shape}, "
             + (f"each beside cuBLAS in its dtype: {dts}" if mixed else f"in {dts}, beside cuBLAS in {dts}")
             + (f"; hardware counters (Nsight Compute) at {'x'.join(map(str, pshape))}" if pshape else "") + ".")
    srows = step_rows(results)
    lrows = ladder_rows(results)
    erows = env_rows(results)
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return _Page(title, intro, f"The ladder: {dts}", [str(n) for n in results.get("notes") or ()],
                 _ladder_note(results), erows, lrows, srows, results.get("errors") or {}, generated, figs,
                 captions, tuning_section(results))


def _alt(caption: str) -> str:
    """A figure's alt text: the first sentence of its caption."""
    return caption.split(". ", 1)[0].rstrip(".")


def _html(p: _Page) -> str:
    H = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         '<meta name="viewport" content="width=device-width,initial-scale=1">',
         f"<title>{_h(p.title)}</title><style>{_CSS}</style></head><body>",
         f"<h1>{_h(p.title)}</h1>", f"<p>{_h(p.intro)}</p>", *(f'<p class="note">{_h(n)}</p>' for n in p.notes),
         '<h2 id="env">Machine and software</h2>',
         '<table class="env"><tbody>' + "".join(f"<tr><td>{_h(k)}</td><td>{_h(v)}</td></tr>" for k, v in p.env_rows)
         + "</tbody></table>"]
    H.append('<h2 id="figures">Figures</h2>')
    for name, png in p.figs.items():
        b64 = base64.b64encode(png).decode("ascii")
        H.append(f'<figure id="{name}"><img alt="{_h(_alt(p.captions[name]))}" src="data:image/png;base64,{b64}">'
                 f"<figcaption>{_h(p.captions[name])}</figcaption></figure>")
    H.append(f'<h2 id="ladder">{_h(p.ladder_heading)}</h2>')
    H.append(_html_table(LADDER_COLUMNS, p.ladder_rows, numeric=(0, 3, 4, 5, 6, 10, 11, 12, 13, 14, 16)))
    H.append(f'<p class="muted">{_h(p.ladder_note)}</p>')
    H.append('<h2 id="steps">What each step changed</h2>')
    if p.step_rows:
        H.append('<ul class="steps">' + "".join(f"<li>{_h(s)}</li>" for _, s in p.step_rows) + "</ul>")
        H.append(_html_table(STEP_COLUMNS, [r for r, _ in p.step_rows]))
    else:
        H.append("<p>Fewer than two rungs: no step to explain.</p>")
    H += _html_tuning(p.tuning)
    if p.errors:
        H.append('<h2 id="errors">What could not be measured</h2><ul>'
                 + "".join(f"<li><b>{_h(k)}</b>: {_h(v)}</li>" for k, v in p.errors.items()) + "</ul>")
    H.append(f'<p class="muted">Generated by gemmlab report on {_h(p.generated)}. Rebuild from the saved results with '
             "<code>gemmlab report --from-json results.json</code>.</p></body></html>")
    return "\n".join(H)


def _markdown(p: _Page) -> str:
    M = [f"# {_md_text(p.title)}", "", _md_text(p.intro), ""] + [x for n in p.notes for x in (f"> {_md_text(n)}", "")]
    M += ["## Machine and software", "", _md_table(("", ""), p.env_rows), "", "## Figures", ""]
    for name in p.figs:
        M += [f"![{_md_text(_alt(p.captions[name]))}]({name}.png)", "", f"*{_md_text(p.captions[name])}*", ""]
    M += [f"## {_md_text(p.ladder_heading)}", "", _md_table(LADDER_COLUMNS, p.ladder_rows), "",
          _md_text(p.ladder_note), "", "## What each step changed", ""]
    M += [f"- {_md_text(s)}" for _, s in p.step_rows] or ["Fewer than two rungs: no step to explain."]
    if p.step_rows:
        M += ["", _md_table(STEP_COLUMNS, [r for r, _ in p.step_rows])]
    M += _md_tuning(p.tuning)
    if p.errors:
        M += ["", "## What could not be measured", ""] + [f"- **{_md_text(k)}**: {_md_text(v)}" for k, v in p.errors.items()]
    M += ["", f"Generated by gemmlab report on {p.generated}. Rebuild: `gemmlab report --from-json results.json`.", ""]
    return "\n".join(M)


TUNING_INTRO = ("gemmlab tune's stored results on this GPU: the best configurations of each study (seed 001's "
                "table), with cuBLAS and the best peer timed in the same runs by the same engine.")


def _html_tuning(studies: list[dict]) -> list[str]:
    if not studies:
        return []
    H = ['<h2 id="tuning">Tuning</h2>', f"<p>{_h(TUNING_INTRO)}</p>"]
    for t in studies:
        H.append(f"<h3>{_h(t['title'])}</h3>")
        H.append(_html_table(t["columns"], t["rows"]))
        H.append(f'<p class="muted">{_h(t["caption"])}</p>')
        if t["figure"]:
            b64 = base64.b64encode(t["figure"]).decode("ascii")
            H.append(f'<figure id="{t["name"]}"><img alt="TFLOP/s over the search space" '
                     f'src="data:image/png;base64,{b64}"></figure>')
    return H


def _md_tuning(studies: list[dict]) -> list[str]:
    if not studies:
        return []
    M = ["", "## Tuning", "", _md_text(TUNING_INTRO)]
    for t in studies:
        M += ["", f"### {_md_text(t['title'])}", "", _md_table(t["columns"], t["rows"]), "", _md_text(t["caption"])]
        if t["figure"]:
            M += ["", f"![TFLOP/s over the search space]({t['name']}.png)"]
    return M


def render(results: Mapping) -> tuple[str, str, dict[str, bytes]]:
    """(html, markdown, {figure name: PNG bytes}); the markdown refers to '<name>.png' beside it."""
    page = _page(results)
    figs = dict(page.figs)
    figs.update({t["name"]: t["figure"] for t in page.tuning if t["figure"]})
    return _html(page), _markdown(page), figs


def build(results: Mapping, out_dir: str) -> tuple[str, str]:
    """Write report.html (self-contained) and report.md (+ its PNG figures) into ``out_dir``;
    returns (html path, md path). Pure: needs no GPU."""
    os.makedirs(out_dir, exist_ok=True)
    html_text, md_text, figs = render(results)
    html_path = os.path.join(out_dir, "report.html")
    md_path = os.path.join(out_dir, "report.md")
    with open(html_path, "w", encoding="utf-8") as fh:
        fh.write(html_text)
    with open(md_path, "w", encoding="utf-8") as fh:
        fh.write(md_text)
    for name, png in figs.items():
        with open(os.path.join(out_dir, f"{name}.png"), "wb") as fh:
            fh.write(png)
    return html_path, md_path
