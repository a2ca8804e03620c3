"""Rung 25's tiles (128x64, 128x128, 128x192, and with fast accumulation 128x256) with tensor-wise and
row-wise scales beside the rule's choice and torch._scaled_mm with the same scales and accumulation,
timed together per shape by the one timing engine (cold L2, NVML clocks):

    python tools/probes/fp8_promoted.py OUT.json [MxNxK ...]
    python tools/probes/fp8_promoted.py OUT.json --random COUNT [--seed S]

Per shape: "tensor" and "row" (the rule's choice, promoted), "tensor 128xBN" and "row 128xBN" (each
promoted tile), "fast" and "row fast" (fast accumulation's rule), "fast 128xBN" (each of its tiles,
tensor-wise), "torch", "torch row" and "torch fast". ``--random``: COUNT shapes of M
256-8192, N and K 1024-16384 (timed.draw), seed S. Run it on two trees (PYTHONPATH) in one session
to compare two forms through torch's: the JSON says which gemmlab it imported. What the promoted
tile rules rest on (core/rules.py, ``fp8_wave_tile``; docs/journal/fp8.md)."""
from __future__ import annotations

import sys

import torch

import gemmlab
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = ["4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "128x14336x4096", "1024x4096x14336",
          "4096x7168x16384"]
TILES = {"128x64": {"BN": 64, "STAGES": 8}, "128x128": {"BN": 128, "STAGES": 6}, "128x192": {"BN": 192, "STAGES": 5}}
FAST = {"128x64": {"BN": 64, "STAGES": 8, "DEFER": 0}, "128x128": {"BN": 128, "STAGES": 6, "DEFER": 0},
        "128x192": {"BN": 192, "STAGES": 5, "DEFER": 0}, "128x256": {"BN": 256, "STAGES": 4, "DEFER": 1}}


def candidates(M: int, N: int, K: int, plans: dict) -> list:
    a, b, st = timed.fp8_operands(M, N, K)
    sr = (torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    call = timed.scaled_calls(a, b, out, plans)
    return ([call("tensor", st), call("row", sr), call("fast", st, fast=True), call("row fast", sr, fast=True)]
            + [call(f"{k} {n}", s, c) for k, s in (("tensor", st), ("row", sr)) for n, c in TILES.items()]
            + [call(f"fast {n}", st, c, fast=True) for n, c in FAST.items()]
            + [Candidate("torch", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16)),
               Candidate("torch row", lambda: torch._scaled_mm(a, b, *sr, out_dtype=torch.bfloat16)),
               Candidate("torch fast", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16,
                                                                use_fast_accum=True))])


def main(out_path: str, shapes: list[str]) -> None:
    timed.run_shapes(out_path, shapes, candidates, ("tensor", "fast"), gemmlab=gemmlab.__file__)


if __name__ == "__main__":
    timed.cli(main, SHAPES, (256, 8192))
