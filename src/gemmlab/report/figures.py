"""The report's four figures, drawn with matplotlib (Agg figures, no pyplot state) as PNG bytes:
the ladder beside cuBLAS and the peak, TFLOP/s against size, the roofline from the counters, and
the warp-stall reasons of each rung. matplotlib is imported only when a figure is drawn.

Each figure function takes the results document and an optional ``drawn`` dict that it fills with
what it drew (the roofline's roofs and label boxes, the stall chart's series and colours) and
``drawn["notes"]``: sentences the caption needs (where a roof or a peak comes from)."""

from __future__ import annotations

import io
import itertools
from typing import Callable, Mapping

from ..core.deps import require
from ..core.shapes import CEILING_SHAPE
from . import fmt
from .model import (DATASHEET_NOTE, dig, dtype_text, env_of, l2_bandwidth, ladder, main_dtype, peak_basis, peers,
                    peak_tflops, registry_info, stall_label)

_COLORS = {"fp32": "#3b6fb6", "fp16": "#d9822b", "bf16": "#8c5bb5", "cublas": "#2e8b57", "peer": "#555555"}


def _figure(w: float, h: float):
    Figure = require("matplotlib.figure").Figure  # MissingDependencyError naming gemmlab[report]
    return Figure(figsize=(w, h), dpi=100, layout="constrained")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return buf.getvalue()


def panels(n: int, height: float = 3.4):
    """(figure, axes) of ``n`` side-by-side panels sharing the y axis (the tuning section)."""
    fig = _figure(max(6.0, 2.6 * n), height)
    return fig, list(fig.subplots(1, n, sharey=True, squeeze=False)[0])


def png_bytes(fig) -> bytes:
    return _png(fig)


def peak_notes(results: Mapping, dtypes) -> list[str]:
    """A caption's sentence on each peak a figure draws: its value and how it is made."""
    env = env_of(results)
    out = []
    for d in dtypes:
        v = peak_tflops(results, d)
        if v:
            out.append(f"{d} peak {fmt.tflops(v)} TFLOP/s = {peak_basis(env, d, v)}.")
    if out and any("not recorded" not in n for n in out):
        out.append(DATASHEET_NOTE[0].upper() + DATASHEET_NOTE[1:] + ".")
    return out


def fig_ladder(results: Mapping, drawn: dict | None = None) -> bytes | None:
    """TFLOP/s of each rung at the ladder shape beside cuBLAS and the peak, one panel per dtype."""
    rungs, cublas = ladder(results)
    rungs = [r for r in rungs if r.tflops]
    if not rungs:
        return None
    dts = [d for d in dict.fromkeys([main_dtype(results)] + [r.dtype for r in rungs]) if any(r.dtype == d for r in rungs)]
    counts = [sum(r.dtype == d for r in rungs) + (1 if d in cublas else 0) for d in dts]
    fig = _figure(max(7.5, 0.55 * sum(counts) + 2.5), 4.6)
    axes = fig.subplots(1, len(dts), width_ratios=counts, squeeze=False)[0]
    for ax, d in zip(axes, dts):
        rs = [r for r in rungs if r.dtype == d]
        shapes = [fmt.shape_label(r.bench) for r in rs]
        shape = max(set(shapes), key=shapes.count)
        labels = [r.label + ("" if sh == shape else f" ({sh})") for r, sh in zip(rs, shapes)]
        vals = [r.tflops for r in rs]
        colors = [_COLORS.get(d, "#777") for _ in rs]
        cb = cublas.get(d)
        if cb and cb.tflops:
            labels.append("cuBLAS")
            vals.append(cb.tflops)
            colors.append(_COLORS["cublas"])
        x = range(len(vals))
        bars = ax.bar(x, vals, color=colors)
        for b, v in zip(bars, vals):
            ax.annotate(fmt.tflops(v), (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7,
                        xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(list(x), labels, rotation=55, ha="right", fontsize=8)
        pk = peak_tflops(results, d)
        if cb and cb.tflops:
            ax.axhline(cb.tflops, color=_COLORS["cublas"], ls="--", lw=1, label=f"cuBLAS {fmt.tflops(cb.tflops)}")
        for pv in (v for v in peers(results) if v.dtype == d and v.tflops):
            ax.axhline(pv.tflops, color=_COLORS["peer"], ls="-.", lw=1, label=f"{pv.title} {fmt.tflops(pv.tflops)}")
        if pk:
            ax.axhline(pk, color="#b22222", ls=":", lw=1.2, label=f"peak {fmt.tflops(pk)}")
        ax.set_ylim(0, max(vals + [pk or 0]) * 1.12)
        ax.set_title(f"{d} at {shape}", fontsize=10)
        ax.set_ylabel("TFLOP/s")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("TFLOP/s of each rung beside cuBLAS, the peers and the peak", fontsize=11)
    if drawn is not None:
        drawn["notes"] = [f"Rungs in {dtype_text(rungs, main_dtype(results))}; each panel is one dtype, beside "
                          "cuBLAS and the peak of that dtype."] + peak_notes(results, dts)
    return _png(fig)


def fig_sweep(results: Mapping, drawn: dict | None = None) -> bytes | None:
    """TFLOP/s against size for the swept rungs and cuBLAS (seed 001's figure)."""
    entries = dig(results, "sweep", "results", default=[]) or []
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for e in entries:
        if e.get("tflops") is None or e.get("M") is None:
            continue
        size = (e["M"] * e["N"] * e["K"]) ** (1 / 3)
        series.setdefault((e["kernel"], e.get("dtype", "")), []).append((size, e["tflops"]))
    if not series:
        return None
    fig = _figure(7.5, 4.6)
    ax = fig.subplots()
    order = sorted(series, key=lambda k: (k[0] == "cublas", registry_info(k[0])[0] or 0, k[1]))
    multi_dt = len({k[1] for k in series}) > 1
    # the rungs' lines in tab10 without its green (cuBLAS is drawn in green)
    palette = itertools.cycle([c for c in _TAB10 + _TAB20[1::2] if c not in ("#2ca02c", "#98df8a")])
    drawn_series = []
    for key in order:
        pts = sorted(series[key])
        kern, dt = key
        num = registry_info(kern)[0]
        name = "cuBLAS" if kern == "cublas" else (f"{num}. {kern}" if num else kern)
        if multi_dt:
            name += f" ({dt})"
        style = (dict(color=_COLORS["cublas"], lw=2.2, marker="s") if kern == "cublas"
                 else dict(color=next(palette), marker="o", lw=1.5))
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name, **style)
        drawn_series.append((name, _hex(line.get_color())))
    ax.set_xscale("log", base=2)
    sizes = sorted({round(p[0]) for v in series.values() for p in v})
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("matrix size N (M = N = K; cube root of MNK otherwise)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    dts = sorted({k[1] for k in series if k[1]})
    ax.set_title(f"TFLOP/s against size{' (' + ', '.join(dts) + ')' if dts else ''}", fontsize=11)
    if drawn is not None:
        drawn["series"] = drawn_series
        drawn["notes"] = ([f"All in {dts[0]}."] if len(dts) == 1 else
                          [f"In {', '.join(dts)}: each line's dtype is in its legend."] if dts else
                          ["The sweep's dtype is not recorded."])
    return _png(fig)


def _roofs(results: Mapping) -> tuple[list[dict], list[str]]:
    """The bandwidth roofs the roofline draws ({"name", "Bps", "basis", "style", "label"}) and the
    caption's notes on them."""
    roofs, notes = [], []
    for key, name, ls in (("dram_bw_Bps", "DRAM measured (copy)", "-"), ("dram_bw_theoretical_Bps", "DRAM theoretical", ":")):
        v = dig(results, "ceilings", key)
        if v:
            roofs.append({"name": name, "Bps": v, "basis": name.split()[1], "style": dict(color="#555", ls=ls, lw=1.2),
                          "label": f"{name} {v / 1e12:.2f} TB/s"})
    l2 = l2_bandwidth(results)
    if l2:
        bound = l2["basis"] == "lower bound"
        roofs.append({"name": "L2", "Bps": l2["Bps"], "basis": l2["basis"],
                      "style": dict(color="#8c564b", ls=(0, (5, 2, 1, 2)), lw=1.2),
                      "label": f"L2 {'>= ' if bound else ''}{l2['Bps'] / 1e12:.2f} TB/s ({l2['basis']})"})
        notes.append(f"L2 roof: {l2['Bps'] / 1e12:.2f} TB/s, {l2['source']}"
                     + ("; a lower bound of the L2 bandwidth, not a measurement of it: the real L2 roof is at or "
                        "above this line." if bound else "."))
    return roofs, notes


def _columns(boxes: list[list[float]]) -> list[list[int]]:
    """The labels in groups whose x ranges overlap (transitively): only those can collide."""
    order = sorted(range(len(boxes)), key=lambda i: boxes[i][0])
    groups: list[list[int]] = []
    right = float("-inf")
    for i in order:
        if not groups or boxes[i][0] >= right:
            groups.append([])
            right = boxes[i][2]
        groups[-1].append(i)
        right = max(right, boxes[i][2])
    return groups


def _stack(boxes: list[list[float]], gap: float = 2.0) -> list[float]:
    """Vertical shifts (pixels) that keep label ``boxes`` (x0, y0, x1, y1) from overlapping: in
    each group of labels that share x, the labels keep the order of their centres, and a run of
    colliding labels becomes one stack centred on the mean of their centres (runs that then
    collide merge), so each label stays as near its point as the others allow."""
    dy = [0.0] * len(boxes)
    centre = [(b[1] + b[3]) / 2 for b in boxes]
    height = [b[3] - b[1] for b in boxes]

    def placed(block):      # the centres of a stack's labels, bottom to top
        total = sum(height[i] for i in block) + gap * (len(block) - 1)
        y = sum(centre[i] for i in block) / len(block) - total / 2
        out = []
        for i in block:
            out.append(y + height[i] / 2)
            y += height[i] + gap
        return out

    for group in _columns(boxes):
        blocks = [[i] for i in sorted(group, key=lambda i: (centre[i], i))]
        k = 0
        while k < len(blocks) - 1:
            lo, hi = placed(blocks[k]), placed(blocks[k + 1])
            if lo[-1] + height[blocks[k][-1]] / 2 + gap > hi[0] - height[blocks[k + 1][0]] / 2:
                blocks[k] += blocks.pop(k + 1)
                k = max(k - 1, 0)
            else:
                k += 1
        for block in blocks:
            for i, c in zip(block, placed(block)):
                dy[i] = c - centre[i]
    return dy


def _place_labels(fig, ax, points: list[tuple[float, float, str, str]]) -> list[tuple[str, tuple]]:
    """Name each point (x, y, text, colour) right of its marker, moved up or down (``_stack``)
    so that no two names overlap, with a thin line to its point where it moved;
    returns (text, (x0, y0, x1, y1)) of each name as drawn, in pixels."""
    style = dict(textcoords="offset points", ha="left", va="center", fontsize=7, color="#222")
    probes = [ax.annotate(t, (x, y), xytext=(6, 0), **style) for x, y, t, _ in points]
    fig.draw_without_rendering()
    boxes = [list(_text_box(t)) for t in probes]
    for t in probes:
        t.remove()
    dy = _stack(boxes)
    texts = []
    for (x, y, t, col), d in zip(points, dy):
        moved = abs(d) > 3          # a moved name sits further out, on a line to its point
        arrow = dict(arrowstyle="-", lw=0.6, color=col, shrinkA=1, shrinkB=3, relpos=(0, 0.5)) if moved else None
        texts.append(ax.annotate(t, (x, y), xytext=(12 if moved else 6, d * 72 / fig.dpi), arrowprops=arrow, **style))
    fig.draw_without_rendering()
    return [(t.get_text(), _text_box(t)) for t in texts]


def _text_box(t) -> tuple[float, float, float, float]:
    """The pixels of an annotation's text, without its line to the point."""
    from matplotlib.text import Text

    return tuple(Text.get_window_extent(t).extents)


def fig_roofline(results: Mapping, drawn: dict | None = None) -> bytes | None:
    """Each rung's arithmetic intensity (FLOPs per DRAM byte from the counters; hollow markers:
    per L2 byte, drawn only under a known L2 roof) and achieved FLOP/s under the bandwidth roofs
    (DRAM, L2) and the compute ceilings. ``drawn`` gets the roofs, the names' boxes, the number of
    L2 points and the caption's notes."""
    rungs, cublas = ladder(results)
    views = [r for r in list(rungs) + list(cublas.values())
             if r.profile.get("arithmetic_intensity") and r.profile.get("tflops")]
    if not views:
        return None
    d = main_dtype(results)
    dts = list(dict.fromkeys([d] + [r.dtype for r in views]))
    roofs, notes = _roofs(results)
    has_l2 = any(r["name"] == "L2" for r in roofs)
    l2 = {r.slug + r.dtype: r.profile["flops"] / r.profile["l2_bytes"] for r in views
          if has_l2 and r.profile.get("flops") and r.profile.get("l2_bytes")}
    if not has_l2 and any(r.profile.get("l2_bytes") for r in views):
        notes.append("Per-L2-byte points left out: the document has no L2 bandwidth (none measured, and no "
                     "launch duration to derive a lower bound from), so there is no L2 roof to read them against.")
    peaks = {t: peak_tflops(results, t) for t in dts}
    cbs = {t: dig(results, "ceilings", "cublas_tflops", t) for t in dts}
    ceils = [v for v in list(peaks.values()) + list(cbs.values()) if v]
    top = max(ceils) if ceils else None
    fig = _figure(8.0, 5.4)
    ax = fig.subplots()
    xs = [r.profile["arithmetic_intensity"] for r in views]
    ys = [r.profile["tflops"] for r in views]
    allx = xs + list(l2.values())
    x0, x1 = min(allx + [1.0]) / 3, max(allx + [1000.0]) * 5
    grid = [x0 * (x1 / x0) ** (i / 200) for i in range(201)]
    for roof in roofs:
        ax.plot(grid, [min(x * roof["Bps"] / 1e12, top or float("inf")) for x in grid], label=roof["label"],
                **roof["style"])
    for t in dts:
        col = _COLORS.get(t, "#777")
        if peaks[t]:
            ax.axhline(peaks[t], color=col, ls="--", lw=1, label=f"{t} peak {fmt.tflops(peaks[t])} TFLOP/s")
        if cbs[t]:
            ax.axhline(cbs[t], color=col, ls="-.", lw=1,
                       label=f"{t} cuBLAS {CEILING_SHAPE[0]}^3 {fmt.tflops(cbs[t])} TFLOP/s")
    points = _roofline_points(ax, views, l2, d)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    ax.set_ylim(min(ys) / 3, max(ys + [top or 0]) * 2)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte, measured by the counters)")
    ax.set_ylabel("achieved TFLOP/s (one launch under ncu)")
    shape = dig(views[0].profile, "shape")
    ax.set_title(f"roofline (counters at {'x'.join(map(str, shape)) if shape else '?'})", fontsize=11)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.draw_without_rendering()                  # the layout first: the names are placed in pixels
    labels = _place_labels(fig, ax, points)
    if drawn is not None:
        notes.insert(0, f"Rungs in {dtype_text([r for r in views if r.slug != 'cublas'], d)}, coloured by dtype.")
        notes += peak_notes(results, [t for t in dts if peaks[t]])
        drawn.update(roofs=[{k: v for k, v in r.items() if k != "style"} for r in roofs], labels=labels,
                     l2_points=len(l2), notes=notes)
    return _png(fig)


def _roofline_points(ax, views, l2: Mapping[str, float], main: str) -> list[tuple[float, float, str, str]]:
    """The markers of each view (filled: per DRAM byte; hollow: per L2 byte); returns the points
    to name: (x, y, name, colour)."""
    points = []
    for r in views:
        is_cb = r.slug == "cublas"
        col = _COLORS["cublas"] if is_cb else _COLORS.get(r.dtype, "#777")
        x, y = r.profile["arithmetic_intensity"], r.profile["tflops"]
        ax.scatter([x], [y], s=70 if is_cb else 28, marker="*" if is_cb else "o", color=col, zorder=3)
        xl = l2.get(r.slug + r.dtype)
        if xl:
            ax.scatter([xl], [y], s=26, marker="s", facecolors="none", edgecolors=col, zorder=3, lw=0.9)
            ax.plot([xl, x], [y, y], color=col, lw=0.4, alpha=0.5)
        name = ("cuBLAS" + ("" if r.dtype == main else f" {r.dtype}")) if is_cb else str(r.number or r.slug)
        points.append((x, y, name, col))
    ax.scatter([], [], marker="o", color="#777", s=28, label="per DRAM byte (filled)")
    if l2:
        ax.scatter([], [], marker="s", facecolors="none", edgecolors="#777", s=26, label="per L2 byte (hollow)")
    return points


# Ten well-separated colours (matplotlib's tab10); a chart with more series takes tab20's twenty.
_TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")
_TAB20 = ("#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd",
          "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7", "#bcbd22", "#dbdb8d",
          "#17becf", "#9edae5")


def distinct_colors(n: int) -> list[str]:
    """``n`` different colours (at most 20)."""
    palette = _TAB10 if n <= len(_TAB10) else _TAB20
    if n > len(palette):
        raise ValueError(f"{n} series but only {len(palette)} distinct colours")
    return list(palette[:n])


def fig_stalls(results: Mapping, drawn: dict | None = None) -> bytes | None:
    """Where warps spend their time: the stall shares of each rung (stacked): the eight largest
    reasons over all rungs and "other", each in its own colour (``drawn["series"]``: (label,
    colour) of each series as drawn)."""
    rungs, cublas = ladder(results)
    views = [r for r in list(rungs) + list(cublas.values()) if r.profile.get("stalls")]
    if not views:
        return None
    totals: dict[str, float] = {}
    for r in views:
        for s in r.profile["stalls"]:
            totals[s["reason"]] = totals.get(s["reason"], 0) + s["share"]
    top = [k for k, _ in sorted(totals.items(), key=lambda kv: -kv[1])][:8]
    fig = _figure(8.5, 0.3 * len(views) + 1.4)
    ax = fig.subplots()
    labels = [("cuBLAS" if r.slug == "cublas" else r.label) + ("" if r.dtype == main_dtype(results) else f" ({r.dtype})")
              for r in views]
    left = [0.0] * len(views)
    reasons = top + ["other"]
    series = []
    for reason, color in zip(reasons, distinct_colors(len(reasons))):
        vals = []
        for r in views:
            sh = {s["reason"]: s["share"] for s in r.profile["stalls"]}
            vals.append(sum(v for k, v in sh.items() if k not in top) if reason == "other" else sh.get(reason, 0.0))
        bars = ax.barh(range(len(views)), [100 * v for v in vals], left=left, color=color, label=stall_label(reason))
        series.append((stall_label(reason), _hex(bars.patches[0].get_facecolor())))
        left = [a + 100 * b for a, b in zip(left, vals)]
    ax.set_yticks(range(len(views)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of warp cycles between issued instructions (%)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("warp states by rung (Nsight Compute)", fontsize=11)
    if drawn is not None:
        drawn["series"] = series
        drawn["notes"] = [f"Rungs in {dtype_text([r for r in views if r.slug != 'cublas'], main_dtype(results))}; "
                          "a row in another dtype than the report's says so."]
    return _png(fig)


def _hex(rgba) -> str:
    from matplotlib.colors import to_hex

    return to_hex(rgba)


FIGURES: tuple[tuple[str, str, Callable[[Mapping], bytes | None]], ...] = (
    ("fig_ladder", "TFLOP/s of each rung beside cuBLAS and the peak.", fig_ladder),
    ("fig_sweep", "TFLOP/s against size.", fig_sweep),
    ("fig_roofline", "Roofline: FLOPs per DRAM byte (filled) and per L2 byte (hollow), measured by the counters, "
                     "and the FLOP/s of the same launch, under the bandwidth roofs (DRAM; L2 where its bandwidth is "
                     "known) and the compute ceilings; the numbers name the rungs.",
     fig_roofline),
    ("fig_stalls", "Warp stall reasons by rung.", fig_stalls),
)
