"""The epilogue parts on each of their paths, checked against float64: rung 21 writing FP32 from
16-bit operands (kernels/ws_epi32.cuh: the TMA store from its chunk buffers, the direct 8-byte stores
where beta != 0 or no TMA store is built, rows that are not whole 16-byte pieces, a stream-K tail, a
batch through a 3-D map, a fused bias and activation), writing the other 16-bit type
(kernels/ws_epi16.cuh: the deferred TMA store, the staged stores), its own type as before, and rung
22's TF32 TMA store (the same FP32 part), rungs 19, 17 and 16 writing FP32 or the other 16-bit type
(their staged 16-byte stores, gl_store_c8, ragged edges, split-K's reduction, packed copies), and rung
24 writing FP32 (its scalar stores, its cluster split, its workspace split's reduction). Small shapes, so that it runs under compute-sanitizer
(tools/gpu_suite.sh, stage sanitize-out-dtype); exits 1 when a result is wrong.

    python tools/check_out_dtype.py
"""

from __future__ import annotations

import sys

import torch

import gemmlab
from gemmlab.core.epilogue import reference

T = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.5e-2}
CASES = [  # name, operands, C, (batch,) M, N, K, kernel, config, beta, bias, activation, precision
    ("rung 21 -> fp32, TMA store", "bf16", "fp32", (), 300, 264, 200, "wgmma_ws", None, 0.0, None, None, None),
    ("rung 21 -> fp32, direct stores (beta)", "fp16", "fp32", (), 130, 72, 100, "wgmma_ws", None, 0.5, None, None, None),
    ("rung 21 -> fp32, ragged rows", "bf16", "fp32", (), 70, 77, 64, "wgmma_ws", None, 0.0, None, None, None),
    ("rung 21 -> fp32, no TMA store built", "fp16", "fp32", (), 200, 136, 130, "wgmma_ws", {"EPI_TMA": 0}, 0.0, None,
     None, None),
    ("rung 21 -> fp32, 128x64 tiles", "bf16", "fp32", (), 260, 200, 64, "wgmma_ws",
     {"BN": 64, "STAGES": 4}, 0.0, None, None, None),
    # 192 units of 2 tiles of 128x256 on the H100's and H200's 66 clusters (BALANCE=0: as they come): a
    # partial last wave, split by k tiles
    ("rung 21 -> fp32, stream-K tail", "fp16", "fp32", (), 4000, 3000, 448, "wgmma_ws", {"STREAMK": 1, "BALANCE": 0},
     0.0, None, None, None),
    ("rung 21 -> fp32, fused bias + gelu_tanh", "bf16", "fp32", (), 190, 264, 96, "auto", None, 0.0, "fp32",
     "gelu_tanh", None),
    ("rung 21 -> fp32, a batch (3-D map)", "bf16", "fp32", (5,), 130, 72, 64, "auto", None, 0.0, None, None, None),
    ("rung 21 -> fp16 from bf16, deferred TMA store", "bf16", "fp16", (), 300, 520, 200, "wgmma_ws", None, 0.0, None,
     None, None),
    ("rung 21 -> bf16 from fp16, staged stores (beta)", "fp16", "bf16", (), 131, 67, 45, "wgmma_ws", None, -0.75, None,
     None, None),
    ("rung 21 bf16, deferred TMA store", "bf16", "bf16", (), 300, 520, 200, "wgmma_ws", None, 0.0, None, None, None),
    ("rung 22 tf32, TMA store", "fp32", "fp32", (), 300, 264, 200, "wgmma_tf32", None, 0.0, None, None, "tf32"),
    ("rung 19 -> fp32, staged 16-byte stores", "bf16", "fp32", (), 300, 264, 200, "wgmma_tma", None, 0.0, None, None,
     None),
    ("rung 19 -> fp32, ragged, beta, scalar stores", "fp16", "fp32", (), 131, 67, 45, "wgmma_tma", None, 0.5, "fp32",
     "gelu", None),
    ("rung 19 -> fp16 from bf16, split-K and its reduction", "bf16", "fp16", (), 64, 200, 2048, "wgmma_tma",
     {"SPLITK": 4}, 0.0, "same", "relu", None),
    ("rung 17 -> fp32, packed copies of an unaligned B", "fp16", "fp32", (), 200, 131, 96, "mma_sync",
     {"PACK": 1}, -0.75, None, "silu", None),
    ("rung 16 -> fp32, 32x32 tiles", "bf16", "fp32", (), 77, 100, 50, "wmma", "32x32", 0.0, None, None, None),
    ("rung 24 -> fp32, M-thin (auto)", "bf16", "fp32", (), 8, 1000, 700, "auto", None, 0.0, "same", "silu", None),
    ("rung 24 -> fp32, cluster split", "fp16", "fp32", (), 5, 600, 2000, "decode", "m8,SPLITK=4,SKCLUSTER=1", 0.5,
     None, None, None),
    ("rung 24 -> fp32, workspace split and its reduction", "bf16", "fp32", (), 600, 7, 3000, "decode",
     "n8,SPLITK=6", 0.0, "fp32", "relu", None),
]


def main() -> int:
    torch.manual_seed(0)
    bad = 0
    for name, dtype, out, batch, M, N, K, kernel, config, beta, bias_t, activation, precision in CASES:
        a = torch.randn(*batch, M, K, device="cuda", dtype=T[dtype])
        b = torch.randn(*batch, K, N, device="cuda", dtype=T[dtype])
        c = torch.randn(*batch, M, N, device="cuda", dtype=T[out])
        c0 = c.double()
        if beta == 0.0:
            c.fill_(float("nan"))   # beta == 0 reads nothing of C: NaN must not leak
        bias = torch.randn(N, device="cuda", dtype=T[dtype if bias_t == "same" else bias_t]) if bias_t else None
        if batch:
            got = gemmlab.matmul(a, b, bias=bias, activation=activation, out_dtype=T[out], kernel=kernel, config=config)
        else:
            got = gemmlab.gemm(a, b, c, beta=beta, bias=bias, activation=activation, kernel=kernel, config=config,
                               precision=precision)
        torch.cuda.synchronize()
        want = torch.matmul(a.double(), b.double()) + beta * c0 + (bias.double() if bias is not None else 0.0)
        want = reference(want, activation, torch)
        err = float((got.double() - want).norm() / want.norm())
        tol = 2e-3 if precision == "tf32" else TOL[out]
        ok = got.dtype == T[out] and err < tol and not torch.isnan(got).any()
        if isinstance(config, dict) and config.get("STREAMK"):   # the path it is here for
            ok = ok and "stream-K" in repr(gemmlab.plan(a, b, c, kernel=kernel, config=config))
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: rel. error {err:.2e} (tol {tol:.0e})", flush=True)
    print(f"{len(CASES) - bad}/{len(CASES)} epilogue-part paths correct")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
