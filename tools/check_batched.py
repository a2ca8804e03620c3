"""Batched matmul in one launch, checked against float64 on each of its paths: rung 21 by TMA (3-D maps,
the deferred and the TMA store epilogues, a broadcast operand's 2-D map), by the producer's thread
copy with staged stores (no 16-byte access), on the batched copies of its unaligned operands
(PACK=1), with its stream-K tail and with a fused epilogue, and rung 18 along grid.z. Small shapes, so that it runs under compute-sanitizer (tools/gpu_suite.sh,
stage sanitize-batched); exits 1 when a product is wrong or did not run in one launch.

    python tools/check_batched.py
"""

from __future__ import annotations

import sys

import torch

import gemmlab
from gemmlab.core import api
from gemmlab.core.epilogue import reference

CASES = [  # name, dtype, a shape, b shape, kernel, config, bias, activation
    ("rung 21 TMA, deferred 256-column tiles", "bfloat16", (3, 200, 128), (3, 128, 300), "wgmma_ws", {"CLUSTER": 1}, False, None),
    ("rung 21 TMA, auto's tile", "float16", (9, 130, 64), (9, 64, 72), "auto", None, False, None),
    ("rung 21 broadcast A", "bfloat16", (130, 64), (5, 64, 72), "auto", None, False, None),
    ("rung 21 thread copy, staged stores", "bfloat16", (4, 33, 60), (4, 60, 45), "auto", None, False, None),
    ("rung 21 after the batched copy (PACK=1)", "bfloat16", (4, 33, 130), (4, 130, 45), "auto", None, False, None),
    # 25 x 6 units of 2 tiles on the H100's and H200's 66 clusters (BALANCE=0: as they come, not evened
    # out): a partial last wave, split by k tiles
    ("rung 21 stream-K tail", "float16", (25, 333, 192), (25, 192, 520), "wgmma_ws", {"STREAMK": 1, "BALANCE": 0}, False,
     None),
    ("rung 21 fused bias + gelu_tanh", "bfloat16", (5, 130, 64), (5, 64, 200), "auto", None, True, "gelu_tanh"),
    ("rung 21 fused tiles held across elements", "float16", (25, 333, 192), (25, 192, 520), "wgmma_ws",
     {"BALANCE": 0, "DEFER": 1}, True, "gelu_tanh"),
    ("rung 18 grid.z", "float32", (6, 70, 40), (6, 40, 90), "auto", None, False, None),
    ("rung 18 fused bias + silu", "float32", (3, 65, 33), (3, 33, 70), "async_simt", "128x128", True, "silu"),
]


def main() -> int:
    torch.manual_seed(0)
    bad = 0
    for name, dtype, ashape, bshape, kernel, config, with_bias, activation in CASES:
        dt = getattr(torch, dtype)
        a, b = torch.randn(*ashape, device="cuda", dtype=dt), torch.randn(*bshape, device="cuda", dtype=dt)
        bias = torch.randn(bshape[-1], device="cuda", dtype=dt) if with_bias else None
        before = len(api.batch_plans())
        got = gemmlab.matmul(a, b, bias=bias, activation=activation, kernel=kernel, config=config)
        torch.cuda.synchronize()
        want = torch.matmul(a.double(), b.double()) + (bias.double() if with_bias else 0.0)
        want = reference(want, activation, torch)
        err = float((got.double() - want).norm() / want.norm())
        tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.5e-2}[dtype]
        plans = api.batch_plans()
        one = len(plans) == before + 1   # a plan of its own: every case's signature is new
        streamk = one and bool(plans[-1].variant.cfg.get("STREAMK"))
        ok = err < tol and one and not torch.isnan(got).any() and streamk == bool(isinstance(config, dict) and config.get("STREAMK"))
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: rel. error {err:.2e} (tol {tol:.0e}), "
              f"{'one launch' if one else 'NOT one launch'}{', stream-K tail' if streamk else ''}", flush=True)
    print(f"{len(CASES) - bad}/{len(CASES)} batched paths correct")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
