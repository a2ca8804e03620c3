"""Rung 28 (decode_fp8) at its edges, checked against float64 under compute-sanitizer.

Each scaling (tensor-wise, row-wise, block-wise) with a bias, on M-thin and N-thin problems with K
off the 16-byte units and the 64-k chunks (the zero-filled copies), splits in a cluster of 3 and 8
slices, a tile of two warp rows, and a row-major B (copied K-major first). Exits 1 when a product
is wrong or nothing was checked (tools/gpu_suite.sh, stage sanitize-decode-fp8).

    python tools/check_decode_fp8.py
"""

from __future__ import annotations

import sys

import torch

import gemmlab

CASES = [  # (M, N, K), rung 28's configuration (None: the rule's), b column-major
    ((3, 1000, 2500), None, True), ((8, 4096, 4096), None, True), ((1000, 9, 1300), "n8", True),
    ((17, 700, 3000), {"SPLITK": 3, "SKCLUSTER": 1}, True), ((32, 130, 700), {"BM": 32, "BN": 128, "WK": 2, "BK": 128}, True),
    ((2000, 29, 1300), None, True), ((9, 700, 5000), {"SPLITK": 8, "SKCLUSTER": 1}, True), ((5, 300, 1000), None, False)]


def scales(mode: str, M: int, N: int, K: int):
    if mode == "tensor":
        return torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    if mode == "row":
        return torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5
    kb, nb = -(-K // 128), -(-N // 128)
    return torch.rand(M, kb, device="cuda") + 0.5, torch.rand(kb, nb, device="cuda") + 0.5


def reference(a, b, sa, sb, mode: str, bias):
    K, N = b.shape
    if mode == "block":
        ea = sa.double().repeat_interleave(128, dim=1)[:, :K]
        eb = sb.double().repeat_interleave(128, dim=0)[:K].repeat_interleave(128, dim=1)[:, :N]
        return (a.double() * ea) @ (b.double() * eb) + bias.double()
    return (a.double() * sa.double()) @ (b.double() * sb.double()) + bias.double()


def main() -> int:
    torch.manual_seed(0)
    checked, failures = 0, []
    for (M, N, K), cfg, b_col in CASES:
        a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
        b = w.t() if b_col else w.t().contiguous()
        for mode in ("tensor", "row", "block"):
            sa, sb = scales(mode, M, N, K)
            bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
            y = gemmlab.scaled_mm(a, b, sa, sb, bias=bias, kernel="decode_fp8" if cfg else "auto", config=cfg)
            ref = reference(a, b, sa, sb, mode, bias)
            err = float((y.double() - ref).norm() / ref.norm())
            checked += 1
            if not (torch.isfinite(y).all() and err < 1e-2):
                failures.append(f"{M}x{N}x{K} {cfg} {mode}: relative error {err:.2e}")
    torch.cuda.synchronize()
    for f in failures:
        print("FAILED", f)
    print(f"{checked} products checked, {len(failures)} wrong")
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
