"""An independent plain timing of cuBLAS, to check the benchmark's baseline against.

For every cuBLAS record of the given ``gemmlab bench --json`` files, this times the same call
(``torch.matmul(a, b, out=c)``, TF32 off for fp32) at the same shape with nothing of gemmlab's
timing engine: a plain loop of [L2 flush, start event, call, end event], enqueued back to back
so the GPU runs ahead of nothing (after the first iterations the host is far ahead of the GPU,
and no host latency enters an interval), every call starting with a cold L2 as in the
benchmark's default; the first iterations dropped, the median of the rest. Before the timed
calls the same call runs back to back for ``--sustain`` seconds (default 2): a benchmark runs
for seconds, and an H100 that has just woken up clocks higher than one under sustained tensor-core
load (the software power cap: the same plain timing moved by 18-20% between the two states,
benchmarks/results/h100_power_state.json), so both figures are taken in the sustained state a
training loop also runs in. It writes one JSON with both figures, their difference and the SM
clock and throttle reasons NVML saw while the timed calls ran, and exits 1 when any differs
by more than 3 %.

    python tools/plain_cublas.py benchmarks/results/h100_fp32.json ... --json plain.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

TOLERANCE = 0.03


def plain_ms(M: int, N: int, K: int, dtype: str, calls: int = 200, dropped: int = 10,
             sustain_s: float = 2.0) -> tuple[float, dict]:
    """(median ms, NVML clocks sampled while the timed calls run)."""
    import time

    import torch

    from gemmlab.analysis.environment import clocks

    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(M, K, device="cuda", generator=g).to(dt)
    b = torch.randn(K, N, device="cuda", generator=g).to(dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    scratch = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    t_end = time.perf_counter() + sustain_s
    while time.perf_counter() < t_end:   # the sustained state (see the module's docstring)
        for _ in range(20):
            scratch.zero_()
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for s, e in events:
        scratch.zero_()
        s.record()
        torch.matmul(a, b, out=c)
        e.record()
    during = clocks(0)   # the host is far ahead: the GPU is still working through the calls
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events[dropped:]), during


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench_json", nargs="+")
    p.add_argument("--json", default=None)
    p.add_argument("--sustain", type=float, default=2.0, metavar="S",
                   help="seconds of back-to-back calls before the timed ones (default 2)")
    args = p.parse_args(argv)

    rows = []
    for path in args.bench_json:
        doc = json.load(open(path))
        for r in doc["results"]:
            if r["kernel"] != "cublas" or r.get("ms") is None:
                continue
            ms, during = plain_ms(r["M"], r["N"], r["K"], r["dtype"], sustain_s=args.sustain)
            diff = r["ms"] / ms - 1.0
            rows.append({"file": path, "dtype": r["dtype"], "M": r["M"], "N": r["N"], "K": r["K"],
                         "bench_ms": r["ms"], "plain_ms": ms, "difference": diff, "ok": abs(diff) <= TOLERANCE,
                         "sm_mhz_during": during.get("sm_mhz"), "reasons_during": during.get("clock_event_reasons")})
            print(f"{path}: cuBLAS {r['dtype']} {r['M']}x{r['N']}x{r['K']}: bench {r['ms']:.4f} ms, "
                  f"plain {ms:.4f} ms ({100 * diff:+.1f}%) {'ok' if abs(diff) <= TOLERANCE else 'DIFFERS'}")
    out = {"tolerance": TOLERANCE, "sustain_s": args.sustain,
           "method": __doc__.split("\n\n")[1].replace("\n", " "), "rows": rows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0 if rows and all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
