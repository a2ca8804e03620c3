"""``gemmlab bench --suite moe --dtype fp8``: ``gemmlab.scaled_grouped_mm`` (rung 27) on the experts of
mixture-of-experts layers in FP8 (e4m3 codes, bf16 out) against what PyTorch gives a user for the same
call: ``torch._scaled_grouped_mm`` (row-wise scales) and a loop of ``torch._scaled_mm`` over the
experts (cuBLASLt, one launch per expert, on offsets the host knows; each expert's rows padded to a
multiple of 16, which cuBLASLt's FP8 row-wise products require, the padding made untimed). The shapes and the routing are
the 16-bit suite's (bench/moe.py: tokens split unevenly, weights K-major).

gemmlab runs three ways: row-wise scales promoted into FP32 every 128 of K (torch's default
accumulation), row-wise with fast accumulation (``use_fast_accum``), and DeepSeek-V3's block scales
(1x128 per token, 128x128 per expert, promoted); and the masked form (a (G, max tokens, K) buffer of
the same tokens, row-wise, told the tokens per expert on average as ``expected_rows``) beside the
contiguous one. Each gemmlab result is compared with per-group
float64 products of the dequantized operands before it is timed; the peers' errors are recorded."""

from __future__ import annotations

from ..core import scaled_grouped as _sg
from ..measure import timing
from ..measure.verify import tolerance
from .moe import cumulative, route, timed

MINE = ("gemmlab", "gemmlab fast", "gemmlab block")


def _operands(torch, G: int, T: int, N: int, K: int):
    """FP8 tokens (T, K), K-major weights (G, K, N), row-wise and block scales (seeded)."""
    g = torch.Generator(device="cuda").manual_seed(G * 7 + K)
    e4m3 = torch.float8_e4m3fn
    a = (torch.randn(T, K, device="cuda", generator=g) * 2).to(e4m3)
    b = (torch.randn(G, N, K, device="cuda", generator=g) * 2).to(e4m3).transpose(-2, -1)
    kb, nb = -(-K // 128), -(-N // 128)
    rand = lambda *s: torch.rand(*s, device="cuda", generator=g) + 0.5   # noqa: E731
    return a, b, (rand(T), rand(G, N)), (rand(T, kb), rand(G, kb, nb))


def _dequantized(torch, a, b, sa, sb, g: int, s: int, e: int, block: bool):
    """Group g's rows s:e of a and its weights in float64, times their scales."""
    K, N = b.shape[1], b.shape[2]
    if block:
        ea = sa[s:e].double().repeat_interleave(128, dim=1)[:, :K]
        eb = sb[g].double().repeat_interleave(128, dim=0)[:K].repeat_interleave(128, dim=1)[:, :N]
        return a[s:e].double() * ea, b[g].double() * eb
    return a[s:e].double() * sa[s:e].double()[:, None], b[g].double() * sb[g].double()[None, :]


def _error(torch, out, a, b, sa, sb, ends, block: bool = False) -> float:
    """Relative error of ``out`` against per-group float64 products of the dequantized operands."""
    num = den = 0.0
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            x, w = _dequantized(torch, a, b, sa, sb, g, start, end, block)
            ref = x @ w
            num += float((out[start:end].double() - ref).norm()) ** 2
            den += float(ref.norm()) ** 2
        start = end
    return (num / max(den, 1e-300)) ** 0.5


def records(torch, eng, shape, copy_Bps: float) -> list[dict]:
    """The suite's record of one shape (G, T, N, K) in FP8."""
    G, T, N, K = shape
    counts = route(torch, T, G)
    ends = cumulative(counts)
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    a, b, (sa, sb), (ba, bb) = _operands(torch, G, T, N, K)
    bf16 = torch.bfloat16
    outs = {k: torch.empty(T, N, device="cuda", dtype=bf16) for k in MINE}
    calls = {"gemmlab": lambda: _sg.scaled_grouped_mm(a, b, sa, sb, offs, out=outs["gemmlab"], check=False,
                                                      check_finite=False),
             "gemmlab fast": lambda: _sg.scaled_grouped_mm(a, b, sa, sb, offs, out=outs["gemmlab fast"],
                                                           use_fast_accum=True, check=False, check_finite=False),
             "gemmlab block": lambda: _sg.scaled_grouped_mm(a, b, ba, bb, offs, out=outs["gemmlab block"], check=False,
                                                            check_finite=False)}
    rec = {"G": G, "T": T, "N": N, "K": K, "dtype": "fp8", "flops": 2 * T * N * K,
           "bytes": G * K * N + T * K + 2 * T * N, "counts": counts, "rel_error": {}, "plans": {}}
    for name, call in calls.items():
        call()
        rec["plans"][name] = repr(_sg.plans()[-1])
        rec["rel_error"][name] = _error(torch, outs[name], a, b, *((ba, bb) if name == "gemmlab block" else (sa, sb)),
                                        ends, name == "gemmlab block")
    # bf16's rounding and each precision's accumulation (fast: the tensor cores' over the whole K)
    rec["tol"] = {k: tolerance("bf16", K, "fp8_fast" if k == "gemmlab fast" else "fp8") for k in MINE}
    rec["verified"] = all(rec["rel_error"][k] <= rec["tol"][k] for k in MINE)
    if not rec["verified"]:
        return [rec]
    cands = [timing.Candidate(name, call) for name, call in calls.items()]
    cands += _peers(torch, rec, a, b, sa, sb, offs, ends)
    R = max(counts)   # the masked form on the same tokens, row-wise: each group's rows first in its slot
    am = torch.zeros(G, R, K, device="cuda", dtype=a.dtype)
    sam = torch.ones(G, R, device="cuda")
    start = 0
    for g, end in enumerate(ends):
        am[g, : end - start], sam[g, : end - start] = a[start:end], sa[start:end]
        start = end
    cnt = torch.tensor(counts, dtype=torch.int32, device="cuda")
    outm = torch.empty(G, R, N, device="cuda", dtype=bf16)
    cands.append(timing.Candidate("gemmlab masked", lambda: _sg.scaled_grouped_mm_masked(
        am, b, sam, sb, cnt, expected_rows=-(-T // G), out=outm, check=False, check_finite=False)))
    med = timed(rec, eng, cands, copy_Bps)
    if "torch._scaled_grouped_mm" in med:
        rec["vs_scaled_grouped_mm"] = med["torch._scaled_grouped_mm"] / med["gemmlab"]
        rec["fast_vs_scaled_grouped_mm"] = med["torch._scaled_grouped_mm"] / med["gemmlab fast"]
    if "scaled_mm loop" in med:
        rec["vs_scaled_mm_loop"] = med["scaled_mm loop"] / med["gemmlab"]
    rec["masked_vs_contiguous"] = med["gemmlab"] / med["gemmlab masked"]
    return [rec]


def _peers(torch, rec: dict, a, b, sa, sb, offs, ends) -> list:
    """torch._scaled_grouped_mm and the loop of torch._scaled_mm, each where this PyTorch runs it on
    these operands (the record says why not otherwise), with its error."""
    out = []
    refused = rec.setdefault("peer_refused", {})
    try:
        y = torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)
        rec["rel_error"]["torch._scaled_grouped_mm"] = _error(torch, y, a, b, sa, sb, ends)
        out.append(timing.Candidate("torch._scaled_grouped_mm", lambda: torch._scaled_grouped_mm(
            a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)))
    except (RuntimeError, AttributeError, TypeError, ValueError) as exc:
        refused["torch._scaled_grouped_mm"] = str(exc).splitlines()[0][:200]
    # the loop of products, each expert's rows padded to a multiple of 16 (this cuBLASLt refuses FP8
    # row-wise products of other row counts): the padded copies are made here, untimed
    starts = [0] + ends[:-1]
    pieces, at = [], 0
    for g, (s, e) in enumerate(zip(starts, ends)):
        if e > s:
            pieces.append((g, s, e, at, -(-(e - s) // 16) * 16))
            at += pieces[-1][-1]
    K, N = b.shape[1], b.shape[2]
    ap = torch.zeros(at, K, device="cuda", dtype=a.dtype)
    sap = torch.ones(at, 1, device="cuda")
    outp = torch.empty(at, N, device="cuda", dtype=torch.bfloat16)
    for g, s, e, p, n in pieces:
        ap[p:p + e - s], sap[p:p + e - s, 0] = a[s:e], sa[s:e]

    def loop():
        for g, s, e, p, n in pieces:
            torch._scaled_mm(ap[p:p + n], b[g], sap[p:p + n], sb[g][None, :], out_dtype=torch.bfloat16,
                             out=outp[p:p + n])
    try:
        loop()
        theirs = torch.empty(a.shape[0], N, device="cuda", dtype=torch.bfloat16)
        for g, s, e, p, n in pieces:
            theirs[s:e] = outp[p:p + e - s]
        rec["rel_error"]["scaled_mm loop"] = _error(torch, theirs, a, b, sa, sb, ends)
        out.append(timing.Candidate("scaled_mm loop", loop))
    except (RuntimeError, TypeError, ValueError) as exc:
        refused["scaled_mm loop"] = str(exc).splitlines()[0][:200]
    return out


def describe(rec: dict) -> str:
    shape = f"G {rec['G']} T {rec['T']} {rec['N']}x{rec['K']} fp8"
    if not rec["verified"]:
        bad = [f"{k} {rec['rel_error'][k]:.2e} > {rec['tol'][k]:.1e}" for k in MINE
               if rec["rel_error"][k] > rec["tol"][k]]
        return f"{shape}: FAILED verification, rel. error " + ", ".join(bad)
    t = rec["tflops"]
    text = (f"{shape}: gemmlab {t['gemmlab']:.0f} TFLOP/s (fast {t['gemmlab fast']:.0f}, block {t['gemmlab block']:.0f})")
    if "vs_scaled_grouped_mm" in rec:
        text += f", {rec['vs_scaled_grouped_mm']:.3f}x torch._scaled_grouped_mm ({t['torch._scaled_grouped_mm']:.0f})"
    if "vs_scaled_mm_loop" in rec:
        text += f", {rec['vs_scaled_mm_loop']:.3f}x the _scaled_mm loop"
    return text + f"; masked {rec['masked_vs_contiguous']:.3f}x contiguous"


def _cell(x, fmt: str) -> str:
    return "" if x is None else format(x, fmt)


def row(r: dict) -> list[str]:
    t = r["tflops"]
    return [_cell(t.get("gemmlab"), ".0f"), _cell(t.get("gemmlab fast"), ".0f"), _cell(t.get("gemmlab block"), ".0f"),
            _cell(t.get("torch._scaled_grouped_mm"), ".0f"), _cell(r.get("vs_scaled_grouped_mm"), ".3f"),
            _cell(r.get("vs_scaled_mm_loop"), ".3f"), f"{r['masked_vs_contiguous']:.3f}"]


COLUMNS = ["G x T x N x K", "gemmlab TFLOP/s", "fast", "block", "_scaled_grouped_mm", "vs _scaled_grouped_mm",
           "vs _scaled_mm loop", "masked / contiguous"]


def summary(records: list[dict], geomean) -> dict:
    """The suite's summary keys: geomean and least ratios against each peer."""
    out = {}
    for k in ("vs_scaled_grouped_mm", "fast_vs_scaled_grouped_mm", "vs_scaled_mm_loop", "masked_vs_contiguous"):
        out[f"geomean_{k}"] = geomean(r.get(k) for r in records)
        out[f"min_{k}"] = min((r[k] for r in records if k in r), default=None)
    return out
