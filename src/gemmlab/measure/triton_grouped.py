"""The grouped Triton peer of the mixture-of-experts benchmark: the 2-D x 3-D grouped GEMM of an
experts' forward, written with Triton's ``tl.dot`` as a skilled Triton user would, to time
``gemmlab.grouped_mm`` against:

    out[s_g:e_g] = a[s_g:e_g] @ b[g]  for each group g,  a (T, K), b (G, K, N), out (T, N)

where ``offs`` (G,) int32 on the device holds the cumulative ends of the groups' rows (group g owns
rows offs[g-1]:offs[g], group 0 starts at row 0, ``offs[-1] == T``; a group may be empty). Like
the kernel it is compared with, the peer never reads ``offs`` on the host: one launch, no host
synchronization, so a CUDA graph can capture it and replay it with new offsets.

The kernel is persistent: one program per SM walks the output tiles with a stride of the program
count. Each program loads the G offsets once (padded to ``G_POW2``), counts each group's row tiles
and takes their inclusive sum (``tl.cumsum``); a tile's group is then the number of groups whose
tiles all come before it. Within a group the tiles go in the grouped ("swizzled") order of Triton's
matmul tutorial, so the B panel of an expert and the A rows of its tokens stay in L2 while they are
reused. Rows past a group's end are never stored; A, B and out are addressed through all their
strides (b as ``w.transpose(-2, -1)`` of (G, N, K) weights or plain (G, K, N)); the accumulator is
FP32 and is rounded once to out's dtype (fp16, bf16 or fp32). Tiles come from Triton's autotuner over
``CONFIGS``, keyed by N, K, G and B's layout, never by T or the offsets. This module imports Triton
when imported: the benchmark imports it lazily, where Triton is installed.
"""

from __future__ import annotations

import functools
import math

from ..core.deps import require

triton = require("triton")
tl = require("triton.language")

# the offsets vector lives in every program's registers: bounded so a large G cannot spill the mainloop
MAX_GROUPS = 1024

# 128-row tiles for experts with many tokens, 64-row ones for the few-token experts of small batches
# (a 128-row tile there would compute mostly masked rows); k tiles of 64 (one 128-byte swizzle row)
CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
           triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=8),
           triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
           triton.Config({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
           triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4)]


# keyed by B's K stride too: a K-major (w.t()) and an N-major b of one shape want different tiles
@triton.autotune(configs=CONFIGS, key=["N", "K", "G", "stride_bk"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _grouped_kernel(a_ptr, b_ptr, c_ptr, offs_ptr, T, N, K, G, stride_am, stride_ak, stride_bg, stride_bk,
                    stride_bn, stride_cm, stride_cn, G_POW2: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    # every group's row-tile count and their inclusive sum in tiles, once per program; offsets are
    # clamped to 0..T so bad ones may lose rows but never address rows outside a and out
    gidx = tl.arange(0, G_POW2)
    ends = tl.load(offs_ptr + gidx, mask=gidx < G, other=0)
    starts = tl.load(offs_ptr + gidx - 1, mask=(gidx > 0) & (gidx < G), other=0)
    ends = tl.minimum(tl.maximum(ends, 0), T)
    starts = tl.minimum(tl.maximum(starts, 0), T)
    rows = tl.maximum(ends - starts, 0)                  # padded groups (gidx >= G) have 0 rows
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles = ((rows + BLOCK_M - 1) // BLOCK_M) * num_pid_n
    cum = tl.cumsum(tiles, axis=0)
    total = tl.sum(tiles, axis=0)

    for tile in range(tl.program_id(0), total, tl.num_programs(0)):
        # the tile's group: the groups whose tiles all come before it (empty ones included), and
        # the first tile of the group (cum is non-decreasing: its largest value among those groups)
        before = cum <= tile
        group = tl.sum(before.to(tl.int32), axis=0)
        first = tl.max(tl.where(before, cum, 0), axis=0)
        start = tl.load(offs_ptr + group - 1, mask=group > 0, other=0)
        end = tl.load(offs_ptr + group)
        start = tl.minimum(tl.maximum(start, 0), T)
        end = tl.minimum(tl.maximum(end, 0), T)
        num_pid_m = tl.cdiv(end - start, BLOCK_M)

        # grouped order within the group: GROUP_M row tiles walked down one column of tiles
        local = tile - first
        per_band = GROUP_M * num_pid_n
        first_m = (local // per_band) * GROUP_M
        band_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (local % per_band) % band_rows
        pid_n = (local % per_band) // band_rows

        # 64-bit bases (T K elements of a, G K N of b may pass 2^31), 32-bit offsets within a tile;
        # rows past the group's end read its last row (valid memory, results never stored), so the
        # A loads need no row mask; columns past N read column n % N likewise
        row0 = start + pid_m * BLOCK_M
        rows_left = end - row0
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        offs_am = tl.minimum(offs_m, rows_left - 1)
        offs_bn = offs_n % N
        a_ptrs = a_ptr + row0.to(tl.int64) * stride_am + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + group.to(tl.int64) * stride_bg + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                k_left = K - k * BLOCK_K
                a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc, out_dtype=tl.float32)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk

        c = acc.to(c_ptr.dtype.element_ty)
        c_ptrs = c_ptr + row0.to(tl.int64) * stride_cm + (offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn)
        tl.store(c_ptrs, c, mask=(offs_m[:, None] < rows_left) & (offs_n[None, :] < N))


@functools.cache
def _num_sms(device_index: int | None) -> int:
    torch = require("torch")
    index = torch.cuda.current_device() if device_index is None else device_index
    return torch.cuda.get_device_properties(index).multi_processor_count


def grouped_mm(a, b, offs, out):
    """out (T, N) <- for each group g: out[s_g:e_g] = a[s_g:e_g] @ b[g]; a (T, K) and b (G, K, N)
    fp16 or bf16 with any strides, offs (G,) int32 on the device (cumulative ends, ``offs[-1] == T``),
    out (T, N) of a's dtype or fp32. One launch; the host never reads offs."""
    T, K = a.shape
    G, Kb, N = b.shape
    if Kb != K or tuple(out.shape) != (T, N) or offs.numel() != G:
        raise ValueError(f"grouped_mm: a {tuple(a.shape)}, b {tuple(b.shape)}, offs ({offs.numel()},), "
                         f"out {tuple(out.shape)} do not match")
    if offs.element_size() != 4 or offs.dtype.is_floating_point:
        raise ValueError(f"grouped_mm: offs must be int32, not {offs.dtype}")
    if G > MAX_GROUPS:
        raise ValueError(f"grouped_mm: {G} groups; this kernel takes at most {MAX_GROUPS}")
    if T == 0 or N == 0 or G == 0:
        return out
    programs = _num_sms(a.device.index)

    def grid(meta):
        # host-known bound on the tiles: each non-empty group adds at most one partial row tile
        row_tiles = min(triton.cdiv(T, meta["BLOCK_M"]) + G, T)
        return (min(programs, row_tiles * triton.cdiv(N, meta["BLOCK_N"])),)

    _grouped_kernel[grid](a, b, out, offs, T, N, K, G, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                          b.stride(2), out.stride(0), out.stride(1), G_POW2=max(16, triton.next_power_of_2(G)))
    return out


def check(a, b, offs, out) -> float:
    """The max relative error of out against a float64 per-group reference computed on the device:
    max |out - ref| / max |ref| over the rows the groups own (inf where out is not finite). Reads
    offs on the host: for verifying the peer before timing it, not for the timed path."""
    torch = require("torch")
    ends = [int(e) for e in offs.tolist()]
    last = ends[-1] if ends else 0
    ref = torch.zeros((last, out.shape[1]), dtype=torch.float64, device=out.device)
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            ref[start:end] = a[start:end].double() @ b[g].double()
        start = end
    if last == 0:
        return 0.0
    err = (out[:last].double() - ref).abs().max().item()
    scale = ref.abs().max().item()
    if not math.isfinite(err):
        return math.inf
    return err / scale if scale > 0 else err
