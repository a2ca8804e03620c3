"""Rung 25 where its tiles are fewer than the SMs (small M: decoding, small batches), beside
torch._scaled_mm, timed together per shape by the one timing engine (cold L2, NVML clocks):

    python tools/probes/fp8_small_m.py OUT.json [MxNxK ...]
    python tools/probes/fp8_small_m.py OUT.json --random COUNT [--seed S] [--m LO-HI]

Per shape: the rule's choice ("auto"; "row", "fast", "block": row-wise scales, fast accumulation,
block scales), the same with WGSKIP flipped ("flipped": a consumer warpgroup whose rows all lie
past M sits the tile out, or not), its 128x128 and 128x64 tiles, and torch._scaled_mm
(tensor-wise, row-wise, fast accumulation). ``--random``: COUNT shapes of M 16-512 (or LO-HI), N
and K 1024-16384 (log-uniform; N a multiple of 16 and K of 32, as torch._scaled_mm and aligned
rows take), seed S. Its results h200_fp8_small_m*.json.gz also hold ``_sk`` columns: STREAMK=1 on a
form of rung 25 (f3bf265, not kept) that split every unit's k tiles over every SM's cluster where
the units were fewer.

What the rule's WGSKIP for M within one warpgroup rests on (core/rules.py, ``fp8_one_warpgroup``)
and where rung 25 stands on small M (docs/journal/fp8.md); one JSON, TFLOP/s per candidate."""
from __future__ import annotations

import sys

import torch

from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = ["128x4096x4096", "128x14336x4096", "16x14336x4096", "32x4096x14336", "64x8192x8192", "256x4096x4096",
          "90x7504x9744", "319x6192x4784", "148x4800x2608", "101x12752x1840", "175x4000x1040"]
PROMOTED = {"128x128": {"BN": 128, "STAGES": 6}, "128x64": {"BN": 64, "STAGES": 8}}
FAST = {"fast 128x128": {"BN": 128, "STAGES": 6, "DEFER": 0}}


def draw(count: int, seed: int, m: tuple[int, int] = (16, 512)) -> list[str]:
    return timed.draw(count, seed, m)


def candidates(M: int, N: int, K: int, plans: dict) -> list:
    a, b, st, sr, sk, out = timed.fp8_scalings(M, N, K)
    call = timed.scaled_calls(a, b, out, plans)
    cands = [call("auto", st), call("row", sr), call("fast", st, fast=True), call("block", sk)]
    for name, s, fast in (("auto", st, False), ("fast", st, True), ("block", sk, False)):   # WGSKIP flipped
        choice = plans[name].choice
        cfg = choice.rung.config(choice.config, "fp8_fast" if fast else "fp8")
        flipped = {k: v for k, v in {**cfg, "WGSKIP": 1 - cfg["WGSKIP"]}.items() if k not in timed.RUNG25_TILE}
        cands.append(call(f"{name} flipped", s, flipped, fast))
    return (cands + [call(n, st, c) for n, c in PROMOTED.items()] + [call(n, st, c, fast=True) for n, c in FAST.items()]
            + [Candidate("torch", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16)),
               Candidate("torch row", lambda: torch._scaled_mm(a, b, *sr, out_dtype=torch.bfloat16)),
               Candidate("torch fast", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16,
                                                                use_fast_accum=True))])


def main(out_path: str, shapes: list[str]) -> None:
    timed.run_shapes(out_path, shapes, candidates, ("auto", "fast", "block"))


if __name__ == "__main__":
    timed.cli(main, SHAPES, (16, 512))
