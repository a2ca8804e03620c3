"""The benchmark's records and statistics: one record (a dict, the JSON's ``results`` entry) per
(kernel, shape), notes, and the figures derived from the samples -- the median, min and max,
TFLOP/s = 2*M*N*K / median, the ratio to cuBLAS's median at the same shape from the same run
(> 1 means faster than cuBLAS), the ratio to the best peer (the fastest of cuBLAS, Triton, ...)
and % of the device's peak. Pure: no GPU."""

from __future__ import annotations

import statistics

from .schedule import Job

STATUSES = ("ok", "failed", "error", "skipped")


def blank_record(job: Job, dtype: str) -> dict:
    """The record of ``job`` before anything ran: status "ok", no times, no figures."""
    M, N, K = job.shape
    return {
        "kernel": job.slug, "number": job.rung.number if job.rung else 0, "peer": job.rung is None and not job.auto,
        "title": job.title, "dtype": dtype, "M": M, "N": N, "K": K,
        "requested_shape": list(job.requested), "ms": None, "ms_min": None, "ms_max": None, "times_ms": [],
        "tflops": None, "vs_cublas": None, "vs_best_peer": None, "best_peer": None, "pct_peak": None,
        "verified": None, "rel_error": None, "max_scaled_error": None, "config": {}, "note": job.note,
        "status": "ok", "samples": 0, "noise": None, "median_error": None, "stop_reason": None,
        "throttled_samples": 0, "mj": None, "watts": None, "sm_mhz": None, "gflop_per_j": None,
        "energy_vs_cublas": None, "gbps": None, "pct_copy_bw": None,
    }


def add_note(rec: dict, text: str) -> None:
    """Append ``text`` to the record's note ("; "-separated)."""
    rec["note"] = f"{rec['note']}; {text}" if rec["note"] else text


MIN_UNTHROTTLED = 5


def _basis(rec: dict) -> list[int]:
    """The indices of the samples the figures come from: those taken at full clocks when there are
    at least ``MIN_UNTHROTTLED`` of them (a round that ran into the power or thermal limit slows
    every entry of that round, so all entries drop the same rounds), else every sample. The record
    says which (``median_basis``); ``times_ms`` keeps every sample."""
    t, flags = rec["times_ms"], rec.get("throttled") or []
    every = list(range(len(t)))
    if len(flags) == len(t) and any(flags):
        full = [i for i in every if not flags[i]]
        if len(full) >= MIN_UNTHROTTLED:
            rec["median_basis"] = f"{len(full)} of {len(t)} samples, those at full clocks"
            return full
        rec["median_basis"] = f"all {len(t)} samples ({sum(flags)} at throttled clocks: too few at full clocks)"
        return every
    rec["median_basis"] = f"all {len(t)} samples"
    return every


def _median_of(blocks: list[dict], key: str) -> float | None:
    vals = [b[key] for b in blocks if b.get(key) is not None]
    return statistics.median(vals) if vals else None


def _energy(rec: dict, basis: list[int]) -> None:
    """Sustained mode's figures from the record's blocks (those of the samples in ``basis``): the
    median energy per call (mJ), board power (W) and SM clock (MHz), and GFLOP per joule from the
    energy."""
    blocks = [b for i, b in enumerate(rec.get("blocks") or []) if i in basis]
    rec["mj"], rec["watts"], rec["sm_mhz"] = (_median_of(blocks, k) for k in ("mj_per_call", "watts", "sm_mhz"))
    if rec["mj"]:
        rec["gflop_per_j"] = 2.0 * rec["M"] * rec["N"] * rec["K"] / (rec["mj"] * 1e-3) / 1e9


def bytes_moved(rec: dict, itemsize: int, beta: float = 0.0) -> int:
    """The bytes a GEMM of the record's shape must move at the least: A and B read once and C
    written once, and C read once more when ``beta`` is not 0 (the bench's beta is 0)."""
    M, N, K = rec["M"], rec["N"], rec["K"]
    return (M * K + K * N + M * N * (1 if beta == 0 else 2)) * itemsize


def summarize(records: list[dict], peak_tflops: float | None, itemsize: int | None = None,
              copy_bw: float | None = None) -> None:
    """Fill ms / ms_min / ms_max / tflops / pct_peak from times_ms, then vs_cublas and
    vs_best_peer, in place; from a sustained run's blocks also mj / watts / sm_mhz / gflop_per_j
    and energy_vs_cublas. Given the element size ``itemsize``, also gbps (``bytes_moved`` per
    median, GB/s) and, given the device's measured copy bandwidth ``copy_bw`` (bytes/s),
    pct_copy_bw: the share of it that rate is (memory-bound shapes: how near the memory's limit).

    vs_cublas compares with the cuBLAS record of the same M, N, K in ``records``; vs_best_peer
    with the fastest peer record there (cuBLAS, Triton, ...), named in best_peer.
    energy_vs_cublas is cuBLAS's energy per call over the record's (> 1: it takes less energy
    than cuBLAS, as vs_cublas > 1 is faster)."""
    for rec in records:
        basis = _basis(rec)
        t = [rec["times_ms"][i] for i in basis]
        if rec["status"] != "ok" or not t:
            continue
        rec["ms"] = statistics.median(t)
        rec["ms_min"], rec["ms_max"] = min(t), max(t)
        rec["tflops"] = 2.0 * rec["M"] * rec["N"] * rec["K"] / (rec["ms"] * 1e-3) / 1e12
        rec["pct_peak"] = 100.0 * rec["tflops"] / peak_tflops if peak_tflops else None
        if itemsize:
            rate = bytes_moved(rec, itemsize) / (rec["ms"] * 1e-3)
            rec["gbps"] = rate / 1e9
            rec["pct_copy_bw"] = 100.0 * rate / copy_bw if copy_bw else None
        _energy(rec, basis)
    shape = lambda r: (r["M"], r["N"], r["K"])  # noqa: E731
    ref = {shape(r): r for r in records if r["kernel"] == "cublas" and r.get("tflops")}
    best: dict = {}
    for r in records:
        if r.get("peer") and r.get("tflops") and (shape(r) not in best or r["tflops"] > best[shape(r)]["tflops"]):
            best[shape(r)] = r
    for rec in records:
        if not rec.get("tflops"):
            continue
        c, b = ref.get(shape(rec)), best.get(shape(rec))
        if c:
            rec["vs_cublas"] = rec["tflops"] / c["tflops"]
            if c.get("mj") and rec.get("mj"):
                rec["energy_vs_cublas"] = c["mj"] / rec["mj"]
        if b:
            rec["vs_best_peer"], rec["best_peer"] = rec["tflops"] / b["tflops"], b["kernel"]


FLOOR = 0.8   # the suites' floor: no shape below 0.8x cuBLAS (issues 9 and 10)


def suite_summary(records: list[dict]) -> dict:
    """Per kernel timed at two shapes or more (rungs, auto, the peers other than cuBLAS): the
    geometric mean of its ratios to cuBLAS over the shapes where both were timed, how many shapes
    that is, and the shapes below ``FLOOR`` (each with its ratio), worst first. Pure."""
    by: dict[str, list[dict]] = {}
    for r in records:
        if r["kernel"] != "cublas" and r.get("vs_cublas"):
            by.setdefault(r["kernel"], []).append(r)
    out = {}
    for name, recs in by.items():
        if len({(r["M"], r["N"], r["K"]) for r in recs}) < 2:
            continue
        ratios = [r["vs_cublas"] for r in recs]
        below = sorted((r for r in recs if r["vs_cublas"] < FLOOR), key=lambda r: r["vs_cublas"])
        out[name] = {"geomean_vs_cublas": statistics.geometric_mean(ratios), "shapes": len(recs),
                     "below_floor": [{"shape": [r["M"], r["N"], r["K"]], "vs_cublas": r["vs_cublas"]} for r in below],
                     "floor": FLOOR}
    return out
