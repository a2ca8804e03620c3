"""``gemmlab bench --suite moe``: ``gemmlab.grouped_mm`` (rung 26) on the experts of mixture-of-experts
layers against what PyTorch gives a user for the same call: ``torch._grouped_mm`` (PyTorch's grouped
GEMM), a loop of ``torch.matmul`` calls over the groups (cuBLAS, one launch per expert, on offsets
the host knows) and, where Triton is installed, a Triton grouped GEMM (measure/triton_grouped.py).
One record per shape (G experts, T tokens, N, K; core/shapes.py's MOE_SUITE): the tokens are routed
unevenly (a seeded draw, some experts getting far more tokens than others, some none), the weights
K-major (``w.transpose(-2, -1)`` of (G, N, K) weights, as torch._grouped_mm takes them).

Beside the ratios, the memory bound: every weight and activation read once and the output written
once at the measured copy bandwidth (measure/ceilings.py), and how close each call comes to it (at
many experts the weights' bytes, not the tensor cores, bound the time). And the masked form
(``gemmlab.grouped_mm_masked`` on a (G, max tokens, K) buffer of the same tokens, told the tokens
per expert on average as ``expected_rows``, as a caller knows them): its time against the
contiguous form's at equal work.

Before timing, gemmlab's result is compared with per-group float64 products (measure.verify's
tolerance); a peer's error is recorded beside it."""

from __future__ import annotations

from ..core import grouped as _grouped
from ..core.deps import MissingDependencyError
from ..core.shapes import MOE_SUITE
from ..measure import timing
from ..measure.ceilings import measure_bandwidth
from ..measure.verify import tolerance

SKEW = 1.0   # the routing's spread: token shares drawn as exp(SKEW x a standard normal), normalized


def route(torch, T: int, G: int, seed: int = 0) -> list[int]:
    """Uneven token counts of T tokens over G experts (summing to T), from ``seed``: shares drawn
    log-normally, then rounded down with the remainder given to the largest shares."""
    g = torch.Generator().manual_seed(seed)
    w = torch.exp(SKEW * torch.randn(G, generator=g, dtype=torch.float64))
    share = w / w.sum() * T
    counts = [int(x) for x in share.floor()]
    for i in torch.argsort(share - share.floor(), descending=True)[: T - sum(counts)].tolist():
        counts[i] += 1
    return counts


def cumulative(counts) -> list[int]:
    out, s = [], 0
    for c in counts:
        s += c
        out.append(s)
    return out


def _rel(x, ref) -> float:
    return float((x.double() - ref).norm() / max(float(ref.norm()), 1e-300))


def _reference_error(torch, out, a, b, ends) -> float:
    """The relative error of ``out`` against per-group float64 products, group by group (a float64
    copy of every weight at once would not fit beside them)."""
    num = den = 0.0
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            ref = a[start:end].double() @ b[g].double()
            num += float((out[start:end].double() - ref).norm()) ** 2
            den += float(ref.norm()) ** 2
        start = end
    return (num / max(den, 1e-300)) ** 0.5


def moe_records(torch, eng, shape, dtype: str, copy_Bps: float) -> list[dict]:
    """The suite's record of one shape (G, T, N, K)."""
    import gemmlab

    G, T, N, K = shape
    tdt = getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[dtype])
    counts = route(torch, T, G)
    ends = cumulative(counts)
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    a = torch.randn(T, K, device="cuda", dtype=tdt)
    b = torch.randn(G, N, K, device="cuda", dtype=tdt).transpose(-2, -1)
    out = torch.empty(T, N, device="cuda", dtype=tdt)
    itemsize = a.element_size()
    nbytes = (G * K * N + T * K + T * N) * itemsize
    rec = {"G": G, "T": T, "N": N, "K": K, "dtype": dtype, "flops": 2 * T * N * K, "bytes": nbytes,
           "counts": counts, "min_count": min(counts), "max_count": max(counts), "rel_error": {}}
    gemmlab.grouped_mm(a, b, offs, out=out, check=False)
    rec["rel_error"]["gemmlab"] = _reference_error(torch, out, a, b, ends)
    rec["tol"] = tolerance(dtype, K)
    rec["verified"] = rec["rel_error"]["gemmlab"] <= rec["tol"]
    rec["plan"] = repr(_grouped.plans()[-1])
    if not rec["verified"]:
        return [rec]
    cands = [timing.Candidate("gemmlab", lambda: gemmlab.grouped_mm(a, b, offs, out=out, check=False))]
    theirs = torch.empty_like(out)
    try:
        rec["rel_error"]["torch._grouped_mm"] = _reference_error(torch, torch._grouped_mm(a, b, offs=offs), a, b, ends)
        cands.append(timing.Candidate("torch._grouped_mm", lambda: torch._grouped_mm(a, b, offs=offs)))
    except (RuntimeError, AttributeError, TypeError) as exc:
        rec["peer_refused"] = f"torch._grouped_mm: {str(exc).splitlines()[0][:200]}"
    starts = [0] + ends[:-1]
    pieces = [(g, s, e) for g, (s, e) in enumerate(zip(starts, ends)) if e > s]

    def loop():
        for g, s, e in pieces:
            torch.matmul(a[s:e], b[g], out=theirs[s:e])
    cands.append(timing.Candidate("matmul loop", loop))
    peer = _triton_grouped(rec)
    if peer is not None:
        tout = torch.empty_like(out)
        peer.grouped_mm(a, b, offs, tout)   # its autotuner times its tiles here, untimed
        rec["rel_error"]["triton"] = _reference_error(torch, tout, a, b, ends)
        cands.append(timing.Candidate("triton", lambda: peer.grouped_mm(a, b, offs, tout)))
    # the masked form on the same tokens: a (G, max count, K) buffer, each group's rows first
    R = max(counts)
    am = torch.zeros(G, R, K, device="cuda", dtype=tdt)
    for g, s, e in pieces:
        am[g, : e - s] = a[s:e]
    cnt = torch.tensor(counts, dtype=torch.int32, device="cuda")
    outm = torch.empty(G, R, N, device="cuda", dtype=tdt)
    # the rows a group holds on average, as a caller knows them (tokens over experts), for the rule
    masked = lambda: gemmlab.grouped_mm_masked(am, b, cnt, expected_rows=-(-T // G), out=outm, check=False)  # noqa: E731
    masked()
    cands.append(timing.Candidate("gemmlab masked", masked))
    med = timed(rec, eng, cands, copy_Bps)
    if "torch._grouped_mm" in med:
        rec["vs_grouped_mm"] = med["torch._grouped_mm"] / med["gemmlab"]
    rec["vs_loop"] = med["matmul loop"] / med["gemmlab"]
    if "triton" in med:
        rec["vs_triton"] = med["triton"] / med["gemmlab"]
    rec["masked_vs_contiguous"] = med["gemmlab"] / med["gemmlab masked"]
    return [rec]


def timed(rec: dict, eng, cands: list, copy_Bps: float) -> dict:
    """The candidates timed together (``eng``), their medians (ms, returned), TFLOP/s, samples and
    share of the memory bound (``rec["bytes"]`` at the copy bandwidth) written into ``rec``."""
    run = eng.measure(cands)
    med = {name: s.median for name, s in run.samples.items()}
    rec["median_ms"] = med
    rec["tflops"] = {k: rec["flops"] / (v * 1e-3) / 1e12 for k, v in med.items()}
    bound_ms = rec["bytes"] / copy_Bps * 1e3
    rec["memory_bound_ms"] = bound_ms
    rec["of_memory_bound"] = {k: bound_ms / v for k, v in med.items()}
    rec["samples"] = {k: s.as_dict() for k, s in run.samples.items()}
    return med


def _triton_grouped(rec: dict):
    """measure/triton_grouped.py where Triton is installed, else None (the record says why)."""
    try:
        from ..measure import triton_grouped
    except (ImportError, MissingDependencyError) as exc:
        rec["triton_unavailable"] = str(exc).splitlines()[0][:200]
        return None
    return triton_grouped


def copy_bandwidth() -> dict:
    """The measured copy bandwidth the records' memory bound reads (measure/ceilings.py)."""
    return measure_bandwidth("torch")


def describe(rec: dict) -> str:
    shape = f"G {rec['G']} T {rec['T']} {rec['N']}x{rec['K']} {rec['dtype']}"
    if not rec["verified"]:
        return f"{shape}: FAILED verification, rel. error {rec['rel_error']['gemmlab']:.2e} > {rec['tol']:.1e}"
    t, text = rec["tflops"], f"{shape}: gemmlab {rec['tflops']['gemmlab']:.0f} TFLOP/s"
    if "vs_grouped_mm" in rec:
        text += f", {rec['vs_grouped_mm']:.3f}x torch._grouped_mm ({t['torch._grouped_mm']:.0f})"
    text += f", {rec['vs_loop']:.3f}x the matmul loop"
    if "vs_triton" in rec:
        text += f", {rec['vs_triton']:.3f}x triton"
    return (text + f"; {100 * rec['of_memory_bound']['gemmlab']:.0f}% of the memory bound; masked "
            f"{rec['masked_vs_contiguous']:.3f}x contiguous")


def _cell(x, fmt: str) -> str:
    return "" if x is None else format(x, fmt)


def row(r: dict) -> list[str]:
    t, mb = r["tflops"], r["of_memory_bound"]
    return [_cell(t.get("gemmlab"), ".0f"), _cell(t.get("torch._grouped_mm"), ".0f"), _cell(r.get("vs_grouped_mm"), ".3f"),
            _cell(r.get("vs_loop"), ".3f"), _cell(r.get("vs_triton"), ".3f"), f"{100 * mb['gemmlab']:.0f}%",
            _cell(100 * mb["torch._grouped_mm"] if "torch._grouped_mm" in mb else None, ".0f"),
            f"{r['masked_vs_contiguous']:.3f}"]


COLUMNS = ["G x T x N x K", "gemmlab TFLOP/s", "_grouped_mm", "vs _grouped_mm", "vs matmul loop", "vs triton",
           "% memory bound", "_grouped_mm %", "masked / contiguous"]
SHAPES = MOE_SUITE
