"""The FP8 Triton peer of ``gemmlab bench --suite fp8``: a scaled matmul written with Triton's ``tl.dot``
on FP8 operands (its FP8 wgmma on sm_90), the scales applied to the FP32 accumulator before the
one rounding to bfloat16:

    out = (scale_a * a) @ (scale_b * b),  a (M, K) and b (K, N) e4m3, b K-major (``w.t()``)

with tensor-wise (one value each) or row-wise (``scale_a`` (M, 1), ``scale_b`` (1, N)) scales, as
a user writing an FP8 GEMM in Triton would. The accumulation is ``tl.dot``'s default for FP8 on this
Triton; the suite records the result's error beside the others. Tiles come from Triton's autotuner
over ``CONFIGS`` (keyed by M, N, K). This module imports Triton when imported: bench/fp8.py imports
it lazily, where Triton is installed.
"""

from __future__ import annotations

from ..core.deps import require

triton = require("triton")
tl = require("triton.language")

# 128x128 and 128x256 tiles with k tiles of 128 (one 128-byte swizzle row of FP8), as rung 25 uses,
# and a 64-row tile for few rows
CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=4, num_warps=8),
           triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=3, num_warps=8),
           triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=4, num_warps=4)]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def _scaled_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, ROW_WISE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_m[:, None] % M) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n[None, :] % N) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if ROW_WISE:
        acc *= tl.load(sa_ptr + offs_m, mask=offs_m < M, other=0.0)[:, None]
        acc *= tl.load(sb_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    else:
        acc *= tl.load(sa_ptr) * tl.load(sb_ptr)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def scaled_mm(a, b, scale_a, scale_b, out):
    """out (M, N) bf16, row-major <- (scale_a * a) @ (scale_b * b); tensor-wise scales of one value
    each, or row-wise ones, contiguous (scale_a (M, 1), scale_b (1, N))."""
    M, K = a.shape
    N = b.shape[1]
    row = scale_a.numel() > 1 or scale_b.numel() > 1

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _scaled_kernel[grid](a, b, out, scale_a, scale_b, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         out.stride(0), ROW_WISE=row)
    return out
