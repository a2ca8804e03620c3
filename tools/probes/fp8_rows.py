"""Rung 25 with row-wise scales (scale_a (M, 1), scale_b (1, N)) beside torch._scaled_mm with the
same scales and tensor-wise, timed together per shape by the one timing engine (cold L2, NVML clocks):

    python tools/probes/fp8_rows.py OUT.json [MxNxK ...]
    python tools/probes/fp8_rows.py OUT.json --random COUNT [--seed S]

Per shape: the rule's choice with row-wise scales ("row") and tensor-wise ("tensor"), the row-wise
128x128 and 128x192 tiles, fast accumulation row-wise, and torch._scaled_mm row-wise and
tensor-wise. ``--random``: COUNT shapes of M 256-8192, N and K 1024-16384 (timed.draw), seed S.
Run it on two trees (PYTHONPATH) in one session to compare two forms of the row-wise path through
torch's: the JSON says which gemmlab it imported. What the row-wise scales' place in the promoted
mainloop rests on (kernels/mainloop.cuh, ROW_SCALED; docs/journal/fp8.md)."""
from __future__ import annotations

import sys

import torch

import gemmlab
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = ["4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "128x14336x4096", "1024x4096x14336",
          "4096x7168x16384"]
TILE = {"BM": 128, "BK": 128, "WM": 64}
TILES = {"128x128": {"BN": 128, "STAGES": 6}, "128x192": {"BN": 192, "STAGES": 5}}


def candidates(M: int, N: int, K: int, plans: dict) -> list:
    a, b, st = timed.fp8_operands(M, N, K)
    sr = (torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def call(name, s, cfg=None, fast=False):
        kernel = "auto" if cfg is None else "wgmma_fp8"
        cfg = None if cfg is None else {**TILE, **cfg}
        _, plans[name] = gemmlab.scaled_mm(a, b, *s, out=out, kernel=kernel, config=cfg, use_fast_accum=fast,
                                           return_plan=True)
        return Candidate(name, lambda: gemmlab.scaled_mm(a, b, *s, out=out, kernel=kernel, config=cfg,
                                                         use_fast_accum=fast, check_finite=False))

    return ([call("row", sr), call("tensor", st), call("row fast", sr, fast=True)]
            + [call(f"row {n}", sr, c) for n, c in TILES.items()]
            + [Candidate("torch row", lambda: torch._scaled_mm(a, b, *sr, out_dtype=torch.bfloat16)),
               Candidate("torch", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16))])


def main(out_path: str, shapes: list[str]) -> None:
    timed.run_shapes(out_path, shapes, candidates, ("row",), gemmlab=gemmlab.__file__)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[1:2] == ["--random"]:
        main(args[0], timed.draw(int(args[2]), int(args[args.index("--seed") + 1]) if "--seed" in args else 0,
                                 (256, 8192)))
    else:
        main(args[0], args[1:] or SHAPES)
