"""Rung 25 with block scales (DeepSeek-V3's 1x128 of a, 128x128 of b) beside torch._scaled_mm with
tensor-wise scales, the anchor (this PyTorch exposes no block scaling), timed together per shape by
the one timing engine (cold L2, NVML clocks):

    python tools/probes/fp8_block.py OUT.json [MxNxK ...]
    python tools/probes/fp8_block.py OUT.json --random COUNT [--seed S]

Per shape: the rule's choice with scale_a M-contiguous (DeepGEMM's layout: "block") and row-major
("block rowmajor"), its 128x128 and 128x64 tiles alone and in clusters of 2, gemmlab's tensor-wise
choice and torch._scaled_mm's. ``--random``: COUNT shapes of M 256-8192, N 1024-16384 and K
1024-16384 (log-uniform; N a multiple of 16 and K of 32), seed S.

Run it on two trees (PYTHONPATH) in one session to compare two forms of the block-scaled mainloop
through the shared anchor: the JSON says which gemmlab it imported. What the block-scaled mainloop
part's design rests on (kernels/mainloop.cuh, GlMainloopBlockScaled; docs/journal/fp8.md)."""
from __future__ import annotations

import sys

import torch

import gemmlab
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = ["4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "128x14336x4096", "1024x4096x14336",
          "4096x7168x16384"]
TILES = {"128x128": {"BN": 128, "STAGES": 6}, "128x128 c2": {"BN": 128, "STAGES": 6, "CLUSTER": 2},
         "128x64": {"BN": 64, "STAGES": 8}}


def draw(count: int, seed: int, m: tuple[int, int] = (256, 8192)) -> list[str]:
    return timed.draw(count, seed, m)


def candidates(M: int, N: int, K: int, plans: dict) -> list:
    a, b, st = timed.fp8_operands(M, N, K)
    kb, nb = -(-K // 128), -(-N // 128)
    sb = torch.rand(kb, nb, device="cuda") + 0.5
    sk = (torch.rand(kb, M, device="cuda").t() + 0.5, sb)        # M-contiguous scale_a
    sk_rows = (torch.rand(M, kb, device="cuda") + 0.5, sb)       # row-major scale_a
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    call = timed.scaled_calls(a, b, out, plans)
    return ([call("block", sk), call("block rowmajor", sk_rows)]
            + [call(f"block {n}", sk, c) for n, c in TILES.items()]
            + [call("tensor", st),
               Candidate("torch", lambda: torch._scaled_mm(a, b, *st, out_dtype=torch.bfloat16))])


def main(out_path: str, shapes: list[str]) -> None:
    timed.run_shapes(out_path, shapes, candidates, ("block",), gemmlab=gemmlab.__file__)


if __name__ == "__main__":
    timed.cli(main, SHAPES, (256, 8192))
