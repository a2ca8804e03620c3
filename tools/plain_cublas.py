"""An independent plain timing of cuBLAS, to check the benchmark's baseline against.

For every cuBLAS record of the given ``gemmlab bench --json`` files, this times the same call
(``torch.matmul(a, b, out=c)``, TF32 off for fp32) at the same shape with nothing of gemmlab's
code: torch's own events, its own L2 flush (``zero_`` of twice the L2) and its own GPU sleep
(``torch.cuda._sleep``). Two figures per record, both the median after the first calls dropped:

* paced (the check): each call after an L2 flush and about 1 ms of GPU sleep, enqueued back to
  back, so no host latency enters an interval (the host runs far ahead of the GPU) and the GPU
  works at the duty cycle the benchmark gives it. It must agree with the benchmark within 3 %.
* sustained (for the record): each call after an L2 flush only, after 2 s of the same calls
  back to back: the steady state of a training loop. Under sustained tensor-core load an H100
  meets its software power cap and lowers the SM clock (1530 MHz instead of 1980 was seen at
  fp16 4096^3), so this figure is lower than any figure taken with the GPU at full clock; the
  benchmark times every entry at the same (full-clock) duty cycle, which keeps its ratios free
  of the power state.

It writes one JSON with both figures, their differences, and the SM clock and throttle reasons
NVML saw while each set of timed calls ran, and exits 1 when a paced figure differs by more than
3 % and by more than the events' resolution (0.5 us: it decides only for kernels under ~17 us).

    python tools/plain_cublas.py benchmarks/results/h100_fp32.json ... --json plain.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

TOLERANCE = 0.03
RESOLUTION_MS = 0.0005     # CUDA events resolve about 0.5 us: below ~17 us, 3 % is finer than that
SLEEP_CYCLES = 2_000_000   # ~1 ms at the H100's 1980 MHz: the benchmark's spin


def _operands(M: int, N: int, K: int, dtype: str):
    import torch

    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(M, K, device="cuda", generator=g).to(dt)
    b = torch.randn(K, N, device="cuda", generator=g).to(dt)
    return a, b, torch.empty(M, N, device="cuda", dtype=dt)


def plain_ms(M: int, N: int, K: int, dtype: str, paced: bool, calls: int = 200, dropped: int = 10,
             sustain_s: float = 2.0) -> tuple[float, dict]:
    """(median ms, NVML clocks sampled while the timed calls run) of the paced or the sustained
    plain timing (see the module's docstring)."""
    import time

    import torch

    from gemmlab.analysis.environment import clocks

    a, b, c = _operands(M, N, K, dtype)
    scratch = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    t_end = time.perf_counter() + (0.0 if paced else sustain_s)
    while time.perf_counter() < t_end:
        for _ in range(20):
            scratch.zero_()
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for s, e in events:
        scratch.zero_()
        if paced:
            torch.cuda._sleep(SLEEP_CYCLES)
        s.record()
        torch.matmul(a, b, out=c)
        e.record()
    during = clocks(0)   # the host is far ahead: the GPU is still working through the calls
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events[dropped:]), during


def agrees(bench_ms: float, plain_ms: float) -> bool:
    """Within 3 %, or within what CUDA events can resolve at all."""
    return abs(bench_ms / plain_ms - 1.0) <= TOLERANCE or abs(bench_ms - plain_ms) <= RESOLUTION_MS


def _cublas_records(doc: dict) -> list[dict]:
    """The timed cuBLAS records of a ``gemmlab bench --json`` file or of a report's
    results.json (its benchmark and its size sweep)."""
    parts = [doc] + [doc[k] for k in ("bench", "sweep") if isinstance(doc.get(k), dict)]
    return [r for part in parts for r in part.get("results", [])
            if r.get("kernel") == "cublas" and r.get("ms") is not None]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench_json", nargs="+", help="gemmlab bench --json files, or a report's results.json")
    p.add_argument("--json", default=None)
    p.add_argument("--sustain", type=float, default=2.0, metavar="S",
                   help="seconds of back-to-back calls before the timed ones (default 2)")
    args = p.parse_args(argv)

    rows = []
    for path in args.bench_json:
        for r in _cublas_records(json.load(open(path))):
            ms, during = plain_ms(r["M"], r["N"], r["K"], r["dtype"], paced=True)
            sus_ms, sus_during = plain_ms(r["M"], r["N"], r["K"], r["dtype"], paced=False, sustain_s=args.sustain)
            diff = r["ms"] / ms - 1.0
            rows.append({"file": path, "dtype": r["dtype"], "M": r["M"], "N": r["N"], "K": r["K"],
                         "bench_ms": r["ms"], "plain_ms": ms, "difference": diff, "ok": agrees(r["ms"], ms),
                         "sm_mhz_during": during.get("sm_mhz"), "reasons_during": during.get("clock_event_reasons"),
                         "sustained_ms": sus_ms, "sustained_difference": r["ms"] / sus_ms - 1.0,
                         "sustained_sm_mhz_during": sus_during.get("sm_mhz"),
                         "sustained_reasons_during": sus_during.get("clock_event_reasons")})
            print(f"{path}: cuBLAS {r['dtype']} {r['M']}x{r['N']}x{r['K']}: bench {r['ms']:.4f} ms, "
                  f"plain {ms:.4f} ms ({100 * diff:+.1f}%) {'ok' if agrees(r['ms'], ms) else 'DIFFERS'}; "
                  f"sustained {sus_ms:.4f} ms at {sus_during.get('sm_mhz')} MHz")
    out = {"tolerance": TOLERANCE, "resolution_ms": RESOLUTION_MS, "sustain_s": args.sustain,
           "method": " ".join(__doc__.split("\n\n")[1:4]).replace("\n", " "), "rows": rows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0 if rows and all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
