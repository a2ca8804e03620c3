"""``gemmlab report``: the measured worklog of the ladder as one self-contained HTML page.

On a GPU, ``collect`` runs the ladder: the benchmark of every rung at one shape beside cuBLAS, a
size sweep of a few rungs, ``inspect`` of every rung (what the compiler made of it), Nsight
Compute counters of every rung at a smaller shape (ncu replays each kernel many times), and the
device's measured ceilings (a large device-to-device copy for bandwidth, cuBLAS at 8192^3 for
compute, beside the theoretical peak). The results are one JSON document::

    {"bench": <bench JSON>, "sweep": <bench JSON over sizes>, "inspect": {slug: inspect dict},
     "profile": {slug or "cublas": profile dict}, "ceilings": {...}, "env": {...}}

``build`` turns that document into ``report.html`` (inline CSS, figures as base64 PNG, no script,
no external resource: it opens from disk in any browser) and ``report.md`` (figures saved beside
it as PNG files). ``build`` needs no GPU: ``gemmlab report --from-json results.json`` rebuilds the
page from saved results anywhere.

The page explains each step up the ladder by the counters that moved: for every pair of
consecutive rungs, ``explain_step`` compares DRAM/L2 bytes, shared-memory bank conflicts, the
FFMA share of the hot loop, the top warp-stall reason, occupancy, instruction counts and tensor
instructions, ranks the changes by size and writes one sentence from the largest.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..core.shapes import BENCH_SHAPE, CEILING_SHAPE, PROFILE_SHAPE, SWEEP_SIZES

# =============================================================================================
# Small helpers
# =============================================================================================


def _get(d: Any, *path, default=None):
    """d[path0][path1]... or default when any level is missing or None."""
    for p in path:
        if not isinstance(d, Mapping) or d.get(p) is None:
            return default
        d = d[p]
    return d


def _num(v: float | None, digits: int = 2) -> str:
    """1.2e8 style for large/small numbers, plain otherwise; 'n/a' for None."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4 or a < 1e-2:
        exp = int(math.floor(math.log10(a)))
        mant = v / 10**exp
        s = f"{mant:.{max(digits - 1, 0)}f}".rstrip("0").rstrip(".")
        if s in ("10", "-10"):
            s, exp = ("1" if v > 0 else "-1"), exp + 1
        return f"{s}e{exp}"
    return f"{v:.{digits + 1}g}" if a < 100 else f"{v:,.0f}"


def _bytes(v: float | None) -> str:
    if v is None:
        return "n/a"
    for div, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(v) >= div:
            return f"{v / div:.3g} {unit}"
    return f"{v:.0f} B"


def _pct(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}%"


def _tf(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def _share_pct(v: float | None) -> float | None:
    """A share given as a fraction (0.89) or a percentage (89.0) -> percent."""
    if v is None:
        return None
    return 100.0 * v if v <= 1.0 else float(v)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return a / b


# =============================================================================================
# Reading a results document
# =============================================================================================


@dataclass
class RungView:
    """Everything the page says about one rung (or cuBLAS), gathered from the document."""

    slug: str
    number: int | None
    title: str
    summary: str
    dtype: str
    bench: dict = field(default_factory=dict)     # the bench entry at the ladder shape
    inspect: dict = field(default_factory=dict)
    profile: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.number}. {self.slug}" if self.number is not None else self.slug

    @property
    def tflops(self) -> float | None:
        return self.bench.get("tflops")

    @property
    def ffma_share(self) -> float | None:
        return _share_pct(_get(self.inspect, "hot_loop", "ffma_share"))

    def top_stall(self) -> dict | None:
        for s in self.profile.get("stalls") or ():
            if s.get("reason") not in ("selected", "not_selected"):
                return s
        return None


def _registry_info(slug: str) -> tuple[int | None, str, str, tuple[str, ...]]:
    try:
        from ..core.registry import get

        r = get(slug)
        return r.number, r.title, r.summary, r.dtypes
    except Exception:
        return None, slug, "", ()


def main_dtype(results: Mapping) -> str:
    return (_get(results, "bench", "settings", "dtype") or results.get("dtype")
            or next((e.get("dtype") for e in _get(results, "bench", "results", default=[]) if e.get("dtype")), "fp32"))


def ladder(results: Mapping) -> tuple[list[RungView], dict[str, RungView]]:
    """(rungs in ladder order, {dtype: cuBLAS view}) from a results document."""
    entries = _get(results, "bench", "results", default=[]) or []
    insp = results.get("inspect") or {}
    prof = results.get("profile") or {}
    by_slug: dict[str, RungView] = {}
    cublas: dict[str, RungView] = {}
    cb_entries: dict[str, list[dict]] = {}
    for e in entries:
        k = e.get("kernel")
        if not k:
            continue
        dt = e.get("dtype") or main_dtype(results)
        if k == "cublas":
            cb_entries.setdefault(dt, []).append(e)
            continue
        if k in by_slug:
            continue
        num, title, summary, _ = _registry_info(k)
        if num is None and e.get("number") is not None:
            num = int(e["number"])
        by_slug[k] = RungView(k, num, title, summary, dt, e, insp.get(k) or {}, _prof_for(prof, k, dt))
    # cuBLAS of each dtype: the entry at the shape most of that dtype's rungs were timed at
    for dt, es in cb_entries.items():
        shapes = [(r.bench.get("M"), r.bench.get("N"), r.bench.get("K")) for r in by_slug.values() if r.dtype == dt]
        common = max(set(shapes), key=shapes.count) if shapes else None
        e = next((x for x in es if (x.get("M"), x.get("N"), x.get("K")) == common), es[0])
        cublas[dt] = RungView("cublas", None, "cuBLAS", "the vendor library", dt, e, {}, _prof_for(prof, "cublas", dt))
    # rungs profiled or inspected but not benchmarked still belong on the ladder
    for k in list(prof) + list(insp):
        if k == "cublas" or k.startswith("cublas") or k in by_slug:
            continue
        num, title, summary, dts = _registry_info(k)
        p = prof.get(k) or {}
        dt = p.get("dtype") or _get(insp, k, "dtype") or (dts[0] if dts else main_dtype(results))
        by_slug[k] = RungView(k, num, title, summary, dt, {}, insp.get(k) or {}, p)
    for k, p in prof.items():
        if (k == "cublas" or k.startswith("cublas")) and isinstance(p, Mapping):
            dt = p.get("dtype") or main_dtype(results)
            if dt not in cublas:
                cublas[dt] = RungView("cublas", None, "cuBLAS", "the vendor library", dt, {}, {}, dict(p))
            elif not cublas[dt].profile:
                cublas[dt].profile = dict(p)
    rungs = sorted(by_slug.values(), key=lambda r: (r.number if r.number is not None else 10**6, r.slug))
    return rungs, cublas


def _prof_for(prof: Mapping, key: str, dtype: str) -> dict:
    """The profile of ``key``; cuBLAS of another dtype may be stored as 'cublas_fp16'."""
    p = prof.get(key)
    if key == "cublas":
        alt = prof.get(f"cublas_{dtype}")
        if alt is not None and (p is None or (p.get("dtype") and p.get("dtype") != dtype)):
            p = alt
        if p is not None and p.get("dtype") and p.get("dtype") != dtype:
            return {}
    return dict(p or {})


def peak_tflops(results: Mapping, dtype: str) -> float | None:
    return (_get(results, "ceilings", "peak_tflops", dtype) or _get(results, "bench", "env", "peak_tflops", dtype)
            or _get(results, "env", "peak_tflops", dtype))


# =============================================================================================
# Explaining a step up the ladder
# =============================================================================================

_STALL_WORDS = {
    "long_scoreboard": "long scoreboard", "mio_throttle": "MIO throttle", "short_scoreboard": "short scoreboard",
    "wait": "wait", "barrier": "barrier", "math_pipe_throttle": "math pipe throttle", "lg_throttle": "LG throttle",
    "tex_throttle": "TEX throttle", "dispatch_stall": "dispatch stall", "no_instruction": "no instruction",
    "branch_resolving": "branch resolving", "drain": "drain", "membar": "membar", "sleeping": "sleeping",
    "imc_miss": "IMC miss", "gmma": "GMMA", "misc": "misc", "selected": "selected", "not_selected": "not selected",
}


def _stall_meaning(reason: str) -> str:
    try:
        from ..analysis.ncu import STALL_MEANING

        return STALL_MEANING.get(reason, "")
    except Exception:  # pragma: no cover
        return ""


@dataclass
class Observation:
    kind: str
    score: float
    text: str


def _bytes_obs(kind: str, what: str, a, b, fall_why: str, rise_why: str, weight: float = 1.0) -> Observation | None:
    r = _ratio(a, b)
    if r is None or 1 / 1.3 < r < 1.3:
        return None
    if r > 1:
        return Observation(kind, weight * math.log2(r), f"{what} fell {r:.1f}x, {_bytes(a)} to {_bytes(b)} ({fall_why})")
    return Observation(kind, weight * math.log2(1 / r), f"{what} rose {1 / r:.1f}x, {_bytes(a)} to {_bytes(b)} ({rise_why})")


def _count_obs(kind: str, what: str, a, b, fall_why: str, rise_why: str, weight: float = 0.8,
               floor: float = 1e3) -> Observation | None:
    if a is None or b is None or max(a, b) < floor:
        return None
    r = (a + 1.0) / (b + 1.0)
    if 1 / 1.5 < r < 1.5:
        return None
    if r > 1:
        tail = "to 0" if b == 0 else ("to about zero" if b <= 0.01 * a else f"to {_num(b)}")
        return Observation(kind, weight * min(math.log2(r), 8), f"{what} fell from {_num(a)} {tail} ({fall_why})")
    tail = f"from 0 to {_num(b)}" if a == 0 else f"from {_num(a)} to {_num(b)}"
    return Observation(kind, weight * min(math.log2(1 / r), 8), f"{what} rose {tail} ({rise_why})")


def _conflict_frac(p: Mapping, op: str) -> float | None:
    c = p.get(f"bank_conflicts_{op}")
    if c is None:
        return None
    w = p.get(f"shared_{op}_wavefronts")
    if not w:
        return 1.0 if c > 0 else 0.0
    return min(1.0, c / w)


def _conflict_obs(op: str, what: str, pp: Mapping, cp: Mapping, fall_why: str, rise_why: str) -> Observation | None:
    a, b = pp.get(f"bank_conflicts_{op}"), cp.get(f"bank_conflicts_{op}")
    fa, fb = _conflict_frac(pp, op), _conflict_frac(cp, op)
    if a is None or b is None or fa is None or fb is None or max(fa, fb) < 0.05:
        return None
    r = (fa + 0.01) / (fb + 0.01)
    if 1 / 1.5 < r < 1.5:
        return None
    share = f"{100 * fa:.0f}% to {100 * fb:.0f}% of shared {'load' if op == 'ld' else 'store'} wavefronts"
    if r > 1:
        tail = "to 0" if b == 0 else ("to about zero" if b <= 0.01 * a else f"to {_num(b)}")
        return Observation(f"conflicts_{op}", math.log2(r), f"{what} fell from {_num(a)} {tail}, {share} ({fall_why})")
    return Observation(f"conflicts_{op}", math.log2(1 / r), f"{what} rose from {_num(a)} to {_num(b)}, {share} ({rise_why})")


def _uses_tensor_cores(p: dict) -> bool:
    """Whether a profiled launch does its math on the tensor cores. The tensor-pipe instruction
    counter alone cannot tell: it also counts the HFMA2.MMA register moves compilers emit (1e7 of
    them in the warp-shuffle rung at 2048^3, with the pipe busy 0.8% of the time); the tensor pipe's
    busy share can (28% for the WMMA rung, 82% for cuBLAS fp16)."""
    if (p.get("tensor_active_pct") or 0.0) >= 5.0:
        return True
    return not (p.get("ffma_count") or 0) and bool(p.get("tensor_inst_count"))


def explain_step(prev: RungView, cur: RungView) -> dict:
    """The measured change from ``prev`` to ``cur``: a row of deltas, the ranked observations and
    one sentence naming the largest (at most three)."""
    pp, cp = prev.profile, cur.profile
    obs: list[Observation] = []

    def add(o: Observation | None):
        if o is not None:
            obs.append(o)

    # tensor cores appear / disappear
    ta, tb = _uses_tensor_cores(pp), _uses_tensor_cores(cp)
    if not ta and tb:
        add(Observation("tensor", 6.0, f"the math moved to the tensor cores ({_num(cp.get('tensor_inst_count'))} tensor instructions, "
                                       f"FFMA {_num(pp.get('ffma_count'))} to {_num(cp.get('ffma_count'))})"))
    elif ta and not tb:
        add(Observation("tensor", 6.0, "the math left the tensor cores"))
    add(_bytes_obs("dram", "DRAM bytes", pp.get("dram_bytes"), cp.get("dram_bytes"),
                   "each byte fetched from DRAM now serves more FLOPs", "less reuse of what is fetched", 1.0))
    add(_bytes_obs("l2", "L2 bytes", pp.get("l2_bytes"), cp.get("l2_bytes"),
                   "fewer requests reach L2: loads are coalesced or reused on chip",
                   "more requests reach L2", 0.9))
    add(_bytes_obs("l1", "L1/TEX bytes", pp.get("l1_bytes"), cp.get("l1_bytes"),
                   "fewer global requests per FLOP", "more global/texture traffic per FLOP", 0.5))
    # bank conflicts, judged by the share of shared-memory wavefronts they add (a few thousand
    # conflicts among 1e8 wavefronts are noise; 1e9 among 1.5e9 are the story)
    add(_conflict_obs("ld", "shared-load bank conflicts", pp, cp,
                      "a warp's shared loads now spread over the 32 banks", "several lanes of a warp now hit the same bank"))
    add(_conflict_obs("st", "shared-store bank conflicts", pp, cp,
                      "a warp's shared stores now spread over the 32 banks", "several lanes of a warp now store to the same bank"))
    # hot-loop instruction mix (inspect)
    fa, fb = prev.ffma_share, cur.ffma_share
    if fa is not None and fb is not None and abs(fb - fa) >= 5 and not tb:
        if fb > fa:
            add(Observation("ffma", (fb - fa) / 10, f"hot-loop FFMA share rose from {fa:.0f}% to {fb:.0f}% "
                                                    "(fewer loads and address instructions per FFMA)"))
        else:
            add(Observation("ffma", (fa - fb) / 12, f"hot-loop FFMA share fell from {fa:.0f}% to {fb:.0f}% "
                                                    "(more address, load and control instructions per FFMA)"))
    add(_count_obs("shared_ld_inst", "shared load instructions", pp.get("shared_ld_inst"), cp.get("shared_ld_inst"),
                   "wider LDS.128 loads, or values kept in registers", "more, narrower shared loads", weight=0.6))
    add(_count_obs("global_ld_inst", "global load instructions", pp.get("global_ld_inst"), cp.get("global_ld_inst"),
                   "wider 128-bit loads, or each element loaded once per tile", "more, narrower global loads", weight=0.6))
    # stalls
    sa, sb = prev.top_stall(), cur.top_stall()
    if sa and sb:
        la, lb = _STALL_WORDS.get(sa["reason"], sa["reason"]), _STALL_WORDS.get(sb["reason"], sb["reason"])
        if sa["reason"] != sb["reason"]:
            add(Observation("stall", 1.6, f"top stall moved from {la} ({100 * sa['share']:.0f}%) to {lb} "
                                          f"({100 * sb['share']:.0f}%), {_stall_meaning(sb['reason'])}"))
        elif abs(sa["share"] - sb["share"]) >= 0.15:
            verb = "fell" if sb["share"] < sa["share"] else "rose"
            add(Observation("stall", 0.9, f"{la} stalls {verb} from {100 * sa['share']:.0f}% to {100 * sb['share']:.0f}% of warp time"))
    # occupancy, IPC
    oa, ob = pp.get("achieved_occupancy"), cp.get("achieved_occupancy")
    if oa is not None and ob is not None and abs(ob - oa) >= 10:
        verb, why = ("rose", "more warps resident to hide latency") if ob > oa else ("fell", "more registers or shared memory per block")
        add(Observation("occupancy", abs(ob - oa) / 25, f"achieved occupancy {verb} from {oa:.0f}% to {ob:.0f}% ({why})"))
    ia, ib = pp.get("ipc"), cp.get("ipc")
    r = _ratio(ib, ia)
    if r is not None and not (1 / 1.3 < r < 1.3):
        add(Observation("ipc", 0.6 * abs(math.log2(r)), f"IPC {'rose' if r > 1 else 'fell'} from {ia:.2f} to {ib:.2f}"))

    obs.sort(key=lambda o: -o.score)
    t0, t1 = prev.tflops, cur.tflops
    if t0 and t1:
        s = t1 / t0
        if s >= 1.05:
            speed = f"{s:.2f}x faster ({_tf(t0)} to {_tf(t1)} TFLOP/s)"
        elif s <= 1 / 1.05:
            speed = f"{1 / s:.2f}x slower ({_tf(t0)} to {_tf(t1)} TFLOP/s)"
        else:
            speed = f"about as fast ({_tf(t0)} to {_tf(t1)} TFLOP/s)"
    else:
        s, speed = None, "speed not measured"
    dt_note = f" [{prev.dtype} to {cur.dtype}]" if prev.dtype != cur.dtype else ""
    if not pp or not cp:
        body = "no counters recorded for " + (" and ".join(r.slug for r in (prev, cur) if not r.profile))
    elif obs:
        body = "; ".join(o.text for o in obs[:3])
    else:
        body = "no counter moved past the thresholds (bytes 1.3x, conflicts 1.5x, shares 5-15 points)"
    sentence = f"{cur.label} vs {prev.label}{dt_note}: {speed}; {body}."
    return {
        "from": prev.slug, "to": cur.slug, "speedup": s,
        "tflops": [t0, t1],
        "dram_bytes": [pp.get("dram_bytes"), cp.get("dram_bytes")],
        "l2_bytes": [pp.get("l2_bytes"), cp.get("l2_bytes")],
        "bank_conflicts_ld": [pp.get("bank_conflicts_ld"), cp.get("bank_conflicts_ld")],
        "bank_conflicts_st": [pp.get("bank_conflicts_st"), cp.get("bank_conflicts_st")],
        "ffma_share": [fa, fb],
        "top_stall": [_stall_pair(sa), _stall_pair(sb)],
        "achieved_occupancy": [oa, ob],
        "ipc": [ia, ib],
        "observations": [{"kind": o.kind, "score": round(o.score, 3), "text": o.text} for o in obs],
        "sentence": sentence,
    }


def _stall_pair(s: dict | None):
    return None if not s else {"reason": s["reason"], "share": s.get("share")}


def steps(results: Mapping) -> list[dict]:
    rungs, _ = ladder(results)
    return [explain_step(a, b) for a, b in zip(rungs, rungs[1:])]


# =============================================================================================
# Figures (matplotlib, Agg, no pyplot state)
# =============================================================================================

_COLORS = {"fp32": "#3b6fb6", "fp16": "#d9822b", "bf16": "#8c5bb5", "cublas": "#2e8b57"}


def _figure(w: float, h: float):
    from ..core.deps import require

    Figure = require("matplotlib.figure").Figure  # MissingDependencyError naming gemmlab[report]
    return Figure(figsize=(w, h), dpi=100, layout="constrained")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return buf.getvalue()


def fig_ladder(results: Mapping) -> bytes | None:
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
        shapes = [_shape_label(r.bench) for r in rs]
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
            ax.annotate(_tf(v), (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7,
                        xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(list(x), labels, rotation=55, ha="right", fontsize=8)
        pk = peak_tflops(results, d)
        if cb and cb.tflops:
            ax.axhline(cb.tflops, color=_COLORS["cublas"], ls="--", lw=1, label=f"cuBLAS {_tf(cb.tflops)}")
        if pk:
            ax.axhline(pk, color="#b22222", ls=":", lw=1.2, label=f"peak {_tf(pk)}")
        ax.set_ylim(0, max(vals + [pk or 0]) * 1.12)
        ax.set_title(f"{d} at {shape}", fontsize=10)
        ax.set_ylabel("TFLOP/s")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("TFLOP/s of each rung beside cuBLAS and the peak", fontsize=11)
    return _png(fig)


def _shape_label(e: Mapping) -> str:
    if not e or e.get("M") is None:
        return "?"
    M, N, K = e["M"], e["N"], e["K"]
    return f"{M}^3" if M == N == K else f"{M}x{N}x{K}"


def fig_sweep(results: Mapping) -> bytes | None:
    """TFLOP/s against size for the swept rungs and cuBLAS (seed 001's figure)."""
    entries = _get(results, "sweep", "results", default=[]) or []
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
    order = sorted(series, key=lambda k: (k[0] == "cublas", _registry_info(k[0])[0] or 0, k[1]))
    multi_dt = len({k[1] for k in series}) > 1
    for i, key in enumerate(order):
        pts = sorted(series[key])
        kern, dt = key
        num = _registry_info(kern)[0]
        name = "cuBLAS" if kern == "cublas" else (f"{num}. {kern}" if num else kern)
        if multi_dt:
            name += f" ({dt})"
        style = dict(color=_COLORS["cublas"], lw=2.2, marker="s") if kern == "cublas" else dict(marker="o", lw=1.5)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name, **style)
    ax.set_xscale("log", base=2)
    sizes = sorted({round(p[0]) for v in series.values() for p in v})
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("matrix size N (M = N = K; cube root of MNK otherwise)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("TFLOP/s against size", fontsize=11)
    return _png(fig)


def fig_roofline(results: Mapping) -> bytes | None:
    """Each rung's arithmetic intensity (FLOPs per DRAM byte from the counters; hollow markers:
    per L2 byte) and achieved FLOP/s under the measured bandwidth and compute ceilings."""
    rungs, cublas = ladder(results)
    views = [r for r in list(rungs) + list(cublas.values())
             if r.profile.get("arithmetic_intensity") and r.profile.get("tflops")]
    if not views:
        return None
    d = main_dtype(results)
    dts = list(dict.fromkeys([d] + [r.dtype for r in views]))
    bw = _get(results, "ceilings", "dram_bw_Bps")
    bw_theory = _get(results, "ceilings", "dram_bw_theoretical_Bps")
    peaks = {t: peak_tflops(results, t) for t in dts}
    cbs = {t: _get(results, "ceilings", "cublas_tflops", t) for t in dts}
    ceils = [v for v in list(peaks.values()) + list(cbs.values()) if v]
    top = max(ceils) if ceils else None
    fig = _figure(8.0, 5.4)
    ax = fig.subplots()
    xs = [r.profile["arithmetic_intensity"] for r in views]
    l2 = {r.slug + r.dtype: r.profile["flops"] / r.profile["l2_bytes"] for r in views
          if r.profile.get("flops") and r.profile.get("l2_bytes")}
    ys = [r.profile["tflops"] for r in views]
    allx = xs + list(l2.values())
    x0, x1 = min(allx + [1.0]) / 3, max(allx + [1000.0]) * 3
    grid = [x0 * (x1 / x0) ** (i / 200) for i in range(201)]
    for bw_v, ls, lab in ((bw, "-", "measured (copy)"), (bw_theory, ":", "theoretical")):
        if bw_v:
            ax.plot(grid, [min(x * bw_v / 1e12, top or float("inf")) for x in grid], color="#555", ls=ls, lw=1.2,
                    label=f"DRAM {lab} {bw_v / 1e12:.2f} TB/s")
    for t in dts:
        col = _COLORS.get(t, "#777")
        if peaks[t]:
            ax.axhline(peaks[t], color=col, ls="--", lw=1, label=f"{t} peak {_tf(peaks[t])} TFLOP/s")
        if cbs[t]:
            ax.axhline(cbs[t], color=col, ls="-.", lw=1,
                       label=f"{t} cuBLAS {CEILING_SHAPE[0]}^3 {_tf(cbs[t])} TFLOP/s")
    for i, r in enumerate(views):
        is_cb = r.slug == "cublas"
        col = _COLORS["cublas"] if is_cb else _COLORS.get(r.dtype, "#777")
        x, y = r.profile["arithmetic_intensity"], r.profile["tflops"]
        ax.scatter([x], [y], s=70 if is_cb else 28, marker="*" if is_cb else "o", color=col, zorder=3)
        xl = l2.get(r.slug + r.dtype)
        if xl:
            ax.scatter([xl], [y], s=26, marker="s", facecolors="none", edgecolors=col, zorder=3, lw=0.9)
            ax.plot([xl, x], [y, y], color=col, lw=0.4, alpha=0.5)
        name = ("cuBLAS" + ("" if r.dtype == d else f" {r.dtype}")) if is_cb else str(r.number or r.slug)
        ax.annotate(name, (x, y), fontsize=7, xytext=(5 if i % 2 == 0 else -5, 3 if i % 4 < 2 else -8),
                    ha="left" if i % 2 == 0 else "right", textcoords="offset points")
    ax.scatter([], [], marker="o", color="#777", s=28, label="per DRAM byte (filled)")
    ax.scatter([], [], marker="s", facecolors="none", edgecolors="#777", s=26, label="per L2 byte (hollow)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    ax.set_ylim(min(ys) / 3, max(ys + [top or 0]) * 2)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte, measured by the counters)")
    ax.set_ylabel("achieved TFLOP/s (one launch under ncu)")
    shape = _get(views[0].profile, "shape")
    ax.set_title(f"roofline (counters at {'x'.join(map(str, shape)) if shape else '?'})", fontsize=11)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def fig_stalls(results: Mapping) -> bytes | None:
    """Where warps spend their time: the stall shares of each rung (stacked)."""
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
    cmap = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#bab0ac"]
    for i, reason in enumerate(top + ["other"]):
        vals = []
        for r in views:
            sh = {s["reason"]: s["share"] for s in r.profile["stalls"]}
            vals.append(sum(v for k, v in sh.items() if k not in top) if reason == "other" else sh.get(reason, 0.0))
        ax.barh(range(len(views)), [100 * v for v in vals], left=left, color=cmap[i % len(cmap)],
                label=_STALL_WORDS.get(reason, reason))
        left = [a + 100 * b for a, b in zip(left, vals)]
    ax.set_yticks(range(len(views)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of warp cycles between issued instructions (%)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("warp states by rung (Nsight Compute)", fontsize=11)
    return _png(fig)


FIGURES: tuple[tuple[str, str, Callable[[Mapping], bytes | None]], ...] = (
    ("fig_ladder", "TFLOP/s of each rung beside cuBLAS and the peak", fig_ladder),
    ("fig_sweep", "TFLOP/s against size", fig_sweep),
    ("fig_roofline", "Roofline: FLOPs per DRAM byte (filled) and per L2 byte (hollow), measured by the counters, "
                     "and the FLOP/s of the same launch, under the measured bandwidth and the compute ceilings",
     fig_roofline),
    ("fig_stalls", "Warp stall reasons by rung", fig_stalls),
)


# =============================================================================================
# Tables
# =============================================================================================

LADDER_COLUMNS = ("#", "rung", "dtype", "ms", "TFLOP/s", "vs cuBLAS", "% peak", "ok", "DRAM", "L2",
                  "ld conflicts", "st conflicts", "occupancy", "IPC", "FFMA share", "top stall", "regs")


def ladder_rows(results: Mapping) -> list[list[str]]:
    rungs, cublas = ladder(results)
    rows = []
    for r in list(rungs) + [cublas[d] for d in cublas]:
        b, p = r.bench, r.profile
        ts = r.top_stall()
        regs = _get(r.inspect, "resources", "registers") or p.get("registers")
        verified = b.get("verified")
        rows.append([
            "" if r.number is None else str(r.number),
            "cuBLAS" if r.slug == "cublas" else r.slug,
            r.dtype,
            "n/a" if b.get("ms") is None else f"{b['ms']:.3f}",
            _tf(b.get("tflops")),
            "n/a" if b.get("vs_cublas") is None else f"{b['vs_cublas']:.2f}",
            "n/a" if b.get("pct_peak") is None else f"{b['pct_peak']:.1f}",
            (b.get("status") if b.get("status") not in (None, "ok") else
             {True: "yes", False: "NO", None: "-"}.get(verified, str(verified))),
            _bytes(p.get("dram_bytes")),
            _bytes(p.get("l2_bytes")),
            _num(p.get("bank_conflicts_ld")),
            _num(p.get("bank_conflicts_st")),
            _pct(p.get("achieved_occupancy")),
            "n/a" if p.get("ipc") is None else f"{p['ipc']:.2f}",
            _pct(r.ffma_share),
            "n/a" if not ts else f"{_STALL_WORDS.get(ts['reason'], ts['reason'])} {100 * ts['share']:.0f}%",
            "n/a" if regs is None else str(int(regs)),
        ])
    return rows


STEP_COLUMNS = ("step", "what it adds", "speed-up", "DRAM bytes", "L2 bytes", "ld conflicts", "st conflicts",
                "FFMA share", "top stall", "occupancy")


def step_rows(results: Mapping) -> list[tuple[list[str], str]]:
    rungs, _ = ladder(results)
    out = []
    for a, b in zip(rungs, rungs[1:]):
        st = explain_step(a, b)

        def pair(v, f):
            return f"{f(v[0])} → {f(v[1])}"

        def stall(s):
            return "n/a" if not s else f"{_STALL_WORDS.get(s['reason'], s['reason'])} {100 * (s['share'] or 0):.0f}%"

        out.append(([
            f"{a.label} → {b.label}",
            b.summary,
            "n/a" if st["speedup"] is None else f"{st['speedup']:.2f}x",
            pair(st["dram_bytes"], _bytes),
            pair(st["l2_bytes"], _bytes),
            pair(st["bank_conflicts_ld"], _num),
            pair(st["bank_conflicts_st"], _num),
            pair(st["ffma_share"], _pct),
            pair(st["top_stall"], stall),
            pair(st["achieved_occupancy"], _pct),
        ], st["sentence"]))
    return out


def _clock_text(c) -> str | None:
    """envinfo.clocks() -> 'SM 1980 MHz, memory 2619 MHz, 41 C, 312 W (reasons: ...)'."""
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
    text = ", ".join(parts) or ", ".join(f"{k}={_plain(v)}" for k, v in c.items() if v is not None)
    reasons = [r for r in (c.get("clock_event_reasons") or []) if r != "GpuIdle"]
    return text + (f" (clock events: {', '.join(reasons)})" if reasons else "")


def env_rows(results: Mapping) -> list[tuple[str, str]]:
    """(label, text) rows of the machine-and-software table, from the bench JSON's env
    (envinfo.collect()) and the report's own env."""
    env = dict(_get(results, "bench", "env", default={}) or {})
    env.update({k: v for k, v in (results.get("env") or {}).items() if v is not None})
    settings = _get(results, "bench", "settings", default={}) or {}
    rows: list[tuple[str, str]] = []

    def add(k, v):
        if v is None or v == {} or v == [] or v == "":
            return
        if isinstance(v, Mapping):
            v = ", ".join(f"{kk}={_plain(vv)}" for kk, vv in v.items() if vv is not None and not isinstance(vv, (dict, list)))
        elif isinstance(v, (list, tuple)):
            v = ", ".join(map(_plain, v))
        rows.append((k, str(v)))

    add("GPU", env.get("gpu_name"))
    add("SMs", env.get("sm_count"))
    add("compute capability", env.get("compute_capability") or env.get("cc"))
    add("max SM clock", None if env.get("max_sm_clock_mhz") is None else f"{env['max_sm_clock_mhz']:.0f} MHz")
    add("peak TFLOP/s", {k: _tf(v) for k, v in (env.get("peak_tflops") or {}).items() if v})
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
    add("gemmlab", env.get("gemmlab_version") or _get(results, "bench", "gemmlab_version"))
    if env.get("git_commit"):
        add("source", f"{env['git_commit'][:12]}{' (uncommitted changes)' if env.get('git_dirty') else ''}")
    add("measured", _get(results, "bench", "timestamp") or results.get("timestamp"))
    add("bench settings", settings)
    c = results.get("ceilings") or {}
    if c.get("dram_bw_Bps"):
        add("DRAM bandwidth (copy)", f"{c['dram_bw_Bps'] / 1e12:.2f} TB/s measured"
            + (f", {c['dram_bw_theoretical_Bps'] / 1e12:.2f} TB/s theoretical" if c.get("dram_bw_theoretical_Bps") else ""))
    if c.get("cublas_tflops"):
        add(f"cuBLAS at {'x'.join(map(str, c.get('cublas_shape') or CEILING_SHAPE))}",
            {k: _tf(v) for k, v in c["cublas_tflops"].items()})
    return rows


def _plain(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


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
ol.steps li{margin:.35em 0}.muted{color:#777;font-size:.85em}
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


def _md_cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _md_table(cols: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    out = ["| " + " | ".join(map(_md_cell, cols)) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(map(_md_cell, r)) + " |" for r in rows]
    return "\n".join(out)


def render(results: Mapping) -> tuple[str, str, dict[str, bytes]]:
    """(html, markdown, {figure name: PNG bytes}); the markdown refers to '<name>.png' beside it."""
    figs: dict[str, bytes] = {}
    captions: dict[str, str] = {}
    for name, caption, fn in FIGURES:
        png = fn(results)
        if png:
            figs[name], captions[name] = png, caption
    d = main_dtype(results)
    rungs, cublas = ladder(results)
    gpu = _get(results, "bench", "env", "gpu_name") or _get(results, "env", "gpu_name") or "unknown GPU"
    shape = _shape_label(rungs[0].bench) if rungs and rungs[0].bench else "?"
    pshape = next((r.profile.get("shape") for r in rungs if r.profile.get("shape")), None)
    title = f"gemmlab worklog: the GEMM ladder on {gpu}"
    intro = (f"{len(rungs)} rungs, {d}, timed at {shape} beside cuBLAS"
             + (f"; hardware counters (Nsight Compute) at {'x'.join(map(str, pshape))}" if pshape else "") + ".")
    srows = step_rows(results)
    lrows = ladder_rows(results)
    erows = env_rows(results)
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    # ---- HTML ----
    H = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         '<meta name="viewport" content="width=device-width,initial-scale=1">',
         f"<title>{_h(title)}</title><style>{_CSS}</style></head><body>",
         f"<h1>{_h(title)}</h1>", f"<p>{_h(intro)}</p>",
         '<h2 id="env">Machine and software</h2>',
         '<table class="env"><tbody>' + "".join(f"<tr><td>{_h(k)}</td><td>{_h(v)}</td></tr>" for k, v in erows)
         + "</tbody></table>"]
    H.append('<h2 id="figures">Figures</h2>')
    for name, png in figs.items():
        b64 = base64.b64encode(png).decode("ascii")
        H.append(f'<figure id="{name}"><img alt="{_h(captions[name])}" src="data:image/png;base64,{b64}">'
                 f"<figcaption>{_h(captions[name])}</figcaption></figure>")
    H.append('<h2 id="ladder">The ladder</h2>')
    H.append(_html_table(LADDER_COLUMNS, lrows, numeric=(0, 3, 4, 5, 6, 10, 11, 12, 13, 14, 16)))
    H.append('<p class="muted">ms, TFLOP/s, vs cuBLAS and % peak: the benchmark (median of timed runs, L2 flushed). '
             "DRAM, L2, conflicts, occupancy, IPC, top stall: Nsight Compute, one launch at the profile shape. "
             "FFMA share: the hot loop of the SASS (gemmlab inspect).</p>")
    H.append('<h2 id="steps">What each step changed</h2>')
    if srows:
        H.append('<ol class="steps">' + "".join(f"<li>{_h(s)}</li>" for _, s in srows) + "</ol>")
        H.append(_html_table(STEP_COLUMNS, [r for r, _ in srows]))
    else:
        H.append("<p>Fewer than two rungs: no step to explain.</p>")
    errors = results.get("errors") or {}
    if errors:
        H.append('<h2 id="errors">What could not be measured</h2><ul>'
                 + "".join(f"<li><b>{_h(k)}</b>: {_h(v)}</li>" for k, v in errors.items()) + "</ul>")
    H.append(f'<p class="muted">Generated by gemmlab report on {_h(generated)}. Rebuild from the saved results with '
             "<code>gemmlab report --from-json results.json</code>.</p></body></html>")
    html_text = "\n".join(H)

    # ---- Markdown ----
    M = [f"# {title}", "", intro, "", "## Machine and software", "", _md_table(("", ""), erows), "", "## Figures", ""]
    for name in figs:
        M += [f"![{captions[name]}]({name}.png)", "", f"*{captions[name]}*", ""]
    M += ["## The ladder", "", _md_table(LADDER_COLUMNS, lrows), "", "## What each step changed", ""]
    M += [f"{i}. {s}" for i, (_, s) in enumerate(srows, 1)] or ["Fewer than two rungs: no step to explain."]
    if srows:
        M += ["", _md_table(STEP_COLUMNS, [r for r, _ in srows])]
    if errors:
        M += ["", "## What could not be measured", ""] + [f"- **{k}**: {v}" for k, v in errors.items()]
    M += ["", f"Generated by gemmlab report on {generated}. Rebuild: `gemmlab report --from-json results.json`.", ""]
    return html_text, "\n".join(M), figs


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


# =============================================================================================
# Collecting on a GPU
# =============================================================================================


def _run_bench(kernels: Sequence[str], shapes: Sequence[tuple[int, int, int]], dtype: str, lib, repeats) -> dict:
    from ..bench.runner import DEFAULT_REPEATS, run_bench

    return run_bench(rungs=list(kernels), shapes=[tuple(s) for s in shapes], dtype=dtype, lib=lib,
                     repeats=repeats or DEFAULT_REPEATS, progress=False)


def _median_seconds(L, fn, repeats: int, warmup: int) -> float:
    """Median CUDA-event time of ``fn`` in seconds (the library's events on its current stream)."""
    from ..measure.arrays import elapsed_ms, event_pair

    times = []
    for i in range(warmup + repeats):
        s, e = event_pair(L)
        s.record()
        fn()
        e.record()
        e.synchronize()
        if i >= warmup:
            times.append(elapsed_ms(L, s, e) / 1e3)
    times.sort()
    return times[len(times) // 2]


def measure_bandwidth(lib: str | None = None, nbytes: int | None = None, repeats: int = 20) -> dict:
    """Device-to-device copy of a buffer far larger than L2: (bytes read + written) / time."""
    from ..core.driver import device_info
    from ..measure.arrays import Lib, choose_lib

    info = device_info(0)
    L = Lib(choose_lib(lib, "fp32"))
    n = max(nbytes or 0, 8 * info.l2_bytes, 1 << 30) // 4
    if L.name == "cupy":
        a = L.xp.ones(n, dtype=L.xp.float32)
        b = L.xp.empty_like(a)
        med = _median_seconds(L, lambda: L.xp.copyto(b, a), repeats, 3)
    else:
        a = L.xp.ones(n, dtype=L.xp.float32, device="cuda")
        b = L.xp.empty_like(a)
        med = _median_seconds(L, lambda: b.copy_(a), repeats, 3)
    theory = 2.0 * info.mem_clock_khz * 1e3 * info.bus_width_bits / 8 if info.mem_clock_khz and info.bus_width_bits else None
    return {"dram_bw_Bps": 2.0 * n * 4 / med, "copy_bytes": n * 4, "copy_s": med, "dram_bw_theoretical_Bps": theory}


def measure_cublas(dtype: str, shape=CEILING_SHAPE, lib: str | None = None, repeats: int = 10) -> float:
    """cuBLAS TFLOP/s at ``shape`` (median of CUDA-event timings), true FP32 for fp32."""
    from ..measure.arrays import Lib, TrueFP32, choose_lib, make_operands

    L = Lib(choose_lib(lib, dtype))
    M, N, K = shape
    ops = make_operands(L, M, N, K, dtype, seed=7, beta_nonzero=False)
    with TrueFP32(L):
        med = _median_seconds(L, lambda: L.matmul(ops.a, ops.b, out=ops.c), repeats, 2)
    return 2.0 * M * N * K / med / 1e12


def theoretical_peaks() -> dict[str, float]:
    """The peaks the benchmark compares with (envinfo.peaks: FP32 CUDA cores for fp32, dense tensor
    cores for fp16/bf16, at the maximum SM clock)."""
    from ..core.arch import peak_for_dtype, peaks
    from ..core.driver import device_info
    from ..core.dtypes import DTYPES

    info = device_info(0)
    p = peaks(tuple(info.cc), info.sm_count, info.max_clock_khz / 1000.0)
    out = {}
    for d in DTYPES:
        v = peak_for_dtype(p, d)
        if v:
            out[d] = v
    return out


def collect(dtype: str = "fp32", shape: tuple[int, int, int] = BENCH_SHAPE,
            sweep_sizes: Sequence[int] = SWEEP_SIZES, rungs: Sequence[str] | None = None,
            sweep_rungs: Sequence[str] | None = None,
            profile_shape: tuple[int, int, int] = PROFILE_SHAPE, *, lib: str | None = None,
            repeats: int | None = None, do_inspect: bool = True, do_profile: bool = True,
            other_dtypes: bool = True, ncu: str | None = None, progress: bool = True,
            on_error: Callable[[str, Exception], None] | None = None) -> dict:
    """Measure the ladder on this GPU -> the results document ``build`` reads.

    Rungs that do not take ``dtype`` (WMMA at fp32) run in their own first dtype with cuBLAS of
    that dtype beside them (``other_dtypes``). A rung that fails to inspect or profile is recorded
    with {"error": message} and the run goes on.
    """
    from ..core.deps import require_all
    from ..core.driver import NoGPUError, device_info, gpu_available
    from ..core.registry import get, kernels, landmarks

    # every extra the run needs, in one line, before the GPU question and before any measuring
    require_all("cuda.bindings.driver", "matplotlib.figure")
    if not gpu_available():
        raise NoGPUError("gemmlab report measures on a GPU; without one, rebuild a page with --from-json")
    info = device_info(0)
    arch_num = info.cc[0] * 10 + info.cc[1]
    chosen = [get(s) for s in rungs] if rungs else list(kernels())
    chosen = [r for r in chosen if arch_num >= r.min_arch]
    main = [r for r in chosen if dtype in r.dtypes]
    other: dict[str, list] = {}
    if other_dtypes:
        for r in chosen:
            if dtype not in r.dtypes:
                other.setdefault(r.dtypes[0], []).append(r)
    if sweep_rungs is None:
        sweep_rungs = [r.slug for r in landmarks()]
    sweepers = [get(s).slug for s in sweep_rungs if _known(s) and dtype in get(s).dtypes
                and arch_num >= get(s).min_arch]
    errors: dict[str, str] = {}

    def fail(what: str, exc: Exception):
        errors[what] = f"{type(exc).__name__}: {exc}"
        if on_error:
            on_error(what, exc)

    n_rungs = len(main) + sum(len(v) for v in other.values())
    total = 2 + len(other) + (n_rungs if do_inspect else 0) + ((n_rungs + 1 + len(other)) if do_profile else 0) + 1
    prog = _Progress(total, enabled=progress)
    with prog:
        prog.step("benchmark: the ladder at " + "x".join(map(str, shape)))
        bench_doc = _run_bench([r.slug for r in main], [shape], dtype, lib, repeats)
        for dt, rs in other.items():
            prog.step(f"benchmark: {dt} rungs")
            try:
                extra = _run_bench([r.slug for r in rs], [shape], dt, lib, repeats)
                bench_doc.setdefault("results", []).extend(extra.get("results", []))
            except Exception as exc:  # noqa: BLE001
                fail(f"bench {dt}", exc)
        prog.step("benchmark: size sweep")
        try:
            sweep_doc = _run_bench(sweepers, [(n, n, n) for n in sweep_sizes], dtype, lib, repeats) if sweepers else {}
        except Exception as exc:  # noqa: BLE001
            fail("sweep", exc)
            sweep_doc = {}
        insp: dict[str, dict] = {}
        if do_inspect:
            from ..analysis import inspect as _insp

            for r in main + [r for rs in other.values() for r in rs]:
                prog.step(f"inspect {r.slug}")
                dt = dtype if dtype in r.dtypes else r.dtypes[0]
                try:
                    insp[r.slug] = _insp.inspect_rung(r.slug, dtype=dt, arch=info.arch)
                except Exception as exc:  # noqa: BLE001
                    fail(f"inspect {r.slug}", exc)
                    insp[r.slug] = {"error": errors[f"inspect {r.slug}"]}
        prof: dict[str, dict] = {}
        if do_profile:
            from ..analysis.ncu import profile_cublas, profile_rung

            for r in main + [r for rs in other.values() for r in rs]:
                prog.step(f"profile {r.slug} (ncu)")
                dt = dtype if dtype in r.dtypes else r.dtypes[0]
                try:
                    prof[r.slug] = profile_rung(r.slug, profile_shape, dt, lib=lib, ncu=ncu)
                except Exception as exc:  # noqa: BLE001
                    fail(f"profile {r.slug}", exc)
                    prof[r.slug] = {"error": errors[f"profile {r.slug}"], "dtype": dt}
            for dt in [dtype] + list(other):
                key = "cublas" if dt == dtype else f"cublas_{dt}"
                prog.step(f"profile cuBLAS {dt} (ncu)")
                try:
                    prof[key] = profile_cublas(profile_shape, dt, lib=lib, ncu=ncu)
                except Exception as exc:  # noqa: BLE001
                    fail(f"profile {key}", exc)
        prog.step("ceilings: copy bandwidth, cuBLAS at 8192^3")
        ceilings: dict[str, Any] = {}
        try:
            ceilings.update(measure_bandwidth(lib))
        except Exception as exc:  # noqa: BLE001
            fail("bandwidth", exc)
        peaks = dict(_get(bench_doc, "env", "peak_tflops", default={}) or {})
        for k, v in theoretical_peaks().items():
            peaks.setdefault(k, v)
        ceilings["peak_tflops"] = peaks
        ceilings["cublas_shape"] = list(CEILING_SHAPE)
        ceilings["cublas_tflops"] = {}
        for dt in [dtype] + list(other):
            try:
                ceilings["cublas_tflops"][dt] = measure_cublas(dt, CEILING_SHAPE, lib)
            except Exception as exc:  # noqa: BLE001
                fail(f"cublas ceiling {dt}", exc)
    from .. import __version__

    env = {"gpu_name": info.name, "sm_count": info.sm_count, "cc": f"{info.cc[0]}.{info.cc[1]}", "arch": info.arch,
           "gemmlab_version": __version__, "profile_shape": list(profile_shape)}
    ncu_v = next((p.get("ncu") for p in prof.values() if p.get("ncu")), None)
    if ncu_v:
        env["ncu"] = ncu_v
    return {"dtype": dtype, "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "bench": bench_doc, "sweep": sweep_doc, "inspect": insp, "profile": prof, "ceilings": ceilings,
            "env": env, "errors": errors}


def _known(slug: str) -> bool:
    try:
        from ..core.registry import get

        get(slug)
        return True
    except ValueError:
        return False


class _Progress:
    """A rich progress bar over the collection steps (a no-op when disabled)."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.enabled, self._p, self._task = total, enabled, None, None

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._p = Progress(TextColumn("[bold]report[/bold]"), BarColumn(), MofNCompleteColumn(),
                               TimeElapsedColumn(), TextColumn("{task.description}"), transient=False)
            self._p.__enter__()
            self._task = self._p.add_task("starting", total=self.total)
        return self

    def step(self, description: str):
        if self._p is not None:
            task = self._p.tasks[0]
            if task.description != "starting":
                self._p.advance(self._task)
            self._p.update(self._task, description=description)

    def __exit__(self, *exc):
        if self._p is not None:
            self._p.update(self._task, completed=self.total, description="done")
            self._p.__exit__(*exc)
