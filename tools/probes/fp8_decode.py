"""Rung 28 (decode_fp8) at decoding's shapes, beside rung 25 and torch._scaled_mm, timed together per
shape by the one timing engine (cold L2, NVML clocks):

    python tools/probes/fp8_decode.py OUT.json [MxNxK ...]
    python tools/probes/fp8_decode.py OUT.json --random COUNT [--seed S] [--m LO-HI]

Per shape: the rule's choice ("auto": tensor-wise; "row", "fast", "block": row-wise scales, fast
accumulation, block scales); rung 28 with the rule's tile changed one way at a time, where the
registry takes it ("wk2x": twice the warps along K and half the slices, "depth+1": a ring one
chunk deeper, "l2pf0", "split2x": twice the slices, where a cluster holds them, "ns16": tiles of
16 along a thin side of 17-32; above 32, "ns32": tiles of 32, "wk1": one warp along K); rung 25's two tiles with WGSKIP where M fits one warpgroup ("r25 128x128",
"r25 128x64": what auto chose before rung 28); torch._scaled_mm tensor-wise, row-wise and with
fast accumulation; and "copy", a device copy of B's bytes (its time is twice B's bytes at the
copy rate). ``--random``: COUNT shapes of M 1-32 (or LO-HI), N and K 1024-16384. One JSON, TFLOP/s
per candidate (GB/s: the operands' and C's bytes over the time)."""
from __future__ import annotations

import sys

import torch

import gemmlab
from gemmlab.core.decode import MAX_CLUSTER, fp8_rule
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = [f"{m}x{nk}" for m in (1, 4, 16, 32) for nk in ("4096x4096", "14336x4096", "4096x14336", "6144x4096")]
SHAPES += ["1x8192x8192", "8x1024x4096", "4096x16x4096"]
SHAPES += [f"{m}x{nk}" for m in (48, 64) for nk in ("4096x4096", "14336x4096", "4096x14336", "6144x4096")]
SHAPES += ["64x8192x8192", "40x14336x4096", "4096x48x4096"]


def candidates(M: int, N: int, K: int, plans: dict) -> list:
    a, b, st, sr, sk, out = timed.fp8_scalings(M, N, K)
    call = timed.scaled_calls(a, b, out, plans)

    def decode(name, s, cfg, fast=False):
        """rung 28 with ``cfg`` as a candidate named ``name``; none where the registry refuses it"""
        try:
            _, plans[name] = gemmlab.scaled_mm(a, b, *s, out=out, kernel="decode_fp8", config=cfg,
                                               use_fast_accum=fast, return_plan=True)
        except ValueError:
            return []
        return [Candidate(name, lambda: gemmlab.scaled_mm(a, b, *s, out=out, kernel="decode_fp8", config=cfg,
                                                          use_fast_accum=fast, check_finite=False))]

    cands = [call("auto", st), call("row", sr), call("fast", st, fast=True), call("block", sk)]
    rule = plans["auto"].choice
    if rule.rung.slug == "decode_fp8":
        cfg = dict(rule.config)
        split = cfg["SPLITK"]
        cands += decode("wk2x", st, {**cfg, "WK": 2 * cfg["WK"], "BK": 2 * cfg["BK"], "SPLITK": max(1, split // 2),
                                     "SKCLUSTER": int(split // 2 > 1)})
        cands += decode("depth+1", st, {**cfg, "DEPTH": cfg["DEPTH"] + 1})
        cands += decode("l2pf0", st, {**cfg, "L2PF": 0})
        if 2 * split <= MAX_CLUSTER:
            cands += decode("split2x", st, {**cfg, "SPLITK": 2 * split, "SKCLUSTER": 1})
        if 16 < min(M, N) <= 32:   # two tiles of 16 along the thin side: B read twice, converted twice
            cands += decode("ns16", st, {**cfg, "BM" if M <= N else "BN": 16})
        if min(M, N) > 32:         # the thin side of 64 as two tiles of 32 (B read twice), or one warp's
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            cands += decode("ns32", st, fp8_rule(min(M, 32), N, K, sms, None)[0] if M <= N else
                            fp8_rule(M, min(N, 32), K, sms, None)[0])
            cands += decode("wk1", st, {**cfg, "WK": 1, "BK": cfg["BK"] // 2})
    skip = int(min(M, N) <= 64)
    cands += [call("r25 128x128", st, {"BN": 128, "STAGES": 6, "WGSKIP": skip}),
              call("r25 128x64", st, {"BN": 64, "STAGES": 8, "WGSKIP": skip})]
    src = torch.empty(N * K, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    return cands + [Candidate("torch", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16)),
                    Candidate("torch row", lambda: torch._scaled_mm(a, b, *sr, out_dtype=torch.bfloat16)),
                    Candidate("torch fast", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16,
                                                                     use_fast_accum=True)),
                    Candidate("copy", lambda: dst.copy_(src))]


def main(out_path: str, shapes: list[str]) -> None:
    timed.run_shapes(out_path, shapes, candidates, ("auto",))


if __name__ == "__main__":
    timed.cli(main, SHAPES, (1, 32))
