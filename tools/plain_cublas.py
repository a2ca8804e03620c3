"""An independent plain timing of cuBLAS, to check the benchmark's baseline against.

For every cuBLAS record of the given ``gemmlab bench --json`` files, this times the same call
(``torch.matmul(a, b, out=c)``, TF32 off for fp32) at the same shape with nothing of gemmlab's
timing engine: CUDA events around a batch of back-to-back [L2 flush, call] pairs, minus the same
batch of flushes alone (the GPU never idles inside either interval, so no host latency enters
it, and every call starts with a cold L2 as in the benchmark's default), the batch repeated, the
median per call. It writes one JSON with both figures and their difference, and exits 1 when
any differs by more than 3 %.

    python tools/plain_cublas.py benchmarks/results/h100_fp32.json ... --json plain.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

TOLERANCE = 0.03


def _batch_ms(fn, batch: int) -> float:
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(batch):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def plain_ms(M: int, N: int, K: int, dtype: str, batch: int = 20, repeats: int = 7) -> float:
    import torch

    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(M, K, device="cuda", generator=g).to(dt)
    b = torch.randn(K, N, device="cuda", generator=g).to(dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    scratch = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False

    def both():
        scratch.zero_()
        torch.matmul(a, b, out=c)

    for _ in range(5):
        both()
    torch.cuda.synchronize()
    per_call = [(_batch_ms(both, batch) - _batch_ms(scratch.zero_, batch)) / batch for _ in range(repeats)]
    return statistics.median(per_call)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench_json", nargs="+")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = []
    for path in args.bench_json:
        doc = json.load(open(path))
        for r in doc["results"]:
            if r["kernel"] != "cublas" or r.get("ms") is None:
                continue
            ms = plain_ms(r["M"], r["N"], r["K"], r["dtype"])
            diff = r["ms"] / ms - 1.0
            rows.append({"file": path, "dtype": r["dtype"], "M": r["M"], "N": r["N"], "K": r["K"],
                         "bench_ms": r["ms"], "plain_ms": ms, "difference": diff, "ok": abs(diff) <= TOLERANCE})
            print(f"{path}: cuBLAS {r['dtype']} {r['M']}x{r['N']}x{r['K']}: bench {r['ms']:.4f} ms, "
                  f"plain {ms:.4f} ms ({100 * diff:+.1f}%) {'ok' if abs(diff) <= TOLERANCE else 'DIFFERS'}")
    out = {"tolerance": TOLERANCE, "method": __doc__.split("\n\n")[1].replace("\n", " "), "rows": rows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0 if rows and all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
