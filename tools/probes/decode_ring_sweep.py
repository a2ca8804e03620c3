# Rung 24's ring in registers (ASYNC=0, DEPTH 2-3) against its ring in shared memory (ASYNC=1,
# DEPTH 3-6, 2 or 4 warps along K) at the decode suite's shapes (M 1, 4, 16, 32 against 4096x4096,
# 14336x4096, 4096x14336 and 6144x4096 bf16 weights), B row- and column-major, K split 1, 2 or 4 in
# a cluster; torch.matmul and auto in the same loop. Times are CUDA events around one call after a
# read of 512 MB (cold L2), medians of 30; every configuration's product is checked against float64
# (rows with a relative error above 1e-2 are counted as bad). Writes $OUT/decode_ring_sweep.json
# (benchmarks/results/h200_decode_ring_sweep.json.gz; SHAPES=MxNxK,... for other shapes).
#   python tools/probes/decode_ring_sweep.py
import itertools
import json
import os
import time
from multiprocessing import Pool

SHAPES = ([tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")] if "SHAPES" in os.environ
          else [(m, *nk) for m in (1, 4, 16, 32) for nk in ((4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096))])


def configs(M: int, bcol: bool) -> list[dict]:
    from gemmlab.core import decode
    ns = 8 if M <= 8 else 16 if M <= 16 else 32
    l2 = int(bcol)             # the rule's 256-byte fetches where B (the wide operand) runs along K
    out = [{"BM": ns, "BN": 64, "BK": 128, "WK": 4, "DEPTH": depth, "L2PF": l2, "ASYNC": 0, "SPLITK": s,
            "SKCLUSTER": int(s > 1)} for depth, s in itertools.product((2, 3), (1, 2, 4))]
    out += [{"BM": ns, "BN": 64, "BK": 32 * wk, "WK": wk, "DEPTH": depth, "L2PF": l2, "ASYNC": 1, "SPLITK": s,
             "SKCLUSTER": int(s > 1)} for depth, wk, s in itertools.product((3, 4, 6), (2, 4), (1, 2, 4))]
    return [c for c in out if not decode.constraints(c, 227 * 1024)]


def _compile(args):
    cfg, bcol = args
    from gemmlab.core.variant import Variant
    try:
        Variant.make("decode", "bf16", b_col=bcol, config=cfg).compile("sm_90a")
        return None
    except Exception as exc:           # reported, and the configuration's timing then fails too
        return f"{cfg} b_col={bcol}: {str(exc)[:200]}"


def main() -> None:
    t0 = time.time()
    todo = sorted({(json.dumps(c), b) for M, N, K in SHAPES for b in (False, True) for c in configs(M, b)})
    with Pool(os.cpu_count()) as pool:
        errors = [e for e in pool.map(_compile, [(json.loads(c), b) for c, b in todo]) if e]
    print(f"compiled {len(todo)} variants, {len(errors)} errors, {time.time() - t0:.0f} s", flush=True)
    import torch
    import gemmlab
    dev = torch.device("cuda")
    flush = torch.ones(128 * 2**20, dtype=torch.float32, device=dev)

    def timeit(fn, n=30):
        for _ in range(3):
            fn()
        ts = []
        for _ in range(n):
            flush.sum()
            s, e = torch.cuda.Event(True), torch.cuda.Event(True)
            s.record(); fn(); e.record(); e.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        ts.sort()
        return ts[len(ts) // 2]

    def copy_rate() -> float:        # bytes read + written per second by a 1 GiB device copy
        x = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
        y = torch.empty_like(x)
        return 2 * x.numel() / (timeit(lambda: y.copy_(x), 20) * 1e-6)

    bw = copy_rate()
    res = {"gpu": torch.cuda.get_device_name(), "copy_Bps": bw, "rows": []}
    for (M, N, K), bcol in itertools.product(SHAPES, (False, True)):
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        b = (torch.randn(N, K, device=dev, dtype=torch.bfloat16).t() if bcol
             else torch.randn(K, N, device=dev, dtype=torch.bfloat16))
        c = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
        ref = torch.matmul(a.double(), b.double())
        tt = timeit(lambda: torch.matmul(a, b, out=c))
        ta = timeit(lambda: gemmlab.gemm(a, b, c))
        rows = []
        for cfg in configs(M, bcol):
            c.fill_(float("nan"))
            gemmlab.gemm(a, b, c, kernel="decode", config=cfg)
            err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
            rows.append((timeit(lambda: gemmlab.gemm(a, b, c, kernel="decode", config=cfg)), err, cfg))
        rows.sort(key=lambda r: r[0])
        bad = sum(1 for r in rows if not r[1] < 1e-2)
        print(f"{M}x{N}x{K} {'Bc' if bcol else 'Br'} torch {tt:.2f} us, auto {ta:.2f} us, best {rows[0][0]:.2f} us "
              f"{rows[0][2]}; bad {bad}", flush=True)
        res["rows"].append({"shape": [M, N, K], "b_col": bcol, "torch_us": tt, "auto_us": ta, "rows": rows})
    json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "decode_ring_sweep.json"), "w"))


if __name__ == "__main__":
    main()
