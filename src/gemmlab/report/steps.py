"""Explaining a step up the ladder by the counters that moved.

For a pair of consecutive rungs, ``explain_step`` compares DRAM/L2/L1 bytes, shared-memory bank
conflicts, the FFMA share of the hot loop, load instruction counts, the top warp-stall reason,
occupancy, IPC and tensor-core use; it ranks the changes by size and writes one sentence from the
largest three. A load counter that moved is explained by the hot loop's load instructions
(inspect): loads that moved to another path (LDG -> TEX, LDS -> LDSM), wider or narrower loads of
the same kind, or more or fewer of them per math instruction."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from ..analysis.ncu import STALL_MEANING
from . import fmt
from .model import RungView, dig, ladder, stall_label


@dataclass
class Observation:
    kind: str
    score: float
    text: str


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return a / b


def _bytes_obs(kind: str, what: str, a, b, fall_why: str, rise_why: str, weight: float = 1.0) -> Observation | None:
    r = _ratio(a, b)
    if r is None or 1 / 1.3 < r < 1.3:
        return None
    if r > 1:
        return Observation(kind, weight * math.log2(r),
                           f"{what} fell {r:.1f}x, {fmt.nbytes(a)} to {fmt.nbytes(b)} ({fall_why})")
    return Observation(kind, weight * math.log2(1 / r),
                       f"{what} rose {1 / r:.1f}x, {fmt.nbytes(a)} to {fmt.nbytes(b)} ({rise_why})")


def _count_obs(kind: str, what: str, a, b, fall_why: str, rise_why: str, weight: float = 0.8,
               floor: float = 1e3) -> Observation | None:
    if a is None or b is None or max(a, b) < floor:
        return None
    r = (a + 1.0) / (b + 1.0)
    if 1 / 1.5 < r < 1.5:
        return None
    if r > 1:
        tail = "to 0" if b == 0 else ("to about zero" if b <= 0.01 * a else f"to {fmt.number(b)}")
        return Observation(kind, weight * min(math.log2(r), 8), f"{what} fell from {fmt.number(a)} {tail} ({fall_why})")
    tail = f"from 0 to {fmt.number(b)}" if a == 0 else f"from {fmt.number(a)} to {fmt.number(b)}"
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
        tail = "to 0" if b == 0 else ("to about zero" if b <= 0.01 * a else f"to {fmt.number(b)}")
        return Observation(f"conflicts_{op}", math.log2(r),
                           f"{what} fell from {fmt.number(a)} {tail}, {share} ({fall_why})")
    return Observation(f"conflicts_{op}", math.log2(1 / r),
                       f"{what} rose from {fmt.number(a)} to {fmt.number(b)}, {share} ({rise_why})")


def _uses_tensor_cores(p: dict) -> bool:
    """Whether a profiled launch does its math on the tensor cores. The tensor-pipe instruction
    counter alone cannot tell: it also counts the HFMA2.MMA register moves compilers emit (millions
    of them in the warp-shuffle rung, with the pipe all but idle); the tensor pipe's busy share can
    (a tensor-core kernel keeps it busy a large share of the time, far above the threshold)."""
    if (p.get("tensor_active_pct") or 0.0) >= 5.0:
        return True
    return not (p.get("ffma_count") or 0) and bool(p.get("tensor_inst_count"))


def _tensor_obs(pp: Mapping, cp: Mapping) -> list[Observation | None]:
    """The math moved to (or left) the tensor cores."""
    ta, tb = _uses_tensor_cores(pp), _uses_tensor_cores(cp)
    if not ta and tb:
        return [Observation("tensor", 6.0, f"the math moved to the tensor cores ({fmt.number(cp.get('tensor_inst_count'))} "
                                           f"tensor instructions, FFMA {fmt.number(pp.get('ffma_count'))} to "
                                           f"{fmt.number(cp.get('ffma_count'))})")]
    if ta and not tb:
        return [Observation("tensor", 6.0, "the math left the tensor cores")]
    return []


def _traffic_obs(pp: Mapping, cp: Mapping) -> list[Observation | None]:
    """Bytes through DRAM, L2 and L1/TEX, and shared-memory bank conflicts."""
    return [
        _bytes_obs("dram", "DRAM bytes", pp.get("dram_bytes"), cp.get("dram_bytes"),
                   "each byte fetched from DRAM now serves more FLOPs", "less reuse of what is fetched", 1.0),
        _bytes_obs("l2", "L2 bytes", pp.get("l2_bytes"), cp.get("l2_bytes"),
                   "fewer requests reach L2: loads are coalesced or reused on chip",
                   "more requests reach L2", 0.9),
        _bytes_obs("l1", "L1/TEX bytes", pp.get("l1_bytes"), cp.get("l1_bytes"),
                   "fewer global requests per FLOP", "more global/texture traffic per FLOP", 0.5),
        # bank conflicts, judged by the share of shared-memory wavefronts they add (a few thousand
        # conflicts among 1e8 wavefronts are noise; 1e9 among 1.5e9 are the story)
        _conflict_obs("ld", "shared-load bank conflicts", pp, cp,
                      "a warp's shared loads now spread over the 32 banks", "several lanes of a warp now hit the same bank"),
        _conflict_obs("st", "shared-store bank conflicts", pp, cp,
                      "a warp's shared stores now spread over the 32 banks",
                      "several lanes of a warp now store to the same bank"),
    ]


# The load instructions of the SASS (inspect's hot_loop["loads"][KIND][WIDTH]) that can carry the
# data a profile counter counts: the first of each tuple is the kind the counter counts, the others
# are the paths the same data can take instead.
GLOBAL_PATHS = ("LDG", "TEX", "LDGSTS", "TMA")
SHARED_PATHS = ("LDS", "LDSM")
LOAD_KIND_NAME = {    # what a kind is, said where the loads moved to it
    "LDG": "global loads (LDG)",
    "TEX": "the texture path, TEX fetches through the texture cache",
    "LDGSTS": "cp.async, LDGSTS copies from global to shared memory past the registers",
    "TMA": "TMA bulk copies from global to shared memory",
    "LDS": "shared loads (LDS)",
    "LDSM": "ldmatrix (LDSM), the shared -> register fragment loads for the tensor cores",
}
LOAD_KIND_SHORT = {"LDG": "global loads (LDG)", "TEX": "the texture path (TEX)", "LDGSTS": "cp.async (LDGSTS)",
                   "TMA": "TMA", "LDS": "shared loads (LDS)", "LDSM": "ldmatrix (LDSM)"}


def hot_loads(v: RungView) -> dict[str, dict[int, int]] | None:
    """{kind: {width in bits: count}} of the hot loop's load instructions (the widths with a
    nonzero count; documents from before the 8- and 16-bit widths simply lack those keys);
    None when the rung was not inspected."""
    loads = dig(v.inspect, "hot_loop", "loads")
    if not isinstance(loads, Mapping):
        return None
    out: dict[str, dict[int, int]] = {}
    for kind, widths in loads.items():
        if isinstance(widths, Mapping):
            out[kind] = {int(w): int(c) for w, c in widths.items() if str(w).isdigit() and c}
    return out


def _n(loads: Mapping, kind: str) -> int:
    return sum((loads.get(kind) or {}).values())


def _mean_width(widths: Mapping[int, int]) -> float | None:
    n = sum(widths.values())
    return sum(w * c for w, c in widths.items()) / n if n else None


def _widths_text(kind: str, widths: Mapping[int, int]) -> str:
    return " + ".join(f"{c} {kind}.{w}" for w, c in sorted(widths.items())) or f"no {kind}"


def _moved(la: Mapping, lb: Mapping, paths: tuple[str, ...], fell: bool) -> str | None:
    """The path the loads moved to (fell) or back from (rose): the other kind whose share of the
    hot loop's ``paths`` loads moved the most the other way (at least a quarter of them)."""
    ta, tb = sum(_n(la, k) for k in paths), sum(_n(lb, k) for k in paths)
    if not ta or not tb:
        return None
    best, gain = None, 0.25
    for k in paths[1:]:
        d = _n(lb, k) / tb - _n(la, k) / ta
        if (d if fell else -d) >= gain:
            best, gain = k, (d if fell else -d)
    return best


def _load_reason(paths: tuple[str, ...], prev: RungView, cur: RungView, fell: bool) -> str:
    """Why the count of ``paths[0]`` load instructions fell (or rose), from the hot loops' loads:
    a move to (or back from) another path, wider (narrower) loads of the same kind, or more/fewer
    of them per math instruction; never a cause the instructions do not show."""
    la, lb = hot_loads(prev), hot_loads(cur)
    if la is None or lb is None:
        return "the hot loops were not inspected"
    k = paths[0]
    other = _moved(la, lb, paths, fell)
    if other:
        counts = f"(hot loop: {k} {_n(la, k)} to {_n(lb, k)}, {other} {_n(la, other)} to {_n(lb, other)})"
        return (f"the loads moved to {LOAD_KIND_NAME[other]} {counts}" if fell
                else f"the loads moved back from {LOAD_KIND_SHORT[other]} to {LOAD_KIND_SHORT[k]} {counts}")
    wa, wb = _mean_width(la.get(k) or {}), _mean_width(lb.get(k) or {})
    if wa and wb and (wb >= 1.2 * wa if fell else wa >= 1.2 * wb):
        return (f"{'wider' if fell else 'narrower'} {k} loads "
                f"(hot loop: {_widths_text(k, la.get(k) or {})} to {_widths_text(k, lb.get(k) or {})})")
    ma, mb = dig(prev.inspect, "hot_loop", "math"), dig(cur.inspect, "hot_loop", "math")
    per = f" per {ma} to {mb} math instructions" if ma and mb else ""
    if ma and mb:
        ra, rb = _n(la, k) / ma, _n(lb, k) / mb
        if (ra >= 1.3 * rb) if fell else (rb >= 1.3 * ra):
            return (f"{'fewer' if fell else 'more'} {k} per math instruction in the hot loop "
                    f"({fmt.number(ra)} to {fmt.number(rb)})")
    return f"no wider or re-routed {k} in the hot loop ({_n(la, k)} to {_n(lb, k)} {k}{per})"


def _load_obs(kind: str, what: str, paths: tuple[str, ...], prev: RungView, cur: RungView) -> Observation | None:
    """A load instruction counter of the profile that moved, with the reason the SASS shows."""
    a, b = prev.profile.get(kind), cur.profile.get(kind)
    o = _count_obs(kind, what, a, b, "", "", weight=0.6)
    if o is None:
        return None
    o.text = o.text[: o.text.rindex(" (")] + f": {_load_reason(paths, prev, cur, fell=a > b)}"
    return o


def _mix_obs(prev: RungView, cur: RungView) -> list[Observation | None]:
    """The hot loop's instruction mix (inspect) and the load instruction counts."""
    obs: list[Observation | None] = []
    fa, fb = prev.ffma_share, cur.ffma_share
    if fa is not None and fb is not None and abs(fb - fa) >= 5 and not _uses_tensor_cores(cur.profile):
        if fb > fa:
            obs.append(Observation("ffma", (fb - fa) / 10, f"hot-loop FFMA share rose from {fa:.0f}% to {fb:.0f}% "
                                                           "(fewer loads and address instructions per FFMA)"))
        else:
            obs.append(Observation("ffma", (fa - fb) / 12, f"hot-loop FFMA share fell from {fa:.0f}% to {fb:.0f}% "
                                                           "(more address, load and control instructions per FFMA)"))
    obs.append(_load_obs("shared_ld_inst", "shared load instructions", SHARED_PATHS, prev, cur))
    obs.append(_load_obs("global_ld_inst", "global load instructions", GLOBAL_PATHS, prev, cur))
    return obs


def _stall_obs(sa: dict | None, sb: dict | None) -> list[Observation | None]:
    """The top warp-stall reason changed, or its share moved."""
    if not (sa and sb):
        return []
    la, lb = stall_label(sa["reason"]), stall_label(sb["reason"])
    if sa["reason"] != sb["reason"]:
        return [Observation("stall", 1.6, f"top stall moved from {la} ({100 * sa['share']:.0f}%) to {lb} "
                                          f"({100 * sb['share']:.0f}%), {STALL_MEANING.get(sb['reason'], '')}")]
    if abs(sa["share"] - sb["share"]) >= 0.15:
        verb = "fell" if sb["share"] < sa["share"] else "rose"
        return [Observation("stall", 0.9, f"{la} stalls {verb} from {100 * sa['share']:.0f}% to "
                                          f"{100 * sb['share']:.0f}% of warp time")]
    return []


def _issue_obs(pp: Mapping, cp: Mapping) -> list[Observation | None]:
    """Achieved occupancy and IPC."""
    obs: list[Observation | None] = []
    oa, ob = pp.get("achieved_occupancy"), cp.get("achieved_occupancy")
    if oa is not None and ob is not None and abs(ob - oa) >= 10:
        verb, why = (("rose", "more warps resident to hide latency") if ob > oa
                     else ("fell", "more registers or shared memory per block"))
        obs.append(Observation("occupancy", abs(ob - oa) / 25,
                               f"achieved occupancy {verb} from {oa:.0f}% to {ob:.0f}% ({why})"))
    ia, ib = pp.get("ipc"), cp.get("ipc")
    r = _ratio(ib, ia)
    if r is not None and not (1 / 1.3 < r < 1.3):
        obs.append(Observation("ipc", 0.6 * abs(math.log2(r)), f"IPC {'rose' if r > 1 else 'fell'} from {ia:.2f} to {ib:.2f}"))
    return obs


def observations(prev: RungView, cur: RungView) -> list[Observation]:
    """What moved from ``prev`` to ``cur``, largest first (ties in the order the counters are read)."""
    pp, cp = prev.profile, cur.profile
    found = (_tensor_obs(pp, cp) + _traffic_obs(pp, cp) + _mix_obs(prev, cur)
             + _stall_obs(prev.top_stall(), cur.top_stall()) + _issue_obs(pp, cp))
    obs = [o for o in found if o is not None]
    obs.sort(key=lambda o: -o.score)
    return obs


def _speed(t0: float | None, t1: float | None) -> tuple[float | None, str]:
    """(speed-up, how it is said) from the TFLOP/s of the two rungs."""
    if not (t0 and t1):
        return None, "speed not measured"
    s = t1 / t0
    if s >= 1.05:
        return s, f"{s:.2f}x faster ({fmt.tflops(t0)} to {fmt.tflops(t1)} TFLOP/s)"
    if s <= 1 / 1.05:
        return s, f"{1 / s:.2f}x slower ({fmt.tflops(t0)} to {fmt.tflops(t1)} TFLOP/s)"
    return s, f"about as fast ({fmt.tflops(t0)} to {fmt.tflops(t1)} TFLOP/s)"


def _stall_pair(s: dict | None):
    return None if not s else {"reason": s["reason"], "share": s.get("share")}


def _ref(r: RungView) -> str:
    """A rung as a sentence names it: 'coalesced (rung 2)'. Not '2. coalesced': a sentence that
    starts with a number reads as a second numbering in a list (and opens a list in Markdown)."""
    return r.slug if r.number is None else f"{r.slug} (rung {r.number})"


def explain_step(prev: RungView, cur: RungView) -> dict:
    """The measured change from ``prev`` to ``cur``: a row of deltas, the ranked observations and
    one sentence naming the largest (at most three)."""
    pp, cp = prev.profile, cur.profile
    obs = observations(prev, cur)
    t0, t1 = prev.tflops, cur.tflops
    s, speed = _speed(t0, t1)
    changed = [f"{a} to {b}" for a, b in ((prev.dtype, cur.dtype), (fmt.shape_label(prev.bench), fmt.shape_label(cur.bench)))
               if a != b and "?" not in (a, b)]
    dt_note = f" [{'; '.join(changed)}]" if changed else ""     # the dtype or the timed shape changed
    if not pp or not cp:
        body = "no counters recorded for " + (" and ".join(r.slug for r in (prev, cur) if not r.profile))
    elif obs:
        body = "; ".join(o.text for o in obs[:3])
    else:
        body = "no counter moved past the thresholds (bytes 1.3x, conflicts 1.5x, shares 5-15 points)"
    return {
        "from": prev.slug, "to": cur.slug, "speedup": s,
        "tflops": [t0, t1],
        "dram_bytes": [pp.get("dram_bytes"), cp.get("dram_bytes")],
        "l2_bytes": [pp.get("l2_bytes"), cp.get("l2_bytes")],
        "bank_conflicts_ld": [pp.get("bank_conflicts_ld"), cp.get("bank_conflicts_ld")],
        "bank_conflicts_st": [pp.get("bank_conflicts_st"), cp.get("bank_conflicts_st")],
        "ffma_share": [prev.ffma_share, cur.ffma_share],
        "math_share": [prev.math_share, cur.math_share],
        "top_stall": [_stall_pair(prev.top_stall()), _stall_pair(cur.top_stall())],
        "achieved_occupancy": [pp.get("achieved_occupancy"), cp.get("achieved_occupancy")],
        "ipc": [pp.get("ipc"), cp.get("ipc")],
        "observations": [{"kind": o.kind, "score": round(o.score, 3), "text": o.text} for o in obs],
        "sentence": f"{_ref(cur)} vs {_ref(prev)}{dt_note}: {speed}; {body}.",
    }


def predecessor(rungs: list, i: int):
    """The rung that rung ``i`` of the ladder improves on: the latest earlier rung of its dtype
    (rung 18, FP32, builds on rung 15, not on the FP16 rung 17 numbered before it); the rung just
    before it where none shares its dtype (the first tensor-core rung against the last FP32 one)."""
    same = [r for r in rungs[:i] if r.dtype == rungs[i].dtype]
    return same[-1] if same else rungs[i - 1]


def steps(results: Mapping) -> list[dict]:
    """``explain_step`` of every rung of the document's ladder against its predecessor."""
    rungs, _ = ladder(results)
    return [explain_step(predecessor(rungs, i), rungs[i]) for i in range(1, len(rungs))]
