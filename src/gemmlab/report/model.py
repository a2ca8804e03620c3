"""Reading a results document (see ``gemmlab.report``): one ``RungView`` per rung and per cuBLAS
dtype, gathered from the benchmark, ``inspect`` and the Nsight Compute profiles; the main dtype,
the peak each dtype is compared with, and the display name of a warp-stall reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..analysis.ncu import STALL_LABEL
from ..core.dtypes import get as get_dtype
from ..core.precision import get as get_precision, resolve as resolve_precision
from ..core.registry import get as get_rung
from ..measure.timing import describe_order
from . import fmt


def dig(d: Any, *path, default=None):
    """d[path0][path1]... or default when any level is missing or None."""
    for p in path:
        if not isinstance(d, Mapping) or d.get(p) is None:
            return default
        d = d[p]
    return d


def stall_label(reason: str) -> str:
    """How a warp-stall reason is written: Nsight Compute's label (``analysis.ncu.STALL_LABEL``),
    else the reason with spaces for underscores."""
    return STALL_LABEL.get(reason, reason.replace("_", " "))


def _share_pct(v: float | None) -> float | None:
    """A share given as a fraction (0.89) or a percentage (89.0) -> percent."""
    if v is None:
        return None
    return 100.0 * v if v <= 1.0 else float(v)


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
        return _share_pct(dig(self.inspect, "hot_loop", "ffma_share"))

    @property
    def math_share(self) -> tuple[str, float] | None:
        """(what the math is, its percent of the hot loop's instructions): ('FFMA', 80.0) on the
        CUDA cores; ('HMMA', 11.1) (or HGMMA, MMA) when tensor-core instructions outnumber the
        FFMA; None when the rung was not inspected."""
        h = dig(self.inspect, "hot_loop")
        if not isinstance(h, Mapping):
            return None
        tensor = {"HMMA": h.get("hmma") or 0, "HGMMA": h.get("hgmma") or 0, "MMA": h.get("other_mma") or 0}
        n_tensor, n = sum(tensor.values()), h.get("n_instructions")
        if n_tensor and n and n_tensor > (h.get("ffma") or 0):
            return "+".join(k for k, v in tensor.items() if v), 100.0 * n_tensor / n
        return None if self.ffma_share is None else ("FFMA", self.ffma_share)

    def top_stall(self) -> dict | None:
        for s in self.profile.get("stalls") or ():
            if s.get("reason") not in ("selected", "not_selected"):
                return s
        return None


def registry_info(slug: str) -> tuple[int | None, str, str, tuple[str, ...]]:
    """(number, title, summary, dtypes) of a rung; (None, slug, "", ()) for a name the registry
    does not know (cuBLAS, or a rung of another version)."""
    try:
        r = get_rung(slug)
    except (TypeError, ValueError):
        return None, slug, "", ()
    return r.number, r.title, r.summary, r.dtypes


def main_dtype(results: Mapping) -> str:
    return (dig(results, "bench", "settings", "dtype") or results.get("dtype")
            or next((e.get("dtype") for e in dig(results, "bench", "results", default=[]) if e.get("dtype")), "fp32"))


def _numbers_text(nums: list[int]) -> str:
    """[1, ..., 15] -> 'rungs 1-15'; [16] -> 'rung 16'; [1, 3, 4] -> 'rungs 1, 3-4'."""
    runs: list[list[int]] = []
    for n in sorted(nums):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"rung{'s' if len(nums) > 1 else ''} {text}"


def dtype_text(rungs: Sequence[RungView], main: str) -> str:
    """The dtypes of a list of rungs, ``main`` first: 'fp32' when all are in it, else which rungs
    are in which: 'fp32 (rungs 1-15) and fp16 (rung 16: wmma)'."""
    groups: dict[str, list[RungView]] = {}
    for r in sorted(rungs, key=lambda r: r.dtype != main):
        groups.setdefault(r.dtype, []).append(r)
    if len(groups) <= 1:
        return next(iter(groups), main)
    parts = []
    for d, rs in groups.items():
        nums = [r.number for r in rs if r.number is not None]
        who = _numbers_text(nums) if nums else ""
        if len(rs) <= 3 or len(nums) < len(rs):
            who += (": " if who else "") + ", ".join(r.slug for r in rs)
        parts.append(f"{d} ({who})")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def ladder(results: Mapping) -> tuple[list[RungView], dict[str, RungView]]:
    """(rungs in ladder order, {dtype: cuBLAS view}) from a results document."""
    entries = dig(results, "bench", "results", default=[]) or []
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
        if k in by_slug or e.get("peer"):  # peers other than cuBLAS (Triton): ``peers()``
            continue
        num, title, summary, _ = registry_info(k)
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
        num, title, summary, dts = registry_info(k)
        p = prof.get(k) or {}
        dt = p.get("dtype") or dig(insp, k, "dtype") or (dts[0] if dts else main_dtype(results))
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


def peers(results: Mapping) -> list[RungView]:
    """The peers other than cuBLAS (an autotuned Triton matmul ...), one per (peer, dtype): the
    entry at the shape of that dtype's cuBLAS view."""
    _, cublas = ladder(results)
    out: dict[tuple[str, str], RungView] = {}
    for e in dig(results, "bench", "results", default=[]) or []:
        k, dt = e.get("kernel"), e.get("dtype") or main_dtype(results)
        if not e.get("peer") or k == "cublas" or not k:
            continue
        cb = cublas.get(dt)
        at_cublas = cb is not None and (e.get("M"), e.get("N"), e.get("K")) == (
            cb.bench.get("M"), cb.bench.get("N"), cb.bench.get("K"))
        if (k, dt) not in out or at_cublas:
            out[(k, dt)] = RungView(k, None, e.get("title") or k, "a peer: what a user would pick instead", dt, e, {}, {})
    return list(out.values())


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


def env_of(results: Mapping) -> dict:
    """The environment of a results document: the benchmark's (``analysis.environment.collect()``), updated by
    the report's own."""
    env = dict(dig(results, "bench", "env", default={}) or {})
    env.update({k: v for k, v in (results.get("env") or {}).items() if v is not None})
    return env


DATASHEET_NOTE = ("a vendor datasheet may quote its peak at a lower, sustained clock, and then give a lower "
                  "number than this one")


def peak_basis(env: Mapping, dtype: str, value: float | None = None, precision: str | None = None) -> str:
    """How the peak of ``dtype`` (computed in ``precision``: None, its own) is made, from
    ``env["peaks"]`` (``core.arch.peaks``): 'N SMs x R flop/clk/SM x C MHz (where the clock comes
    from)', a tensor-core precision of FP32 operands (tf32, 3xtf32) at its share of the 16-bit rate.
    The clock's source is the document's ``clock_source``, else 'the maximum SM clock the driver
    reports' when the clock is the env's ``max_sm_clock_mhz``; 'basis not recorded' when a factor is
    missing or ``value`` (the peak the page shows) is not their product. Nothing here is a device's number."""
    p = env.get("peaks") if isinstance(env.get("peaks"), Mapping) else {}
    try:
        tensor = get_dtype(dtype).tensor_cores
        prec = get_precision(resolve_precision(dtype, precision))
    except (KeyError, ValueError):
        return f"basis not recorded (unknown dtype {dtype}" + (f" or precision {precision})" if precision else ")")
    share = 1.0
    if prec.tensor_cores and not tensor:    # FP32 operands on the tensor cores
        tensor, share = True, prec.tensor_share
    sm, clk = p.get("sm_count"), p.get("clock_mhz")
    rate = p.get("tensor_flop_per_clk_sm") if tensor else p.get("fp32_fma_per_clk_sm")
    if not (sm and clk and rate):
        return "basis not recorded in this document (no SM count, per-SM rate and clock)"
    rate = rate * share if share != 1.0 else rate
    product = sm * rate * (1 if tensor else 2) * clk * 1e6 / 1e12
    if value and abs(product - value) > 0.005 * value:
        return (f"basis not recorded: {fmt.tflops(value)} TFLOP/s is not the SMs x rate x clock of the "
                f"document's peaks ({fmt.tflops(product)})")
    how = (f"{sm} SMs x {rate:g} flop/clk/SM x {clk:.0f} MHz" if tensor
           else f"{sm} SMs x {rate} FMA/clk/SM x 2 flop/FMA x {clk:.0f} MHz")
    src = p.get("clock_source")
    if not src and env.get("max_sm_clock_mhz") and abs(float(env["max_sm_clock_mhz"]) - float(clk)) < 0.5:
        src = "the maximum SM clock the driver reports"
    return f"{how} ({src or 'clock source not recorded'})"


def peak_tflops(results: Mapping, dtype: str) -> float | None:
    """The peak ``dtype`` is compared with: the ceilings', else the benchmark's, else the report's env."""
    return (dig(results, "ceilings", "peak_tflops", dtype) or dig(results, "bench", "env", "peak_tflops", dtype)
            or dig(results, "env", "peak_tflops", dtype))


def profile_name(key: str, p: Mapping) -> str:
    """How a profile of the document is named: 'cuBLAS fp16' for 'cublas_fp16', '16. wmma' for a rung."""
    if key == "cublas" or key.startswith("cublas_"):
        dt = p.get("dtype") or key.partition("_")[2]
        return f"cuBLAS {dt}".strip()
    num = registry_info(key)[0]
    return f"{num}. {key}" if num is not None else key


def l2_bandwidth(results: Mapping) -> dict | None:
    """The L2 bandwidth a roofline can draw, and what it is: {"Bps", "basis", "source"}.

    A measured one (``ceilings["l2_bw_Bps"]``) first, basis "measured". Otherwise the highest L2
    rate of a profiled launch (its L2 bytes / its duration, from the counters), basis "lower
    bound": the L2 delivered at least that, so its bandwidth is at least that; the tightest such
    bound is the largest rate. None when neither is in the document: no number is made up."""
    measured = dig(results, "ceilings", "l2_bw_Bps")
    if measured:
        return {"Bps": float(measured), "basis": "measured",
                "source": dig(results, "ceilings", "l2_bw_source") or "measured (ceilings)"}
    best = None
    for key, p in (results.get("profile") or {}).items():
        if isinstance(p, Mapping) and p.get("l2_bytes") and p.get("duration_s"):
            rate = p["l2_bytes"] / p["duration_s"]
            if best is None or rate > best[0]:
                best = (rate, key, p)
    if best is None:
        return None
    rate, key, p = best
    pct = p.get("l2_throughput_pct")
    return {"Bps": rate, "basis": "lower bound", "kernel": key,
            "source": (f"the highest L2 rate of a profiled launch: {profile_name(key, p)}, "
                       f"{fmt.nbytes(p['l2_bytes'])} of L2 traffic in {p['duration_s'] * 1e6:.1f} us"
                       + ("" if pct is None else f", ncu's L2 throughput {pct:.1f}%"))}


REPORT_PARTS = ("bench", "sweep", "inspect", "profile", "ceilings")
BENCH_ONLY_NOTE = ("This page is built from a benchmark result (gemmlab bench --json): the hardware counters "
                   "(Nsight Compute), the SASS inspection, the size sweep and the device's measured ceilings are "
                   "not in this file, so only the ladder's timings are shown.")


def is_bench_document(doc: Any) -> bool:
    """Whether ``doc`` is a ``gemmlab bench --json`` result: a list of results and the settings."""
    return isinstance(doc, Mapping) and isinstance(doc.get("results"), list) and isinstance(doc.get("settings"), Mapping)


def results_document(doc: Any, name: str = "the document") -> dict:
    """What ``build`` reads, from a loaded JSON document: a report results document as it is (one
    part or more of ``REPORT_PARTS``); a ``gemmlab bench --json`` result wrapped as its "bench",
    with a note that the rest is not in it; anything else refused with a ValueError naming ``name``."""
    if isinstance(doc, Mapping) and any(isinstance(doc.get(k), Mapping) for k in REPORT_PARTS):
        return dict(doc)
    if is_bench_document(doc):
        return {"dtype": doc["settings"].get("dtype"), "timestamp": doc.get("timestamp"), "bench": dict(doc),
                "notes": [BENCH_ONLY_NOTE]}
    kinds = {list: "a JSON array", str: "a JSON string", bool: "a JSON boolean", int: "a JSON number",
             float: "a JSON number", type(None): "JSON null"}
    what = kinds.get(type(doc), type(doc).__name__) if not isinstance(doc, Mapping) else (
        "an object with " + (", ".join(map(repr, list(doc)[:5])) if doc else "no keys"))
    raise ValueError(f"{name} is not a report results document (gemmlab report's results.json, with "
                     f"{'/'.join(REPORT_PARTS)}) nor a gemmlab bench --json result (results + settings): it is {what}")


def timing_text(bench: Mapping) -> str:
    """How a benchmark document's times were taken, said from its settings and nothing else: the
    samples ("median of 50 timed runs"), whether L2 was flushed (``settings["timing"]["l2"]``,
    "cold" or "hot", from the timing engine; else ``settings["flush_l2"]``), the spin before each
    launch, the order of its rounds, and whether cuBLAS was timed in the same run (its results are in
    the document). What the settings do not record is said to be not recorded."""
    s = bench.get("settings") if isinstance(bench.get("settings"), Mapping) else {}
    t = s.get("timing") if isinstance(s.get("timing"), Mapping) else {}
    cublas = any(isinstance(e, Mapping) and e.get("kernel") == "cublas" for e in bench.get("results") or ())
    same_run = "cuBLAS timed in the same run" if cublas else "no cuBLAS in this run"
    if t.get("sustained_s"):   # bench --sustained: blocks of back-to-back launches, no flush
        return (f"sustained: median of {t.get('sustained_rounds')} blocks of back-to-back launches per kernel, "
                f"about {t['sustained_s']:g} s of GPU time each, in serpentine order, L2 not flushed, {same_run}")
    lo, hi = t.get("min_samples"), t.get("max_samples")
    if lo is not None or hi is not None:
        n = f"{lo} to {hi}" if lo is not None and hi is not None and lo != hi else f"{lo if lo is not None else hi}"
        parts = [f"median of {n} timed runs per kernel"]
    elif s.get("repeats") is not None:
        parts = [f"median of {s['repeats']} timed runs"]
    else:
        parts = ["number of timed runs not recorded"]
    l2 = t.get("l2")
    if l2 is None and isinstance(s.get("flush_l2"), bool):
        l2 = "cold" if s["flush_l2"] else "hot"
    # settings["flush"] is written since the flush became a read (timing.FLUSH_KIND); a cold run
    # without it flushed by a memset, whose dirty lines were written back inside the timed launches
    flushed = ("L2 flushed before each timed run (by a read: no dirty line left)" if s.get("flush") == "read"
               else "L2 flushed before each timed run (by a memset: its dirty lines written back during the launch)")
    parts.append({"cold": flushed,
                  "hot": "L2 not flushed (operands may stay in L2 from run to run)",
                  None: "whether L2 was flushed is not recorded"}.get(l2, f"L2 mode {l2!r}"))
    if t.get("spin_us"):
        parts.append(f"a {t['spin_us']:g} us GPU spin before each launch")
    if t.get("order"):
        parts.append(f"rounds in {describe_order(t['order'])}")
    elif t:
        parts.append("the order of the rounds not recorded")
    parts.append(same_run)
    return ", ".join(parts)
